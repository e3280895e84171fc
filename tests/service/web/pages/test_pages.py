"""The service's pages, in-process against the simulated cluster (hub API stubbed); the
browser tests in tests/pages drive the same pages through a real hub and Chromium."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import urlencode

import pytest
import tornado.httpclient
from service_kit import start_pod

from jupyter_gpupool.service.web.auth import ADMIN_SCOPE, USE_SCOPE
from jupyter_gpupool.service.web.pages.base import local_target

NEW_POOL = """kind: pool
version: v0.1
pool:
  name: t4-pool
  description: "T4s <b>for</b> teaching"
nodes:
  node-6:
    gpu-type: T4-16G
"""


class Browser:
    """Requests to the service's pages with a token (as a browser's cookie would carry it)."""

    def __init__(self, service, token):
        self.service = service
        self.token = token
        self.http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
        self.cookies = {}

    async def request(self, method, path, form=None):
        body = urlencode(form) if form is not None else None
        headers = {"Authorization": f"token {self.token}"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        resp = await self.http.fetch(
            self.service.url + path,
            method=method,
            body=body,
            headers=headers,
            follow_redirects=False,
            raise_error=False,
        )
        for cookie in resp.headers.get_list("Set-Cookie"):
            name, _, rest = cookie.partition("=")
            value = rest.split(";", 1)[0]
            if value in ("", '""'):
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        return resp.code, resp.body.decode("utf-8", "replace"), resp.headers

    async def get(self, path):
        return await self.request("GET", path)

    async def post(self, path, form):
        return await self.request("POST", path, form)


@pytest.fixture
def admin(service):
    b = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    yield b
    b.http.close()


@pytest.fixture
def alice(service):
    b = Browser(service, service.hub.user("alice", ["ml-research"], [USE_SCOPE]))
    yield b
    b.http.close()


def text(html):
    """The page's text, tags dropped, whitespace squeezed (what a reader sees)."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


async def test_every_user_sees_their_pools_quota_and_servers(service, alice):
    admission = await service.admin().admit(
        user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2
    )
    await start_pod(service.cluster, admission, "jupyter-alice")
    await service.settled()
    status, html, _ = await alice.get("")
    assert status == 200
    page = text(html)
    assert "Signed in as alice (groups: ml-research)" in page
    # JupyterHub's page: its stylesheet, nav bar and the Services menu
    assert 'href="/hub/static/css/style.min.css"' in html and 'href="/hub/home"' in html
    assert "training-pool" in page and "A100-80G" in page
    assert "2 in use, 2 guaranteed, limit 8; group ml-research: 2 in use of 12 guaranteed" in page
    # her own servers: no User column (each is hers)
    assert re.search(
        r"Server Pool GPUs Node State Since Quota \(default\) training-pool 2 gpu-node-\d running \d+s "
        r"within quota",
        page,
    )
    # a user sees no admin navigation, and may not open the admin pages
    assert 'href="/services/gpupool/nodes"' not in html
    for path in ("pools", "pools/dev-pool", "nodes", "quotas", "admin", "pools/usage.svg"):
        status, html, _ = await alice.get(path)
        assert status == 403 and "needs the custom:gpupool:admin scope" in text(html), path


async def test_a_refusal_does_not_say_it_is_live(service, alice, admin):
    # the pools page refreshes itself for an admin; refused to a user, it is a still page
    status, html, _ = await admin.get("pools")
    assert status == 200 and "Live: refreshed every 5 s" in text(html)
    status, html, _ = await alice.get("pools")
    assert status == 403
    assert "Live: refreshed" not in text(html) and re.search(
        r"As of \d\d:\d\d:\d\d UTC\.", text(html)
    )


async def test_the_admin_pages_changes_say_whether_they_span_restarts(start_service):
    """With a database, a change made before a restart is listed after it, and the page says
    the list goes back past the start; without one, the list is since the start, and says so."""
    first = await start_service()
    await first.admin().apply_pools(NEW_POOL)
    await first.stop()
    service = await start_service()
    admin = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    status, html, _ = await admin.get("admin")
    changes = text(re.search(r'<section[^>]*id="changes".*?</section>', html, re.S).group(0))
    assert status == 200 and "created pool t4-pool" in changes
    kept = "Kept in the database: changes made before the service last started are listed too."
    assert kept in changes
    assert "since the service started" not in changes
    admin.http.close()

    bare = await start_service(db_url="")
    admin = Browser(bare, bare.hub.user("admin", [], [ADMIN_SCOPE]))
    status, html, _ = await admin.get("admin")
    changes = text(re.search(r'<section[^>]*id="changes".*?</section>', html, re.S).group(0))
    assert "Those made since the service started: no database keeps them" in changes
    assert "No change since the service started." in changes
    admin.http.close()


async def test_pages_send_browsers_to_log_in_and_refuse_callers_without_scopes(service):
    http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
    resp = await http.fetch(service.url, follow_redirects=False, raise_error=False)
    assert resp.code == 302 and "/hub/api/oauth2/authorize" in resp.headers["Location"]
    http.close()
    nobody = Browser(service, service.hub.user("dave", [], []))
    status, html, _ = await nobody.get("")
    assert status == 403 and "needs the custom:gpupool:use scope" in text(html)
    nobody.http.close()


async def test_the_pools_page_has_gpuctls_columns_and_more(service, admin):
    admit = service.admin().admit
    for user in ("alice", "bob"):  # bob's 8 GPUs go beyond ml-research's guarantee of 12
        a = await admit(user=user, groups=["ml-research"], pools=["training-pool"], gpus=8)
        await start_pod(service.cluster, a, f"jupyter-{user}")
    await admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=1)  # no pod yet
    await service.settled()
    status, html, _ = await admin.get("pools")
    assert status == 200
    row = re.search(r'<tr data-key="training-pool">.*?</tr>', html, re.S).group(0)
    # name, status, GPU types, total, used, free (GPU-equivalents: the MIG A100 is the 17th),
    # (bar), over quota, pending starts, nodes, servers
    assert text(row).split() == [
        "training-pool", "active", "A100-80G", "17", "16", "1", "8", "0", "held", "·", "0",
        "in", "line", "3", "2", "(", "0", "pending)",
    ]  # fmt: skip
    row = re.search(r'<tr data-key="dev-pool">.*?</tr>', html, re.S).group(0)
    assert " ".join(text(row).split()[7:13]) == "1 held · 0 in line"  # carol's, with no pod yet
    assert 'style="width: 25.0%"' in row  # 1 of 4 held by the admission
    assert len(re.findall(r'<tr data-key="[^"]', html)) == 5 and '<tr data-key="default">' in html
    assert 'href="/services/gpupool/api/v1/pools.csv"' in html
    svg = re.search(r"<svg.*?</svg>", html, re.S).group(0)
    assert "<polyline" in svg and "training-pool (16)" in svg
    status, _, headers = await admin.get("pools/usage.svg")
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")


async def test_a_pool_page_shows_nodes_servers_quota_and_document(service, admin):
    a = await service.admin().admit(
        user="alice", groups=["ml-research"], pools=["training-pool"], gpus=8
    )
    await start_pod(service.cluster, a, "jupyter-alice")
    await service.settled()
    status, html, _ = await admin.get("pools/training-pool")
    assert status == 200
    page = text(html)
    assert "17 in total, 8 in use, 9 free" in page  # 16 whole A100s and the MIG A100
    assert re.search(r"alice \(default\) 8 gpu-node-\d running \d+s within quota Stop", page)
    assert 'action="/services/gpupool/admin/servers/stop"' in html and 'name="_xsrf"' in html
    assert "group:ml-research 12 16 8 0 0" in page and "user:alice 2 8 0 0 0" in page
    assert "gpu-node-1 A100-80G 8" in page and "gpu-node-2 A100-80G 8" in page
    assert "kind: pool" in page and "name: training-pool" in page
    assert (await admin.get("pools/no-such-pool"))[0] == 404


async def test_the_nodes_page_filters_by_pool_status_and_name(service, admin):
    service.cluster.cordon("gpu-node-3")
    await service.settled()
    status, html, _ = await admin.get("nodes")
    assert status == 200 and len(re.findall(r'<tr data-key="[^"]', html)) == 10
    # labels are shown, folded, each breakable between its parts only
    assert "<summary>" in html and "labels</summary>" in html
    assert "runwhere.<wbr>ai/<wbr>pool=<wbr>training-<wbr>pool" in html
    assert "runwhere.ai/pool=training-pool" in text(html.replace("<wbr>", ""))
    status, html, _ = await admin.get("nodes?status=cordoned")
    rows = re.findall(r'<tr data-key="([^"]+)"', html)
    assert rows == ["gpu-node-3"] and "cordoned (scheduling disabled)" in text(html)
    status, html, _ = await admin.get("nodes?pool=training-pool&q=2")
    assert re.findall(r'<tr data-key="([^"]+)"', html) == ["gpu-node-2"]
    status, html, _ = await admin.get("nodes?status=nonsense")
    assert status == 400 and "status 'nonsense' is not one of" in text(html)
    # the API the page refreshes from takes the same arguments, a page at a time
    nodes = await service.admin()._json("GET", "api/v1/nodes", params={"limit": "3", "offset": "3"})
    assert [n["name"] for n in nodes["nodes"]] == ["gpu-node-2", "gpu-node-3", "gpu-node-4"]
    assert (nodes["total"], nodes["offset"], nodes["limit"]) == (10, 3, 3)


async def test_the_quotas_page_and_its_rows_in_the_api(service, admin):
    status, html, _ = await admin.get("quotas")
    assert status == 200 and "training-pool group:ml-research 12 16 0 0 0" in text(html)
    answer = await service.admin()._json("GET", "api/v1/quotas", params={"rows": "1"})
    assert {"pool": "training-pool", "subject": "group:ml-research"}.items() <= answer["rows"][
        0
    ].items()


async def test_creating_a_pool_from_the_admin_page(service, admin):
    status, html, _ = await admin.get("admin")
    assert status == 200 and "kind: pool" in html and 'name="_xsrf"' in html
    status, _, headers = await admin.post("admin/pools", {"yaml": NEW_POOL})
    assert status == 302 and headers["Location"] == "/services/gpupool/pools/t4-pool"
    status, html, _ = await admin.get("pools/t4-pool")
    assert "Created pool t4-pool; labelled nodes node-6." in text(html)
    assert "T4s &lt;b&gt;for&lt;/b&gt; teaching" in html  # autoescaped
    status, html, _ = await admin.get("admin")
    assert "user admin (page) created pool t4-pool; labelled nodes node-6" in text(html)


async def test_a_bad_pool_document_is_refused_with_its_problems_inline(service, admin):
    bad = NEW_POOL.replace("gpu-type", "gpu_type")
    status, html, _ = await admin.post("admin/pools", {"yaml": bad})
    assert status == 400
    page = text(html)
    assert "The pool documents have problems; nothing was changed." in page
    assert "line 8: nodes.node-6.gpu_type: unknown key 'gpu_type'; did you mean 'gpu-type'?" in page
    assert "gpu_type: T4-16G" in html  # the text is kept for fixing
    assert "t4-pool" not in service.ctx.state.registry.pools


async def test_a_pool_on_a_missing_node_says_nothing_was_changed_once(service, admin):
    missing = NEW_POOL.replace("node-6", "gpu-node-99")
    status, html, _ = await admin.post("admin/pools", {"yaml": missing})
    assert status == 400
    page = text(html)
    assert "Node gpu-node-99 does not exist in the cluster; nothing was changed." in page
    assert page.count("nothing was changed") == 1
    assert "t4-pool" not in service.ctx.state.registry.pools


async def test_deleting_a_pool_shows_the_servers_still_there(service, admin):
    await service.admin().apply_pools(NEW_POOL)
    a = await service.admin().admit(user="carol", pools=["t4-pool"], gpus=1)
    await start_pod(service.cluster, a, "jupyter-carol")
    await service.settled()
    status, html, _ = await admin.get("admin/pools/t4-pool/delete")
    assert status == 200
    assert (
        "1 server still runs in t4-pool. Deleting the pool does not stop it: it keeps running "
        "on its node. Stop it first if it should not keep running."
    ) in text(html)
    b = await service.admin().admit(user="dave", pools=["t4-pool"], gpus=1)
    await start_pod(service.cluster, b, "jupyter-dave")
    await service.settled()
    status, html, _ = await admin.get("admin/pools/t4-pool/delete")
    assert (
        "2 servers still run in t4-pool. Deleting the pool does not stop them: they keep "
        "running on their nodes. Stop them first if they should not keep running."
    ) in text(html)
    status, _, headers = await admin.post("admin/pools/t4-pool/delete", {})
    assert status == 302 and headers["Location"] == "/services/gpupool/pools"
    status, html, _ = await admin.get("pools")
    said = "Pool t4-pool deleted. 2 servers still run on its nodes: carol/, dave/."
    assert said in text(html)
    assert "t4-pool" not in service.ctx.state.registry.pools
    status, html, _ = await admin.post("admin/pools/dev-pool/delete", {})
    assert status == 409 and "still referenced" in text(html)  # by the quotas


async def test_moving_a_node_and_editing_quotas(service, admin):
    status, _, headers = await admin.post("admin/nodes", {"node": "node-6", "pool": "dev-pool"})
    assert status == 302
    await service.settled()
    assert service.ctx.state.index.node("node-6").pool == "dev-pool"
    status, html, _ = await admin.post("admin/nodes", {"node": "node-6", "pool": "nope"})
    assert status == 400 and "There is no pool named 'nope'." in text(html)
    status, _, _ = await admin.post("admin/nodes", {"node": "node-6", "pool": "default"})
    await service.settled()
    assert service.ctx.state.index.node("node-6").pool == "default"
    quotas = "kind: quota\nquota: {name: q}\npools:\n  dev-pool:\n    user-default: {guaranteed: 0, limit: 1}\n"  # fmt: skip
    status, _, headers = await admin.post("admin/quotas", {"yaml": quotas})
    assert status == 302 and headers["Location"] == "/services/gpupool/quotas"
    assert service.ctx.state.registry.quota("dev-pool").user_default.limit == 1
    status, html, _ = await admin.post("admin/quotas", {"yaml": quotas.replace("limit", "limt")})
    assert status == 400 and "line 5: pools.dev-pool.user-default.limt" in text(html)
    whats = [c.what for c in service.ctx.changes.latest()]
    assert whats[:3] == [
        "replaced the quota documents (q)",
        "labelled node node-6: runwhere.ai/pool removed",
        "labelled node node-6: runwhere.ai/pool=dev-pool",
    ]


async def test_stopping_a_server_from_a_pool_page(service, admin):
    a = await service.admin().admit(user="bob", groups=["ml-research"], pools=["dev-pool"], gpus=1)
    await start_pod(service.cluster, a, "jupyter-bob")
    await service.settled()
    form = {"user": "bob", "server": "", "namespace": "default", "pod": "jupyter-bob",
            "next": "/services/gpupool/pools/dev-pool"}  # fmt: skip
    service.hub.on_stop = None  # the stub answers 204: the hub stops it
    status, _, headers = await admin.post("admin/servers/stop", form)
    assert status == 302 and headers["Location"] == "/services/gpupool/pools/dev-pool"
    assert service.hub.stopped == [("bob", "")]

    async def unknown(user, server):
        return 404

    service.hub.on_stop = unknown  # the hub does not know it: the pod is deleted
    status, _, _ = await admin.post("admin/servers/stop", form)
    assert status == 302
    await service.cluster.wait_for(lambda: service.cluster.pod("default", "jupyter-bob") is None)
    assert service.ctx.changes.latest()[0].what == "stopped server bob/ in dev-pool"
    status, _, _ = await admin.post("admin/servers/stop", form)
    assert status == 404  # gone


def test_forms_only_send_back_to_our_own_pages():
    prefix = "/services/gpupool/"
    for evil in ("//evil.example/", "https://evil.example/", "/hub/logout", "/services/gpupool//x"):
        assert local_target(evil, prefix, prefix + "pools") == prefix + "pools"
    assert local_target(prefix + "pools/a?x=1", prefix, "") == prefix + "pools/a?x=1"


async def test_changes_through_the_api_are_logged_with_who_made_them(service, caplog):
    admin = service.admin()
    with caplog.at_level("INFO", logger="gpupool.changes"):
        await admin.apply_pools(NEW_POOL)
        await admin.delete_pool("t4-pool")
    assert [c.who for c in service.ctx.changes.latest()] == ["service spawner"] * 2
    assert "CHANGE by service spawner (API): deleted pool t4-pool" in caplog.text
    history = await admin._json("GET", "api/v1/usage/history")
    assert history["interval"] == 60 and "training-pool" in history["pools"]


async def test_my_gpus_lists_my_pools_in_my_order(service, alice):
    """My GPUs lists the pools as the spawn form does (``GET api/v1/launch-options``' order:
    the admin's default order for the user's groups first), not alphabetically."""
    options = await service.user("alice", ["ml-research"]).launch_options()
    status, html, _ = await alice.get("")
    assert status == 200
    table = re.search(r'<table[^>]*id="my-pools".*?</table>', html, re.S)
    assert table is not None
    shown = re.findall(r'<tr data-key="([^"]+)">', table.group(0))
    assert shown == [p["name"] for p in options["pools"]]
    assert shown[:3] == ["training-pool", "inference-pool", "dev-pool"]  # not alphabetical
