"""Bookings plan the layout (core/admission/booking_layout.py, through booking_fit): a booking
of a MIG shape fits a pool whose file lets nodes be re-cut when some layout of those nodes
offers it beside the whole GPUs the other bookings and the guarantees need.

Every count is by hand from the GPU operator's default configs: an 8 x A100-SXM4-80GB node is
8 whole GPUs as all-disabled, 56 x 1g.10gb as all-1g.10gb, 16 x 1g.10gb + 8 x 2g.20gb + 8 x
3g.40gb as all-balanced. The pool: fixed, 8 whole GPUs (gpu-node-1) and 2 x 1g.10gb (a small
MIG node); the nodes it may re-cut, 8 whole A100s each (gpu-node-2, gpu-node-3)."""

from __future__ import annotations

import datetime as dt

from jupyter_gpupool.core.admission.booking_fit import Capacity, booking_conflicts
from jupyter_gpupool.core.admission.booking_layout import (
    booking_recuts,
    choose_layout,
    needed_at_home,
    pool_layout,
)
from jupyter_gpupool.core.admission.recut import NodeCut, RecutPolicy
from jupyter_gpupool.core.documents.mig_parted import DEFAULT_CONFIGS
from jupyter_gpupool.core.time.bookings import Booking, Once, Window

A100 = "NVIDIA-A100-SXM4-80GB"
POOL = "training-pool"
MIG = "mig-1g.10gb"
CONFIGS = ("all-disabled", "all-1g.10gb", "all-balanced")


def policy(*nodes: str) -> RecutPolicy:
    return RecutPolicy(nodes=nodes, configs=CONFIGS, home="all-disabled")


def cut(name: str, config: str = "all-disabled", pods: int = 0, **kw) -> NodeCut:
    return NodeCut(name, A100, 8, config, "success", pods, **kw)


def layout(*names: str):
    return pool_layout(
        POOL, policy(*names), DEFAULT_CONFIGS, [cut(n) for n in names], lambda n: {"whole": 8}
    )


def capacity(recut_nodes: int = 1) -> Capacity:
    # what the pool's rows say now: 8 whole on gpu-node-1, 8 on each node that may be re-cut,
    # and the small MIG node's two instances
    return Capacity(
        gpus={POOL: 8 + 8 * recut_nodes + 2 * 1},
        units={(POOL, "whole"): 8 + 8 * recut_nodes, (POOL, MIG): 2},
    )


def once(name: str, gpus: int, day: int, shape: str = MIG, start: int = 10, end: int = 12):
    return Booking(
        name,
        POOL,
        Window("UTC", once=Once(dt.datetime(2027, 1, day, start), dt.datetime(2027, 1, day, end))),
        gpus,
        shape,
        groups=(name,),
    )


def test_a_booking_of_40_instances_fits_when_an_allowed_node_can_be_re_cut_into_them():
    lab = once("cs-lab", 40, 19)
    # without the layout, the two instances there are now are all there is
    [c] = booking_conflicts([lab], capacity(), {})
    assert c.words().endswith("40 of 2 mig-1g.10gb booked")
    assert booking_conflicts([lab], capacity(), {}, {POOL: layout("gpu-node-2")}) == []
    # and the layout that makes it: gpu-node-2 cut into 56, beside the two: 58
    lay = layout("gpu-node-2")
    choice = choose_layout(lay, {"whole": 8, MIG: 2}, {MIG: 40}, 0, lambda s: _eq(s))
    assert choice.cuts == (("gpu-node-2", "all-1g.10gb"),) and choice.short is None
    assert choice.supply == {"whole": 8, MIG: 58}


def _eq(shape: str):
    from jupyter_gpupool.core.time.bookings import shape_id_equivalent

    return shape_id_equivalent(shape)


def test_a_re_cut_must_leave_the_whole_gpus_the_guarantees_need():
    # 14 guaranteed: cutting gpu-node-2 would leave 8 whole GPUs: refused, and said why
    lab = once("cs-lab", 40, 19)
    [c] = booking_conflicts([lab], capacity(), {POOL: 14}, {POOL: layout("gpu-node-2")})
    assert c.words() == (
        "cs-lab (Tue 2027-01-19 10:00\u201312:00 UTC): 40 of 2 mig-1g.10gb booked "
        "(38 missing); re-cutting gpu-node-2 to all-1g.10gb would offer 58 but leave 8 of 14 "
        "whole GPUs booked or guaranteed"
    )
    # 8 guaranteed leave room for it
    assert booking_conflicts([lab], capacity(), {POOL: 8}, {POOL: layout("gpu-node-2")}) == []


def test_a_node_re_cut_for_a_booking_no_longer_offers_its_whole_gpus_and_vice_versa():
    lab = once("cs-lab", 40, 19)
    nine = once("whole-nine", 9, 19, shape="whole", start=11, end=13)
    lay = {POOL: layout("gpu-node-2")}
    [c] = booking_conflicts([lab, nine], capacity(), {}, lay)
    assert c.booking.name == "whole-nine"
    assert c.words() == (
        "whole-nine (Tue 2027-01-19 11:00\u201313:00 UTC) overlaps cs-lab (Tue 2027-01-19 "
        "10:00\u201312:00 UTC): 9 of 8 whole GPUs booked (1 missing), counting gpu-node-2 "
        "re-cut to all-1g.10gb for the 40 mig-1g.10gb booked"
    )
    # the other way round, the whole-GPU booking holds gpu-node-2 whole and the lab is refused
    [c] = booking_conflicts([nine, lab], capacity(), {}, lay)
    assert c.booking.name == "cs-lab"
    # eight whole GPUs fit beside the lab (gpu-node-1's)
    eight = once("whole-eight", 8, 19, shape="whole", start=11, end=13)
    assert booking_conflicts([lab, eight], capacity(), {}, lay) == []
    # windows that do not meet do not share a layout
    other_day = once("whole-nine", 9, 20, shape="whole")
    assert booking_conflicts([lab, other_day], capacity(), {}, lay) == []


def test_the_moment_a_later_window_starts_inside_one_is_checked_too():
    # the lab from 10 to 12; a whole-GPU booking of 9 from 11: fine at 10, not at 11
    lab = once("cs-lab", 40, 19)
    nine = once("whole-nine", 9, 19, shape="whole", start=9, end=11)
    late = once("late-nine", 9, 19, shape="whole", start=11, end=13)
    lay = {POOL: layout("gpu-node-2")}
    # one that began before the lab and runs into it, and one that starts inside it
    [c] = booking_conflicts([nine, lab], capacity(), {}, lay)
    assert c.booking.name == "cs-lab"
    [c] = booking_conflicts([late, lab], capacity(), {}, lay)
    assert c.booking.name == "cs-lab" and [b.name for b, _ in c.others] == ["late-nine"]


def test_two_nodes_for_60_and_no_more_nodes_than_needed():
    lay = layout("gpu-node-2", "gpu-node-3")
    eq = _eq
    fixed = {"whole": 8, MIG: 2}
    assert choose_layout(lay, fixed, {MIG: 40}, 0, eq).cuts == (("gpu-node-2", "all-1g.10gb"),)
    sixty = choose_layout(lay, fixed, {MIG: 60}, 0, eq)
    assert sorted(sixty.cuts) == [("gpu-node-2", "all-1g.10gb"), ("gpu-node-3", "all-1g.10gb")]
    assert sixty.supply[MIG] == 114 and sixty.short is None
    # more than both nodes make: refused with the most they could offer
    lab = once("cs-lab", 120, 19)
    [c] = booking_conflicts([lab], capacity(2), {}, {POOL: lay})
    assert c.words().endswith(
        "120 of 114 mig-1g.10gb booked (6 missing), counting gpu-node-2 re-cut to "
        "all-1g.10gb, gpu-node-3 re-cut to all-1g.10gb; re-cutting gpu-node-2 to all-1g.10gb, gpu-node-3 to "
        "all-1g.10gb would offer 114 at most"
    ), c.words()


def test_a_shape_no_allowed_config_makes_is_not_offered():
    big = once("big", 1, 19, shape="mig-7g.80gb")
    [c] = booking_conflicts([big], capacity(), {}, {POOL: layout("gpu-node-2")})
    assert "nor could re-cutting the nodes its file allows: nothing could hold it" in c.words()
    # a shape no node offers now but a re-cut makes: fits
    three = once("threes", 8, 19, shape="mig-3g.40gb")
    assert booking_conflicts([three], capacity(), {}, {POOL: layout("gpu-node-2")}) == []


def test_the_watch_re_cuts_only_nodes_free_to_change_that_are_not_so_cut_yet():
    lay = layout("gpu-node-2", "gpu-node-3")
    choice = choose_layout(lay, {"whole": 8, MIG: 2}, {MIG: 60}, 0, _eq)
    pol = policy("gpu-node-2", "gpu-node-3")
    nodes = [cut("gpu-node-2", "all-1g.10gb"), cut("gpu-node-3", pods=1)]
    assert booking_recuts(pol, lay, nodes, choice, 1e6, lambda u: (MIG, 60, "for it")) == []
    nodes = [cut("gpu-node-2"), cut("gpu-node-3", last_change=1e6 - 60)]
    made = booking_recuts(pol, lay, nodes, choice, 1e6, lambda u: (MIG, 60, "for it"))
    assert [(r.node, r.config, r.shape, r.reason) for r in made] == [
        ("gpu-node-2", "all-1g.10gb", MIG, "for it")
    ]


def test_a_node_already_cut_so_is_chosen_before_one_that_would_have_to_change():
    pol = policy("gpu-node-2", "gpu-node-3")
    nodes = [cut("gpu-node-2"), cut("gpu-node-3", "all-1g.10gb")]
    lay = pool_layout(POOL, pol, DEFAULT_CONFIGS, nodes, lambda n: {"whole": 8})
    choice = choose_layout(lay, {"whole": 8, MIG: 2}, {MIG: 40}, 0, _eq)
    assert choice.cuts == (("gpu-node-3", "all-1g.10gb"),)


def test_a_long_window_that_began_days_before_is_met():
    # nine whole GPUs from the 18th to the 21st, then many short windows: the lab on the 19th
    # still meets the long one (found among the windows that began before it)
    long = Booking(
        "long-nine",
        POOL,
        Window("UTC", once=Once(dt.datetime(2027, 1, 18), dt.datetime(2027, 1, 21))),
        9,
        "whole",
        users=("bob",),
    )
    short = [once(f"s{h}", 1, 18, shape="whole", start=h, end=h + 1) for h in range(12)]
    [c] = booking_conflicts(
        [long, *short, once("cs-lab", 40, 19)], capacity(), {}, {POOL: layout("gpu-node-2")}
    )
    assert c.booking.name == "cs-lab" and [b.name for b, _ in c.others] == ["long-nine"]


def test_the_nodes_a_moment_needs_at_home_are_held_unless_it_is_short_anyway():
    lay = layout("gpu-node-2", "gpu-node-3")
    fixed = {"whole": 8, MIG: 2}
    # 16 whole GPUs booked beside 8 guaranteed: 24 whole, all three nodes whole
    whole = choose_layout(lay, fixed, {"whole": 16}, 8, _eq)
    assert whole.cuts == () and whole.short is None
    assert needed_at_home(lay, whole, {"whole": 16}, 8, _eq) == ["gpu-node-2", "gpu-node-3"]
    # 8 booked and nothing guaranteed: cutting either leaves 16 whole GPUs, neither is held
    eight = choose_layout(lay, fixed, {"whole": 8}, 0, _eq)
    assert needed_at_home(lay, eight, {"whole": 8}, 0, _eq) == []
    # 30 whole booked: short whatever is kept, so the line is not held back
    short = choose_layout(lay, fixed, {"whole": 30}, 0, _eq)
    assert short.short is not None
    assert needed_at_home(lay, short, {"whole": 30}, 0, _eq) == []
