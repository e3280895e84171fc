"""GPUPoolSpawner.start() on the simulated cluster, with a scripted service (see conftest.py)."""

from __future__ import annotations

import asyncio
import html
import re
import time

import pytest
from kubernetes_asyncio import client, config
from spawner_fakes import FakeUser, Group
from test_spawner_form import submitted

from jupyter_gpupool.sim.objects.defaults import default_tolerations
from jupyter_gpupool.spawner.errors import OptionsError, SpawnRefused

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def pod_of(cluster, spawner):
    return cluster.pod("default", spawner.pod_name)


def gpupool_labels(pod):
    labels = pod["metadata"]["labels"]
    return {k: v for k, v in labels.items() if k.startswith(("gpupool.", "runwhere.ai/"))}


async def test_a_server_starts_in_its_first_pool_with_labels_and_gpus(
    spawner, sim_cluster, fake_service
):
    spawner.user_options = {"pools": ["training-pool", "inference-pool"], "gpus": 2}
    url = await spawner.start()
    pod = pod_of(sim_cluster, spawner)
    assert url == f"http://{pod['status']['podIP']}:8888"
    assert fake_service.admissions == [
        {
            "pools": ["training-pool", "inference-pool"],
            "gpus": 2,
            "gpu_type": None,
            "server": "",
            "reclaim": True,
            "user": "alice",
            "groups": ["ml-research"],
        }
    ]
    assert pod["spec"]["nodeName"] in ("gpu-node-1", "gpu-node-2")
    assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "training-pool"}
    assert pod["spec"]["tolerations"] == default_tolerations([GPU_TOLERATION])  # + API server's
    container = pod["spec"]["containers"][0]
    assert container["resources"] == {
        "requests": {"nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    assert gpupool_labels(pod) == {
        "gpupool.jupyter.org/pool": "training-pool",
        "runwhere.ai/pool": "training-pool",
        "gpupool.jupyter.org/user": "alice",
        "gpupool.jupyter.org/server": "",
        "gpupool.jupyter.org/gpus": "2",
        "gpupool.jupyter.org/over-quota": "false",
        "gpupool.jupyter.org/charged": "group-ml-research-4b305de5",
        "gpupool.jupyter.org/admission": "adm0",
        "runwhere.ai/job-type": "notebook",
    }
    assert pod["metadata"]["annotations"]["gpupool.jupyter.org/groups"] == "ml-research"
    node = pod["spec"]["nodeName"]
    assert spawner._progress.messages == [
        "admitted to training-pool within quota (2 A100-80G GPUs)",
        f"training-pool, within quota \u00b7 scheduled on node {node} (A100-80G)",
    ]
    # the pool is kept in the state (hub restarts) and shown with the server's options
    assert spawner.get_state()["gpupool"] == {
        "pool": "training-pool",
        "platform": None,
        "gpu_type": "A100-80G",
        "gpus": 2,
        "over_quota": False,
        "charged": "group:ml-research",
        "admission": "adm0",
        "node": node,
        "shape": "whole",
        "shape_text": "2 \u00d7 A100-80G",
        "user_options": {
            "pools": ["training-pool", "inference-pool"],
            "gpus": 2,
            "gpu_type": None,
            "queue": False,
        },
    }
    assert spawner.user_options["pool"] == "training-pool"
    assert fake_service.released == []  # the pod exists: nothing to give back
    await spawner.stop()
    assert pod_of(sim_cluster, spawner) is None


async def test_a_full_first_pool_is_skipped_at_once(spawner, sim_cluster, fake_service):
    fake_service.full = {"training-pool"}
    spawner.user_options = {"pools": ["training-pool", "inference-pool"], "gpus": 2}
    started = time.monotonic()
    await spawner.start()
    assert time.monotonic() - started < 3
    pod = pod_of(sim_cluster, spawner)
    assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "inference-pool"}
    assert len(fake_service.admissions) == 1
    assert spawner._progress.messages[:2] == [
        "skipped training-pool because no node has 2 free GPUs",
        "admitted to inference-pool within quota (2 A10-24G GPUs)",
    ]


async def test_an_unschedulable_pod_falls_back_to_the_next_pool(spawner, sim_cluster, fake_service):
    # the service admits to training-pool, but the scheduler cannot use its nodes
    sim_cluster.cordon("gpu-node-1")
    sim_cluster.cordon("gpu-node-2")
    spawner.user_options = {"pools": ["training-pool", "inference-pool", "dev-pool"], "gpus": 2}
    started = time.monotonic()
    await spawner.start()
    assert time.monotonic() - started < 5  # pool_schedule_timeout is 0.5 s here
    assert [a["pools"] for a in fake_service.admissions] == [
        ["training-pool", "inference-pool", "dev-pool"],
        ["inference-pool", "dev-pool", "training-pool"],  # wrapped around
    ]
    assert fake_service.released == ["adm0"]
    pod = pod_of(sim_cluster, spawner)
    assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "inference-pool"}
    assert gpupool_labels(pod)["gpupool.jupyter.org/admission"] == "adm1"
    messages = spawner._progress.messages
    assert messages[0] == "admitted to training-pool within quota (2 A100-80G GPUs)"
    assert messages[1].startswith(
        'falling back from training-pool to inference-pool because "0/10 nodes are available: '
        "2 node(s) had untolerated taint {node.kubernetes.io/unschedulable: }, "
        "2 node(s) were unschedulable, "
        "3 Insufficient nvidia.com/gpu, "  # the CPU nodes and the MIG node
    )
    assert messages[2] == "admitted to inference-pool within quota (2 A10-24G GPUs)"
    assert spawner.get_state()["gpupool"]["pool"] == "inference-pool"
    # the steps after it are shown with the new decision, which says why not training-pool
    assert spawner._progress.decision.summary.startswith(
        "Admitted to inference-pool within quota (2 A10-24G GPUs); training-pool could not "
        'schedule it ("0/10 nodes are available: 2 node(s) had untolerated taint '
    )


async def test_a_start_asks_over_one_connection_and_closes_it(spawner, sim_cluster, fake_service):
    # launch options, an admission, its release on the fallback and the next admission
    sim_cluster.cordon("gpu-node-1")
    sim_cluster.cordon("gpu-node-2")
    spawner.user_options = {"pools": ["training-pool", "inference-pool"], "gpus": 2}
    await spawner.start()
    assert len(fake_service.admissions) == 2 and fake_service.released == ["adm0"]
    assert fake_service.connections == 1  # counted by the server
    assert not spawner._service.open  # closed when the start was over
    await spawner.stop()
    assert not spawner._service.open


async def test_a_pool_with_its_own_wait(make_spawner, sim_cluster, fake_service):
    sim_cluster.cordon("gpu-node-5")
    spawner = make_spawner(
        pool_schedule_timeout=30, pool_schedule_timeouts={"dev-pool": 0}, start_timeout=10
    )
    spawner.user_options = {"pools": ["dev-pool", "inference-pool"], "gpus": 1}
    started = time.monotonic()
    await spawner.start()
    assert time.monotonic() - started < 4
    assert spawner.get_state()["gpupool"]["pool"] == "inference-pool"


async def test_no_pool_schedules_within_start_timeout(make_spawner, sim_cluster, fake_service):
    for node in ("gpu-node-3", "gpu-node-4"):
        sim_cluster.cordon(node)
    spawner = make_spawner(start_timeout=3, pool_schedule_timeout=1)
    spawner.user_options = {"pools": ["inference-pool"], "gpus": 1}
    with pytest.raises(SpawnRefused) as e:
        await spawner.start()
    assert e.value.status_code == 503
    assert e.value.message.startswith(
        "No pool could schedule your server within 3 seconds. inference-pool: 0/10 nodes"
    )
    # the one pool was retried (wrap-around) and every admission was given back
    assert len(fake_service.admissions) >= 2
    assert fake_service.released == [f"adm{n}" for n in range(len(fake_service.admissions))]
    assert any(
        m.startswith("trying inference-pool again because") for m in spawner._progress.messages
    )
    assert pod_of(sim_cluster, spawner) is None


async def test_all_pools_full_is_a_clear_error_and_no_pod(spawner, sim_cluster, fake_service):
    fake_service.full = {"training-pool", "inference-pool"}
    spawner.user_options = {"gpus": 2}  # the default order
    started = time.monotonic()
    with pytest.raises(SpawnRefused) as e:
        await spawner.start()
    assert time.monotonic() - started < 2
    assert e.value.status_code == 409
    assert e.value.message == (
        "No pool can take your server now. training-pool: no node has 2 free GPUs; "
        "inference-pool: no node has 2 free GPUs"
    )
    assert fake_service.admissions[0]["pools"] == ["training-pool", "inference-pool"]
    assert pod_of(sim_cluster, spawner) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pools": ["nope"]}, "there is no pool named 'nope'"),
        ({"pools": ["secret-pool"]}, "you may not use the pool secret-pool"),
        ({"gpus": "2"}, "gpus must be a whole number of GPUs, not '2'"),
        ({"pools": ["compute-pool"], "gpus": 1}, "compute-pool has no GPUs"),
        ({"pools": [f"p{n}" for n in range(9)]}, "at most 8 pools may be listed"),
    ],
)
async def test_invalid_options_are_refused_before_anything_is_asked(
    spawner, sim_cluster, fake_service, options, message
):
    spawner.user_options = options
    with pytest.raises(OptionsError) as e:
        await spawner.start()
    assert e.value.status_code == 400 and e.value.message.startswith(message)
    assert fake_service.admissions == [] and pod_of(sim_cluster, spawner) is None


async def test_the_service_down_fails_closed(spawner, sim_cluster, fake_service):
    fake_service.down = True
    spawner.user_options = {"pools": ["dev-pool"], "gpus": 1}
    with pytest.raises(SpawnRefused) as e:
        await spawner.start()
    assert e.value.status_code == 503
    assert e.value.message.startswith("The GPU pool service is not answering (Service Unavailable)")
    assert pod_of(sim_cluster, spawner) is None


async def test_the_service_failing_at_admission_fails_closed(spawner, sim_cluster, fake_service):
    fake_service.admissions_down = True
    spawner.user_options = {"pools": ["dev-pool"], "gpus": 1}
    with pytest.raises(SpawnRefused) as e:
        await spawner.start()
    assert e.value.status_code == 503 and "not answering" in e.value.message
    assert pod_of(sim_cluster, spawner) is None


async def test_fail_open_starts_without_pools(make_spawner, sim_cluster, fake_service):
    fake_service.down = True
    spawner = make_spawner(fail_open=True)
    spawner.user_options = {"pools": ["dev-pool"], "gpus": 1}
    await spawner.start()
    pod = pod_of(sim_cluster, spawner)
    assert pod["spec"].get("nodeSelector") in (None, {})
    assert "nvidia.com/gpu" not in str(pod["spec"]["containers"][0].get("resources"))
    assert spawner._progress.messages[0].startswith("the GPU pool service is not answering")
    assert "gpupool" not in spawner.get_state()


async def test_nothing_leaks_from_one_start_to_the_next(spawner, sim_cluster, fake_service):
    spawner.user_options = {"pools": ["training-pool"], "gpus": 2}
    await spawner.start()
    await spawner.stop()
    spawner.clear_state()  # as JupyterHub does after a stop and before a start
    spawner.user_options = {"pools": ["compute-pool"], "gpus": 0}
    await spawner.start()
    pod = pod_of(sim_cluster, spawner)
    assert pod["spec"]["nodeName"] in ("cpu-node-1", "cpu-node-2")
    assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "compute-pool"}
    assert pod["spec"]["tolerations"] == default_tolerations([])  # only the API server's
    container = pod["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in str(container.get("resources"))
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "none"
    assert gpupool_labels(pod)["gpupool.jupyter.org/gpus"] == "0"
    assert spawner.get_state()["gpupool"]["pool"] == "compute-pool"


async def test_a_hub_restart_keeps_knowing_the_pool(make_spawner, sim_cluster, fake_service):
    first = make_spawner()
    first.user_options = {"pools": ["dev-pool"], "gpus": 1}
    await first.start()
    state = first.get_state()
    # the hub restarts: a new spawner, with the options saved in its database, loads the state
    again = make_spawner()
    again.user_options = {"pools": ["dev-pool"], "gpus": 1}
    again.load_state(state)
    assert again.get_state()["gpupool"] == state["gpupool"]
    assert again.user_options == {"pools": ["dev-pool"], "gpus": 1, "pool": "dev-pool"}
    again.server.ip, again.server.port = pod_of(sim_cluster, first)["status"]["podIP"], 8888
    assert await again.poll() is None  # still running, where it was
    again.clear_state()
    assert "gpupool" not in again.get_state()


async def test_progress_tells_each_step(spawner, sim_cluster, fake_service):
    fake_service.full = {"training-pool"}
    spawner.user_options = {"pools": ["training-pool", "dev-pool"], "gpus": 1}
    start = spawner.start()
    messages = [e["message"] async for e in spawner.progress()]
    await start
    assert messages[0] == "skipped training-pool because no node has 2 free GPUs"
    assert messages[1] == (
        "admitted to dev-pool over quota (1 RTX4090-24G GPU): this server borrows idle GPUs "
        "and may be stopped (reclaimed) when their owners need them back"
    )
    assert (
        "dev-pool, over quota: may be reclaimed \u00b7 scheduled on node gpu-node-5 (RTX4090-24G)"
        in messages
    )
    assert any("Successfully assigned default/jupyter-alice to gpu-node-5" in m for m in messages)


async def test_the_form_shows_the_pools_and_reads_them_back(spawner, fake_service):
    fields = submitted(await spawner.get_options_form()).fields
    assert fields == {
        "priority.training-pool": ["1"],  # the group's default order
        "priority.inference-pool": ["2"],
        "priority.compute-pool": [""],
        "priority.dev-pool": [""],
        # each GPU pool's one shape, whole GPUs (issue 29): sent as the plain pool name
        "shape.training-pool": ["whole"],
        "shape.inference-pool": ["whole"],
        "shape.dev-pool": ["whole"],
        "gpus": ["1"],  # default_gpus
        "gpu_type": [""],
        "queue": ["off"],  # not waiting in line (queue_by_default)
    }
    form = {
        "priority.training-pool": ["2"],
        "priority.dev-pool": ["1"],
        "priority.inference-pool": [""],
        "priority.compute-pool": [""],
        "gpus": ["1"],
        "gpu_type": [""],
    }
    options = await spawner.run_options_from_form(form)
    assert options == {
        "pools": ["dev-pool", "training-pool"],
        "gpus": 1,
        "gpu_type": None,
        "queue": False,
    }
    spawner.user_options = options
    fields = submitted(await spawner.get_options_form()).fields  # the last choice comes back
    assert (fields["priority.dev-pool"], fields["priority.training-pool"]) == (["1"], ["2"])
    with pytest.raises(OptionsError) as e:
        await spawner.run_options_from_form({**form, "gpus": ["9"]})
    assert e.value.message.startswith("no pool you chose allows a server with 9 GPUs")


async def test_the_form_when_the_service_is_down(spawner, fake_service):
    fake_service.down = True
    html = await spawner.get_options_form()
    assert html.startswith('<div class="alert alert-warning">The GPU pool service is not answering')


async def test_kubespawner_profiles_sit_beside_the_pools(make_spawner, sim_cluster, fake_service):
    profiles = [
        {"display_name": "Minimal", "slug": "minimal", "default": True},
        {
            "display_name": "Big memory",
            "slug": "bigmem",
            "kubespawner_override": {"mem_limit": "8G", "node_selector": {"disk": "ssd"}},
        },
    ]
    for name in ("cpu-node-1", "cpu-node-2"):
        sim_cluster.label_node(name, "disk", "ssd")
    spawner = make_spawner(profile_list=profiles)
    html = await spawner.get_options_form()
    assert 'id="kubespawner-profiles-list"' in html and "priority.compute-pool" in html
    form = {"profile": ["bigmem"], "priority.compute-pool": ["1"], "gpus": ["0"]}
    options = await spawner.run_options_from_form(form)
    assert options == {
        "profile": "bigmem",
        "pools": ["compute-pool"],
        "gpus": 0,
        "gpu_type": None,
        "queue": False,
    }
    spawner.user_options = options
    await spawner.start()
    pod = pod_of(sim_cluster, spawner)
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd", "runwhere.ai/pool": "compute-pool"}
    # KubeSpawner sends 8G as a number of bytes; the API server stores quantities as text
    assert pod["spec"]["containers"][0]["resources"]["limits"]["memory"] == str(8 * 2**30)


async def test_a_user_name_with_braces_is_written_as_it_is(make_spawner, sim_cluster, fake_service):
    spawner = make_spawner(user=FakeUser(name="a{b}"))
    spawner.user_options = {"pools": ["compute-pool"], "gpus": 0}
    await asyncio.wait_for(spawner.start(), 15)
    pod = pod_of(sim_cluster, spawner)
    assert pod["metadata"]["annotations"]["gpupool.jupyter.org/user"] == "a{b}"


async def test_the_server_is_told_its_pool_in_its_environment(spawner, sim_cluster, fake_service):
    spawner.user_options = {"pools": ["training-pool"], "gpus": 2}
    await spawner.start()
    pod = pod_of(sim_cluster, spawner)
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    values = {k: v.get("value") for k, v in env.items() if k.startswith("GPUPOOL_")}
    assert values == {
        "GPUPOOL_POOL": "training-pool",
        "GPUPOOL_PLATFORM": "",
        "GPUPOOL_GPUS": "2",
        "GPUPOOL_GPU_TYPE": "A100-80G",
        "GPUPOOL_OVER_QUOTA": "false",
        "GPUPOOL_ADMISSION": "adm0",
        "GPUPOOL_NODE": None,
        "GPUPOOL_SERVICE_URL": spawner.service_url,
        # the service says the shape of every admission, whole GPUs included (issue 29)
        "GPUPOOL_SHAPE": "whole",
        "GPUPOOL_SHAPE_TEXT": "2 \u00d7 A100-80G",
        "GPUPOOL_GPU_EQUIVALENTS": "2",
    }
    assert env["GPUPOOL_NODE"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    # and its token may use the pools and start, follow and stop the user's servers
    assert "custom:gpupool:use" in spawner.server_token_scopes
    assert {"servers!user", "read:servers!user"} <= set(spawner.server_token_scopes)


async def test_the_notebook_service_url_is_configurable(make_spawner, sim_cluster, fake_service):
    spawner = make_spawner(notebook_service_url="http://proxy-public/services/gpupool")
    spawner.user_options = {"pools": ["dev-pool"], "gpus": 0}
    await spawner.start()
    env = {
        e["name"]: e.get("value")
        for e in pod_of(sim_cluster, spawner)["spec"]["containers"][0]["env"]
    }
    assert env["GPUPOOL_SERVICE_URL"] == "http://proxy-public/services/gpupool/"
    assert (env["GPUPOOL_POOL"], env["GPUPOOL_GPUS"], env["GPUPOOL_GPU_TYPE"]) == (
        "dev-pool",
        "0",
        "",
    )


DECISION_HTML = re.compile(r'^<span class="gpupool-decision-again">(.*)<br></span>(.*)$')


async def test_every_step_after_the_admission_shows_the_pool_decision(
    spawner, sim_cluster, fake_service
):
    # JupyterHub's page shows the latest event's html_message above the bar: the pod's events
    # come last, so each carries the decision (and the event log hides the repeat)
    fake_service.full = {"training-pool"}
    spawner.user_options = {"pools": ["training-pool", "dev-pool"], "gpus": 1}
    start = spawner.start()
    events = [e async for e in spawner.progress()]
    await start
    decision = (
        "Admitted to dev-pool over quota (1 RTX4090-24G GPU): this server borrows idle GPUs and "
        "may be stopped (reclaimed) when their owners need them back; skipped training-pool "
        "because no node has 2 free GPUs"
    )
    admitted = next(i for i, e in enumerate(events) if e["message"].startswith("admitted to"))
    assert events[admitted]["html_message"] == html.escape(events[admitted]["message"]) + (
        "<style>#progress-log .gpupool-decision-again { display: none; }</style>"
    )
    later = events[admitted + 1 :]
    pod_events = [e for e in later if "raw_event" in e]  # KubeSpawner's, from the cluster
    assert pod_events and pod_events[-1]["raw_event"]["reason"] == "Started"
    for event in later:
        shown = DECISION_HTML.match(event.get("html_message", ""))
        assert shown, event
        assert html.unescape(shown.group(1)) == decision
        assert event["message"].startswith("dev-pool, over quota: may be reclaimed \u00b7 ")
    started = pod_events[-1]
    assert started["message"].endswith("[Normal] Started container notebook")
    assert (
        html.unescape(DECISION_HTML.match(started["html_message"]).group(2))
        == (started["message"].split(" \u00b7 ", 1)[1])
    )
    # the hub's ready event says where the server runs, on which node the cluster put it
    node = pod_of(sim_cluster, spawner)["spec"]["nodeName"]
    url = "/user/alice/"
    ready = spawner.progress_ready_hook(
        spawner,
        {
            "progress": 100,
            "ready": True,
            "message": f"Server ready at {url}",
            "html_message": f'Server ready at <a href="{url}">{url}</a>',
            "url": url,
        },
    )
    where = (
        f"in dev-pool over quota (1 RTX4090-24G GPU on node {node}): it borrows idle GPUs and "
        "may be stopped (reclaimed) when their owners need them back"
    )
    assert ready["message"] == (
        f"Server ready at {url} {where}; skipped training-pool because no node has 2 free GPUs"
    )
    assert ready["html_message"] == (
        f'Server ready at <a href="{url}">{url}</a> {html.escape(where)}'
        "<br>skipped training-pool because no node has 2 free GPUs"
    )
    assert ready["ready"] and ready["url"] == url


async def test_a_refused_form_comes_back_as_it_was_sent(spawner, fake_service):
    spawner.user_options = {"pools": ["training-pool"], "gpus": 1, "gpu_type": None}  # last start
    # a priority that is not a number: JupyterHub answers the 400 with the form again
    sent = {
        "priority.dev-pool": ["2"],
        "priority.compute-pool": ["1"],
        "priority.inference-pool": ["third"],
        "priority.training-pool": [""],
        "gpus": ["3"],
        "gpu_type": [""],
    }
    with pytest.raises(OptionsError):
        await spawner.run_options_from_form(sent)
    fields = submitted(await spawner.get_options_form()).fields
    assert fields == {
        "priority.compute-pool": ["1"],
        "priority.dev-pool": ["2"],
        "priority.inference-pool": ["3"],  # kept, after the numbered ones
        "priority.training-pool": [""],
        "shape.dev-pool": ["whole"],
        "shape.inference-pool": ["whole"],
        "shape.training-pool": ["whole"],
        "gpus": ["3"],
        "gpu_type": [""],
        "queue": ["off"],
    }
    # options the check refuses (a CPU pool with GPUs): the pools, their order and the count
    sent = {"priority.compute-pool": ["1"], "priority.dev-pool": [""], "gpus": ["2"]}
    with pytest.raises(OptionsError) as e:
        await spawner.run_options_from_form(sent)
    assert e.value.message.startswith("compute-pool has no GPUs")
    page = await spawner.get_options_form()
    fields = submitted(page).fields
    assert fields["priority.compute-pool"] == ["1"] and fields["gpus"] == ["2"]
    assert {
        fields[f"priority.{p}"][0] for p in ("dev-pool", "training-pool", "inference-pool")
    } == {""}
    # the next visit (no refusal) starts from the last start again
    fields = submitted(await spawner.get_options_form()).fields
    assert fields["priority.training-pool"] == ["1"] and fields["gpus"] == ["1"]


async def test_with_no_pool_chosen_the_form_names_the_default_order(spawner, fake_service):
    # a start with no pool (refused or not) comes back with none ticked, and the form says
    # which order will be used: ml-research's, training-pool then inference-pool
    spawner.user_options = {"pools": [], "gpus": 2, "gpu_type": None}
    page = await spawner.get_options_form()
    fields = submitted(page).fields
    assert all(v == [""] for k, v in fields.items() if k.startswith("priority."))
    assert fields["gpus"] == ["2"]
    note = re.search(r'<p class="form-text gpupool-default-note"[^>]*>([^<]*)</p>', page)
    assert note and "hidden" not in note.group(0), page
    assert note.group(1) == (
        "No pool is chosen, so the default order for your groups will be used: "
        "training-pool, then inference-pool."
    )
    # with a pool chosen, the note is there for the script to show, but hidden
    spawner.user_options = {"pools": ["dev-pool"], "gpus": 1}
    page = await spawner.get_options_form()
    assert re.search(r'<p class="form-text gpupool-default-note"[^>]*hidden', page)


async def test_notebook_pods_are_notebooks_to_gpuctl(make_spawner, sim_cluster, fake_service):
    # gpuctl's get jobs reads the kind from runwhere.ai/job-type: ask the cluster's API as it does
    alice = make_spawner()
    alice.user_options = {"pools": ["dev-pool"], "gpus": 1}
    await alice.start()
    fake_service.down = True  # and a server started without the service (fail_open)
    bob = make_spawner(user=FakeUser(name="bob", groups=[Group("ml-research")]), fail_open=True)
    bob.user_options = {}
    await bob.start()
    cfg = client.Configuration()
    await config.load_kube_config(config_file=sim_cluster.kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        pods = await client.CoreV1Api(api).list_namespaced_pod(
            "default", label_selector="runwhere.ai/job-type=notebook"
        )
    assert sorted(p.metadata.name for p in pods.items) == ["jupyter-alice", "jupyter-bob"]
