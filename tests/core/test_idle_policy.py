"""The idle-GPU policy (issue 17), pure: the clock of one server, durations, and the pool
file's ``idle`` section with FILE:LINE for every mistake."""

from __future__ import annotations

import pytest
import yaml

from jupyter_gpupool.core.documents.durations import duration_seconds
from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.pools.reading import load_texts
from jupyter_gpupool.core.pools.writing import registry_to_documents
from jupyter_gpupool.core.time.idle import IdleClock, IdlePolicy, duration_words

POLICY = IdlePolicy(below_percent=5, after="2h", warn="15m")


def test_the_clock_runs_while_every_measurement_is_under_the_threshold():
    clock = IdleClock()
    clock.observe("s", 3.0, 100.0, 5)
    clock.observe("s", 4.9, 160.0, 5)
    state = clock.state("s", POLICY)
    assert state is not None
    assert (state.since, state.warn_at, state.due_at) == (100.0, 100 + 7200 - 900, 100 + 7200)
    clock.observe("s", 5.0, 200.0, 5)  # at the threshold: busy, the clock stops
    assert clock.state("s", POLICY) is None
    clock.observe("s", 0.0, 300.0, 5)
    assert clock.state("s", POLICY).since == 300.0  # starts again
    clock.observe("s", None, 330.0, 5)  # no fresh measurement: not idle
    assert clock.state("s", POLICY) is None
    clock.observe("t", 0.0, 1.0, 5)
    clock.forget_all_but(["s"])
    assert clock.state("t", POLICY) is None


def test_durations_and_their_words():
    assert [duration_seconds(t) for t in ("20s", "15m", "2h", "1d")] == [20, 900, 7200, 86400]
    with pytest.raises(ValueError, match="a duration is a whole number of s, m, h or d"):
        duration_seconds("1.5h")
    assert [duration_words(s) for s in (20, 900, 3900, 125)] == ["20s", "15m", "1h05m", "2m05s"]
    # the warning is at most the whole idle time; without one, 15 minutes
    assert IdlePolicy(after="20s").warn_seconds == 20
    assert IdlePolicy(after="2h").warn_seconds == 900
    assert IdlePolicy(after="2h", warn="30m", action="report").words() == (
        "under 5% for 2h (warned 30m before; then reported)"
    )


POOL = """\
kind: pool
pool: {name: dev}
nodes: {n1: {gpu-type: A100}}
idle:
  below_percent: 105
  after: 20s
  warn: 1m
  action: pause
  exempt: {users: [alice], teams: [x]}
"""


def test_a_pool_files_idle_section_is_checked_with_file_and_line():
    with pytest.raises(DocumentError) as e:
        load_texts([(POOL, "dev.yaml")])
    assert [str(p) for p in e.value.problems] == [
        "dev.yaml:5: idle.below_percent: must be at most 100, not 105",
        "dev.yaml:7: idle.warn: the warning (1m) must not come before the idle time starts: it "
        "is longer than 'after' (20s)",
        "dev.yaml:8: idle.action: must be one of stop, report, not 'pause'",
        "dev.yaml:9: idle.exempt.teams: unknown key 'teams' (allowed: groups, users)",
    ]


def test_a_pool_files_idle_section_is_read_and_written_back():
    text = POOL.replace("105", "5").replace("1m", "10s").replace("pause", "stop")
    text = text.replace(", teams: [x]", ", groups: [long-jobs]")
    registry = load_texts([(text, "dev.yaml")])
    policy = registry.pools["dev"].idle
    assert policy == IdlePolicy(5, "20s", "10s", "stop", ("alice",), ("long-jobs",))
    assert policy.exempts("bob", ["long-jobs"]) and not policy.exempts("bob", ["ml"])
    [doc] = registry_to_documents(registry)
    assert doc["idle"] == {
        "below_percent": 5,
        "after": "20s",
        "action": "stop",
        "warn": "10s",
        "exempt": {"users": ["alice"], "groups": ["long-jobs"]},
    }
    assert load_texts([(yaml.safe_dump(doc), "again.yaml")]).pools["dev"].idle == policy
