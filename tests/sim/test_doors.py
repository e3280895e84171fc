"""The simulated cluster's door, walked through as an attacker would (issue 12, door 1).

In process mode the kubelet runs a pod's command on this machine, so whoever can create a pod can
run anything here. Attackers: any local process (no token, or a guessed one), and any web page the
demo user visits (its request carries an ``Origin`` header, and a cross-origin ``text/plain`` POST
needs no preflight). Every refusal is checked twice: by the answer, and by what the cluster holds
afterwards, read with the right token over HTTP as a client would.
"""

import base64
import json
import os
import stat
import sys

import kubernetes_asyncio.client
import kubernetes_asyncio.config
import pytest
import tornado.httpclient
import yaml

from jupyter_gpupool.sim import SimCluster, kubeconfig_text, parse_cluster, sim_auth_headers

EVIL = "http://evil.example"


def marker_pod(name, marker):
    """A pod whose command leaves a file behind: proof that the kubelet ran it."""
    code = f"open({str(marker)!r}, 'w').write('ran')"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "c", "image": "python", "command": [sys.executable, "-c", code]}
            ]
        },
    }


async def call(cluster, method, path, body=None, headers=None):
    """One raw HTTP request, as curl or a web page would make it; returns (code, parsed body)."""
    data = None
    if body is not None:
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    resp = await tornado.httpclient.AsyncHTTPClient().fetch(
        cluster.url + path,
        method=method,
        body=data,
        headers=headers or {},
        raise_error=False,
        allow_nonstandard_methods=True,
        ssl_options=cluster.ssl_context,
    )
    text = resp.body.decode() if resp.body else ""
    try:
        return resp.code, json.loads(text)
    except ValueError:
        return resp.code, text


async def pod_names(cluster):
    """The pods the cluster holds, listed with its own token as any client would."""
    code, body = await call(cluster, "GET", "/api/v1/pods", headers=cluster.auth_headers)
    assert code == 200, body
    return sorted(p["metadata"]["name"] for p in body["items"])


def status_of(body, code, reason):
    """The parts of a Status object a client relies on."""
    return (body["kind"], body["status"], body["code"], body["reason"]) == (
        "Status",
        "Failure",
        code,
        reason,
    )


@pytest.fixture
async def running_cluster():
    """A cluster whose kubelet runs pods' commands, as the demo's does."""
    async with SimCluster(parse_cluster("nodes:\n  - {name: n1}\n"), run_processes=True) as c:
        yield c


async def test_a_pod_posted_without_the_token_is_refused_and_never_runs(running_cluster, tmp_path):
    cluster = running_cluster
    attack = tmp_path / "attack"
    code, body = await call(
        cluster,
        "POST",
        "/api/v1/namespaces/default/pods",
        marker_pod("attack", attack),
        {"Content-Type": "application/json"},
    )
    assert (
        code == 401 and status_of(body, 401, "Unauthorized") and body["message"] == "Unauthorized"
    )

    # The same request with the token does run its command: the attack was a real one.
    allowed = tmp_path / "allowed"
    headers = {"Content-Type": "application/json", **cluster.auth_headers}
    pod = marker_pod("allowed", allowed)
    code, body = await call(cluster, "POST", "/api/v1/namespaces/default/pods", pod, headers)
    assert code == 201, body
    await cluster.wait_for(lambda: allowed.exists())
    assert not attack.exists()
    assert await pod_names(cluster) == ["allowed"]


# (what the attacker sends besides a JSON pod, the answer)
ATTACKS = {
    "no token": ({"Content-Type": "application/json"}, 401, "Unauthorized"),
    "empty bearer": (
        {"Content-Type": "application/json", "Authorization": "Bearer "},
        401,
        "Unauthorized",
    ),
    "basic auth": (
        {"Content-Type": "application/json", "Authorization": "Basic YWRtaW46YWRtaW4="},
        401,
        "Unauthorized",
    ),
    "a guessed token": (
        {"Content-Type": "application/json", "Authorization": "Bearer gpupool-sim"},
        403,
        "Forbidden",
    ),
    "browser, no preflight": ({"Content-Type": "text/plain", "Origin": EVIL}, 403, "Forbidden"),
    "text/plain, no token": ({"Content-Type": "text/plain"}, 401, "Unauthorized"),
}


@pytest.mark.parametrize("attack", ATTACKS)
async def test_pod_creation_attacks_are_refused_and_leave_no_pod(sim_cluster, attack):
    headers, code, reason = ATTACKS[attack]
    got, body = await call(
        sim_cluster, "POST", "/api/v1/namespaces/default/pods", marker_pod("p", "/x"), headers
    )
    assert (got, status_of(body, code, reason)) == (code, True), body
    assert await pod_names(sim_cluster) == []
    assert sim_cluster.store.find("pods", "default", "p") is None


async def test_the_right_token_from_a_web_page_is_still_refused(sim_cluster):
    """A page cannot read the token, but a user might paste it somewhere: Origin alone refuses."""
    for ctype in ("application/json", "text/plain"):
        headers = {"Content-Type": ctype, "Origin": EVIL, **sim_cluster.auth_headers}
        code, body = await call(
            sim_cluster, "POST", "/api/v1/namespaces/default/pods", marker_pod("p", "/x"), headers
        )
        assert code == 403 and status_of(body, 403, "Forbidden"), body
        assert "Origin" in body["message"]
    assert await pod_names(sim_cluster) == []


async def test_a_text_plain_post_with_the_token_is_refused_as_an_unsupported_media_type(
    sim_cluster,
):
    headers = {"Content-Type": "text/plain;charset=UTF-8", **sim_cluster.auth_headers}
    code, body = await call(
        sim_cluster, "POST", "/api/v1/namespaces/default/pods", marker_pod("p", "/x"), headers
    )
    assert code == 415 and status_of(body, 415, "UnsupportedMediaType"), body
    assert body["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml"
    )
    assert await pod_names(sim_cluster) == []


CM = "/api/v1/namespaces/default/configmaps"
PATCH_TYPES = (
    "application/json-patch+json, application/merge-patch+json, "
    "application/strategic-merge-patch+json"
)


@pytest.mark.parametrize(
    ("method", "path", "ctype", "accepted"),
    [
        ("POST", CM, "text/plain", "application/json, application/yaml"),
        ("POST", CM, "application/x-www-form-urlencoded", "application/json, application/yaml"),
        ("POST", CM, "multipart/form-data; boundary=x", "application/json, application/yaml"),
        ("POST", CM, "application/vnd.kubernetes.protobuf", "application/json, application/yaml"),
        ("POST", CM, "text/yaml", "application/json, application/yaml"),
        ("PUT", CM + "/cm", "text/plain", "application/json, application/yaml"),
        ("PATCH", CM + "/cm", "text/plain", PATCH_TYPES),
        ("PATCH", CM + "/cm", "application/json", PATCH_TYPES),
        ("PATCH", CM + "/cm", "", PATCH_TYPES),
        ("PATCH", CM + "/cm", "application/apply-patch+yaml", PATCH_TYPES),
        ("DELETE", CM + "/cm", "text/plain", "application/json, application/yaml"),
    ],
)
async def test_each_verb_takes_only_the_media_types_kubernetes_takes(
    sim_cluster, method, path, ctype, accepted
):
    cm = {"metadata": {"name": "cm"}, "data": {"k": "v"}}
    sim_cluster.store.create("configmaps", "default", cm)
    before = sim_cluster.store.get("configmaps", "default", "cm")
    body = {"metadata": {"name": "cm2"}, "data": {"k": "changed"}}
    if method == "PUT":
        body = {**before, "data": {"k": "changed"}}
    elif method == "DELETE":
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    if ctype.startswith("multipart/"):  # what an HTML form on a web page posts
        part = 'Content-Disposition: form-data; name="a"'
        body = f"--x\r\n{part}\r\n\r\n{json.dumps(body)}\r\n--x--\r\n"
    headers = {**sim_cluster.auth_headers, **({"Content-Type": ctype} if ctype else {})}
    code, answer = await call(sim_cluster, method, path, body, headers)
    assert code == 415 and status_of(answer, 415, "UnsupportedMediaType"), answer
    assert answer["message"].endswith("accepted media types include: " + accepted)
    # Nothing changed.
    assert sim_cluster.store.get("configmaps", "default", "cm") == before
    assert sim_cluster.store.find("configmaps", "default", "cm2") is None


async def test_the_accepted_media_types_still_work_over_raw_http(sim_cluster):
    auth = sim_cluster.auth_headers
    yaml_cm = "metadata:\n  name: from-yaml\ndata:\n  k: v\n"
    code, body = await call(
        sim_cluster, "POST", CM, yaml_cm, {**auth, "Content-Type": "application/yaml"}
    )
    assert code == 201 and body["data"] == {"k": "v"}, body
    json_cm = {"metadata": {"name": "cm"}, "data": {"k": "v"}}
    json_ctype = {**auth, "Content-Type": "Application/JSON; charset=utf-8"}
    code, body = await call(sim_cluster, "POST", CM, json_cm, json_ctype)
    assert code == 201, body
    # No Content-Type means JSON, as on the real API server.
    code, body = await call(sim_cluster, "PUT", CM + "/cm", {**body, "data": {"k": "w"}}, auth)
    assert code == 200 and body["data"] == {"k": "w"}, body
    patch = {**auth, "Content-Type": "application/merge-patch+json"}
    code, body = await call(sim_cluster, "PATCH", CM + "/cm", {"data": {"k": "x"}}, patch)
    assert code == 200 and body["data"] == {"k": "x"}, body
    code, body = await call(sim_cluster, "DELETE", CM + "/cm", headers=auth)
    assert code == 200, body
    assert sim_cluster.store.find("configmaps", "default", "cm") is None


async def test_a_yaml_body_with_aliases_is_refused_before_it_expands(sim_cluster):
    """Nested aliases ("billion laughs") would expand in the event loop that serves everyone."""
    laughs = ["metadata: {name: lol}", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        laughs.append(f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join(['*' + chr(96 + i)] * 9)}]")
    yaml_ctype = {**sim_cluster.auth_headers, "Content-Type": "application/yaml"}
    code, body = await call(sim_cluster, "POST", CM, "\n".join(laughs) + "\n", yaml_ctype)
    assert code == 400 and status_of(body, 400, "BadRequest"), body
    assert "anchors (&a) are not accepted" in body["message"]
    assert sim_cluster.store.find("configmaps", "default", "lol") is None


@pytest.mark.parametrize(
    "path",
    ["/version", "/api", "/api/v1", "/apis", "/openapi/v3", "/openapi/v3/api/v1", "/nowhere"],
)
async def test_discovery_and_unknown_paths_need_the_token(sim_cluster, path):
    code, body = await call(sim_cluster, "GET", path)
    assert code == 401 and status_of(body, 401, "Unauthorized"), body
    code, _ = await call(sim_cluster, "GET", path, headers={"Authorization": "Bearer x"})
    assert code == 403
    code, _ = await call(sim_cluster, "GET", path, headers=sim_cluster.auth_headers)
    assert code == (404 if path == "/nowhere" else 200)


async def test_health_probes_answer_without_a_token_but_not_to_web_pages(sim_cluster):
    for path in ("/healthz", "/readyz", "/livez"):
        assert await call(sim_cluster, "GET", path) == (200, "ok")
        code, _ = await call(sim_cluster, "GET", path, headers={"Origin": EVIL})
        assert code == 403


async def test_watches_and_lists_need_the_token(sim_cluster):
    for path in ("/api/v1/pods?watch=true", "/api/v1/watch/pods", "/api/v1/nodes"):
        code, body = await call(sim_cluster, "GET", path)
        assert code == 401 and status_of(body, 401, "Unauthorized"), (path, body)


async def test_the_control_api_needs_the_token_too(sim_cluster):
    node = {"name": "gpu-node-9", "gpu": {"count": 8}}
    faults = {"error_rate": 1.0}
    attempts = [
        ("POST", "/sim/v1/nodes", node),
        ("DELETE", "/sim/v1/nodes/gpu-node-1", None),
        ("PUT", "/sim/v1/nodes/gpu-node-1/cordon", {"unschedulable": True}),
        ("PUT", "/sim/v1/nodes/gpu-node-1/conditions", {"Ready": False}),
        ("PUT", "/sim/v1/faults", faults),
        ("POST", "/sim/v1/faults/cut-watches", None),
        ("POST", "/sim/v1/faults/expire-history", None),
    ]
    nodes_before = sim_cluster.store.list("nodes", None)
    for method, path, body in attempts:
        json_type = {"Content-Type": "application/json"}
        code, answer = await call(sim_cluster, method, path, body, json_type)
        assert code == 401 and status_of(answer, 401, "Unauthorized"), (path, answer)
        code, answer = await call(
            sim_cluster, method, path, body, {**json_type, "Authorization": "Bearer guess"}
        )
        assert code == 403 and status_of(answer, 403, "Forbidden"), (path, answer)
        code, answer = await call(
            sim_cluster,
            method,
            path,
            body,
            {**json_type, "Origin": EVIL, **sim_cluster.auth_headers},
        )
        assert code == 403 and status_of(answer, 403, "Forbidden"), (path, answer)
    assert sim_cluster.store.list("nodes", None) == nodes_before
    assert sim_cluster.faults.error_rate == 0.0

    # With the token, the same requests work.
    auth = {"Content-Type": "application/json", **sim_cluster.auth_headers}
    code, _ = await call(sim_cluster, "POST", "/sim/v1/nodes", node, auth)
    assert code == 200 and sim_cluster.store.find("nodes", None, "gpu-node-9") is not None
    code, _ = await call(sim_cluster, "POST", "/sim/v1/faults/cut-watches", None, auth)
    assert code == 200


async def test_the_kubeconfig_holds_a_fresh_token_and_only_its_owner_reads_it(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("old")
    path.chmod(0o644)  # left by something else, readable by all: must not stay so
    async with SimCluster(parse_cluster("nodes: []\n"), kubeconfig=path) as one:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        doc = yaml.safe_load(path.read_text())
        assert doc["users"][0]["user"]["token"] == one.token
        ca = doc["clusters"][0]["cluster"]["certificate-authority-data"]
        assert base64.b64decode(ca).decode() == one.tls.ca_pem
        assert len(one.token) >= 40  # 32 random bytes
        assert sim_auth_headers(path) == {"Authorization": f"Bearer {one.token}"}
        assert sorted(os.listdir(tmp_path)) == ["kubeconfig"]  # no temporary file left behind
        async with SimCluster(parse_cluster("nodes: []\n")) as two:
            assert two.token != one.token
            assert stat.S_IMODE(os.stat(two.kubeconfig).st_mode) == 0o600
            # One cluster's token does not open another's door.
            code, _ = await call(two, "GET", "/api/v1/nodes", headers=one.auth_headers)
            assert code == 403


async def test_a_client_with_a_stale_kubeconfig_gets_the_refusal(sim_cluster, tmp_path):
    """kubernetes_asyncio, through a kubeconfig with another token or none, sees 403 or 401."""
    doc = yaml.safe_load(kubeconfig_text(sim_cluster.url, "stale", sim_cluster.tls.ca_pem))
    for user, status in (({"token": "stale"}, 403), ({}, 401)):
        doc["users"][0]["user"] = user
        stale = tmp_path / "stale"
        stale.write_text(yaml.safe_dump(doc))
        cfg = kubernetes_asyncio.client.Configuration()
        await kubernetes_asyncio.config.load_kube_config(
            config_file=str(stale), client_configuration=cfg
        )
        async with kubernetes_asyncio.client.ApiClient(cfg) as api:
            with pytest.raises(kubernetes_asyncio.client.ApiException) as e:
                await kubernetes_asyncio.client.CoreV1Api(api).list_node()
        assert e.value.status == status
