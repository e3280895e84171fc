"""The service's settings (``service/settings/``) are configured as ``GPUPoolService``'s.

The traits live in a base class; what users write did not change: ``c.GPUPoolService.x`` in a
config file, ``--GPUPoolService.x=`` and the short options on the command line, the hub's
``JUPYTERHUB_*`` environment for defaults, and a message that names the bad value.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from traitlets import BaseDescriptor, TraitError
from traitlets.config import Config

from jupyter_gpupool.service import GPUPoolService
from jupyter_gpupool.service.settings import GPUPoolSettings


@pytest.fixture(autouse=True)
def _fresh_singleton():
    """GPUPoolService is a singleton Application: each test gets its own instance."""
    GPUPoolService.clear_instance()
    yield
    GPUPoolService.clear_instance()


def test_the_settings_are_configured_as_the_services(tmp_path: Path):
    config = tmp_path / "gpupool_service_config.py"
    config.write_text(
        "c.GPUPoolService.port = 10202\n"
        "c.GPUPoolService.pools_dir = '/srv/pools'\n"
        "c.GPUPoolService.reservation_ttl = 30\n"
        "c.GPUPoolService.max_body_size = '4M'\n"
    )
    app = GPUPoolService()
    app.initialize([f"--config={config}", "--reservation-ttl=45", "--GPUPoolService.max_gpus=8"])
    assert app.port == 10202
    assert app.pools_dir == "/srv/pools"
    assert app.reservation_ttl == 45  # the command line wins over the file
    assert app.max_gpus == 8
    assert app.max_body_size == 4 * 1024 * 1024


def test_one_config_section_for_the_user_to_write():
    """The base class is plain traits: ``c.GPUPoolSettings`` is not a second place to look."""
    c = Config()
    c.GPUPoolSettings.port = 1
    c.GPUPoolService.ip = "0.0.0.0"
    app = GPUPoolService(config=c)
    assert app.ip == "0.0.0.0"
    assert app.port != 1
    assert set(GPUPoolService.section_names()) == {
        "Application",
        "Configurable",
        "GPUPoolService",
        "LoggingConfigurable",
        "SingletonConfigurable",
    }


def test_defaults_come_from_the_hubs_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10303")
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/hub-prefix/services/gpupool/")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "secret-token")
    app = GPUPoolService()
    assert (app.port, app.base_url, app.api_token) == (
        10303,
        "/hub-prefix/services/gpupool/",
        "secret-token",
    )
    assert app.service_name == "gpupool"
    assert app.log_level == 20  # INFO: the Application's own default stays with it


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("port", 70000, "between 0 and 65535"),
        ("pool_label", "not a label/", "not a valid Kubernetes label key"),
        ("reservation_ttl", 0, "reservation_ttl must be more than 0"),
        ("history_hours", -1, "history_hours must be more than 0"),
        ("budget_warn_percent", 120, "budget_warn_percent is a share in %, 0 to 100, not 120"),
        ("budget_grace", "15 minutes", "budget_grace: a duration is a whole number of s, m, h"),
    ],
)
def test_bad_values_are_refused_with_a_message(name: str, value: object, words: str):
    app = GPUPoolService()
    with pytest.raises(TraitError, match=words):
        setattr(app, name, value)


def test_the_budget_settings_make_the_budget_rules():
    app = GPUPoolService()
    rules = app.budget_rules()
    assert (rules.warn_percent, rules.grace_seconds, rules.on_exhausted) == (90, 900, "report")
    app.budget_grace, app.budget_warn_percent, app.stop_over_budget = "30m", 80, True
    rules = app.budget_rules()  # stop_over_budget, deprecated: on_exhausted stop by default
    assert (rules.warn_percent, rules.grace_seconds, rules.on_exhausted) == (80, 1800, "stop")


def test_every_setting_is_a_config_trait_of_the_service():
    settings = GPUPoolSettings.class_traits(config=True)
    assert settings.keys() <= GPUPoolService.class_traits(config=True).keys()
    assert {
        "ip",
        "port",
        "pools_dir",
        "registry",
        "reclaim_wait",
        "template_paths",
    } <= settings.keys()


def test_the_settings_classes_do_not_hide_each_others_names():
    """The settings are split by concern into classes that GPUPoolSettings combines. traitlets
    finds ``@default``/``@validate`` methods by attribute name, so a name two of them define
    would leave one check or default silently unused."""
    parts = [
        k for k in GPUPoolSettings.__mro__ if k.__module__.startswith(GPUPoolSettings.__module__)
    ]
    assert len(parts) > 5
    seen: dict[str, str] = {}
    for klass in parts:
        for name, value in vars(klass).items():
            if isinstance(value, BaseDescriptor):  # the traits and their handlers
                assert name not in seen, f"{name} in {klass.__name__} and {seen[name]}"
                seen[name] = klass.__name__


def test_each_settings_check_still_refuses():
    """The checks that were shared across concerns (more than 0) each live with their settings."""
    app = GPUPoolService()
    for name in (
        "sync_timeout",
        "reservation_ttl",
        "reclaim_wait",
        "queue_heartbeat",
        "utilization_interval",
        "history_interval",
        "history_hours",
        "history_raw_days",
        "history_days",
    ):
        with pytest.raises(TraitError, match=f"^{name} must be more than 0"):
            setattr(app, name, 0)


@pytest.mark.parametrize(
    ("arg", "debug", "info"),
    [("--log-level=WARN", False, False), ("", False, True), ("--log-level=DEBUG", True, True)],
)
def test_module_loggers_take_the_log_level_asked_for(arg: str, debug: bool, info: bool):
    """The service's loggers (its access log, tornado's, the hub auth's) are at the level asked
    for, not at DEBUG behind a filtering handler: a line that will not be shown is not built."""
    routed = [logging.getLogger(n) for n in ("jupyter_gpupool", "gpupool", "tornado")]
    saved = [(lg, lg.level, lg.propagate, list(lg.handlers)) for lg in routed]
    try:
        app = GPUPoolService()
        app.initialize([arg] if arg else [])
        app._route_logs()
        for name in ("gpupool.access", "jupyter_gpupool.service.web.api", "tornado.application"):
            logger = logging.getLogger(name)
            assert logger.isEnabledFor(logging.DEBUG) is debug, name
            assert logger.isEnabledFor(logging.INFO) is info, name
    finally:  # other tests' caplog needs these loggers as they were
        for lg, level, propagate, handlers in saved:
            lg.setLevel(level)
            lg.propagate = propagate
            lg.handlers[:] = handlers
