"""The ledger's rules (core/accounting/ledger.py) and the history's (core/usage/history.py): times read from pods,
how sessions end, GPU-hours in a window, hourly averages. Expected figures are worked out by hand
in each test."""

from __future__ import annotations

import pytest

from jupyter_gpupool.core.accounting import ledger
from jupyter_gpupool.core.usage import history

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
H = 3600.0


def pod(phase: str, running: str | None = None, finished: str | None = None) -> dict:
    state: dict = {}
    if running:
        state["running"] = {"startedAt": running}
    if finished:
        state["terminated"] = {"finishedAt": finished, "exitCode": 1}
    return {
        "status": {
            "phase": phase,
            "startTime": "2027-01-15T07:59:00Z",
            "containerStatuses": [{"name": "c", "state": state}],
        }
    }


def test_times_come_from_the_pods_status():
    assert ledger.parse_time("2027-01-15T08:00:00Z") == T0
    assert ledger.started_at(pod("Running", running="2027-01-15T08:00:00Z")) == T0
    # no container running yet: the pod's startTime
    assert ledger.started_at(pod("Pending")) == T0 - 60
    assert ledger.finished_at(pod("Failed", finished="2027-01-15T09:00:00Z")) == T0 + H
    assert ledger.finished_at(pod("Running")) is None
    assert ledger.parse_time("not a time") is None


def test_how_a_session_ended():
    assert ledger.how_it_ended(pod("Failed"), None) == "failed"
    assert ledger.how_it_ended(pod("Succeeded"), None) == "stopped"
    assert ledger.how_it_ended(None, None) == "stopped"
    # the service said why it stopped it
    assert ledger.how_it_ended(pod("Failed"), ledger.RECLAIMED) == "reclaimed"
    assert ledger.how_it_ended(None, ledger.OVER_BUDGET) == "over budget"


def test_a_session_closes_when_its_pod_says_else_now_never_before_it_began():
    s = {"started": T0}
    assert ledger.close_time(s, pod("Failed", finished="2027-01-15T09:00:00Z"), T0 + 5 * H) == (
        T0 + H
    )
    assert ledger.close_time(s, None, T0 + 2 * H) == T0 + 2 * H
    assert ledger.close_time(s, pod("Failed", finished="2027-01-15T07:00:00Z"), T0 + H) == T0


def sessions() -> list[dict]:
    return [
        # alice, ml-research, 2 GPUs for 3 h within quota
        {
            "user": "alice",
            "charged": "group:ml-research",
            "pool": "a100",
            "gpus": 2,
            "over_quota": False,
            "started": T0,
            "stopped": T0 + 3 * H,
        },
        # bob, ml-research, 4 GPUs over quota from 1 h to still running
        {
            "user": "bob",
            "charged": "group:ml-research",
            "pool": "a100",
            "gpus": 4,
            "over_quota": True,
            "started": T0 + H,
            "stopped": None,
        },
        # carol, charged to herself, 1 GPU, ended before the window
        {
            "user": "carol",
            "charged": "user:carol",
            "pool": "t4",
            "gpus": 1,
            "over_quota": False,
            "started": T0 - 5 * H,
            "stopped": T0 - H,
        },
        # dave, CPU only: no GPU-hours
        {
            "user": "dave",
            "charged": None,
            "pool": "cpu",
            "gpus": 0,
            "over_quota": False,
            "started": T0,
            "stopped": T0 + H,
        },
    ]


def test_gpu_hours_in_a_window_by_user_group_and_pool():
    # the window [T0 + 1 h, T0 + 4 h): alice 2 GPUs x 2 h, bob 4 GPUs x 3 h (open: until the end)
    by_user = ledger.gpu_hours(sessions(), T0 + H, T0 + 4 * H, "user")
    assert [
        (r["subject"], r["gpu_hours"], r["within_quota"], r["over_quota"]) for r in by_user
    ] == [
        ("bob", 12.0, 0.0, 12.0),
        ("alice", 4.0, 4.0, 0.0),
    ]
    by_group = ledger.gpu_hours(sessions(), T0 - 6 * H, T0 + 4 * H, "group")
    assert [(r["subject"], r["gpu_hours"], r["sessions"]) for r in by_group] == [
        ("ml-research", 6.0 + 12.0, 2),
        ("(no group)", 4.0, 1),  # carol: 1 GPU x 4 h, charged to herself
    ]
    by_pool = ledger.gpu_hours(sessions(), T0, T0 + H, "pool")
    assert [(r["subject"], r["gpu_hours"]) for r in by_pool] == [("a100", 2.0)]
    with pytest.raises(ValueError, match="by must be user, group, pool or shape"):
        ledger.gpu_hours([], T0, T0 + H, "team")


def shaped_sessions() -> list[dict]:
    return [
        # erin: a MIG 3g.40gb of an A100 (3/7 of a GPU: no nvidia.com/gpu) for 7 h
        {
            "user": "erin",
            "charged": "user:erin",
            "pool": "slice-pool",
            "gpus": 0,
            "shape": "mig-3g.40gb",
            "equivalents": "3/7",
            "over_quota": False,
            "started": T0,
            "stopped": T0 + 7 * H,
        },
        # frank: a time-sliced quarter of an A10 for 2 h, over quota
        {
            "user": "frank",
            "charged": "user:frank",
            "pool": "slice-pool",
            "gpus": 1,
            "shape": "shared-4",
            "equivalents": "1/4",
            "over_quota": True,
            "started": T0,
            "stopped": T0 + 2 * H,
        },
        # gina: two whole GPUs for 1 h, written as today
        {
            "user": "gina",
            "charged": "user:gina",
            "pool": "a100",
            "gpus": 2,
            "shape": None,
            "equivalents": "2",
            "over_quota": False,
            "started": T0,
            "stopped": T0 + H,
        },
    ]


def test_gpu_hours_count_gpu_equivalents_and_split_by_shape():
    window = (T0, T0 + 8 * H)
    by_user = ledger.gpu_hours(shaped_sessions() + sessions()[:1], *window, "user")
    assert [(r["subject"], r["gpu_hours"], r["over_quota"]) for r in by_user] == [
        ("alice", 6.0, 0.0),  # an old row (no equivalents): its 2 GPUs x 3 h
        ("erin", 3.0, 0.0),  # 3/7 x 7 h
        ("gina", 2.0, 0.0),
        ("frank", 0.5, 0.5),  # 1/4 x 2 h
    ]
    by_shape = ledger.gpu_hours(shaped_sessions() + sessions()[:1], *window, "shape")
    assert [(r["subject"], r["gpu_hours"], r["sessions"]) for r in by_shape] == [
        ("whole", 8.0, 2),  # gina's 2 and alice's old 6
        ("mig-3g.40gb", 3.0, 1),
        ("shared-4", 0.5, 1),
    ]


def test_a_new_session_keeps_its_shape_and_equivalents():
    from fractions import Fraction

    from jupyter_gpupool.core.usage.rows import ServerUsage

    server = ServerUsage(
        "ns", "jupyter-erin", "erin", "", "slice-pool", "mig-node", 0, "running", False,
        "user:erin", None, None, "2027-01-15T08:00:00Z", uid="u1", shape="mig-1g.10gb",
        units=1, equivalents=Fraction(1, 7),
    )  # fmt: skip
    fields = ledger.session_fields(server, "A100-80G", T0, T0)
    assert (fields["shape"], fields["equivalents"], fields["gpus"]) == ("mig-1g.10gb", "1/7", 0)
    assert ledger.session_equivalents(fields) == Fraction(1, 7)
    assert ledger.session_equivalents({"gpus": 3, "equivalents": None}) == 3


def test_hourly_averages_per_pool_and_hour():
    rows = [
        {
            "time": T0 + 60,
            "pool": "p",
            "gpu_total": 8,
            "gpu_used": 2,
            "gpu_over_quota": 0,
            "gpu_pending": 0,
        },
        {
            "time": T0 + 1800,
            "pool": "p",
            "gpu_total": 8,
            "gpu_used": 4,
            "gpu_over_quota": 2,
            "gpu_pending": 1,
        },
        {
            "time": T0 + H + 5,
            "pool": "p",
            "gpu_total": 8,
            "gpu_used": 8,
            "gpu_over_quota": 0,
            "gpu_pending": 0,
        },
        {
            "time": T0 + 10,
            "pool": "q",
            "gpu_total": 4,
            "gpu_used": 1,
            "gpu_over_quota": 0,
            "gpu_pending": 0,
        },
    ]
    assert history.hourly_averages(rows) == [
        {
            "time": T0,
            "pool": "p",
            "gpu_total": 8.0,
            "gpu_used": 3.0,
            "gpu_over_quota": 1.0,
            "gpu_pending": 0.5,
        },
        {
            "time": T0,
            "pool": "q",
            "gpu_total": 4.0,
            "gpu_used": 1.0,
            "gpu_over_quota": 0.0,
            "gpu_pending": 0.0,
        },
        {
            "time": T0 + H,
            "pool": "p",
            "gpu_total": 8.0,
            "gpu_used": 8.0,
            "gpu_over_quota": 0.0,
            "gpu_pending": 0.0,
        },
    ]


def test_history_ranges():
    assert history.parse_range(None) == 6 * H
    assert history.parse_range("30d") == 30 * 24 * H
    with pytest.raises(ValueError, match="range must be one of 6h, 24h, 7d, 30d, not '1y'"):
        history.parse_range("1y")
