"""The line by shape, through the service's own desk and line: a researcher waiting within
quota for whole A100s holds those back, and the course's students (borrowers) still get the
MIG instances nobody waiting could use, at once or from the line as instances come free.

The test plays the cluster: it creates each admitted request's pod on its node (its
resources as the spawner's overrides would ask them) and deletes the pods that end; what it
asserts is read from its own list of those pods and from the answers the desk gave.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from k8s_factories import node, pod
from test_line_holds import POOLS  # training-pool: lab guaranteed 4, ops 8
from test_usage_shapes import mig_node

from jupyter_gpupool.core.admission.queue import ADMITTED
from jupyter_gpupool.core.admission.walk import PROMISED, AdmissionRequest
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.service.admission.desk import AdmissionDesk
from jupyter_gpupool.service.admission.line import Line
from jupyter_gpupool.service.monitoring.metrics import Metrics
from jupyter_gpupool.service.state import ServiceState

MIG = "mig-1g.10gb"


class Cluster:
    def __init__(self) -> None:
        self.state = ServiceState(load_string(POOLS))
        self.state.index.apply_node("ADDED", mig_node("mig", "training-pool", {"1g.10gb": 4}))
        self.state.index.apply_node("ADDED", node("big", "training-pool", 8))
        self.loop = asyncio.new_event_loop()
        self.desk = AdmissionDesk(self.state, metrics=Metrics(lambda: self.state), ttl=60)
        self.desk.line = Line(self.desk, heartbeat=3600, max_per_user=4)
        self.pods: dict[str, dict[str, Any]] = {}  # admission id -> the pod the test made
        self.count = 0
        self.run("zed", 8, "big")  # ops' zed holds the A100s, within ops' quota

    @property
    def line(self) -> Line:
        assert self.desk.line is not None
        return self.desk.line

    def run(self, user: str, gpus: int, on: str) -> str:
        """A server of ops, within its quota, that the test starts itself."""
        self.count += 1
        aid = f"a{self.count}"
        p = pod(
            f"jupyter-{aid}",
            gpus,
            on,
            user=user,
            pool="training-pool",
            charged="group:ops",
            admission=aid,
            phase="Running",
        )
        self.pods[aid] = p
        self.state.index.apply_pod("ADDED", p)
        self.line.kick()
        return aid

    def ask(self, user: str, gpus: int = 1, shape: str | None = None, group: str = "") -> Any:
        self.count += 1
        req = AdmissionRequest(
            user,
            (group,) if group else (),
            ("training-pool",),
            gpus,
            admission_id=f"r{self.count}",
            shapes=(shape,),
        )
        outcome = self.loop.run_until_complete(self.desk.admit(req, queue=True))
        if outcome.status == 201:
            self.started(outcome.decision)
        self.settle()
        return outcome

    def started(self, decision: Any) -> None:
        """The spawner creates the pod on the admitted node, charged as the decision says."""
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

    def end(self, aid: str) -> None:
        self.state.index.apply_pod("DELETED", self.pods.pop(aid))
        self.line.kick()
        self.settle()

    def passes(self) -> None:
        """One pass of the line, as its loop runs one after each change."""

        async def run() -> None:
            async with self.desk.lock:
                self.line.run_pass()

        self.loop.run_until_complete(run())

    def settle(self) -> None:
        while self.line.dirty and self.line.waiting:
            self.passes()
            for aid, ended in list(self.line.ended.items()):
                if ended.state == ADMITTED and aid not in self.pods:
                    self.started(ended.outcome.decision)

    def on(self, node_name: str) -> list[str]:
        """Who runs on a node: the users of the test's own pods there."""
        return sorted(
            p["metadata"]["annotations"][L.POD_USER]
            for p in self.pods.values()
            if p["spec"]["nodeName"] == node_name
        )


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.loop.close()


def test_students_get_mig_instances_while_a_researcher_waits_for_whole_gpus(cluster):
    c = cluster
    alice = c.ask("alice", 4, group="lab")  # within lab's 4: waits for the A100s zed holds
    assert alice.status == 202
    students = [c.ask(f"s{i}", shape=MIG) for i in range(5)]
    assert [o.status for o in students] == [201, 201, 201, 201, 202]
    assert all(o.decision.over_quota for o in students[:4])
    assert c.on("mig") == ["s0", "s1", "s2", "s3"]
    # an instance comes free: the fifth student, behind alice in line, gets it
    c.end(students[0].decision.request.admission_id)
    assert c.on("mig") == ["s1", "s2", "s3", "s4"]
    assert alice.decision.request.admission_id in c.line.waiting
    # a borrower of whole GPUs waits: what comes free on the big node is alice's
    bob = c.ask("bob", 1)
    assert bob.status == 202
    assert PROMISED not in bob.message  # nothing is free for him yet: full, not promised
    zed = next(aid for aid, p in c.pods.items() if p["spec"]["nodeName"] == "big")
    c.end(zed)
    assert c.on("big") == ["alice", "bob"]
    assert not c.line.waiting


def test_a_borrower_is_told_the_free_gpus_are_promised(cluster):
    c = cluster
    zed = next(iter(c.pods))
    c.end(zed)
    c.run("zed", 6, "big")  # 2 A100s free, alice wants 4
    c.passes()  # the line has looked since: nothing changed after that
    alice = c.ask("alice", 4, group="lab")
    assert alice.status == 202
    # bob asks before the line's next pass: alice's place holds the A100s from her answer on
    bob = c.ask("bob", 1)
    assert bob.status == 202
    assert PROMISED in c.line.reasons[bob.decision.request.admission_id]
    assert c.on("big") == ["zed"]
    c.passes()  # and so does every pass after it
    assert PROMISED in c.line.reasons[bob.decision.request.admission_id]
    assert c.on("big") == ["zed"]
