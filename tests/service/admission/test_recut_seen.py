"""A shape only a MIG re-cut would offer, seen and explained, over the service's HTTP API on the
simulated cluster (issue 41): training-pool may re-cut gpu-node-2 (8 whole A100-80GB) into
``all-1g.10gb`` or ``all-7g.80gb``, and no node offers 7g.80gb now.

- The launch options (what the spawn form, the magics and the launch panel read) list
  mig-7g.80gb with 0 free, ``recut: true`` and ``ready_in_s``, "0 free now, more in about 2
  min", and the spawn form shows that line; a shape no allowed config makes is not listed.
- Asking for it waits in line (202), where a shape no re-cut makes is refused (409).
- Its wait estimate is the re-cut's end: asked at the node's ``recut-at`` label plus what a
  re-cut takes (120 s before any was seen), never sooner; later, what is left of it.

The truth: the service's HTTP answers, the simulated cluster's own node (its labels say when
the re-cut was asked), and the spawn form rendered from the launch options as the spawner does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service_kit import T0, start_pod
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.core.words.launch_options import Catalog
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.spawner.form import form_context, render_form
from jupyter_gpupool.spawner.options import SpawnOptions

pytestmark = pytest.mark.timeout(120)

POOL = "training-pool"
SEVEN = {"pool": POOL, "shape": "mig-7g.80gb"}
RECUT = """
recut:
  nodes: [gpu-node-2]
  configs: [all-disabled, all-1g.10gb, all-7g.80gb]
  unused: 30m
  interval: 1s
"""


def shapes_of(options: dict[str, Any], pool: str = POOL) -> dict[str, dict[str, Any]]:
    (row,) = [p for p in options["pools"] if p["name"] == pool]
    return {s["id"]: s for s in row["shapes"]}


def labels(cluster: SimCluster, name: str) -> dict[str, str]:
    return cluster.store.get("nodes", None, name)["metadata"]["labels"]


async def test_a_shape_only_a_re_cut_offers_is_listed_waited_for_and_estimated(
    start_service, sim_cluster: SimCluster, pools_dir: Path, now: list[float]
) -> None:
    with (pools_dir / "training-pool.yaml").open("a") as f:
        f.write(RECUT)
    sim_cluster.mig_manager.delay = 3600.0  # the re-cut stays under way until finished
    service = await start_service()
    admin = service.admin()

    # 1. listed: 0 free, recut, ready in what a re-cut is expected to take
    options = await admin.launch_options(user="alice", groups=[])
    shapes = shapes_of(options)
    seven = shapes["mig-7g.80gb"]
    assert (seven["free"], seven["total"], seven["recut"], seven["ready_in_s"]) == (0, 0, True, 120)
    assert seven["text"] == "MIG 7g.80gb: 0 free now, more in about 2 min", seven
    assert seven["model"] == "A100-80G" and seven["equivalent"] == "1", seven
    # gpu-node-mig-1 offers 1g.10gb and 3g.40gb now: listed as ever, not as a re-cut's
    assert not shapes["mig-1g.10gb"].get("recut") and not shapes["mig-3g.40gb"].get("recut")
    # no allowed config makes 4g.40gb or 2g.20gb beyond what mig-1 has: nothing invented
    assert "mig-4g.40gb" not in shapes
    assert [s for s in shapes.values() if s.get("recut")] == [seven]
    # a pool without a recut section lists no such shape
    assert not any(s.get("recut") for s in shapes_of(options, "inference-pool").values())

    # the spawn form shows the line, and the shape can be picked
    catalog = Catalog.from_json(options)
    html = render_form(form_context(catalog, SpawnOptions()))
    assert "MIG 7g.80gb: 0 free now, more in about 2 min" in html
    assert 'value="mig-7g.80gb"' in html
    choice = catalog.pool(POOL).shape("mig-7g.80gb")  # type: ignore[union-attr]
    assert choice is not None and choice.recut and choice.ready_in_s == 120

    # 2. asking for it waits; a shape no re-cut makes is refused as never possible
    waiting = await admin.admit(user="alice", groups=[], pools=[SEVEN], gpus=1, queue=True)
    assert waiting["queued"], waiting
    with pytest.raises(GPUPoolError) as refused:
        await admin.admit(
            user="bob",
            groups=[],
            pools=[{"pool": POOL, "shape": "mig-4g.40gb"}],
            gpus=1,
            queue=True,
        )
    assert refused.value.status == 409 and "has no mig-4g.40gb" in str(refused.value)

    # 3. the service re-cuts gpu-node-2; the estimate is the re-cut's end, not sooner
    await async_wait_for(
        lambda: labels(sim_cluster, "gpu-node-2").get("nvidia.com/mig.config") == "all-7g.80gb",
        what="gpu-node-2 asked to be re-cut",
        timeout=20,
        interval=0.1,
    )
    asked = float(labels(sim_cluster, "gpu-node-2")["gpupool.jupyter.org/recut-at"])
    assert asked == int(T0)
    row = await admin.admission(waiting["id"])
    assert row["state"] == "queued", row
    assert row["estimate"] == pytest.approx(asked + 120, abs=1), row
    assert row["estimate_words"].startswith(
        "about 2 min, once gpu-node-2 is re-cut into 7g.80gb"
    ), row
    seven = shapes_of(await admin.launch_options(user="alice", groups=[]))["mig-7g.80gb"]
    assert seven["text"] == "MIG 7g.80gb: 0 free now, 8 more in about 2 min (gpu-node-2 is re-cut)"

    # a minute later: what is left of it
    now[0] += 60
    seven = shapes_of(await admin.launch_options(user="alice", groups=[]))["mig-7g.80gb"]
    assert seven["ready_in_s"] == 60 and "8 more in about 1 min" in seven["text"], seven
    row = await admin.admission(waiting["id"])
    assert row["estimate"] == pytest.approx(asked + 120, abs=1), row

    # done: the instances are offered as any, and alice is admitted on them
    sim_cluster.mig_manager.finish("gpu-node-2")

    async def admitted() -> bool:
        return (await admin.admission(waiting["id"]))["state"] == "admitted"

    await async_wait_for(admitted, what="alice admitted", timeout=20, interval=0.1)
    answer = await admin.admission(waiting["id"])
    assert (answer["node"], answer["shape"]) == ("gpu-node-2", "mig-7g.80gb"), answer
    await start_pod(sim_cluster, answer, "jupyter-alice")
    seven = shapes_of(await admin.launch_options(user="alice", groups=[]))["mig-7g.80gb"]
    assert not seven.get("recut") and seven["free"] == 7, seven
