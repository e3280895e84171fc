"""Re-cutting MIG layouts to demand, through the service's own desk, line and re-cut watch:
six users ask training-pool for a 1g.10gb instance and only two exist; the watch re-cuts the
idle 8-GPU node "big" into instances, the line admits the four others as they appear, and the
node goes home to whole GPUs once its instances stood unused.

The test plays the cluster and the MIG manager: it keeps its own copy of each node, applies
the watch's label patches to it, creates each admitted request's pod, and answers a config
change with the labels and allocatable the device plugin and GFD would write (counted by hand:
all-1g.10gb makes 8 x 7 = 56 instances of an A100-80GB's 8 GPUs). What it asserts is read from
its own nodes and pods, and from the change log the service keeps.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from k8s_factories import node, pod
from test_usage_shapes import A100_80, mig_node

from jupyter_gpupool.core.admission.queue import ADMITTED, Waiting
from jupyter_gpupool.core.admission.walk import AdmissionRequest
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.service import clock
from jupyter_gpupool.service.admission.desk import AdmissionDesk
from jupyter_gpupool.service.admission.line import Line
from jupyter_gpupool.service.admission.recutwatch import RecutWatch
from jupyter_gpupool.service.monitoring.metrics import Metrics
from jupyter_gpupool.service.records.changelog import ChangeLog
from jupyter_gpupool.service.state import ServiceState

MIG = "mig-1g.10gb"
CONFIG, STATE = "nvidia.com/mig.config", "nvidia.com/mig.config.state"
POOLS = """
kind: pool
pool: {name: training-pool}
nodes:
  mig: {gpu-type: A100-80G}
  big: {gpu-type: A100-80G}
recut:
  nodes: [big]
  configs: [all-disabled, all-1g.10gb, all-balanced]
  unused: 30m
  interval: 10m
"""


def whole_node(name: str) -> dict[str, Any]:
    return node(name, "training-pool", 8, product=A100_80)


class Cluster:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, with_mig: bool = True) -> None:
        self.now = 1_800_000_000.0
        monkeypatch.setattr(clock, "now", lambda: self.now)
        self.state = ServiceState(load_string(POOLS))
        self.nodes = {"big": whole_node("big")}
        if with_mig:
            self.nodes["mig"] = mig_node("mig", "training-pool", {"1g.10gb": 2})
        for n in self.nodes.values():
            self.state.index.apply_node("ADDED", n)
        self.loop = asyncio.new_event_loop()
        self.desk = AdmissionDesk(self.state, metrics=Metrics(lambda: self.state), ttl=60)
        self.desk.line = Line(self.desk, heartbeat=3600, max_per_user=4)
        self.changes = ChangeLog()
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.watch = RecutWatch(
            self.state,
            self.patch,
            lambda: list(self.line.waiting.values()),
            self.changes,
            lock=self.desk.lock,
        )
        self.pods: dict[str, dict[str, Any]] = {}
        self.count = 0

    @property
    def line(self) -> Line:
        assert self.desk.line is not None
        return self.desk.line

    async def patch(self, name: str, labels: dict[str, Any]) -> dict[str, Any]:
        """The API server's side of the watch's patch: the test's copy of the node changes."""
        self.patches.append((name, dict(labels)))
        n = self.nodes[name]
        for k, v in labels.items():
            if v is None:
                n["metadata"]["labels"].pop(k, None)
            else:
                n["metadata"]["labels"][k] = v
        return copy.deepcopy(n)

    def mig_manager(self, name: str, state: str = "success") -> None:
        """Apply the node's nvidia.com/mig.config as the MIG manager, the device plugin and GFD
        would; ``failed`` leaves the layout as it was."""
        old = self.nodes[name]
        labels = old["metadata"]["labels"]
        config = labels[CONFIG]
        if state == "success" and config == "all-1g.10gb":
            new = mig_node(name, "training-pool", {"1g.10gb": 56})
            new["metadata"]["labels"][L.GFD_COUNT_LABEL] = "8"
        elif state == "success" and config == "all-disabled":
            new = whole_node(name)
        else:
            new = copy.deepcopy(old)
        kept = {k: v for k, v in labels.items() if k.startswith("gpupool.")}
        new["metadata"]["labels"].update({**kept, CONFIG: config, STATE: state})
        self.nodes[name] = new
        self.state.index.apply_node("MODIFIED", new)
        self.line.kick()

    def round(self) -> None:
        self.loop.run_until_complete(self.watch.round())

    def ask(self, user: str, shape: str | None = MIG, gpus: int = 1, start: bool = True) -> Any:
        self.count += 1
        req = AdmissionRequest(
            user, (), ("training-pool",), gpus, admission_id=f"r{self.count}", shapes=(shape,)
        )
        outcome = self.loop.run_until_complete(self.desk.admit(req, queue=True))
        if outcome.status == 201 and start:
            self.started(outcome.decision)
        self.settle()
        return outcome

    def started(self, decision: Any) -> None:
        req, shape = decision.request, decision.shape
        aid = req.admission_id
        limits = {shape.resource: "1"} if shape is not None and shape.id != "whole" else None
        p = pod(
            f"jupyter-{aid}",
            0 if limits else req.gpus,
            decision.node,
            user=req.user,
            pool=decision.pool,
            charged=decision.charged,
            over_quota=decision.over_quota,
            admission=aid,
            phase="Running",
            limits=limits,
        )
        self.pods[aid] = p
        self.state.index.apply_pod("ADDED", p)
        self.line.kick()

    def end_all(self) -> None:
        for aid in list(self.pods):
            self.state.index.apply_pod("DELETED", self.pods.pop(aid))
        self.line.kick()
        self.settle()

    def settle(self) -> None:
        async def run() -> None:
            async with self.desk.lock:
                self.line.run_pass()

        while self.line.dirty and self.line.waiting:
            self.loop.run_until_complete(run())
            for aid, ended in list(self.line.ended.items()):
                if ended.state == ADMITTED and aid not in self.pods:
                    self.started(ended.outcome.decision)

    def on(self, name: str) -> int:
        return sum(1 for p in self.pods.values() if p["spec"]["nodeName"] == name)


@pytest.fixture
def cluster(monkeypatch):
    c = Cluster(monkeypatch)
    yield c
    c.loop.close()


def test_six_users_waiting_for_1g_get_an_idle_node_re_cut_and_it_goes_home_unused(cluster):
    outcomes = [cluster.ask(f"student{i}") for i in range(6)]
    assert [o.status for o in outcomes] == [201, 201, 202, 202, 202, 202]
    assert cluster.on("mig") == 2 and cluster.on("big") == 0

    cluster.round()
    # one patch of big: the config, pending, and the service's own when and what for
    assert cluster.patches == [
        (
            "big",
            {
                CONFIG: "all-1g.10gb",
                STATE: "pending",
                "gpupool.jupyter.org/recut-at": str(int(cluster.now)),
                "gpupool.jupyter.org/recut-for": MIG,
            },
        )
    ]
    # under way: big takes nothing, the waiting request says why, the pool says what comes
    row = cluster.line.rows()[0]
    assert "waiting for big to be re-cut into 1g.10gb instances" in row["message"], row
    (shape,) = [s for s in cluster.state.pool_summary("training-pool")["shapes"] if s["id"] == MIG]
    assert shape["coming"] == 56 and "56 more expected by" in shape["text"], shape
    # a round while it is under way asks nothing more, and nothing lands on big meanwhile
    cluster.round()
    assert len(cluster.patches) == 1
    assert cluster.ask("researcher", shape=None).status == 202 and cluster.on("big") == 0
    cluster.line.cancel(cluster.line.ranked()[-1].id)

    cluster.now += 90
    cluster.mig_manager("big")
    cluster.settle()
    assert cluster.on("big") == 4 and not cluster.line.waiting
    cluster.round()
    words = [c.what for c in cluster.changes.latest()]
    assert words[0].startswith("big re-cut to all-1g.10gb at ") and words[0].endswith(
        "for 4 waiting requests of 1g.10gb: done in 1m30s"
    ), words

    # the six end; big's instances stand unused: home only after 30 min, not before
    cluster.end_all()
    cluster.round()
    cluster.now += 30 * 60 - 1
    cluster.round()
    assert len(cluster.patches) == 1
    cluster.now += 1
    cluster.round()
    assert [(n, p[CONFIG]) for n, p in cluster.patches] == [
        ("big", "all-1g.10gb"),
        ("big", "all-disabled"),
    ]
    # the pool says when it should end from what the last re-cut took (1m30s), as the launch
    # options and the estimates do, not from the 2 min assumed before any ended
    (recut,) = cluster.state.pool_summary("training-pool")["recuts"]
    assert recut["expected_at"] == cluster.now + 90, recut
    cluster.mig_manager("big")
    cluster.round()
    assert cluster.changes.latest()[0].what.startswith(
        "big back to all-disabled: its instances stood unused 30m"
    )
    assert cluster.state.index.node_gpus("big") == 8


def test_a_node_running_a_gpu_server_or_holding_a_reservation_is_never_re_cut(cluster):
    # a whole-GPU server on big: six wait for 1g, nothing is re-cut
    first = cluster.ask("researcher", shape=None, gpus=1)
    assert first.status == 201 and cluster.on("big") == 1
    for i in range(6):
        cluster.ask(f"student{i}")
    cluster.round()
    assert cluster.patches == []
    # it ends, but a whole-GPU admission holds big's GPUs (its pod not seen yet): still not
    cluster.end_all()
    assert cluster.ask("researcher2", shape=None, start=False).status == 201
    cluster.round()
    assert cluster.patches == []
    # the reservation is given back unused: big is re-cut
    (reservation,) = list(cluster.state.reservations)
    cluster.state.reservations.release(reservation.admission_id)
    cluster.round()
    assert [n for n, _ in cluster.patches] == ["big"]


def test_a_failed_re_cut_is_left_alone_and_reported(cluster):
    for i in range(4):
        cluster.ask(f"student{i}")
    cluster.round()
    cluster.now += 30
    cluster.mig_manager("big", state="failed")
    cluster.round()
    assert cluster.watch.problems(cluster.now) == [
        "re-cutting big to all-1g.10gb failed (nvidia.com/mig.config.state)"
    ]
    assert "failed, left as the MIG manager left it" in cluster.changes.latest()[0].what
    cluster.now += 3600
    cluster.round()
    assert len(cluster.patches) == 1  # never touched again by the service


def test_requests_the_free_instances_can_take_re_cut_nothing(cluster):
    # two requests in line (taken up after a restart: kept, not yet admitted) while mig has
    # its two 1g.10gb instances free: no node is re-cut for them; a third is one too many
    def waiting(n: int) -> Waiting:
        req = AdmissionRequest(
            f"s{n}", (), ("training-pool",), 1, admission_id=f"t{n}", shapes=(MIG,)
        )
        return Waiting(req, n, cluster.now)

    cluster.line.take_up([waiting(1), waiting(2)])
    cluster.round()
    assert cluster.patches == []
    cluster.line.take_up([waiting(3)])
    cluster.round()
    assert [(n, p[CONFIG]) for n, p in cluster.patches] == [("big", "all-1g.10gb")]


async def test_a_round_waits_for_the_desk_so_no_admission_lands_between_plan_and_patch(
    monkeypatch,
):
    c = Cluster.__new__(Cluster)
    Cluster.__init__(c, monkeypatch)
    c.loop.close()
    for i in range(4):
        req = AdmissionRequest(
            f"s{i}", (), ("training-pool",), 1, admission_id=f"q{i}", shapes=(MIG,)
        )
        await c.desk.admit(req, queue=True)
    async with c.desk.lock:
        task = asyncio.ensure_future(c.watch.round())
        for _ in range(20):
            await asyncio.sleep(0)
        assert c.patches == []  # the round waits for the lock the desk holds
    await task
    assert [n for n, _ in c.patches] == ["big"]


def test_a_request_counts_once_per_pool_for_its_first_choice_there(cluster):
    req = AdmissionRequest(
        "s1",
        (),
        ("training-pool", "training-pool"),
        1,
        admission_id="t1",
        shapes=(MIG, "mig-3g.40gb"),
    )
    whole = AdmissionRequest("s2", (), ("training-pool",), 2, admission_id="t2")
    cluster.line.take_up([Waiting(req, 1, cluster.now), Waiting(whole, 2, cluster.now)])
    assert cluster.watch.asked() == {"training-pool": {MIG: 1, "whole": 2}}


def test_nothing_lands_on_the_node_between_success_and_the_device_plugins_new_resources(cluster):
    # the MIG manager says success before the device plugin advertises the instances (it
    # restarts after): the node still shows its 8 whole GPUs then, and must take none of them
    for i in range(6):
        cluster.ask(f"student{i}")
    cluster.round()
    stale = cluster.nodes["big"]
    stale["metadata"]["labels"][STATE] = "success"
    cluster.state.index.apply_node("MODIFIED", copy.deepcopy(stale))
    assert cluster.ask("researcher", shape=None, gpus=2).status == 202
    assert cluster.on("big") == 0
    assert cluster.state.index.node("big").reasons, "big should say why it takes nothing"
    cluster.mig_manager("big")  # the device plugin's resources
    cluster.settle()
    assert cluster.on("big") == 4


def test_a_shape_no_node_offers_yet_waits_for_the_re_cut_that_makes_it(monkeypatch):
    c = Cluster(monkeypatch, with_mig=False)
    try:
        # no node offers 1g.10gb, but big could be cut into them: in line, not refused
        assert c.ask("student0").status == 202
        # a shape no allowed config makes is refused as ever
        refused = c.ask("student1", shape="mig-7g.80gb")
        assert refused.status == 409 and "has no mig-7g.80gb" in (
            refused.note + refused.decision.message
        ), refused
        c.round()
        c.mig_manager("big")
        c.settle()
        assert c.on("big") == 1 and not c.line.waiting
    finally:
        c.loop.close()


def test_a_cordoned_node_is_not_re_cut(cluster):
    cordoned = node("big", "training-pool", 8, product=A100_80, cordoned=True)
    cluster.nodes["big"] = cordoned
    cluster.state.index.apply_node("MODIFIED", cordoned)
    for i in range(4):
        cluster.ask(f"student{i}")
    cluster.round()
    assert cluster.patches == []


async def test_a_node_taken_while_the_round_planned_is_not_re_cut(monkeypatch):
    # the plan is made outside the desk's lock; an admission that lands on the node before
    # the round takes the lock keeps it from being re-cut
    c = Cluster(monkeypatch)
    c.loop.close()
    for i in range(4):
        req = AdmissionRequest(
            f"s{i}", (), ("training-pool",), 1, admission_id=f"q{i}", shapes=(MIG,)
        )
        await c.desk.admit(req, queue=True)
    plans = c.watch.pool_plans

    def plans_then_a_pod(pool, policy, asked, now):
        made = plans(pool, policy, asked, now)
        assert [cut.node for cut in made] == ["big"]
        # meanwhile a whole-GPU server's pod is seen on big
        c.state.index.apply_pod(
            "ADDED", pod("jupyter-r", 1, "big", user="r", pool="training-pool", phase="Running")
        )
        return made

    c.watch.pool_plans = plans_then_a_pod
    await c.watch.round()
    assert c.patches == []
