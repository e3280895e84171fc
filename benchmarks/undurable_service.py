"""The gpupool service with its reservations kept in memory only: a second baseline of
``bench_service.py`` (``--against undurable``), to see what the durable answers cost.

Runs the service exactly as ``python -m jupyter_gpupool.service`` does, except that an admitted
request's reservation is not written to the database, so its 201 does not wait for a commit
(what the service did before issue 27 made every answer durable). Everything else (deciding,
reserving in memory, the answer, the ledger's writes) is the service's own. A benchmark's
figure only: a service run like this forgets its reservations when it dies.
"""

from __future__ import annotations

import sys
from concurrent.futures import Future
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jupyter_gpupool.core.usage.reservations import Reservation
from jupyter_gpupool.service.admission import desk
from jupyter_gpupool.service.app import main


def reserve_in_memory(self: desk.AdmissionDesk, reservation: Reservation) -> Future[None] | None:
    self.state.reservations.add(reservation)
    return None  # nothing written, nothing to wait for


desk.AdmissionDesk.reserve = reserve_in_memory  # type: ignore[method-assign]

if __name__ == "__main__":
    main()
