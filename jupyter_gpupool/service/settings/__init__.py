"""The gpupool service's settings: every ``c.GPUPoolService.x`` trait, its default and checks.

:class:`GPUPoolSettings` is a base class of
:class:`~jupyter_gpupool.service.app.GPUPoolService`, so a config file or command line names them
as settings of the service (``c.GPUPoolService.port = 10101``, ``--GPUPoolService.port=10101``,
``--port=10101``). It holds values only: what the service builds and runs from them is in
:mod:`.app`.

The settings are defined by concern, one class per module here, and :class:`GPUPoolSettings`
combines them: :mod:`.web` (address, port, prefix, body size, templates), :mod:`.hub`,
:mod:`.registry`, :mod:`.cluster`, :mod:`.admission` (reservations, reclaim, the line),
:mod:`.database` (and the usage history), :mod:`.utilization` (DCGM, Prometheus) and
:mod:`.limits` (idle policy, budgets). Each class defines its settings' ``@default`` and
``@validate`` methods beside them; traitlets finds those by name across the combined classes, so
no two classes here may use the same method name (``tests/service/test_settings.py`` checks).
``docs/gen_service_config.py`` writes the reference in ``docs/service.md`` from the traits of all
of them, in the order of its ``ORDER``.
"""

from __future__ import annotations

from traitlets import Unicode

from .admission import AdmissionSettings
from .cluster import ClusterSettings
from .database import DatabaseSettings
from .hub import SERVICE_NAME, HubSettings
from .limits import LimitSettings, idle_policy_of
from .registry import RegistrySettings
from .utilization import UtilizationSettings
from .web import WebSettings

__all__ = ["SERVICE_NAME", "GPUPoolSettings", "idle_policy_of"]


class GPUPoolSettings(
    WebSettings,
    HubSettings,
    RegistrySettings,
    ClusterSettings,
    AdmissionSettings,
    DatabaseSettings,
    UtilizationSettings,
    LimitSettings,
):
    """The service's settings, with the defaults the hub's environment gives them.

    Plain traits, not a ``Configurable``, as are the classes it combines: they become
    configurable through the class that is run, :class:`~jupyter_gpupool.service.app.GPUPoolService`
    (``Application`` first, then this), so the one config section is ``c.GPUPoolService`` and
    ``--help-all`` lists them there, as before they moved here. The command-line aliases and the
    log defaults belong to the Application and stay with it.
    """

    # the file every other setting may be read from, so it belongs to none of the concerns
    config_file = Unicode(
        "",
        help="""A Python config file to load before the command line is applied.

        Settings in it look like ``c.GPUPoolService.port = 10101``. The command line wins over
        the file.

        Example (command line)::

            python -m jupyter_gpupool.service --config=/etc/gpupool/gpupool_service_config.py
        """,
    ).tag(config=True)
