"""The CLI's pure parts: gpuctl's tables, the other output formats, finding the service, errors,
and how files are split into requests with their problems pointed back at the files."""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from jupyter_gpupool.cli import apply_global_options, build_parser
from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.commands.connection import (
    EXIT_UNREACHABLE,
    EXIT_USER,
    CommandError,
    connection,
    explain,
    service_url,
)
from jupyter_gpupool.commands.describe import format_pool
from jupyter_gpupool.commands.documents import Chunk, build_request, split_documents, wanted
from jupyter_gpupool.commands.get import NODE_COLUMNS, POOL_COLUMNS, gpu_hours_columns, job_columns
from jupyter_gpupool.commands.label import outside_prefix, parse_labels
from jupyter_gpupool.commands.output import render
from jupyter_gpupool.core.words.reports import ALL_POOLS, EACH_USER, quota_rows
from jupyter_gpupool.core.words.tables import age, format_table

POOLS = [
    {"name": "training-pool", "status": "active", "gpu_total": 16, "gpu_used": 12,
     "gpu_free": 4, "node_count": 2, "gpu_types": ["A100-80G"], "description": "=cmd()"},
    {"name": "inference-pool", "status": "active", "gpu_total": 8, "gpu_used": 4,
     "gpu_free": 4, "node_count": 2, "gpu_types": ["A10-24G"], "description": None},
    {"name": "default", "status": "empty", "gpu_total": 0, "gpu_used": 0, "gpu_free": 0,
     "node_count": 0, "gpu_types": [], "description": None},
]  # fmt: skip


def test_get_pools_is_gpuctls_table():
    assert render("table", POOLS, POOL_COLUMNS) == (
        "POOL NAME       STATUS  GPU TOTAL  GPU USED  GPU FREE  NODE COUNT\n"
        "training-pool   active  16         12        4         2\n"
        "inference-pool  active  8          4         4         2\n"
        "default         empty   0          0         0         0\n"
    )


def test_tables_fit_their_widest_cell_and_show_nothing_as_a_dash():
    assert format_table(["A", "LONG HEADER"], [["wide cell", None], ["x", ["p", "q"]]]) == (
        "A          LONG HEADER\nwide cell  -\nx          p,q\n"
    )
    assert format_table(["ONLY", "HEADER"], []) == "ONLY  HEADER\n"


def test_wide_adds_columns_and_json_yaml_keep_every_field():
    wide = render("wide", POOLS, POOL_COLUMNS).splitlines()
    assert wide[0].split("  ")[0] == "POOL NAME" and "GPU TYPES" in wide[0]
    assert "A100-80G" in wide[1]
    assert json.loads(render("json", POOLS, POOL_COLUMNS)) == POOLS
    assert yaml.safe_load(render("yaml", POOLS, POOL_COLUMNS)) == POOLS
    raw = {"node": "n", "labels": {"a": "b"}}
    assert json.loads(render("json", [], (), raw=raw)) == raw


def test_csv_has_json_keys_raw_values_and_no_formulas():
    rows = list(csv.reader(io.StringIO(render("csv", POOLS, POOL_COLUMNS))))
    assert rows[0][:6] == ["name", "status", "gpu_total", "gpu_used", "gpu_free", "node_count"]
    assert rows[1][:6] == ["training-pool", "active", "16", "12", "4", "2"]
    assert "'=cmd()" in rows[1]  # a spreadsheet would run =cmd() as a formula
    assert rows[3][rows[0].index("gpu_types")] == ""
    servers = [{"user": "a", "server": "", "created": "2025-01-01T00:00:00Z", "gpus": 2}]
    rows = list(csv.reader(io.StringIO(render("csv", servers, job_columns(time.time())))))
    assert rows[1][rows[0].index("created")] == "2025-01-01T00:00:00Z"  # the time, not an age


def test_get_jobs_wide_says_what_the_gpus_do_and_csv_gives_the_numbers():
    """``-o wide`` adds GPU UTIL, GPU MEM and IDLE in words (``-`` when not measured or not
    idle); the default table stays gpuctl's; CSV has the raw numbers and times."""
    now = 1_700_000_000.0
    base = {
        "server": "",
        "pool": "training-pool",
        "node": "gpu-node-1",
        "state": "running",
        "over_quota": False,
        "created": "2023-11-14T21:00:00Z",
        "namespace": "default",
    }
    servers = [
        {**base, "user": "alice", "name": "jupyter-alice", "gpus": 2, "gpu_utilization": 50.0,
         "gpu_utilization_max": 90.0, "gpu_memory_used_mib": 31744,
         "gpu_memory_total_mib": 163840, "idle": None},
        {**base, "user": "bob", "name": "jupyter-bob", "gpus": 1, "gpu_utilization": 1.0,
         "gpu_utilization_max": 1.0, "gpu_memory_used_mib": 0, "gpu_memory_total_mib": 81920,
         "idle": {"since": now - 3900, "warned": True, "stops_at": now + 3300,
                  "action": "stop"}},
        {**base, "user": "carol", "name": "jupyter-carol", "gpus": 1, "gpu_utilization": 0.0,
         "gpu_utilization_max": 0.0, "gpu_memory_used_mib": 0, "gpu_memory_total_mib": 81920,
         "idle": {"since": now - 600, "warned": False, "stops_at": None, "action": "report"}},
        {**base, "user": "dave", "name": "jupyter-dave", "gpus": 1, "gpu_utilization": None,
         "gpu_utilization_max": None, "gpu_memory_used_mib": None,
         "gpu_memory_total_mib": None, "idle": None},
    ]  # fmt: skip
    columns = job_columns(now)
    lines = render("wide", servers, columns).splitlines()
    header, *rows = [re.split(r"\s{2,}", line) for line in lines]
    wide = [dict(zip(header, r, strict=True)) for r in rows]
    assert [(r["GPU UTIL"], r["GPU MEM"], r["IDLE"]) for r in wide] == [
        ("50%", "31.0/160 GiB", "-"),
        ("1%", "0.0/80 GiB", "idle 1h05m, stops in 55m"),
        ("0%", "0.0/80 GiB", "idle 10m (report)"),
        ("-", "-", "-"),
    ]
    table_header = render("table", servers, columns).splitlines()[0].split()
    assert "UTIL" not in table_header and table_header[-1] == "AGE"
    records = list(csv.DictReader(io.StringIO(render("csv", servers, columns))))
    assert {k: records[1][k] for k in records[1] if k.startswith(("gpu_", "idle_"))} == {
        "gpu_utilization": "1.0",
        "gpu_utilization_max": "1.0",
        "gpu_memory_used_mib": "0",
        "gpu_memory_total_mib": "81920",
        "idle_since": str(now - 3900),
        "idle_action": "stop",
        "idle_stops_at": str(now + 3300),
    }
    assert records[3]["gpu_utilization"] == records[3]["idle_since"] == ""


def test_nodes_show_their_status_reasons():
    node = {"name": "n1", "status": "Ready,SchedulingDisabled", "gpu_total": 8, "gpu_used": 0,
            "gpu_free": 8, "gpu_type": "A100", "pool": "p",
            "reasons": ["cordoned (scheduling disabled)", "disk pressure"]}  # fmt: skip
    line = render("table", [node], NODE_COLUMNS).splitlines()[1]
    assert line.endswith("p     cordoned (scheduling disabled); disk pressure")


def test_age_is_kubectls():
    now = 1_700_000_000.0
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 42))
    assert age(stamp, now) == "42s"
    assert age(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 3 * 3600)), now) == "3h"
    assert age(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 9 * 86400)), now) == "9d"
    assert age(None, now) == age("garbage", now) == "-"


def test_quota_rows_from_the_api_answer():
    quotas = {
        "pools": {
            "training-pool": {
                "borrowing": True,
                "user_default": {"guaranteed": 0, "limit": 4},
                "groups": {"ml": {"guaranteed": 8, "limit": 16, "used": 10, "reserved": 1}},
                "users": {"zoe": {"guaranteed": 2, "limit": None, "used": 1, "reserved": 0}},
            },
            "bare": None,
        },
        "caps": {"groups": {"ml": {"gpu": 20, "used": 10, "reserved": 1}}, "users": {},
                 "default": {"gpu": 4}},
    }  # fmt: skip
    rows = quota_rows(quotas, {"training-pool": {"user:bob": 3, "user:zoe": 1, "group:ml": 10}})
    table = [(r["pool"], r["subject"], r["guaranteed"], r["limit"], r["used"], r["borrowed"])
             for r in rows]  # fmt: skip
    assert table == [
        ("training-pool", "group:ml", 8, 16, 10, 2),
        ("training-pool", "user:zoe", 2, None, 1, 0),
        ("training-pool", "user:bob", 0, 4, 3, 3),  # under the per-user default
        ("training-pool", EACH_USER, 0, 4, None, None),
        (ALL_POOLS, "group:ml", None, 20, 10, None),
        (ALL_POOLS, EACH_USER, None, 4, None, None),
    ]


def test_describe_pool_reads_like_gpuctls():
    pool = {
        **POOLS[0],
        "gpu_available": 4, "largest_free_block": 4, "schedulable_nodes": 2,
        "server_count": 1, "pending_servers": 0, "placement": "binpack",
        "limits": {"max_gpus": 8, "min_gpus": 0, "allowed_gpus": []},
        "nodes": [{"name": "gpu-node-1", "status": "Ready", "gpu_total": 8, "gpu_used": 8,
                   "gpu_free": 0, "gpu_type": "A100-80G", "pool": "training-pool",
                   "reasons": []}],
        "servers": [{"user": "alice", "server": "", "pool": "training-pool",
                     "node": "gpu-node-1", "gpus": 8, "state": "running", "over_quota": False,
                     "created": None}],
        "quota": {"borrowing": False, "user_default": None, "users": {},
                  "groups": {"ml": {"guaranteed": 8, "limit": None, "used": 8, "reserved": 0}}},
    }  # fmt: skip
    text = format_pool(pool, time.time())
    assert text.startswith("Name:               training-pool\n")
    assert "Limits:             at most 8 GPUs\n" in text
    assert "\nNodes:\n  NODE NAME   STATUS" in text and "  gpu-node-1  Ready   8" in text
    assert "\nServers:\n  USER   SERVER     POOL" in text
    assert "\nQuota:\n  SUBJECT   GUARANTEED  LIMIT  USED" in text


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/services/gpupool/"),
        ("127.0.0.1:8000/", "http://127.0.0.1:8000/services/gpupool/"),
        ("https://hub.example.org/hub/", "https://hub.example.org/services/gpupool/"),
        ("https://x.org/jupyter/", "https://x.org/jupyter/services/gpupool/"),
        ("https://x.org/services/gpupool", "https://x.org/services/gpupool/"),
        ("https://x.org/jupyter/services/gpus/", "https://x.org/jupyter/services/gpus/"),
    ],
)
def test_service_url_accepts_the_hubs_url_or_the_services(given, expected):
    assert service_url(given) == expected


def _args(**kw):
    base = {"url": None, "token": None, "token_file": None, "state_dir": None}
    return argparse.Namespace(**{**base, **kw})


def test_where_the_url_and_token_come_from(tmp_path):
    env = {"GPUPOOL_URL": "http://env:1", "GPUPOOL_TOKEN": "env-token"}
    assert connection(_args(), env) == ("http://env:1/services/gpupool/", "env-token")
    assert connection(_args(url="http://flag:2", token="t"), env) == (
        "http://flag:2/services/gpupool/",
        "t",
    )
    (tmp_path / "url").write_text("http://127.0.0.1:8000\n")
    (tmp_path / "admin-token").write_text("demo-token\n")
    assert connection(_args(state_dir=str(tmp_path)), env) == (
        "http://127.0.0.1:8000/services/gpupool/",
        "demo-token",
    )
    (tmp_path / "tok").write_text("file-token\n")
    assert connection(_args(token_file=str(tmp_path / "tok")), env)[1] == "file-token"
    with pytest.raises(CommandError, match="no service URL: give --url"):
        connection(_args(), {}, cwd=tmp_path / "clone", home=tmp_path / "home")
    with pytest.raises(CommandError, match="no API token"):
        connection(_args(url="http://x"), {})
    (tmp_path / "url").unlink()
    with pytest.raises(CommandError, match="is `gpupool demo --state-dir") as e:
        connection(_args(state_dir=str(tmp_path)), env)
    assert e.value.status == EXIT_UNREACHABLE


def test_errors_become_one_line_and_an_exit_status():
    url = "http://h/services/gpupool/"
    refused = explain(GPUPoolError(0, "no answer from ...: [Errno 111] Connection refused"), url)
    assert refused.status == EXIT_UNREACHABLE and "Connection refused" in refused.message
    assert explain(GPUPoolError(503, "Service Unavailable"), url).status == EXIT_UNREACHABLE
    assert explain(GPUPoolError(401, "x", {"message": "x"}), url).status == EXIT_USER
    lacks = "user a lacks the scope custom:gpupool:admin"
    forbidden = explain(GPUPoolError(403, lacks, {"message": lacks}), url)
    assert forbidden.message.endswith("use the token of a gpupool admin")
    assert "not the gpupool service" not in explain(GPUPoolError(404, "Not Found"), url).message
    assert "…/services/gpupool/" in explain(GPUPoolError(404, "Not Found"), url).message
    bad = explain(
        GPUPoolError(400, "the pool documents have problems:\na\nb", {"message": "x",
                     "problems": ["a", "b"]}), url
    )  # fmt: skip
    assert (bad.status, bad.message, bad.details) == (
        EXIT_USER,
        "the pool documents have problems",
        ["a", "b"],
    )


MIXED = """\
# pools and quotas in one file
kind: pool
pool: {name: a}
nodes: {}
---
kind: quota
quota: {name: q}
---
kind: training
"""


def test_files_are_split_by_kind_keeping_their_line_numbers():
    parts = split_documents(MIXED)
    chunks = [p for p in parts if isinstance(p, Chunk)]
    assert [(c.first, c.kind, c.name) for c in chunks] == [
        (1, "pool", "a"),
        (6, "quota", "q"),
        (9, "training", None),
    ]
    req = build_request([("f.yaml", MIXED), ("g.yaml", "kind: pool\npool: {name: b}\n")],
                        lambda c: wanted(c, "pool"))  # fmt: skip
    lines = req.text.splitlines()
    assert lines[6] == "" and lines[8] == "kind: training"  # the quota is blanked, in place
    assert req.names == ["a", "b"] and req.documents == 3
    assert req.relocate("<request>:9: kind: must be pool") == "f.yaml:9: kind: must be pool"
    assert req.relocate("<request>:12: pool.name: bad") == "g.yaml:2: pool.name: bad"
    quotas = build_request([("f.yaml", MIXED)], lambda c: wanted(c, "quota"))
    assert quotas.names == ["q"] and quotas.documents == 1
    assert quotas.text.splitlines()[5] == "kind: quota"


def test_quota_documents_in_force_go_first_and_are_named_in_problems():
    kept = {"kind": "quota", "quota": {"name": "demo-quotas"}, "pools": {"p": {}}}
    req = build_request([("f.yaml", MIXED)], lambda c: wanted(c, "quota"), in_force=[kept])
    lines = req.text.splitlines()
    assert lines[:2] == ["kind: quota", "quota:"] and lines[5] == "---"
    assert lines[6 + 5] == "kind: quota"  # f.yaml's line 6, after the 5 lines in force and ---
    assert req.names == ["q"] and req.documents == 1
    problem = "<request>:12: pools.p: the quota of pool 'p' is already set at <request>:4"
    assert req.relocate(problem) == (
        "f.yaml:6: pools.p: the quota of pool 'p' is already set in the quota document "
        "'demo-quotas' in force"
    )
    assert req.relocate("<request>:99: x") == "<request>:99: x"  # not the CLI's: as it is


@pytest.mark.parametrize(
    "argv",
    [
        ["--url", "http://h", "--token", "t", "get", "pools"],
        ["get", "pools", "--url", "http://h", "--token", "t"],
        ["--url", "http://x", "--token", "x", "get", "pools", "--url", "http://h", "--token", "t"],
    ],
)
def test_connection_options_go_before_or_after_the_verb(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    apply_global_options(parser, args)
    assert (args.url, args.token, args.output) == ("http://h", "t", "table")


def test_json_is_o_json_before_or_after_the_verb():
    parser = build_parser()
    for argv, output in [
        (["--json", "get", "pools"], "json"),
        (["get", "nodes", "--json"], "json"),
        (["describe", "pool", "p", "--json"], "json"),
        (["--json", "get", "pools", "-o", "yaml"], "yaml"),  # the verb's own wins
    ]:
        args = parser.parse_args(argv)
        apply_global_options(parser, args)
        assert args.output == output, argv
    args = parser.parse_args(["--state-dir", "elsewhere", "demo"])
    apply_global_options(parser, args)
    assert args.state_dir == Path("elsewhere")
    for argv in (["--json", "label", "node", "n", "a=b"], ["--token", "t", "sim"]):
        with pytest.raises(SystemExit):
            apply_global_options(parser, parser.parse_args(argv))
    # validate asks the service with --nodes, so it takes the connection options
    args = parser.parse_args(["--token", "t", "validate", "-f", "x", "--nodes"])
    apply_global_options(parser, args)
    assert (args.token, args.nodes) == ("t", True)


def test_label_arguments_and_the_gpuctl_prefix():
    assert parse_labels(["runwhere.ai/pool=dev-pool", "runwhere.ai/gpu-type-"]) == {
        "runwhere.ai/pool": "dev-pool",
        "runwhere.ai/gpu-type": None,
    }
    for bad in ("nolabel", "runwhere.ai/pool=not a value", "bad key!=x"):
        with pytest.raises(CommandError):
            parse_labels([bad])
    assert outside_prefix(["runwhere.ai/pool", "team"], "runwhere.ai/") == ["team"]
    assert outside_prefix(["team"], "") == []


def test_get_gpu_hours_names_its_rows_by_the_split_and_never_shows_a_slice_as_nothing():
    """``--by shape``: the first column is SHAPE, not SUBJECT; a MIG 1g.10gb (1/7) for 10 minutes
    is 1/42 GPU-hour, which the reports page reads as 0.02, and a minute of a replica of four
    1/240, <0.01: never 0.0. CSV keeps the numbers."""
    rows = [
        {"subject": "whole", "gpu_hours": 12.0, "within_quota": 12.0, "over_quota": 0.0,
         "sessions": 2},
        {"subject": "mig-1g.10gb", "gpu_hours": round(1 / 42, 4), "within_quota": 0.0238,
         "over_quota": 0.0, "sessions": 1},
        {"subject": "shared-4", "gpu_hours": round(1 / 60 / 4, 4), "within_quota": 0.0042,
         "over_quota": 0.0, "sessions": 1},
    ]  # fmt: skip
    table = [
        line.split() for line in render("table", rows, gpu_hours_columns("shape")).splitlines()
    ]
    assert table[0] == ["SHAPE", "GPU-HOURS", "WITHIN", "QUOTA", "OVER", "QUOTA", "SESSIONS"]
    assert table[1:] == [
        ["whole", "12.0", "12.0", "0.0", "2"],
        ["mig-1g.10gb", "0.02", "0.02", "0.0", "1"],
        ["shared-4", "<0.01", "<0.01", "0.0", "1"],
    ]
    assert render("table", rows, gpu_hours_columns("group")).startswith("GROUP ")
    csv_rows = render("csv", rows, gpu_hours_columns("shape")).splitlines()
    assert csv_rows[2].split(",")[:2] == ["mig-1g.10gb", "0.0238"]
