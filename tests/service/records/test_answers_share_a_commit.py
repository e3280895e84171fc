"""Admissions answered together share one commit (issue 39), on SQLite and PostgreSQL: spawners
that ask while the database commits are answered after the next commit, one for all of them;
when that commit fails, each of them is answered 503 and nothing is held for any of them, in the
service or in the database.

The database's commits are held back and counted through its engine's ``commit`` event (a slow
disk, as the service sees it); what is held is read from the API and, apart, with plain SQL.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from commit_points import CommitPoints, carries
from sqlalchemy.exc import OperationalError
from sqlrows import sql
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError

SPAWNERS = 8  # with the first, within the client's 10 connections (and training-pool's GPUs)


class HeldCommits:
    """Counts the writer's commits that carry reservations (other writes, such as the ledger's,
    come and go as they do in the service); while :attr:`holding`, the next of them waits until
    :meth:`release`; with :attr:`fail_next`, the next of them not held fails."""

    def __init__(self, db: Any):
        self.count = 0
        self.holding = False
        self.fail_next = False
        self.held = threading.Event()
        self._gate = threading.Event()
        CommitPoints(db.engine, self._commit)

    def _commit(self, statements: list[str]) -> None:
        if not carries(statements, "reservations"):
            return
        self.count += 1
        if self.holding:
            self.holding = False
            self.held.set()
            self._gate.wait(20)
        elif self.fail_next:
            self.fail_next = False
            raise OperationalError("COMMIT", {}, Exception("disk I/O error"))

    def release(self) -> None:
        self._gate.set()


async def start(db_url: str, start_service: Any) -> tuple[Any, Any, HeldCommits]:
    # samples every minute (the default): nothing but the admissions is written meanwhile
    service = await start_service(db_url=db_url)
    db = service.ctx.records.db
    assert await asyncio.to_thread(db.flush, 10)  # what the start wrote
    return service, service.admin(), HeldCommits(db)


def admit(admin: Any, user: str) -> asyncio.Future[Any]:
    return asyncio.ensure_future(admin.admit(user=user, groups=[], pools=["training-pool"], gpus=1))


async def while_a_commit_is_held(
    service: Any, admin: Any, commits: HeldCommits
) -> tuple[asyncio.Future[Any], list[asyncio.Future[Any]]]:
    """The first admission's commit is held; 8 spawners ask meanwhile and are decided (held
    in memory, their answers waiting): the first's answer and theirs, none of them done."""
    commits.holding = True
    first = admit(admin, "first")
    await asyncio.to_thread(commits.held.wait, 10)
    answers = [admit(admin, f"user{i}") for i in range(SPAWNERS)]
    reservations = service.ctx.state.reservations
    held = len(reservations) + SPAWNERS
    await async_wait_for(lambda: len(reservations) == held, what="8 admissions decided", timeout=10)
    await asyncio.sleep(0.2)
    assert not first.done() and not any(a.done() for a in answers), "answered before the commit"
    return first, answers


async def test_spawners_asking_during_a_commit_are_answered_by_the_next_one(
    db_url: str, start_service: Any
):
    """8 spawners ask while a commit is held: none is answered before their commit, all 8
    are answered 201 by one commit, and their reservations are in the database."""
    service, admin, commits = await start(db_url, start_service)
    first, answers = await while_a_commit_is_held(service, admin, commits)
    before = commits.count
    commits.release()
    admitted = await asyncio.wait_for(asyncio.gather(first, *answers), 20)
    assert commits.count - before == 1, "the 8 admissions took one commit"
    ids = sorted(a["id"] for a in admitted)
    assert sorted(r[0] for r in sql(db_url, "SELECT admission_id FROM reservations")) == ids


async def test_a_commit_that_fails_answers_each_of_its_admissions_503_and_holds_none(
    db_url: str, start_service: Any
):
    """The commit that 8 spawners' admissions share fails: each is answered 503 (try again),
    none is held by the service nor in the database; the admission before them is kept."""
    service, admin, commits = await start(db_url, start_service)
    first, answers = await while_a_commit_is_held(service, admin, commits)
    commits.fail_next = True
    commits.release()
    kept = await asyncio.wait_for(first, 20)
    results = await asyncio.wait_for(asyncio.gather(*answers, return_exceptions=True), 20)
    assert all(isinstance(r, GPUPoolError) and r.status == 503 for r in results), results
    assert all("could not be recorded" in r.message for r in results)  # type: ignore[union-attr]
    assert [r["id"] for r in await admin.admissions()] == [kept["id"]]
    assert sql(db_url, "SELECT admission_id FROM reservations") == [(kept["id"],)]
