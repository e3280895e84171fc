"""The pages' templates: the service's own, extending JupyterHub's ``page.html``.

So that the pages look like the hub's and carry its navigation bar (Home, Token, Services, the
dark-mode switch, Logout), the service's templates extend the hub's own ``page.html``, found in
JupyterHub's data files (or in ``template_paths``, for a hub with custom templates), and give it
the variables it expects. The hub's static files (its CSS and scripts) are served by the hub
under ``/hub/static/``: the pages are on the hub's origin, behind its proxy, so they just link
there. Autoescaping is on for every template.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from ....core.usage.amounts import parse_amount
from ....core.words.reports import gpu_hours_text
from ....core.words.tables import age, server_words
from ...views import iso, node_row

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"


def hub_template_dir() -> str | None:
    """JupyterHub's own templates (``share/jupyterhub/templates``), if they can be found."""
    try:
        from jupyterhub._data import DATA_FILES_PATH
    except ImportError:  # pragma: no cover - jupyterhub is a dependency
        return None
    path = os.path.join(DATA_FILES_PATH, "templates")
    return path if os.path.isfile(os.path.join(path, "page.html")) else None


def make_environment(extra_paths: Sequence[str] = ()) -> Environment:
    """``extra_paths`` first (a hub's custom templates), then ours, then the hub's.

    Ours come before the hub's so that our page names win; the hub's ``page.html`` is found
    behind them (``fallback/page.html`` stands in for it if JupyterHub's data files are missing).
    """
    paths = [*extra_paths, str(TEMPLATES)]
    hub = hub_template_dir()
    if hub:
        paths.append(hub)
    paths.append(str(TEMPLATES / "fallback"))
    env = Environment(
        loader=ChoiceLoader([FileSystemLoader(p) for p in paths]),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["gpus"] = gpus
    env.filters["server"] = server_words  # "(default)" for the default server, everywhere
    env.filters["node_row"] = node_row  # a node counted as the API counts it
    env.filters["gpu_hours"] = gpu_hours
    env.filters["percent"] = percent
    env.filters["age"] = lambda timestamp: age(timestamp, time.time())
    env.filters["isotime"] = iso
    env.filters["breakable"] = breakable
    return env


@dataclass(frozen=True)
class PageUser:
    """What ``page.html`` reads of ``user``."""

    name: str

    @property
    def json_escaped_name(self) -> str:
        return json.dumps(self.name)[1:-1]


def hub_namespace(
    *,
    hub_prefix: str,
    service_prefix: str,
    user: str,
    scopes: Sequence[str],
    xsrf_token: str,
) -> dict[str, Any]:
    """The variables JupyterHub's ``page.html`` uses, pointing at the hub."""
    hub_prefix = hub_prefix.rstrip("/") + "/"

    def static_url(path: str, include_version: bool = True) -> str:
        return f"{hub_prefix}static/{path}"

    return {
        "base_url": hub_prefix,
        "prefix": hub_prefix.rsplit("hub/", 1)[0] or "/",
        "static_url": static_url,
        "logo_url": f"{hub_prefix}home",
        "login_url": f"{hub_prefix}login",
        "logout_url": f"{hub_prefix}logout",
        "user": PageUser(user),
        "parsed_scopes": set(scopes),
        "services": [{"name": "gpupool", "href": service_prefix}],
        "admin_access": False,
        "no_spawner_check": True,
        "xsrf_token": xsrf_token,
        "version_hash": "",
        "announcement": None,
    }


def gpus(value: Any) -> str:
    """GPUs for a table cell: a whole count as it is, GPU-equivalents that are not whole
    (quotas count a MIG 1g of an A100 as 1/7) with two decimals (``0.43``, as the page's
    script writes the API's numbers), ``-`` when unknown."""
    if value is None:
        return "-"
    if isinstance(value, str):  # an amount as text (``1/7``), as the ledger keeps it
        parsed = parse_amount(value)
        if parsed is None:
            return value
        value = parsed
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
        return str(value)
    if value == int(value):
        return str(int(value))
    return f"{float(value):.2f}"


def gpu_hours(value: float | None) -> str:
    """GPU-hours for a page, as the CLI writes them (:func:`~....core.words.reports.gpu_hours_text`)."""
    return gpu_hours_text(value)


#: Where a label may break across lines: after these, never inside a word.
BREAK_AFTER = "/.=-_"


def breakable(text: Any) -> Markup:
    """``text`` escaped, with a ``<wbr>`` after each of :data:`BREAK_AFTER`: a long label
    (``beta.kubernetes.io/arch=amd64``) breaks between its parts, not mid-word."""
    out = []
    for ch in str(text):
        out.append(str(escape(ch)))
        if ch in BREAK_AFTER:
            out.append("<wbr>")
    return Markup("".join(out))


def percent(part: float | None, whole: float | None) -> float:
    """``part`` as a percentage of ``whole`` (0 when there is no whole), for bar widths."""
    if not whole or part is None:
        return 0.0
    return round(max(0.0, min(100.0, 100.0 * part / whole)), 1)
