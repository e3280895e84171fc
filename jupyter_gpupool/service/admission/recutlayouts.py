"""The layouts bookings may plan (rules: :mod:`jupyter_gpupool.core.admission.booking_layout`),
gathered from the usage index: per pool whose file has ``recut``, the nodes it names as GFD and
the MIG manager describe them, and what each offers now. The booking desk fits bookings with
them; the re-cut watch re-cuts the nodes they choose before a window."""

from __future__ import annotations

from collections.abc import Callable

from ...core.admission.booking_layout import PoolLayout, pool_layout
from ...core.admission.recut import NodeCut
from ...core.documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ...core.pools.recut_policy import CONFIG_LABEL, RecutPolicy
from ...core.usage.index import UsageIndex
from ...core.usage.labels import GFD_COUNT_LABEL, GFD_PRODUCT_LABEL
from ...core.usage.shapes import MIG_CONFIG_STATE_LABEL
from ..state import ServiceState


def plain_cut(index: UsageIndex, name: str) -> NodeCut | None:
    """A node as the layout reads it (its card and config; nothing of what runs there)."""
    if index.node_gpu_type(name) is None:
        return None
    labels = index.node_labels(name)
    count = labels.get(GFD_COUNT_LABEL) or ""
    return NodeCut(
        name,
        labels.get(GFD_PRODUCT_LABEL),
        int(count) if count.isdigit() else index.node_gpus(name),
        labels.get(CONFIG_LABEL),
        labels.get(MIG_CONFIG_STATE_LABEL),
        0,
    )


def layout_of(
    state: ServiceState,
    pool: str,
    policy: RecutPolicy,
    configs: MigConfigs = DEFAULT_CONFIGS,
    cut: Callable[[str], NodeCut | None] | None = None,
    free: Callable[[NodeCut], bool] = lambda n: True,
) -> PoolLayout:
    index = state.index
    reading = cut if cut is not None else (lambda name: plain_cut(index, name))
    nodes = [n for name in policy.nodes if (n := reading(name)) is not None]
    return pool_layout(pool, policy, configs, nodes, index.node_offer_units, free)


def pool_layouts(state: ServiceState, configs: MigConfigs | None = None) -> dict[str, PoolLayout]:
    """Every pool whose file has ``recut``, with its nodes' layouts (``configs``: the state's
    mig-parted configs unless given)."""
    return {
        p.name: layout_of(state, p.name, p.recut, configs or state.mig_configs)
        for p in state.registry.pools.values()
        if p.recut is not None
    }
