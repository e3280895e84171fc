"""Where pools and quotas are stored: the registry's settings.

Files or a ConfigMap, and how often changes made outside the service are picked up.
"""

from __future__ import annotations

from traitlets import CaselessStrEnum, Float, HasTraits, Unicode


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
