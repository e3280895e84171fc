"""Whether bookings fit their pools (core/admission/booking_fit.py): overlapping windows, shapes,
guaranteed quotas, and the words that name the conflicting window."""

from __future__ import annotations

import datetime as dt
import random
from fractions import Fraction

from jupyter_gpupool.core.admission.booking_fit import (
    Capacity,
    booking_conflicts,
    capacity_from_rows,
    pool_guarantees,
)
from jupyter_gpupool.core.pools.model import PoolQuota, QuotaEntry
from jupyter_gpupool.core.time.bookings import Booking, Once, Weekly, Window

BERLIN = "Europe/Berlin"
TUE = 1


def cs231(gpus=40, shape="mig-1g.10gb", pool="training-pool"):
    return Booking(
        name="cs231",
        pool=pool,
        shape=shape,
        gpus=gpus,
        groups=("cs231",),
        window=Window(
            BERLIN,
            weekly=Weekly(
                (TUE,), dt.time(10), dt.time(12), dt.date(2027, 1, 12), dt.date(2027, 3, 30)
            ),
        ),
    )


def one_off(name, gpus, start, end, shape="mig-1g.10gb", pool="training-pool"):
    return Booking(
        name=name,
        pool=pool,
        shape=shape,
        gpus=gpus,
        groups=(name,),
        window=Window(BERLIN, once=Once(start, end)),
    )


MIG_40 = Capacity(units={("training-pool", "mig-1g.10gb"): 40})


def test_an_overlapping_booking_of_the_same_shape_is_named_with_both_windows():
    ml_ops = one_off("ml-ops", 6, dt.datetime(2027, 1, 19, 11), dt.datetime(2027, 1, 19, 13))
    [c] = booking_conflicts([ml_ops, cs231()], MIG_40, {})
    assert c.booking.name == "cs231"
    assert c.words() == (
        "cs231 (Tue 2027-01-19 10:00\u201312:00 Europe/Berlin) overlaps ml-ops "
        "(Tue 2027-01-19 11:00\u201313:00 Europe/Berlin): 46 of 40 mig-1g.10gb booked"
    )
    # taken the other way round, the one-off is refused
    [c] = booking_conflicts([cs231(), ml_ops], MIG_40, {})
    assert c.booking.name == "ml-ops"
    assert c.booked == 46


def test_windows_that_only_touch_do_not_overlap():
    after = one_off("ml-ops", 6, dt.datetime(2027, 1, 19, 12), dt.datetime(2027, 1, 19, 14))
    before = one_off("early", 6, dt.datetime(2027, 1, 19, 8), dt.datetime(2027, 1, 19, 10))
    assert booking_conflicts([cs231(), after, before], MIG_40, {}) == []


def test_a_conflict_in_several_windows_names_the_first_and_counts_the_rest():
    big = cs231(gpus=41)
    [c] = booking_conflicts([big], MIG_40, {})
    assert c.window.day == dt.date(2027, 1, 12)
    assert c.more_windows == 11
    assert c.words().endswith("41 of 40 mig-1g.10gb booked; and 11 more windows")


def test_other_shapes_and_other_pools_do_not_count_against_a_shape():
    other = one_off(
        "infer", 40, dt.datetime(2027, 1, 19, 10), dt.datetime(2027, 1, 19, 12), shape="mig-3g.40gb"
    )
    elsewhere = one_off(
        "dev", 40, dt.datetime(2027, 1, 19, 10), dt.datetime(2027, 1, 19, 12), pool="dev-pool"
    )
    # the pool offers both MIG shapes (a shape no node offers is refused: below)
    both = Capacity(units={**MIG_40.units, ("training-pool", "mig-3g.40gb"): 40})
    assert booking_conflicts([cs231(), other, elsewhere], both, {}) == []


def test_guaranteed_quotas_count_against_the_pools_gpus():
    quota = PoolQuota(
        user_default=QuotaEntry(guaranteed=1),  # per user: not counted
        groups={"ml": QuotaEntry(guaranteed=3), "cv": QuotaEntry(guaranteed=1, limit=4)},
        users={"carol": QuotaEntry(guaranteed=1)},
    )
    guarantees = pool_guarantees({"training-pool": quota})
    assert guarantees == {"training-pool": 5}
    capacity = Capacity(gpus={"training-pool": 8})
    a = one_off("a", 2, dt.datetime(2027, 2, 2, 9), dt.datetime(2027, 2, 2, 11), shape="whole")
    b = one_off("b", 2, dt.datetime(2027, 2, 2, 10), dt.datetime(2027, 2, 2, 12), shape="whole")
    assert booking_conflicts([a], capacity, guarantees) == []
    [c] = booking_conflicts([a, b], capacity, guarantees)
    assert c.words() == (
        "b (Tue 2027-02-02 10:00\u201312:00 Europe/Berlin) overlaps a (Tue 2027-02-02 "
        "09:00\u201311:00 Europe/Berlin): 9 of 8 GPU-equivalents booked (with 5 guaranteed by "
        "quotas)"
    )


def test_mig_bookings_count_their_gpu_equivalents():
    # 40 x 1g (1/7 each) is 40/7 GPUs: 5.71; with 3 guaranteed that is more than 8 GPUs
    capacity = Capacity(gpus={"training-pool": 8})
    assert booking_conflicts([cs231()], capacity, {"training-pool": 2}) == []
    [c] = booking_conflicts([cs231()], capacity, {"training-pool": 3})
    assert c.booked == 3 + Fraction(40, 7)
    # the nodes' own equivalent (an A30's 1g is 1/4) is taken over the id's
    a30 = Capacity(gpus={"training-pool": 8}, equivalents={"mig-1g.10gb": Fraction(1, 4)})
    [c] = booking_conflicts([cs231()], a30, {})
    assert c.booked == 10


def test_the_peak_is_what_is_in_force_at_once_not_all_that_overlaps():
    # two bookings overlap the long one, but not each other: 4 + 4 at most, never 4 + 4 + 4
    capacity = Capacity(gpus={"p": 8})
    long = one_off("long", 4, dt.datetime(2027, 5, 4, 8), dt.datetime(2027, 5, 4, 18), "whole", "p")
    am = one_off("am", 4, dt.datetime(2027, 5, 4, 9), dt.datetime(2027, 5, 4, 12), "whole", "p")
    pm = one_off("pm", 4, dt.datetime(2027, 5, 4, 13), dt.datetime(2027, 5, 4, 16), "whole", "p")
    assert booking_conflicts([long, am, pm], capacity, {}) == []
    # one across both: with 9 GPUs it fits (4 + 4 + 1 at most at once)
    mid = one_off("mid", 1, dt.datetime(2027, 5, 4, 11), dt.datetime(2027, 5, 4, 14), "whole", "p")
    assert booking_conflicts([long, am, pm, mid], Capacity(gpus={"p": 9}), {}) == []
    late = one_off(
        "late", 1, dt.datetime(2027, 5, 4, 15), dt.datetime(2027, 5, 4, 17), "whole", "p"
    )
    [c] = booking_conflicts([long, am, pm, late], capacity, {})
    assert [b.name for b, _ in c.others] == ["long", "pm"]


def test_a_refused_booking_does_not_count_against_later_ones():
    capacity = Capacity(gpus={"p": 4})
    a = one_off("a", 5, dt.datetime(2027, 5, 4, 8), dt.datetime(2027, 5, 4, 9), "whole", "p")
    b = one_off("b", 4, dt.datetime(2027, 5, 4, 8), dt.datetime(2027, 5, 4, 9), "whole", "p")
    assert [c.booking.name for c in booking_conflicts([a, b], capacity, {})] == ["a"]


def test_unknown_capacity_is_not_checked():
    assert booking_conflicts([cs231(gpus=1000)], Capacity(), {"training-pool": 99}) == []


def test_capacity_from_the_services_pool_rows():
    rows = [
        {
            "name": "training-pool",
            "gpu_total": 2,
            "shapes": [
                {"id": "mig-1g.10gb", "equivalent": "1/7", "total": 28},
                {"id": "whole", "equivalent": "1", "total": 2},
                {"id": "mig-1g.6gb", "equivalent": "1/4", "total": 4},  # an A30's
            ],
        },
        {"name": "cpu-pool", "gpu_total": 0, "shapes": []},
    ]
    cap = capacity_from_rows(rows)
    assert cap.units == {
        ("training-pool", "mig-1g.10gb"): 28,
        ("training-pool", "whole"): 2,
        ("training-pool", "mig-1g.6gb"): 4,
    }
    assert cap.gpus == {"training-pool": 7, "cpu-pool": 0}
    assert cap.equivalent("mig-1g.10gb") == Fraction(1, 7)
    assert cap.equivalent("mig-1g.6gb") == Fraction(1, 4)  # the id alone would say 1/7


def _naive_peak(windows, a, b):
    """The most held at once in [a, b), by looking at every moment a window starts: the
    rule as the documents state it, without the step function."""
    moments = {a} | {s for s, e, _ in windows if a <= s < b}
    return max(sum(n for s, e, n in windows if s <= t < e) for t in moments)


def test_the_fit_check_agrees_with_counting_every_moment():
    """Random once bookings in one pool, checked in order: each is refused exactly when
    counting every moment of its window says the pool would be over its capacity."""
    rng = random.Random(36)
    capacity = 12
    for _ in range(30):
        bookings, held = [], []
        expected = []
        for i in range(40):
            start = dt.datetime(2027, 1, 19, 0) + dt.timedelta(minutes=15 * rng.randrange(96))
            end = start + dt.timedelta(minutes=15 * rng.randrange(1, 16))
            gpus = rng.randrange(1, 6)
            b = one_off(f"b{i}", gpus, start, end, shape="whole")
            bookings.append(b)
            a, z = (
                t.replace(tzinfo=dt.timezone(dt.timedelta(hours=1))).timestamp()
                for t in (start, end)
            )
            if _naive_peak(held, a, z) + gpus > capacity:
                expected.append(b.name)
            else:
                held.append((a, z, gpus))
        found = booking_conflicts(
            bookings, Capacity(units={("training-pool", "whole"): capacity}), {}
        )
        assert [c.booking.name for c in found] == expected


#: The demo's training-pool: 16 whole A100s and one cut into seven 1g instances (17 in all).
TRAINING_POOL = Capacity(
    gpus={"training-pool": 17},
    units={("training-pool", "whole"): 16, ("training-pool", "mig-1g.10gb"): 7},
)


def test_a_shape_no_node_offers_is_refused_with_the_reason():
    capacity = TRAINING_POOL
    big = one_off(
        "big", 1, dt.datetime(2027, 1, 19, 10), dt.datetime(2027, 1, 19, 12), shape="mig-7g.80gb"
    )
    [c] = booking_conflicts([big], capacity, {})
    assert c.words() == (
        "big: no node of pool training-pool offers mig-7g.80gb (its nodes offer mig-1g.10gb, "
        "whole): nothing could hold it"
    )
    # a pool whose nodes are not known is not checked
    assert booking_conflicts([big], Capacity(), {}) == []


def test_whole_gpus_booked_count_with_the_guarantees_against_the_whole_gpus():
    capacity = TRAINING_POOL
    nine = one_off(
        "nine", 9, dt.datetime(2027, 1, 19, 10), dt.datetime(2027, 1, 19, 12), shape="whole"
    )
    [c] = booking_conflicts([nine], capacity, {"training-pool": 8})
    assert c.words().endswith("17 of 16 whole GPUs booked (with 8 guaranteed by quotas)")
    assert booking_conflicts([nine], capacity, {"training-pool": 7}) == []
    # MIG instances are not held by the guarantees (whole GPUs can serve them)
    seven = one_off("seven", 7, dt.datetime(2027, 1, 19, 10), dt.datetime(2027, 1, 19, 12))
    assert booking_conflicts([seven], capacity, {"training-pool": 8}) == []
