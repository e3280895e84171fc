"""``GPUPoolSpawner``: KubeSpawner that places servers in GPU pools, with fallback.

A start (:meth:`GPUPoolSpawner._start`, the coroutine KubeSpawner's ``start()`` wraps):

1. check the options against what the user may choose (the service's launch options);
2. ask the service for admission with the ordered pools;
3. run KubeSpawner's own start with the admission's pod settings (:meth:`load_user_options`
   resets every pool setting, lets KubeSpawner apply a profile, then applies the admission);
4. watch the pod: once scheduled, report the node; if the scheduler keeps refusing it for
   longer than the pool's wait, delete it, release the admission and ask again with the next
   pool first (wrapping around), until ``start_timeout``.

Each step is a small method; the rules are pure functions in the sibling modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import html
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kubespawner import KubeSpawner
from traitlets import Bool, Dict, Float, Integer, List, TraitError, Unicode, default, validate

from ..client import AdmissionForbidden, AdmissionRejected, GPUPoolClient, GPUPoolError
from ..core.placement import SERVER_TOKEN_SCOPES, placement_env
from .errors import OptionsError, SpawnRefused
from .form import DEFAULT_TEMPLATE, form_context, render_form
from .messages import (
    Decision,
    admitted_lines,
    fallback_line,
    no_pool_message,
    ready_words,
    scheduled_line,
    unavailable_message,
    unplaced_line,
    unschedulable_message,
)
from .options import (
    POOL_KEY,
    Catalog,
    SpawnOptions,
    default_options,
    form_to_user_options,
    is_form_field,
    parse_user_options,
)
from .podtraits import POOL_TRAITS, admission_overrides, pool_trait_values, with_job_type
from .progress import ProgressLog, merge_progress, with_decision
from .scheduling import Scheduling, rotate_after, scheduling

#: How often a pending pod is looked at in the reflectors (no request is made).
WATCH_SECONDS = 0.1
#: The start gives up this long before JupyterHub's own ``start_timeout`` would cancel it, so
#: the user reads why instead of a bare timeout.
DEADLINE_MARGIN = 1.0
#: Where a server's pool is kept in the spawner's state.
STATE_KEY = "gpupool"


class ServiceUnavailable(Exception):
    """The gpupool service could not be asked (no answer, an error of its own, a bad token)."""


class Unschedulable(Exception):
    """The scheduler refused the attempt's pod for longer than the pool's wait."""

    def __init__(self, words: str):
        super().__init__(words)
        self.words = words


class OutOfTime(Exception):
    """``start_timeout`` is (nearly) over with the attempt's pod still not running."""


class GPUPoolSpawner(KubeSpawner):
    """KubeSpawner with GPU pools: the spawn form lists the pools a user may use, the user
    orders them and picks a GPU count, and the server starts in the first pool that admits it
    and can schedule it."""

    # --- configuration ---------------------------------------------------------------------------

    service_url = Unicode(
        help="""
        The gpupool service's URL as the hub reaches it, with the service's prefix.

        The hub's spawner calls the service's API directly (not through the proxy).
        Defaults to `$GPUPOOL_SERVICE_URL`, else the service's own default address and
        prefix, `http://127.0.0.1:10101/services/gpupool/`: right when the service runs next
        to the hub as a managed service (a plain JupyterHub, or the hub pod of
        zero-to-jupyterhub).

        Example:

        ```python
        c.GPUPoolSpawner.service_url = "http://127.0.0.1:10101/services/gpupool/"
        ```
        """,
    ).tag(config=True)

    @default("service_url")
    def _service_url_default(self) -> str:
        return os.environ.get("GPUPOOL_SERVICE_URL") or "http://127.0.0.1:10101/services/gpupool/"

    @validate("service_url")
    def _check_service_url(self, proposal: Any) -> str:
        url = str(proposal["value"]).strip()
        if not url.startswith(("http://", "https://")):
            raise TraitError(f"service_url must be an http:// or https:// URL, not {url!r}")
        return url.rstrip("/") + "/"

    notebook_service_url = Unicode(
        help="""
        The gpupool service's URL as the notebook servers reach it, with the service's prefix.

        Servers get it as `$GPUPOOL_SERVICE_URL`, for the `%gpupool` magics, the launch
        widget and the JupyterLab status item. Defaults to `service_url`, which is right
        when servers can reach the hub's address for the service (the demo); on Kubernetes
        give an address the pods reach, e.g. the proxy's service or the hub's.

        Example:

        ```python
        c.GPUPoolSpawner.notebook_service_url = "http://proxy-public/services/gpupool/"
        ```
        """,
    ).tag(config=True)

    @default("notebook_service_url")
    def _notebook_service_url_default(self) -> str:
        return self.service_url

    @validate("notebook_service_url")
    def _check_notebook_service_url(self, proposal: Any) -> str:
        url = str(proposal["value"]).strip()
        if url and not url.startswith(("http://", "https://")):
            raise TraitError(
                f"notebook_service_url must be an http:// or https:// URL, not {url!r}"
            )
        return url.rstrip("/") + "/" if url else ""

    service_token = Unicode(
        help="""
        The API token the spawner admits servers with, on behalf of any user.

        Its owner (the `gpupool-spawner` service in docs/service.md) needs the scope
        `custom:gpupool:admin`. Defaults to the environment variable
        `GPUPOOL_SPAWNER_TOKEN`, so the token can stay out of the config file.

        Example:

        ```python
        import os

        c.GPUPoolSpawner.service_token = os.environ["GPUPOOL_SPAWNER_TOKEN"]
        ```
        """,
    ).tag(config=True)

    @default("service_token")
    def _service_token_default(self) -> str:
        return os.environ.get("GPUPOOL_SPAWNER_TOKEN", "")

    service_timeout = Float(
        10.0,
        help="""
        Seconds to wait for the gpupool service to answer a question (the form's pools,
        an option check).

        An admission may take longer when it reclaims GPUs from borrowing servers (the
        service waits up to its `reclaim_wait` for them to stop): it gets this plus 120
        seconds.

        Example:

        ```python
        c.GPUPoolSpawner.service_timeout = 5
        ```
        """,
    ).tag(config=True)

    @validate("service_timeout")
    def _check_service_timeout(self, proposal: Any) -> float:
        if proposal["value"] <= 0:
            raise TraitError(
                f"service_timeout must be more than 0 seconds, not {proposal['value']}"
            )
        return float(proposal["value"])

    pool_schedule_timeout = Float(
        30.0,
        help="""
        Seconds a server's pod may stay unschedulable in a pool before the next pool is tried.

        The service admits a server where one node has the GPUs free, but the Kubernetes
        scheduler has the last word (a taint, a full disk, another scheduler's pods). When
        the pod is refused (PodScheduled=False, or a FailedScheduling event) for longer than
        this, it is deleted, its admission released, and the next pool of the user's list
        is tried, wrapping around to the first, until `start_timeout`. 0 moves on at the
        first refusal. Override it per pool with `pool_schedule_timeouts`.

        Example:

        ```python
        c.GPUPoolSpawner.pool_schedule_timeout = 60
        ```
        """,
    ).tag(config=True)

    @validate("pool_schedule_timeout")
    def _check_pool_schedule_timeout(self, proposal: Any) -> float:
        if proposal["value"] < 0:
            raise TraitError(f"pool_schedule_timeout must not be negative, not {proposal['value']}")
        return float(proposal["value"])

    pool_schedule_timeouts = Dict(
        help="""
        `pool_schedule_timeout` for particular pools: pool name -> seconds.

        A pool whose nodes scale up on demand needs a long wait (a new node takes minutes);
        a fixed pool can move on quickly.

        Example:

        ```python
        c.GPUPoolSpawner.pool_schedule_timeouts = {"training-pool": 300, "dev-pool": 10}
        ```
        """,
    ).tag(config=True)

    @validate("pool_schedule_timeouts")
    def _check_pool_schedule_timeouts(self, proposal: Any) -> dict[str, float]:
        out = {}
        for pool, seconds in proposal["value"].items():
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
                raise TraitError(
                    f"pool_schedule_timeouts[{pool!r}] must be a number of seconds (0 or more), "
                    f"not {seconds!r}"
                )
            out[str(pool)] = float(seconds)
        return out

    fail_open = Bool(
        False,
        help="""
        Start servers anyway when the gpupool service cannot be asked.

        By default (False) the spawner fails closed: without the service nobody's quota or
        the pools' capacity can be checked, so the start stops with a message saying the
        GPU pool service is not answering. With True, the server starts as plain
        KubeSpawner would, with the configured settings and without pool placement or GPUs,
        and the progress page says so.

        Example:

        ```python
        c.GPUPoolSpawner.fail_open = True
        ```
        """,
    ).tag(config=True)

    default_gpus = Integer(
        1,
        help="""
        GPUs a server gets when nothing says otherwise: a start through the REST API
        without `gpus`, or a user's first visit to the spawn form.

        After that, the form starts from the user's last choice.

        Example:

        ```python
        c.GPUPoolSpawner.default_gpus = 0  # CPU-only unless asked
        ```
        """,
    ).tag(config=True)

    @validate("default_gpus")
    def _check_default_gpus(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise TraitError(f"default_gpus must not be negative, not {proposal['value']}")
        return int(proposal["value"])

    max_pools = Integer(
        8,
        help="""
        The most pools one server's priority list may name.

        A longer list (from a script through the REST API) is refused with a 400 before
        anything is started.

        Example:

        ```python
        c.GPUPoolSpawner.max_pools = 4
        ```
        """,
    ).tag(config=True)

    @validate("max_pools")
    def _check_max_pools(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise TraitError(f"max_pools must be at least 1, not {proposal['value']}")
        return int(proposal["value"])

    form_template = Unicode(
        DEFAULT_TEMPLATE,
        help="""
        The name of the spawn form's jinja template.

        It is looked up in `form_template_paths` first, then in the package (whose
        `gpupool_form.html` is a good start for your own). The template gets `rows` (one per
        pool: `name`, `field`, `priority`, `description`, `gpu_types`, `free`,
        `largest_free_block`, `quota`, `status`, `status_text`), `gpu_choices`, `gpus`,
        `max_gpus`, `gpu_types`, `gpu_type`, `profile_form` (KubeSpawner's profile choice,
        when `profile_list` is set), `user` and `server`. Fields named `priority.POOL`,
        `gpus` and `gpu_type` are what the spawner reads back.

        Example:

        ```python
        c.GPUPoolSpawner.form_template = "my_gpupool_form.html"
        ```
        """,
    ).tag(config=True)

    @validate("form_template")
    def _check_form_template(self, proposal: Any) -> str:
        if not str(proposal["value"]).strip():
            raise TraitError("form_template must name a template, e.g. 'gpupool_form.html'")
        return str(proposal["value"]).strip()

    form_template_paths = List(
        Unicode(),
        help="""
        Directories searched for `form_template` before the package's own templates.

        Example:

        ```python
        c.GPUPoolSpawner.form_template_paths = ["/etc/jupyterhub/templates"]
        ```
        """,
    ).tag(config=True)

    @default("server_token_scopes")
    def _server_token_scopes_default(self) -> list[str]:
        # what the notebook side needs (docs/notebook.md): JupyterHub keeps only those the user
        # holds, so a user without custom:gpupool:use gets a server without pool access
        return list(SERVER_TOKEN_SCOPES)

    # --- life cycle ------------------------------------------------------------------------------

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # What is configured, to start every server from (profiles and pools change traits).
        self._configured = self._snapshot()
        self._base: dict[str, Any] = self._configured
        self._admission: dict[str, Any] | None = None
        self._placement: dict[str, Any] = {}
        self._progress = ProgressLog()
        # A spawn form JupyterHub refused (a 400), to show again as it was sent.
        self._refused_choice: dict[str, Any] | None = None

    def _snapshot(self) -> dict[str, Any]:
        return {name: copy.deepcopy(getattr(self, name)) for name in POOL_TRAITS}

    def _set_traits(self, values: Mapping[str, Any]) -> None:
        for name, value in values.items():
            setattr(self, name, copy.deepcopy(value))

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        if self._placement:
            state[STATE_KEY] = dict(self._placement)
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        placement = state.get(STATE_KEY) or {}
        if placement:
            self._placement = dict(placement)
            self._show_pool(placement.get("pool"))

    def clear_state(self) -> None:
        super().clear_state()
        self._placement = {}
        # Before a new start: JupyterHub's group overrides and user-options hooks come next.
        self._set_traits(self._configured)

    def _show_pool(self, pool: str | None) -> None:
        """Put the pool where JupyterHub's admin page and REST API show a server's options
        (in memory only: the options saved for the next start stay as the user gave them)."""
        if pool:
            options: dict[str, Any] = dict(getattr(self, "user_options", None) or {})
            self.user_options = {**options, POOL_KEY: pool}

    async def stop(self, now: bool = False) -> None:
        await super().stop(now=now)
        if self._admission is not None:
            await self._release(self._admission)
            self._admission = None

    # --- the service -----------------------------------------------------------------------------

    def _client(self) -> GPUPoolClient:
        return GPUPoolClient(
            self.service_url,
            self.service_token,
            request_timeout=self.service_timeout,
            admission_timeout=self.service_timeout + 120,
        )

    def _groups(self) -> list[str]:
        return [g.name for g in getattr(self.user, "groups", None) or ()]

    async def _catalog(self) -> Catalog:
        """What this user may choose now; :class:`ServiceUnavailable` if the service can't say."""
        if not self.service_token:
            raise ServiceUnavailable(
                "the hub has no token for it: set c.GPUPoolSpawner.service_token"
            )
        try:
            async with self._client() as client:
                answer = await client.launch_options(user=self.user.name, groups=self._groups())
        except GPUPoolError as e:
            raise ServiceUnavailable(e.message) from e
        return Catalog.from_json(answer)

    async def _release(self, admission: Mapping[str, Any]) -> None:
        try:
            async with self._client() as client:
                await client.release(str(admission["id"]))
        except GPUPoolError as e:
            # it expires on its own after the service's reservation_ttl
            self.log.warning("could not release admission %s: %s", admission.get("id"), e)

    async def _admit(self, pools: list[str], options: SpawnOptions) -> dict[str, Any]:
        try:
            async with self._client() as client:
                return dict(
                    await client.admit(
                        user=self.user.name,
                        groups=self._groups(),
                        pools=pools,
                        gpus=options.gpus,
                        gpu_type=options.gpu_type,
                        server=self.name or "",
                    )
                )
        except (AdmissionRejected, AdmissionForbidden) as e:
            raise SpawnRefused(e.status, no_pool_message(e.message, e.skipped)) from e
        except GPUPoolError as e:
            if e.status == 400:
                raise OptionsError(e.message) from e
            raise ServiceUnavailable(e.message) from e

    # --- the form --------------------------------------------------------------------------------

    @default("options_form")
    def _gpupool_options_form_default(self) -> Any:
        return self._render_gpupool_form

    async def _render_gpupool_form(self, spawner: KubeSpawner) -> str:
        try:
            catalog = await self._catalog()
        except ServiceUnavailable as e:
            message = unavailable_message(str(e))
            return f'<div class="alert alert-warning">{html.escape(message)}</div>' + (
                await self._profile_form()
            )
        # A refused form comes back as it was sent; otherwise the options of the last start
        # (JupyterHub keeps them, those of a start it refused too).
        last, self._refused_choice = self._refused_choice or self.user_options, None
        chosen = default_options(
            last,
            catalog,
            max_pools=self.max_pools,
            default_gpus=self.default_gpus,
        )
        context = form_context(
            catalog,
            chosen,
            profile_form=await self._profile_form(),
            user=self.user.name,
            server=self.name or "",
        )
        return render_form(
            context, template=self.form_template, search_path=self.form_template_paths
        )

    async def _profile_form(self) -> str:
        """KubeSpawner's profile choice, when profiles are configured."""
        if not self.profile_list:
            return ""
        if callable(self.profile_list):
            return str(await self._render_options_form_dynamically(self))
        return str(self._render_options_form(self._sorted_dict_values(self.profile_list)))

    @default("options_from_form")
    def _gpupool_options_from_form_default(self) -> Any:
        return self._gpupool_options_from_form

    async def _gpupool_options_from_form(self, formdata: Mapping[str, list[str]]) -> dict[str, Any]:
        """The form's fields as checked ``user_options`` (a 400 with a message otherwise).

        JupyterHub answers a 400 with the form again, from the options of the last start: what
        was sent is remembered, so that the form comes back as the user left it."""
        ours = {k: v for k, v in formdata.items() if is_form_field(k)}
        self._refused_choice = None
        try:
            options = form_to_user_options(ours)
        except OptionsError:
            self._refused_choice = form_to_user_options(ours, strict=False)
            raise
        if self.profile_list:
            others = {k: v for k, v in formdata.items() if not is_form_field(k)}
            options = {**self._options_from_form(others), **options}
        try:
            catalog = await self._catalog()
        except ServiceUnavailable:
            return options  # start() says what to do without the service (fail_open)
        try:
            checked = self._check(options, catalog)
        except OptionsError:
            self._refused_choice = options
            raise
        return {**options, **checked.to_user_options()}

    @default("apply_user_options")
    def _apply_user_options_default(self) -> Any:
        # JupyterHub (5.3+) warns about "unhandled user_options" without a hook; they are
        # read in start(), checked against the pools the user may use at that moment.
        return _read_in_start

    def _check(self, options: Mapping[str, Any] | None, catalog: Catalog) -> SpawnOptions:
        return parse_user_options(
            options,
            catalog,
            max_pools=self.max_pools,
            default_gpus=self.default_gpus,
            extra_keys=bool(self.profile_list),
        )

    # --- start -----------------------------------------------------------------------------------

    async def load_user_options(self) -> None:
        """Called by KubeSpawner's start for every attempt: every pool setting starts again
        from this start's base, a profile applies its overrides, then the admission its own."""
        self._set_traits(self._base)
        await super().load_user_options()
        if self._admission is not None:
            overrides = admission_overrides(self._admission)
            overrides["env"] = [
                *(overrides.get("env") or ()),
                *placement_env(self._admission, self.notebook_service_url),
            ]
            self._set_traits(pool_trait_values(self._snapshot(), overrides))
        # with or without an admission (fail_open): gpuctl lists the pod as a notebook
        self._set_traits({"extra_labels": with_job_type(self._snapshot()["extra_labels"])})

    def start(self) -> asyncio.Future[str]:
        self._progress = ProgressLog()  # before progress() can be asked for this start's steps
        return super().start()

    async def _start(self) -> str:
        """Check the options, then place the server in the first pool that takes it."""
        self._base = self._snapshot()  # configured + JupyterHub's group and option hooks
        self._admission = None
        try:
            catalog = await self._catalog()
        except ServiceUnavailable as e:
            return await self._start_without_service(str(e))
        options = self._check(self.user_options, catalog)
        self.log.info("Starting %s with %s", self._log_name, options.describe())
        return await self._place(options, catalog)

    async def _start_without_service(self, error: str) -> str:
        if not self.fail_open:
            raise SpawnRefused(503, unavailable_message(error))
        self.log.warning(
            "gpupool service unavailable (%s); starting %s without it", error, self._log_name
        )
        self._progress.add(
            f"the GPU pool service is not answering ({error}); starting without pool "
            "placement or GPUs (fail_open)"
        )
        return str(await super()._start())

    async def _place(self, options: SpawnOptions, catalog: Catalog) -> str:
        """Admission, attempt, and on an unschedulable pod the next pool, until the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(self.start_timeout - DEADLINE_MARGIN, 1.0)
        order = list(options.pools or catalog.default_pools)
        refusals: list[str] = []
        unplaced: list[str] = []  # the same, as the decision on the progress page says them
        while True:
            try:
                admission = await self._admit(order, options)
            except ServiceUnavailable as e:
                return await self._start_without_service(str(e))
            self._admission = admission
            pool = str(admission["pool"])
            self._progress.decide(Decision.of(admission, unplaced), admitted_lines(admission))
            try:
                url = await self._attempt(admission, deadline)
            except Unschedulable as e:
                refusals.append(f"{pool}: {e.words}")
                unplaced.append(unplaced_line(pool, e.words))
                await self._abandon(admission)
                order = rotate_after(order, pool)
                self._progress.decide(None)
                self._progress.add(fallback_line(pool, order[0], e.words))
                continue
            except OutOfTime as e:
                if str(e):
                    refusals.append(f"{pool}: {e}")
                await self._abandon(admission)
                raise SpawnRefused(503, unschedulable_message(self.start_timeout, refusals)) from e
            self._admission = None  # the pod exists: the service counts it now
            self._placed(admission, options)
            return url

    def _schedule_wait(self, pool: str) -> float:
        return self.pool_schedule_timeouts.get(pool, self.pool_schedule_timeout)

    def _scheduling(self) -> Scheduling:
        pods = self.pod_reflector.pods if self.pod_reflector else {}
        pod = pods.get(f"{self.namespace}/{self.pod_name}")
        events = self.event_reflector.events if self.event_reflector else []
        return scheduling(pod, events)

    async def _attempt(self, admission: Mapping[str, Any], deadline: float) -> str:
        """KubeSpawner's start with this admission's settings, watched for refusal."""
        loop = asyncio.get_running_loop()
        wait = self._schedule_wait(str(admission["pool"]))
        task = asyncio.ensure_future(super()._start())
        refused_since: float | None = None
        announced = False
        try:
            while True:
                finished, _ = await asyncio.wait({task}, timeout=WATCH_SECONDS)
                state = self._scheduling()
                if state.scheduled and not announced:
                    announced = True
                    self._progress.add(scheduled_line(str(state.node), admission))
                if task in finished:
                    return str(task.result())
                now = loop.time()
                if not state.unschedulable:
                    refused_since = None
                elif refused_since is None:
                    refused_since = now
                elif now - refused_since >= wait:
                    raise Unschedulable(state.message)
                if now >= deadline:
                    raise OutOfTime(state.message)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _abandon(self, admission: Mapping[str, Any]) -> None:
        """Delete the attempt's pod and give its GPUs back."""
        await KubeSpawner.stop(self, now=True)
        await self._release(admission)
        self._admission = None

    def _placed(self, admission: Mapping[str, Any], options: SpawnOptions) -> None:
        """Remember where the server runs (state survives a hub restart) and show it."""
        state = self._scheduling()
        self._placement = {
            "pool": admission.get("pool"),
            "platform": admission.get("platform"),
            "gpu_type": admission.get("gpu_type"),
            "gpus": admission.get("gpus"),
            "over_quota": bool(admission.get("over_quota")),
            "charged": admission.get("charged"),
            "admission": admission.get("id"),
            "node": state.node or admission.get("node"),
            "user_options": options.to_user_options(),
        }
        self._show_pool(str(admission.get("pool")))

    # --- progress --------------------------------------------------------------------------------

    async def progress(self) -> AsyncIterator[dict[str, Any]]:
        """gpupool's steps (admitted, skipped, scheduled, falling back) among the pod's events,
        each step after the admission shown with the pool decision."""
        log = self._progress
        pod_events = super().progress()

        async def decided() -> AsyncIterator[dict[str, Any]]:
            async for event in pod_events:
                yield with_decision(event, log.decision)

        def done() -> bool:
            future = self._start_future
            return future is None or future.done()

        async for event in merge_progress(log, decided(), done):
            yield event

    @default("progress_ready_hook")
    def _progress_ready_hook_default(self) -> Any:
        return _ready_event

    def ready_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """JupyterHub's "Server ready at URL" with where the server runs, and the rest of the
        pool decision (pools skipped and why) when this hub made it."""
        if not self._placement.get("pool"):
            return event
        where = ready_words(self._placement)
        decision = self._progress.decision
        others = decision.others if decision is not None else ()
        ready = str(event.get("message") or "Server ready")
        html_message = event.get("html_message") or html.escape(ready)
        return {
            **event,
            "message": "; ".join([f"{ready} {where}", *others]),
            "html_message": f"{html_message} {html.escape(where)}"
            + "".join(f"<br>{html.escape(line)}" for line in others),
        }


def _read_in_start(spawner: GPUPoolSpawner, user_options: Mapping[str, Any]) -> None:
    """``apply_user_options`` hook: nothing to do before start()."""


def _ready_event(spawner: GPUPoolSpawner, event: dict[str, Any]) -> dict[str, Any]:
    """``progress_ready_hook``: the ready message says where the server runs."""
    return spawner.ready_event(event)
