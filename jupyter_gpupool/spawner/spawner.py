"""``GPUPoolSpawner``: KubeSpawner that places servers in GPU pools, with fallback.

This module holds the class and its settings (every trait it adds to KubeSpawner's, with
help and an example: ``docs/gen_spawner_config.py`` writes docs/spawner.md's reference from
them). What it does comes from its layers, one job each:

- :mod:`.choosing`: what a user may choose (the service's launch options, the spawn form, the
  options read back and checked);
- :mod:`.placing`: the start (admission, attempts, the next pool on an unschedulable pod), the
  state that remembers the pool, and the progress the user reads;
- :mod:`.service`: the questions to the gpupool service over one kept-alive client, and what
  their failures mean for a start.

The rules are pure functions in the sibling modules (``options``, ``form``, ``podtraits``,
``scheduling``, ``messages``, ``progress``).
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import Bool, Dict, Float, Integer, List, TraitError, Unicode, default, validate

from ..core.pools.placement import SERVER_TOKEN_SCOPES
from .form import DEFAULT_TEMPLATE
from .placing import PlacingSpawner


class GPUPoolSpawner(PlacingSpawner):
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
        without `gpus`, or a user's first visit to the spawn form (there lowered to the most
        that some pool of the user's default order gives them, 0 when none has a GPU).

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

    queue_by_default = Bool(
        False,
        help="""
        Let starts wait in line for GPUs unless the user says otherwise.

        A start that asks to wait (`"queue": true` in `user_options`, the spawn form's
        "wait in line if no pool can take it now" checkbox) and that no pool can take now
        waits in the gpupool service's fair queue instead of failing at once; the progress
        page shows its place in line, and the server starts when its turn comes. This sets
        the checkbox's state on a user's first visit to the form, and `queue` for starts
        whose `user_options` do not say (the REST API). A queued start still gives up at
        `start_timeout`: give it a long one (e.g. 3600) where starts queue.

        Example:

        ```python
        c.GPUPoolSpawner.queue_by_default = True
        c.KubeSpawner.start_timeout = 3600  # how long a start may wait in line
        ```
        """,
    ).tag(config=True)

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
        `largest_free_block`, `quota`, `status`, `status_text`, and the pool's shapes:
        `shape_field` and `shapes`, each with `id`, `text`, `isolates`, `selected`,
        `kind_words`, `kind`), `isolation` (each kind of shape offered, once: `kind`,
        `words`, `isolates`), `gpu_choices`, `gpus`, `max_gpus`, `gpu_types`, `gpu_type`,
        `queue` (whether "wait in line" is ticked), `profile_form` (KubeSpawner's profile choice, when `profile_list` is
        set), `user` and `server`. Fields named `priority.POOL`, `shape.POOL`, `gpus`,
        `gpu_type` and `queue` are what the spawner reads back (`shape.POOL`: a shape id of
        the pool's, missing or `whole` for whole GPUs; `queue`: a hidden `off`, then the
        checkbox's `on`; a form without it leaves the choice to `queue_by_default`).

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
