"""Re-cutting MIG layouts to demand: which node the service asks NVIDIA's MIG manager to re-cut.

A pool may let the service change some of its nodes' MIG layouts among named mig-parted configs
(the pool file's ``recut``, :class:`RecutPolicy`). The service writes the chosen config to the
node's ``nvidia.com/mig.config`` label; the MIG manager does the rest (docs/shapes.md). This
module decides, from what the line waits for and what the nodes offer, and nothing else:

- **To demand.** Requests wait for a shape (``mig-1g.10gb``) that the pool's nodes do not offer
  free, more than the re-cuts under way will bring: a node the policy names is re-cut to the
  allowed config that offers the most of it, and only as many nodes as the waiting requests
  need. A node is touched only while it runs **no GPU pod** (the MIG manager cannot destroy an
  instance in use, and a whole-GPU server must never lose its GPU), while no re-cut of it is
  under way or failed, and at most once per ``interval``. Nodes whose present offer is wanted
  least are cut first.
- **Back again.** A node in another layout than its home (``home``) goes back, with no GPU pod
  on it and once per ``interval`` as well, when nothing waiting could use its instances and
  either they stood unused for ``unused`` seconds or requests wait for what the home layout
  offers.

Pure: the service's loop (``service/admission/recutwatch.py``) gathers :class:`NodeCut` rows
and the wanted counts, and acts on the :class:`Recut` answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..documents.mig_parted import MigConfigs, Rule, units
from ..pools.recut_policy import RecutPolicy
from ..time.idle import duration_words
from ..usage.labels import GFD_COUNT_LABEL, GFD_PRODUCT_LABEL
from ..usage.shapes import WHOLE

#: ``nvidia.com/mig.config.state`` values after which a node's layout may change again
SETTLED = ("success", "")


@dataclass(frozen=True)
class NodeCut:
    """One node the policy names, as the service sees it now."""

    name: str
    product: str | None  # GFD's nvidia.com/gpu.product
    gpu_count: int  # GFD's nvidia.com/gpu.count: physical GPUs
    config: str | None  # nvidia.com/mig.config
    state: str | None  # nvidia.com/mig.config.state
    gpu_pods: int  # pods holding any GPU resource of the node
    schedulable: bool = True
    last_change: float | None = None  # when the service last asked it to change
    unused_since: float | None = None  # since when no GPU pod ran on it (None: one runs)

    @property
    def busy(self) -> bool:
        """A re-cut is under way, or the last one failed (left as the MIG manager left it)."""
        return (self.state or "") not in SETTLED


@dataclass(frozen=True)
class Recut:
    """Ask the MIG manager to cut ``node`` as ``config``."""

    node: str
    config: str
    shape: str  # the shape id it is cut for (``mig-1g.10gb``, ``whole``)
    waiting: int  # requests waiting for that shape when it was decided
    back: bool  # going back to the home layout
    reason: str  # "for 6 waiting requests of 1g.10gb" / "back: its instances stood unused 30 min"


def shape_units(configs: MigConfigs, config: str, node: NodeCut) -> Counter[str] | None:
    """What ``node`` offers cut as ``config``, by shape id (``whole``, ``mig-1g.10gb``); None
    when the config is unknown or not for its card."""
    rules = configs.get(config)
    got = _card_units(rules, node.gpu_count, node.product) if rules else None
    return Counter(got) if got is not None else None


@lru_cache(maxsize=512)
def _card_units(
    rules: tuple[Rule, ...], gpu_count: int, product: str | None
) -> Mapping[str, int] | None:
    """:func:`shape_units` of a card, kept: a round asks it for every node of every pool that
    may re-cut, often several times, and a cluster has few kinds of GPU node."""
    got = units(rules, gpu_count, product)
    if got is None:
        return None
    return {(k if k == WHOLE else f"mig-{k}"): n for k, n in got.items()}


def plan(
    policy: RecutPolicy,
    configs: MigConfigs,
    nodes: Sequence[NodeCut],
    wanted: Mapping[str, int],
    now: float,
    keep: frozenset[str] = frozenset(),
) -> list[Recut]:
    """The re-cuts to ask for now. ``wanted``: by shape id, the requests waiting for it beyond
    what the pool offers free (requests that no free unit can take). ``keep``: nodes cut for
    bookings (``booking_layout.py``), neither re-cut for the line nor sent home."""
    need = Counter({s: n for s, n in wanted.items() if n > 0})
    offers = {n.name: shape_units(configs, n.config or policy.home, n) for n in nodes}
    # what re-cuts under way will bring
    for n in nodes:
        if n.busy and n.state != "failed":
            for shape, count in (offers[n.name] or {}).items():
                need[shape] -= count
    free = [n for n in nodes if n.name not in keep and free_to_change(policy, n, now)]
    out: list[Recut] = []
    taken: set[str] = set()
    for shape in sorted((s for s in need if need[s] > 0), key=lambda s: (-need[s], s)):
        choices = []
        for n in free:
            if n.name in taken:
                continue
            best = _best_config(policy, configs, n, shape)
            if best is None:
                continue
            config, gain = best
            now_has = (offers[n.name] or Counter())[shape]
            if gain <= now_has:
                continue
            loss = sum(
                min(c, max(need[s], 0)) for s, c in (offers[n.name] or {}).items() if s != shape
            )
            choices.append((loss, -(gain - now_has), n.name, config, gain - now_has))
        waiting = need[shape]
        for _loss, _gain, name, config, more in sorted(choices):
            if need[shape] <= 0:
                break
            taken.add(name)
            need[shape] -= more
            back = config == policy.home
            what = "whole GPUs" if shape == WHOLE else shape.removeprefix("mig-")
            plural = "s" if waiting != 1 else ""
            out.append(
                Recut(
                    name,
                    config,
                    shape,
                    waiting,
                    back,
                    f"for {waiting} waiting request{plural} of {what}",
                )
            )
    for n in free:
        if n.name in taken or (n.config or policy.home) == policy.home:
            continue
        offer = offers[n.name] or Counter()
        if any(need[s] > 0 for s in offer if s != WHOLE):
            continue  # something waiting could use its instances (under quota limits, say)
        home = shape_units(configs, policy.home, n)
        if home is None:
            continue
        # unused since the last of: no GPU pod on it, its layout asked for (instances that
        # came with a re-cut stood unused only since then, however long the node was idle)
        since = None if n.unused_since is None else max(n.unused_since, n.last_change or 0.0)
        idle = None if since is None else now - since
        if idle is not None and idle >= policy.unused_seconds:
            reason = f"back to {policy.home}: its instances stood unused {duration_words(idle)}"
            out.append(Recut(n.name, policy.home, WHOLE, 0, True, reason))
    return out


def free_to_change(policy: RecutPolicy, n: NodeCut, now: float) -> bool:
    """Whether the service may ask to re-cut ``n`` now: a node the policy names, schedulable,
    no GPU pod, nothing under way or failed, its last change an interval ago."""
    if n.name not in policy.nodes or n.busy or n.gpu_pods or not n.schedulable:
        return False
    return n.last_change is None or now - n.last_change >= policy.interval_seconds


def _best_config(
    policy: RecutPolicy, configs: MigConfigs, n: NodeCut, shape: str
) -> tuple[str, int] | None:
    """The allowed config that offers the most of ``shape`` on ``n`` (the first listed on a tie)."""
    best: tuple[str, int] | None = None
    for config in policy.configs:
        got = shape_units(configs, config, n)
        count = got[shape] if got is not None else 0
        if count and (best is None or count > best[1]):
            best = (config, count)
    return best


def could_offer(
    policy: RecutPolicy,
    configs: MigConfigs,
    labels_of: Callable[[str], Mapping[str, str]],
    shape: str,
) -> bool:
    """Whether re-cutting one of the policy's nodes (as GFD describes it: product and GPU
    count) to one of its configs would make ``shape``: then a request for it may wait in line
    though no node offers it now."""
    for name in policy.nodes:
        labels = labels_of(name)
        count = labels.get(GFD_COUNT_LABEL) or ""
        if not count.isdigit():
            continue
        node = NodeCut(name, labels.get(GFD_PRODUCT_LABEL), int(count), None, None, 0)
        for config in policy.configs:
            got = shape_units(configs, config, node)
            if got is not None and got[shape]:
                return True
    return False
