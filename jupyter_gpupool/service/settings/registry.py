"""Where pools and quotas are stored: the registry's settings.

Files or a ConfigMap, how often changes made outside the service are picked up, and how many
pools a change may make.
"""

from __future__ import annotations

from typing import Any

from traitlets import CaselessStrEnum, Float, HasTraits, Integer, TraitError, Unicode, validate


class RegistrySettings(HasTraits):
    """Where pools and quotas are stored."""

    registry = CaselessStrEnum(
        ["files", "configmap"],
        default_value="files",
        help="""Where pools and quotas are stored: ``files`` (a directory, see ``pools_dir``) or
        ``configmap`` (one ConfigMap, see ``configmap_namespace`` and ``configmap_name``).

        Either way, changes made through the API are written back, one gpuctl document per
        file or key, and changes made by others are picked up while running (see
        ``reload_interval``). Use ``configmap`` in a cluster, where the hub pod's disk does not
        survive a restart.

        Example::

            c.GPUPoolService.registry = "configmap"
        """,
    ).tag(config=True)

    pools_dir = Unicode(
        "",
        help="""The directory of pool and quota files (``*.yaml``, ``*.yml``, ``*.json``), for
        ``registry = "files"``.

        Every file is read at start; a file that does not load stops the service with every
        problem listed as ``FILE:LINE: field: message``. Pools created through the API are
        written here as ``<name>.yaml``. The directory is created if missing.

        Example::

            c.GPUPoolService.pools_dir = "/srv/gpupool/pools"
        """,
    ).tag(config=True)

    configmap_namespace = Unicode(
        "",
        help="""The namespace of the registry ConfigMap, for ``registry = "configmap"``.

        Defaults to the namespace the service runs in (inside a cluster), else the kubeconfig
        context's namespace, else ``default``.

        Example::

            c.GPUPoolService.configmap_namespace = "jhub"
        """,
    ).tag(config=True)

    configmap_name = Unicode(
        "gpupool-pools",
        help="""The name of the registry ConfigMap, for ``registry = "configmap"``.

        Each data key (``training-pool.yaml``...) holds documents as a file would. The
        ConfigMap is created on the first change if it does not exist; the service needs get,
        create and update on it.

        Example::

            c.GPUPoolService.configmap_name = "gpupool-pools"
        """,
    ).tag(config=True)

    reload_interval = Float(
        5.0,
        help="""How often, in seconds, the registry is checked for changes made outside the
        service (edited files, ``kubectl edit configmap``). 0 turns this off.

        A change that does not load is logged and ignored; the pools in force stay.

        Example::

            c.GPUPoolService.reload_interval = 10
        """,
    ).tag(config=True)

    max_pools = Integer(
        1000,
        help="""The most pools a change through the service (the API, the admin page) may make;
        a change that would make more is refused with a 400 saying so, and a request body with
        more documents than this is refused as soon as the one too many is read.

        A change's cost grows with the pools it holds, and a body of thousands of pools is
        more likely a mistake or an attack than a cluster. Pool files read at start (or
        changed outside the service) are not counted against it, but a change made through
        the service then is.

        Example::

            c.GPUPoolService.max_pools = 2000
        """,
    ).tag(config=True)

    @validate("max_pools")
    def _at_least_one_pool(self, proposal: Any) -> int:
        value = int(proposal["value"])
        if value < 1:
            raise TraitError(f"max_pools must be at least 1, not {value}")
        return value
