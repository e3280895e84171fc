"""The real control plane (``../shared/realk8s``: kube-apiserver, scheduler, controller-manager
v1.25 and etcd) for tests that hold the simulator to what Kubernetes really does.

``realk8s_kubeconfig`` (a session fixture in tests/conftest.py) starts it once per test run (per
xdist worker that needs it: tests/conftest.py keeps the tier on one) and stops it at the end; :func:`register_node` adds a Ready node with GPUs, as a kubelet would, since
the control plane has no kubelet. Without ``../shared/realk8s`` (or ``$GPUPOOL_REALK8S``) the tests
that need it skip, and fail under CI (tests/needs.py).
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from needs import need

REALK8S = Path(
    os.environ.get("GPUPOOL_REALK8S", Path(__file__).resolve().parents[1].parent / "shared/realk8s")
)
NOT_READY = "node.kubernetes.io/not-ready"


def _env(authz: str) -> dict[str, str]:
    return {**os.environ, "AUTHZ": authz} if authz else dict(os.environ)


def binaries(tmp_path_factory: Any) -> Path:
    """Where this test session unpacks the control plane's binaries once, for :func:`start`."""
    return Path(tmp_path_factory.getbasetemp()) / "kube-bin"


def _link_binaries(where: Path, unpacked: Path) -> None:
    """Give the control plane in ``where`` the binaries unpacked (on first use) in ``unpacked``:
    ``up`` unpacks its 35 MB archive into each control plane's directory that has none, about
    3 s of CPU each time, and a run starts several."""
    if not unpacked.is_dir():
        partial = unpacked.with_name(unpacked.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = REALK8S / "kube-1.25-bin.tar.xz"
        subprocess.run(["tar", "-C", str(partial), "-xJf", str(archive)], check=True, timeout=120)
        partial.rename(unpacked)
    (where / "bin").mkdir(parents=True, exist_ok=True)
    for binary in unpacked.iterdir():
        link = where / "bin" / binary.name
        if not link.exists():
            link.symlink_to(binary)


def start(where: Path, authz: str = "", unpacked: Path | None = None) -> Iterator[Path]:
    """Start a control plane in ``where`` (``authz``: its authorization modes, e.g.
    ``Node,RBAC``; AlwaysAllow by default); yield its kubeconfig; stop and wipe it. With
    ``unpacked`` (:func:`binaries`), its binaries are unpacked there once and linked."""
    beside = "CI has ../shared beside the checkout"
    need((REALK8S / "up").exists(), f"a real control plane ({REALK8S}/up, see its README)", beside)
    if unpacked is not None:
        _link_binaries(where, unpacked)
    started = subprocess.run(
        [str(REALK8S / "up"), str(where)],
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(authz),
    )
    try:
        need(started.returncode == 0, f"realk8s did not start: {started.stderr[-800:]}", beside)
        yield where / "kubeconfig"
    finally:
        subprocess.run([str(REALK8S / "down"), str(where), "--wipe"], timeout=60, check=False)


def restart_apiserver(where: Path, authz: str = "") -> None:
    """Stop and start the API server of the control plane in ``where`` (same etcd, same data)."""
    done = subprocess.run(
        [str(REALK8S / "up"), str(where), "restart-apiserver"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(authz),
    )
    if done.returncode != 0:
        raise AssertionError(f"the API server did not restart: {done.stderr[-800:]}")


def register_node(
    core: Any,
    name: str,
    *,
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    cpu: str = "8",
    memory: str = "32Gi",
) -> None:
    """A Ready node with ``gpus`` allocatable ``nvidia.com/gpu`` (sync ``CoreV1Api``), as a
    kubelet registers one; the controller's ``not-ready`` taint is waited out."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]} if taints else {}
    core.create_node({"metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec})
    room = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        room["nvidia.com/gpu"] = str(gpus)
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}
    ready |= {"lastHeartbeatTime": now, "lastTransitionTime": now}
    core.patch_node_status(
        name, {"status": {"capacity": room, "allocatable": room, "conditions": [ready]}}
    )
    wanted = [t["key"] for t in taints]
    deadline = time.monotonic() + 20
    while True:
        have = [t.key for t in core.read_node(name).spec.taints or []]
        if have == wanted:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"node {name} keeps taints {have}, wanted {wanted}")
        # the node lifecycle controller adds not-ready until it sees the Ready condition
        core.patch_node(name, {"spec": {"taints": [dict(t) for t in taints] or None}})
        time.sleep(0.2)
