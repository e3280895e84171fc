"""``gpupool validate --nodes`` holds bookings to the pools' GPUs as the service counts them (a
stub client answers ``GET api/v1/pools``)."""

from __future__ import annotations

import argparse

from jupyter_gpupool.commands.validate import check_nodes

FILES = """\
kind: pool
version: v0.1
pool: {name: training-pool}
quota:
  groups:
    ml: {guaranteed: 1}
---
kind: booking
booking: {name: ml-ops}
pool: training-pool
shape: mig-1g.10gb
gpus: 6
groups: [ml-ops]
window:
  once: {start: "2027-01-19T11:00", end: "2027-01-19T13:00"}
  timezone: Europe/Berlin
---
kind: booking
booking: {name: cs231}
pool: training-pool
shape: mig-1g.10gb
gpus: 40
groups: [cs231]
window:
  weekly: {days: [tue], start: "10:00", end: "12:00"}
  from: 2027-01-12
  until: 2027-03-30
  timezone: Europe/Berlin
"""


class Client:
    def __init__(self, mig_total: int):
        self.rows = [
            {
                "name": "training-pool",
                "gpu_total": 0,
                "shapes_offered": ["mig-1g.10gb"],
                "shapes": [{"id": "mig-1g.10gb", "equivalent": "1/7", "total": mig_total}],
            }
        ]

    async def pools(self):
        return self.rows


async def test_a_booking_that_does_not_fit_is_a_problem_at_its_line(tmp_path, capsys):
    f = tmp_path / "bookings.yaml"
    f.write_text(FILES)
    args = argparse.Namespace(files=[str(f)])
    assert await check_nodes(Client(56), args) == 0
    assert "ok: the bookings fit their pools (2 bookings)" in capsys.readouterr().out
    assert await check_nodes(Client(40), args) == 1
    err = capsys.readouterr().err
    assert err == (
        f"{f}:19: booking.name: cs231 (Tue 2027-01-19 10:00\u201312:00 Europe/Berlin) overlaps "
        "ml-ops (Tue 2027-01-19 11:00\u201313:00 Europe/Berlin): 46 of 40 mig-1g.10gb booked\n"
    )
