"""The gpupool service's answers, made by the service's own code for the test fakes.

The spawner and notebook tests talk to scripted stand-ins of the service. Their answers are built
here from real core objects (a registry loaded from pool documents, a usage index fed Kubernetes
objects, reservations, admission decisions) by the same view functions the service's handlers
call, so a change to the shape of an answer changes the fakes too. The little the handlers add
around a view (error bodies, the ``servers`` list) is checked against the running service by
``tests/service/test_fake_answers.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from jupyter_gpupool.core.admission.walk import AdmissionRequest, Decision, Skip, decide
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.service import views
from jupyter_gpupool.service.admission.desk import AdmissionDesk
from jupyter_gpupool.service.admission.outcome import Outcome
from jupyter_gpupool.service.bodies import parse_admission
from jupyter_gpupool.service.errors import ApiError
from jupyter_gpupool.service.monitoring.metrics import Metrics
from jupyter_gpupool.service.monitoring.polling import Utilization
from jupyter_gpupool.service.state import ServiceState
from jupyter_gpupool.service.web.admissionapi import admitted_body
from jupyter_gpupool.sim.cluster import node_object
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

JSON = dict[str, Any]
#: Reservations of the fakes outlive any test (no watch ever sees their pods).
HELD_UNTIL = 4102444800.0  # 2100-01-01
CREATED = "2024-01-01T00:00:00Z"


def example_nodes(names: Collection[str] | None = None) -> list[JSON]:
    """Nodes of the demo's cluster (``examples/cluster.yaml``) as its kubelets register them."""
    return [
        node_object(spec, 0.0)
        for spec in example_cluster_spec().nodes
        if names is None or spec.name in names
    ]


def service_state(documents: str, nodes: Iterable[Mapping[str, Any]]) -> ServiceState:
    """The service's state for these pool and quota documents (YAML) and nodes."""
    state = ServiceState(load_string(documents, "<fake>"), summary_ttl=0)
    state.index.reset(nodes=list(nodes), pods=[])
    return state


def run_server(
    state: ServiceState,
    *,
    name: str,
    user: str,
    groups: Sequence[str],
    pool: str,
    gpus: int,
    node: str,
    admission_id: str,
    server: str = "",
) -> JSON:
    """Admit a server as the service would and put its pod, running on ``node``, in the index.

    The pod carries what the admission's overrides say (labels, annotations, GPU requests), as
    the spawner writes them; the node is the scenario's choice, as the scheduler's would be.
    """
    request = AdmissionRequest(
        user=user,
        groups=tuple(groups),
        pools=(pool,),
        gpus=gpus,
        server=server,
        admission_id=admission_id,
    )
    decision = decide(request, state.admission_state())
    if not decision.admitted:
        raise ValueError(f"the scenario's server {name} is not admitted: {decision.message}")
    o = decision.overrides
    container: JSON = {"name": "notebook", "image": "quay.io/jupyter/base-notebook"}
    if "resources" in o:
        container["resources"] = o["resources"]
    pod = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": dict(o["labels"]),
            "annotations": dict(o["annotations"]),
            "creationTimestamp": CREATED,
        },
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"phase": "Running"},
    }
    state.index.apply_pod("ADDED", pod)
    return pod


# --- answers -------------------------------------------------------------------------------------


def error_body(status: int, message: str, **extra: Any) -> JSON:
    """The JSON of an error answer (``APIHandler.write_error`` of an :class:`ApiError`)."""
    return ApiError(status, message, **extra).body()


def launch_options(state: ServiceState, user: str, groups: Sequence[str], max_gpus: int) -> JSON:
    """``GET api/v1/launch-options`` for ``user`` (as ``LaunchOptionsHandler`` builds it)."""
    return views.launch_options(
        state.pool_summaries(user, groups),
        state.admission_state(),
        state.index,
        user,
        groups,
        max_gpus,
    )


def servers(state: ServiceState, user: str | None = None) -> JSON:
    """``GET api/v1/servers`` of a user (everyone's for ``None``), as ``ServersHandler``."""
    rows = state.index.servers(user=user)
    return views.servers_answer(rows, len(rows), state.index, Utilization(None, 30.0))


def decide_with_full(
    request: AdmissionRequest,
    state: ServiceState,
    full: Collection[str] = (),
    full_reason: str = "",
) -> Decision:
    """The service's decision, except that the pools in ``full`` are skipped with
    ``full_reason`` (a test's way of saying "someone else took them a moment ago")."""
    pools = request.pools or state.registry.default_pool_order(request.groups)
    skipped: list[Skip] = []
    for name in dict.fromkeys(pools):
        if name in full:
            skipped.append(Skip(name, full_reason))
            continue
        decision = decide(replace(request, pools=(name,)), state.admission_state())
        if decision.admitted or decision.reclaim is not None:
            return replace(decision, skipped=(*skipped, *decision.skipped))
        skipped.extend(decision.skipped)
    return Decision(admitted=False, request=request, skipped=tuple(skipped))


def admission(
    state: ServiceState,
    body: Any,
    *,
    admission_id: str,
    max_gpus: int,
    full: Collection[str] = (),
    full_reason: str = "",
) -> tuple[int, JSON]:
    """``POST api/v1/admissions`` from an admin caller (the hub's spawner) that names the user
    and their groups: ``(status, JSON)``. The body is checked by the service's own parser; an
    admitted request holds a reservation in ``state`` until :func:`release`."""
    try:
        parsed = parse_admission(body, max_gpus=max_gpus)
    except ApiError as e:
        return e.status, e.body()
    if parsed.user is None or parsed.groups is None:
        return 400, error_body(400, "the fake service wants the user and groups in the body")
    request = AdmissionRequest(
        user=parsed.user,
        groups=parsed.groups,
        pools=parsed.pools,
        shapes=parsed.shapes,
        gpus=parsed.gpus,
        gpu_type=parsed.gpu_type,
        server=parsed.server,
        reclaim=parsed.reclaim,
        admission_id=admission_id,
    )
    try:
        # unknown pools (400) and no pool open to the user (403), as the service's desk says
        AdmissionDesk(state, metrics=Metrics(lambda: state)).check_pools(request)
    except ApiError as e:
        return e.status, e.body()
    decision = decide_with_full(request, state, full, full_reason)
    if decision.admitted:
        reservation = decision.reservation(HELD_UNTIL)
        state.reservations.add(reservation)
        return 201, admitted_body(Outcome(201, decision, reservation=reservation))
    # as AdmissionsHandler.post answers a refusal (nothing is reclaimed in a fake)
    outcome = Outcome(409, decision)
    return 409, error_body(
        409,
        outcome.message,
        skipped=views.skipped(decision),
        reclaimed=[views.victim_row(v) for v in outcome.reclaimed],
    )


def release(state: ServiceState, admission_id: str) -> tuple[int, JSON]:
    """``DELETE api/v1/admissions/{id}`` from an admin caller: ``(status, JSON)``."""
    res = state.reservations.get(admission_id)
    if res is None:
        return 404, error_body(
            404, f"no admission {admission_id!r} is held (released, expired or started)"
        )
    state.reservations.release(admission_id)
    return 200, {"released": res.admission_id, **views.reservation_row(res)}
