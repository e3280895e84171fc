"""What stops running servers: the settings of the idle policy and of budgets.

The idle-GPU policy of pools whose file has none, checked as a pool file's ``idle`` is, and
what a spent GPU-hour budget does to the servers it pays for (warn at a share, then stop after
a grace under ``on_exhausted: stop``). Runtime limits are the pool files' (``max-runtime``).
"""

from __future__ import annotations

from typing import Any

import yaml
from traitlets import Bool, Dict, Float, HasTraits, TraitError, Unicode, validate

from ...core.documents.durations import duration_seconds
from ...core.documents.yaml_reader import DocumentError
from ...core.pools.reading import load_texts
from ...core.time.budget_notices import BudgetRules
from ...core.time.idle import IdlePolicy
from ...core.time.notices import REPORT, STOP


class LimitSettings(HasTraits):
    """What stops running servers: idle GPUs and spent budgets."""

    idle_policy = Dict(
        default_value={},
        help="""The idle-GPU policy of pools whose file has no ``idle`` section; empty: none.

        The keys of a pool file's ``idle`` (docs/pools.md): ``below_percent`` (5),
        ``after`` (``2h``), ``warn`` (``15m``), ``action`` (``stop`` or ``report``) and
        ``exempt: {users: [...], groups: [...]}``. It needs a GPU utilization source
        (``utilization_source``): a server without a fresh measurement is never idle.

        Example::

            c.GPUPoolService.idle_policy = {"below_percent": 5, "after": "4h", "action": "report"}
        """,
    ).tag(config=True)

    @validate("idle_policy")
    def _valid_idle_policy(self, proposal: Any) -> dict[str, Any]:
        value = proposal["value"]
        if value:
            idle_policy_of(value)  # TraitError with every problem
        return dict(value)

    budget_warn_percent = Float(
        90.0,
        help="""The share of a GPU-hour budget spent (%) at which its running servers are warned.

        A budget (``budgets:`` in a quota document) may set its own (``warn_percent``). The
        servers with GPUs a budget pays for (the user's own servers, or the servers charged to
        the group) carry a notice from then on, with the time it runs out at the rate of what
        runs; and again once it is spent. The notice is shown on My GPUs, by
        ``%gpupool status`` and in the JupyterLab status item.

        Example::

            c.GPUPoolService.budget_warn_percent = 80
        """,
    ).tag(config=True)

    @validate("budget_warn_percent")
    def _valid_warn_percent(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if not 0 <= value <= 100:
            raise TraitError(f"budget_warn_percent is a share in %, 0 to 100, not {value:g}")
        return value

    budget_grace = Unicode(
        "15m",
        help="""How long after the warning that a budget is spent its servers are stopped.

        Only budgets with ``on_exhausted: stop`` (or every budget under the deprecated
        ``stop_over_budget``) stop servers: each server with GPUs the spent budget pays for is
        stopped through JupyterHub this long after it was first warned that the budget is
        spent, and the ledger records it as ended "over budget". The warning times are kept in
        memory: after a restart the servers are warned again and the grace starts again. A
        whole number of s, m, h or d.

        Example::

            c.GPUPoolService.budget_grace = "30m"
        """,
    ).tag(config=True)

    @validate("budget_grace")
    def _valid_budget_grace(self, proposal: Any) -> str:
        try:
            duration_seconds(proposal["value"])
        except ValueError as e:
            raise TraitError(f"budget_grace: {e}") from None
        return str(proposal["value"]).strip()

    stop_over_budget = Bool(
        False,
        help="""Deprecated: write ``on_exhausted: stop`` on the budgets whose servers should stop.

        Set, it means ``on_exhausted: stop`` for every budget that does not say
        (``on_exhausted: report`` on a budget still wins). Its servers are then warned when the
        budget is spent and stopped ``budget_grace`` later, no longer at once. Unset (the
        default), budgets that do not say only warn (``on_exhausted: report``): new servers
        with GPUs are refused, running ones run on.

        Example (prefer the budget's own key)::

            c.GPUPoolService.stop_over_budget = True
        """,
    ).tag(config=True)

    def budget_rules(self) -> BudgetRules:
        """The budgets' defaults and grace from these settings."""
        return BudgetRules(
            warn_percent=float(self.budget_warn_percent),
            grace_seconds=duration_seconds(self.budget_grace),
            on_exhausted=STOP if self.stop_over_budget else REPORT,
        )


def idle_policy_of(value: Any) -> IdlePolicy:
    """``c.GPUPoolService.idle_policy`` checked as a pool file's ``idle`` is (TraitError)."""
    text = yaml.safe_dump(
        {"kind": "pool", "pool": {"name": "idle-policy-check"}, "idle": value}, sort_keys=False
    )
    try:
        registry = load_texts([(text, "c.GPUPoolService.idle_policy")])
    except DocumentError as e:
        problems = "; ".join(f"{p.path}: {p.message}" for p in e.problems)
        raise TraitError(f"idle_policy: {problems}") from None
    policy = registry.pools["idle-policy-check"].idle
    assert policy is not None
    return policy
