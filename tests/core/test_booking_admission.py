"""Bookings at work in admission: members first within a booking in force, booked units lent
only as over-quota (reclaimable) servers, the borrowers to stop at a window's start, and a
booking's servers reclaimable once its window is over.

The clock is the decision's ``now``; the pods that "run" are built from the decisions'
overrides, as the spawner builds them, so the index counts what a real pod would make it count.
"""

from __future__ import annotations

import datetime as dt

from k8s_factories import node

from jupyter_gpupool.core.admission.booking_charge import booking_ledger
from jupyter_gpupool.core.admission.decision import Context
from jupyter_gpupool.core.admission.queue import Waiting, order
from jupyter_gpupool.core.admission.walk import AdmissionRequest, AdmissionState, Decision, decide
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.core.time.bookings_in_force import Calendar, ended_servers, to_free
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservations


def at(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp()


START, END = at("2027-01-12T10:00"), at("2027-01-12T12:00")

POOLS = """
kind: pool
version: v0.1
pool: {name: dev-pool}
---
kind: quota
version: v0.1
quota: {name: dev}
pools:
  dev-pool:
    borrowing: true
    groups:
      staff: {guaranteed: 2, limit: 4}
    user-default: {limit: 4}
---
kind: booking
version: v0.1
booking: {name: ml-lab}
pool: dev-pool
gpus: 2
groups: [ml-ops]
window: {once: {start: "2027-01-12T10:00", end: "2027-01-12T12:00"}, timezone: UTC}
"""


class World:
    def __init__(self, text: str = POOLS, gpus: int = 4):
        self.registry = load_string(text)
        self.calendar = Calendar(self.registry.bookings)
        self.reservations = Reservations()
        self.index = UsageIndex(on_admission=self.reservations.observe)
        self.index.apply_node("ADDED", node("n1", "dev-pool", gpus))
        self.count = 0
        self.now = START - 3600

    def state(self) -> AdmissionState:
        return AdmissionState(
            self.registry, self.index, self.reservations, now=self.now, bookings=self.calendar
        )

    def request(self, user: str, groups=(), gpus: int = 1) -> AdmissionRequest:
        self.count += 1
        return AdmissionRequest(
            user, tuple(groups), ("dev-pool",), gpus, admission_id=f"adm-{self.count}"
        )

    def run(self, user: str, groups=(), gpus: int = 1, created: float | None = None) -> Decision:
        """Admit and let the pod run (it is counted by the index from then on)."""
        d = decide(self.request(user, groups, gpus), self.state())
        assert d.admitted, d.message
        o = d.overrides
        when = dt.datetime.fromtimestamp(created or self.now, dt.timezone.utc)
        pod = {
            "metadata": {
                "name": f"jupyter-{d.request.admission_id}",
                "namespace": "jhub",
                "uid": d.request.admission_id,
                "labels": dict(o["labels"]),
                "annotations": dict(o["annotations"]),
                "creationTimestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "spec": {
                "nodeName": d.node,
                "containers": [{"name": "notebook", "resources": dict(o["resources"])}],
            },
            "status": {"phase": "Running"},
        }
        self.index.apply_pod("ADDED", pod)
        return d


def test_outside_its_window_a_booking_holds_nothing():
    w = World()
    # an hour before: no GPU is kept, alice borrows all four (no guarantee of her own)
    first = w.run("alice", gpus=4)
    assert (first.charged, first.over_quota) == ("user:alice", True)
    w.now = START  # in the window a member takes her GPUs back
    d = decide(w.request("carol", ["ml-ops"]), w.state())
    assert d.reclaim is not None and [v.user for v in d.reclaim.victims] == ["alice"]
    w.now = END  # after it (the end is not in it), nothing is kept and nobody is first
    late = decide(w.request("carol", ["ml-ops"]), w.state())
    assert not late.admitted and late.reclaim is None


def test_a_member_is_admitted_within_the_booking_before_quota_and_beyond_it_by_quota():
    w = World()
    w.now = START
    a = w.run("carol", ["ml-ops"])
    b = w.run("dan", ["ml-ops"])
    assert (a.charged, a.over_quota) == ("booking:ml-lab", False)
    assert (b.charged, b.over_quota) == ("booking:ml-lab", False)
    # the booking's 2 are used: the next member is an ordinary request (no quota of his own:
    # user-default has a limit and no guarantee, so he borrows)
    c = w.run("erin", ["ml-ops"])
    assert (c.charged, c.over_quota) == ("user:erin", True)
    # the booking's servers count against no member's quota
    assert w.index.subject_used("dev-pool", "booking:ml-lab") == 2


def test_booked_units_nobody_uses_are_lent_only_over_quota():
    w = World()
    w.now = START + 60
    # staff is guaranteed 2: two of the four are free of bookings, the other two are booked
    s1 = w.run("sam", ["staff"])
    s2 = w.run("sue", ["staff"])
    assert not s1.over_quota and not s2.over_quota
    # a third staff server would be within the group's limit, but takes a booked GPU: borrowed
    s3 = w.run("sid", ["staff"])
    assert (s3.charged, s3.over_quota) == ("group:staff", True)
    # a member asks: the one free booked GPU is hers, within the booking
    m = w.run("carol", ["ml-ops"])
    assert (m.charged, m.over_quota) == ("booking:ml-lab", False)
    # the pool is full; the next member reclaims the borrower, not a staff server
    d = decide(w.request("dan", ["ml-ops"]), w.state())
    assert not d.admitted and d.reclaim is not None
    assert [v.user for v in d.reclaim.victims] == ["sid"]


def test_at_the_window_start_borrowers_from_before_it_are_stopped_newest_first():
    w = World()
    w.run("old", gpus=1, created=START - 3000)
    w.run("mid", gpus=1, created=START - 2000)
    w.run("new", gpus=2, created=START - 1000)  # all four in use, all within user limits
    # quota charged them as users without guarantee in a borrowing pool: over quota
    assert all(s.over_quota for s in w.index.servers(pool="dev-pool"))
    w.now = START
    ctx = Context(w.request("nobody"), w.state())
    ledger = booking_ledger(ctx, "dev-pool", None)
    assert ledger is not None and ledger.held() == 2 and ledger.free == 0
    stop = to_free(ledger, w.index.servers(pool="dev-pool"), START)
    assert [s.user for s in stop] == ["new"]  # 2 GPUs: enough, and the newest
    # had "new" come after the window's start, it would not be stopped at the start: the two
    # that came before it are, newest first
    later = to_free(ledger, w.index.servers(pool="dev-pool"), START - 1500)
    assert [s.user for s in later] == ["mid", "old"]


def test_a_booking_that_ends_leaves_its_servers_running_and_reclaimable():
    w = World()
    w.now = START
    w.run("carol", ["ml-ops"], gpus=2)
    w.run("sam", ["staff"], gpus=2)
    w.now = END - 1
    assert ended_servers(w.index.servers(pool="dev-pool"), w.calendar, w.now) == []
    w.now = END
    ended = ended_servers(w.index.servers(pool="dev-pool"), w.calendar, w.now)
    assert [s.user for s in ended] == ["carol"]
    # staff asks within its guarantee... it has it in use; a new staff member with nothing
    # free reclaims carol's server, which borrows now
    extra = decide(w.request("sue", ["staff"]), w.state())
    assert not extra.admitted and extra.reclaim is None  # staff's 2 guaranteed are in use
    w.registry = load_string(POOLS.replace("guaranteed: 2, limit: 4", "guaranteed: 4, limit: 4"))
    d = decide(w.request("sue", ["staff"]), w.state())
    assert d.reclaim is not None and [v.user for v in d.reclaim.victims] == ["carol"]


def test_the_line_puts_a_member_within_the_booking_first_from_the_window_start():
    w = World()
    w.run("alice", gpus=4, created=START - 600)
    borrower = Waiting(w.request("bob"), seq=1, since=START - 500)
    member = Waiting(w.request("carol", ["ml-ops"]), seq=2, since=START - 400)
    w.now = START - 60
    before = [x.id for x, _ in order([borrower, member], w.state())]
    assert before == [borrower.id, member.id]  # both would borrow: first come first
    w.now = START
    after = order([borrower, member], w.state())
    assert [x.id for x, _ in after] == [member.id, borrower.id]
    assert after[0][1].within and after[0][1].subject == "booking:ml-lab"


def test_in_a_pool_without_quota_the_booked_units_are_lent_over_quota():
    text = (
        POOLS.split("---\nkind: quota")[0] + "---\nkind: booking" + POOLS.split("kind: booking")[1]
    )
    w = World(text)
    w.now = START
    a = w.run("alice", gpus=2)  # the two nobody booked: within (the pool has no quota)
    assert (a.charged, a.over_quota) == ("user:alice", False)
    b = w.run("bob")  # one of the booked two: lent, reclaimable
    assert (b.charged, b.over_quota) == ("user:bob", True)
    d = decide(w.request("carol", ["ml-ops"], gpus=2), w.state())
    assert d.reclaim is not None and [v.user for v in d.reclaim.victims] == ["bob"]


USERS_BOOKING = POOLS.replace("groups: [ml-ops]\nwindow", "users: [carol]\nwindow")


def test_a_user_named_in_a_booking_is_a_member_without_a_group():
    w = World(USERS_BOOKING)
    w.now = START
    # carol is named, in no group: she is admitted within the booking, not as a borrower
    carol = w.run("carol")
    assert (carol.charged, carol.over_quota) == ("booking:ml-lab", False)
    # someone of the group another booking would name is no member of this one: he borrows
    # the other three GPUs, the booking's second unit among them
    dan = w.run("dan", ["ml-ops"], gpus=3)
    assert (dan.charged, dan.over_quota) == ("user:dan", True)
    # and carol, asking again for the booking's second unit, reclaims it
    d = decide(w.request("carol"), w.state())
    assert d.reclaim is not None and [v.user for v in d.reclaim.victims] == ["dan"]


def test_at_the_window_start_a_server_within_its_quota_is_not_stopped_though_newer():
    w = World()
    # a borrower from long before, then staff within its guarantee (2) just before the start:
    # the staff servers are the newest, and must not be taken for borrowers
    w.run("bob", gpus=2, created=START - 5000)
    w.run("sam", ["staff"], created=START - 200)
    w.run("sue", ["staff"], created=START - 100)
    over = {s.user: s.over_quota for s in w.index.servers(pool="dev-pool")}
    assert over == {"bob": True, "sam": False, "sue": False}
    w.now = START
    ledger = booking_ledger(Context(w.request("nobody"), w.state()), "dev-pool", None)
    assert ledger is not None and ledger.held() == 2 and ledger.free == 0
    stop = to_free(ledger, w.index.servers(pool="dev-pool"), START)
    assert [s.user for s in stop] == ["bob"]


class SpentBook:
    """The ledger's sessions a budget reads: carol ran 4 GPUs for 5 h in dev-pool today."""

    def sessions_for(self, budget):
        return [
            {
                "pod_uid": "carol-earlier",
                "user": "carol",
                "charged": "user:carol",
                "pool": "dev-pool",
                "gpus": 4,
                "started": START - 6 * 3600,
                "stopped": START - 3600,
            }
        ]


def test_a_member_whose_own_budget_is_spent_is_admitted_within_the_booking_only():
    text = POOLS.replace(
        "    user-default: {limit: 4}\n",
        "    user-default: {limit: 4}\nbudgets:\n"
        "  - {user: carol, gpu_hours: 10, window: 24h, pools: [dev-pool]}\n",
    )
    w = World(text)
    w.now = START

    def state() -> AdmissionState:
        return AdmissionState(
            w.registry, w.index, w.reservations, now=w.now, bookings=w.calendar, budgets=SpentBook()
        )

    # the booked GPUs are hers whatever her own budget says: the booking pays, not she
    d = decide(w.request("carol", ["ml-ops"], gpus=2), state())
    assert d.admitted and (d.charged, d.over_quota) == ("booking:ml-lab", False), d.message
    # once the booking's units are hers, a request beyond them is refused: her budget is spent
    w.run("carol", ["ml-ops"], gpus=2)
    late = decide(w.request("carol", ["ml-ops"]), state())
    assert not late.admitted and "budget" in late.message and "spent" in late.message
    # and outside the window the booking does not shield her
    w.now = END
    after = decide(w.request("carol", ["ml-ops"]), state())
    assert not after.admitted and "spent" in after.message


def test_a_request_that_leaves_exactly_the_booked_units_free_does_not_borrow():
    w = World()
    w.now = START
    w.run("carol", ["ml-ops"])  # one of the booking's two used: it keeps one more
    # three free, one kept: staff's two (its guarantee) leave exactly that one
    sam = w.run("sam", ["staff"], gpus=2)
    assert (sam.charged, sam.over_quota) == ("group:staff", False)


def test_gpus_admitted_but_not_yet_running_are_not_free_for_the_bookings():
    w = World()
    w.now = START
    # alice's two are held by her admission; her pod is not seen yet
    alice = decide(w.request("alice", gpus=2), w.state())
    assert alice.admitted and alice.over_quota
    w.reservations.add(alice.reservation(expires_at=START + 600))
    # two left, both kept by the booking: staff's first GPU is lent, though within its guarantee
    sam = decide(w.request("sam", ["staff"]), w.state())
    assert (sam.charged, sam.over_quota) == ("group:staff", True)
