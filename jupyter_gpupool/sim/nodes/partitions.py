"""How a simulated node's GPUs are cut: MIG instances, shared replicas, HAMi slices.

A cluster file's ``gpu`` mapping may say how the node's GPUs are partitioned (``mig``,
``sharing`` or ``hami``, see docs/sim.md); :class:`Layout` is the result: which physical GPU
each device the device plugin advertises belongs to (:attr:`Layout.units`), the extended
resources it advertises (:meth:`Layout.resources`) and the labels GPU Feature Discovery (or
HAMi's chart) puts on the node (:meth:`Layout.labels`), as docs/shapes.md lists them, so that
``core.usage.shapes.node_offer`` reads back the configured shapes.

MIG layouts are checked against the card's profiles (go-nvml's tables for A100 40 GB and
80 GB and A30, as in docs/shapes.md). Placement is simplified: a GPU holds instances while
their compute slices and memory slices each add up to at most the card's (7 and 8 on an A100,
4 and 4 on an A30); NVML's placement rules (which slice offsets an instance may start at) are
not modelled.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
MIG_STRATEGIES = ("single", "mixed")
SHARING_STRATEGIES = ("time-slicing", "mps")
_GPU_UUIDS = uuid.UUID("5d0c3a4e-7a0b-4c55-9a43-2f6a0d1e8b17")  # a fixed namespace for uuid5
_MIG_UUIDS = uuid.UUID("2b8f4c61-0d7e-4a1c-b5e3-9c0a6f1d7e42")  # a fixed namespace for uuid5


@dataclass(frozen=True)
class Profile:
    name: str
    compute: int  # compute slices
    memory_slices: int
    memory_mib: int  # NVML's figure (go-nvml's tables)


@dataclass(frozen=True)
class Card:
    name: str
    compute: int
    memory_slices: int
    profiles: tuple[Profile, ...]

    def profile(self, name: str) -> Profile | None:
        return next((p for p in self.profiles if p.name == name), None)


CARDS = (
    Card(
        "A100 80GB",
        7,
        8,
        (
            Profile("1g.10gb", 1, 1, 9856),
            Profile("2g.20gb", 2, 2, 19968),
            Profile("3g.40gb", 3, 4, 40192),
            Profile("4g.40gb", 4, 4, 40192),
            Profile("7g.80gb", 7, 8, 80384),
        ),
    ),
    Card(
        "A100 40GB",
        7,
        8,
        (
            Profile("1g.5gb", 1, 1, 4864),
            Profile("2g.10gb", 2, 2, 9856),
            Profile("3g.20gb", 3, 4, 19968),
            Profile("4g.20gb", 4, 4, 19968),
            Profile("7g.40gb", 7, 8, 40192),
        ),
    ),
    Card(
        "A30",
        4,
        4,
        (
            Profile("1g.6gb", 1, 1, 5836),
            Profile("2g.12gb", 2, 2, 11672),
            Profile("4g.24gb", 4, 4, 23344),
        ),
    ),
)


def card_of(product: str | None) -> Card | None:
    """The MIG-capable card a GFD product name stands for (None: not one the simulator knows)."""
    p = (product or "").upper()
    if "A100" in p:
        return CARDS[0] if "80GB" in p else CARDS[1] if "40GB" in p else None
    if "A30" in p.replace("-", " ").split():
        return CARDS[2]
    return None


#: one GPU cut by a mig-parted config: None for a whole GPU (MIG off), else (profile, count)
#: pairs (MIG on; none: MIG on without instances), as ``core.documents.mig_parted`` gives them
GPUCut = tuple[tuple[str, int], ...] | None


@dataclass(frozen=True)
class MigSpec:
    strategy: str  # single | mixed
    profile: str | None = None  # single: every GPU cut into as many of it as fit
    devices: tuple[tuple[str, int], ...] = ()  # mixed: how many of each, over the node
    #: GPU by GPU, as a mig-parted config cuts them (the MIG manager's re-cuts); when given,
    #: ``profile`` and ``devices`` are not read
    gpus: tuple[GPUCut, ...] | None = None


@dataclass(frozen=True)
class SharingSpec:
    strategy: str  # time-slicing | mps
    replicas: int
    rename: bool = False


@dataclass(frozen=True)
class Unit:
    """One device the device plugin advertises: a whole GPU, a MIG instance (``profile`` and
    its GPU instance id ``gi``), or a replica of a shared GPU (``replica``)."""

    resource: str
    gpu: int
    profile: str | None = None
    gi: int | None = None
    replica: int | None = None
    memory_mib: int | None = None


@dataclass
class Layout:
    """A node's partitioned GPUs."""

    kind: str  # mig-single | mig-mixed | time-slicing | mps | hami
    gpus: int
    units: list[Unit] = field(default_factory=list)
    card: Card | None = None
    replicas: int = 1
    rename: bool = False
    #: GPUs in MIG mode that hold no instance (a mig-parted config may enable MIG without any)
    empty_mig: frozenset[int] = frozenset()

    def resources(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for u in self.units:
            out[u.resource] = out.get(u.resource, 0) + 1
        return out

    def mig_gpus(self) -> set[int]:
        """The GPUs in MIG mode."""
        return {u.gpu for u in self.units if u.profile is not None} | set(self.empty_mig)

    def gpu_cuts(self) -> tuple[GPUCut, ...]:
        """Each GPU as a mig-parted config would say it: None (whole, or shared: MIG off), else
        its instances' (profile, count) pairs in profile order."""
        per: list[dict[str, int] | None] = [None] * self.gpus
        for g in self.mig_gpus():
            per[g] = {}
        for u in self.units:
            cut = per[u.gpu]
            if u.profile is not None and cut is not None:
                cut[u.profile] = cut.get(u.profile, 0) + 1
        return tuple(None if c is None else tuple(sorted(c.items())) for c in per)

    def labels(self, product: str | None, memory_mib: int | None) -> dict[str, str]:
        """GFD's labels for this layout (besides ``nvidia.com/gpu.product``, ``.count`` and
        ``.memory``, which it overrides where GFD does)."""
        out: dict[str, str] = {}
        if self.kind in ("mig-single", "mig-mixed"):
            out["nvidia.com/mig.capable"] = "true"
            out["nvidia.com/mig.strategy"] = self.kind[len("mig-") :]
            out["nvidia.com/mig.config.state"] = "success"
        if self.kind == "mig-single":
            u = self.units[0] if self.units else None
            if u is not None and u.profile and self.card is not None:
                prof = self.card.profile(u.profile)
                out["nvidia.com/gpu.count"] = str(len(self.units))
                out["nvidia.com/gpu.memory"] = str(u.memory_mib)
                if product:
                    out["nvidia.com/gpu.product"] = f"{product}-MIG-{u.profile}"
                if prof is not None:
                    out["nvidia.com/gpu.slices.gi"] = str(prof.compute)
                    out["nvidia.com/gpu.slices.ci"] = str(prof.compute)
        elif self.kind == "mig-mixed":
            for resource, count in sorted(self.resources().items()):
                if not resource.startswith(MIG_PREFIX):
                    continue
                name = resource[len("nvidia.com/") :]
                profile = name[len("mig-") :]
                prof = self.card.profile(profile) if self.card else None
                out[f"nvidia.com/{name}.count"] = str(count)
                out[f"nvidia.com/{name}.replicas"] = "1"
                out[f"nvidia.com/{name}.sharing-strategy"] = "none"
                if product:
                    out[f"nvidia.com/{name}.product"] = f"{product}-MIG-{profile}"
                if prof is not None:
                    out[f"nvidia.com/{name}.memory"] = str(prof.memory_mib)
                    out[f"nvidia.com/{name}.slices.gi"] = str(prof.compute)
                    out[f"nvidia.com/{name}.slices.ci"] = str(prof.compute)
        elif self.kind in SHARING_STRATEGIES:
            out["nvidia.com/gpu.replicas"] = str(self.replicas)
            out["nvidia.com/gpu.sharing-strategy"] = self.kind
            if product and not self.rename:
                out["nvidia.com/gpu.product"] = f"{product}-SHARED"
            if self.kind == "mps":
                out["nvidia.com/mps.capable"] = "true"
        elif self.kind == "hami":
            out["gpu"] = "on"  # the label HAMi's chart runs its device plugin on
        return out

    def uuid(self, node: str, unit: Unit) -> str:
        """The device id a container gets in ``NVIDIA_VISIBLE_DEVICES``: a MIG device's own
        UUID (``MIG-…``), else its GPU's (several replicas, one GPU)."""
        if unit.profile is not None:
            return f"MIG-{uuid.uuid5(_MIG_UUIDS, f'{node}/{unit.gpu}/{unit.gi}')}"
        return gpu_uuid(node, unit.gpu)


def gpu_uuid(node: str, index: int) -> str:
    """The UUID of GPU ``index`` of ``node``, as NVML names GPUs (``GPU-`` + a UUID): stable for a
    node name and index, so the same GPU keeps its UUID across restarts of the simulator."""
    return f"GPU-{uuid.uuid5(_GPU_UUIDS, f'{node}/{index}')}"


def per_gpu(card: Card, prof: Profile) -> int:
    """How many instances of ``prof`` one GPU holds."""
    return min(card.compute // prof.compute, card.memory_slices // prof.memory_slices)


def pack(card: Card, devices: Mapping[str, int], gpus: int) -> list[list[Profile]] | str:
    """The mixed layout's instances on the fewest GPUs (largest first, each on the first GPU it
    fits on), or why it does not fit."""
    wanted: list[Profile] = []
    for name, n in devices.items():
        prof = card.profile(name)
        if prof is None:
            return unknown_profile(card, name)
        wanted += [prof] * n
    wanted.sort(key=lambda p: (-p.compute, -p.memory_slices))
    placed: list[list[Profile]] = []
    for prof in wanted:
        for gpu in placed:
            if (
                sum(p.compute for p in gpu) + prof.compute <= card.compute
                and sum(p.memory_slices for p in gpu) + prof.memory_slices <= card.memory_slices
            ):
                gpu.append(prof)
                break
        else:
            placed.append([prof])
    if len(placed) > gpus:
        total = ", ".join(f"{n} x {name}" for name, n in devices.items())
        return (
            f"{total} need {len(placed)} GPUs of {card.name} ({card.compute} compute and "
            f"{card.memory_slices} memory slices each), but the node has {gpus}"
        )
    return placed


def unknown_profile(card: Card, name: str) -> str:
    known = ", ".join(p.name for p in card.profiles)
    return f"{name!r} is not a MIG profile of the {card.name} ({known})"


def build(
    gpus: int,
    product: str | None,
    memory_mib: int | None,
    mig: MigSpec | None = None,
    sharing: SharingSpec | None = None,
    hami_split: int | None = None,
) -> Layout | str | None:
    """The layout of ``gpus`` GPUs cut as said (None when they are not cut), or why it can't be."""
    if mig is not None:
        card = card_of(product)
        if card is None:
            return (
                f"MIG needs gpu.product to name a card the simulator knows "
                f"({', '.join(c.name for c in CARDS)}), not {product!r}"
            )
        if mig.gpus is not None:
            return _build_cuts(card, mig, gpus, memory_mib)
        units: list[Unit] = []
        if mig.strategy == "single":
            prof = card.profile(mig.profile or "")
            if prof is None:
                return unknown_profile(card, mig.profile or "")
            for g in range(gpus):
                for k in range(per_gpu(card, prof)):
                    units.append(Unit(GPU_RESOURCE, g, prof.name, k + 1, None, prof.memory_mib))
            return Layout("mig-single", gpus, units, card)
        placed = pack(card, dict(mig.devices), gpus)
        if isinstance(placed, str):
            return placed
        for g in range(gpus):
            if g < len(placed):
                for k, prof in enumerate(placed[g]):
                    res = MIG_PREFIX + prof.name
                    units.append(Unit(res, g, prof.name, k + 1, None, prof.memory_mib))
            else:
                units.append(Unit(GPU_RESOURCE, g, memory_mib=memory_mib))
        return Layout("mig-mixed", gpus, units, card)
    if sharing is not None:
        res = SHARED_RESOURCE if sharing.rename else GPU_RESOURCE
        units = [
            Unit(res, g, replica=r, memory_mib=memory_mib)
            for g in range(gpus)
            for r in range(sharing.replicas)
        ]
        return Layout(sharing.strategy, gpus, units, None, sharing.replicas, sharing.rename)
    if hami_split is not None:
        units = [
            Unit(GPU_RESOURCE, g, replica=r, memory_mib=memory_mib)
            for g in range(gpus)
            for r in range(hami_split)
        ]
        return Layout("hami", gpus, units, None, hami_split)
    return None


def _build_cuts(card: Card, mig: MigSpec, gpus: int, memory_mib: int | None) -> Layout | str:
    """The layout of GPUs cut one by one (``mig.gpus``), or why it can't be: a profile the card
    does not have, instances that do not fit one GPU, or (single strategy) GPUs not cut alike."""
    cuts = mig.gpus or ()
    if len(cuts) != gpus:
        return f"{len(cuts)} GPU layouts for {gpus} GPUs"
    units: list[Unit] = []
    empty: set[int] = set()
    for g, cut in enumerate(cuts):
        if cut is None:
            units.append(Unit(GPU_RESOURCE, g, memory_mib=memory_mib))
            continue
        profs: list[Profile] = []
        for name, n in cut:
            prof = card.profile(name.replace("+", "."))
            if prof is None:
                return f"GPU {g}: {unknown_profile(card, name)}"
            profs += [prof] * n
        compute = sum(p.compute for p in profs)
        memory = sum(p.memory_slices for p in profs)
        if compute > card.compute or memory > card.memory_slices:
            words = ", ".join(f"{n} x {name}" for name, n in cut)
            return (
                f"GPU {g}: {words} take {compute} compute and {memory} memory slices, more than "
                f"the {card.name}'s {card.compute} and {card.memory_slices}"
            )
        if not profs:
            empty.add(g)
        profs.sort(key=lambda p: (-p.compute, -p.memory_slices))
        for k, prof in enumerate(profs):
            res = GPU_RESOURCE if mig.strategy == "single" else MIG_PREFIX + prof.name
            units.append(Unit(res, g, prof.name, k + 1, None, prof.memory_mib))
    if mig.strategy == "single":
        # GFD names a node whose GPUs are not cut alike <product>-MIG-INVALID; the simulator
        # makes no such node
        if len(set(cuts)) != 1 or None in cuts or len({u.profile for u in units}) != 1:
            return "the single strategy needs every GPU cut alike into one profile"
        return Layout("mig-single", gpus, units, card, empty_mig=frozenset(empty))
    return Layout("mig-mixed", gpus, units, card, empty_mig=frozenset(empty))


def is_device_resource(name: str) -> bool:
    """A resource the NVIDIA device plugin hands out devices for."""
    return name in (GPU_RESOURCE, SHARED_RESOURCE) or name.startswith(MIG_PREFIX)
