"""What NVIDIA's MIG manager does when a node's ``nvidia.com/mig.config`` names a config, and
what the node then says: pure, shared by the simulator's MIG manager (:mod:`.migmanager`) and the
tests' fake MIG manager for a real control plane (``tests/fake_mig_manager.py``).

:func:`plan` follows mig-parted's ``pkg/mig/reconfigure/reconfigure.go`` (``Run``; the older
``deployments/container/reconfigure-mig.sh`` does the same steps), with the simulated GPUs:

1. ``nvidia-mig-parted assert --valid-config``: a name the config file does not have ends
   ``failed`` at once, before ``pending``;
2. ``nvidia-mig-parted assert``: a config already applied (every GPU matched by a rule and cut
   as it says) ends ``success`` at once;
3. otherwise ``pending``; when a GPU must enter or leave MIG mode, ``rebooting`` and, started
   again, ``pending`` once more (the simulated GPUs change mode only by rebooting);
4. ``nvidia-mig-parted apply``: ``success``, or ``failed`` when the layout cannot be (a profile
   the card lacks, instances that do not fit, GPUs in use: the caller checks those).

A config that no rule of applies to the node's GPUs (``gpu_layouts`` None: a ``device-filter``
for another card) is not "already applied" (mig-parted's assert wants every GPU matched), so it
goes ``pending`` and then ``success`` with nothing changed: mig-parted's apply walks no GPU. A GPU
no rule applies to is left as it is.

:func:`node_labels` and :func:`node_resources` give the node's labels and capacity/allocatable
once the device plugin and GFD have come back with the new layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ...core.documents.mig_parted import PCI_DEVICE_IDS, MigConfigs, gpu_layouts
from .partitions import MIG_PREFIX, GPUCut, MigSpec, build, card_of, is_device_resource
from .spec import NodeSpec

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
#: what the MIG manager writes itself (GFD's labels are the rest of ``nvidia.com/``)
MANAGER_LABELS = (CONFIG_LABEL, STATE_LABEL)


@dataclasses.dataclass(frozen=True)
class Plan:
    """A re-cut: the ``steps`` (states) to write one after another, then ``end`` (``success`` or
    ``failed``, ``reason`` saying why it fails). ``new``: the node's spec after a ``success`` that
    changes the layout (None: unchanged); ``touched``: the GPUs whose layout changes (the apply
    fails while pods hold devices of them)."""

    steps: tuple[str, ...]
    end: str
    new: NodeSpec | None = None
    reason: str | None = None
    touched: frozenset[int] = frozenset()


def current_cuts(spec: NodeSpec) -> tuple[GPUCut, ...]:
    """The node's GPUs as a mig-parted config would say them (None: MIG off)."""
    layout = spec.gpu.layout()
    if layout is None:
        return (None,) * spec.gpu.count
    return layout.gpu_cuts()


def _normal(cut: GPUCut) -> GPUCut:
    """A config's cut in :meth:`Layout.gpu_cuts`'s spelling (``+`` as ``.``, sorted)."""
    if cut is None:
        return None
    counts: dict[str, int] = {}
    for name, n in cut:
        key = name.replace("+", ".")
        counts[key] = counts.get(key, 0) + n
    return tuple(sorted((k, n) for k, n in counts.items() if n))


def plan(spec: NodeSpec, config: str, configs: MigConfigs) -> Plan:
    """What the MIG manager does for ``config`` on the node of ``spec`` (see the module's words)."""
    name = spec.name
    rules = configs.get(config)
    if rules is None:
        return Plan((), "failed", reason=f"node {name}: no MIG config {config!r} in the file")
    now = current_cuts(spec)
    asked = gpu_layouts(rules, spec.gpu.count, spec.gpu.product)
    if asked is None:
        return Plan(("pending",), "success")  # no rule for these GPUs: apply walks none
    pci_id = PCI_DEVICE_IDS.get(spec.gpu.product or "")
    matched = [any(r.applies(g, pci_id) for r in rules) for g in range(spec.gpu.count)]
    want = tuple(_normal(a) if matched[g] else now[g] for g, a in enumerate(asked))
    if want == now and all(matched):
        return Plan((), "success")  # already applied
    touched = frozenset(g for g in range(spec.gpu.count) if want[g] != now[g])
    mode_now = {g for g, c in enumerate(now) if c is not None}
    mode_new = {g for g, c in enumerate(want) if c is not None}
    steps = ("pending", "rebooting", "pending") if mode_now != mode_new else ("pending",)
    new, why = _spec_for(spec, want)
    if new is None:
        return Plan(steps, "failed", reason=f"node {name}: {config}: {why}", touched=touched)
    return Plan(steps, "success", new=new, touched=touched)


def _spec_for(spec: NodeSpec, cuts: tuple[GPUCut, ...]) -> tuple[NodeSpec | None, str]:
    """The node's spec with its GPUs cut so, or None and why the simulator cannot."""
    gpu = spec.gpu
    if all(c is None for c in cuts):
        if gpu.mig is None:
            return spec, ""
        return dataclasses.replace(spec, gpu=dataclasses.replace(gpu, mig=None)), ""
    if gpu.sharing is not None or gpu.hami_split is not None:
        return None, "the simulator does not put shared (time-sliced, MPS) or HAMi GPUs in MIG mode"
    if card_of(gpu.product) is None:
        return None, f"{gpu.product or 'this GPU'} is not a MIG-capable card the simulator knows"
    strategy = gpu.mig.strategy if gpu.mig is not None else "mixed"
    mig = MigSpec(strategy, gpus=cuts)
    built = build(gpu.count, gpu.product, gpu.memory_mib, mig)
    if isinstance(built, str):
        return None, built
    return dataclasses.replace(spec, gpu=dataclasses.replace(gpu, mig=mig)), ""


def gfd_labels(spec: NodeSpec) -> dict[str, str]:
    """The ``nvidia.com/`` labels GPU Feature Discovery writes for the spec's GPUs (not the MIG
    manager's own, nor labels the cluster file sets itself)."""
    return {
        k: v
        for k, v in spec.all_labels().items()
        if k.startswith("nvidia.com/") and k not in MANAGER_LABELS and k not in spec.labels
    }


def node_labels(labels: Mapping[str, str], old: NodeSpec, new: NodeSpec) -> dict[str, str]:
    """The node's labels once GFD has labelled the new layout (the others kept)."""
    before = gfd_labels(old)
    out = {k: v for k, v in labels.items() if k not in before}
    out.update(gfd_labels(new))
    return out


def node_resources(resources: Mapping[str, str], new: NodeSpec) -> dict[str, str]:
    """A node's capacity or allocatable once the device plugin advertises the new layout: its
    resources, and those it advertised before and no longer has at ``0`` (the kubelet keeps a
    device plugin's resource it saw once at 0: ``pkg/kubelet/nodestatus/setters.go``)."""
    out = {k: ("0" if is_device_resource(k) else v) for k, v in resources.items()}
    out.update((k, v) for k, v in new.capacity().items() if is_device_resource(k))
    return out


__all__ = [
    "CONFIG_LABEL",
    "MIG_PREFIX",
    "STATE_LABEL",
    "Plan",
    "current_cuts",
    "gfd_labels",
    "node_labels",
    "node_resources",
    "plan",
]
