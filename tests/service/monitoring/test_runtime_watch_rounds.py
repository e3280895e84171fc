"""The runtime watch's rounds, on a usage index and a registry built here, with the clock in
the test's hands: which servers it warns and stops, and when. The truth is the watch's calls
to ``stop`` (the hub's side) and the notices it answers, against times worked out by hand from
each pod's creation time and the limits written below.

a100's pool limit is 8h (warned 30m before); its ``whole`` shape entry sets 2h (10m), its
1g MIG instances 4h. A server without GPUs is never looked at.
"""

from __future__ import annotations

import datetime as dt
import textwrap

from k8s_factories import node, pod

from jupyter_gpupool.core.pools.reading import load_texts
from jupyter_gpupool.core.usage.index import ServerUsage, UsageIndex
from jupyter_gpupool.service.monitoring.runtimewatch import RuntimeWatch

H, M = 3600.0, 60.0
T0 = dt.datetime(2027, 1, 15, 8, 0, tzinfo=dt.timezone.utc)

POOL = textwrap.dedent(
    """\
    kind: pool
    version: v0.1
    pool: {name: a100}
    max-runtime: {after: 8h, warn: 30m}
    shapes:
      - {id: whole, max-runtime: {after: 2h, warn: 10m}}
      - {id: mig-1g.10gb, max-runtime: {after: 4h}}
    """
)


def stamp(offset: float) -> str:
    return (T0 + dt.timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


class World:
    def __init__(self) -> None:
        self.registry = load_texts([(POOL, "a100.yaml")])
        self.index = UsageIndex()
        labels = {"runwhere.ai/pool": "a100"}
        self.index.apply_node("ADDED", node("n1", "a100", 8, extra_labels=labels))
        self.stopped: list[str] = []
        self.watch = RuntimeWatch(stop=self._stop)

    async def _stop(self, s: ServerUsage) -> None:
        self.stopped.append(s.name)

    def run(self, name: str, gpus: int = 1, started: float = 0.0) -> None:
        p = pod(name, gpus, "n1", user=name, pool="a100", created=stamp(started))
        self.index.apply_pod("ADDED", p)

    async def round(self, at: float) -> list[str]:
        """One round at ``T0 + at``: the names stopped in it."""
        before = len(self.stopped)
        await self.watch.round(self.registry, self.index, T0.timestamp() + at)
        return self.stopped[before:]

    def notice_of(self, name: str, at: float):
        [s] = [s for s in self.index.servers() if s.name == name]
        return self.watch.notice(self.registry, s, T0.timestamp() + at)


async def test_a_whole_gpu_server_follows_the_whole_shape_entry_not_the_pools_limit():
    w = World()
    w.run("bob")
    assert await w.round(1 * H + 49 * M) == []
    assert w.notice_of("bob", 1 * H + 49 * M) is None
    assert await w.round(1 * H + 50 * M) == []  # warned: 10m before the whole shape's 2h
    notice = w.notice_of("bob", 1 * H + 50 * M)
    assert notice is not None and notice.deadline == T0.timestamp() + 2 * H
    assert await w.round(2 * H) == ["bob"]  # not the pool's 8h


async def test_a_server_without_gpus_is_never_stopped():
    w = World()
    w.run("cpu", gpus=0)
    for at in (1 * H, 3 * H, 9 * H, 9 * H + 20 * M, 24 * H):
        assert await w.round(at) == []
    assert w.notice_of("cpu", 24 * H) is None


async def test_a_server_first_seen_past_its_limit_is_warned_and_stopped_only_warn_later():
    w = World()
    w.run("old", started=-5 * H)  # past its 2h when the watch first looks
    assert await w.round(0) == []  # warned now, not stopped in the round that warns
    notice = w.notice_of("old", 0)
    assert notice is not None and notice.deadline == T0.timestamp() + 10 * M
    assert await w.round(9 * M) == []
    assert await w.round(10 * M) == ["old"]
