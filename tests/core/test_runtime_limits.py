"""Runtime limits (issue 30): a pool's or shape's ``max-runtime`` read from pool files
(FILE:LINE for every mistake), and the rule with a moved clock: warned ``warn`` before the
limit, stopped at it, never less than ``warn`` after the first warning.

The times expected are worked out by hand from the server's start and the limit written."""

from __future__ import annotations

import datetime
import textwrap

import pytest

from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.pools.reading import load_texts
from jupyter_gpupool.core.pools.writing import registry_to_documents
from jupyter_gpupool.core.time import runtime
from jupyter_gpupool.core.usage.rows import ServerUsage

H, M = 3600.0, 60.0
START = datetime.datetime(2026, 11, 23, 8, 0, tzinfo=datetime.timezone.utc)
T0 = START.timestamp()

POOL = textwrap.dedent(
    """\
    kind: pool
    pool: {name: a100}
    max-runtime: {after: 8h, warn: 30m, exempt: {users: [alice], groups: [long-jobs]}}
    shapes:
      - {id: whole}
      - {id: mig-1g.10gb, max-runtime: {after: 2h}}
    """
)


def server(shape=None, created=START, user="bob", units=1):
    return ServerUsage(
        namespace="default",
        name=f"{user}-nb",
        user=user,
        server="",
        pool="a100",
        node="n1",
        gpus=units if shape is None else 0,
        state="running",
        over_quota=False,
        charged=f"user:{user}",
        admission=None,
        platform=None,
        created=created.strftime("%Y-%m-%dT%H:%M:%SZ") if created else "",
        shape=shape,
        units=units,
    )


def test_a_pool_file_sets_a_runtime_limit_per_pool_and_per_shape_and_writes_it_back():
    registry = load_texts([(POOL, "a100.yaml")])
    pool = registry.pools["a100"]
    limit = runtime.limit_of(pool, server())
    assert limit is not None and (limit.after, limit.warn) == ("8h", "30m")
    assert (limit.after_seconds, limit.warn_seconds) == (8 * H, 30 * M)
    assert limit.exempt_users == ("alice",) and limit.exempt_groups == ("long-jobs",)
    assert limit.source.line == 3
    # the shape's own limit wins for its servers; its warning is the default 15m
    mig = runtime.limit_of(pool, server(shape="mig-1g.10gb"))
    assert mig is not None and (mig.after_seconds, mig.warn_seconds) == (2 * H, 15 * M)
    # written back, it loads the same
    again = load_texts([(yaml_dump(registry_to_documents(registry)[0]), "again.yaml")])
    assert again.pools["a100"] == pool
    # no limit, no rule
    plain = load_texts([("kind: pool\npool: {name: p}\n", "p.yaml")]).pools["p"]
    assert runtime.limit_of(plain, server()) is None


def yaml_dump(doc):
    import yaml

    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "max-runtime: {after: 1h, warn: 2h}\n",
            "p.yaml:3: max-runtime.warn: the warning (2h) must not come before the server "
            "starts: it is longer than 'after' (1h)",
        ),
        ("max-runtime: {warn: 2h}\n", "p.yaml:3: max-runtime: missing required key 'after'"),
        ("max-runtime: {after: 8 hours}\n", "p.yaml:3: max-runtime.after:"),
        ("max-runtime: {after: 0h}\n", "p.yaml:3: max-runtime.after: a runtime limit must be"),
        (
            "shapes:\n  - {id: whole, max-runtime: {after: 2h, exempt: {users: alice}}}\n",
            "p.yaml:4: shapes[0].max-runtime.exempt.users:",
        ),
    ],
)
def test_a_wrong_runtime_limit_is_a_problem_at_its_line(text, problem):
    with pytest.raises(DocumentError) as e:
        load_texts([("kind: pool\npool: {name: p}\n" + text, "p.yaml")])
    assert str(e.value).startswith(problem), str(e.value)


def test_a_server_is_warned_before_its_limit_and_stopped_at_it_with_a_moved_clock():
    limit = runtime.RuntimeLimit(after="8h", warn="30m")
    s = server()
    # 7h29m in: nothing yet
    state = runtime.state_of(s, limit, None)
    assert state is not None
    assert (state.since, state.warn_at, state.due_at) == (T0, T0 + 7.5 * H, T0 + 8 * H)
    # warned at 7h30m (when the service first showed it): stopped at 8h, as written
    state = runtime.state_of(s, limit, T0 + 7.5 * H)
    assert state is not None and state.stop_at == T0 + 8 * H
    n = runtime.notice(s, limit, state, T0 + 7.5 * H)
    assert (n.kind, n.deadline, n.action) == ("runtime", T0 + 8 * H, "stop")
    assert n.words == (
        "this server has run for 7h30m; servers here may run 8h: it stops at 2026-11-23 16:00 UTC"
    )


def test_a_server_first_seen_past_its_limit_gets_the_whole_warning_before_its_stop():
    limit = runtime.RuntimeLimit(after="8h", warn="30m")
    # the service was down (or the limit was added) until 10h in: warned then, stopped 30m later
    state = runtime.state_of(server(), limit, T0 + 10 * H)
    assert state is not None and state.stop_at == T0 + 10.5 * H
    # a server whose start is unknown is left alone
    assert runtime.state_of(server(created=None), limit, None) is None


def test_exempt_users_and_groups():
    limit = runtime.RuntimeLimit(after="8h", exempt_users=("alice",), exempt_groups=("long",))
    assert limit.exempts("alice", [])
    assert limit.exempts("bob", ["x", "long"])
    assert not limit.exempts("bob", ["x"])
