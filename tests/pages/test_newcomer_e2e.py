"""A newcomer's whole path through ``gpupool demo``, in a real browser, every step as a person
takes it: log in as alice, read the spawn form, untick every pool (the form names the default
order), ask for GPUs in a CPU pool and get the form back as she left it with the reason, order
the pools and pick 4 GPUs, watch the start's progress message say where the server goes, land in
JupyterLab with the status item saying where the server runs, run ``%gpupool status`` in a new
notebook, then look at the admin's pools page as admin.

The steps depend on each other, so this is one test. Screenshots go to tests/artifacts/
(``e2e-1-spawn-form.png`` … ``e2e-5-admin-pools.png``); when a step fails, the page as it was
is saved as ``e2e-failed-STEP.png``.

Needs Debian's ``chromium`` and the ``playwright`` package (skipped with the reason otherwise).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from browser_setup import chromium, expect, log_in, new_page, shoot

from jupyter_gpupool.core.usage.labels import POOL_LABEL
from jupyter_gpupool.demo.testing import DemoProcess
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

# The demo starts in a few seconds, a server in a few more, JupyterLab takes 10-20 s to load on
# a small machine; the whole path runs in about a minute.
pytestmark = pytest.mark.timeout(240)


def cluster_pool(name: str) -> tuple[int, str]:
    """``(GPUs, GPU types)`` of a pool in the demo's cluster (examples/cluster.yaml): its nodes'
    physical GPUs, as every surface counts them (a node whose GPU is cut into MIG instances or
    time-sliced is that 1 GPU)."""
    nodes = [n for n in example_cluster_spec().nodes if n.labels.get(POOL_LABEL) == name]
    gpus = sum(n.gpu.count for n in nodes if n.gpu is not None)
    return gpus, ", ".join(sorted({str(n.gpu.type) for n in nodes}))


@contextlib.contextmanager
def step(page: Any, name: str) -> Iterator[None]:
    """Run one step; if it fails (a timeout too), save what the browser showed, then fail."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            shoot(page, f"e2e-failed-{name}")
        raise


def pool_order(page: Any) -> list[tuple[str, str]]:
    """The form's rows top to bottom, each with the priority it will submit ("" = not used)."""
    rows = page.locator("#gpupool-pools tbody tr")
    return [
        (row.get_attribute("data-pool"), row.locator(".gpupool-priority").input_value())
        for row in rows.all()
    ]


def move_up_to(page: Any, name: str, position: int) -> None:
    """Click the row's up button until the row is at ``position`` (1 is the top)."""
    while [n for n, _ in pool_order(page)].index(name) > position - 1:
        page.get_by_role("button", name=f"Move {name} up").click()


def test_a_newcomer_starts_a_gpu_server_from_the_browser_and_finds_it_everywhere(tmp_path):
    with DemoProcess.start(tmp_path / "demo") as demo, chromium() as browser:
        alice = new_page(browser, timeout=30_000)

        with step(alice, "login"):
            log_in(alice, demo.url, "alice")

        with step(alice, "spawn-form"):
            alice.goto(demo.url + "/hub/spawn")
            headers = alice.locator("#gpupool-pools thead th").all_text_contents()
            free_column = headers.index("Free / total GPUs")
            for name in ("training-pool", "inference-pool"):
                total, gpu_type = cluster_pool(name)
                row = alice.locator(f'#gpupool-pools tr[data-pool="{name}"]')
                expect(row).to_be_visible()
                expect(row).to_contain_text(gpu_type)
                expect(row.locator("td").nth(free_column)).to_have_text(f"{total} / {total}")

        with step(alice, "refused-form"):
            # alice's group's default pools come ticked: training, inference, dev. With none
            # ticked, the form says which order a start would use.
            note = alice.locator("#gpupool-default-note")
            expect(note).to_be_hidden()
            for use in alice.locator("#gpupool-pools tbody .gpupool-use").all():
                use.uncheck()
            expect(note).to_be_visible()
            expect(note).to_have_text(
                "No pool is chosen, so the default order for your groups will be used: "
                "training-pool, then inference-pool, then dev-pool."
            )
            # a first try the hub refuses: GPUs in the CPU-only pool
            alice.get_by_role("checkbox", name="Use compute-pool").check()
            expect(note).to_be_hidden()
            alice.get_by_label("GPUs", exact=True).select_option("4")
            alice.get_by_role("button", name="Start").click()
            expect(alice.get_by_text("compute-pool has no GPUs")).to_be_visible()
            # the form under the reason is as she left it
            order = pool_order(alice)
            assert order[0] == ("compute-pool", "1"), order
            assert all(priority == "" for _, priority in order[1:]), order
            expect(alice.get_by_role("checkbox", name="Use compute-pool")).to_be_checked()
            expect(alice.get_by_label("GPUs", exact=True)).to_have_value("4")
            expect(note).to_be_hidden()
            shoot(alice, "e2e-1-refused-form")

        with step(alice, "order-pools"):
            # she keeps training-pool first and inference-pool second, with the order buttons
            for row in alice.locator("#gpupool-pools tbody tr").all():
                name = row.get_attribute("data-pool")
                use = row.get_by_role("checkbox")
                if name in ("training-pool", "inference-pool"):
                    use.check()
                else:
                    use.uncheck()
            move_up_to(alice, "training-pool", 1)
            move_up_to(alice, "inference-pool", 2)
            expect(alice.locator("#gpupool-announce")).to_have_text(
                "inference-pool moved to position 2"
            )
            order = pool_order(alice)
            assert order[:2] == [("training-pool", "1"), ("inference-pool", "2")], order
            assert all(priority == "" for _, priority in order[2:]), order
            expect(alice.get_by_label("GPUs", exact=True)).to_have_value("4")  # still
            shoot(alice, "e2e-1-spawn-form")

        with step(alice, "progress"):
            alice.get_by_role("button", name="Start").click()
            alice.wait_for_url(re.compile(r".*/hub/spawn-pending/alice.*"))
            _, gpu_type = cluster_pool("training-pool")
            admitted = f"admitted to training-pool within quota (4 {gpu_type} GPUs)"
            # the message above the progress bar says it, the event log closed, while the pod's
            # own events come in, until the page moves on into the server
            message = alice.locator("#progress-message")
            expect(message).to_contain_text("A" + admitted[1:], timeout=30_000)
            expect(alice.locator("#progress-details")).not_to_have_attribute("open", "")
            alice.get_by_text("Event log").click()  # open the log as a curious user would
            # it lists the decision once, not again with every later step (read before the
            # screenshot: the page moves on into the server a few seconds after the admission)
            texts = alice.locator("#progress-log .progress-log-event").all_inner_texts()
            print("progress log:", texts)  # shown when a later step fails
            assert sum(admitted.lower() in t.lower() for t in texts) == 1, texts
            shoot(alice, "e2e-2-progress")

        with step(alice, "lab"):
            # the pending page reloads into the server when it is ready; the server opens /lab
            alice.wait_for_url(re.compile(r".*/user/alice/lab.*"), timeout=90_000)
            # the demo measures GPU utilization every 5 s: once measured, the label ends with
            # the server's utilization (a new server's GPUs read 0%)
            label = re.escape(f"4 \u00d7 {gpu_type} · training-pool") + r"( · 0%)?"
            expect(alice.locator("#jp-gpupool-status")).to_have_text(
                re.compile(rf"^\s*{label}\s*$"), timeout=60_000
            )
            new_notebook = alice.locator(
                '.jp-LauncherCard[data-category="Notebook"][title="Python 3 (ipykernel)"]'
            )
            expect(new_notebook).to_be_visible()  # JupyterLab has finished opening
            shoot(alice, "e2e-3-lab")

        with step(alice, "status-cell"):
            new_notebook.click()
            # a person waits until the status bar says the kernel is idle (a cell run while the
            # kernel still connects is dropped)
            expect(alice.locator(".jp-StatusBar-Widget")).to_contain_text(
                "Python 3 (ipykernel) | Idle", timeout=60_000
            )
            cell = alice.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first
            cell.locator(".cm-content").click()
            alice.keyboard.type("%load_ext jupyter_gpupool")
            alice.keyboard.press("Enter")
            alice.keyboard.type("%gpupool status")
            alice.keyboard.press("Shift+Enter")
            output = cell.locator(".jp-OutputArea-output")
            expect(output).to_contain_text("training-pool", timeout=60_000)
            shoot(alice, "e2e-4-status-cell")

        admin = new_page(browser)  # a context of its own: the admin's cookies, not alice's
        with step(admin, "admin-pools"):
            log_in(admin, demo.url, "admin")
            admin.goto(demo.service_url + "pools")
            # the first visit goes through the hub's OAuth (no confirmation page: the demo
            # registers the service with oauth_no_confirm) and comes back
            admin.wait_for_url(demo.service_url + "pools")
            row = admin.locator('#pools tr[data-key="training-pool"]')
            total, _ = cluster_pool("training-pool")
            expect(row.locator('[data-field="gpu_total"]')).to_have_text(str(total))
            expect(row.locator('[data-field="gpu_used"]')).to_have_text("4")
            expect(row.locator('[data-field="gpu_free"]')).to_have_text(str(total - 4))
            expect(row.locator('[data-field="server_count"]')).to_have_text("1")
            shoot(admin, "e2e-5-admin-pools")
