"""The wait estimate (issue 31): figures worked out by hand from the method in the module's
docstring, with a moved clock (``NOW``)."""

from __future__ import annotations

from jupyter_gpupool.core.time.wait_estimate import (
    NO_ESTIMATE,
    OUTLIVED,
    Ask,
    Held,
    History,
    estimate,
    expected_end,
)

NOW = 1_800_000_000.0
MIN = 60.0


def history(**pools: list[float]) -> History:
    return History({(p.replace("_", "-"), None): sorted(d) for p, d in pools.items()}, 30)


def test_no_history_no_estimate():
    held = [Held("training-pool", None, 1, NOW - 600)]
    few = history(training_pool=[1200.0] * 4)  # one short of the minimum
    got = estimate([Ask("a", (("training-pool", None),), 1)], held, {}, few, NOW)
    assert got["a"].at is None
    assert got["a"].words == NO_ESTIMATE


def test_conditional_median_of_the_longer_sessions():
    h = Held("p", None, 1, NOW - 1500)
    # of 600, 1200, 1800, 2400, 6000 s, those longer than its 1500 s: 1800, 2400, 6000
    assert expected_end(h, [600, 1200, 1800, 2400, 6000], NOW) == (NOW - 1500 + 2400, "history")


def test_a_server_that_outlived_every_session_gets_a_fixed_remainder():
    h = Held("p", None, 1, NOW - 9000)
    assert expected_end(h, [600.0] * 5, NOW) == (NOW + OUTLIVED, "outlived")


def test_a_sure_end_from_an_idle_stop_comes_first():
    # history: 3600 s sessions; the server started 10 min ago would end in 50 min, but the
    # idle policy stops it in 5 min
    held = [Held("training-pool", None, 1, NOW - 600, NOW + 300, "an idle stop")]
    got = estimate(
        [Ask("a", (("training-pool", None),), 1)],
        held,
        {},
        history(training_pool=[3600.0] * 5),
        NOW,
    )
    assert got["a"].at == NOW + 300
    assert got["a"].words == (
        "about 5 min, from the last 30 days of training-pool and an idle stop ahead"
    )


def test_two_ahead_each_waits_for_the_one_before():
    # one GPU, held since now; sessions of 20 min: the first in line gets it in 20 min, runs
    # 20 min; the second gets it then, the third 20 min later
    held = [Held("p", None, 1, NOW)]
    line = [Ask(x, (("p", None),), 1) for x in "abc"]
    got = estimate(line, held, {}, history(p=[1200.0] * 5), NOW)
    assert [got[x].at for x in "abc"] == [NOW + 20 * MIN, NOW + 40 * MIN, NOW + 60 * MIN]
    assert got["a"].words == "about 20 min, from the last 30 days of p"
    assert got["c"].words == "about 1 h, from the last 30 days of p"


def test_free_gpus_are_taken_first_then_the_earliest_end():
    # 1 GPU free now, 1 held ending in 10 min: a 2-GPU request gets both in 10 min
    held = [Held("p", None, 1, NOW), Held("p", None, 1, NOW - 20 * MIN)]
    # sessions of 10 and 30 min (and longer): the one 20 min old ends at 30, the new at 10+
    got = estimate(
        [Ask("a", (("p", None),), 2)],
        held,
        {("p", None, None): 1},
        history(p=[600.0, 600.0, 1800.0, 1800.0, 1800.0]),
        NOW,
    )
    # the new server: median of all five = 1800 s; the old (20 min): longer ones 1800 -> 10 min
    assert got["a"].at == NOW + 10 * MIN


def test_several_pools_take_the_earliest():
    held = [Held("a", None, 1, NOW), Held("b", None, 1, NOW)]
    h = history(a=[3000.0] * 5, b=[600.0] * 5)
    line = [Ask("x", (("a", None), ("b", None)), 1)]
    got = estimate(line, held, {}, h, NOW)
    assert (got["x"].at, got["x"].pool) == (NOW + 600, "b")


def test_a_pool_without_history_leaves_the_others():
    held = [Held("a", None, 1, NOW), Held("b", None, 1, NOW)]
    h = history(b=[3000.0] * 5)
    got = estimate([Ask("x", (("a", None), ("b", None)), 1)], held, {}, h, NOW)
    assert (got["x"].at, got["x"].pool) == (NOW + 3000, "b")


def test_shapes_are_counted_per_shape_and_said_approximate():
    held = [Held("p", "mig-1g.10gb", 1, NOW), Held("p", None, 1, NOW)]
    h = History({("p", "mig-1g.10gb"): [900.0] * 5, ("p", None): [3600.0] * 5}, 7)
    got = estimate([Ask("x", (("p", "mig-1g.10gb"),), 1)], held, {}, h, NOW)
    assert got["x"].at == NOW + 900
    assert got["x"].words == (
        "about 15 min, from the last 7 days of p (mig-1g.10gb) (shapes: approximate)"
    )


def test_whole_gpus_are_counted_per_node():
    # one GPU free on each of two nodes: a 2-GPU request needs them on one node, so it waits
    # for n1's server (10 min), not for nothing
    held = [Held("p", None, 1, NOW, node="n1"), Held("p", None, 3, NOW - 600, node="n2")]
    free = {("p", None, "n1"): 1, ("p", None, "n2"): 1}
    h = history(p=[600.0, 1200.0, 1200.0, 3600.0, 3600.0])
    # n1's server (age 0): median of all = 1200 s; n2's (age 600): of 1200, 1200, 3600, 3600
    # the median 2400 s from its start, 1800 s from now
    got = estimate([Ask("a", (("p", None),), 2)], held, free, h, NOW)
    assert got["a"].at == NOW + 1200


def test_the_words_round_coarser_as_the_wait_grows():
    from jupyter_gpupool.core.time.wait_estimate import wait_words

    words = [wait_words(m * MIN, ("p", None), 30).split(",")[0] for m in (0.5, 7, 23, 62, 97)]
    assert words == [
        "any moment now",
        "about 7 min",
        "about 25 min",
        "about 1 h",
        "about 1 h 40 min",
    ]
