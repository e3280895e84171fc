"""``gpupool validate`` of a booking file (issue 40): alone it says how a booking file is
checked; ``--service`` checks it against the running service's pools, quotas and nodes (a
service in this process on the demo cluster, asked by the CLI's own client); and no file reads
``ok`` when the check against the service then finds a problem in it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jupyter_gpupool.commands.validate import check_with_service, run_validate

BOOKING = """\
kind: booking
version: v0.1
booking: {{name: cs231}}
pool: training-pool
gpus: {gpus}
groups: [cs231]
window:
  weekly: {{days: [tue], start: "10:00", end: "12:00"}}
  from: 2027-01-12
  until: 2027-03-30
  timezone: Europe/Berlin
"""


def args(*files: Path, service: bool = False, nodes: bool = False) -> argparse.Namespace:
    return argparse.Namespace(files=[str(f) for f in files], service=service, nodes=nodes)


def test_a_booking_file_alone_says_how_to_check_it(tmp_path, capsys):
    f = tmp_path / "bookings.yaml"
    f.write_text(BOOKING.format(gpus=2))
    assert run_validate(args(f)) == 1
    out, err = capsys.readouterr()
    assert out == ""  # no "ok" for it
    problem, hint = err.splitlines()
    assert problem == f"{f}:4: pool: unknown pool 'training-pool' (pools: default)"
    assert hint == (
        "gpupool validate: the files given define no pool; check a booking file with the pool "
        f"files it names (gpupool validate -f POOL-FILES -f {f}), or against the running "
        f"service's pools (gpupool validate --service -f {f})"
    )


async def test_a_booking_file_checked_against_the_service(service, tmp_path, capsys):
    admin = service.admin()
    fits = tmp_path / "bookings.yaml"
    fits.write_text(BOOKING.format(gpus=2))
    assert await check_with_service(admin, args(fits, service=True)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert f"ok {fits} (0 pools)" in out.splitlines()
    assert "ok: the bookings fit their pools (1 bookings)" in out

    # 40 whole A100s where the service's training-pool has 16 (and its MIG A100)
    big = tmp_path / "big.yaml"
    big.write_text(BOOKING.format(gpus=40))
    assert await check_with_service(admin, args(big, service=True)) == 1
    out, err = capsys.readouterr()
    assert f"ok {big}" not in out
    # the service's quota documents count too: 12 guaranteed to ml-research, 2 to alice
    assert err.startswith(
        f"{big}:3: booking.name: cs231 (Tue 2027-01-12 10:00\u201312:00 Europe/Berlin): "
        "54 of 16 whole GPUs booked (with 14 guaranteed by quotas)"
    ), err


async def test_no_ok_for_a_file_the_service_then_finds_wrong(service, tmp_path, capsys):
    """``--nodes``: a pool file naming a shape none of its nodes offers is a problem, and that
    file is not also said to be ok."""
    pool = tmp_path / "training-pool.yaml"
    pool.write_text(
        "kind: pool\nversion: v0.1\npool: {name: training-pool}\n"
        "nodes: {gpu-node-1: {gpu-type: A100-80G}}\n"
        "shapes:\n  - {id: mig-7g.80gb}\n"
    )
    assert await check_with_service(service.admin(), args(pool, nodes=True)) == 1
    out, err = capsys.readouterr()
    assert f"ok {pool}" not in out
    assert f"{pool}:6: shapes[0].id: no node of pool training-pool offers mig-7g.80gb" in err
