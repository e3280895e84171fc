"""``benchmarks/bench_cli.py`` at a tiny size: one JSON line of the right shape, the three tables
(``gpupool get pools``, the client-models recount, the raw-JSON recount) agreeing, and
``gpupool get pools`` faster than both recounts (no timing target); and the check that the tables
agree fails loudly when they do not.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

KEYS = {
    "nodes",
    "pools",
    "gpus_per_node",
    "pods",
    "servers",
    "gpu_jobs",
    "cpu_pods",
    "runs",
    "tables_agree",
    "pools_compared",
    "service_ready_s",
    "get_pools_s",
    "recount_s",
    "raw_recount_s",
    "python_floor_s",
    "recount_x_get_pools",
    "raw_recount_x_get_pools",
    "target_recount_x_get_pools",
    "load_avg_before_after",
}


def bench_cli() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cli", BENCHMARKS / "bench_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(200)
def test_bench_cli_small(tmp_path: Path) -> None:
    """The benchmark runs, its tables agree, and get pools beats both recounts."""
    nodes, pools, pods, runs = 20, 3, 200, 2
    sizes = {"--nodes": nodes, "--pools": pools, "--pods": pods, "--runs": runs}
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_cli.py"), *(f"{k}={v}" for k, v in sizes.items())],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.splitlines()
    result = json.loads(line)
    assert set(result) == KEYS
    assert (result["nodes"], result["pools"], result["pods"], result["runs"]) == (
        nodes,
        pools,
        pods,
        runs,
    )
    assert result["servers"] + result["gpu_jobs"] + result["cpu_pods"] == pods
    assert result["tables_agree"] is True and result["pools_compared"] == pools
    for name in ("get_pools_s", "recount_s", "raw_recount_s", "python_floor_s"):
        assert set(result[name]) == {"median", "max"}
        assert 0 < result[name]["median"] <= result[name]["max"], name
    assert result["recount_x_get_pools"] > 1
    assert result["raw_recount_x_get_pools"] > 1
    assert result["target_recount_x_get_pools"] == 100


def test_tables_that_disagree_fail() -> None:
    """A recount that differs from get pools by one GPU stops the benchmark, naming the pool."""
    bench = bench_cli()
    gpupool = (
        "POOL NAME  STATUS  GPU TOTAL  GPU USED  GPU FREE  NODE COUNT\n"
        "pool-00    active  56         9         47        7\n"
        "pool-01    active  56         8         48        7\n"
        "empty      empty   0          0         0         0\n"
    )
    recount = (
        "POOL NAME  GPU TOTAL  GPU USED  GPU FREE  NODE COUNT\n"
        "pool-00    56         9         47        7\n"
        "pool-01    56         8         48        7\n"
    )
    tables = {"get_pools": bench.parse_table(gpupool), "recount": bench.parse_table(recount)}
    assert tables["get_pools"] == {"pool-00": (56, 9, 47, 7), "pool-01": (56, 8, 48, 7)}
    bench.check_agree(tables, 2)  # the same figures: no complaint
    wrong = bench.parse_table(recount.replace("8         48", "7         49"))
    with pytest.raises(SystemExit, match=r"disagree.*pool-01"):
        bench.check_agree({**tables, "raw_recount": wrong}, 2)
    with pytest.raises(SystemExit, match="2 pools with nodes, expected 3"):
        bench.check_agree(tables, 3)
