"""What one node offers: its shapes (whole GPUs, MIG instances, shared GPUs, HAMi slices).

A node says what it offers in two places, written by NVIDIA's device plugin and GPU Feature
Discovery (GFD), NVIDIA's MIG manager and HAMi: the extended resources in
``status.allocatable`` (what a pod can request, and how many) and the node's labels (what each
one is). :func:`node_offer` reads both and returns the node's :class:`Offer`: each
:class:`Shape` with its count, and why the node admits nothing new while its GPUs are being
re-partitioned. ``docs/shapes.md`` is the reference: every label and resource name read here,
with the file of the NVIDIA or HAMi source it was confirmed in.

- Whole GPUs: ``nvidia.com/gpu``. A node without any of the labels below is read exactly as
  :func:`~.records.read_node` reads it today (same count, same GPU type).
- MIG, mixed strategy: one ``nvidia.com/mig-<profile>`` resource per profile present; GFD's
  ``nvidia.com/mig-<profile>.product|memory|replicas`` labels. The profile is NVML's, with
  ``+`` written ``.`` (``1g.10gb+me`` is ``nvidia.com/mig-1g.10gb.me``).
- MIG, single strategy: ``nvidia.com/gpu`` counts MIG devices; ``nvidia.com/mig.strategy=single``
  and ``nvidia.com/gpu.product=<model>-MIG-<profile>``.
- Shared GPUs: ``nvidia.com/gpu`` (``nvidia.com/gpu.shared`` when renamed) counts GPUs x
  replicas; ``nvidia.com/gpu.replicas`` and ``nvidia.com/gpu.sharing-strategy``
  (``time-slicing`` | ``mps``; older GFDs wrote no strategy, and only time-slicing existed).
- HAMi: ``nvidia.com/gpu`` counts GPUs x split count on nodes labelled ``gpu=on``; a server
  asks for its memory with ``nvidia.com/gpumem`` (MiB), which is not a node resource.

Counts are GPU-equivalents where quotas need them (:attr:`Shape.equivalent`): a MIG instance
is its compute slices over the GPU's (7 on A100/H100, 4 on A30), a shared replica
1/replicas, a HAMi slice its share of the GPU's memory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from ..documents.mig_parted import DEFAULT_CONFIGS, MigConfigs, units
from ..kube.quantities import quantity_int
from .labels import (
    GFD_COUNT_LABEL,
    GFD_MEMORY_LABEL,
    GFD_PRODUCT_LABEL,
    GPU_RESOURCE,
    GPU_TYPE_LABEL,
    NODE_RECUT_FOR,
)

# --- names ---------------------------------------------------------------------------------------

WHOLE = "whole"
MIG = "mig"
TIME_SLICING = "shared-time-slicing"
MPS = "shared-mps"
HAMI = "hami"
KINDS = (WHOLE, MIG, TIME_SLICING, MPS, HAMI)

#: The device plugin's default name for a shared resource (``renameByDefault``).
SHARED_RESOURCE = GPU_RESOURCE + ".shared"
#: MIG devices under the mixed strategy: ``nvidia.com/mig-<profile>``.
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
#: HAMi's per-server memory (MiB) and compute (percent) requests; pod resources, not node ones.
HAMI_MEMORY_RESOURCE = "nvidia.com/gpumem"
HAMI_CORES_RESOURCE = "nvidia.com/gpucores"

MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
#: HAMi's chart runs its device plugin on nodes with this label (``devicePlugin.nvidiaNodeSelector``).
HAMI_NODE_LABEL = ("gpu", "on")
#: HAMi's ``devicePlugin.deviceSplitCount`` default, used when the node does not say its GPU count.
HAMI_DEFAULT_SPLIT = 10

#: ``nvidia.com/mig.config.state`` values during which the node admits nothing new, in words.
REPARTITIONING = {
    "pending": "MIG re-partition pending",
    "rebooting": "rebooting to change MIG mode",
    "failed": "MIG re-partition failed",
}

#: A node the service re-cut, while the MIG manager says ``success`` and the device plugin
#: still advertises the old layout (it restarts after the MIG manager is done)
SETTLING = "MIG re-cut applied, waiting for the device plugin to advertise it"

#: What each kind isolates, in words a user reads on the spawn form.
ISOLATION = {
    WHOLE: "everything: the whole GPU is the server's",
    MIG: "memory and faults: its own memory and compute, and a crash stays inside it",
    MPS: "a share of memory and compute, limited by the MPS daemon",
    HAMI: "a memory cap, enforced in user space by HAMi's CUDA library",
    TIME_SLICING: "nothing: every server sees all the GPU's memory, and one crash ends them all",
}

#: Compute slices of a whole GPU in MIG mode. A100, H100, H200, B200 have 7; these have 4
#: (their largest profile is 4g: A30's ``4g.24gb``, the RTX PRO 6000 Blackwell's ``4g.96gb``).
_FOUR_SLICE_MODELS = ("A30", "RTX-PRO-6000", "RTX PRO 6000")
_DEFAULT_SLICES = 7

# NVML's profile names (go-nvlib's MigProfileInfo.String): [<c>c.]<g>g.<gb>gb[+attr,...],
# with "+" written "." in resource and label names.
_PROFILE = re.compile(
    r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<attrs>(?:[.+][A-Za-z]\w*)*)$"
)


# --- the records -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """One kind of GPU a server can ask a node for.

    ``resource`` is the extended resource a pod requests (one per server); ``memory_mib`` is the
    memory the server can count on (None where it is not known, and for time-slicing, where
    nothing is its own); ``equivalent`` is what one counts against quotas, in whole GPUs.
    ``id`` is short and stable (``whole``, ``mig-3g.40gb``, ``shared-4``, ``mps-4``,
    ``hami-10``), fit for ``user_options``; the same id on two nodes is the same thing for a
    user, though the resource requested for it may differ (MIG single and mixed strategies).
    """

    kind: str
    resource: str
    model: str | None
    memory_mib: int | None
    equivalent: Fraction
    isolates: str
    id: str
    profile: str | None = None
    replicas: int = 1


@dataclass(frozen=True)
class Offered:
    """A shape and how many of it the node has (its allocatable count)."""

    shape: Shape
    count: int

    @property
    def equivalents(self) -> Fraction:
        """The node's capacity of this shape in GPU-equivalents."""
        return self.shape.equivalent * self.count


@dataclass(frozen=True)
class Offer:
    """What a node offers. ``repartitioning`` (words) or ``problem`` (words) means it admits
    nothing new, as a cordoned node, though its shapes are still listed for what runs there."""

    shapes: tuple[Offered, ...] = ()
    repartitioning: str | None = None
    problem: str | None = None

    @property
    def admits(self) -> bool:
        return self.repartitioning is None and self.problem is None

    def count(self, shape_id: str) -> int:
        """How many of the shape with this id the node has (0 when none)."""
        return sum(o.count for o in self.shapes if o.shape.id == shape_id)


#: A node that offers nothing (no GPU of any kind) and has nothing wrong.
NO_OFFER = Offer()


# --- reading a node --------------------------------------------------------------------------------


def node_offer(labels: Mapping[str, str], allocatable: Mapping[str, str]) -> Offer:
    """The shapes one node offers, from its labels and ``status.allocatable`` (as the API gives)."""
    shapes: list[Offered] = []
    problem = None
    if labels.get(HAMI_NODE_LABEL[0]) == HAMI_NODE_LABEL[1]:
        shapes.extend(_hami(labels, allocatable))
    else:
        full, problem = _full_gpus(labels, allocatable)
        shapes.extend(full)
        shapes.extend(_mig_mixed(labels, allocatable))
    state = labels.get(MIG_CONFIG_STATE_LABEL)
    repartitioning = REPARTITIONING.get(state or "")
    if repartitioning is None and state == "success" and labels.get(NODE_RECUT_FOR):
        # the MIG manager is done before the device plugin advertises the new instances: a
        # node the service re-cut takes nothing until its allocatable is what its config makes
        want = config_units(labels)
        have = {o.shape.id: o.count for o in shapes if o.count}
        if want is not None and have != want:
            repartitioning = SETTLING
    return Offer(tuple(shapes), repartitioning, problem)


def config_units(
    labels: Mapping[str, str], configs: MigConfigs = DEFAULT_CONFIGS
) -> dict[str, int] | None:
    """What the node offers once its ``nvidia.com/mig.config`` is applied, by shape id
    (``{"mig-1g.10gb": 56}``), from GFD's product and GPU count; None when the config is not
    known or not for its card."""
    rules = configs.get(labels.get(MIG_CONFIG_LABEL) or "")
    count = _int(labels.get(GFD_COUNT_LABEL))
    got = units(rules, count, labels.get(GFD_PRODUCT_LABEL)) if rules and count else None
    if got is None:
        return None
    return {(k if k == WHOLE else f"{MIG}-{k}"): n for k, n in got.items() if n}


def cut_units(
    labels: Mapping[str, str], config: str, configs: MigConfigs = DEFAULT_CONFIGS
) -> dict[str, int] | None:
    """What the node would offer cut as ``config`` (:func:`config_units` of that config)."""
    return config_units({**labels, MIG_CONFIG_LABEL: config}, configs)


def cut_shape(shape_id: str, labels: Mapping[str, str]) -> Shape | None:
    """The MIG shape ``shape_id`` (``mig-1g.10gb``) as the node would offer it once re-cut
    (mixed strategy, as the MIG manager leaves it): its model as the node's whole GPUs are
    shown, its memory not known until GFD writes it; None when it is not a MIG shape id."""
    if not shape_id.startswith(f"{MIG}-"):
        return None
    profile = shape_id.removeprefix(f"{MIG}-")
    card = labels.get(GFD_PRODUCT_LABEL) or gpu_model(labels)
    model = labels.get(GPU_TYPE_LABEL) or card
    return _mig_shape(MIG_RESOURCE_PREFIX + profile, profile, model, None, 1, card=card)


def gpu_model(labels: Mapping[str, str]) -> str | None:
    """The GPU type as the usage index reads it: gpuctl's label, else GFD's product."""
    return labels.get(GPU_TYPE_LABEL) or labels.get(GFD_PRODUCT_LABEL) or None


def _full_gpus(
    labels: Mapping[str, str], allocatable: Mapping[str, str]
) -> tuple[list[Offered], str | None]:
    """What ``nvidia.com/gpu`` (or its shared rename) stands for on this node."""
    product = labels.get(GFD_PRODUCT_LABEL) or ""
    if labels.get(MIG_STRATEGY_LABEL) == "single" and "-MIG-" in product:
        return _mig_single(labels, allocatable, product)
    replicas = _int(labels.get(REPLICAS_LABEL)) or 1
    strategy = labels.get(SHARING_STRATEGY_LABEL) or ""
    renamed = quantity_int(allocatable.get(SHARED_RESOURCE, 0))
    if replicas > 1 or renamed:
        resource = SHARED_RESOURCE if renamed else GPU_RESOURCE
        count = quantity_int(allocatable.get(resource, 0))
        if not count:
            return [], None
        model = _strip_suffix(labels.get(GPU_TYPE_LABEL) or product, "-SHARED") or None
        memory = _int(labels.get(GFD_MEMORY_LABEL))
        replicas = max(replicas, 1)
        if strategy == "mps":
            shape = Shape(
                kind=MPS,
                resource=resource,
                model=model,
                memory_mib=memory // replicas if memory else None,
                equivalent=Fraction(1, replicas),
                isolates=ISOLATION[MPS],
                id=f"mps-{replicas}",
                replicas=replicas,
            )
        else:
            # "time-slicing", or no strategy label: GFDs before MPS support wrote none.
            shape = Shape(
                kind=TIME_SLICING,
                resource=resource,
                model=model,
                memory_mib=None,
                equivalent=Fraction(1, replicas),
                isolates=ISOLATION[TIME_SLICING],
                id=f"shared-{replicas}",
                replicas=replicas,
            )
        return [Offered(shape, count)], None
    count = quantity_int(allocatable.get(GPU_RESOURCE, 0))
    if not count:
        return [], None
    shape = Shape(
        kind=WHOLE,
        resource=GPU_RESOURCE,
        model=gpu_model(labels),
        memory_mib=_int(labels.get(GFD_MEMORY_LABEL)),
        equivalent=Fraction(1),
        isolates=ISOLATION[WHOLE],
        id=WHOLE,
    )
    return [Offered(shape, count)], None


def _mig_single(
    labels: Mapping[str, str], allocatable: Mapping[str, str], product: str
) -> tuple[list[Offered], str | None]:
    model, _, profile = product.partition("-MIG-")
    profile = _strip_suffix(profile, "-SHARED")
    if profile == "INVALID":
        # GFD's word for a single-strategy node whose GPUs are not all partitioned alike
        return [], "MIG single strategy, but the GPUs are not all partitioned alike"
    count = quantity_int(allocatable.get(GPU_RESOURCE, 0))
    replicas = _int(labels.get(REPLICAS_LABEL)) or 1
    shape = _mig_shape(
        GPU_RESOURCE,
        profile,
        labels.get(GPU_TYPE_LABEL) or model,
        _int(labels.get(GFD_MEMORY_LABEL)),
        replicas,
        card=model,
    )
    if shape is None:
        return [], f"unknown MIG profile {profile!r}"
    return ([Offered(shape, count)] if count else []), None


def _mig_mixed(labels: Mapping[str, str], allocatable: Mapping[str, str]) -> list[Offered]:
    found = []
    for resource in sorted(allocatable):
        if not resource.startswith(MIG_RESOURCE_PREFIX):
            continue
        count = quantity_int(allocatable[resource])
        name = resource[len("nvidia.com/") :]  # the labels' key: mig-<profile>
        profile = name[len("mig-") :]
        replicas = _int(labels.get(f"nvidia.com/{name}.replicas")) or 1
        if profile.endswith(".shared"):
            # renamed shared MIG devices: their labels keep the un-renamed name
            profile = profile[: -len(".shared")]
            name = "mig-" + profile
            replicas = _int(labels.get(f"nvidia.com/{name}.replicas")) or 1
        product = labels.get(f"nvidia.com/{name}.product") or ""
        card = product.partition("-MIG-")[0] if "-MIG-" in product else gpu_model(labels)
        memory = _int(labels.get(f"nvidia.com/{name}.memory"))
        # shown by gpuctl's GPU type where the node has one, as its whole GPUs are
        model = labels.get(GPU_TYPE_LABEL) or card
        shape = _mig_shape(resource, profile, model, memory, replicas, card=card)
        if shape is not None and count:
            found.append(Offered(shape, count))
    return found


def _mig_shape(
    resource: str,
    profile: str,
    model: str | None,
    memory: int | None,
    replicas: int,
    card: str | None = None,
) -> Shape | None:
    """``model`` is what the shape is shown as; ``card`` (GFD's product, by default the model)
    tells the compute slices of the whole GPU."""
    parsed = parse_profile(profile)
    if parsed is None:
        return None
    compute = parsed[0]
    # NVML's names say "+me"; resource names cannot, and the device plugin writes ".me"
    profile = profile.replace("+", ".")
    equivalent = Fraction(compute, total_slices(card or model))
    shape_id = f"mig-{profile}"
    isolates = ISOLATION[MIG]
    if replicas > 1:
        # MIG devices time-sliced by the device plugin: the instance is shared in turn
        equivalent /= replicas
        shape_id += f"-shared-{replicas}"
        isolates = "memory and faults from other instances; nothing from the servers sharing it"
        memory = None
    return Shape(
        kind=MIG,
        resource=resource,
        model=model or None,
        memory_mib=memory,
        equivalent=equivalent,
        isolates=isolates,
        id=shape_id,
        profile=profile,
        replicas=replicas,
    )


def _hami(labels: Mapping[str, str], allocatable: Mapping[str, str]) -> list[Offered]:
    count = quantity_int(allocatable.get(GPU_RESOURCE, 0))
    if not count:
        return []
    gpus = _int(labels.get(GFD_COUNT_LABEL))
    split = count // gpus if gpus and count % gpus == 0 else HAMI_DEFAULT_SPLIT
    memory = _int(labels.get(GFD_MEMORY_LABEL))
    shape = Shape(
        kind=HAMI,
        resource=GPU_RESOURCE,
        model=gpu_model(labels),
        memory_mib=memory // split if memory else None,
        equivalent=Fraction(1, split),
        isolates=ISOLATION[HAMI],
        id=f"hami-{split}",
        replicas=split,
    )
    return [Offered(shape, count)]


def hami_equivalent(gpumem_mib: int, gpu_memory_mib: int) -> Fraction:
    """A HAMi server's GPU-equivalent: the share of its GPU's memory it asked for (at most 1)."""
    if gpu_memory_mib <= 0:
        raise ValueError("the GPU's memory must be positive")
    return min(Fraction(max(gpumem_mib, 0), gpu_memory_mib), Fraction(1))


# --- profiles --------------------------------------------------------------------------------------


_SHAPE_ID = re.compile(
    r"^(?:whole|(?:shared|mps|hami)-[1-9][0-9]*"
    r"|mig-(?:[0-9]+c\.)?[0-9]+g\.[0-9]+gb(?:\.[a-z][a-z0-9]*)*(?:-shared-[1-9][0-9]*)?)$"
)


def is_shape_id(text: str) -> bool:
    """Whether ``text`` is written as a shape id is (:class:`Shape`'s ``id``)."""
    return bool(_SHAPE_ID.match(text))


def parse_profile(profile: str) -> tuple[int, int, int] | None:
    """``(compute slices, GPU-instance slices, GB)`` of a MIG profile, or None when it is not one.

    ``3g.40gb`` is 3 of each; ``1c.3g.40gb`` is one compute slice of a 3-slice instance;
    attributes (``+me`` or ``.me``) do not change the slices.
    """
    m = _PROFILE.match(profile)
    if m is None:
        return None
    g = int(m["g"])
    c = int(m["c"]) if m["c"] else g
    if not 0 < c <= g:
        return None
    return c, g, int(m["gb"])


def total_slices(model: str | None) -> int:
    """Compute slices of the whole GPU in MIG mode, by its model (7 unless known otherwise)."""
    if model and any(word in model for word in _FOUR_SLICE_MODELS):
        return 4
    return _DEFAULT_SLICES


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isdigit() else None


def _strip_suffix(text: str, suffix: str) -> str:
    return text[: -len(suffix)] if text.endswith(suffix) else text
