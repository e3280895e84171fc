"""The spawner's questions to the gpupool service, and what their failures mean for a start.

A spawner asks in bursts: the form's launch options, then at the start the launch options again,
an admission, and on a fallback a release and the next admission. :class:`ServiceLink` keeps one
:class:`~jupyter_gpupool.client.GPUPoolClient` (one kept-alive connection) for what runs at the
same time, and closes it when the last of them is done: JupyterHub has no hook for "this spawner
is forgotten", so a client kept between starts would be left unclosed (and its idle connection
is closed by aiohttp after 15 s anyway, so nothing is lost by closing it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ..client import AdmissionForbidden, AdmissionRejected, GPUPoolClient, GPUPoolError
from ..core.words.shape_choice import entry_json
from .errors import OptionsError, SpawnRefused
from .messages import line_full_message, no_pool_message
from .options import Catalog, SpawnOptions

__all__ = [
    "PlaceLost",
    "ServiceLink",
    "ServiceUnavailable",
    "admit",
    "in_line",
    "launch_catalog",
    "release",
]


class ServiceUnavailable(Exception):
    """The gpupool service could not be asked (no answer, an error of its own, a bad token)."""


class PlaceLost(Exception):
    """The service no longer knows a request that waited in line (a 404)."""


class ServiceLink:
    """One client of the service, shared by the questions in flight (a start, a stop, a form)
    and closed when the last of them is done.

    ``make`` builds the client, from the spawner's settings as they are then.
    """

    def __init__(self, make: Callable[[], GPUPoolClient]):
        self._make = make
        self._client: GPUPoolClient | None = None
        self._users = 0

    @property
    def open(self) -> bool:
        return self._client is not None

    @asynccontextmanager
    async def client(self) -> AsyncIterator[GPUPoolClient]:
        if self._client is None:
            self._client = self._make()
        client = self._client
        self._users += 1
        try:
            yield client
        finally:
            self._users -= 1
            if self._users == 0 and self._client is not None:  # this one, or one after let_go
                last, self._client = self._client, None
                await last.close()

    async def let_go(self) -> None:
        """Close the client now when nothing but the holder of a whole start uses it: a start
        waiting in line is asked about with the process's other waiting starts
        (:mod:`.waiters`), so its kept-alive connection would stay idle for minutes, one per
        waiting start. Its next question opens another."""
        if self._client is not None and self._users <= 1:
            idle, self._client = self._client, None
            await idle.close()


async def launch_catalog(
    link: ServiceLink, token: str, user: str, groups: Sequence[str]
) -> Catalog:
    """What this user may choose now; :class:`ServiceUnavailable` if the service can't say."""
    if not token:
        raise ServiceUnavailable("the hub has no token for it: set c.GPUPoolSpawner.service_token")
    try:
        async with link.client() as client:
            answer = await client.launch_options(user=user, groups=groups)
    except GPUPoolError as e:
        raise ServiceUnavailable(e.message) from e
    return Catalog.from_json(answer)


async def admit(
    link: ServiceLink,
    *,
    user: str,
    groups: Sequence[str],
    pools: list[tuple[str, str | None]],
    options: SpawnOptions,
    server: str,
) -> dict[str, Any]:
    """An admission to the first of ``pools`` (``(pool, shape)`` entries, ``shape`` ``None`` for
    whole GPUs) that takes it: :class:`SpawnRefused` when none
    can (with each pool's reason), :class:`OptionsError` for options the service refuses,
    :class:`ServiceUnavailable` when it cannot be asked. With ``options.queue``, a request no
    pool can take now but one could later is put in line: the answer then has ``"queued":
    True``, its ``id``, ``position`` and ``message`` (follow it with :func:`in_line`)."""
    try:
        async with link.client() as client:
            return dict(
                await client.admit(
                    user=user,
                    groups=groups,
                    pools=[entry_json(pool, shape) for pool, shape in pools],
                    gpus=options.gpus,
                    gpu_type=options.gpu_type,
                    server=server,
                    queue=options.queue,
                )
            )
    except (AdmissionRejected, AdmissionForbidden) as e:
        raise SpawnRefused(e.status, no_pool_message(e.message, e.skipped)) from e
    except GPUPoolError as e:
        if e.status == 400:
            raise OptionsError(e.message) from e
        if e.status == 429:  # the user holds as many places in line as one may
            raise SpawnRefused(429, line_full_message(e.message, e.body)) from e
        raise ServiceUnavailable(e.message) from e


async def in_line(link: ServiceLink, admission_id: str, wait: float = 0.0) -> dict[str, Any]:
    """Where a request waiting in line stands (asking keeps it in line): ``state`` ``queued``
    (``position``, ``message``, ``reasons``), ``admitted`` (the fields of an admission),
    ``cancelled`` or ``expired`` (``message``); with ``wait``, once that changes or ``wait``
    seconds have passed (a long poll). :class:`PlaceLost` when the service no longer knows it,
    :class:`ServiceUnavailable` when it cannot be asked."""
    try:
        async with link.client() as client:
            return await client.admission(admission_id, wait=wait)
    except GPUPoolError as e:
        if e.status == 404:
            raise PlaceLost(e.message) from e
        raise ServiceUnavailable(e.message) from e


async def release(link: ServiceLink, admission: Mapping[str, Any], log: logging.Logger) -> None:
    """Give an admission's GPUs back, or leave the line (a request waiting in it); a failure is
    only logged (GPUs held expire on their own after the service's ``reservation_ttl``, a
    request in line once nobody asks for it during ``queue_heartbeat``)."""
    try:
        async with link.client() as client:
            await client.release(str(admission["id"]))
    except GPUPoolError as e:
        log.warning("could not release admission %s: %s", admission.get("id"), e)
