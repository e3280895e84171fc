"""The service's database (jupyter_gpupool.db.store) on SQLite and PostgreSQL: the schema is
created and upgraded, a newer one refused untouched, writes come back, old samples are averaged
by the hour and the oldest deleted, and writes wait out an outage.

The truth is read with plain SQL through a connection of the test's own, not the store's reads.
"""

from __future__ import annotations

import time

import pg
import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text

from jupyter_gpupool.db.store import (
    MIGRATIONS,
    Database,
    DatabaseError,
    SchemaTooNew,
    head_revision,
)

HOUR = 3600.0
DAY = 86400.0


def sample(pool: str, used: float, total: float = 8) -> dict[str, float | str]:
    return {
        "pool": pool,
        "gpu_total": total,
        "gpu_used": used,
        "gpu_over_quota": 0,
        "gpu_pending": 0,
    }


def session(uid: str, user: str, started: float, **more: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "pod_uid": uid,
        "namespace": "default",
        "pod": f"jupyter-{user}",
        "user": user,
        "server": "",
        "charged": f"user:{user}",
        "pool": "p",
        "platform": None,
        "gpu_type": "A100",
        "gpus": 2,
        "over_quota": False,
        "started": started,
        "stopped": None,
        "last_seen": started,
        "ended": None,
    }
    return fields | more


def rows(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def at_revision(url: str, revision: str, sql: str) -> None:
    """The database at an older schema ``revision``, with a row written by ``sql``."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            cfg = Config()
            cfg.set_main_option("script_location", str(MIGRATIONS))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.execute(text(sql))
    finally:
        engine.dispose()


def test_open_creates_the_schema_and_opening_again_keeps_it(db_url):
    first = Database(db_url)
    assert first.open() == (None, head_revision())
    first.close()
    engine = create_engine(db_url)
    tables = set(inspect(engine).get_table_names())
    engine.dispose()
    assert {"usage_samples", "server_sessions", "changes", "alembic_version"} <= tables
    again = Database(db_url)
    assert again.open() == (head_revision(), head_revision())
    again.close()


def test_a_database_of_a_newer_gpupool_is_refused_and_left_as_it_is(db_url):
    first = Database(db_url, batch_seconds=0)
    first.open()
    first.add_change(1.0, "user admin", "created pool p", "API")
    assert first.flush()
    first.close()
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    newer = Database(db_url)
    with pytest.raises(SchemaTooNew) as refused:
        newer.open()
    assert "schema revision 9999, newer than this gpupool knows" in str(refused.value)
    assert "upgrade jupyter_gpupool" in str(refused.value)
    assert rows(db_url, "SELECT version_num FROM alembic_version") == [("9999",)]
    assert rows(db_url, "SELECT who, what FROM changes") == [("user admin", "created pool p")]


def test_what_is_written_is_read_back(db):
    now = time.time()
    db.add_samples(now - 60, [sample("p", 1), sample("q", 0, 4)])
    db.add_samples(now, [sample("p", 3)])
    db.add_change(now, "user admin", "created pool q", "page")
    db.open_session(session("u1", "alice", now - 100))
    db.open_session(session("u1", "alice", now - 50))  # the same pod again: kept as it was
    db.open_session(session("u2", "bob", now - 10))
    db.close_session("u2", now, "reclaimed")
    assert db.flush()
    assert rows(db.url, "SELECT pool, gpu_used FROM usage_samples ORDER BY time, pool") == [
        ("p", 1.0),
        ("q", 0.0),
        ("p", 3.0),
    ]
    assert [s["gpu_used"] for s in db.samples(now - 30, "p")] == [3.0]
    assert db.changes() == [
        {"time": now, "who": "user admin", "what": "created pool q", "via": "page"}
    ]
    stored = rows(db.url, "SELECT pod_uid, started, stopped, ended FROM server_sessions")
    assert sorted(stored) == [("u1", now - 100, None, None), ("u2", now - 10, now, "reclaimed")]
    assert [s["pod_uid"] for s in db.sessions(open_only=True)] == ["u1"]


def test_old_samples_become_hourly_averages_and_the_oldest_go(db):
    now = 1_800_000_000.0
    hour = (now - 8 * DAY) // HOUR * HOUR  # an hour 8 days ago: older than the raw 7 days
    for i, used in enumerate([1, 2, 3, 6]):
        db.add_samples(hour + i * 600, [sample("p", used)])
    db.add_samples(now - 100 * DAY, [sample("p", 8)])  # older than the 90 days kept
    db.add_samples(now - HOUR, [sample("p", 5)])  # recent: stays as it is
    db.open_session(session("old", "carol", now - 120 * DAY, stopped=now - 100 * DAY))
    db.open_session(session("new", "dave", now - 2 * DAY, stopped=now - DAY))
    db.add_change(now - 95 * DAY, "user admin", "long ago", "API")
    assert db.flush()
    db.prune(now, raw_days=7, keep_days=90)
    assert db.flush()
    assert rows(db.url, "SELECT time, hourly, gpu_used FROM usage_samples ORDER BY time") == [
        (hour, True, 3.0),  # (1 + 2 + 3 + 6) / 4
        (now - HOUR, False, 5.0),
    ]
    assert rows(db.url, "SELECT pod_uid FROM server_sessions") == [("new",)]
    assert rows(db.url, "SELECT count(*) FROM changes") == [(0,)]


def test_writes_wait_while_postgresql_is_down_and_land_when_it_is_back():
    with pg.running() as server:
        db = Database(server.url, batch_seconds=0, retry_cap=0.5)
        db.open()
        try:
            db.add_change(1.0, "user admin", "before", "API")
            assert db.flush()
            pg.stop(server)
            db.add_change(2.0, "user admin", "while down", "API")
            db.add_samples(2.0, [sample("p", 1)])
            assert not db.flush(timeout=3)  # nothing can be written now
            assert not db.healthy and db.last_error
            pg.start(server)
            assert db.flush(timeout=30)
            assert db.healthy and db.last_error == ""
        finally:
            db.close()
        assert rows(server.url, "SELECT what FROM changes ORDER BY time") == [
            ("before",),
            ("while down",),
        ]
        assert rows(server.url, "SELECT count(*) FROM usage_samples") == [(1,)]


def test_a_database_that_could_not_be_opened_or_read_back_opens_later_and_writes(outage):
    """The service calls ``open`` again until it works (issue 36): a failed open leaves
    nothing behind, and an open whose read-back failed is shut and opened again, its writer
    writing again."""
    db = Database(outage.url, batch_seconds=0)
    outage.down()
    with pytest.raises(DatabaseError, match="cannot use the database"):
        db.open()
    assert db.engine is None and not db.healthy
    with pytest.raises(DatabaseError, match="not open"):
        db.ping()
    outage.up()
    db.open()
    try:
        db.ping()
        assert db.read_back(0.0, 0.0) == {
            "sessions": [],
            "changes": [],
            "reservations": [],
            "queue": [],
            "bookings": [],
        }
        db.add_change(1.0, "user admin", "first", "API")
        assert db.flush(timeout=10)
        db.shut()  # as after a read-back that failed
        assert db.engine is None
        db.open()
        db.add_change(2.0, "user admin", "after the second open", "API")
        assert db.flush(timeout=10)
        assert [c["what"] for c in db.read_back(0.0, 0.0)["changes"]] == [
            "after the second open",
            "first",
        ]
    finally:
        db.close()
    assert rows(outage.url, "SELECT what FROM changes ORDER BY time") == [
        ("first",),
        ("after the second open",),
    ]


def test_seen_open_marks_every_open_session_and_no_closed_one(db, db_url):
    now = time.time()
    db.open_session(session("u1", "alice", now - 100))
    db.open_session(session("u2", "bob", now - 100))
    db.close_session("u2", now - 50, "stopped")
    db.seen_open(now)
    db.flush()
    assert rows(db_url, "SELECT pod_uid, last_seen FROM server_sessions ORDER BY pod_uid") == [
        ("u1", now),
        ("u2", now - 100),
    ]
    # sessions filtered by user or by charged subject (the budgets' read)
    assert [s["pod_uid"] for s in db.sessions(users=["bob"], charged=[])] == ["u2"]
    assert [s["pod_uid"] for s in db.sessions(users=[], charged=["user:alice"])] == ["u1"]


# --- GPUs busy (issue 17): schema revision 0002 ---------------------------------------------------


def test_a_first_schema_database_is_upgraded_on_open_and_keeps_its_samples(db_url):
    """A database of revision 0001 (before GPU utilization) gets ``gpu_busy`` when opened; its
    samples stay, with no value (nothing was measured then)."""
    at_revision(
        db_url,
        "0001",
        "INSERT INTO usage_samples (time, pool, hourly, gpu_total, gpu_used,"
        " gpu_over_quota, gpu_pending) VALUES (1.0, 'p', false, 8, 3, 0, 0)",
    )
    engine = create_engine(db_url)
    try:
        columns = {c["name"] for c in inspect(engine).get_columns("usage_samples")}
    finally:
        engine.dispose()
    assert "gpu_busy" not in columns
    db = Database(db_url, batch_seconds=0)
    assert db.open() == ("0001", head_revision())
    try:
        db.add_samples(2.0, [sample("p", 4) | {"gpu_busy": 1.5}])
        assert db.flush()
        assert rows(db_url, "SELECT time, gpu_used, gpu_busy FROM usage_samples ORDER BY time") == [
            (1.0, 3.0, None),
            (2.0, 4.0, 1.5),
        ]
        assert [s["gpu_busy"] for s in db.samples(0.0, "p")] == [None, 1.5]
    finally:
        db.close()


def test_hourly_averages_of_gpus_busy_leave_out_the_samples_not_measured(db):
    now = 1_800_000_000.0
    hour = (now - 8 * DAY) // HOUR * HOUR
    for i, busy in enumerate([1.0, None, 2.5]):
        db.add_samples(hour + i * 600, [sample("p", 4) | {"gpu_busy": busy}, sample("q", 1)])
    assert db.flush()
    db.prune(now, raw_days=7, keep_days=90)
    assert db.flush()
    assert rows(
        db.url, "SELECT pool, hourly, gpu_used, gpu_busy FROM usage_samples ORDER BY pool"
    ) == [
        ("p", True, 4.0, 1.75),  # (1.0 + 2.5) / 2: the unmeasured sample is not a 0
        ("q", True, 1.0, None),  # never measured
    ]


# --- idle warnings (issue 17): schema revision 0003 ----------------------------------------------


def test_a_revision_0002_database_gets_idle_warnings_and_keeps_its_sessions(db_url):
    """Sessions written before 0003 stay, never warned; a warning is kept on the open session
    of its pod only, and the latest warnings are listed newest first with how they ended."""
    at_revision(
        db_url,
        "0002",
        'INSERT INTO server_sessions (pod_uid, namespace, pod, "user", server, gpus,'
        " over_quota, started, last_seen) VALUES"
        " ('old', 'default', 'jupyter-old', 'olga', '', 1, false, 1.0, 2.0)",
    )
    db = Database(db_url, batch_seconds=0)
    assert db.open() == ("0002", head_revision())
    try:
        db.open_session(session("u1", "alice", 100.0))
        db.open_session(session("u2", "bob", 100.0))
        db.idle_warned("u1", 200.0)
        db.idle_warned("u2", 150.0)
        db.close_session("u2", 160.0, "culled")
        db.idle_warned("u2", 300.0)  # closed: not warned again
        db.idle_warned("u1", 250.0)  # the latest warning is kept
        assert db.flush()
        assert rows(db_url, "SELECT pod_uid, idle_warned FROM server_sessions ORDER BY id") == [
            ("old", None),
            ("u1", 250.0),
            ("u2", 150.0),
        ]
        assert [(w["pod_uid"], w["ended"]) for w in db.idle_warnings(0.0)] == [
            ("u1", None),
            ("u2", "culled"),
        ]
        assert [w["pod_uid"] for w in db.idle_warnings(200.0)] == ["u1"]
    finally:
        db.close()


# --- the fair queue (issue 18): schema revision 0004 ---------------------------------------------


def entry(eid: str, seq: int, user: str = "bob", **more: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "id": eid,
        "seq": seq,
        "since": 100.0 + seq,
        "user": user,
        "groups": ["students"],
        "pools": ["dev-pool", "training-pool"],
        "gpus": 2,
        "gpu_type": None,
        "server": "big",
        "reclaim": True,
    }
    return fields | more


def test_a_revision_0003_database_keeps_the_line_and_how_entries_left_it(db_url):
    """The queue's table comes with 0004 on a database of 0003; entries come back in order of
    arrival with their request, ended ones only when admitted since the time asked for, and
    entries that left the line long ago are pruned with the rest."""
    at_revision(
        db_url,
        "0003",
        "INSERT INTO changes (time, who, \"what\", via) VALUES (1.0, 'admin', 'x', 'api')",
    )
    db = Database(db_url, batch_seconds=0)
    assert db.open() == ("0003", head_revision())
    try:
        db.queue_add(entry("b", 2, gpu_type="A100-80G"))
        db.queue_add(entry("a", 1, user="alice", groups=[], pools=[]))
        db.queue_add(entry("c", 3, user="carol"))
        db.queue_add(entry("d", 4, user="dave"))
        db.queue_end("c", "admitted", 500.0)
        db.queue_end("d", "cancelled", 500.0)
        assert db.flush()
        assert rows(db_url, "SELECT id, state, ended FROM queue_entries ORDER BY seq") == [
            ("a", "queued", None),
            ("b", "queued", None),
            ("c", "admitted", 500.0),
            ("d", "cancelled", 500.0),
        ]
        assert [(e["id"], e["user"], e["pools"], e["groups"]) for e in db.queue()] == [
            ("a", "alice", [], []),
            ("b", "bob", ["dev-pool", "training-pool"], ["students"]),
        ]
        back = db.queue(admitted_since=400.0)
        assert [(e["id"], e["state"]) for e in back] == [
            ("a", "queued"),
            ("b", "queued"),
            ("c", "admitted"),
        ]
        assert back[1]["gpu_type"] == "A100-80G" and back[1]["since"] == 102.0
        assert [e["id"] for e in db.queue(admitted_since=501.0)] == ["a", "b"]
        db.prune(500.0 + 91 * DAY, raw_days=7, keep_days=90)
        assert db.flush()
        assert rows(db_url, "SELECT id FROM queue_entries ORDER BY seq") == [("a",), ("b",)]
    finally:
        db.close()


# --- durable writes and the reservations (issue 27): schema revision 0005 ------------------------


def reservation(aid: str, expires_at: float, **more: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "admission_id": aid,
        "pool": "dev-pool",
        "node": "gpu-01",
        "gpus": 2,
        "user": "alice",
        "charged": "group:team-a",
        "over_quota": False,
        "expires_at": expires_at,
        "resource": "nvidia.com/gpu",
        "equivalents": None,
        "shape": None,
    }
    return fields | more


def test_a_durable_write_commits_at_once_and_concurrent_ones_share_a_commit(db_url):
    """With a batch of 30 s, a durable write still commits at once (its future says so), and
    plain writes queued before it go in the same commit; the reservations not expired come back
    with every field, and a dropped one is gone."""
    db = Database(db_url, batch_seconds=30)
    db.open()
    try:
        db.add_change(1.0, "user admin", "first", "API")
        assert db.flush(timeout=5)  # the writer now gathers the next batch for 30 s
        db.add_change(2.0, "user admin", "plain", "API")
        started = time.monotonic()
        futures = [db.reservation_add(reservation(f"a{i}", 1000.0 + i)) for i in range(20)]
        futures.append(db.reservation_add(reservation("old", 10.0, node=None)))
        for f in futures:
            assert f is not None
            f.result(timeout=5)
        assert time.monotonic() - started < 5, "a durable write waited for the batch"
        assert rows(db_url, "SELECT what FROM changes ORDER BY time") == [("first",), ("plain",)]
        back = db.reservations(now=500.0)
        assert [r["admission_id"] for r in back] == [f"a{i}" for i in range(20)]
        assert back[0] == reservation("a0", 1000.0)
        # a MIG instance's reservation keeps its resource and its GPU-equivalents (issue 29)
        mig = reservation(
            "m",
            900.0,
            resource="nvidia.com/mig-1g.10gb",
            gpus=1,
            equivalents="1/7",
            shape="mig-1g.10gb",
        )
        db.reservation_add(mig).result(timeout=5)  # type: ignore[union-attr]
        assert db.reservations(now=500.0)[0] == mig
        db.reservation_drop("a3")
        db.queue_add(entry("q", 1), durable=True).result(timeout=5)  # type: ignore[union-attr]
        assert "a3" not in {r["admission_id"] for r in db.reservations(now=500.0)}
    finally:
        db.close()


def test_a_durable_write_fails_when_the_database_cannot_take_it_and_is_not_retried():
    """PostgreSQL down: the durable write's future fails (its waiter drops what it promised),
    the plain writes wait and land when it is back, the failed durable write never does."""
    with pg.running() as server:
        db = Database(server.url, batch_seconds=0, retry_cap=0.5)
        db.open()
        try:
            pg.stop(server)
            db.add_change(2.0, "user admin", "while down", "API")
            failed = db.reservation_add(reservation("lost", 1e12))
            assert failed is not None
            with pytest.raises(DatabaseError):
                failed.result(timeout=30)
            pg.start(server)
            assert db.flush(timeout=30)
        finally:
            db.close()
        assert rows(server.url, "SELECT what FROM changes") == [("while down",)]
        assert rows(server.url, "SELECT count(*) FROM reservations") == [(0,)]


# --- sessions of a shape (issue 29): schema revision 0007 ----------------------------------------


def test_a_revision_0006_database_keeps_its_sessions_as_whole_gpus_and_new_ones_say_their_shape(
    db_url,
):
    """Sessions written before 0007 get no shape and no equivalents, and a report counts their
    GPUs; a session of a MIG instance keeps its shape and its 3/7 exactly, and is counted so."""
    from jupyter_gpupool.core.accounting import ledger

    at_revision(
        db_url,
        "0006",
        'INSERT INTO server_sessions (pod_uid, namespace, pod, "user", server, gpus,'
        " over_quota, started, stopped, last_seen) VALUES"
        " ('old', 'default', 'jupyter-olga', 'olga', '', 2, false, 0.0, 3600.0, 3600.0)",
    )
    db = Database(db_url, batch_seconds=0)
    assert db.open() == ("0006", head_revision())
    try:
        mig = session("mig", "erin", 0.0, gpus=0, shape="mig-3g.40gb", equivalents="3/7")
        db.open_session(mig | {"stopped": 7 * HOUR})
        assert db.flush()
        assert rows(
            db_url, "SELECT pod_uid, gpus, shape, equivalents FROM server_sessions ORDER BY id"
        ) == [("old", 2, None, None), ("mig", 0, "mig-3g.40gb", "3/7")]
        read = db.sessions(since=0.0, fields=ledger.REPORT_FIELDS)
        report = ledger.gpu_hours(read, 0.0, 8 * HOUR, "shape")
        assert [(r["subject"], r["gpu_hours"]) for r in report] == [
            ("mig-3g.40gb", 3.0),  # 3/7 x 7 h
            ("whole", 2.0),  # olga's 2 GPUs x 1 h
        ]
    finally:
        db.close()
