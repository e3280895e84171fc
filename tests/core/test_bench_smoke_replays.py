"""The benchmarks that replay days, and bench_counts, run at a tiny size (the rules of
``test_bench_smoke.py``): bench_density replays a simulated day and measures no time: its checks
are its ledger's (every session ends one way, once; idle GPU-hours within held ones; no node
over-committed); bench_estimate's ``ours_x_per_gpu_*`` are ours' error over a fairer naive
one's (either side, its goal below 0.67); bench_counts' ratios are what counting a pool's parts
costs its row.
"""

from __future__ import annotations

from bench_run import run


def test_density_benchmark():
    # a tiny day: 12 users, about 24 sessions; the checks are the ones a reader of its table
    # would make, from the benchmark's own ledger (no figure is a target)
    result = run("bench_density.py", "--users", 12, "--seed", 3, "--json")
    assert set(result) == {
        "users",
        "seed",
        "sessions",
        "patience_min",
        "gpus",
        "policies",
        "equal_hardware",
    }
    assert (result["users"], result["seed"], result["patience_min"]) == (12, 3, 30)
    assert result["gpus"] == 34  # examples/cluster.yaml's
    sessions = result["sessions"]
    assert sessions > 0
    policies = result["policies"]
    assert set(policies) == {"whole", "whole_idle_queue", "shapes_idle_queue", "recut_idle_queue"}
    equal = result["equal_hardware"]
    assert set(equal) == {
        "whole",
        "whole_idle_queue",
        "shapes_idle_queue_ratios",
        "recut_idle_queue_ratios",
    }
    runs = {**policies, "whole_equal": equal["whole"], "idle_equal": equal["whole_idle_queue"]}
    for name, f in runs.items():
        # every session is served, abandoned or refused, exactly once
        ids = [sid for sid, _ in f["ledger"]]
        assert sorted(ids) == list(range(sessions)), name
        outcomes = [how for _, how in f["ledger"]]
        assert set(outcomes) <= {"served", "abandoned", "refused"}, name
        assert f["served"] + f["abandoned"] + f["refused"] == sessions, name
        assert f["served"] == outcomes.count("served") > 0, name
        assert sum(f["served_by_pool"].values()) == f["served"], name
        assert sum(f["served_by_need"].values()) == f["served"], name
        assert sum(f["served_by_shape"].values()) == f["served"], name
        assert sum(f["not_served_by_need"].values()) == f["abandoned"] + f["refused"], name
        assert 0 <= f["wait_p50_min"] <= f["wait_p95_min"] <= result["patience_min"], name
        # idle time is held time; nothing held beyond the hours sessions could run
        assert 0 <= f["gpu_hours_idle"] <= f["gpu_hours_held"], name
        assert f["gpu_hours_held"] > 0, name
        assert 0 <= f["idle_stopped_cut_short"] <= f["idle_stopped"], name
        # every user back after an idle stop asked once more, and that ended one way, once
        assert f["back"] == f["idle_stopped_cut_short"] == len(f["back_ledger"]), name
        assert f["back"] == f["back_served"] + f["back_abandoned"], name
        assert f["served"] - f["back_abandoned"] <= f["completed"] <= f["served"], name
        served = {sid for sid, how in f["ledger"] if how == "served"}
        assert {orig for _, orig, _ in f["back_ledger"]} <= served, name
        # no node ever held more of a resource than it has
        for node, peak in f["peak"].items():
            for resource, units in peak.items():
                assert units <= f["capacity"][node].get(resource, 0), (name, node, resource)
    # no idle policy, no idle stops; ratios are against policy 1, which has none
    assert policies["whole"]["idle_stopped"] == 0 and "ratios" not in policies["whole"]
    assert equal["whole"]["back"] == 0 and "ratios" not in equal["whole"]
    # the whole-GPU policies hold whole GPUs only; the shapes policy gave out other shapes too
    # (light sessions ask for a MIG instance or a shared replica first)
    assert set(policies["whole"]["served_by_shape"]) == {"whole"}
    assert set(policies["whole_idle_queue"]["served_by_shape"]) == {"whole"}
    assert set(equal["whole"]["served_by_shape"]) == {"whole"}
    # only a session on a slice runs slower
    assert policies["whole"]["slowed"] == equal["whole_idle_queue"]["slowed"] == 0
    assert set(policies["shapes_idle_queue"]["served_by_shape"]) - {"whole"}
    ratio_sets = [policies[name]["ratios"] for name in set(policies) - {"whole"}]
    ratio_sets += [equal["whole_idle_queue"]["ratios"], equal["shapes_idle_queue_ratios"]]
    ratio_sets.append(equal["recut_idle_queue_ratios"])
    # policy 4 counts its re-cuts: each to demand or home, each done at most once a node asks
    p4 = policies["recut_idle_queue"]
    assert p4["recuts"] == p4["recuts_to_demand"] + p4["recuts_home"] == len(p4["recut_log"])
    assert 0 <= p4["recuts_unused"] <= p4["recuts"]
    assert 0 <= p4["nodes_home_at_end"] <= p4["recut_nodes"]
    # the re-cut loop ran, and asked the planner at most once a round
    assert 0 <= p4["plans"] <= p4["recut_rounds"] and p4["recut_rounds"] > 0
    for ratios in ratio_sets:
        assert set(ratios) == {
            "served",
            "completed",
            "wait_p50_min",
            "wait_p95_min",
            "gpu_hours_held",
            "gpu_hours_idle",
        }


def test_density_benchmark_over_seeds():
    """--seeds: one row a seed, and the median and range over them of what the rows say (80
    users: enough that policy 1 misses some sessions, so the rows differ)."""
    result = run("bench_density.py", "--users", 80, "--seeds", "1-3", "--json")
    assert (result["users"], result["seeds"]) == (80, [1, 2, 3])
    rows = result["per_seed"]
    assert [r["seed"] for r in rows] == [1, 2, 3]
    for r in rows:
        p1, p3 = r["whole_equal"]["served"], r["shapes_idle_queue"]["served"]
        assert r["p3_x_p1_equal"] == round(p3 / p1, 3)
        assert r["p4_x_p1_equal"] == round(r["recut_idle_queue"]["served"] / p1, 3)
        assert r["ceiling_x_p1_equal"] == round(r["sessions"] / p1, 3) >= r["p3_x_p1_equal"]
    head = result["summary"]["p3_x_p1_equal"]
    values = sorted(r["p3_x_p1_equal"] for r in rows)
    assert (head["min"], head["max"]) == (values[0], values[-1])
    assert head["median"] == values[1]
    assert result["claim_holds"] == (head["median"] >= 1.5 and head["min"] >= 1.3)
    # policy 4 (issue 41): its goal read from its ratios, its figures given per policy too
    p4 = sorted(r["p4_x_p1_equal"] for r in rows)
    assert result["summary"]["p4_x_p1_equal"]["median"] == p4[1]
    assert result["recut_goal_holds"] == (p4[1] >= 2.0)
    served = sorted(r["recut_idle_queue"]["served"] for r in rows)
    spread = result["per_policy"]["recut_idle_queue"]["served"]
    assert (spread["min"], spread["median"], spread["max"]) == tuple(served)


def test_estimate_benchmark():
    """Days replayed with a line, whole GPUs and shapes: every request in line admitted in the
    end, each estimated when it joined (the history has every pool), errors in order, ours
    closer than the naive position x mean duration, the share in ours' range a share."""
    result = run("bench_estimate.py", "--users", 90, "--seeds", 1, "--json")
    assert result["seeds"] == [1] and set(result["runs"]) == {"whole", "shapes"}
    figures = {
        f"{who}_{q}_min" for who in ("ours", "naive", "naive_per_gpu") for q in ("p50", "p90")
    }
    ratios = {f"{a}_{q}" for a in ("naive_x_ours", "ours_x_per_gpu") for q in ("p50", "p90")}
    counts = {"sessions", "history_sessions", "queued", "admitted_from_line", "in_line"}
    signed = {"true_median_wait_min", "ours_signed_median_min", "ours_signed_share"}
    more = {"in_range_share", "no_estimate", "goal_met"}
    for run_name, loads in result["runs"].items():
        assert set(loads) == {"90"}, run_name
        f = loads["90"]
        assert set(f) == figures | ratios | counts | signed | more, run_name
        assert 0 < f["queued"] == f["admitted_from_line"] == f["in_line"] <= f["sessions"]
        assert f["history_sessions"] > 0 and f["no_estimate"] == 0
        for who in ("ours", "naive", "naive_per_gpu"):
            assert 0 <= f[f"{who}_p50_min"] <= f[f"{who}_p90_min"], (run_name, who)
        assert f["naive_x_ours_p50"] > 1 and f["naive_x_ours_p90"] > 1
        assert f["ours_x_per_gpu_p50"] > 0 and 0 <= f["in_range_share"] <= 1


def test_counts_benchmark():
    """bench_counts: a pool's row with its parts against the row without them (a cost, about 1
    for whole GPUs alone: either side); the parts it counted are the nodes' (by hand: 20 whole
    nodes of 8, 5 MIG A100s in 7 1g.10gb, 5 A10s time-sliced in 4)."""
    result = run("bench_counts.py", "--whole", 20, "--mig", 5, "--shared", 5)
    assert set(result) == {
        "nodes",
        "parts",
        "row_ms",
        "baseline_row_ms",
        "row_x_baseline",
        "row_after_a_pod_ms",
        "baseline_after_a_pod_ms",
        "after_a_pod_x_baseline",
    }
    assert result["parts"] == [
        ["whole", 160, "160"],
        ["mig", 35, "5"],
        ["shared-time-slicing", 20, "5"],
    ]
    assert result["row_ms"] > 0 and result["baseline_row_ms"] > 0
