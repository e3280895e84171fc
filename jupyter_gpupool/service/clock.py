"""The service's clock. Reservations expire and caches age against :func:`now` only, so tests can
move time by patching this one function (``monkeypatch.setattr(clock, "now", ...)``)."""

from __future__ import annotations

import time


def now() -> float:
    """Seconds since the epoch."""
    return time.time()
