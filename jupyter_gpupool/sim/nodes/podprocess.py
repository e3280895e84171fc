"""Pods as local processes: the simulated kubelet's ``run_processes`` mode.

The first container's command runs as a local process with the pod's environment, so a real
single-user server answers (a container without command or args, which would run its image's
default command, has no process: :func:`argv` is empty). A pod has its own network namespace in
Kubernetes, so a server binding ``0.0.0.0:8888`` in two pods is fine there; here ``0.0.0.0`` in
the command and environment is replaced by the pod's own loopback address, so several servers run
side by side. The process's output is the pod's log.
"""

from __future__ import annotations

import asyncio
import base64
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .gpudevices import GPUDevices
from .podhost import PodHost

# Variables of the simulator's own environment that must not leak into pods.
_DROP_ENV_PREFIXES = ("JUPYTERHUB_", "KUBERNETES_", "KUBECONFIG", "JPY_", "CONFIGPROXY_")


class PodProcesses:
    """Starts the processes of a kubelet's pods, each in a directory of its own under
    ``workdir`` (a new temporary directory by default) that holds its home and its log."""

    def __init__(self, host: PodHost, devices: GPUDevices, workdir: str | None = None):
        self.host = host
        self.devices = devices
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="gpupool-sim-pods-"))

    def log_path(self, pod: Mapping[str, Any]) -> Path:
        return self.workdir / pod["metadata"]["uid"] / "log"

    def read_log(self, pod: Mapping[str, Any]) -> str:
        p = self.log_path(pod)
        if p.exists():
            return p.read_text(errors="replace")
        return ""

    async def start(
        self, pod: Mapping[str, Any], c: Mapping[str, Any], ip: str
    ) -> asyncio.subprocess.Process:
        """Start container ``c``'s command (the pod's first container's) for the pod at ``ip``."""
        command = [a.replace("0.0.0.0", ip) for a in argv(c)]
        poddir = self.workdir / pod["metadata"]["uid"]
        poddir.mkdir(parents=True, exist_ok=True)
        cwd = poddir / "home"
        cwd.mkdir(exist_ok=True)
        # The host's environment stands in for the image's (PATH, locale …), but each pod has a
        # home of its own, as a container would, so servers don't share runtime files.
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_ENV_PREFIXES)}
        env["HOME"] = str(cwd)
        # The device plugin's variables come first: the pod's own env wins, as in a container.
        env.update(self.device_env(pod, c))
        pod_env = await self.pod_env(pod, c, ip)
        env.update({k: v.replace("0.0.0.0", ip) for k, v in pod_env.items()})
        # A local file opened once per pod start; handed to the child as its stdout.
        logf = open(self.log_path(pod), "ab")  # noqa: SIM115, ASYNC230
        try:
            return await asyncio.create_subprocess_exec(
                *command,
                env=env,
                cwd=str(cwd),
                stdout=logf,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            logf.close()

    def device_env(self, pod: Mapping[str, Any], c: Mapping[str, Any]) -> dict[str, str]:
        """What NVIDIA's device plugin adds to a container holding GPUs: ``NVIDIA_VISIBLE_DEVICES``,
        their UUIDs (comma-separated; ``MIG-…`` for MIG devices, the GPU's for shared replicas); nothing for a container without GPUs."""
        md = pod["metadata"]
        node = self.devices.node_of(md["uid"])
        indices = self.devices.of_pod(md["uid"]).get(c.get("name", ""), [])
        if node is None or not indices:
            return {}
        return {"NVIDIA_VISIBLE_DEVICES": self.devices.visible_devices(node, indices)}

    async def pod_env(
        self, pod: Mapping[str, Any], c: Mapping[str, Any], ip: str
    ) -> dict[str, str]:
        """The container's environment: envFrom, then env, with valueFrom resolved."""
        ns = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for src in c.get("envFrom") or []:
            prefix = src.get("prefix", "")
            for kind, plural in (("secretRef", "secrets"), ("configMapRef", "configmaps")):
                ref = src.get(kind)
                if ref:
                    obj = await self.host.lookup(plural, ns, ref.get("name", ""))
                    for k, v in ((obj or {}).get("data") or {}).items():
                        env[prefix + k] = _decode(plural, v)
        for item in c.get("env") or []:
            name = item.get("name")
            if not name:
                continue
            if "value" in item:
                env[name] = str(item["value"])
                continue
            vf = item.get("valueFrom") or {}
            if "fieldRef" in vf:
                path = vf["fieldRef"].get("fieldPath", "")
                env[name] = {
                    "status.podIP": ip,
                    "metadata.name": pod["metadata"]["name"],
                    "metadata.namespace": ns,
                    "spec.nodeName": pod["spec"].get("nodeName", ""),
                    "status.hostIP": "127.0.0.1",
                }.get(path, "")
            for kind, plural in (("secretKeyRef", "secrets"), ("configMapKeyRef", "configmaps")):
                ref = vf.get(kind)
                if ref:
                    obj = await self.host.lookup(plural, ns, ref.get("name", ""))
                    data = (obj or {}).get("data") or {}
                    if ref.get("key") in data:
                        env[name] = _decode(plural, data[ref["key"]])
        return env


def argv(c: Mapping[str, Any]) -> list[str]:
    """The container's command line; empty when it runs its image's default command, which the
    simulator has not (no images): such a container runs without a process, as without
    ``run_processes``, until its pod is deleted."""
    return [*(c.get("command") or []), *(c.get("args") or [])]


def _decode(plural: str, value: str) -> str:
    if plural == "secrets":
        try:
            return base64.b64decode(value).decode()
        except ValueError:
            return ""
    return str(value)
