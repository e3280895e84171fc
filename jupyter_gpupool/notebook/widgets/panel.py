"""``LaunchPanel``: the pools with their free GPUs, and a form to launch a server in them.

::

    from jupyter_gpupool.notebook.widgets import LaunchPanel

    LaunchPanel()

A :class:`~ipywidgets.VBox` with private child widgets; what it shows is in traits (``pools``,
``order``, ``shapes``, ``gpus``, ``server_name``, ``queue``, ``state``, ``progress``,
``message``, ``url``, ``running``) and the children follow them. A pool whose nodes offer parts
of GPUs (MIG instances, shared GPUs) has a menu of its shapes beside its bar, each with
its free count; what the chosen one isolates is its tooltip. Nothing in it has a fixed width that a narrow
notebook would cut: rows wrap, words are HTML (which wraps) rather than Labels (which end in
an ellipsis), and descriptions are as wide as their words.

Clicks start coroutines on the kernel's event loop (a cell never blocks): :meth:`refresh`,
:meth:`launch`, :meth:`stop`, which a cell may also ``await``. While the panel is
shown somewhere it refreshes the pools every ``refresh_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import os
from collections.abc import Coroutine, Mapping
from typing import Any

import ipywidgets as widgets
from traitlets import Bool, Dict, Float, Int, List, Unicode, observe, validate

from ...core.pools.placement import Placement
from ...core.words.launch_options import Catalog, PoolChoice, gpu_choices, pool_status, quota_text
from ...core.words.shape_choice import WHOLE, default_shape, entry_json, shape_ids
from ..magics.where import ask_where
from ..session import SESSION_ERRORS, LaunchResult, UserSession, default_server_name

#: ``state`` values.
IDLE, LAUNCHING, READY, FAILED, STOPPING = "idle", "launching", "ready", "failed", "stopping"
_BAR_STYLE = {"free": "success", "borrowing": "warning", "full": "danger", "quota-used": "danger"}


#: Rows of several parts wrap in a narrow notebook instead of running past its edge.
_WRAP = {"flex_flow": "row wrap", "align_items": "center"}
#: Descriptions as wide as their words (the default cuts them at 80px).
_DESCRIBED = {"description_width": "initial"}
#: The queue checkbox's words: the spawn form's.
QUEUE_WORDS = "wait in line if no pool can take it now"


def _html(value: str = "", **layout: str) -> widgets.HTML:
    """Words in HTML, which wraps (a Label ends in an ellipsis where it does not fit)."""
    return widgets.HTML(value, layout=widgets.Layout(**layout))


class PoolBar(widgets.HBox):
    """One pool: its name, a bar of GPUs in use out of all, and free GPUs and quota in words;
    in a narrow notebook the words go under the bar. Where the pool offers parts of GPUs, a
    menu of its shapes follows (``shape``: the one chosen; empty while there is no choice)."""

    shape = Unicode("")

    def __init__(self, name: str):
        self._name = _html(html.escape(name), width="10em", margin="0 8px 0 0")
        self._bar = widgets.FloatProgress(
            min=0, max=1, layout=widgets.Layout(width="12em", min_width="6em", flex="0 1 auto")
        )
        self._words = _html(flex="1 1 16em")
        # as wide as its longest option, but never past the notebook's edge (it wraps under)
        self._shape = widgets.Dropdown(
            options=[],
            layout=widgets.Layout(
                width="auto", max_width="calc(100% - 2 * var(--jp-widgets-margin))"
            ),
        )
        self._shape.layout.display = "none"
        self._isolates: dict[str, str] = {}
        self._shape.observe(self._on_shape_value, "value")
        super().__init__(
            [self._name, self._bar, self._words, self._shape], layout=widgets.Layout(**_WRAP)
        )

    @property
    def name(self) -> str:
        return html.unescape(self._name.value)

    def show(self, pool: PoolChoice) -> None:
        code, words = pool_status(pool)
        total = pool.equivalents_total  # GPU-equivalents, as every surface counts them
        self._bar.max = max(total, 1)
        self._bar.value = max(0.0, total - float(pool.free_equivalents))
        self._bar.bar_style = _BAR_STYLE.get(code, "info")
        free = f"{pool.free_text.replace(' / ', ' of ')} GPUs free" if total else ""
        self._words.value = html.escape(" · ".join(w for w in (free, quota_text(pool), words) if w))
        self._show_shapes(pool)

    def _show_shapes(self, pool: PoolChoice) -> None:
        ids = shape_ids(pool.shapes)
        if all(i == WHOLE for i in ids):  # whole GPUs or nothing: no choice to make
            self._shape.layout.display = "none"
            self.shape = ""
            return
        keep = self.shape if self.shape in ids else default_shape(pool.shapes) or WHOLE
        texts: dict[str, list[str]] = {}
        for s in pool.shapes:
            texts.setdefault(s.id, []).append(s.text)
            self._isolates.setdefault(s.id, s.isolates)
        options = [("; ".join(texts[i]), i) for i in ids]
        if list(self._shape.options) != options:
            self._shape.options = options
        self._shape.value = keep
        self.shape = keep
        self._shape.layout.display = ""

    def choose(self, shape: str) -> None:
        """Choose one of the pool's shapes (as the menu does)."""
        if shape in [v for _, v in self._shape.options]:
            self._shape.value = shape

    def _on_shape_value(self, change: Any) -> None:
        if change["new"] is not None:
            self.shape = change["new"]
            self._shape.tooltip = f"isolates {self._isolates.get(change['new'], '')}"


class LaunchPanel(widgets.VBox):
    """Pools with live free GPUs as bars, an ordered pool picker, the GPU count, a server name,
    Launch and Stop, and the hub's progress for the server being launched."""

    #: The pools this user may use (the service's launch options, one dict per pool).
    pools = List(Dict())
    #: The pools to try, in priority order (empty: the user's default order).
    order = List(Unicode())
    #: The shape chosen in each pool that offers parts of GPUs (``mig-3g.40gb``, ``whole``...);
    #: a pool not in it gets whole GPUs.
    shapes = Dict(Unicode())
    gpus = Int(1)
    gpu_type = Unicode("")
    #: The server to launch; empty: named after the first pool and the GPU count.
    server_name = Unicode("")
    #: Wait in line when no pool can take the launch now (``"queue": true``), instead of
    #: failing at once; Stop then takes it out of the line.
    queue = Bool(False)
    state = Unicode(IDLE)
    progress = Int(0)
    message = Unicode("")
    #: The launched server's URL, once it is ready.
    url = Unicode("")
    #: The last server launched from this panel (what Stop stops when no name is typed).
    launched = Unicode("")
    #: The user's servers the hub runs (or starts), this one left out: what Stop may stop.
    running = List(Unicode())
    refresh_interval = Float(10.0)

    def __init__(self, **kwargs: Any):
        self._catalog = Catalog()
        self._bars: dict[str, PoolBar] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._syncing = False
        #: the launch under way asked to wait in line (Stop may take it out)
        self._launch_queued = False
        #: Stop was clicked while that launch went on: the stop says how it ended
        self._leaving = False
        self._refresher: asyncio.Task[None] | None = None
        self._title = widgets.HTML()
        self._pool_box = widgets.VBox()
        self._picker = widgets.TagsInput(
            allow_duplicates=False, placeholder="add pools, first tried first"
        )
        self._gpus = widgets.Dropdown(
            description="GPUs",
            options=[0, 1],
            value=1,
            style=_DESCRIBED,
            layout=widgets.Layout(width="auto"),
        )
        self._gpu_type = widgets.Dropdown(
            description="GPU type",
            options=[("any", "")],
            style=_DESCRIBED,
            layout=widgets.Layout(width="auto"),
        )
        self._name = widgets.Text(
            description="Server name",
            style=_DESCRIBED,
            layout=widgets.Layout(width="auto", max_width="30em"),
        )
        # its words beside the box, as wide as they are (a Checkbox is 300px by default)
        self._queue = widgets.Checkbox(
            value=False,
            description=QUEUE_WORDS,
            indent=False,
            tooltip="when every pool is full, wait for GPUs in fair order (your place is shown "
            "below) instead of failing; Stop leaves the line",
            layout=widgets.Layout(width="auto"),
        )
        self._launch = widgets.Button(description="Launch", button_style="primary", icon="rocket")
        self._stop = widgets.Button(description="Stop", icon="stop", disabled=True)
        # auto: as wide as the panel (less the widgets' margins), up to 20em
        self._bar = widgets.IntProgress(
            min=0, max=100, layout=widgets.Layout(width="auto", max_width="20em")
        )
        # under the bar, not beside it: a long message wraps over the whole width
        self._status = _html()
        super().__init__(**kwargs)
        self._picker.observe(self._on_picker_value, "value")
        self._gpus.observe(self._on_gpus_value, "value")
        self._gpu_type.observe(self._on_gpu_type_value, "value")
        self._name.observe(self._on_name_value, "value")
        self._queue.observe(self._on_queue_value, "value")
        self._launch.on_click(self._on_launch_click)
        self._stop.on_click(self._on_stop_click)
        self.children = [
            self._title,
            self._pool_box,
            widgets.HTML("<b>Pools to try, in order</b>"),
            self._picker,
            widgets.HBox([self._gpus, self._gpu_type], layout=widgets.Layout(**_WRAP)),
            self._name,
            self._queue,
            widgets.HBox([self._launch, self._stop], layout=widgets.Layout(**_WRAP)),
            self._bar,
            self._status,
        ]
        self._show_title()
        self._show_state()
        # the frontends count the views shown: refresh only while there is one
        self._view_count = 0

    # --- what the panel shows follows its traits -------------------------------------------------

    def _show_title(self) -> None:
        here = Placement.from_environ(os.environ)
        where = html.escape(here.label())
        self._title.value = f"<b>GPU pools</b> · this server: {where}"

    @validate("gpus")
    def _valid_gpus(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise ValueError(f"gpus must not be negative, not {proposal['value']}")
        return int(proposal["value"])

    @observe("pools")
    def _pools_changed(self, change: Any) -> None:
        self._catalog = Catalog.from_json({"pools": change["new"]})
        names = [p.name for p in self._catalog.pools]
        for gone in set(self._bars) - set(names):
            self._bars.pop(gone).close()
        for pool in self._catalog.pools:
            if pool.name not in self._bars:
                self._bars[pool.name] = PoolBar(pool.name)
                self._bars[pool.name].observe(self._on_bar_shape, "shape")
            self._bars[pool.name].show(pool)
        bars = tuple(self._bars[n] for n in names)
        if self._pool_box.children != bars:
            self._pool_box.children = bars
        self._picker.allowed_tags = names
        choices = gpu_choices(self._catalog) or [0]
        if self.gpus not in choices:
            self.gpus = min(choices, key=lambda n: (abs(n - self.gpus), n))
        self._syncing = True  # new options reset the dropdown's value: not the user's choice
        try:
            self._gpus.options = choices
            self._gpus.value = self.gpus
        finally:
            self._syncing = False
        types = sorted({t for p in self._catalog.pools for t in p.gpu_types})
        self._gpu_type.options = [("any", ""), *((t, t) for t in types)]
        if self.gpu_type not in types:
            self.gpu_type = ""
        self.order = [p for p in self.order if p in names]

    @observe("order")
    def _order_changed(self, change: Any) -> None:
        if list(self._picker.value) != list(change["new"]):
            self._picker.value = list(change["new"])
        self._name.placeholder = self.default_name()
        self._show_state()  # Stop's default target is the default name

    @observe("shapes")
    def _shapes_changed(self, change: Any) -> None:
        for name, shape in change["new"].items():
            if name in self._bars:
                self._bars[name].choose(shape)

    @observe("gpus")
    def _gpus_changed(self, change: Any) -> None:
        if change["new"] in self._gpus.options and self._gpus.value != change["new"]:
            self._gpus.value = change["new"]
        self._name.placeholder = self.default_name()
        self._show_state()  # Stop's default target is the default name

    @observe("gpu_type")
    def _gpu_type_changed(self, change: Any) -> None:
        self._gpu_type.value = change["new"]

    @observe("server_name")
    def _server_name_changed(self, change: Any) -> None:
        self._name.value = change["new"]
        self._show_state()

    @observe("queue")
    def _queue_changed(self, change: Any) -> None:
        self._queue.value = change["new"]

    @observe("state", "progress", "message", "url", "launched", "running")
    def _state_changed(self, change: Any) -> None:
        self._show_state()

    def stop_target(self) -> str:
        """The server Stop stops: the typed name, else the last launched, else the name a
        launch would take."""
        return self.server_name or self.launched or self.default_name()

    def leaving_possible(self) -> bool:
        """Whether Stop would take the launch under way out of the line: it asked to wait in
        line, and Stop's target is that server."""
        return (
            self.state == LAUNCHING and self._launch_queued and self.stop_target() == self.launched
        )

    def _show_state(self) -> None:
        busy = self.state in (LAUNCHING, STOPPING)
        self._launch.disabled = busy
        target = self.stop_target()
        if self.leaving_possible():
            self._stop.disabled = False
            self._stop.tooltip = f"stop {target} (it leaves the line if it waits)"
        elif busy:
            self._stop.disabled = True
            self._stop.tooltip = ""
        else:
            self._stop.disabled = target not in self.running
            self._stop.tooltip = (
                f"{target} is not running" if self._stop.disabled else f"stop {target}"
            )
        self._bar.value = self.progress
        self._bar.bar_style = {FAILED: "danger", READY: "success"}.get(self.state, "info")
        words = html.escape(self.message)
        if self.state == READY and self.url:
            link = html.escape(self.url, quote=True)
            name = html.escape(self.launched)
            words += f" <a href='{link}' target='_blank'>Open {name}</a>"
        self._status.value = words

    # --- the children's events -------------------------------------------------------------------

    def _on_bar_shape(self, change: Any) -> None:
        shapes = {k: v for k, v in self.shapes.items() if k != change["owner"].name}
        self.shapes = {**shapes, change["owner"].name: change["new"]} if change["new"] else shapes

    def _on_picker_value(self, change: Any) -> None:
        self.order = list(change["new"])

    def _on_gpus_value(self, change: Any) -> None:
        if change["new"] is not None and not self._syncing:
            self.gpus = int(change["new"])

    def _on_gpu_type_value(self, change: Any) -> None:
        self.gpu_type = change["new"] or ""

    def _on_name_value(self, change: Any) -> None:
        self.server_name = change["new"].strip()

    def _on_queue_value(self, change: Any) -> None:
        self.queue = bool(change["new"])

    def _on_launch_click(self, button: widgets.Button) -> None:
        self.state = LAUNCHING  # now, so that a second click finds the button disabled
        self._run(self.launch())

    def _on_stop_click(self, button: widgets.Button) -> None:
        self.state = STOPPING
        self._run(self.stop())

    # --- refreshing while shown ------------------------------------------------------------------

    @observe("_view_count")
    def _views_changed(self, change: Any) -> None:
        if change["new"]:
            self._start_refreshing()
        else:
            self._stop_refreshing()

    def _start_refreshing(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no kernel loop to refresh on (plain Python): refresh() by hand
        if self._refresher is None or self._refresher.done():
            self._refresher = loop.create_task(self._refresh_loop())

    def _stop_refreshing(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            self._refresher = None

    async def _refresh_loop(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.refresh_interval)

    def close(self) -> None:
        self._stop_refreshing()
        for bar in self._bars.values():
            bar.close()
        super().close()

    def _run(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        """Run ``coro`` on the running loop (a kernel's); without one, to its end now."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(coro)
            return None
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def wait(self) -> None:
        """Until the launches, stops and refreshes started by clicks are done."""
        pending = [t for t in self._tasks if t is not self._refresher]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    # --- the work --------------------------------------------------------------------------------

    def default_name(self) -> str:
        return default_server_name(self.order or list(self._catalog.default_pools), self.gpus)

    def user_options(self) -> dict[str, Any]:
        pools = [entry_json(p, self.shapes.get(p) or None) for p in self.order]
        options: dict[str, Any] = {"pools": pools, "gpus": self.gpus}
        if self.gpu_type:
            options["gpu_type"] = self.gpu_type
        if self.queue:
            options["queue"] = True
        return options

    async def refresh(self) -> None:
        """Ask the service for the pools again."""
        try:
            async with UserSession.from_environ() as session:
                answer = await session.launch_options()
        except SESSION_ERRORS as e:
            if self.state not in (LAUNCHING, STOPPING):
                self.message = getattr(e, "message", None) or str(e)
            return
        defaults = tuple(str(p) for p in answer.get("default_pools") or ())
        self.pools = list(answer.get("pools") or [])
        self._catalog = Catalog.from_json(answer)
        if not self.order and defaults:
            self.order = list(defaults)
        self._name.placeholder = self.default_name()
        await self.refresh_running()

    async def refresh_running(self) -> None:
        """Ask the hub which of the user's servers run (what Stop may stop)."""
        try:
            async with UserSession.from_environ() as session:
                servers = await session.hub_servers()
                this = session.placement.server
        except SESSION_ERRORS as e:
            if self.state not in (LAUNCHING, STOPPING):
                self.message = getattr(e, "message", None) or str(e)
            return
        self.running = sorted(
            name
            for name, server in servers.items()
            if name != this and (server or {}).get("pending") != "stop"
        )

    async def launch(self) -> LaunchResult:
        """Launch ``server_name`` (or the default name) with the chosen pools and GPUs, and
        follow the hub's progress into ``progress`` and ``message`` (while it waits in line:
        its place, in the hub's words)."""
        name = self.server_name or self.default_name()
        options = self.user_options()
        self._launch_queued, self._leaving = bool(options.get("queue")), False
        self.launched, self.url = name, ""
        self.state, self.progress, self.message = LAUNCHING, 0, f"asking for {name}"
        where = ""
        try:
            async with UserSession.from_environ() as session:
                result = await session.launch(name, options, self._on_progress)
                if result.ready and not self._leaving:
                    # the hub says ready; the service says where, and whether over quota
                    where = await ask_where(session, name)
        except SESSION_ERRORS as e:
            result = LaunchResult(name, False, getattr(e, "message", None) or str(e))
        finally:
            self._launch_queued = False
        if self._leaving or self.state == STOPPING:
            return result  # Stop was clicked meanwhile: the stop says how it ended
        # one change of the view: never "ready" shown without its link and buttons
        with self.hold_trait_notifications():
            self.progress = 100 if result.ready else self.progress
            self.message = f"ready {where}" if result.ready and where else result.message
            self.url = result.url or ""
            if result.ready and name not in self.running:
                self.running = sorted([*self.running, name])
            self.state = READY if result.ready else FAILED
        return result

    def _on_progress(self, event: Mapping[str, Any]) -> None:
        if self._leaving:
            return  # stopped while it waited: what the stop says stays
        with contextlib.suppress(TypeError, ValueError):
            self.progress = max(0, min(100, int(event.get("progress") or 0)))
        self.message = str(event.get("message") or "")

    async def stop(self) -> str:
        """Stop :meth:`stop_target`: the typed name, else the server launched last."""
        name = self.stop_target()
        self._leaving = self._launch_queued and name == self.launched
        self.state, self.message = STOPPING, f"stopping {name}"
        try:
            async with UserSession.from_environ() as session:
                words = await session.release(name)
        except SESSION_ERRORS as e:
            self.state, self.message = FAILED, getattr(e, "message", None) or str(e)
            return self.message
        if name == self.launched:
            self.url, self.progress, self.launched = "", 0, ""
        self.running = [n for n in self.running if n != name]
        self.state, self.message = IDLE, words
        return words
