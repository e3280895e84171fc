"""Regenerate the configuration reference in ``docs/service.md`` from the service's traits.

The reference is the text between the two marker lines below; everything else in the file is
written by hand. Each setting of :class:`jupyter_gpupool.service.GPUPoolService` that is
configurable (defined in ``jupyter_gpupool/service/settings/``) becomes one section, in the order
of :data:`ORDER`: its config name, type, default, command-line alias, and its ``help``
(reStructuredText ``Example::`` blocks become Python code blocks). ::

    python docs/gen_service_config.py           # rewrite the section in place
    python docs/gen_service_config.py --check   # exit 1 if the committed section is stale
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import traitlets  # noqa: E402
from configref import configurable_traits, default_text, main  # noqa: E402

from jupyter_gpupool.service import GPUPoolService  # noqa: E402

DOC = ROOT / "docs" / "service.md"
BEGIN = "<!-- BEGIN GENERATED CONFIG REFERENCE: python docs/gen_service_config.py -->"
END = "<!-- END GENERATED CONFIG REFERENCE -->"


def _markdown(help_text: str) -> str:
    """Trait help (reST-ish) as Markdown: ``x`` -> `x`, ``Label::`` + indented block -> code."""
    lines = inspect.cleandoc(help_text).splitlines()
    out: list[str] = []
    in_code = False
    for line in lines:
        if in_code:
            if line.strip() and not line.startswith("    "):
                out.append("```")
                in_code = False
            else:
                out.append(line[4:])
                continue
        if line.rstrip().endswith("::"):
            out.append(re.sub(r"``([^`]+)``", r"`\1`", line.rstrip()[:-1]))
            out.append("")
            out.append("```python")
            in_code = True
            continue
        out.append(re.sub(r"``([^`]+)``", r"`\1`", line))
    if in_code:
        out.append("```")
    # drop the blank line the reST block left right after the fence opened
    text = "\n".join(out)
    text = re.sub(r"```python\n\n+", "```python\n", text)
    # a command line is not Python
    text = re.sub(r"```python\n(?=python -m )", "```console\n", text)
    return re.sub(r"\n+```\n", "\n```\n", text).strip()


def _type(trait: traitlets.TraitType) -> str:
    name = type(trait).__name__
    if isinstance(trait, traitlets.Enum):
        return "one of " + ", ".join(f"`{v}`" for v in trait.values or ())
    return {
        "Int": "integer",
        "Unicode": "string",
        "Float": "number",
        "Bool": "boolean",
        "List": "list",
    }.get(name, name)


#: The order of the reference's sections. The settings are defined by concern, in several classes
#: (``jupyter_gpupool/service/settings/``); the reference keeps the order it had before they were
#: split, so the order is written here, not taken from the classes. A new setting goes here too.
ORDER = (
    "config_file",
    "ip",
    "port",
    "base_url",
    "hub_api_url",
    "api_token",
    "service_name",
    "auth_cache_seconds",
    "groups_cache_seconds",
    "registry",
    "pools_dir",
    "configmap_namespace",
    "configmap_name",
    "reload_interval",
    "max_pools",
    "kubeconfig",
    "pool_label",
    "mig_parted_config",
    "sync_timeout",
    "reservation_ttl",
    "reclaim_wait",
    "max_gpus",
    "max_body_size",
    "summary_cache_seconds",
    "history_interval",
    "history_hours",
    "db_url",
    "db_check_interval",
    "durable_timeout",
    "history_raw_days",
    "history_days",
    "queue_heartbeat",
    "queue_place_interval",
    "max_queued_per_user",
    "booking_warning",
    "utilization_source",
    "utilization_interval",
    "dcgm_urls",
    "dcgm_pod_selector",
    "dcgm_namespace",
    "dcgm_port",
    "prometheus_url",
    "prometheus_query",
    "idle_policy",
    "budget_warn_percent",
    "budget_grace",
    "stop_over_budget",
    "template_paths",
)


def service_traits(cls: type) -> list[tuple[str, traitlets.TraitType]]:
    """The configurable traits gpupool's own classes define, in the order of :data:`ORDER`.

    The traits live in :class:`~jupyter_gpupool.service.settings.GPUPoolSettings` and the classes
    it combines, base classes of the service, and are configured as the service's
    (``c.GPUPoolService.NAME``); traitlets' own (``log_level``...) are left out. Every class in
    the MRO is read, not only the class's own traits, so no setting is missed; a setting missing
    from :data:`ORDER`, or named there but not defined, stops the generator.
    """
    traits = {
        name: trait
        for klass in reversed(cls.__mro__)
        if klass.__module__.startswith("jupyter_gpupool.")
        for name, trait in configurable_traits(klass)
    }
    unplaced = sorted(traits.keys() - set(ORDER))
    unknown = sorted(set(ORDER) - traits.keys())
    repeated = sorted({name for name in ORDER if ORDER.count(name) > 1})
    if unplaced or unknown or repeated:
        raise SystemExit(
            f"docs/gen_service_config.py: ORDER must name every setting of {cls.__name__} once "
            f"(not placed: {', '.join(unplaced) or 'none'}; "
            f"not settings: {', '.join(unknown) or 'none'}; "
            f"repeated: {', '.join(repeated) or 'none'})"
        )
    return [(name, traits[name]) for name in ORDER]


def reference(cls: type[GPUPoolService] = GPUPoolService) -> str:
    aliases = {
        target.split(".", 1)[1]: flag
        for flag, target in cls.aliases.items()
        if isinstance(target, str) and target.startswith(cls.__name__ + ".")
    }
    sections = [
        f"Settings of `{cls.__name__}`, in a config file (`--config FILE`) as "
        f"`c.{cls.__name__}.NAME = value`, or on the command line as "
        f"`--{cls.__name__}.NAME=value` (or the short option shown). "
        "The log level is `--log-level` (`c.Application.log_level`)."
    ]
    for name, trait in service_traits(cls):
        # the class that defines the trait also holds its @default (traitlets keeps them per class)
        default = default_text(
            trait.this_class, name, trait, "computed when the service starts (see below)"
        )
        facts = [f"type: {_type(trait)}", f"default: {default}"]
        if name in aliases:
            facts.append(f"command line: `--{aliases[name]}`")
        sections.append(
            f"### `c.{cls.__name__}.{name}`\n\n{'; '.join(facts)}\n\n{_markdown(trait.help)}"
        )
    return "\n\n".join(sections) + "\n"


if __name__ == "__main__":
    sys.exit(
        main(__doc__.split("\n\n")[0], DOC, BEGIN, END, reference, "docs/gen_service_config.py")
    )
