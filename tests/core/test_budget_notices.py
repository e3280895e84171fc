"""Budgets while servers run (issue 30), with a moved clock: a budget spent in the middle of a
session warns at its share, says when it runs out, warns again when spent, and stops (under
``on_exhausted: stop``) only ``grace`` after that warning; a server charged to a group is the
group budget's, not its user's.

The GPU-hours are the test's own arithmetic: GPUs times the hours the clock moved."""

from __future__ import annotations

import datetime

import pytest

from jupyter_gpupool.core.accounting.budgets import Budget
from jupyter_gpupool.core.time import budget_notices as N
from jupyter_gpupool.core.usage.rows import ServerUsage

H, M = 3600.0, 60.0
T0 = datetime.datetime(2026, 11, 23, 8, 0, tzinfo=datetime.timezone.utc).timestamp()
RULES = N.BudgetRules(warn_percent=90, grace_seconds=15 * M, on_exhausted="report")


class Book:
    def __init__(self, sessions):
        self.sessions = sessions

    def sessions_for(self, budget):
        return self.sessions


def session(user, gpus, started, charged=None):
    return {
        "pod_uid": f"{user}-{started}",
        "user": user,
        "charged": charged or f"user:{user}",
        "pool": "a100",
        "gpus": gpus,
        "started": started,
        "stopped": None,
    }


def server(user, charged=None, gpus=2):
    return ServerUsage(
        namespace="default",
        name=f"{user}-nb",
        user=user,
        server="",
        pool="a100",
        node="n1",
        gpus=gpus,
        state="running",
        over_quota=False,
        charged=charged or f"user:{user}",
        admission=None,
        platform=None,
        created="2026-11-23T08:00:00Z",
        units=gpus,
    )


def test_a_budget_spent_mid_session_warns_then_stops_after_the_grace():
    bob = Budget("user:bob", gpu_hours=10, window="1d", on_exhausted="stop")
    book = Book([session("bob", 2, T0)])  # 2 GPUs from T0: 2 GPU-hours an hour
    s = server("bob")
    # 4h in: 8 of 10, 80%: under the 90% share, nothing
    assert N.standings([bob], book, RULES, T0 + 4 * H) == []
    # 4.5h in: 9 of 10, 90%: warned, runs out in half an hour at 2 an hour
    [st] = N.standings([bob], book, RULES, T0 + 4.5 * H)
    assert (st.used, st.exhausted, st.runs_out_at) == (pytest.approx(9), False, T0 + 5 * H)
    n = N.notice(st, T0 + 4.5 * H, RULES)  # (not spent: the time is not used)
    assert (n.kind, n.action, n.deadline) == ("budget", "report", T0 + 5 * H)
    assert n.words == (
        "your budget of 10 GPU-hours per day is 90% spent; at this rate it runs out at "
        "2026-11-23 13:00 UTC, and this server is stopped 15m after that"
    )
    assert N.due([st], s, {}, T0 + 4.5 * H, RULES) is None
    # 5h in: spent. First warned now: stopped 15 minutes later, not before
    [st] = N.standings([bob], book, RULES, T0 + 5 * H)
    assert st.exhausted and st.runs_out_at is None
    warned = {N.key_of(bob): T0 + 5 * H}
    n = N.notice(st, T0 + 5 * H, RULES)
    assert (n.action, n.deadline) == ("stop", T0 + 5.25 * H)
    assert n.words == (
        "your budget of 10 GPU-hours per day is spent (10 GPU-hours used): this server stops "
        "at 2026-11-23 13:15 UTC"
    )
    [st] = N.standings([bob], book, RULES, T0 + 5 * H + 14 * M)
    assert N.due([st], s, warned, T0 + 5 * H + 14 * M, RULES) is None
    [st] = N.standings([bob], book, RULES, T0 + 5.25 * H)
    assert N.due([st], s, warned, T0 + 5.25 * H, RULES) == st
    # never warned (a service just restarted): not due, however long it has been spent
    assert N.due([st], s, {}, T0 + 9 * H, RULES) is None


def test_report_only_warns_and_the_service_default_applies_to_budgets_that_do_not_say():
    bob = Budget("user:bob", gpu_hours=10, window="1d")  # says nothing: the service's default
    book = Book([session("bob", 2, T0)])
    [st] = N.standings([bob], book, RULES, T0 + 6 * H)
    assert st.exhausted and st.action == "report"
    n = N.notice(st, T0 + 5 * H, RULES)
    assert (n.action, n.deadline) == ("report", None)
    assert n.words.endswith("; no new server with GPUs starts until hours come back")
    assert N.due([st], server("bob"), {N.key_of(bob): T0 + 5 * H}, T0 + 9 * H, RULES) is None
    stopping = N.BudgetRules(on_exhausted="stop")  # stop_over_budget: stop where not said
    [st] = N.standings([bob], book, stopping, T0 + 6 * H)
    assert st.action == "stop"
    # a budget's own share wins over the service's
    early = Budget("user:bob", gpu_hours=10, window="1d", warn_percent=50)
    assert N.standings([early], book, RULES, T0 + 2.5 * H)[0].percent == pytest.approx(50)
    assert N.standings([early], book, RULES, T0 + 2.4 * H) == []


def test_a_server_charged_to_a_group_is_the_group_budgets_not_its_users():
    alice = Budget("user:alice", gpu_hours=1, window="1d", on_exhausted="stop")
    ml = Budget("group:ml", gpu_hours=100, window="1d", on_exhausted="stop")
    book = Book([session("alice", 2, T0, charged="group:ml")])
    at = T0 + 2 * H  # alice: 4 of 1 (her budget counts all her sessions); ml: 4 of 100
    found = N.standings([alice, ml], book, RULES, at)
    assert [st.budget for st in found] == [alice]
    s = server("alice", charged="group:ml")
    assert N.paying(found, s) == []  # her spent budget does not stop the group's server
    assert N.due(found, s, {N.key_of(alice): T0}, at, RULES) is None
    own = server("alice")
    assert N.paying(found, own) == found  # her own server is hers to pay for
    assert N.due(found, own, {N.key_of(alice): T0}, at, RULES) == found[0]
    # the group's budget spent: the group's server stops
    ml_spent = Budget("group:ml", gpu_hours=3, window="1d", on_exhausted="stop")
    found = N.standings([alice, ml_spent], book, RULES, at)
    assert [st.budget for st in N.paying(found, s)] == [ml_spent]
    assert N.due(found, s, {N.key_of(ml_spent): T0 + H}, at, RULES).budget == ml_spent


def test_a_server_within_a_booking_is_paid_by_no_budget():
    alice = Budget("user:alice", gpu_hours=1, window="1d", on_exhausted="stop")
    book = Book([session("alice", 2, T0, charged="booking:cs231")])
    at = T0 + 2 * H  # her hours within the booking still count in her budget: spent
    found = N.standings([alice], book, RULES, at)
    assert [st.budget for st in found] == [alice]
    booked = server("alice", charged="booking:cs231")
    assert N.paying(found, booked) == []  # but no budget stops a server within a booking
    assert N.due(found, booked, {N.key_of(alice): T0}, at, RULES) is None
    assert N.paying(found, server("alice")) == found  # her own server still stops


def test_the_rate_counts_the_servers_still_running_and_a_server_without_gpus_pays_nothing():
    bob = Budget("user:bob", gpu_hours=10, window="1d", on_exhausted="stop")
    ended = {**session("bob", 2, T0), "stopped": T0 + 4 * H}  # 8 GPU-hours, over
    book = Book([ended, session("bob", 1, T0 + 4 * H)])  # then 1 GPU from 12:00
    # 13:00: 8 + 1 = 9 of 10; at 1 GPU-hour an hour (the ended server spends nothing) the
    # last hour runs out at 14:00
    [st] = N.standings([bob], book, RULES, T0 + 5 * H)
    assert (st.used, st.runs_out_at) == (pytest.approx(9), T0 + 6 * H)
    # a server without GPUs is paid by no budget: it is never warned or stopped for one
    assert N.paying([st], server("bob", gpus=0)) == []
    assert N.paying([st], server("bob")) == [st]
