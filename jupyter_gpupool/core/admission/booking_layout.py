"""Bookings plan the layout: which nodes a pool may re-cut, and to which MIG configs, so that the
bookings in force at a moment and the pool's guarantees fit (issue 41).

A pool whose file has ``recut`` (:class:`..pools.recut_policy.RecutPolicy`) offers more than its
nodes offer now: each node the policy names may be cut as any of its allowed configs. A
booking of 40 ``mig-1g.10gb`` fits such a pool when some layout of those nodes offers the 40
beside everything else the moment needs (*decided*; also in ``docs/pools.md``):

- the nodes the policy names count as cut in their **home** layout, unless the bookings need
  them cut otherwise; every other node counts as it offers now;
- a layout that cuts a node away from home must leave the **whole GPUs** the whole-GPU
  bookings in force and the pool's guaranteed quotas need (a guarantee may be claimed with
  whole GPUs), so a node re-cut for a MIG booking no longer counts its whole GPUs for them,
  and a whole-GPU booking that needs them keeps the node whole;
- the rest is as :mod:`.booking_fit` checks a pool without ``recut``: each shape's units, and
  the GPU-equivalents of everything booked with the guarantees.

The layout is chosen greedily (:func:`choose_layout`): from home, the one re-cut of one node
that lowers the GPU-equivalents missing most (a node already so cut first, then one free to
change, then the policy's order), until nothing is missing or no re-cut helps. The same choice
tells the service which nodes to re-cut before a window (``service/admission/recutwatch.py``).

Pure: the desk and the watch gather :class:`PoolLayout` from the usage index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..documents.mig_parted import MigConfigs
from ..pools.recut_policy import RecutPolicy
from ..usage.amounts import Amount, amount_words
from .recut import NodeCut, Recut, free_to_change, shape_units

WHOLE = "whole"

Units = Mapping[str, int]


@dataclass(frozen=True)
class LayoutNode:
    """A node the policy names: what it offers now, cut as its home config, and as each
    allowed config (by shape id)."""

    name: str
    present: Units  # counted in the pool's rows now
    home: Units
    options: tuple[tuple[str, Units], ...]  # (config, units), the policy's order
    config: str | None = None  # its nvidia.com/mig.config now
    free: bool = True  # may be re-cut now (the watch's preference; the desk's nodes all are)


@dataclass(frozen=True)
class PoolLayout:
    """The nodes of one pool that bookings may have re-cut, and the policy's home config."""

    pool: str
    home: str
    nodes: tuple[LayoutNode, ...]

    @property
    def present(self) -> dict[str, int]:
        """What these nodes offer now, summed (to take out of the pool's rows)."""
        out: dict[str, int] = {}
        for n in self.nodes:
            for s, c in n.present.items():
                out[s] = out.get(s, 0) + c
        return out

    def offers(self, shape: str) -> bool:
        """Whether some allowed config of some node makes ``shape``."""
        return any(u.get(shape, 0) for n in self.nodes for _, u in n.options)


def pool_layout(
    pool: str,
    policy: RecutPolicy,
    configs: MigConfigs,
    nodes: Sequence[NodeCut],
    present: Callable[[str], Units],
    free: Callable[[NodeCut], bool] = lambda n: True,
) -> PoolLayout:
    """The policy's nodes as a :class:`PoolLayout`. A node whose home config does not apply to
    its card is left out (it counts as it offers now)."""
    out = []
    for n in nodes:
        home = shape_units(configs, policy.home, n)
        if home is None:
            continue
        options = tuple(
            (c, dict(got)) for c in policy.configs if (got := shape_units(configs, c, n))
        )
        out.append(LayoutNode(n.name, present(n.name), dict(home), options, n.config, free(n)))
    return PoolLayout(pool, policy.home, tuple(out))


@dataclass(frozen=True)
class Short:
    """What a layout leaves missing: ``need`` units of ``shape`` (``whole`` with the
    guarantees when they count) where it offers ``supply``; ``shape`` is "GPU-equivalents"
    when only the sum is short."""

    shape: str
    need: Amount
    supply: Amount


@dataclass(frozen=True)
class Choice:
    """A layout: the nodes cut away from home (node, config), what the pool then offers, and
    what is still missing (None: it covers the moment)."""

    cuts: tuple[tuple[str, str], ...]
    supply: Mapping[str, int]
    short: Short | None
    #: for the words: the most of ``short.shape`` re-cutting could offer, and what it then lacks
    best: tuple[tuple[tuple[str, str], ...], int, Short | None] | None = None
    #: for the words: the MIG shapes booked that the re-cut nodes make
    served: tuple[tuple[str, int], ...] = ()

    def words(self) -> str:
        """``40 of 2 mig-1g.10gb booked (38 missing); re-cutting gpu-node-2 to all-1g.10gb
        would offer 58 but leave 8 of 14 whole GPUs booked or guaranteed``."""
        s = self.short
        if s is None:
            return "it fits"
        unit = _unit(s.shape)
        text = f"{amount_words(s.need)} of {amount_words(s.supply)} {unit} booked"
        text += f" ({amount_words(s.need - s.supply)} missing)"
        if self.cuts:
            text += f", counting {_cuts_words(self.cuts, ' re-cut')}"
            served = [f"{n} {shape}" for shape, n in self.served if shape != s.shape]
            if served:
                text += f" for the {', '.join(served)} booked"
        if self.best is not None:
            cuts, most, lacks = self.best
            if cuts and lacks is not None and most >= s.need:
                text += (
                    f"; re-cutting {_cuts_words(cuts)} would offer {most} but leave "
                    f"{amount_words(lacks.supply)} of {amount_words(lacks.need)} "
                    f"{_unit(lacks.shape)} booked or guaranteed"
                )
            elif cuts:
                text += f"; re-cutting {_cuts_words(cuts)} would offer {most} at most"
        return text


def _unit(shape: str) -> str:
    return "whole GPUs" if shape == WHOLE else shape


def _cuts_words(cuts: Sequence[tuple[str, str]], verb: str = "") -> str:
    return ", ".join(f"{n}{verb} to {c}" for n, c in cuts)


class _Need:
    """What a moment needs, and how short a layout leaves it (in GPU-equivalents)."""

    def __init__(
        self, demand: Units, guaranteed: Amount, equivalent: Callable[[str], Fraction]
    ) -> None:
        self.demand = {s: n for s, n in demand.items() if n > 0}
        self.guaranteed = guaranteed
        self.eq = equivalent
        self.want: Amount = sum(n * equivalent(s) for s, n in self.demand.items()) + guaranteed

    def need(self, cut: bool) -> dict[str, Amount]:
        need: dict[str, Amount] = dict(self.demand)
        whole = need.get(WHOLE, 0)
        if whole or (cut and self.guaranteed):
            # a guarantee may be claimed with whole GPUs: a whole-GPU booking counts it as
            # booking_fit does, and a re-cut must leave the GPUs for it
            need[WHOLE] = whole + self.guaranteed
        return need

    def missing(self, supply: Units, cut: bool) -> Amount:
        out: Amount = 0
        for s, n in self.need(cut).items():
            if n > supply.get(s, 0):
                out += (n - supply.get(s, 0)) * self.eq(s)
        total = sum(c * self.eq(s) for s, c in supply.items())
        return out + max(0, self.want - total)

    def short(self, supply: Units, cut: bool) -> Short | None:
        worst: tuple[Amount, Short] | None = None
        for s, n in sorted(self.need(cut).items()):
            have = supply.get(s, 0)
            if n > have and (worst is None or (n - have) * self.eq(s) > worst[0]):
                worst = ((n - have) * self.eq(s), Short(s, n, have))
        if worst is not None:
            return worst[1]
        total = sum(c * self.eq(s) for s, c in supply.items())
        return Short("GPU-equivalents", self.want, total) if self.want > total else None


def _swap(supply: Units, away: Units, to: Units) -> dict[str, int]:
    out = dict(supply)
    for s, c in away.items():
        out[s] = out.get(s, 0) - c
    for s, c in to.items():
        out[s] = out.get(s, 0) + c
    return {s: c for s, c in out.items() if c}


def _rank(node: LayoutNode, config: str) -> int:
    if node.config == config:
        return 0  # already so cut: nothing to change
    return 1 if node.free else 2


def choose_layout(
    layout: PoolLayout,
    fixed: Units,
    demand: Units,
    guaranteed: Amount,
    equivalent: Callable[[str], Fraction],
) -> Choice:
    """The layout for a moment whose bookings in force need ``demand`` (units by shape id),
    with ``guaranteed`` GPUs of quotas; ``fixed``: what the pool's other nodes offer."""
    need = _Need(demand, guaranteed, equivalent)
    supply = dict(fixed)
    for n in layout.nodes:
        supply = _swap(supply, {}, n.home)
    home_supply = supply
    cuts: list[tuple[str, str]] = []
    changed: set[str] = set()
    missing = need.missing(supply, False)
    while missing > 0:
        best: tuple[tuple[Amount, int, int], LayoutNode, str, dict[str, int]] | None = None
        for i, n in enumerate(layout.nodes):
            if n.name in changed:
                continue
            for config, units in n.options:
                if config == layout.home:
                    continue
                new = _swap(supply, n.home, units)
                key = (need.missing(new, True), _rank(n, config), i)
                if key[0] < missing and (best is None or key < best[0]):
                    best = (key, n, config, new)
        if best is None:
            break
        (missing, _, _), node, config, supply = best
        changed.add(node.name)
        cuts.append((node.name, config))
    short = need.short(supply, bool(cuts))
    most = None
    if short is not None and short.shape not in (WHOLE, "GPU-equivalents"):
        most = _most_of(layout, home_supply, short.shape, need)
    made = {s for name, config in cuts for s, c in _options(layout, name)[config].items() if c}
    served = tuple((s, n) for s, n in sorted(need.demand.items()) if s != WHOLE and s in made)
    return Choice(tuple(cuts), supply, short, most, served)


def _options(layout: PoolLayout, name: str) -> dict[str, Units]:
    return next(dict(n.options) for n in layout.nodes if n.name == name)


def _most_of(
    layout: PoolLayout, supply: Units, shape: str, need: _Need
) -> tuple[tuple[tuple[str, str], ...], int, Short | None]:
    """Every node cut to the config that makes the most of ``shape``: what the pool then offers
    of it, and what that layout lacks of anything else (for the words of a refusal)."""
    cuts = []
    for n in layout.nodes:
        config, units = max(n.options, key=lambda o: o[1].get(shape, 0), default=("", {}))
        if units.get(shape, 0) > n.home.get(shape, 0):
            supply = _swap(supply, n.home, units)
            cuts.append((n.name, config))
    other = {s: c for s, c in need.demand.items() if s != shape}
    lacks = _Need(other, need.guaranteed, need.eq).short(supply, bool(cuts))
    return tuple(cuts), supply.get(shape, 0), lacks


def booking_recuts(
    policy: RecutPolicy,
    layout: PoolLayout,
    nodes: Sequence[NodeCut],
    choice: Choice,
    now: float,
    reason: Callable[[Units], tuple[str, int, str]],
) -> list[Recut]:
    """The re-cuts that bring the pool to ``choice``: each node it cuts away from home whose
    config is not that yet and that is free to change now (no GPU pod, nothing under way, the
    policy's interval past). ``reason(units)``, of what the node offers so cut: the shape id,
    the units booked of it and the words of the booking it is cut for."""
    by_name = {n.name: n for n in nodes}
    options = {n.name: dict(n.options) for n in layout.nodes}
    out = []
    for name, config in choice.cuts:
        n = by_name.get(name)
        if n is None or n.config == config or not free_to_change(policy, n, now):
            continue
        shape, booked, words = reason(options[name][config])
        out.append(Recut(name, config, shape, booked, False, words))
    return out


def booking_homes(
    policy: RecutPolicy,
    layout: PoolLayout,
    nodes: Sequence[NodeCut],
    choice: Choice,
    fixed: Units,
    demand: Units,
    guaranteed: Amount,
    equivalent: Callable[[str], Fraction],
    now: float,
    reason: Callable[[Units], tuple[str, int, str]],
) -> list[Recut]:
    """The nodes to send home for the bookings of a moment: each the layout ``choice`` leaves
    at home that is cut otherwise now (for the line, or by an admin), free to change, and
    whose home layout offers more of a shape the moment lacks as the nodes are cut now (the
    whole GPUs a whole-GPU booking and the guarantees need, say)."""
    by_name = {n.name: n for n in nodes}
    chosen = {name for name, _ in choice.cuts}
    need = _Need(demand, guaranteed, equivalent).need(True)
    supply = dict(fixed)
    for n in layout.nodes:
        supply = _swap(supply, {}, n.present)
    out = []
    for n in layout.nodes:
        cut = by_name.get(n.name)
        if n.name in chosen or cut is None or (n.config or layout.home) == layout.home:
            continue
        lacks = [
            s
            for s, c in n.home.items()
            if c > n.present.get(s, 0) and need.get(s, 0) > supply.get(s, 0)
        ]
        if not lacks or not free_to_change(policy, cut, now):
            continue
        supply = _swap(supply, n.present, n.home)
        shape, booked, words = reason(n.home)
        out.append(
            Recut(n.name, layout.home, shape, booked, True, f"back to {layout.home} {words}")
        )
    return out


def needed_at_home(
    layout: PoolLayout,
    choice: Choice,
    demand: Units,
    guaranteed: Amount,
    equivalent: Callable[[str], Fraction],
) -> list[str]:
    """The nodes ``choice`` leaves at home whose home layout the moment needs: cut otherwise,
    it would lack something (the line must not re-cut them while the bookings hold)."""
    if choice.short is not None:
        return []  # short whatever is kept: the line's re-cuts are not held back for it
    need = _Need(demand, guaranteed, equivalent)
    chosen = {name for name, _ in choice.cuts}
    return [
        n.name
        for n in layout.nodes
        if n.name not in chosen and need.short(_swap(choice.supply, n.home, {}), True) is not None
    ]
