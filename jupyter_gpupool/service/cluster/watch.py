"""List and watch Nodes and Pods, feeding every event to the usage index.

This is the one module of the core that does I/O. Per kind (nodes, pods) one task:

1. list (paginated), each page applied to the index as it arrives (:meth:`UsageIndex.relist`),
   then mark that kind synced;
2. watch from the list's resourceVersion, applying each event; when the server ends the watch
   (``timeoutSeconds``), watch again from the last resourceVersion seen (bookmarks included);
3. on ``410 Gone`` (the resourceVersion is too old) list again: the index diffs itself against
   the new list, so nothing is double counted;
4. on any other error, wait (exponential backoff with full jitter, capped: :mod:`.retry`) and
   resume.

Objects are read as raw JSON dicts, never as kubernetes_asyncio model objects: the index reads a
dozen fields per object, and building ``V1Pod`` models for every event costs far more than the
index update itself (and would double the memory of a 100,000-pod relist). kubernetes_asyncio's
``Watch`` deserializes only when the listing function documents a return type, so the functions
handed to it here are thin wrappers without one; they also check the HTTP status, which the client
does not when ``_preload_content=False``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from ...core.usage.index import UsageIndex
from .. import clock
from .podlist import decode_pods
from .retry import Backoff

log = logging.getLogger(__name__)

#: Finished pods use nothing; leaving them out of lists and watches keeps relists small on
#: clusters with many completed jobs. A pod that finishes then arrives as a DELETED event.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"

KINDS = ("nodes", "pods")


#: The ``"continue"`` of a list's metadata, which the API server writes before the items.
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"]*)"')
_ITEMS = re.compile(rb'"items"\s*:')


def continue_token(body: bytes) -> str | None:
    """A list page's continue token read off its first bytes without decoding the page: ``""``
    on the last page, None when the metadata does not come before the items (then the page must
    be decoded to know)."""
    items = _ITEMS.search(body, 0, 4096)
    if items is None:
        return None
    head = body[: items.start()]
    found = _CONTINUE.search(head)
    if found is not None:
        return found.group(1).decode("ascii", "replace")
    return "" if b'"metadata"' in head else None


def _decoded(body: bytes) -> dict[str, Any]:
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError(f"a list page that is not an object: {body[:200]!r}")
    return data


class ClusterView:
    """Keeps a :class:`~jupyter_gpupool.core.usage.index.UsageIndex` in step with the cluster.

    ``api_client`` is a configured ``kubernetes_asyncio.client.ApiClient`` (the caller owns and
    closes it). ``namespace`` limits pods to one namespace; the default, all namespaces, is what
    makes node usage right, since other workloads use GPUs too.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        index: UsageIndex,
        *,
        namespace: str | None = None,
        pod_field_selector: str | None = ACTIVE_PODS,
        watch_timeout: int = 300,
        page_size: int = 500,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        rng: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.index = index
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.pod_field_selector = pod_field_selector
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._rng = rng
        self._sleep = sleep
        self._synced = {kind: asyncio.Event() for kind in KINDS}
        self._tasks: list[asyncio.Task[None]] = []
        #: Counters for /metrics and debugging.
        self.stats = {"events": 0, "lists": 0, "relists_410": 0, "errors": 0, "watches": 0}
        #: Told of each pod event after the index applied it, and of each new list of pods
        #: (the service's ledger of server sessions follows pods this way).
        self.on_pod: Callable[[str, dict[str, Any]], None] | None = None
        self.on_pods_reset: Callable[[], None] | None = None
        #: Told after every change the index applied (a node or pod event, a fresh list)
        self.on_change: Callable[[], None] | None = None
        self.last_error: str | None = None
        self.resource_versions: dict[str, str | None] = dict.fromkeys(KINDS)
        #: Per kind: what its task does now (``listing``, ``watching``, ``retrying``), when the
        #: API server was last heard from (a list, an event, a bookmark, a watch it ended), and
        #: the last error (None once it is heard from again): ``GET api/v1/health``
        self.phase: dict[str, str] = dict.fromkeys(KINDS, "starting")
        self.heard: dict[str, float | None] = dict.fromkeys(KINDS)
        self.kind_errors: dict[str, str | None] = dict.fromkeys(KINDS)

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the list+watch tasks (idempotent)."""
        if self._tasks:
            return
        self._tasks = [
            asyncio.create_task(self._run(kind), name=f"gpupool-watch-{kind}") for kind in KINDS
        ]

    async def stop(self) -> None:
        """Stop watching; the index keeps what it knows."""
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    async def __aenter__(self) -> ClusterView:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def synced(self) -> bool:
        """True once nodes and pods have both been listed into the index."""
        return all(e.is_set() for e in self._synced.values())

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait until :attr:`synced` (``asyncio.TimeoutError`` after ``timeout`` seconds)."""
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self._synced.values())), timeout)

    # --- the loop --------------------------------------------------------------------------------

    async def _run(self, kind: str) -> None:
        backoff = Backoff(self.backoff_base, self.backoff_cap, rng=self._rng, sleep=self._sleep)
        # After stop() and start() the index still holds what it knew: resume, don't relist.
        rv = self.resource_versions[kind] if self._synced[kind].is_set() else None
        while True:
            try:
                if rv is None:
                    self.phase[kind] = "listing"
                    rv = await self._list(kind)
                    self.resource_versions[kind] = rv
                    self._synced[kind].set()
                    backoff.reset()
                # after a failure it is still retrying until the API server takes the watch
                if self.kind_errors[kind] is None:
                    self.phase[kind] = "watching"
                rv, progressed = await self._watch(kind, rv)
                self._heard(kind)  # the server ended the watch: it is there
                if progressed:
                    backoff.reset()
                    continue
                # The server closed a watch at once, without a single event: don't spin.
                await self._backoff(kind, backoff, None)
            except asyncio.CancelledError:
                raise
            except ApiException as e:
                if e.status == 410:
                    log.info("%s: resourceVersion %s expired (410 Gone); listing again", kind, rv)
                    self.stats["relists_410"] += 1
                    rv = None
                    continue
                await self._backoff(kind, backoff, e)
            except Exception as e:  # network errors, bad responses: retry, never die
                await self._backoff(kind, backoff, e)

    async def _backoff(self, kind: str, backoff: Backoff, error: BaseException | None) -> None:
        delay = backoff.next_delay()
        self.phase[kind] = "retrying"
        if error is not None:
            self.stats["errors"] += 1
            self.last_error = f"{kind}: {type(error).__name__}: {error}"
            self.kind_errors[kind] = f"{type(error).__name__}: {error}"
            log.warning("watching %s failed (%s); retrying in %.1fs", kind, error, delay)
        await backoff.sleep(delay)

    def _heard(self, kind: str) -> None:
        self.heard[kind] = clock.now()
        self.kind_errors[kind] = None

    def _listed(self, kind: str) -> None:
        """A full list of ``kind`` is in the index."""
        self._heard(kind)
        if kind == "pods" and self.on_pods_reset is not None:
            self.on_pods_reset()
        if self.on_change is not None:
            self.on_change()

    def _apply(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        if kind == "nodes":
            self.index.apply_node(event_type, obj)
        else:
            self.index.apply_pod(event_type, obj)
            if self.on_pod is not None:
                self.on_pod(event_type, obj)
        if self.on_change is not None:
            self.on_change()

    def health(self, now: float) -> dict[str, dict[str, Any]]:
        """Per kind: synced, what it does now, seconds since the API server was last heard
        from (None: never), and its last error since then."""
        out = {}
        for kind in KINDS:
            heard = self.heard[kind]
            out[kind] = {
                "synced": self._synced[kind].is_set(),
                "phase": self.phase[kind],
                "age_seconds": None if heard is None else round(now - heard, 3),
                "resource_version": self.resource_versions[kind],
                "error": self.kind_errors[kind],
            }
        return out

    # --- API calls -------------------------------------------------------------------------------

    def _api_call(self, kind: str) -> Callable[..., Awaitable[Any]]:
        """The list function for ``kind``, wrapped to check the HTTP status.

        The wrapper has no docstring on purpose: ``Watch`` then finds no return type and hands
        out raw dicts instead of model objects.
        """
        if kind == "nodes":
            func: Callable[..., Awaitable[Any]] = self.core.list_node
            extra: dict[str, Any] = {}
        else:
            extra = {}
            if self.pod_field_selector:
                extra["field_selector"] = self.pod_field_selector
            if self.namespace is None:
                func = self.core.list_pod_for_all_namespaces
            else:
                func = self.core.list_namespaced_pod
                extra["namespace"] = self.namespace

        async def call(**kwargs: Any) -> Any:
            kwargs["_preload_content"] = False  # raw response (Watch sets it too)
            resp = await func(**extra, **kwargs)
            if resp.status >= 400:
                body = await resp.read()
                resp.release()
                reason = body.decode("utf-8", "replace")
                with contextlib.suppress(ValueError, AttributeError):
                    reason = json.loads(reason).get("message", reason)
                raise ApiException(status=resp.status, reason=reason)
            if kwargs.get("watch"):
                self._heard(kind)  # the API server took the watch: it is there again
                self.phase[kind] = "watching"
            return resp

        return call

    async def _list(self, kind: str) -> str | None:
        """List ``kind`` into the index, page by page as the pages arrive; returns the list's
        resourceVersion. A list of 150,000 pods is never held whole.

        The pages are fetched by a task of their own that asks for the next page as soon as it
        has read one (its continue token is read off the page's first bytes), so the API
        server prepares page n+1 while this decodes and applies page n.
        """
        call = self._api_call(kind)
        relist = self.index.relist(kind)
        # pods: only the fields the index reads (most of the start of a large cluster's service)
        decode: Callable[[bytes], Any] = decode_pods if kind == "pods" else _decoded
        pages: asyncio.Queue[bytes | Any] = asyncio.Queue(maxsize=2)

        async def fetch() -> None:
            token: str | None = None
            while True:
                kwargs: dict[str, Any] = {"limit": self.page_size}
                if token:
                    kwargs["_continue"] = token
                resp = await call(**kwargs, _request_timeout=60)
                try:
                    body = await resp.read()
                finally:
                    resp.release()
                sniffed = continue_token(body)
                if sniffed is None:  # not found before the items: decode to know
                    data = decode(body)
                    await pages.put(data)
                    token = (data.get("metadata") or {}).get("continue") or None
                else:
                    await pages.put(body)
                    token = sniffed or None
                if not token:
                    await pages.put(None)
                    return

        fetcher = asyncio.create_task(fetch(), name=f"gpupool-list-{kind}")
        meta: dict[str, Any] = {}
        try:
            while True:
                get = asyncio.ensure_future(pages.get())
                await asyncio.wait((get, fetcher), return_when=asyncio.FIRST_COMPLETED)
                if not get.done():  # the fetcher failed (or ended) with nothing more to give
                    get.cancel()
                    fetcher.result()  # raises the fetcher's error
                    raise RuntimeError(f"listing {kind} ended without its last page")
                page = get.result()
                if page is None:
                    break
                data = decode(page) if isinstance(page, bytes) else page
                meta = data.get("metadata") or {}
                relist.add(data.get("items") or ())
        finally:
            if not fetcher.done():
                fetcher.cancel()
            with contextlib.suppress(BaseException):
                await fetcher
        relist.finish()
        self.stats["lists"] += 1
        self._listed(kind)
        return meta.get("resourceVersion")

    async def _watch(self, kind: str, rv: str | None) -> tuple[str | None, bool]:
        """Watch from ``rv`` until the server ends the watch; ``(last rv, any events?)``."""
        self.stats["watches"] += 1
        w = watch.Watch()
        started = time.monotonic()
        progressed = False
        try:
            stream = w.stream(
                self._api_call(kind),
                resource_version=rv,
                timeout_seconds=self.watch_timeout,
                allow_watch_bookmarks=True,
                _request_timeout=self.watch_timeout + 30,
            )
            async for event in stream:
                if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
                    raise ValueError(f"unexpected watch data: {str(event)[:200]!r}")
                progressed = True
                self.heard[kind] = clock.now()
                etype = event.get("type", "")
                if etype != "BOOKMARK":
                    self._apply(kind, etype, event["object"])
                    self.stats["events"] += 1
                if w.resource_version:
                    self.resource_versions[kind] = w.resource_version
        finally:
            await w.close()
        # A watch the server kept open for a while is progress even if nothing happened.
        progressed = progressed or time.monotonic() - started >= 1.0
        return w.resource_version or rv, progressed
