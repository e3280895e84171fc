"""Scheduling signals from reflected pods and events, wrap-around, merged progress (pure)."""

from __future__ import annotations

import asyncio

import pytest

from jupyter_gpupool.spawner.progress import ProgressLog, merge_progress
from jupyter_gpupool.spawner.scheduling import Scheduling, rotate_after, scheduling

WORDS = "0/3 nodes are available: 2 node(s) had untolerated taint {gpu: broken}."


def pod(uid="u2", **status):
    return {
        "metadata": {"name": "jupyter-alice", "uid": uid},
        "spec": {},
        "status": {"phase": "Pending", **status},
    }


def event(uid, message, when="2025-01-01T00:00:01Z", reason="FailedScheduling"):
    return {
        "reason": reason,
        "message": message,
        "lastTimestamp": when,
        "involvedObject": {"kind": "Pod", "name": "jupyter-alice", "uid": uid},
    }


def test_not_seen_yet_or_just_created():
    assert scheduling(None, []) == Scheduling()
    assert scheduling(pod(), []) == Scheduling()


def test_bound_to_a_node():
    bound = pod()
    bound["spec"]["nodeName"] = "gpu-node-1"
    assert scheduling(bound, [event("u2", WORDS)]) == Scheduling(node="gpu-node-1")
    assert scheduling(bound, []).scheduled


def test_the_pod_condition_says_unschedulable():
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": WORDS}
    assert scheduling(pod(conditions=[cond]), []) == Scheduling(unschedulable=True, message=WORDS)


def test_only_this_pods_failed_scheduling_events_count():
    events = [
        event("u1", "0/3 nodes: an earlier attempt's pod", "2025-01-01T00:00:09Z"),
        event("u2", "older words", "2025-01-01T00:00:01Z"),
        event("u2", WORDS, "2025-01-01T00:00:02Z"),
        event("u2", "Pulling image", "2025-01-01T00:00:03Z", reason="Pulling"),
    ]
    assert scheduling(pod("u2"), events) == Scheduling(unschedulable=True, message=WORDS)
    assert scheduling(pod("u3"), events) == Scheduling()


def test_a_pod_being_deleted_is_not_judged():
    going = pod()
    going["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert scheduling(going, [event("u2", WORDS)]) == Scheduling()


def test_wrap_around():
    pools = ["a", "b", "c"]
    assert rotate_after(pools, "a") == ["b", "c", "a"]
    assert rotate_after(pools, "b") == ["c", "a", "b"]
    assert rotate_after(pools, "c") == ["a", "b", "c"]
    assert rotate_after(["a"], "a") == ["a"]
    assert rotate_after([], "default") == ["default"]  # admitted from the default order


async def test_progress_interleaves_our_steps_with_kubespawner_events():
    log = ProgressLog()
    finished = asyncio.Event()
    # each step happens only once the reader has been given the one before it, so the merged
    # stream has one right order (a merge that held one source back would wait forever)
    given = {m: asyncio.Event() for m in ("gpupool: admitted", "pod event 1", "gpupool: scheduled")}
    given["pod event 2"] = asyncio.Event()

    async def kubespawner_events():
        await given["gpupool: admitted"].wait()
        yield {"message": "pod event 1"}
        await given["pod event 1"].wait()
        log.add("gpupool: scheduled")
        await given["gpupool: scheduled"].wait()
        yield {"message": "pod event 2"}

    async def start():
        log.add("gpupool: admitted")
        await given["pod event 2"].wait()
        log.add("gpupool: started")
        finished.set()

    got: list[str] = []

    async def read():
        async for event in merge_progress(log, kubespawner_events(), finished.is_set, poll=0.01):
            got.append(event["message"])
            if event["message"] in given:
                given[event["message"]].set()

    task = asyncio.ensure_future(start())
    try:
        await asyncio.wait_for(read(), 10)
    except TimeoutError:
        pytest.fail(f"the merged progress stalled after {got}")
    await task
    assert got == [
        "gpupool: admitted",
        "pod event 1",
        "gpupool: scheduled",
        "pod event 2",
        "gpupool: started",
    ]


async def test_progress_stops_cleanly_when_the_reader_goes_away():
    log = ProgressLog()
    log.add("one")

    async def forever():
        await asyncio.Event().wait()  # a pod that never has an event
        yield {"message": "never"}

    stream = merge_progress(log, forever(), lambda: False)
    assert (await anext(stream))["message"] == "one"
    await stream.aclose()  # the browser closed the progress page: nothing left running


def scheduler_event(uid, message, when, series_last=None):
    """kube-scheduler's shape (events.k8s.io/v1 read as core/v1): eventTime, null timestamps."""
    e = {
        "reason": "FailedScheduling",
        "message": message,
        "eventTime": when,
        "firstTimestamp": None,
        "lastTimestamp": None,
        "action": "Scheduling",
        "reportingComponent": "default-scheduler",
        "involvedObject": {"kind": "Pod", "name": "jupyter-alice", "uid": uid},
    }
    if series_last:
        e["series"] = {"count": 2, "lastObservedTime": series_last}
    return e


def test_failed_scheduling_events_with_only_last_timestamps_pick_the_latest():
    events = [
        event("u2", WORDS, "2025-01-01T00:00:05Z"),
        event("u2", "older", "2025-01-01T00:00:04Z"),
    ]
    for e in events:
        e |= {"eventTime": None, "firstTimestamp": e["lastTimestamp"], "count": 1}
    assert scheduling(pod("u2"), events) == Scheduling(unschedulable=True, message=WORDS)


def test_failed_scheduling_events_with_only_event_time_or_series_pick_the_latest():
    events = [
        scheduler_event("u2", "older", "2025-01-01T00:00:04.900000Z"),
        scheduler_event("u2", WORDS, "2025-01-01T00:00:05.100000Z"),
    ]
    assert scheduling(pod("u2"), events) == Scheduling(unschedulable=True, message=WORDS)
    # repeated: the series' last observation counts, not the first eventTime
    events.append(
        scheduler_event(
            "u2", "repeated", "2025-01-01T00:00:01.000000Z", "2025-01-01T00:09:00.000000Z"
        )
    )
    assert scheduling(pod("u2"), events).message == "repeated"


def test_both_shapes_compare_by_time_not_by_text():
    # "…:05.5Z" < "…:05Z" as text; as times the scheduler's event (half a second later) is latest
    events = [
        event("u2", "kubelet-style", "2025-01-01T00:00:05Z"),
        scheduler_event("u2", WORDS, "2025-01-01T00:00:05.500000Z"),
    ]
    assert scheduling(pod("u2"), events).message == WORDS
    events = [
        event("u2", WORDS, "2025-01-01T00:00:06Z"),
        scheduler_event("u2", "earlier", "2025-01-01T00:00:05.500000Z"),
    ]
    assert scheduling(pod("u2"), events).message == WORDS
