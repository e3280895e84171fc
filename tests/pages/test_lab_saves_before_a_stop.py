"""Work saved before a stop (issue 31), in a real browser: alice's demo server (a real
jupyterhub-singleuser with JupyterLab and the jupyter-gpupool extension built in this work tree)
runs under an idle policy; she edits a notebook and does not save it; her GPU goes idle. The lab
announces the notice (a JupyterLab notification), saves her work a minute before the stop and
says so; the service stops the server; the notebook on disk holds her edit, and My GPUs says
"1 notebook saved before the stop". Screenshots: tests/artifacts/lab-saving-work.png,
my-gpus-saved-work.png.

A demo of its own: the stop ends alice's server, which the other lab tests keep.

Needs Debian's ``chromium`` and the ``playwright`` package (``browser_setup``).
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from browser_setup import chromium, expect, log_in, new_page, shoot
from service_kit import set_utilization

from jupyter_gpupool.demo.testing import DemoProcess

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "jupyter_gpupool" / "labextension"
INFERENCE_POOL = ROOT / "examples" / "pools" / "inference-pool.yaml"
#: Idle for 75 s is a stop, warned at once: the lab saves 60 s before it.
POLICY = {"below_percent": 5, "after": "75s", "warn": "75s", "action": "stop"}
EDIT = "edited_before_the_stop = 42"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    data = tmp_path_factory.mktemp("jupyter-data")
    (data / "labextensions").mkdir()
    (data / "labextensions" / "jupyter-gpupool").symlink_to(BUILT, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(data))
        with DemoProcess.start(tmp_path_factory.mktemp("save-demo")) as demo:
            yield demo


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def notebook(source: str) -> dict:
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "first",
                "metadata": {},
                "outputs": [],
                "source": source,
            }
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def on_disk(name: str) -> list[Path]:
    """The notebook ``name`` in the homes of the demo's pods (local processes, each in a
    directory of its own under the simulator's temporary directory)."""
    pattern = os.path.join(tempfile.gettempdir(), "gpupool-sim-pods-*", "*", "home", name)
    return [Path(p) for p in glob.glob(pattern)]


def test_an_idle_stop_saves_the_open_notebook_first(demo, browser):
    name = f"unsaved-{secrets.token_hex(4)}.ipynb"
    demo.api("POST", "/hub/api/users/alice")
    status, body = demo.api(
        "POST",
        "/hub/api/users/alice/server",
        {"user_options": {"pools": ["inference-pool"], "gpus": 1}},
    )
    assert status in (201, 202), body
    demo.start_server("alice")
    code, answer = demo.api("GET", "/services/gpupool/api/v1/servers?user=alice")
    assert code == 200, answer
    [pod] = [r for r in answer["servers"] if r["server"] == ""]
    kubeconfig = demo.state / "kubeconfig"
    set_utilization(kubeconfig, pod["namespace"], pod["name"], 80)

    page = new_page(browser, timeout=60_000)
    try:
        log_in(page, demo.url, "alice")
        page.goto(demo.url + "/user/alice/lab")
        expect(page.locator("#jp-gpupool-status")).to_contain_text("inference-pool")
        # the notebook, written through the server's contents API, then opened and edited
        page.evaluate(
            """async ([name, nb]) => {
              const xsrf = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '';
              const r = await fetch('/user/alice/api/contents/' + name, {
                method: 'PUT', headers: {'Content-Type': 'application/json', 'X-XSRFToken': xsrf},
                body: JSON.stringify({type: 'notebook', format: 'json', content: nb})});
              if (!r.ok) throw new Error('PUT ' + name + ': ' + r.status);
            }""",
            [name, notebook("x = 1")],
        )
        [path] = on_disk(name)
        page.goto(demo.url + f"/user/alice/lab/tree/{name}")
        editor = page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").first
        expect(editor).to_contain_text("x = 1")
        editor.click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\n" + EDIT)
        tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=name)
        expect(tab).to_have_class(re.compile(r"\bjp-mod-dirty\b"))
        assert EDIT not in path.read_text()  # not saved: only in the page

        # the GPU goes idle under the policy: the notice, then the save a minute before the stop
        code, answer = demo.api(
            "POST",
            "/services/gpupool/api/v1/pools",
            {**yaml.safe_load(INFERENCE_POOL.read_text()), "idle": POLICY},
        )
        assert code in (200, 201), answer
        set_utilization(kubeconfig, pod["namespace"], pod["name"], 0)
        toasts = page.locator(".Toastify__toast")
        # said once and short: the kind and the time, the policy's words behind Details
        announced = toasts.filter(
            has_text=re.compile(r"^Idle GPUs: this server stops at \d\d:\d\d UTC\.")
        )
        expect(announced).not_to_have_count(0, timeout=45_000)
        assert announced.first.inner_text().count("UTC") == 1, announced.first.inner_text()
        # "Saving your work: this server stops at ...", then what was saved
        saving = toasts.filter(
            has_text=re.compile(r"^1 notebook saved: this server stops at \d\d:\d\d UTC\.")
        )
        expect(saving).to_have_count(1, timeout=45_000)
        expect(saving.get_by_text("Details")).to_be_visible()
        shoot(page, "lab-saving-work")

        # the service stops the server at the deadline
        deadline = time.monotonic() + 90
        while demo.server_running("alice") and time.monotonic() < deadline:
            time.sleep(1)
        assert not demo.server_running("alice"), "the idle policy did not stop the server"
        # the status item says so, and why, without the hub's 404 page, and stops asking
        status = page.locator("#jp-gpupool-status")
        expect(status).to_have_text("Server stopped · idle", timeout=60_000)
        title = status.get_attribute("title") or ""
        assert title.startswith("This server was stopped (seen at ") and "idle" in title, title
        assert "<" not in title and "404" not in title, title
        asked = []
        page.on("request", lambda r: asked.append(r.url) if "/gpupool/" in r.url else None)
        time.sleep(25)  # more than two of the status item's 10 s polls
        assert asked == [], asked
        shoot(page, "lab-server-stopped")
        saved = json.loads(path.read_text())
        assert EDIT in "".join(saved["cells"][0]["source"]), saved["cells"][0]

        # the ledger says so on My GPUs
        # (the session closes once the watch sees the pod gone: a reload or two)
        stops = page.locator("#my-stops")
        for _ in range(30):
            page.goto(demo.url + "/services/gpupool/")
            if stops.count():
                break
            time.sleep(1)
        expect(stops).to_contain_text("stopped by the service: its GPUs stayed idle")
        expect(stops).to_contain_text("1 notebook saved before the stop")
        shoot(page, "my-gpus-saved-work")
    finally:
        page.context.close()
        demo.api("DELETE", "/hub/api/users/alice/server")
