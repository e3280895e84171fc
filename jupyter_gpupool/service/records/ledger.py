"""The service's ledger of server sessions, kept in the database (rules: :mod:`..core.accounting.ledger`).

It follows the pods the service watches: a server pod that runs opens a session, a pod that
finishes or goes closes it. At start it takes up the sessions the database has open: those
whose pods still run stay open (a server that ran across a restart is one session, counted
once), the others are closed when their pod says it finished, else when the service last saw
them running (``last_seen``, written every ``history_interval``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ...core.accounting import ledger
from ...core.usage.index import UsageIndex
from ...db.store import Database
from ..commits import until_committed

log = logging.getLogger(__name__)

#: Reads a pod (namespace, name) from the API server: its JSON, or None when there is none.
ReadPod = Callable[[str, str], Awaitable[dict[str, Any] | None]]


class Ledger:
    def __init__(self, db: Database, index: UsageIndex, now: Any):
        self.db = db
        self.index = index
        self.now = now  # the service's clock
        #: How long a stop waits for the database to have why it is stopped
        self.durable_timeout = 5.0
        self.open: dict[str, dict[str, Any]] = {}  # pod uid -> session
        #: (namespace, name) of pods the service stopped, and how their sessions end
        self.stopping: dict[tuple[str, str], str] = {}
        #: Told of each session opened, and of each closed with its stop time (budgets)
        self.on_open: Callable[[Mapping[str, Any]], None] | None = None
        self.on_close: Callable[[Mapping[str, Any], float], None] | None = None

    def reclaiming(self, server: Any) -> None:
        """The service is stopping this server to reclaim its GPUs: its session ends so."""
        self.stopping[(server.namespace, server.name)] = ledger.RECLAIMED

    async def reclaiming_durably(self, server: Any) -> None:
        """As :meth:`reclaiming`, and once the database has it (at most ``durable_timeout``
        seconds): a service killed right after asking the hub to stop the server still
        closes its session as ``reclaimed`` when it starts again."""
        self.reclaiming(server)
        session = self.open.get(server.uid)
        if session is None:
            return
        session["ended"] = ledger.RECLAIMED
        future = self.db.session_stopping(server.uid, ledger.RECLAIMED)
        if future is None:
            return
        try:
            await until_committed(future, self.durable_timeout)
        except Exception as e:  # the stop goes ahead: the booking's members come first
            log.error(
                "why %s/%s is stopped (reclaimed) could not be recorded first: %s",
                server.namespace,
                server.name,
                str(e) or f"no commit within {self.durable_timeout:g} s",
            )

    def culled(self, server: Any) -> None:
        """The service is stopping this server because its GPUs stayed idle."""
        self.stopping[(server.namespace, server.name)] = ledger.CULLED

    def over_runtime(self, server: Any) -> None:
        """The service is stopping this server because it ran longer than its limit."""
        self.stopping[(server.namespace, server.name)] = ledger.LIMIT

    def idle_warned(self, server: Any, at: float) -> None:
        """The idle policy warned this server at ``at``: its session keeps the time."""
        if server.uid in self.open:
            self.open[server.uid]["idle_warned"] = at
            self.db.idle_warned(server.uid, at)

    def over_budget(self, server: Any) -> None:
        """The service is stopping this server because its budget is spent."""
        self.stopping[(server.namespace, server.name)] = ledger.OVER_BUDGET

    async def take_up(self, sessions: list[dict[str, Any]], read_pod: ReadPod) -> None:
        """Start from the database's open ``sessions`` and the index (synced with the cluster).

        A session whose pod no longer runs ended while the service was away: when its pod says
        it finished (``read_pod``: the pod as the API server has it now, or None), else at the
        last time the service saw it running."""
        running = self.index.server_uids("running", "terminating")
        closed = 0
        for session in sessions:
            uid = session["pod_uid"]
            if uid in running:
                self.open[uid] = session
                continue
            try:
                pod = await read_pod(session["namespace"], session["pod"])
            except Exception as e:  # the API may fail: the last sighting is the best guess then
                log.warning("cannot read pod %s/%s: %s", session["namespace"], session["pod"], e)
                pod = None
            if pod is not None and (pod.get("metadata") or {}).get("uid") != uid:
                pod = None  # another pod of the same name
            finished = ledger.finished_at(pod) if pod is not None else None
            stopped = finished if finished is not None else float(session["last_seen"])
            # how the service said it would stop it (session_stopping), if it did
            self.db.close_session(uid, stopped, ledger.how_it_ended(pod, session.get("ended")))
            if self.on_close is not None:
                self.on_close(session, stopped)
            closed += 1
        self.catch_up()
        log.info(
            "Ledger: %d server sessions open (%d taken up), %d closed that ended while away",
            len(self.open),
            len(sessions) - closed,
            closed,
        )

    def catch_up(self) -> None:
        """Open a session for every running server the ledger does not know yet."""
        now = self.now()
        for server in self.index.servers_in("running", skip_uids=self.open):
            if server.uid:
                self._open(server, None, now)

    def on_pod(self, event_type: str, pod: Mapping[str, Any]) -> None:
        """A pod watch event, after the index applied it."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if uid in self.open and (event_type == "DELETED" or ledger.is_finished(pod)):
            self._close(uid, (ns, name), pod)
            return
        if event_type == "DELETED" or uid in self.open:
            return
        server = self.index.server(ns, name)
        if server is not None and server.state == "running" and server.uid == uid:
            self._open(server, pod, self.now())

    def tick(self) -> None:
        """Every ``history_interval``: what is still running was seen now; nothing is missed."""
        now = self.now()
        # a terminating server still holds its GPUs: its session ends when its pod is gone
        alive = self.index.server_uids("running", "terminating")
        for uid in [u for u in self.open if u not in alive]:
            session = self.open[uid]
            self._close(uid, (session["namespace"], session["pod"]), None)
        self.catch_up()
        self.db.seen_open(now)  # after the closes above: what is open in the database runs

    def _open(self, server: Any, pod: Mapping[str, Any] | None, now: float) -> None:
        started = ledger.started_at(pod) if pod is not None else None
        started = started or ledger.parse_time(server.created)
        gpu_type = self.index.node_gpu_type(server.node) if server.node else None
        fields = ledger.session_fields(server, gpu_type, started or now, now)
        self.open[server.uid] = fields
        self.db.open_session(fields)
        if self.on_open is not None:
            self.on_open(fields)

    def _close(self, uid: str, key: tuple[str, str], pod: Mapping[str, Any] | None) -> None:
        session = self.open.pop(uid)
        stopped = ledger.close_time(session, pod, self.now())
        how = ledger.how_it_ended(pod, self.stopping.pop(key, None) or session.get("ended"))
        self.db.close_session(uid, stopped, how)
        if self.on_close is not None:
            self.on_close(session, stopped)
