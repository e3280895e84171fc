"""GPU-hour budgets (issue 16): what a budget counts, when its hours come back, the refusal an
admission gets, and how quota documents write them (FILE:LINE for every mistake).

The GPU-hours expected are worked out by hand in each test from the sessions it writes."""

from __future__ import annotations

import datetime
import textwrap

import pytest
import yaml

from jupyter_gpupool.core.accounting import budgets as B
from jupyter_gpupool.core.admission.walk import AdmissionRequest, AdmissionState, decide
from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.pools.reading import load_texts
from jupyter_gpupool.core.pools.writing import registry_to_documents
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.labels import POOL_LABEL
from jupyter_gpupool.core.usage.reservations import Reservations

H, D = 3600.0, 86400.0
NOW = datetime.datetime(2026, 11, 23, 12, 0, tzinfo=datetime.timezone.utc).timestamp()


def session(user, gpus, started, stopped=None, charged=None, pool="a100", uid=None):
    return {
        "pod_uid": uid or f"{user}-{started}",
        "user": user,
        "charged": charged or f"user:{user}",
        "pool": pool,
        "gpus": gpus,
        "started": started,
        "stopped": stopped,
    }


class Book:
    def __init__(self, sessions):
        self.sessions = sessions

    def sessions_for(self, budget):
        return self.sessions


def test_a_budget_counts_gpu_hours_inside_its_window_and_a_running_server_up_to_now():
    b = B.Budget("user:alice", gpu_hours=100, window="1d")
    sessions = [
        session("alice", 4, NOW - 30 * H, NOW - 20 * H),  # 4 h of its 10 inside the day: 16
        session("alice", 2, NOW - 3 * H),  # running for 3 h: 6
        session("alice", 8, NOW - 50 * H, NOW - 40 * H),  # before the window: 0
        session("bob", 8, NOW - 2 * H, NOW - H),  # somebody else's
        session("alice", 1, NOW - 2 * H, NOW - H, pool="h100"),  # 1
    ]
    assert B.spent(b, sessions, NOW) == pytest.approx(16 + 6 + 1)
    in_a100 = B.Budget("user:alice", gpu_hours=100, window="1d", pools=("a100",))
    assert B.spent(in_a100, sessions, NOW) == pytest.approx(22)
    # a group's budget counts what was charged to the group, whoever ran it
    group = B.Budget("group:ml", gpu_hours=10, window="1d")
    charged = [
        session("alice", 2, NOW - 2 * H, NOW - H, charged="group:ml"),
        session("bob", 3, NOW - H, charged="group:ml"),
        session("carol", 8, NOW - H, charged="user:carol"),
    ]
    assert B.spent(group, charged, NOW) == pytest.approx(2 + 3)


def test_hours_come_back_when_the_window_has_slid_past_enough_old_hours():
    b = B.Budget("user:alice", gpu_hours=10, window="30d")
    # 10 GPUs for one hour, 29 days ago: spent; it leaves the window one day from now
    old = session("alice", 10, NOW - 29 * D, NOW - 29 * D + H)
    assert B.back_at(b, [old], NOW) == NOW + D + 60  # the next whole minute after it is out
    # 12 GPU-hours used, 10 allowed: hours come back once 2 of the 12 have left the window,
    # 10 minutes after that old hour starts leaving it (and the minute after)
    twelve = session("alice", 12, NOW - 29 * D, NOW - 29 * D + H)
    assert B.back_at(b, [twelve], NOW) == NOW + D + 10 * 60 + 60
    # not spent: no time
    assert B.back_at(b, [session("alice", 1, NOW - H, NOW)], NOW) is None
    # a budget of 0 never has hours
    assert B.back_at(B.Budget("user:alice", gpu_hours=0, window="1d"), [], NOW) is None


def test_an_admission_is_refused_where_a_budget_is_spent_and_says_spent_budget_and_when():
    registry = load_texts(
        [
            (
                textwrap.dedent(
                    """
                    kind: pool
                    pool: {name: a100}
                    nodes: {n1: {gpu-type: A100}}
                    ---
                    kind: pool
                    pool: {name: h100}
                    nodes: {n2: {gpu-type: H100}}
                    ---
                    kind: quota
                    quota: {name: q}
                    budgets:
                      - {user: alice, gpu_hours: 10, window: 30d, pools: [a100]}
                    """
                ),
                "q.yaml",
            )
        ]
    )
    index = UsageIndex()
    index.reset(nodes=[_node("n1", "a100"), _node("n2", "h100")], pods=[])
    book = Book([session("alice", 10, NOW - 29 * D, NOW - 29 * D + H, pool="a100")])
    state = AdmissionState(registry, index, Reservations(), budgets=book, now=NOW)
    d = decide(AdmissionRequest(user="alice", pools=("a100", "h100"), gpus=1), state)
    # the budget covers a100 only: h100 takes the server, a100 says why not
    assert d.admitted and d.pool == "h100"
    assert [str(s) for s in d.skipped] == [
        "a100: your budget of 10 GPU-hours per 30 days in a100 is spent (10 GPU-hours used); "
        "hours come back from 2026-11-24 12:01 UTC"
    ]
    # a server without GPUs is never refused, nor is somebody else
    assert decide(AdmissionRequest(user="alice", pools=("a100",), gpus=0), state).admitted
    assert decide(AdmissionRequest(user="bob", pools=("a100",), gpus=1), state).admitted
    # no budget book (no ledger): budgets are not enforced
    unbooked = AdmissionState(registry, index, Reservations(), now=NOW)
    assert decide(AdmissionRequest(user="alice", pools=("a100",), gpus=1), unbooked).admitted
    # a running server it pays for: the time assumes it stops now
    running = Book([session("alice", 5, NOW - 2 * H, pool="a100")])
    state = AdmissionState(registry, index, Reservations(), budgets=running, now=NOW)
    d = decide(AdmissionRequest(user="alice", pools=("a100",), gpus=1), state)
    assert not d.admitted
    assert d.reasons[0].endswith(
        "hours come back from 2026-12-23 10:01 UTC if the running servers it pays for stop now"
    )


def _node(name, pool):
    return {
        "metadata": {"name": name, "labels": {POOL_LABEL: pool}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "capacity": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_rows_say_what_is_left_and_paid_by_finds_the_servers_a_spent_budget_pays_for():
    alice = B.Budget("user:alice", gpu_hours=10, window="1d")
    ml = B.Budget("group:ml", gpu_hours=100, window="7d", pools=("a100",))
    book = Book([session("alice", 2, NOW - 3 * H, charged="group:ml")])
    rows = B.budget_rows([alice, ml], book, NOW)
    assert rows == [
        {
            "subject": "user:alice",
            "gpu_hours": 10,
            "window": "1d",
            "pools": [],
            "spent": 6.0,
            "remaining": 4.0,
            "back_at": None,
        },
        {
            "subject": "group:ml",
            "gpu_hours": 100,
            "window": "7d",
            "pools": ["a100"],
            "spent": 6.0,
            "remaining": 94.0,
            "back_at": None,
        },
    ]
    assert B.over_budget([alice, ml], book, NOW + 2 * H) == [(alice, pytest.approx(10.0))]

    class S:
        def __init__(self, user, charged, pool, gpus=1, state="running", units=None):
            self.user, self.charged, self.pool, self.gpus, self.state = (
                user,
                charged,
                pool,
                gpus,
                state,
            )
            self.units = gpus if units is None else units

    servers = [
        S("alice", "user:alice", "a100"),
        S("alice", "group:ml", "h100"),
        S("bob", "group:ml", "a100"),
        S("alice", "user:alice", "a100", gpus=0),
        S("alice", "user:alice", "a100", state="pending"),
        # a MIG device: no nvidia.com/gpu, one unit of nvidia.com/mig-1g.10gb
        S("alice", "user:alice", "a100", gpus=0, units=1),
    ]
    # alice's server charged to group ml is the group's to pay for, not hers (issue 30)
    assert B.paid_by([alice], servers) == [servers[0], servers[5]]
    assert B.paid_by([ml], servers) == [servers[2]]
    assert B.applying([alice, ml], "bob", ["ml"]) == [ml]
    assert B.applying([alice, ml], "alice", [], pool="h100") == [alice]


def test_a_shaped_session_counts_its_gpu_equivalents_and_an_old_one_its_gpus():
    """A MIG 1g of an A100 (1/7) for 7 h is one GPU-hour; a session written before shapes were
    kept (no ``equivalents``) counts its GPUs."""
    b = B.Budget("user:alice", gpu_hours=3, window="1d")
    mig = session("alice", 0, NOW - 7 * H, NOW) | {"shape": "mig-1g.10gb", "equivalents": "1/7"}
    old = session("alice", 2, NOW - 3 * H, NOW - 2 * H)  # 2 GPU-hours
    assert B.spent(b, [mig], NOW) == pytest.approx(1.0)
    assert B.spent(b, [mig, old], NOW) == pytest.approx(3.0)
    # spent at 3: hours come back as soon as the MIG session, the first to begin, starts
    # leaving the window (NOW - 7 h + 1 d), to the minute, rounded up
    assert B.back_at(b, [mig, old], NOW) == NOW - 7 * H + D + 60
    assert B.spent(b, [mig | {"equivalents": "3/7"}], NOW) == pytest.approx(3.0)


QUOTA = """\
kind: quota
quota: {name: q}
budgets:
  - {group: ml, gpu_hours: 1000, window: 30d}
  - {user: alice, gpu_hours: 12.5, window: 7d, pools: [a100]}
  - {user: bob, group: ml, gpu_hours: 5}
  - {gpu_hours: 5}
  - {user: carol, gpu_hours: -1, window: 3w}
  - {user: dan, gpu_hours: 4, pools: [nope]}
  - {group: ml, gpu_hours: 10}
  - {user: erin, gpu_hours: true, window: 400d}
  - {user: frank}
"""
POOL = "kind: pool\npool: {name: a100}\nnodes: {n1: {gpu-type: A100}}\n"


def test_budgets_validate_like_the_rest_of_the_document_with_file_and_line():
    with pytest.raises(DocumentError) as e:
        load_texts([(POOL, "a100.yaml"), (QUOTA, "quotas.yaml")])
    assert [str(p) for p in e.value.problems] == [
        "quotas.yaml:6: budgets[2]: a budget is for a user or a group: give either 'user' or "
        "'group', not both",
        "quotas.yaml:7: budgets[3]: a budget is for a user or a group: give 'user' or 'group'",
        "quotas.yaml:8: budgets[4].gpu_hours: must not be below 0, not -1",
        "quotas.yaml:8: budgets[4].window: '3w' is not a window such as 24h or 30d (a whole "
        "number of hours or days, at most 366d)",
        "quotas.yaml:9: budgets[5].pools[0]: unknown pool 'nope' (pools: a100, default)",
        "quotas.yaml:10: budgets[6]: the budget of group 'ml' in all pools is already set at "
        "quotas.yaml:4",
        "quotas.yaml:11: budgets[7].gpu_hours: must be a number, not true",
        "quotas.yaml:11: budgets[7].window: '400d' is not a window such as 24h or 30d (a whole "
        "number of hours or days, at most 366d)",
        "quotas.yaml:12: budgets[8]: missing required key 'gpu_hours'",
    ]


def test_budgets_are_written_back_as_they_were_read():
    text = "\n".join(QUOTA.splitlines()[:5]) + "\n"
    registry = load_texts([(POOL, "a100.yaml"), (text, "quotas.yaml")])
    assert [(b.subject, b.gpu_hours, b.window, b.pools) for b in registry.budgets] == [
        ("group:ml", 1000.0, "30d", ()),
        ("user:alice", 12.5, "7d", ("a100",)),
    ]
    [quota_doc] = [d for d in registry_to_documents(registry) if d["kind"] == "quota"]
    assert quota_doc["budgets"] == [
        {"group": "ml", "gpu_hours": 1000, "window": "30d"},
        {"user": "alice", "gpu_hours": 12.5, "window": "7d", "pools": ["a100"]},
    ]
    again = load_texts([(POOL, "a100.yaml"), (yaml.safe_dump(quota_doc), "again.yaml")])
    assert again.budgets == registry.budgets
