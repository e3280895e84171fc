"""What stops running servers: the settings of the idle policy and of budgets.

The idle-GPU policy of pools whose file has none, checked as a pool file's ``idle`` is, and
whether servers are stopped when their GPU-hour budget is spent.
"""

from __future__ import annotations

from typing import Any

import yaml
from traitlets import Bool, Dict, HasTraits, TraitError, validate

from ...core.idle import IdlePolicy
from ...core.poolfile import load_texts
from ...core.yamldoc import DocumentError


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

    stop_over_budget = Bool(
        False,
        help="""Stop running servers whose GPU-hour budget is spent.

        Budgets (``budgets:`` in a quota document) always keep new servers with GPUs from
        starting once spent; running servers are left alone unless this is set. Then, every
        ``history_interval``, the servers with GPUs that a spent budget pays for (the user's
        servers, or the servers charged to the group, in the budget's pools) are stopped
        through JupyterHub, and the ledger records them as ended "over budget". Budgets need
        the database (``db_url``).

        Example::

            c.GPUPoolService.stop_over_budget = True
        """,
    ).tag(config=True)


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
