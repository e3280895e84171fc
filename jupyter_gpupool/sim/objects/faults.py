"""Failures on demand (``PUT /sim/v1/faults``), for tests of the product's retry and resume logic."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .store import Store


@dataclass
class Faults:
    """Failures on demand, for tests of the product's retry and resume logic."""

    error_rate: float = 0.0  # fraction of API requests answered with 500
    paths: list[str] = field(default_factory=list)  # only requests whose path contains one of these
    methods: list[str] = field(default_factory=list)  # only these HTTP methods (empty: all)
    seed: int | None = None
    injected: int = 0
    store: Store | None = field(default=None, repr=False)
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def cut_watches(self) -> int:
        """Close every open watch; clients must resume from their last resourceVersion."""
        return self.store.cut_watches() if self.store is not None else 0

    def expire_history(self) -> None:
        """Forget watch history: resuming from any earlier resourceVersion now gets 410 Gone."""
        if self.store is not None:
            self.store.expire_history()

    def configure(
        self,
        error_rate: float = 0.0,
        paths: list[str] | None = None,
        methods: list[str] | None = None,
        seed: int | None = None,
    ) -> None:
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError("error_rate must be between 0 and 1")
        self.error_rate = error_rate
        self.paths = list(paths or [])
        self.methods = [m.upper() for m in methods or []]
        self.seed = seed
        self._rng = random.Random(seed)

    def should_fail(self, method: str, path: str) -> bool:
        if self.error_rate <= 0:
            return False
        if self.paths and not any(p in path for p in self.paths):
            return False
        if self.methods and method.upper() not in self.methods:
            return False
        if self._rng.random() < self.error_rate:
            self.injected += 1
            return True
        return False
