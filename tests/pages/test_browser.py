"""The pages in a real browser (headless Chromium) against a running ``gpupool demo``.

Each page renders with live data (a server pod that appears is counted without a reload), a
pool created on the admin page appears, stopping a server from a pool page stops it. Every page
is saved as a screenshot under tests/artifacts/ (git-ignored), to look at.

Needs Debian's ``chromium`` (``scripts/test.sh`` installs it) and the ``playwright`` package;
the tests are skipped, with the reason, when either is missing, and fail instead under CI
(``browser_setup`` through tests/needs.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser_setup import chromium, expect, log_in, new_page, shoot
from waiting import wait_for

from jupyter_gpupool.demo.testing import DemoProcess

SVC = "/services/gpupool/"

T4_POOL = """kind: pool
version: v0.1
pool:
  name: t4-pool
  description: "T4s for teaching"
nodes:
  node-6:
    gpu-type: T4-16G
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("browser-demo")) as demo:
        yield demo


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def login(browser, demo, user):
    page = new_page(browser)
    page.on("dialog", lambda dialog: dialog.accept())  # "Stop this server?"
    log_in(page, demo.url, user)
    return page


@pytest.fixture(scope="module")
def admin(browser, demo):
    page = login(browser, demo, "admin")
    yield page
    page.context.close()


def open_page(page, demo, path):
    page.goto(demo.url + SVC + path)
    # the first visit goes through the hub's OAuth and comes back
    page.wait_for_url(re.compile(re.escape(demo.url + SVC) + ".*"))
    return page


def gpu_pod(demo, user, pool, gpus):
    """A notebook server pod as the spawner makes one: admitted, with the admission's overrides
    (node selector, labels, GPU limits); it runs `sleep` on the simulated cluster."""
    status, admission = demo.api(
        "POST", SVC + "api/v1/admissions", {"user": user, "pools": [pool], "gpus": gpus}
    )
    assert status == 201, admission
    o = admission["overrides"]
    container = {"name": "notebook", "image": "demo", "command": ["sleep", "600"]}
    if "resources" in o:
        container["resources"] = o["resources"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"jupyter-{user}-gpu", "labels": o.get("labels", {})},
        "spec": {
            "containers": [container],
            "nodeSelector": o.get("nodeSelector", {}),
            "tolerations": o.get("tolerations", []),
        },
    }


def kube(demo):
    import kubernetes

    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(demo.state / "kubeconfig"), client_configuration=config)
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def test_the_user_page_shows_my_pools_quota_and_servers(browser, demo):
    page = login(browser, demo, "alice")
    try:
        open_page(page, demo, "")
        expect(page.locator("h1")).to_have_text("My GPUs")
        expect(page.locator("body")).to_contain_text("Signed in as alice (groups: ml-research)")
        row = page.locator('#my-pools tr[data-key="training-pool"]')
        expect(row).to_contain_text("A100-80G")
        expect(row).to_contain_text("0 in use, 0 guaranteed, limit 4")
        # it looks like the hub: its nav bar, with gpupool in the Services menu
        expect(page.locator("nav.navbar")).to_contain_text("Token")
        page.click("text=Services")
        expect(page.locator(".dropdown-menu a", has_text="gpupool")).to_be_visible()
        page.keyboard.press("Escape")
        # users get no admin pages
        assert page.goto(demo.url + SVC + "pools").status == 403
        open_page(page, demo, "")
        shoot(page, "user")
    finally:
        page.context.close()


def test_the_pools_page_counts_a_new_server_without_a_reload(admin, demo):
    open_page(admin, demo, "pools")
    used = admin.locator('#pools tr[data-key="training-pool"] [data-field="gpu_used"]')
    expect(used).to_have_text("0")
    api = kube(demo)
    api.create_namespaced_pod("default", gpu_pod(demo, "bob", "training-pool", 4))
    try:
        expect(used).to_have_text("4", timeout=30_000)  # the page polled the API
        expect(admin.locator(".gpupool-totals [data-field=gpu_used]")).to_have_text("4")
        expect(admin.locator(".gpupool-chart svg")).to_be_visible()
        assert admin.locator(".gpupool-chart svg polyline").count() >= 3  # capacity, all, pools
        shoot(admin, "pools")
        admin.click('#pools a:text("training-pool")')
        expect(admin.locator("h1")).to_contain_text("Pool training-pool")
        expect(admin.locator("#servers")).to_contain_text("bob")
        expect(admin.locator("#quota")).to_contain_text("group:ml-research")
        expect(admin.locator("#node-table")).to_contain_text("gpu-node-1")
        shoot(admin, "pool")
    finally:
        api.delete_namespaced_pod("jupyter-bob-gpu", "default", grace_period_seconds=0)
        api.api_client.close()
    expect(admin.locator('#servers tr[data-key="default/jupyter-bob-gpu"]')).to_have_count(
        0, timeout=30_000
    )


def test_stopping_a_server_from_its_pool_page_stops_it(admin, demo):
    demo.start_server("carol")
    _, servers = demo.api("GET", SVC + "api/v1/servers?user=carol")
    pool = servers["servers"][0]["pool"]
    open_page(admin, demo, f"pools/{pool}")
    row = admin.locator('#servers tr[data-key="default/jupyter-carol"]')
    expect(row).to_contain_text("running")
    row.locator("button", has_text="Stop").click()
    expect(admin.locator("#gpupool-flash")).to_have_text("Stopping carol's server.")
    wait_for(
        lambda: not demo.server_running("carol"),
        timeout=60,
        interval=0.5,
        what="carol's server to stop",
    )
    expect(row).to_have_count(0, timeout=30_000)
    _, changes = demo.api("GET", SVC + "api/v1/usage")  # the service still answers
    assert changes


def test_a_pool_created_on_the_admin_page_appears(admin, demo):
    open_page(admin, demo, "admin")
    textarea = admin.locator('#create-pool textarea[name="yaml"]')
    textarea.fill(T4_POOL.replace("gpu-type", "gpu_type"))
    admin.click('#create-pool button[type="submit"]')
    problems = admin.locator("#create-pool .gpupool-problems")
    expect(problems).to_contain_text("line 8: nodes.node-6.gpu_type: unknown key 'gpu_type'")
    shoot(admin, "admin-problems")
    admin.locator('#create-pool textarea[name="yaml"]').fill(T4_POOL)
    admin.click('#create-pool button[type="submit"]')
    expect(admin.locator("h1")).to_contain_text("Pool t4-pool")
    expect(admin.locator("#gpupool-flash")).to_contain_text("Created pool t4-pool")
    open_page(admin, demo, "pools")
    expect(admin.locator('#pools tr[data-key="t4-pool"] [data-field="gpu_total"]')).to_have_text(
        "4"
    )
    # and delete it again from its page, which lists the servers still there (none)
    open_page(admin, demo, "admin/pools/t4-pool/delete")
    expect(admin.locator("body")).to_contain_text("No server runs there.")
    shoot(admin, "delete-pool")
    admin.click("button:text('Delete t4-pool')")
    expect(admin.locator("#gpupool-flash")).to_have_text("Pool t4-pool deleted.")
    expect(admin.locator('#pools tr[data-key="t4-pool"]')).to_have_count(0)
    # the forms carry JupyterHub's XSRF token: the same cookie without it changes nothing
    refused = admin.request.post(demo.url + SVC + "admin/pools", form={"yaml": T4_POOL})
    assert refused.status == 403 and "_xsrf" in refused.text()
    open_page(admin, demo, "admin")
    expect(admin.locator("#changes")).to_contain_text("deleted pool t4-pool")
    expect(admin.locator("#changes")).to_contain_text("user admin (page)")
    shoot(admin, "admin")


def test_the_nodes_page_filters_and_the_quotas_page(admin, demo):
    open_page(admin, demo, "nodes")
    expect(admin.locator("#node-table tbody tr")).to_have_count(10)
    admin.select_option("#f-pool", "inference-pool")
    admin.click(".gpupool-filter button")
    expect(admin.locator("#node-table tbody tr")).to_have_count(3)
    expect(admin.locator("#node-table")).to_contain_text("runwhere.ai/pool=inference-pool")
    open_page(admin, demo, "nodes")
    shoot(admin, "nodes")
    open_page(admin, demo, "quotas")
    row = admin.locator('#quotas tr[data-key="training-pool|group:ml-research"]')
    expect(row).to_contain_text("16")
    shoot(admin, "quotas")


def test_the_reports_page_shows_gpu_hours_and_downloads_its_csv(admin, demo):
    """From the navigation bar to the Reports page: a row with a bar per user whose server ran
    (alice's GPU pod here), and *Download CSV* saves the same report with the browser's hub
    login alone."""
    api = kube(demo)
    api.create_namespaced_pod("default", gpu_pod(demo, "alice", "dev-pool", 1))
    try:
        wait_for(
            lambda: (
                "alice"
                in [
                    r["subject"]
                    for r in demo.api("GET", SVC + "api/v1/reports/gpu-hours")[1]["rows"]
                ]
            ),
            timeout=60,
            interval=0.5,
            what="alice's session in the ledger",
        )
        open_page(admin, demo, "pools")
        admin.click('nav a.nav-link:text("Reports")')
        expect(admin.locator("h1")).to_have_text("GPU-hours")
        admin.select_option("#r-by", "user")
        admin.select_option("#r-since", "30d")
        admin.click("#report-form button")
        row = admin.locator('#report tr[data-key="alice"]')
        expect(row).to_contain_text("1")  # one session
        expect(row.locator(".gpupool-hours")).to_be_visible()
        shown = {
            r.get_attribute("data-key"): r.locator('[data-field="gpu_hours"]').inner_text()
            for r in admin.locator("#report tbody tr").all()
        }
        shoot(admin, "reports")
        with admin.expect_download() as download:
            admin.click("#report-csv")
        saved = download.value
        assert saved.suggested_filename == "gpu-hours-by-user.csv"
        lines = Path(saved.path()).read_text().splitlines()
        assert lines[0] == "subject,gpu_hours,within_quota,over_quota,sessions"
        in_csv = {line.split(",")[0]: line.split(",")[1] for line in lines[1:]}
        assert set(in_csv) == set(shown) and "alice" in in_csv
        # the same numbers (alice's still-running server may have grown by a few seconds)
        for subject, hours in shown.items():
            if hours.startswith("<"):  # a small amount, "<0.01"
                assert 0 <= float(in_csv[subject]) < float(hours[1:]) + 0.06, (subject, hours)
                continue
            assert float(in_csv[subject]) == pytest.approx(float(hours.replace(",", "")), abs=0.06)
    finally:
        api.delete_namespaced_pod("jupyter-alice-gpu", "default", grace_period_seconds=0)
        api.api_client.close()
