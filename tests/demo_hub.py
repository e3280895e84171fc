"""The demo hub as tests drive it: over its REST API with the admin token (:class:`DemoHub`), or
as a logged-in browser (:class:`HubBrowser`: cookies, the login form, the spawn form). Shared by
the spawner's and the queue's demo tests (tests/spawner/test_spawner_demo.py,
tests/demo/test_demo_queue.py)."""

from __future__ import annotations

import json
import re
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

import tornado.httpclient
from clusters import Cluster
from waiting import async_wait_for

from jupyter_gpupool.demo.run import Demo
from jupyter_gpupool.hubclient import HubClient


class DemoHub:
    """The demo hub, asked with the admin token, and the cluster it runs on."""

    def __init__(self, cluster: Cluster, demo: Demo):
        self.cluster = cluster
        self.demo = demo
        self.url = demo.url
        self.http = tornado.httpclient.AsyncHTTPClient(force_instance=True)

    async def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        resp = await self.http.fetch(
            self.url + path,
            method=method,
            body=None if body is None else json.dumps(body),
            headers={"Authorization": f"token {self.demo.admin_token}"},
            allow_nonstandard_methods=True,
            raise_error=False,
            request_timeout=60,
        )
        text = resp.body or b""
        return resp.code, json.loads(text) if text.strip().startswith(b"{") else text

    async def user(self, name: str) -> dict[str, Any]:
        """The user's model (the user is created first if the hub does not know them)."""
        code, model = await self.api("GET", f"/hub/api/users/{name}")
        if code == 404:
            await self.api("POST", f"/hub/api/users/{name}", {})
            code, model = await self.api("GET", f"/hub/api/users/{name}")
        assert code == 200, model
        return model

    async def server(self, name: str) -> dict[str, Any]:
        return dict((await self.user(name))["servers"].get("", {}))

    async def wait_ready(
        self, name: str, timeout: float = 60, interval: float = 0.2
    ) -> dict[str, Any]:
        async def ready() -> dict[str, Any] | None:
            server = await self.server(name)
            if not server:
                raise AssertionError(f"{name}'s server is gone (its start failed)")
            return server if server.get("ready") else None

        return await async_wait_for(
            ready, what=f"{name}'s server to be ready", timeout=timeout, interval=interval
        )

    async def stop(self, name: str, pod_timeout: float = 30) -> None:
        """Stop the user's server; back once its pod is gone and the hub forgot it."""
        await self.api("DELETE", f"/hub/api/users/{name}/server")
        await self.cluster.wait_gone("default", f"jupyter-{name}", pod_timeout)

        async def gone() -> bool:
            return not await self.server(name)

        await async_wait_for(
            gone, what=f"the hub to forget {name}'s server", timeout=30, interval=0.1
        )

    async def pod(self, name: str) -> dict[str, Any] | None:
        """The user's server pod, from the API (None: there is none)."""
        return await self.cluster.pod("default", f"jupyter-{name}")

    def client(self) -> HubClient:
        return HubClient(self.url + "/hub/api", self.demo.admin_token)


class HubBrowser:
    """A browser session on the hub: its cookies, the login form, the spawn form."""

    def __init__(self, hub: DemoHub):
        self.hub = hub
        self.cookies: dict[str, str] = {}

    async def request(self, method: str, path: str, form: dict[str, Any] | None = None) -> Any:
        resp = await self.hub.http.fetch(
            self.hub.url + path,
            method=method,
            body=None if form is None else urlencode(form, doseq=True),
            headers={"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())},
            follow_redirects=False,
            raise_error=False,
            request_timeout=60,
        )
        for header in resp.headers.get_list("Set-Cookie"):
            for key, morsel in SimpleCookie(header).items():
                self.cookies[key] = morsel.value
        return resp

    async def login(self, name: str) -> None:
        page = (await self.request("GET", "/hub/login")).body.decode()
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page)
        assert xsrf is not None, page[-2000:]
        form = {"username": name, "password": "any", "_xsrf": xsrf.group(1)}
        resp = await self.request("POST", "/hub/login", form)
        assert resp.code == 302, resp.body

    async def spawn_form(self) -> tuple[str, str]:
        """The spawn page and its form's xsrf token."""
        resp = await self.request("GET", "/hub/spawn")
        assert resp.code == 200, resp.code
        page = resp.body.decode()
        xsrf = re.search(r"_xsrf=([^\"&]+)", page)
        assert xsrf is not None, page[-2000:]
        return page, xsrf.group(1)

    async def submit(self, fields: dict[str, list[str]], xsrf: str) -> Any:
        return await self.request("POST", f"/hub/spawn?_xsrf={xsrf}", {**fields, "_xsrf": xsrf})
