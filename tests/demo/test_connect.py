"""Finding a running demo (jupyter_gpupool.demo.connect): where its state directory is, its URL
and token, and waiting for it, against a scripted service (no demo)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import tornado.web

from jupyter_gpupool.demo.connect import (
    DemoConnection,
    DemoNotFound,
    connect,
    find_demo,
    find_state_dir,
    hub_url,
)
from jupyter_gpupool.demo.run import free_port


def state_dir(path: Path, token: str = "t0ken", url: str | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "admin-token").write_text(token + "\n")
    if url is not None:
        (path / "url").write_text(url + "\n")
    return path


@pytest.fixture
def clone(tmp_path):
    """A clone's layout: the kernel runs in examples/, the home directory is elsewhere."""
    (tmp_path / "clone" / "examples").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    return tmp_path


def where(clone, environ=None):
    return find_state_dir(environ or {}, cwd=clone / "clone" / "examples", home=clone / "home")


def test_the_state_directory_is_looked_for_here_one_level_up_then_in_home(clone):
    assert where(clone) is None
    state_dir(clone / "home" / ".gpupool-demo")
    assert where(clone) == clone / "home" / ".gpupool-demo"
    state_dir(clone / "clone" / "gpupool-demo")  # `gpupool demo` in the clone's root
    assert where(clone) == clone / "clone" / "gpupool-demo"
    (clone / "clone" / "examples" / "gpupool-demo").mkdir()  # no admin-token: not a demo's
    assert where(clone) == clone / "clone" / "gpupool-demo"
    state_dir(clone / "clone" / "examples" / "gpupool-demo")
    assert where(clone) == clone / "clone" / "examples" / "gpupool-demo"


def test_gpupool_demo_dir_wins_even_before_the_demo_wrote_anything(clone):
    state_dir(clone / "clone" / "gpupool-demo")
    assert where(clone, {"GPUPOOL_DEMO_DIR": str(clone / "binder")}) == clone / "binder"


def test_the_url_comes_from_the_environment_else_the_url_file_else_port_8000(clone):
    state = state_dir(clone / "clone" / "gpupool-demo")
    kw = {"cwd": clone / "clone" / "examples", "home": clone / "home"}
    demo, missing = find_demo({}, **kw)
    assert demo == DemoConnection("http://127.0.0.1:8000", "t0ken", state)
    assert missing == f"no url file in {state} yet"
    (state / "url").write_text("http://127.0.0.1:8123\n")
    demo, missing = find_demo({}, **kw)
    assert (demo.url, missing) == ("http://127.0.0.1:8123", "")
    assert demo.service_url == "http://127.0.0.1:8123/services/gpupool/"
    assert demo.hub_api_url == "http://127.0.0.1:8123/hub/api/"
    demo, _ = find_demo({"GPUPOOL_URL": "http://127.0.0.1:9000/"}, **kw)
    assert demo.url == "http://127.0.0.1:9000"


def test_a_state_directory_without_its_token_yet_is_waited_for(clone):
    state = clone / "binder"
    demo, missing = find_demo({"GPUPOOL_DEMO_DIR": str(state)}, cwd=clone, home=clone / "home")
    assert (demo.token, missing) == ("", f"no admin-token in {state} yet")


@pytest.mark.parametrize(
    "given,hub",
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/hub/", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/services/gpupool/", "http://127.0.0.1:8000"),
        ("https://hub.example.org/jh/services/gpupool", "https://hub.example.org/jh"),
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
    ],
)
def test_hub_url(given, hub):
    assert hub_url(given) == hub


async def test_no_demo_anywhere_says_how_to_start_one_at_once(clone):
    start = time.monotonic()
    with pytest.raises(DemoNotFound) as e:
        await connect(environ={}, cwd=clone / "clone" / "examples", home=clone / "home")
    assert time.monotonic() - start < 1
    message = str(e.value)
    assert "No gpupool demo found" in message
    assert str(clone / "clone" / "gpupool-demo") in message
    assert 'pip install -e ".[demo]" && gpupool demo' in message
    assert "GPUPOOL_DEMO_DIR" in message


class PoolsHandler(tornado.web.RequestHandler):
    def get(self) -> None:
        answers = self.settings["answers"]
        code = answers.pop(0) if len(answers) > 1 else answers[0]
        self.set_status(code)
        if self.request.headers.get("Authorization") != "token t0ken":
            self.set_status(403)
        self.write(json.dumps({"status": self.get_status(), "message": "scripted", "pools": []}))


@pytest.fixture
async def service():
    """A gpupool service that answers ``answers`` in turn (the last one from then on)."""
    port = free_port()
    answers: list[int] = [200]
    app = tornado.web.Application(
        [(r"/services/gpupool/api/v1/pools", PoolsHandler)], answers=answers
    )
    server = app.listen(port, "127.0.0.1")
    yield f"http://127.0.0.1:{port}", answers
    server.stop()


async def test_it_waits_for_a_demo_that_is_starting_and_says_so_once(service, tmp_path):
    url, answers = service
    answers[:] = [503, 503, 200]
    state = state_dir(tmp_path / "demo")
    said: list[str] = []
    # the demo writes its url file once the hub and the service answer
    asyncio.get_running_loop().call_later(0.1, (state / "url").write_text, url + "\n")
    environ = {"GPUPOOL_DEMO_DIR": str(state)}
    demo = await connect(environ=environ, say=said.append, interval=0.05, timeout=10)
    assert demo == DemoConnection(url, "t0ken", state)
    assert said == [
        f"Waiting for the gpupool demo at http://127.0.0.1:8000 (no url file in {state} yet); "
        "it can take a minute to start (giving up after 10 seconds)...",
        f"Connected to the gpupool demo at {url} (state directory {state})",
    ]
    assert answers == [200]  # it asked until the service answered


async def test_a_demo_that_never_answers_is_given_up_with_how_to_start_it(tmp_path):
    state = state_dir(tmp_path / "demo", url=f"http://127.0.0.1:{free_port()}")
    said: list[str] = []
    with pytest.raises(DemoNotFound) as e:
        await connect(
            environ={"GPUPOOL_DEMO_DIR": str(state)}, say=said.append, interval=0.05, timeout=0.3
        )
    assert str(e.value).startswith("The gpupool demo at http://127.0.0.1:")
    assert "did not answer within 0.3 seconds (no answer from the gpupool service" in str(e.value)
    assert 'pip install -e ".[demo]" && gpupool demo' in str(e.value)
    assert len(said) == 1 and said[0].startswith("Waiting for the gpupool demo")


async def test_a_refused_token_is_said_at_once(service, tmp_path):
    url, _ = service
    state = state_dir(tmp_path / "demo", token="stale", url=url)
    with pytest.raises(DemoNotFound, match=r"refused the token in .*admin-token"):
        await connect(environ={"GPUPOOL_DEMO_DIR": str(state)}, say=print, timeout=30)
