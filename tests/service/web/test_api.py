"""The service's API against the simulated cluster (hub API stubbed; see test_hub_auth.py for
a real hub)."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path

import pytest
import yaml
from service_kit import delete_pod, start_pod
from waiting import async_wait_for

from jupyter_gpupool.client import AdmissionForbidden, AdmissionRejected, GPUPoolError
from jupyter_gpupool.service import clock

NEW_POOL = """kind: pool
version: v0.1
pool:
  name: t4-pool
  description: "T4s for teaching"
nodes:
  node-6:
    gpu-type: T4-16G
access:
  groups: [ml-ops]
"""


def node_labels(cluster, name):
    return cluster.store.get("nodes", None, name)["metadata"].get("labels", {})


async def test_pools_lists_every_pool_with_live_free_gpus(service):
    admin = service.admin()
    pools = {p["name"]: p for p in await admin.pools()}
    assert list(pools) == [
        "compute-pool",
        "dev-pool",
        "inference-pool",
        "training-pool",
        "default",
    ]
    training = pools["training-pool"]
    assert training["description"] == "Large model training (high-end GPUs)"
    # GPU-equivalents: 16 whole A100s on 2 nodes, and the MIG node's A100 (its 4 instances)
    assert (training["gpu_total"], training["gpu_used"], training["gpu_free"]) == (17, 0, 17)
    assert training["whole_gpus"] == {"total": 16, "used": 0, "free": 16}
    assert training["node_count"] == 3 and training["gpu_types"] == ["A100-80G"]
    assert training["largest_free_block"] == 8 and training["status"] == "active"
    assert pools["default"]["gpu_total"] == 4  # node-6 carries no pool label
    assert pools["compute-pool"]["gpu_total"] == 0 and pools["compute-pool"]["node_count"] == 2

    a = await admin.admit(user="bob", groups=["ml-research"], pools=["training-pool"], gpus=8)
    training = next(p for p in await admin.pools() if p["name"] == "training-pool")
    # the reservation counts at once; the pod does not exist yet
    assert training["gpu_reserved"] == 8 and training["gpu_available"] == 8
    assert training["largest_free_block"] == 8
    await start_pod(service.cluster, a, "bob-nb")
    await service.cluster.wait_for(lambda: service.ctx.state.reservations.get(a["id"]) is None)
    training = next(p for p in await admin.pools() if p["name"] == "training-pool")
    assert (training["gpu_used"], training["gpu_reserved"], training["gpu_available"]) == (8, 0, 8)


async def test_users_see_the_pools_they_may_use(service):
    admin = service.admin()
    result = await admin.apply_pools(NEW_POOL)
    assert result["created"] == ["t4-pool"]
    carol = service.user("carol", ["ml-ops"])
    dave = service.user("dave")
    assert "t4-pool" in [p["name"] for p in await carol.pools()]
    assert "t4-pool" not in [p["name"] for p in await dave.pools()]
    with pytest.raises(GPUPoolError) as e:
        await dave.pool("t4-pool")
    assert e.value.status == 403
    with pytest.raises(GPUPoolError) as e:
        await dave.pool("no-such-pool")
    assert e.value.status == 404
    detail = await carol.pool("t4-pool")
    assert "nodes" not in detail and detail["servers"] == []


async def test_pool_detail_has_nodes_servers_and_quota(service):
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2)
    await start_pod(service.cluster, a, "alice-nb")
    await service.settled()
    detail = await admin.pool("training-pool")
    assert [n["name"] for n in detail["nodes"]] == ["gpu-node-1", "gpu-node-2", "gpu-node-mig-1"]
    [server] = detail["servers"]
    assert (server["user"], server["gpus"], server["pool"]) == ("alice", 2, "training-pool")
    quota = detail["quota"]
    assert quota["borrowing"] is True
    assert quota["groups"]["ml-research"] == {
        "guaranteed": 12,
        "limit": 16,
        "used": 2,
        "reserved": 0,
    }
    assert detail["document"]["pool"]["name"] == "training-pool"
    alice = service.user("alice", ["ml-research"])
    mine = await alice.pool("training-pool")
    assert list(mine["quota"]["groups"]) == ["ml-research"]
    assert list(mine["quota"]["users"]) == ["alice"]
    assert mine["quota"]["users"]["alice"]["all_gpus"] == 2


async def test_creating_a_pool_labels_its_nodes_and_writes_its_file(service, pools_dir):
    admin = service.admin()
    result = await admin.apply_pools(NEW_POOL)
    assert result["labeled_nodes"] == ["node-6"]
    labels = node_labels(service.cluster, "node-6")
    assert labels["runwhere.ai/pool"] == "t4-pool"
    assert labels["runwhere.ai/gpu-type"] == "T4-16G"
    written = yaml.safe_load((pools_dir / "t4-pool.yaml").read_text())
    assert written["pool"] == {"name": "t4-pool", "description": "T4s for teaching"}
    assert written["access"] == {"users": [], "groups": ["ml-ops"]}
    # live: the watch moves node-6 over and admission uses the new pool at once
    await service.cluster.wait_for(
        lambda: service.ctx.state.index.pool_usage("t4-pool").gpu_total == 4
    )
    a = await admin.admit(user="carol", groups=["ml-ops"], pools=["t4-pool"], gpus=1)
    assert a["pool"] == "t4-pool"
    # replacing it with another node list moves the label
    again = NEW_POOL.replace("node-6", "gpu-node-5").replace("T4-16G", "RTX4090-24G")
    with pytest.raises(GPUPoolError) as e:
        await admin.apply_pools(again)  # gpu-node-5 is dev-pool's
    assert e.value.status == 400 and "already in pool 'dev-pool'" in e.value.message
    again = NEW_POOL.replace("nodes:\n  node-6:\n    gpu-type: T4-16G\n", "nodes: {}\n")
    result = await admin.apply_pools(again)
    assert result["replaced"] == ["t4-pool"] and result["unlabeled_nodes"] == ["node-6"]
    assert "runwhere.ai/pool" not in node_labels(service.cluster, "node-6")


async def test_a_refused_pool_change_changes_nothing(service, pools_dir):
    admin = service.admin()
    before = sorted(p.name for p in pools_dir.iterdir())
    labels_before = node_labels(service.cluster, "node-6")
    bad = [
        (NEW_POOL.replace("node-6", "node-99"), "node-99 does not exist in the cluster"),
        (NEW_POOL.replace("gpu-type: T4-16G", "gpu_type: T4-16G"), "did you mean 'gpu-type'?"),
        (NEW_POOL.replace("name: t4-pool", "name: t4 pool"), "not a valid Kubernetes label value"),
        ("kind: pool\npool: {name: [unclosed\n", "invalid YAML"),
        (NEW_POOL + "placement: random\n", "placement"),
        (NEW_POOL + "---\nkind: quota\nquota: {name: q}\n", "PUT api/v1/quotas"),
        (NEW_POOL + "limits: {max-gpus: -2}\n", "must not be negative"),
        (NEW_POOL + "limits: {max-gpus: 1.5}\n", "must be a whole number"),
        ("", "needs a YAML or JSON body"),
        ('{"kind": "pool", "pool": {"name": "x"}, "nodes": {"node-6": {"gpu-type": 3}}}', "string"),
    ]
    for body, message in bad:
        with pytest.raises(GPUPoolError) as e:
            await admin.apply_pools(body)
        assert e.value.status == 400, body
        assert message in e.value.message, (body, e.value.message)
    with pytest.raises(GPUPoolError) as e:
        await admin.apply_pools("x" * (2 << 20))
    assert e.value.status == 400 and "at most 1048576" in e.value.message
    assert sorted(p.name for p in pools_dir.iterdir()) == before
    assert node_labels(service.cluster, "node-6") == labels_before
    assert "t4-pool" not in service.ctx.state.registry.pools


async def test_deleting_a_pool_unlabels_its_nodes_and_never_stops_servers(service, pools_dir):
    admin = service.admin()
    a = await admin.admit(user="dave", pools=["dev-pool"], gpus=1)
    await start_pod(service.cluster, a, "dave-nb")
    await service.cluster.wait_for(lambda: service.ctx.state.index.servers(pool="dev-pool"))
    with pytest.raises(GPUPoolError) as e:
        await admin.delete_pool("dev-pool")  # the quota document still refers to it
    assert e.value.status == 409 and "unknown pool 'dev-pool'" in e.value.message
    # take dev-pool and compute-pool out of the quotas, then delete them
    quotas = yaml.safe_load((pools_dir / "quotas.yaml").read_text())
    del quotas["pools"]["dev-pool"]
    quotas["default-pools"] = {"fallback": ["default"]}
    await admin.put_quotas(yaml.safe_dump(quotas))
    await admin.delete_pool("compute-pool")
    assert not (pools_dir / "compute-pool.yaml").exists()
    assert "runwhere.ai/pool" not in node_labels(service.cluster, "cpu-node-1")
    result = await admin.delete_pool("dev-pool")
    assert result["unlabeled_nodes"] == ["gpu-node-5"]
    [server] = result["servers_still_running"]
    assert server["name"] == "dave-nb"
    assert "still running there" in result["message"]
    assert service.cluster.pod("default", "dave-nb") is not None
    with pytest.raises(GPUPoolError) as e:
        await admin.delete_pool("dev-pool")
    assert e.value.status == 404


async def test_nodes_and_gpuctl_label_semantics(service):
    admin = service.admin()
    nodes = {n["name"]: n for n in await admin.nodes()}
    assert nodes["gpu-node-1"]["pool"] == "training-pool"
    assert nodes["node-6"]["pool"] == "default"
    service.cluster.cordon("gpu-node-2")
    await service.cluster.wait_for(
        lambda: not service.ctx.state.index.node("gpu-node-2").schedulable
    )
    nodes = {n["name"]: n for n in await admin.nodes(pool="training-pool")}
    assert nodes["gpu-node-2"]["reasons"] == ["cordoned (scheduling disabled)"]
    assert nodes["gpu-node-2"]["status"] == "Ready,SchedulingDisabled"

    result = await admin.label_node("node-6", {"runwhere.ai/pool": "training-pool"})
    assert result["changed"] == {"runwhere.ai/pool": "training-pool"}
    with pytest.raises(GPUPoolError) as e:
        await admin.label_node("node-6", {"runwhere.ai/pool": "inference-pool"})
    assert e.value.status == 409
    assert e.value.message == (
        "'runwhere.ai/pool' already has a value (training-pool), and --overwrite is false"
    )
    await admin.label_node("node-6", {"runwhere.ai/pool": "inference-pool"}, overwrite=True)
    assert await admin.node_labels("node-6", key="runwhere.ai/pool") == {
        "runwhere.ai/pool": "inference-pool"
    }
    await admin.label_node("node-6", {"runwhere.ai/pool": None})
    assert "runwhere.ai/pool" not in node_labels(service.cluster, "node-6")
    with pytest.raises(GPUPoolError) as e:
        await admin.label_node("node-99", {"a": "b"})
    assert e.value.status == 404


async def test_servers_usage_and_user_views(service):
    admin = service.admin()
    a1 = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=4)
    a2 = await admin.admit(user="bob", groups=["ml-research"], pools=["inference-pool"], gpus=1)
    await start_pod(service.cluster, a1, "alice-nb")
    await start_pod(service.cluster, a2, "bob-nb")
    await service.settled()
    servers = await admin.servers(pool="training-pool")
    assert [s["name"] for s in servers] == ["alice-nb"]
    assert [s["name"] for s in await admin.servers()] == ["alice-nb", "bob-nb"]
    with pytest.raises(GPUPoolError) as e:
        await admin.servers(pool="nope")
    assert e.value.status == 404
    usage = await admin.usage()
    assert usage["subjects"] == {"group:ml-research": 5}
    assert usage["users"] == {"alice": 4, "bob": 1}
    assert usage["by_user"]["training-pool"] == {"alice": 4}
    alice = service.user("alice", ["ml-research"])
    assert [s["name"] for s in await alice.servers()] == ["alice-nb"]
    mine = await alice.usage()
    assert mine["gpus"] == 4 and mine["by_pool"] == {"training-pool": 4}
    quotas = await alice.quotas()
    assert quotas["user"] == "alice" and set(quotas["caps"]["groups"]) == {"ml-research"}
    assert quotas["caps"]["groups"]["ml-research"]["used"] == 5
    assert "documents" not in quotas


async def test_quota_changes_apply_live(service, pools_dir):
    admin = service.admin()
    dave = service.user("dave")
    a = await dave.admit(pools=["dev-pool"], gpus=2)  # user-default limit 2 in dev-pool
    with pytest.raises(AdmissionRejected) as e:
        await dave.admit(pools=["dev-pool"], gpus=1)
    assert e.value.skipped == [
        {"pool": "dev-pool", "reason": "you use 2 of your limit of 2 GPUs in this pool"}
    ]
    await dave.release(a["id"])
    quotas = yaml.safe_load((pools_dir / "quotas.yaml").read_text())
    quotas["pools"]["dev-pool"]["user-default"]["limit"] = 1
    result = await admin.put_quotas(yaml.safe_dump(quotas))
    assert result["pools"]["dev-pool"]["user_default"] == {"guaranteed": 0, "limit": 1}
    with pytest.raises(AdmissionRejected):
        await dave.admit(pools=["dev-pool"], gpus=2)
    assert (await dave.admit(pools=["dev-pool"], gpus=1))["pool"] == "dev-pool"
    on_disk = yaml.safe_load((pools_dir / "quotas.yaml").read_text())
    assert on_disk["pools"]["dev-pool"]["user-default"]["limit"] == 1
    for body, message in [
        ("kind: quota\nquota: {name: q}\npools: {nope: {}}\n", "unknown pool 'nope'"),
        ("kind: quota\nquota: {name: q}\ndefault: {gpu: -1}\n", "must not be negative"),
        ("kind: quota\nquota: {name: q}\ndefault: {gpu: 1.5}\n", "whole number"),
        ("kind: quota\nquota: {name: q}\nbogus: 1\n", "unknown key 'bogus'"),
        ("kind: pool\npool: {name: x}\n", "POST api/v1/pools"),
    ]:
        with pytest.raises(GPUPoolError) as e:
            await admin.put_quotas(body)
        assert e.value.status == 400 and message in e.value.message, body
    assert service.ctx.state.registry.quota("dev-pool").user_default.limit == 1


async def test_admission_answers(service):
    admin = service.admin()
    pools = ["inference-pool", "training-pool"]
    a = await admin.admit(user="alice", groups=["ml-research"], pools=pools, gpus=4)
    assert a["pool"] == "inference-pool" and a["over_quota"] is False
    assert a["charged"] == "group:ml-research" and a["skipped"] == []
    assert set(a) >= {"id", "pool", "platform", "over_quota", "skipped", "expires_at"}
    assert a["expires_at"].endswith("Z") and a["gpu_type"] == "A10-24G"
    assert a["overrides"]["nodeSelector"] == {"runwhere.ai/pool": "inference-pool"}
    # alice's own limit in inference-pool is 4 (user-default): on to training-pool
    b = await admin.admit(user="alice", groups=["ml-research"], pools=pools, gpus=4)
    assert b["pool"] == "training-pool"
    assert b["skipped"] == [
        {"pool": "inference-pool", "reason": "you use 4 of your limit of 4 GPUs in this pool"}
    ]
    with pytest.raises(AdmissionRejected) as e:
        await admin.admit(user="dave", pools=["inference-pool"], gpus=4)
    assert e.value.status == 409
    assert e.value.message.startswith("inference-pool: ")
    assert [s["pool"] for s in e.value.skipped] == ["inference-pool"]


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"user": "dave", "pools": ["nope"], "gpus": 1}, 400, "unknown pool 'nope'"),
        ({"user": "dave", "pools": ["dev-pool"], "gpus": -1}, 400, "must not be negative"),
        ({"user": "dave", "pools": ["dev-pool"], "gpus": 99999}, 400, "at most 1024"),
        ({"user": "dave", "pools": ["dev-pool"], "gpus": 0.5}, 400, "whole number"),
        ({"user": "dave", "pools": ["dev-pool"], "gpus": "1"}, 400, "whole number"),
        ({"user": "dave", "pool": ["dev-pool"]}, 400, "unknown key 'pool'; did you mean 'pools'"),
    ],
)
async def test_bad_admission_requests(service, body, status, message):
    admin = service.admin()
    with pytest.raises(GPUPoolError) as e:
        await admin._json("POST", "api/v1/admissions", json_body=body)
    assert e.value.status == status and message in e.value.message
    with pytest.raises(GPUPoolError) as e:
        await admin.request("POST", "api/v1/admissions", text="{not json")
    assert e.value.status == 400 and "not valid JSON" in e.value.message


async def test_no_access_is_403_and_users_admit_only_for_themselves(service):
    admin = service.admin()
    await admin.apply_pools(NEW_POOL)
    dave = service.user("dave")
    with pytest.raises(AdmissionForbidden) as e:
        await dave.admit(pools=["t4-pool"], gpus=1)
    assert e.value.status == 403
    assert e.value.skipped == [{"pool": "t4-pool", "reason": "you don't have access to this pool"}]
    with pytest.raises(AdmissionForbidden) as e:
        await dave.admit(user="alice", pools=["dev-pool"], gpus=1)
    assert "for other users" in e.value.message
    with pytest.raises(AdmissionForbidden) as e:
        await dave.admit(pools=["dev-pool"], gpus=1, groups=["ml-ops"])
    assert "groups" in e.value.message
    # without groups in the request, the service asks the hub (and caches the answer)
    carol = service.hub.user("carol", ["ml-ops"])
    a = await admin.admit(user="carol", pools=["t4-pool"], gpus=1)
    b = await admin.admit(user="carol", pools=["t4-pool"], gpus=1)
    assert a["groups"] == b["groups"] == ["ml-ops"] and carol
    assert service.hub.user_lookups == 1


async def test_release_and_expiry_give_gpus_back(service, monkeypatch):
    admin = service.admin()
    alice = service.user("alice", ["ml-research"])
    bob = service.user("bob", ["ml-research"])
    a = await alice.admit(pools=["dev-pool"], gpus=2)
    assert [x["id"] for x in await alice.admissions()] == [a["id"]]
    assert await bob.admissions() == []
    with pytest.raises(GPUPoolError) as e:
        await bob.release(a["id"])
    assert e.value.status == 403
    assert await alice.release(a["id"]) is True
    assert await alice.release(a["id"]) is False  # already released
    b = await admin.admit(user="alice", groups=["ml-research"], pools=["dev-pool"], gpus=2)
    assert service.ctx.state.reservations.get(b["id"]) is not None
    now = clock.now()
    monkeypatch.setattr(clock, "now", lambda: now + 121)
    service.ctx.desk.sweep()
    assert await admin.admissions() == []
    assert "gpupool_reservations_expired_total 1.0" in await admin.metrics()


async def test_a_pod_that_appears_ends_its_reservation(service):
    admin = service.admin()
    a = await admin.admit(user="dave", pools=["dev-pool"], gpus=1)
    await start_pod(service.cluster, a, "dave-nb", bound=False)
    await service.cluster.wait_for(lambda: service.ctx.state.reservations.get(a["id"]) is None)
    assert await admin.admissions() == []
    assert (await admin.usage())["users"] == {"dave": 1}
    await delete_pod(service.cluster, "dave-nb")
    await service.cluster.wait_for(lambda: not service.ctx.state.index.usage_by_user())


async def test_reclaim_stops_borrowers_through_the_hub(service):
    admin = service.admin()
    cluster = service.cluster
    # dave and carol borrow gpu-node-1 (no guarantee of their own), bob fills gpu-node-2
    d = await admin.admit(user="dave", pools=["training-pool"], gpus=4)
    c = await admin.admit(user="carol", groups=["ml-ops"], pools=["training-pool"], gpus=4)
    assert d["over_quota"] and c["over_quota"] and d["node"] == c["node"] == "gpu-node-1"
    await start_pod(cluster, d, "dave-nb")
    await start_pod(cluster, c, "carol-nb")
    b = await admin.admit(user="bob", groups=["ml-research"], pools=["training-pool"], gpus=8)
    await start_pod(cluster, b, "bob-nb")
    await cluster.wait_for(lambda: not service.ctx.state.reservations)

    async def stop(user, server):
        name = f"{user}-nb"
        cluster.store.delete("pods", "default", name)
        return 202

    service.hub.on_stop = stop
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=4)
    assert a["pool"] == "training-pool" and a["node"] == "gpu-node-1"
    # one of the two borrowers (the newer; these two started in the same second) is stopped
    [victim] = a["reclaimed"]
    assert victim["user"] in ("dave", "carol") and victim["gpus"] == 4
    assert service.hub.stopped == [(victim["user"], "")]
    assert "stopped 1 server borrowing GPUs beyond their quota" in a["message"]
    other = "carol" if victim["user"] == "dave" else "dave"
    assert cluster.pod("default", f"{other}-nb") is not None
    assert "gpupool_reclaimed_servers_total 1.0" in await admin.metrics()


async def test_csv_and_metrics(service):
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2)
    await start_pod(service.cluster, a, "alice-nb")
    with pytest.raises(AdmissionRejected):
        await admin.admit(user="dave", pools=["inference-pool"], gpus=4)
    await service.settled()
    rows = list(csv.DictReader(io.StringIO(await admin.pools_csv())))
    training = next(r for r in rows if r["name"] == "training-pool")
    assert training["gpu_total"] == "17" and training["gpu_used"] == "2"  # with the MIG A100
    assert training["gpu_types"] == "A100-80G"
    nodes = list(csv.DictReader(io.StringIO(await admin.nodes_csv())))
    assert {r["name"] for r in nodes} >= {"gpu-node-1", "node-6"}
    text = await admin.metrics()
    for line in [
        'gpupool_pool_gpus_total{pool="training-pool"} 17.0',
        'gpupool_pool_gpus_used{pool="training-pool"} 2.0',
        'gpupool_pool_gpus_free{pool="training-pool"} 15.0',
        'gpupool_quota_guaranteed_gpus{pool="training-pool",subject="group:ml-research"} 12.0',
        'gpupool_quota_used_gpus{pool="training-pool",subject="group:ml-research"} 2.0',
        'gpupool_admissions_total{result="admitted"} 1.0',
        'gpupool_admissions_total{result="rejected"} 1.0',
        "gpupool_admission_duration_seconds_count 2.0",
    ]:
        assert line in text, line


class Records(logging.Handler):
    """The records of one logger, as a context manager (the service's loggers do not propagate
    to the root logger, where caplog listens)."""

    def __init__(self, name: str):
        super().__init__(logging.DEBUG)
        self.logger = logging.getLogger(name)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> Records:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)


async def test_files_changed_on_disk_are_picked_up_and_bad_ones_ignored(
    start_service, pools_dir: Path
):
    service = await start_service(reload_interval=0.1)
    (pools_dir / "t4.yaml").write_text(NEW_POOL)
    await service.cluster.wait_for(lambda: "t4-pool" in service.ctx.state.registry.pools, 5)
    with Records("jupyter_gpupool.service.registry.changes") as reported:
        (pools_dir / "broken.yaml").write_text("kind: pool\npool: {}\n")
        # the reloader has read the broken file once it says so: only from then on does it
        # prove anything that the pools in force stayed
        await async_wait_for(
            lambda: [r for r in reported.records if "broken.yaml" in r.getMessage()],
            what="the reloader to report broken.yaml",
        )
    assert "does not load; keeping the pools in force" in reported.records[-1].getMessage()
    assert "t4-pool" in service.ctx.state.registry.pools
    with pytest.raises(GPUPoolError) as e:
        await service.admin().apply_pools(NEW_POOL)
    assert e.value.status == 409 and "broken.yaml:2: pool: missing required key" in e.value.message
