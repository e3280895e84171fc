"""The line's entries as the database keeps them (:meth:`Database.queue_add
<jupyter_gpupool.db.store.Database.queue_add>`), and read back at start (:meth:`.line.Line.take_up`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.admission.queue import Waiting
from ...core.admission.walk import AdmissionRequest


def entry_of(w: Waiting) -> dict[str, Any]:
    """An entry as the database keeps it (:meth:`Database.queue_add
    <jupyter_gpupool.db.store.Database.queue_add>`); :func:`waiting_from_row` reads it back."""
    r = w.request
    return {
        "id": w.id,
        "seq": w.seq,
        "since": w.since,
        "user": r.user,
        "groups": list(r.groups),
        # a pool with a shape as {"pool", "shape"}, as the API takes it
        "pools": [
            name if shape is None else {"pool": name, "shape": shape} for name, shape in r.choices()
        ],
        "gpus": r.gpus,
        "gpu_type": r.gpu_type,
        "server": r.server,
        "reclaim": r.reclaim,
    }


def waiting_from_row(row: Mapping[str, Any]) -> Waiting:
    """An entry from the database's copy (:meth:`Line.take_up`)."""
    entries = [
        (e, None) if isinstance(e, str) else (e["pool"], e.get("shape")) for e in row["pools"]
    ]
    request = AdmissionRequest(
        user=str(row["user"]),
        groups=tuple(row["groups"]),
        pools=tuple(str(name) for name, _ in entries),
        shapes=tuple(shape for _, shape in entries) if any(s for _, s in entries) else (),
        gpus=int(row["gpus"]),
        gpu_type=row.get("gpu_type"),
        server=str(row.get("server") or ""),
        admission_id=str(row["id"]),
        reclaim=bool(row.get("reclaim", True)),
    )
    return Waiting(request, int(row["seq"]), float(row["since"]))
