"""``gpupool`` verbs against a running ``gpupool demo`` (one for the module), as an admin types them."""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from pathlib import Path

import pytest
import yaml

from jupyter_gpupool.cli import main
from jupyter_gpupool.demo.run import free_port
from jupyter_gpupool.demo.testing import DemoProcess

GPUCTL_HEADER = ["POOL NAME", "STATUS", "GPU TOTAL", "GPU USED", "GPU FREE", "NODE COUNT"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("cli-demo")) as demo:
        yield demo


@pytest.fixture
def gpupool(demo, capsys):
    """``gpupool(*args) -> (exit status, stdout, stderr)``, against the demo via its state dir."""

    def run(*args, connect=True):
        argv = [*args, "--state-dir", str(demo.state)] if connect else list(args)
        status = main(argv)
        out, err = capsys.readouterr()
        return status, out, err

    return run


def table(text):
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]


def test_get_pools_prints_gpuctls_columns_and_every_pool(gpupool):
    status, out, _ = gpupool("get", "pools")
    rows = table(out)
    assert status == 0 and rows[0] == GPUCTL_HEADER
    pools = {r[0]: r for r in rows[1:]}
    assert set(pools) == {"training-pool", "inference-pool", "dev-pool", "compute-pool", "default"}
    assert pools["training-pool"][1:] == ["active", "16", "0", "16", "2"]
    assert pools["default"][2] == "4"  # node-6 is in no pool
    assert rows[-1][0] == "default"


@pytest.mark.parametrize("resource", [["pools"], ["jobs"], ["nodes"], ["quotas"]])
def test_every_get_prints_json_yaml_and_csv(gpupool, resource):
    status, out, _ = gpupool("get", *resource, "-o", "json")
    assert status == 0
    data = json.loads(out)
    status, out, _ = gpupool("get", *resource, "-o", "yaml")
    assert status == 0 and yaml.safe_load(out) == data
    status, out, _ = gpupool("get", *resource, "-o", "csv")
    assert status == 0 and out.split(",", 1)[0] in ("name", "user", "pool")
    status, out, _ = gpupool("get", *resource, "-o", "wide")
    assert status == 0 and out.splitlines()


def test_get_nodes_of_a_pool_and_a_nodes_labels(gpupool):
    status, out, _ = gpupool("get", "nodes", "--pool", "training-pool")
    rows = table(out)
    assert status == 0 and rows[0][:3] == ["NODE NAME", "STATUS", "GPU TOTAL"]
    assert [r[0] for r in rows[1:]] == ["gpu-node-1", "gpu-node-2"]
    status, out, _ = gpupool("get", "labels", "gpu-node-3", "--key=runwhere.ai/pool")
    assert (status, out) == (0, "gpu-node-3 runwhere.ai/pool: inference-pool\n")
    status, _, err = gpupool("get", "labels", "gpu-node-3", "--key=runwhere.ai/nothing")
    assert status == 1 and "has no label runwhere.ai/nothing" in err


def test_get_jobs_lists_the_servers_of_a_pool(demo, gpupool):
    demo.start_server("carol")
    try:
        status, out, _ = gpupool("get", "jobs", "-o", "json")
        mine = [s for s in json.loads(out) if s["user"] == "carol"]
        assert status == 0 and len(mine) == 1 and mine[0]["state"] == "running"
        pool = mine[0]["pool"]
        status, out, _ = gpupool("get", "jobs", "--pool", pool)
        rows = table(out)
        assert rows[0][:4] == ["USER", "SERVER", "POOL", "NODE"]
        assert ["carol", "-", pool, mine[0]["node"]] in [r[:4] for r in rows[1:]]
        status, out, _ = gpupool("describe", "pool", pool)
        assert status == 0 and "\nServers:\n  USER" in out and "carol" in out
    finally:
        demo.api("DELETE", "/hub/api/users/carol/server")


def test_get_quotas(gpupool):
    status, out, _ = gpupool("get", "quotas")
    rows = table(out)
    assert status == 0 and rows[0][:5] == ["POOL", "SUBJECT", "GUARANTEED", "LIMIT", "USED"]
    assert ["training-pool", "group:ml-research", "8", "16", "0"] in [r[:5] for r in rows]


def test_create_describe_and_delete_a_pool_from_a_gpuctl_file(gpupool, tmp_path):
    f = tmp_path / "t4-pool.yaml"
    f.write_text(
        textwrap.dedent(
            """\
            kind: pool
            version: v0.1
            pool:
              name: t4-pool
              description: "Inference on T4s"
            nodes:
              node-6:
                gpu-type: T4-16G
            """
        )
    )
    status, out, err = gpupool("create", "-f", str(f))
    assert status == 0, err
    assert out == "pool t4-pool created\nnodes labelled: node-6\n"
    try:
        rows = {r[0]: r for r in table(gpupool("get", "pools")[1])}
        assert rows["t4-pool"][2] == "4" and rows["default"][1] == "empty"
        status, out, _ = gpupool("describe", "pool", "t4-pool")
        assert status == 0 and "Description:        Inference on T4s" in out
        assert re.search(r"\n  node-6 +Ready +4 ", out)
        out = gpupool("get", "labels", "node-6", "--key", "runwhere.ai/pool")[1]
        assert out == "node-6 runwhere.ai/pool: t4-pool\n"
        assert gpupool("create", "-f", str(f))[1] == "pool t4-pool replaced\n"
    finally:
        status, out, _ = gpupool("delete", "-f", str(f))
    assert status == 0 and out.startswith("pool t4-pool deleted\nnodes back in default: node-6")
    status, _, err = gpupool("delete", "pool", "t4-pool")
    assert status == 1 and err == "error: no pool named 't4-pool'\n"


def test_a_bad_file_is_reported_at_its_line_and_nothing_changes(gpupool, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("kind: pool\npool: {name: fine-pool}\nnodes: {}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("# gpuctl spells it gpu-type\nkind: pool\npool:\n  name: b\nnodes:\n  node-6:\n    gpu_type: T4\n")  # fmt: skip
    status, out, err = gpupool("create", "-f", str(good), str(bad))
    assert status == 1 and out == ""
    assert err.splitlines() == [
        f"{bad}:7: nodes.node-6.gpu_type: unknown key 'gpu_type'; did you mean 'gpu-type'?",
        "error: the pool documents have problems; nothing was changed",
    ]
    assert "fine-pool" not in gpupool("get", "pools")[1]


def test_label_node_as_gpuctl_does(gpupool):
    status, _, err = gpupool("label", "node", "node-6", "team=ml")
    assert status == 1 and "error: label key team is not under runwhere.ai/" in err
    status, _, err = gpupool("label", "node", "gpu-node-5", "runwhere.ai/pool=training-pool")
    assert status == 1 and "--overwrite" in err
    # move a node to another pool, and back
    status, out, _ = gpupool(
        "label", "node", "node-6", "runwhere.ai/pool=dev-pool", "runwhere.ai/gpu-type=T4-16G"
    )
    assert status == 0 and out == "node/node-6 labeled runwhere.ai/pool=dev-pool\n"
    try:
        nodes = [r[0] for r in table(gpupool("get", "nodes", "--pool", "dev-pool")[1])[1:]]
        assert nodes == ["gpu-node-5", "node-6"]
    finally:
        assert gpupool("label", "node", "node-6", "runwhere.ai/pool-")[0] == 0
    status, out, _ = gpupool("label", "node", "node-6", "example.org/team=ml", "--label-prefix=")
    assert status == 0 and gpupool("label", "node", "node-6", "example.org/team-", "--label-prefix=")[0] == 0  # fmt: skip


def test_exit_statuses(demo, gpupool):
    url = f"http://127.0.0.1:{free_port()}"
    status, _, err = gpupool("get", "pools", "--url", url, "--token", "x", connect=False)
    assert status == 2 and err.startswith("error: cannot reach the gpupool service at")
    status, _, err = gpupool("get", "pools", "--url", demo.url, "--token", "bad", connect=False)
    assert status == 1 and "refused the API token" in err
    demo.api("POST", "/hub/api/users/dave")
    _, token = demo.api("POST", "/hub/api/users/dave/tokens", {"note": "cli test"})
    status, out, err = gpupool("get", "nodes", "--url", demo.url, "--token", token["token"],
                               connect=False)  # fmt: skip
    assert status == 1 and err == (
        "error: user dave lacks the scope custom:gpupool:admin; use the token of a gpupool admin\n"
    )
    status, out, _ = gpupool("get", "pools", "--url", demo.url, "--token", token["token"],
                             connect=False)  # fmt: skip
    assert status == 0 and "dev-pool" in out  # users see the pools they may use
    assert gpupool("describe", "pool", "no-such-pool")[0] == 1
    with pytest.raises(SystemExit) as e:
        gpupool("get", "pols")
    assert e.value.code == 1  # a usage error is the user's


# --- finding the demo, options before the verb, gpuctl's spellings -------------------------------

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    """A working directory and home with no demo, and no connection in the environment."""
    for name in ("GPUPOOL_URL", "GPUPOOL_TOKEN", "GPUPOOL_DEMO_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    clone = tmp_path / "clone"
    (clone / "examples").mkdir(parents=True)
    monkeypatch.chdir(clone)
    return tmp_path


def test_without_a_url_the_running_demo_is_found_where_the_tour_looks(
    demo, gpupool, nowhere, monkeypatch
):
    status, _, err = gpupool("get", "pools", connect=False)
    assert status == 1 and err == (
        "error: no service URL: give --url URL, set GPUPOOL_URL, or --state-dir DIR of a running "
        "`gpupool demo` (found no running demo: no url file in ./gpupool-demo, ../gpupool-demo, "
        "~/.gpupool-demo)\n"
    )
    # a state directory without a url file is a demo that is not running: the next one is used
    stopped = nowhere / "clone" / "gpupool-demo"
    stopped.mkdir()
    (stopped / "admin-token").write_text("stale\n")
    (nowhere / "home" / ".gpupool-demo").symlink_to(demo.state)
    status, out, err = gpupool("get", "pools", connect=False)
    assert status == 0 and table(out)[0] == GPUCTL_HEADER
    assert err == f"gpupool: using the demo in ~/.gpupool-demo ({demo.url})\n"
    # seen from examples/, the clone's demo is ../gpupool-demo
    (stopped / "url").write_text(demo.url + "\n")
    (stopped / "admin-token").write_text(demo.token + "\n")
    monkeypatch.chdir(nowhere / "clone" / "examples")
    status, out, err = gpupool("get", "nodes", "--pool", "dev-pool", connect=False)
    assert status == 0 and [r[0] for r in table(out)[1:]] == ["gpu-node-5"]
    assert err == f"gpupool: using the demo in ../gpupool-demo ({demo.url})\n"


def test_the_readmes_cli_at_a_glance_works_word_for_word(demo, gpupool, nowhere):
    """The README's commands, run as shown from the root of a clone whose demo is running."""
    (nowhere / "clone" / "gpupool-demo").symlink_to(demo.state)
    (nowhere / "clone" / "examples").rmdir()
    (nowhere / "clone" / "examples").symlink_to(ROOT / "examples")
    section = (ROOT / "README.md").read_text().split("The CLI at a glance", 1)[1]
    block = section.split("```console\n", 1)[1].split("```", 1)[0]
    steps: list[tuple[str, list[str]]] = []  # (command, the output lines shown after it)
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line != "...":
            steps[-1][1].append(line)
    assert " ".join(c.split()[1] for c, _ in steps) == "validate get describe get label get"
    try:
        for command, shown in steps:
            status, out, err = gpupool(*shlex.split(command)[1:], connect=False)
            assert status == 0, f"`{command}` failed: {err}"
            rows = [r.split() for r in out.splitlines()]
            for expected in shown:  # the lines shown are there, spacing aside
                assert expected.split() in rows, f"`{command}` does not print {expected!r}"
        status, out, _ = gpupool("get", "labels", "node-6", "--key=runwhere.ai/pool")
        assert out == "node-6 runwhere.ai/pool: inference-pool\n"
    finally:
        assert gpupool("label", "node", "node-6", "runwhere.ai/pool-")[0] == 0


def test_connection_options_and_json_before_the_verb(demo, gpupool, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(demo.token)
    status, out, _ = gpupool("--url", demo.url, "--token-file", str(token_file), "get", "pools",
                             connect=False)  # fmt: skip
    assert status == 0 and table(out)[0] == GPUCTL_HEADER
    status, out, _ = gpupool("--state-dir", str(demo.state), "--json", "get", "pools",
                             connect=False)  # fmt: skip
    _, truth = demo.api("GET", "/services/gpupool/api/v1/pools")
    assert status == 0 and json.loads(out) == truth["pools"]
    # gpuctl's --json after the verb too, on every get and describe
    status, out, _ = gpupool("get", "quotas", "--json")
    assert status == 0 and json.loads(out)["pools"]["training-pool"]["groups"]["ml-research"]
    status, out, _ = gpupool("describe", "pool", "dev-pool", "--json")
    assert status == 0 and json.loads(out)["name"] == "dev-pool"
    # the verb's own option wins over the one before it (kubectl's rule for flags given twice)
    status, out, _ = gpupool("--url", "http://127.0.0.1:1", "--token", "x", "get", "pools",
                             "--url", demo.url, "--token", demo.token, connect=False)  # fmt: skip
    assert status == 0
    # and a verb that does not connect says so rather than ignoring it
    with pytest.raises(SystemExit) as e:
        gpupool("--url", demo.url, "validate", "-f", str(ROOT / "examples" / "pools"),
                connect=False)  # fmt: skip
    assert e.value.code == 1


def quota_documents(demo):
    """The names of the quota documents in force, from the service's API."""
    status, body = demo.api("GET", "/services/gpupool/api/v1/quotas")
    assert status == 200
    return [d["quota"]["name"] for d in body["documents"]]


EXTRA_QUOTA = """\
# ml-ops may use the CPU pool
kind: quota
version: v0.1
quota:
  name: extra-quotas
pools:
  {pool}:
    groups:
      ml-ops: {{guaranteed: 0, limit: 4}}
"""


def test_delete_f_of_quota_documents_deletes_them(demo, gpupool, tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text(EXTRA_QUOTA.format(pool="compute-pool"))
    assert gpupool("create", "-f", str(extra))[:2] == (0, "quota extra-quotas applied\n")
    assert quota_documents(demo) == ["extra-quotas", "demo-quotas"]
    status, out, _ = gpupool("delete", "-f", str(extra))
    assert (status, out) == (0, "quota extra-quotas deleted\n")
    assert quota_documents(demo) == ["demo-quotas"]
    # the last one too (PUT api/v1/quotas with no documents), and its file goes away
    demo_quotas = ROOT / "examples" / "pools" / "quotas.yaml"
    try:
        status, out, _ = gpupool("delete", "-f", str(demo_quotas))
        assert (status, out) == (0, "quota demo-quotas deleted\n")
        assert quota_documents(demo) == []
        assert sorted(p.name for p in (demo.state / "pools").iterdir()) == [
            "compute-pool.yaml", "dev-pool.yaml", "inference-pool.yaml", "training-pool.yaml"
        ]  # fmt: skip
        status, _, err = gpupool("delete", "quota", "demo-quotas")
        assert status == 1 and err == "error: no quota document named 'demo-quotas' (in force: none)\n"  # fmt: skip
    finally:
        assert gpupool("create", "-f", str(demo_quotas))[0] == 0
    assert quota_documents(demo) == ["demo-quotas"]


def test_a_quota_clashing_with_one_in_force_is_reported_at_the_users_line(demo, gpupool, tmp_path):
    clash = tmp_path / "clash.yaml"
    clash.write_text(EXTRA_QUOTA.format(pool="training-pool"))
    status, out, err = gpupool("create", "-f", str(clash))
    assert status == 1 and out == ""
    assert err.splitlines() == [
        f"{clash}:7: pools.training-pool: the quota of pool 'training-pool' is already set in "
        "the quota document 'demo-quotas' in force",
        "error: the quota documents have problems; nothing was changed",
    ]
    assert quota_documents(demo) == ["demo-quotas"]


def test_a_refusal_says_nothing_was_changed_once(demo, gpupool, tmp_path):
    ghost = tmp_path / "ghost.yaml"
    ghost.write_text(
        "kind: pool\npool: {name: ghost-pool}\nnodes:\n  gpu-node-99: {gpu-type: T4}\n"
    )
    status, out, err = gpupool("create", "-f", str(ghost))
    assert (status, out) == (1, "")
    assert err == "error: node gpu-node-99 does not exist in the cluster; nothing was changed\n"
    _, pools = demo.api("GET", "/services/gpupool/api/v1/pools")
    assert "ghost-pool" not in [p["name"] for p in pools["pools"]]
