"""The one HTTP client of the gpupool service API, for the spawner, magics, widget, CLI and tests.

::

    client = GPUPoolClient("http://127.0.0.1:8000/services/gpupool/", token)
    pools = await client.pools()
    try:
        admission = await client.admit(user="alice", pools=["training-pool"], gpus=2)
    except AdmissionRejected as e:
        print(e.message)             # one line per pool skipped, in words a user understands
    else:
        ...                          # create the pod with admission["overrides"]
        await client.release(admission["id"])   # if the spawn fails before the pod exists
    await client.close()

Every method is a coroutine returning the decoded JSON answer (typed with ``TypedDict`` s for
the answers callers read field by field). Any answer other than a success raises
:class:`GPUPoolError` carrying the HTTP status and the service's message;
:class:`AdmissionRejected` (409) and :class:`AdmissionForbidden` (403) add the pools skipped.
No answer at all (connection refused, timeout) raises :class:`GPUPoolError` with status 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict
from urllib.parse import quote

from .http import Answer, HTTPSession

__all__ = [
    "Admission",
    "AdmissionForbidden",
    "AdmissionRejected",
    "GPUPoolClient",
    "GPUPoolError",
    "PoolSummary",
    "Skip",
]


class Skip(TypedDict):
    pool: str
    reason: str


class PoolSummary(TypedDict, total=False):
    """One row of ``GET api/v1/pools``."""

    name: str
    description: str | None
    status: str  # active | degraded | unavailable | empty
    # GPU-equivalents (a MIG A100 is 1, an A10 time-sliced in 4 is 1; docs/service.md), an int
    # when whole; the whole GPUs alone in whole_gpus, the parts in gpu_parts and gpus_text
    gpu_total: int | float
    gpu_used: int | float
    gpu_free: int | float
    whole_gpus: dict[str, int]
    gpu_parts: list[dict[str, Any]]
    gpus_text: str
    gpu_reserved: int
    gpu_available: int  # free on schedulable nodes, minus what admissions hold
    node_count: int
    schedulable_nodes: int
    gpu_types: list[str]
    largest_free_block: int
    server_count: int
    pending_servers: int
    placement: str
    platforms: list[dict[str, Any]]
    default_platform: str | None
    limits: dict[str, Any]
    defined: bool
    # what its nodes offer: {id, name, kind, resource, model, memory_mib, equivalent,
    # equivalent_gpus, isolates, total, free, largest_free, text} (docs/service.md), only those
    # its file's shapes name when it names any
    shapes: list[dict[str, Any]]
    # the ids of every shape its nodes offer, named in its file or not
    shapes_offered: list[str]


class Admission(TypedDict, total=False):
    """A 201 answer of ``POST api/v1/admissions``."""

    id: str
    pool: str
    platform: str | None
    gpu_type: str | None
    node: str | None
    over_quota: bool
    charged: str
    skipped: list[Skip]
    expires_at: str
    user: str
    groups: list[str]
    server: str
    gpus: int
    # the shape admitted ("whole", "mig-1g.10gb"...; null for a CPU-only server), in
    # words ("MIG 1g.10gb of an A100-80G"), the resource the pod asks for, GPU-equivalents ("1/7")
    shape: str | None
    shape_text: str
    resource: str
    gpu_equivalents: str
    gpu_equivalents_float: float
    nodes_fit: int
    overrides: dict[str, Any]  # pod settings: nodeSelector, tolerations, labels, resources...
    reclaimed: list[dict[str, Any]]
    message: str
    # with ``queue``, while it waits in line (202)
    queued: bool
    state: str
    position: int | None
    # when it should be admitted (epoch seconds; None: no estimate) and on what basis
    estimate: float | None
    estimate_words: str | None
    pools: list[str]
    within_quota: bool
    reasons: str


class GPUPoolError(Exception):
    """The service answered with an error (``status``), or not at all (``status`` 0)."""

    def __init__(self, status: int, message: str, body: Mapping[str, Any] | None = None):
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.body: Mapping[str, Any] = body or {}


class AdmissionRejected(GPUPoolError):
    """409: no pool of the list can take the request now; ``skipped`` says why for each."""

    @property
    def skipped(self) -> list[Skip]:
        return list(self.body.get("skipped") or [])

    @property
    def reclaimed(self) -> list[dict[str, Any]]:
        return list(self.body.get("reclaimed") or [])


class AdmissionForbidden(GPUPoolError):
    """403: the user may use none of the pools asked for (or the caller may not ask)."""

    @property
    def skipped(self) -> list[Skip]:
        return list(self.body.get("skipped") or [])


def _q(name: str) -> str:
    return quote(name, safe="")


def _error(answer: Answer) -> GPUPoolError:
    """The exception for an error answer: 409 and 403 of ``admissions`` say which pools were
    skipped (:class:`AdmissionRejected`, :class:`AdmissionForbidden`)."""
    cls = {409: AdmissionRejected, 403: AdmissionForbidden}.get(answer.code, GPUPoolError)
    if cls is not GPUPoolError and not answer.url.split("?")[0].endswith("admissions"):
        cls = GPUPoolError
    return cls(answer.code, answer.message(), answer.document())


class GPUPoolClient:
    """Async client of one gpupool service.

    ``url`` is the service's base URL, e.g. ``http://hub.example.org/services/gpupool/`` (or the
    service's own address from inside the hub); ``token`` a JupyterHub API token whose owner has
    ``custom:gpupool:use`` or ``custom:gpupool:admin``. Requests go over at most
    ``max_clients`` kept-alive connections (:mod:`jupyter_gpupool.http`); :meth:`close` them.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        request_timeout: float = 30.0,
        admission_timeout: float = 120.0,
        max_clients: int = 10,
    ):
        self.url = url.rstrip("/") + "/"
        self.token = token
        self.request_timeout = request_timeout
        # An admission that reclaims GPUs waits for servers to stop before it answers.
        self.admission_timeout = admission_timeout
        self.max_clients = max_clients
        self._http = HTTPSession(
            self.url,
            token,
            timeout=request_timeout,
            max_connections=max_clients,
            no_answer=self._no_answer,
            error=_error,
        )

    def _no_answer(self, why: str) -> GPUPoolError:
        return GPUPoolError(0, f"no answer from the gpupool service at {self.url}: {why}")

    async def close(self) -> None:
        await self._http.close()

    async def __aenter__(self) -> GPUPoolClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- plumbing --------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        text: str | None = None,
        content_type: str = "application/json",
        params: Mapping[str, str | None] | None = None,
        timeout: float | None = None,
    ) -> Answer:
        """One request to ``url + path``; raises :class:`GPUPoolError` unless it succeeds."""
        return await self._http.request(
            method,
            path,
            json_body=json_body,
            text=text,
            content_type=content_type,
            params=params,
            timeout=timeout,
        )

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        return (await self.request(method, path, **kw)).json()

    # --- the API ---------------------------------------------------------------------------------

    async def info(self) -> dict[str, Any]:
        """Who the service thinks the caller is (``name``, ``admin``, ``groups``) and its version."""
        return await self._json("GET", "api/v1/")

    async def health(self) -> dict[str, Any]:
        """``GET api/v1/health`` (admins): the service's loops, watch, database and problems."""
        return await self._json("GET", "api/v1/health")

    async def pools(self) -> list[PoolSummary]:
        """Pools the caller may use (all, for an admin), with free GPUs."""
        return list((await self._json("GET", "api/v1/pools"))["pools"])

    async def pool(self, name: str) -> dict[str, Any]:
        """One pool with its nodes, servers and quota usage."""
        return await self._json("GET", f"api/v1/pools/{_q(name)}")

    async def apply_pools(self, documents: str | Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace pools from YAML text (one or more documents) or one JSON document."""
        if isinstance(documents, str):
            return await self._json(
                "POST", "api/v1/pools", text=documents, content_type="application/yaml"
            )
        return await self._json("POST", "api/v1/pools", json_body=documents)

    async def delete_pool(self, name: str) -> dict[str, Any]:
        """Delete a pool: its document and its nodes' pool label. Servers keep running."""
        return await self._json("DELETE", f"api/v1/pools/{_q(name)}")

    async def bookings(self, pool: str | None = None, week: str | None = None) -> dict[str, Any]:
        """``{"week", "week_from", "week_until", "bookings": [...]}``: the bookings the caller
        may see (an admin all), with their windows in ``week`` (``2027-W03`` or a date; the
        current week by default)."""
        return dict(await self._json("GET", "api/v1/bookings", params={"pool": pool, "week": week}))

    async def booking(self, name: str, week: str | None = None) -> dict[str, Any]:
        return dict(await self._json("GET", f"api/v1/bookings/{_q(name)}", params={"week": week}))

    async def create_bookings(self, documents: str | Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace bookings from YAML text (one or more ``kind: booking``
        documents) or one JSON document; a booking that does not fit is refused (409)."""
        if isinstance(documents, str):
            return await self._json(
                "POST", "api/v1/bookings", text=documents, content_type="application/yaml"
            )
        return await self._json("POST", "api/v1/bookings", json_body=documents)

    async def replace_booking(self, name: str, document: str | Mapping[str, Any]) -> dict[str, Any]:
        path = f"api/v1/bookings/{_q(name)}"
        if isinstance(document, str):
            return await self._json("PUT", path, text=document, content_type="application/yaml")
        return await self._json("PUT", path, json_body=document)

    async def delete_booking(self, name: str) -> dict[str, Any]:
        return await self._json("DELETE", f"api/v1/bookings/{_q(name)}")

    async def nodes(self, pool: str | None = None) -> list[dict[str, Any]]:
        return list((await self._json("GET", "api/v1/nodes", params={"pool": pool}))["nodes"])

    async def node_labels(self, node: str, key: str | None = None) -> dict[str, str]:
        data = await self._json("GET", f"api/v1/nodes/{_q(node)}/labels", params={"key": key})
        return dict(data["labels"])

    async def label_node(
        self, node: str, labels: Mapping[str, str | None], *, overwrite: bool = False
    ) -> dict[str, Any]:
        """Set node labels (None removes one); an existing other value needs ``overwrite``."""
        return await self._json(
            "PATCH",
            f"api/v1/nodes/{_q(node)}/labels",
            json_body={"labels": dict(labels), "overwrite": overwrite},
        )

    async def servers(
        self, pool: str | None = None, user: str | None = None
    ) -> list[dict[str, Any]]:
        data = await self._json("GET", "api/v1/servers", params={"pool": pool, "user": user})
        return list(data["servers"])

    async def quotas(self) -> dict[str, Any]:
        return await self._json("GET", "api/v1/quotas")

    async def put_quotas(self, documents: str | Mapping[str, Any]) -> dict[str, Any]:
        """Replace every quota document by these (YAML text, or one JSON document)."""
        if isinstance(documents, str):
            return await self._json(
                "PUT", "api/v1/quotas", text=documents, content_type="application/yaml"
            )
        return await self._json("PUT", "api/v1/quotas", json_body=documents)

    async def usage(self) -> dict[str, Any]:
        return await self._json("GET", "api/v1/usage")

    async def usage_history(
        self, range_: str | None = None, pool: str | None = None
    ) -> dict[str, Any]:
        """GPUs per pool over the last ``range_`` (6h, 24h, 7d, 30d), from the service's
        database: ``{"columns", "pools": {name: [[time, used, total, over_quota, pending, busy]]}}``
        (busy: GPUs actually busy, null where the GPU utilization was not measured).
        """
        params = {"range": range_, "pool": pool}
        return await self._json("GET", "api/v1/usage/history", params=params)

    async def gpu_hours(
        self, *, by: str = "user", since: str = "7d", until: str | None = None
    ) -> dict[str, Any]:
        """GPU-equivalent hours per ``by`` (user, group, pool, shape) from the service's ledger,
        within and over quota, since ``since`` (7d, 30d, 24h or YYYY-MM-DD) until ``until`` (a
        date, or now): ``{"since", "until", "by", "columns", "rows": [...], "total"}``. Users get their own."""
        params = {"by": by, "since": since, "until": until}
        return await self._json("GET", "api/v1/reports/gpu-hours", params=params)

    async def launch_options(
        self, *, user: str | None = None, groups: Iterable[str] | None = None
    ) -> dict[str, Any]:
        """What a user may choose when starting a server: the pools open to them with free GPUs,
        the biggest node and their quota headroom (``quota``: ``within_quota``, ``available``),
        their default pool order and the pools not open to them.

        The caller's own by default; an admin caller may name any ``user`` and give their
        ``groups`` (else the service looks them up in the hub).
        """
        params = {
            "user": user,
            "groups": None if groups is None else json.dumps(list(groups)),
        }
        return await self._json("GET", "api/v1/launch-options", params=params)

    async def admit(
        self,
        *,
        user: str | None = None,
        pools: Sequence[str | Mapping[str, str]] = (),
        gpus: int = 0,
        gpu_type: str | None = None,
        server: str = "",
        groups: Iterable[str] | None = None,
        reclaim: bool = True,
        queue: bool = False,
    ) -> Admission:
        """Ask for ``gpus`` GPUs in the first of ``pools`` that can take them.

        Each of ``pools`` is a pool name (whole GPUs) or ``{"pool": NAME, "shape": ID}``, one of
        the pool's shapes: ``gpus`` then counts units of that shape, and must be 1.

        ``user`` and ``groups`` default to the caller's own; only an admin caller may name
        another user or give groups. Raises :class:`AdmissionRejected` (409) when no pool can
        take it now and :class:`AdmissionForbidden` (403) when the user may use none of them.
        With ``queue``, a request no pool can take now but one could later waits in line: the
        answer then has ``"queued": True``, its ``position`` and ``message``; follow it with
        :meth:`admission` and leave the line with :meth:`release`.
        """
        body: dict[str, Any] = {
            "pools": [p if isinstance(p, str) else dict(p) for p in pools],
            "gpus": gpus,
            "gpu_type": gpu_type,
            "server": server,
            "reclaim": reclaim,
        }
        if queue:
            body["queue"] = True
        if user is not None:
            body["user"] = user
        if groups is not None:
            body["groups"] = list(groups)
        data = await self._json(
            "POST", "api/v1/admissions", json_body=body, timeout=self.admission_timeout
        )
        return data

    async def release(self, admission_id: str, *, missing_ok: bool = True) -> bool:
        """Give an admission's GPUs back. False if it was no longer held (its pod appeared, it
        expired or was released), unless ``missing_ok`` is False (then that raises)."""
        try:
            await self.request("DELETE", f"api/v1/admissions/{_q(admission_id)}")
        except GPUPoolError as e:
            if e.status == 404 and missing_ok:
                return False
            raise
        return True

    async def admission(self, admission_id: str, wait: float = 0.0) -> dict[str, Any]:
        """One admission's state: ``queued`` (``position``, ``message``; asking keeps it in
        line), ``admitted`` (with the fields of an admission), ``cancelled`` or ``expired``;
        a held admission's row otherwise. 404 (:class:`GPUPoolError`) when the service knows
        it no longer. With ``wait``, a request in line is answered when its state or place
        changes, or after ``wait`` seconds (the service holds the question open; at most 30 s):
        this request's timeout is ``wait`` longer than the others'."""
        path = f"api/v1/admissions/{_q(admission_id)}"
        if wait <= 0:
            return dict(await self._json("GET", path))
        return dict(
            await self._json(
                "GET",
                path,
                params={"wait": f"{wait:g}"},
                timeout=self.request_timeout + wait,
            )
        )

    async def admissions_wait(
        self, heard: Mapping[str, Mapping[str, Any] | None], wait: float = 0.0
    ) -> dict[str, dict[str, Any]]:
        """Many places in line at once (``POST api/v1/admissions/wait``): ``heard`` maps each
        admission id to what was last heard of it (``{"state", "position"}``, or None). The
        answer, by id, has the entries whose state or place differs from that (as
        :meth:`admission` answers them; ``{"state": "unknown"}`` for one the service does not
        know), as soon as one does, or all of them after ``wait`` seconds. A service older than
        this answers 404 or 405 (:class:`GPUPoolError`)."""
        answer = await self._json(
            "POST",
            "api/v1/admissions/wait",
            json_body={"ids": dict(heard), "wait": wait},
            timeout=self.request_timeout + wait,
        )
        return {str(k): dict(v) for k, v in answer["admissions"].items()}

    async def queue(self) -> dict[str, Any]:
        """The requests waiting in line (``queue``, first in line first; the caller's own, or
        all for an admin) and per pool how many wait (``pools``)."""
        return dict(await self._json("GET", "api/v1/queue"))

    async def admissions(self) -> list[dict[str, Any]]:
        """Admissions still waiting for their pod (the caller's own, or all for an admin)."""
        return list((await self._json("GET", "api/v1/admissions"))["admissions"])

    async def pools_csv(self) -> str:
        return (await self.request("GET", "api/v1/pools.csv")).text()

    async def nodes_csv(self) -> str:
        return (await self.request("GET", "api/v1/nodes.csv")).text()

    async def metrics(self) -> str:
        return (await self.request("GET", "metrics")).text()
