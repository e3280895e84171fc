"""The service's live state: the registry in force, the usage index and the reservations.

One object, shared by the handlers, the admission desk and the pool manager. The registry is an
immutable value replaced whole on every change; the index is fed by the cluster view; the
reservations are changed only by the admission desk (and the index's pod sightings).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.accounting.budgets import BudgetSessions
from ..core.admission.walk import AdmissionState
from ..core.documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ..core.pools.model import Pool, Registry
from ..core.time.bookings import Booking
from ..core.time.bookings_in_force import Calendar
from ..core.usage.amounts import json_default
from ..core.usage.index import PoolUsage, UsageIndex
from ..core.usage.labels import POOL_LABEL
from ..core.usage.reservations import Reservation, Reservations
from ..core.words.pool_rows import pool_names, pool_or_bare, pool_summary
from ..core.words.recut_rows import EXPECTED_SECONDS as RECUT_SECONDS
from . import clock

#: At most this many stale pool rows are recomputed per request (see ``pool_usages``).
REFRESH_PER_CALL = 4


class TrackedReservations(Reservations):
    """Reservations that count changes per pool, so pool rows are recomputed only when the
    reservations of their pool changed."""

    def __init__(self) -> None:
        super().__init__()
        self.versions: dict[str, int] = {}

    def _bump(self, pool: str) -> None:
        self.versions[pool] = self.versions.get(pool, 0) + 1

    def add(self, reservation: Reservation) -> None:
        super().add(reservation)
        self._bump(reservation.pool)

    def release(self, admission_id: str) -> Reservation | None:
        released = super().release(admission_id)
        if released is not None:
            self._bump(released.pool)
        return released

    def observe(self, admission_id: str, state: str) -> None:
        held = self.get(admission_id)
        super().observe(admission_id, state)
        if held is not None:
            self._bump(held.pool)


def selectors_of(registry: Registry) -> list[tuple[str, Mapping[str, str]]]:
    """Pools that are defined by node labels other than the pool label."""
    return [(p.name, p.selector) for p in registry.pools.values() if p.selector]


class ServiceState:
    """Registry + usage + reservations, and the read-side helpers the API needs."""

    def __init__(
        self,
        registry: Registry | None = None,
        pool_label: str = POOL_LABEL,
        summary_ttl: float = 0.5,
    ):
        self.pool_label = pool_label
        self.registry = registry or Registry()
        self.reservations = TrackedReservations()
        self.index = UsageIndex(
            pool_label=pool_label,
            selectors=selectors_of(self.registry),
            on_admission=self.reservations.observe,
        )
        self.summary_ttl = summary_ttl
        #: The mig-parted configs the MIG manager applies (``c.GPUPoolService.mig_parted_config``)
        self.mig_configs: MigConfigs = DEFAULT_CONFIGS
        #: What a MIG re-cut is expected to take (the re-cut watch keeps it, from the last ones)
        self.recut_seconds = RECUT_SECONDS
        self._usages: dict[str, tuple[float, PoolUsage]] = {}
        # pool -> (usage row, reservations version, registry) it was built from, the pool,
        # the summary and its JSON text
        self._summaries: dict[str, tuple[PoolUsage, int, Registry, Pool, dict[str, Any], str]] = {}
        #: The sessions GPU-hour budgets count (None: no ledger, budgets are not enforced)
        self.budgets: BudgetSessions | None = None
        #: Told of each new registry (the budget book follows its budgets)
        self.on_registry: Callable[[Registry], None] | None = None
        self._calendar = Calendar(())
        # the bookings made through the API (the records' book tells), and the merged tuple
        # with the registry's, rebuilt only when either changes (read on every admission)
        self._stored_bookings: tuple[Booking, ...] = ()
        self._bookings: tuple[Booking, ...] = ()
        self._bookings_of: tuple[Registry, tuple[Booking, ...]] | None = None

    @property
    def calendar(self) -> Calendar:
        """The bookings' windows (:mod:`..core.time.bookings_in_force`), built again when they change."""
        bookings = self.bookings
        if self._calendar.bookings is not bookings:
            self._calendar = Calendar(bookings)
        return self._calendar

    def set_registry(self, registry: Registry) -> None:
        """Put a new registry in force (label selectors of pools apply at once)."""
        old = selectors_of(self.registry)
        self.registry = registry
        new = selectors_of(registry)
        if new != old:
            self.index.set_selectors(new)
        self._usages.clear()
        if self.on_registry is not None:
            self.on_registry(registry)

    def set_stored_bookings(self, bookings: tuple[Booking, ...]) -> None:
        """The bookings made through the API, as the records keep them (a new tuple each
        change)."""
        self._stored_bookings = bookings

    @property
    def bookings(self) -> tuple[Booking, ...]:
        """Every booking in force: the registry's (pool files) first, then those made through
        the API; a stored one whose name a pool file took since is left out (the file's
        wins)."""
        of = self._bookings_of
        if of is None or of[0] is not self.registry or of[1] is not self._stored_bookings:
            files = self.registry.bookings
            taken = {b.name for b in files}
            self._bookings = files + tuple(b for b in self._stored_bookings if b.name not in taken)
            self._bookings_of = (self.registry, self._stored_bookings)
        return self._bookings

    def admission_state(self) -> AdmissionState:
        return AdmissionState(
            registry=self.registry,
            usage=self.index,
            reservations=self.reservations,
            pool_label=self.pool_label,
            budgets=self.budgets,
            now=clock.now(),
            bookings=self.calendar,
            mig_configs=self.mig_configs,
        )

    # --- pools, as the API lists them ------------------------------------------------------------

    def pool_usages(self) -> list[PoolUsage]:
        """Usage of every pool; a pool's row is reused for ``summary_ttl`` seconds.

        Building a row walks the pool's nodes and servers: milliseconds for thousands of nodes,
        so under load at most ``REFRESH_PER_CALL`` stale rows (the oldest) are rebuilt per call,
        spreading the work instead of stalling every request in flight at once; a row is never
        older than four times ``summary_ttl``. GPUs held by reservations are applied fresh on
        top, in :meth:`pool_summaries`.
        """
        now = clock.now()
        ttl = self.summary_ttl
        names = pool_names(self.registry, self.index)
        cache = self._usages
        stale = [n for n in names if n not in cache or now - cache[n][0] >= ttl]
        if stale:
            ages = [now - cache[n][0] for n in stale if n in cache]
            if len(ages) < len(stale) or max(ages) >= 4 * ttl:
                refresh = stale
            else:
                stale.sort(key=lambda n: cache[n][0])
                refresh = stale[:REFRESH_PER_CALL]
            for n in refresh:
                cache[n] = (now, self.index.pool_usage(n))
        if len(cache) > len(names):
            for n in set(cache) - set(names):
                del cache[n]
        return [cache[n][1] for n in names]

    def pool_summaries(
        self, user: str | None = None, groups: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Rows of ``GET api/v1/pools``: every pool, or those ``user`` may use."""
        return [row for row, _ in self._summaries_with_json(user, groups)]

    def pools_json(self, user: str | None = None, groups: Sequence[str] = ()) -> str:
        """``{"pools": [...]}`` as JSON text, from rows encoded once per change.

        The spawn form asks for this on every page load; encoding fifty pool rows anew each
        time would be most of the cost of answering.
        """
        return (
            '{"pools": ['
            + ", ".join(text for _, text in self._summaries_with_json(user, groups))
            + "]}"
        )

    def _summaries_with_json(
        self, user: str | None, groups: Sequence[str]
    ) -> list[tuple[dict[str, Any], str]]:
        out = []
        registry = self.registry
        versions = self.reservations.versions
        for usage in self.pool_usages():
            name = usage.name
            version = versions.get(name, 0)
            hit = self._summaries.get(name)
            if hit is None or hit[0] is not usage or hit[1] != version or hit[2] is not registry:
                pool = pool_or_bare(registry, name)
                row = pool_summary(
                    pool, usage, self.index, self.reservations, self.mig_configs, self.recut_seconds
                )
                hit = (usage, version, registry, pool, row, json.dumps(row, default=json_default))
                self._summaries[name] = hit
            if user is not None and not hit[3].allows(user, groups):
                continue
            out.append((hit[4], hit[5]))
        return out

    def pool_summary(self, name: str) -> dict[str, Any]:
        pool = pool_or_bare(self.registry, name)
        usage = self.index.pool_usage(name)
        return pool_summary(
            pool, usage, self.index, self.reservations, self.mig_configs, self.recut_seconds
        )
