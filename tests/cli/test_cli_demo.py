"""``gpupool`` verbs against a running ``gpupool demo`` (one for the module), as an admin types
them, on both clusters of tests/clusters.py: the simulated one and a real control plane. What
the tables say about nodes, GPUs and pools is held to a fresh list from the Kubernetes API, and a
label the CLI moves is read back from the API server."""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusters import CLUSTERS, DemoOn, demo_on
from gpu_truth import cell, node_gpus, pods_gpus
from waiting import WaitTimeout, wait_for

from jupyter_gpupool.cli import main
from jupyter_gpupool.demo.run import free_port

GPUCTL_HEADER = ["POOL NAME", "STATUS", "GPU TOTAL", "GPU USED", "GPU FREE", "NODE COUNT"]
POOL_KEY = "runwhere.ai/pool"
TYPE_KEY = "runwhere.ai/gpu-type"
#: A test about the CLI alone (arguments, connection options): a second cluster adds nothing.
ONE_CLUSTER = pytest.mark.parametrize("demo", ["simulated"], indirect=True)


@pytest.fixture(scope="module", params=CLUSTERS)
def demo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """``gpupool demo`` on the simulated or the real cluster, for the module."""
    kind = str(request.param)
    real = request.getfixturevalue("realk8s_kubeconfig") if kind == "real" else None
    yield from demo_on(kind, tmp_path_factory.mktemp(f"cli-demo-{kind}"), real)


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


# --- what the Kubernetes API says, read fresh -----------------------------------------------------


def labels_of(demo: DemoOn, node: str) -> dict[str, str]:
    """A node's labels, read from the API server now."""
    return dict(demo.run(demo.cluster.node(node))["metadata"].get("labels") or {})


def api_nodes(demo: DemoOn) -> dict[str, dict[str, Any]]:
    """Per node, from a fresh list of nodes and pods: its pool (label, else ``default``), GPU
    type (label, ``-`` for none), its GPUs and the GPUs of the pods bound to it that have not
    finished, both counted by NVIDIA's conventions (tests/gpu_truth.py: a MIG instance is its
    slices of the A100, a time-sliced replica 1/replicas)."""
    nodes = demo.run(demo.cluster.list_nodes())
    pods = demo.run(demo.cluster.list_pods())
    out = {}
    for n in nodes:
        name, labels = n["metadata"]["name"], n["metadata"].get("labels") or {}
        out[name] = {
            "pool": labels.get(POOL_KEY) or "default",
            "gpu_type": labels.get(TYPE_KEY) or "-",
            "total": node_gpus(n),
            "used": pods_gpus(n, pods),
        }
    return out


def expected_node_rows(demo: DemoOn, pool: str | None = None) -> list[list[str]]:
    """``get nodes``' NODE NAME, GPU TOTAL, GPU USED, GPU FREE, GPU TYPE and POOL, from the API."""
    return [
        [
            name,
            cell(n["total"]),
            cell(n["used"]),
            cell(n["total"] - n["used"]),
            n["gpu_type"],
            n["pool"],
        ]
        for name, n in sorted(api_nodes(demo).items())
        if pool is None or n["pool"] == pool
    ]


def node_rows(out: str) -> list[list[str]]:
    """The same columns of a ``get nodes`` table."""
    rows = table(out)
    header = ["NODE NAME", "STATUS", "GPU TOTAL", "GPU USED", "GPU FREE", "GPU TYPE", "POOL"]
    assert rows[0][:7] == header
    return sorted([r[0], *r[2:7]] for r in rows[1:])


def expected_pool_numbers(demo: DemoOn, pools: list[str]) -> dict[str, list[str]]:
    """``get pools``' GPU TOTAL, GPU USED, GPU FREE and NODE COUNT of ``pools``, from the API: a
    pool's GPUs are its nodes' (GPU-equivalents: the MIG A100 is 1, the time-sliced A10 1)."""
    sums: dict[str, list[Any]] = {p: [0, 0, 0] for p in pools}  # total, used, nodes
    for n in api_nodes(demo).values():
        s = sums.setdefault(n["pool"], [0, 0, 0])
        s[0] += n["total"]
        s[1] += n["used"]
        s[2] += 1
    return {
        p: [cell(Fraction(t)), cell(Fraction(u)), cell(Fraction(t - u)), str(c)]
        for p, (t, u, c) in sums.items()
    }


def cli_and_api(gpupool, demo: DemoOn, args: tuple[str, ...]) -> tuple[Any, Any]:
    """``gpupool get nodes|pools ARGS``' GPU and pool columns, and the same from the API."""
    status, out, err = gpupool("get", *args)
    assert status == 0, err
    if args[0] == "nodes":
        pool = args[args.index("--pool") + 1] if "--pool" in args else None
        return node_rows(out), expected_node_rows(demo, pool)
    rows = {r[0]: r[2:6] for r in table(out)[1:]}
    return rows, expected_pool_numbers(demo, list(rows))


def the_same_as_the_api(gpupool, demo: DemoOn, *args: str) -> Any:
    """``gpupool get nodes|pools ARGS``' GPU and pool columns, once they equal a fresh API list
    (the service follows the cluster with a watch); fails showing both if they never do."""
    seen: list[tuple[Any, Any]] = []

    def same() -> bool:
        seen.append(cli_and_api(gpupool, demo, args))
        return bool(seen[-1][0] == seen[-1][1])

    what = f"`gpupool get {' '.join(args)}` to match the API"
    try:
        wait_for(same, what=what, timeout=15, interval=0.3)
    except WaitTimeout as e:
        raise AssertionError(f"{e}\nCLI: {seen[-1][0]}\nAPI: {seen[-1][1]}") from None
    return seen[-1][0]


def test_get_pools_prints_gpuctls_columns_and_every_pool(gpupool, demo):
    """Every pool, in gpuctl's columns, with the GPUs and nodes a fresh API list gives it."""
    status, out, _ = gpupool("get", "pools")
    rows = table(out)
    assert status == 0 and rows[0] == GPUCTL_HEADER
    pools = {r[0]: r for r in rows[1:]}
    assert set(pools) == {"training-pool", "inference-pool", "dev-pool", "compute-pool", "default"}
    # 16 whole A100s on 2 nodes, and the MIG node's A100 (its 4 instances, 1 GPU-equivalent)
    assert pools["training-pool"][1:] == ["active", "17", "0", "17", "3"]
    assert pools["inference-pool"][1:] == ["active", "9", "0", "9", "3"]  # the A10 in 4 is 1
    assert pools["default"][2] == "4"  # node-6 is in no pool
    assert rows[-1][0] == "default"
    the_same_as_the_api(gpupool, demo, "pools")


@ONE_CLUSTER
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


def test_get_nodes_of_a_pool_and_a_nodes_labels(gpupool, demo):
    """``get nodes`` (all, and a pool's) says what a fresh API list says of each node's GPUs,
    GPU type and pool; ``get labels`` what the node's labels are."""
    shown = the_same_as_the_api(gpupool, demo, "nodes")
    assert len(shown) == 10 and ["gpu-node-3", "4", "0", "4", "A10-24G", "inference-pool"] in shown
    shown = the_same_as_the_api(gpupool, demo, "nodes", "--pool", "training-pool")
    assert [r[0] for r in shown] == ["gpu-node-1", "gpu-node-2", "gpu-node-mig-1"]
    status, out, _ = gpupool("get", "labels", "gpu-node-3", "--key=runwhere.ai/pool")
    assert labels_of(demo, "gpu-node-3")[POOL_KEY] == "inference-pool"
    assert (status, out) == (0, "gpu-node-3 runwhere.ai/pool: inference-pool\n")
    status, out, _ = gpupool("get", "labels", "gpu-node-3", "-o", "json")
    assert status == 0 and json.loads(out)["labels"] == labels_of(demo, "gpu-node-3")
    status, _, err = gpupool("get", "labels", "gpu-node-3", "--key=runwhere.ai/nothing")
    assert status == 1 and "has no label runwhere.ai/nothing" in err


def test_get_jobs_lists_the_servers_of_a_pool(demo, gpupool):
    """A server started through the hub is listed in the pool and on the node its pod is on."""
    demo.start_server("carol")
    try:
        status, out, _ = gpupool("get", "jobs", "-o", "json")
        mine = [s for s in json.loads(out) if s["user"] == "carol"]
        assert status == 0 and len(mine) == 1 and mine[0]["state"] == "running"
        pod = demo.run(demo.cluster.pod(mine[0]["namespace"], mine[0]["name"]))
        assert pod is not None and mine[0]["node"] == pod["spec"]["nodeName"]
        pool = mine[0]["pool"]
        assert labels_of(demo, pod["spec"]["nodeName"]).get(POOL_KEY, "default") == pool
        status, out, _ = gpupool("get", "jobs", "--pool", pool)
        rows = table(out)
        assert rows[0][:4] == ["USER", "SERVER", "POOL", "NODE"]
        assert ["carol", "(default)", pool, pod["spec"]["nodeName"]] in [r[:4] for r in rows[1:]]
        status, out, _ = gpupool("describe", "pool", pool)
        assert status == 0 and "\nServers:\n  USER" in out and "carol" in out
        the_same_as_the_api(gpupool, demo, "nodes")  # her GPUs counted on her node
    finally:
        demo.api("DELETE", "/hub/api/users/carol/server")


def test_get_quotas(gpupool):
    status, out, _ = gpupool("get", "quotas")
    rows = table(out)
    assert status == 0 and rows[0][:5] == ["POOL", "SUBJECT", "GUARANTEED", "LIMIT", "USED"]
    assert ["training-pool", "group:ml-research", "8", "16", "0"] in [r[:5] for r in rows]


def test_create_describe_and_delete_a_pool_from_a_gpuctl_file(gpupool, demo, tmp_path):
    """A gpuctl pool file labels its node on the cluster; deleting the pool takes the label off."""
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
        assert labels_of(demo, "node-6")[POOL_KEY] == "t4-pool"
        rows = {r[0]: r for r in table(gpupool("get", "pools")[1])}
        assert rows["t4-pool"][2] == "4" and rows["default"][1] == "empty"
        the_same_as_the_api(gpupool, demo, "pools")
        status, out, _ = gpupool("describe", "pool", "t4-pool")
        assert status == 0 and "Description:        Inference on T4s" in out
        assert re.search(r"\n  node-6 +Ready +4 ", out)
        out = gpupool("get", "labels", "node-6", "--key", "runwhere.ai/pool")[1]
        assert out == "node-6 runwhere.ai/pool: t4-pool\n"
        assert gpupool("create", "-f", str(f))[1] == "pool t4-pool replaced\n"
    finally:
        status, out, _ = gpupool("delete", "-f", str(f))
    assert status == 0 and out.startswith("pool t4-pool deleted\nnodes back in default: node-6")
    assert POOL_KEY not in labels_of(demo, "node-6")
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


def test_label_node_as_gpuctl_does(gpupool, demo):
    """``label node`` refuses what gpuctl refuses and moves a node between pools; the API server
    has each change, read back fresh, and ``get nodes`` shows it."""
    before = {n: labels_of(demo, n) for n in ("node-6", "gpu-node-5")}
    status, _, err = gpupool("label", "node", "node-6", "team=ml")
    assert status == 1 and "error: label key team is not under runwhere.ai/" in err
    status, _, err = gpupool("label", "node", "gpu-node-5", "runwhere.ai/pool=training-pool")
    assert status == 1 and "--overwrite" in err
    assert {n: labels_of(demo, n) for n in before} == before  # refused: nothing changed
    # move a node to another pool, and back
    status, out, _ = gpupool(
        "label", "node", "node-6", "runwhere.ai/pool=dev-pool", "runwhere.ai/gpu-type=T4-16G"
    )
    assert status == 0 and out == "node/node-6 labeled runwhere.ai/pool=dev-pool\n"
    try:
        labels = labels_of(demo, "node-6")
        assert (labels[POOL_KEY], labels[TYPE_KEY]) == ("dev-pool", "T4-16G")
        shown = the_same_as_the_api(gpupool, demo, "nodes", "--pool", "dev-pool")
        assert [r[0] for r in shown] == ["gpu-node-5", "node-6"]
        the_same_as_the_api(gpupool, demo, "pools")
    finally:
        assert gpupool("label", "node", "node-6", "runwhere.ai/pool-")[0] == 0
    assert POOL_KEY not in labels_of(demo, "node-6")
    assert [r[0] for r in the_same_as_the_api(gpupool, demo, "nodes", "--pool", "dev-pool")] == [
        "gpu-node-5"
    ]
    # any key, with gpuctl's prefix check turned off
    status, out, _ = gpupool("label", "node", "node-6", "example.org/team=ml", "--label-prefix=")
    assert status == 0 and labels_of(demo, "node-6")["example.org/team"] == "ml"
    assert gpupool("label", "node", "node-6", "example.org/team-", "--label-prefix=")[0] == 0
    assert "example.org/team" not in labels_of(demo, "node-6")


@ONE_CLUSTER
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


@ONE_CLUSTER
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
        assert labels_of(demo, "node-6")[POOL_KEY] == "inference-pool"
    finally:
        assert gpupool("label", "node", "node-6", "runwhere.ai/pool-")[0] == 0
    assert POOL_KEY not in labels_of(demo, "node-6")


@ONE_CLUSTER
def test_connection_options_and_json_before_the_verb(demo, gpupool, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(demo.token)
    status, out, _ = gpupool("--url", demo.url, "--token-file", str(token_file), "get", "pools",
                             connect=False)  # fmt: skip
    assert status == 0 and table(out)[0] == GPUCTL_HEADER

    # --json before the verb gives the API's own answer; read close together, once the service
    # has followed the label changes of the tests before (node-6 back in default)
    def same_as_the_api() -> bool:
        status, out, _ = gpupool("--state-dir", str(demo.state), "--json", "get", "pools",
                                 connect=False)  # fmt: skip
        _, truth = demo.api("GET", "/services/gpupool/api/v1/pools")
        return status == 0 and json.loads(out) == truth["pools"]

    wait_for(same_as_the_api, what="`gpupool --json get pools` to match the API", timeout=15)
    # gpuctl's --json after the verb too, on every get and describe
    status, out, _ = gpupool("get", "quotas", "--json")
    assert status == 0 and json.loads(out)["pools"]["training-pool"]["groups"]["ml-research"]
    status, out, _ = gpupool("describe", "pool", "dev-pool", "--json")
    assert status == 0 and json.loads(out)["name"] == "dev-pool"
    # the verb's own option wins over the one before it (kubectl's rule for flags given twice)
    status, out, _ = gpupool("--url", "http://127.0.0.1:1", "--token", "x", "get", "pools",
                             "--url", demo.url, "--token", demo.token, connect=False)  # fmt: skip
    assert status == 0
    # validate --nodes connects as the other verbs do (the demo's pools name no shapes)
    status, out, _ = gpupool("--url", demo.url, "--token", demo.token, "validate", "-f",
                             str(ROOT / "examples" / "pools"), "--nodes", connect=False)  # fmt: skip
    assert status == 0 and "ok: the shapes the pools name are on their nodes" in out
    # and a verb that does not connect says so rather than ignoring it
    with pytest.raises(SystemExit) as e:
        gpupool("--url", demo.url, "sim", connect=False)
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
