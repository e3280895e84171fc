"""A mig-parted config file of the admin's own (``c.GPUPoolService.mig_parted_config``): the
MIG manager applies a config the GPU operator's defaults do not have (``lab-4g``: one 4g.40gb
instance on each A100), a pool's ``recut`` names it, and the service re-cuts to it for a
request waiting for 4g.40gb, which only that config makes.

The truth: the service's HTTP answers and the simulated cluster's node, re-cut by the
simulator's MIG manager given the same file (as the GPU operator's MIG manager is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.core.documents.mig_parted import DEFAULT_CONFIGS, read_configs
from jupyter_gpupool.service.app import GPUPoolService
from jupyter_gpupool.sim import SimCluster

pytestmark = pytest.mark.timeout(120)

POOL = "training-pool"
FOUR = {"pool": POOL, "shape": "mig-4g.40gb"}
LAB_FILE = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  lab-4g:
    - devices: all
      mig-enabled: true
      mig-devices:
        "4g.40gb": 1
"""
RECUT = """
recut:
  nodes: [gpu-node-2]
  configs: [all-disabled, lab-4g]
  unused: 30m
  interval: 1s
"""


def labels(cluster: SimCluster, name: str) -> dict[str, str]:
    return cluster.store.get("nodes", None, name)["metadata"]["labels"]


def shapes_of(options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (row,) = [p for p in options["pools"] if p["name"] == POOL]
    return {s["id"]: s for s in row["shapes"]}


async def test_a_config_of_the_admins_file_is_offered_and_re_cut_to(
    start_service, sim_cluster: SimCluster, pools_dir: Path, tmp_path: Path
) -> None:
    assert "lab-4g" not in DEFAULT_CONFIGS
    config = tmp_path / "config.yaml"
    config.write_text(LAB_FILE)
    sim_cluster.mig_manager.configs = read_configs(LAB_FILE)  # the MIG manager's own file
    with (pools_dir / "training-pool.yaml").open("a") as f:
        f.write(RECUT)
    service = await start_service(mig_parted_config=str(config))
    admin = service.admin()
    four = shapes_of(await admin.launch_options(user="alice", groups=[]))["mig-4g.40gb"]
    assert (four["free"], four["recut"]) == (0, True), four
    waiting = await admin.admit(user="alice", groups=[], pools=[FOUR], gpus=1, queue=True)
    assert waiting["queued"], waiting
    await async_wait_for(
        lambda: labels(sim_cluster, "gpu-node-2").get("nvidia.com/mig.config") == "lab-4g",
        what="gpu-node-2 asked to be re-cut to lab-4g",
        timeout=20,
        interval=0.1,
    )
    sim_cluster.mig_manager.finish("gpu-node-2")

    async def admitted() -> bool:
        return (await admin.admission(waiting["id"]))["state"] == "admitted"

    await async_wait_for(admitted, what="alice admitted", timeout=20, interval=0.1)
    answer = await admin.admission(waiting["id"])
    assert (answer["node"], answer["shape"]) == ("gpu-node-2", "mig-4g.40gb"), answer
    # the node offers what the file's config makes: one 4g.40gb per GPU, 8 in all
    node = sim_cluster.store.get("nodes", None, "gpu-node-2")
    assert node["status"]["allocatable"].get("nvidia.com/mig-4g.40gb") == "8", node["status"]


async def test_without_the_file_a_config_it_alone_has_makes_nothing(
    start_service, pools_dir: Path
) -> None:
    """The GPU operator's defaults have no lab-4g: the same request is refused as never
    possible (nothing re-cuts to a config the service cannot read)."""
    with (pools_dir / "training-pool.yaml").open("a") as f:
        f.write(RECUT)
    service = await start_service()
    admin = service.admin()
    assert "mig-4g.40gb" not in shapes_of(await admin.launch_options(user="alice", groups=[]))
    with pytest.raises(GPUPoolError) as refused:
        await admin.admit(user="alice", groups=[], pools=[FOUR], gpus=1, queue=True)
    assert refused.value.status == 409 and "has no mig-4g.40gb" in str(refused.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (None, r"mig_parted_config: cannot read .*config.yaml: No such file"),
        ("mig-configs: [a]\n", r"is not a mig-parted config file: .*mig-configs: a mapping"),
        (
            "mig-configs:\n  x:\n    - devices: some\n      mig-enabled: true\n",
            r"is not a mig-parted config file: .*mig-configs.x\[0\].devices: must be all",
        ),
    ],
)
def test_a_file_that_is_not_one_stops_the_service_saying_why(
    tmp_path: Path, text: str | None, words: str
) -> None:
    path = tmp_path / "config.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(TraitError, match=words):
        GPUPoolService(mig_parted_config=str(path))
