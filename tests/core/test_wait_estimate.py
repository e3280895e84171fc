"""The wait estimate (issues 31, 38): figures worked out by hand from the method in the module's
docstring, with a moved clock (``NOW``)."""

from __future__ import annotations

from jupyter_gpupool.core.time.wait_estimate import (
    BY_POOL,
    BY_SHAPE,
    NO_ESTIMATE,
    OUTLIVED,
    Ask,
    Coming,
    Estimate,
    Held,
    History,
    Terms,
    estimate,
    expected_end,
    staggered,
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
    # for n1's server, not for nothing
    held = [Held("p", None, 1, NOW, node="n1"), Held("p", None, 3, NOW - 600, node="n2")]
    free = {("p", None, "n1"): 1, ("p", None, "n2"): 1}
    h = history(p=[600.0, 1200.0, 1200.0, 3600.0, 3600.0])
    # n1's server (age 0) ends at its kind's median 1200 s from now, n2's (age 600) at the
    # median of the longer 1200, 1200, 3600, 3600: 2400 s from its start; so n1's ends first.
    # The first of the two to end: the chance either has ended by 600 s from now is 1/5 (n1)
    # + 2/4 (n2: those of 1200 s) = 0.7, over a half: the first end is at 600 s, n1's
    got = estimate([Ask("a", (("p", None),), 2)], held, free, h, NOW)
    assert got["a"].at == NOW + 600


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


# --- issue 38: what decides the order, and how sure it is -------------------------------------

HOUR = 3600.0


def hourly(*pools: str) -> History:
    """Every session of these pools (whole GPUs) ran an hour: a server started at ``s`` ends
    at ``s + 1 h``, and one the replay admits runs an hour."""
    return History({(p, None): [HOUR] * 5 for p in pools}, 30)


def group(name: str, guaranteed: float, limit: float) -> Terms:
    """A group's guarantee and limit in pool p (borrowing allowed), as wait_terms writes them."""
    counter = f"p group:{name}"
    return Terms(((counter, guaranteed),), ((counter, limit, guaranteed),))


def server(started: float, node: str = "n", counters: tuple[str, ...] = (), units: int = 1):
    return Held("p", None, units, started, node=node, counters=counters, amount=float(units))


def test_a_request_over_its_limit_waits_for_its_subjects_servers():
    # group g may have 2 GPUs in p (limit 2) and has them: a server ending in 30 min and
    # one in 50 min. One GPU is free now and another subject's server ends in 10 min; g's
    # request gets in only when g's first server ends, at 30 min
    g = ("p group:g",)
    held = [
        server(NOW - HOUR + 30 * MIN, counters=g),
        server(NOW - HOUR + 50 * MIN, counters=g),
        server(NOW - HOUR + 10 * MIN, counters=("p group:other",)),
    ]
    line = [Ask("x", (("p", None),), 1, (group("g", 0, 2),))]
    got = estimate(line, held, {("p", None, "n"): 1}, hourly("p"), NOW)["x"]
    assert got.at == NOW + 30 * MIN
    assert got.words == "about 30 min, from the last 30 days of p; waits for its quota"


def test_a_user_limit_is_a_cap_whatever_the_group():
    # within the group's guarantee, but the user's own limit (1 GPU in p) is used up by their
    # server ending in 40 min: the free GPU is not theirs before that
    me = ("p group:g", "p all of user:u")
    held = [server(NOW - HOUR + 40 * MIN, counters=me)]
    terms = Terms((("p group:g", 8.0),), (), True, (("p all of user:u", 1.0),))
    line = [Ask("x", (("p", None),), 1, (terms,))]
    got = estimate(line, held, {("p", None, "n"): 1}, hourly("p"), NOW)["x"]
    assert got.at == NOW + 40 * MIN


def test_fair_share_ranks_again_as_servers_come_and_go():
    # a (group A: 1 of its 2 guaranteed GPUs used, by a server ending in 60 min) came first,
    # then b1 and b2 (group B: none of its 2 used). Shares: a 1/2, b 0, so b1 goes first when a
    # GPU comes free at 10 min; then B's share is 1/2 too, the tie goes to who came first: a,
    # at 20 min, and b2 waits for the next end, A's server's at 60 min
    held = [
        server(NOW - HOUR + 10 * MIN),
        server(NOW - HOUR + 20 * MIN),
        server(NOW, counters=("p group:A",)),
    ]
    line = [
        Ask("a", (("p", None),), 1, (group("A", 2, 4),)),
        Ask("b1", (("p", None),), 1, (group("B", 2, 4),)),
        Ask("b2", (("p", None),), 1, (group("B", 2, 4),)),
    ]
    got = estimate(line, held, {}, hourly("p"), NOW)
    assert [got[x].at for x in ("b1", "a", "b2")] == [NOW + 10 * MIN, NOW + 20 * MIN, NOW + HOUR]


def test_within_quota_goes_ahead_and_holds_its_pool_back_from_borrowers():
    # b borrows (group B has no guarantee) and came first; w (group W, 2 guaranteed) needs 2 GPUs
    # on the node. A GPU comes free at 10 min, another at 20: b may not take the first while w
    # waits within quota there, so w gets both at 20 min and b the next end, w's own, at 80
    held = [server(NOW - HOUR + 10 * MIN), server(NOW - HOUR + 20 * MIN)]
    line = [
        Ask("b", (("p", None),), 1, (group("B", 0, 4),)),
        Ask("w", (("p", None),), 2, (group("W", 2, 4),)),
    ]
    got = estimate(line, held, {}, hourly("p"), NOW)
    assert (got["w"].at, got["b"].at) == (NOW + 20 * MIN, NOW + 80 * MIN)


def test_what_a_request_within_quota_holds_back_the_pool_or_its_shape():
    # w waits within quota for 2 whole GPUs of p (none free); b borrows a MIG instance of p,
    # one free now. As admission does it today (BY_POOL) b waits while w does: w gets in when
    # the server ends (at 1 h), b too (the MIG instance was free all along); held back by
    # shape (BY_SHAPE, issue 38's line by shape) b gets its instance now
    mig = ("p", "mig-1g.10gb")
    history = History({("p", None): [HOUR] * 5, mig: [HOUR] * 5}, 30)
    held = [server(NOW, units=2)]
    line = [
        Ask("w", (("p", None),), 2, (group("W", 2, 4),)),
        Ask("b", (mig,), 1, (group("B", 0, 4),)),
    ]
    free = {("p", "mig-1g.10gb", None): 1}
    by_pool = estimate(line, held, free, history, NOW, hold_back=BY_POOL)
    assert (by_pool["w"].at, by_pool["b"].at) == (NOW + HOUR, NOW + HOUR)
    by_shape = estimate(line, held, free, history, NOW, hold_back=BY_SHAPE)
    assert (by_shape["w"].at, by_shape["b"].at) == (NOW + HOUR, NOW)


def test_a_request_further_back_that_fits_goes_ahead():
    # one GPU free now, the node's other GPU held until 30 min: big (2 GPUs, first in line)
    # does not fit, small (1 GPU) behind it does and goes in now; big then waits until both
    # are free: small's end, an hour after it started
    held = [server(NOW - HOUR + 30 * MIN)]
    line = [Ask("big", (("p", None),), 2), Ask("small", (("p", None),), 1)]
    got = estimate(line, held, {("p", None, "n"): 1}, hourly("p"), NOW)
    assert (got["small"].at, got["big"].at) == (NOW, NOW + HOUR)


def test_a_request_takes_the_first_of_its_shapes_that_lets_it_in():
    # it asks for a MIG instance first, then a whole GPU: no instance comes free before 30
    # min, a whole GPU at 10 min; at 10 min its first choice that fits is the whole GPU
    mig = ("p", "mig-1g.10gb")
    history = History({("p", None): [HOUR] * 5, mig: [HOUR] * 5}, 30)
    held = [
        Held("p", "mig-1g.10gb", 1, NOW - HOUR + 30 * MIN),
        server(NOW - HOUR + 10 * MIN),
    ]
    got = estimate([Ask("x", (mig, ("p", None)), 1)], held, {}, history, NOW)["x"]
    assert (got.at, got.pool) == (NOW + 10 * MIN, "p")
    assert got.words == "about 10 min, from the last 30 days of p"


def test_the_range_comes_from_the_spread_of_the_durations():
    # one server, started now, holds the only GPU; its kind ran 10, 20, 30, 40 and 50 min. The
    # chance it has ended: 1/5 by 10 min, 2/5 by 20, 3/5 by 30, 4/5 by 40. Its end: the median
    # at 30 min (3/5 is the first over a half); the range, where the chance is a half within
    # 0.67 standard deviations (sd = sqrt(p(1-p))): from 20 min (0.4 + 0.67 x 0.49 = 0.73) to
    # 40 min (0.8 - 0.67 x 0.4 = 0.53; at 30 min 0.6 - 0.67 x 0.49 = 0.27)
    h = History({("p", None): [600.0, 1200.0, 1800.0, 2400.0, 3000.0]}, 30)
    got = estimate([Ask("x", (("p", None),), 1)], [server(NOW)], {}, h, NOW)["x"]
    assert (got.at, got.low, got.high) == (NOW + 30 * MIN, NOW + 20 * MIN, NOW + 40 * MIN)
    assert got.words == "about 20-40 min, from the last 30 days of p"


def test_the_first_of_many_busy_servers_ends_sooner_than_any_ones_median():
    # four servers started now, each expected (its median) to run 30 min of the 10-50 min its
    # kind ran; but one of four ends much sooner: by 10 min the four have ended 4 x 1/5 = 0.8
    # on average, over a half. The j-th end is where that count first reaches j - 1/2: 10, 20,
    # 40 and 50 min (by 30 min it is 4 x 3/5 = 2.4, short of 2.5)
    durations = [600.0, 1200.0, 1800.0, 2400.0, 3000.0]
    ends = staggered([server(NOW) for _ in range(4)], durations, NOW)
    assert [mid for mid, _, _ in ends] == [NOW + m * MIN for m in (10, 20, 40, 50)]
    h = History({("p", None): durations}, 30)
    got = estimate(
        [Ask("x", (("p", None),), 1)], [server(NOW, node=f"n{i}") for i in range(4)], {}, h, NOW
    )
    assert got["x"].at == NOW + 10 * MIN


def test_a_server_the_replay_admits_runs_the_median():
    # sessions of 10, 10, 10, 10 and 60 min: median 10 min (mean 20). a gets the GPU when the
    # server started now ends (10 min: 4/5 by then) and holds it the median, 10 min: b at 20
    h = History({("p", None): [600.0] * 4 + [3600.0]}, 30)
    line = [Ask("a", (("p", None),), 1), Ask("b", (("p", None),), 1)]
    got = estimate(line, [server(NOW)], {}, h, NOW)
    assert (got["a"].at, got["b"].at) == (NOW + 10 * MIN, NOW + 20 * MIN)


def test_a_range_in_words_stays_one_short_line():
    from jupyter_gpupool.core.time.wait_estimate import wait_words

    def words(wait: float, low: float, high: float) -> str:
        return wait_words(wait * MIN, ("p", None), 30, low=low * MIN, high=high * MIN)

    assert words(25, 18, 44) == "about 20-45 min, from the last 30 days of p"
    assert words(60, 45, 90) == "about 45 min-1 h 30 min, from the last 30 days of p"
    assert words(5, 0.5, 12) == "within 10 min, from the last 30 days of p"
    assert words(0.2, 0, 0.5) == "any moment now, from the last 30 days of p"
    assert words(23, 23, 24) == "about 25 min, from the last 30 days of p"  # alike once rounded


def test_only_the_first_of_a_long_line_are_replayed():
    from jupyter_gpupool.core.time.wait_estimate import MAX_LINE

    line = [Ask(f"x{i}", (("p", None),), 1) for i in range(MAX_LINE + 1)]
    free = {("p", None, "n"): MAX_LINE + 1}  # room for all of them now
    got = estimate(line, [], free, hourly("p"), NOW)
    assert got[f"x{MAX_LINE - 1}"].at == NOW
    assert got[f"x{MAX_LINE}"] == Estimate(None)


# --- re-cuts (issue 41) -----------------------------------------------------------------------------

SEVEN = "mig-7g.80gb"
RECUT_WHY = "gpu-node-2 is re-cut into 7g.80gb instances"


def test_a_shape_only_a_re_cut_brings_is_estimated_at_the_re_cuts_end():
    # no node offers 7g.80gb and none ran here: no history, but a re-cut brings 8 in 2 min;
    # the first eight in line get in then, the ninth gets no estimate (nothing frees one)
    coming = [Coming("p", SEVEN, 8, NOW + 120, RECUT_WHY)]
    line = [Ask(f"a{i}", (("p", SEVEN),), 1) for i in range(9)]
    got = estimate(line, [], {}, History({}, 30), NOW, coming=coming)
    assert {got[f"a{i}"].at for i in range(8)} == {NOW + 120}
    assert (got["a0"].low, got["a0"].high) == (NOW + 120, NOW + 120)
    assert got["a0"].words == (
        "about 2 min, once gpu-node-2 is re-cut into 7g.80gb instances (shapes: approximate)"
    )
    assert got["a8"].at is None and got["a8"].words == NO_ESTIMATE
    # without the re-cut, none of them has an estimate
    assert estimate(line, [], {}, History({}, 30), NOW)["a0"].at is None


def test_a_request_only_a_re_cut_serves_is_never_estimated_before_it_ends():
    # 7g.80gb servers of this pool run 10 min; the one running ends in 5: the first in line
    # gets its instance then, the second waits for the re-cut's end in 15 min, not sooner
    held = [Held("p", SEVEN, 1, NOW - 300)]
    h = History({("p", SEVEN): [600.0] * 5}, 30)
    coming = [Coming("p", SEVEN, 1, NOW + 900, RECUT_WHY)]
    line = [Ask("a", (("p", SEVEN),), 1), Ask("b", (("p", SEVEN),), 1)]
    got = estimate(line, held, {}, h, NOW, coming=coming)
    assert got["a"].at == NOW + 300
    assert got["b"].at == NOW + 900 and got["b"].words.startswith("about 15 min, once gpu-node-2")
    # a re-cut whose time has passed (overdue) brings its units now, never in the past
    late = [Coming("p", SEVEN, 1, NOW - 60, RECUT_WHY)]
    assert estimate(line[1:], [], {}, h, NOW, coming=late)["b"].at == NOW


def test_a_node_going_back_to_whole_gpus_brings_them_on_that_node():
    # a 4-GPU request: the whole GPUs a re-cut brings back come on one node, gpu-node-2
    coming = [Coming("p", None, 8, NOW + 120, "gpu-node-2 goes back to whole GPUs", "gpu-node-2")]
    free = {("p", None, "n1"): 2}
    got = estimate([Ask("a", (("p", None),), 4)], [], free, History({}, 30), NOW, coming=coming)
    assert got["a"].at == NOW + 120 and "gpu-node-2 goes back to whole GPUs" in got["a"].words
