"""Where a notebook server runs: the environment variables the spawner sets and the notebook
side (magics, widget, server extension) reads, and the scopes its API token gets.

The spawner knows the admission (pool, GPU type and count, over quota); the server only sees its
environment. Writer (:func:`placement_env`) and reader (:meth:`Placement.from_environ`) live in
this one module, as :mod:`..usage.labels` does for pod labels, so the two cannot drift apart. Both are
pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The pool the server was admitted to.
ENV_POOL = "GPUPOOL_POOL"
#: The platform (GPU type route) inside the pool, when the pool has platforms.
ENV_PLATFORM = "GPUPOOL_PLATFORM"
#: GPUs the server was admitted with (``0`` for a CPU-only server).
ENV_GPUS = "GPUPOOL_GPUS"
#: The GPU type of the node the GPUs are on, e.g. ``A100-80G`` (empty for CPU-only servers).
ENV_GPU_TYPE = "GPUPOOL_GPU_TYPE"
#: ``true`` when the server borrows idle GPUs beyond its quota and may be reclaimed.
ENV_OVER_QUOTA = "GPUPOOL_OVER_QUOTA"
#: The node the pod runs on (from the downward API: known only once the pod is bound).
ENV_NODE = "GPUPOOL_NODE"
#: The admission id (the pod's ``gpupool.jupyter.org/admission`` label).
ENV_ADMISSION = "GPUPOOL_ADMISSION"
#: The gpupool service's URL as the server reaches it, with the service's prefix.
ENV_SERVICE_URL = "GPUPOOL_SERVICE_URL"
#: The shape admitted: ``whole``, ``mig-1g.10gb``, ``shared-4``... (empty for a
#: CPU-only server). Written only when the service's answer says it.
ENV_SHAPE = "GPUPOOL_SHAPE"
#: The shape in words, as the service says it: ``MIG 1g.10gb of an A100-80G``, ``2 \u00d7 A100-80G``.
ENV_SHAPE_TEXT = "GPUPOOL_SHAPE_TEXT"
#: What the server counts in GPU-equivalents, a fraction: ``1/7``, ``2``.
ENV_GPU_EQUIVALENTS = "GPUPOOL_GPU_EQUIVALENTS"
#: The shape id of whole GPUs (``core/words/shape_choice.WHOLE``, which pools/ may not import).
_WHOLE = "whole"

_TRUE = ("1", "true", "yes")
#: The multiplication sign of the status bar's ``GPU 2x A100-80G`` (a real one, U+00D7).
TIMES = "\u00d7"

#: The scopes the spawner asks for the server's ``$JUPYTERHUB_API_TOKEN``
#: (``c.Spawner.server_token_scopes``): JupyterHub's default ``server`` role (activity, access
#: to this server), the pools (``custom:gpupool:use``, and access to the service named
#: ``gpupool``, which the service checks for every caller as JupyterHub does), and starting,
#: stopping and following the user's own servers (``%gpupool launch``/``release``, the widget).
SERVER_TOKEN_SCOPES = (
    "users:activity!user",
    "access:servers!server",
    "custom:gpupool:use",  # service.auth.USE_SCOPE (importing the service here costs too much)
    "access:services!service=gpupool",
    "read:users:name!user",
    "read:servers!user",
    "servers!user",
)


def placement_env(admission: Mapping[str, Any], service_url: str) -> list[dict[str, Any]]:
    """The server's ``GPUPOOL_*`` variables for an admission, as pod-template ``env`` entries.

    ``GPUPOOL_NODE`` is the pod's ``spec.nodeName`` through the downward API: the admission only
    prefers a node, the scheduler picks it. ``GPUPOOL_SHAPE``, ``GPUPOOL_SHAPE_TEXT`` and
    ``GPUPOOL_GPU_EQUIVALENTS`` are written when the answer has a ``shape`` (a service that
    knows shapes).
    """
    gpus = int(admission.get("gpus") or 0)
    # a CPU-only server on a GPU node has no GPU type of its own
    gpu_type = str(admission.get("gpu_type") or "") if gpus else ""
    env: list[dict[str, Any]] = [
        {"name": ENV_POOL, "value": str(admission.get("pool") or "")},
        {"name": ENV_PLATFORM, "value": str(admission.get("platform") or "")},
        {"name": ENV_GPUS, "value": str(gpus)},
        {"name": ENV_GPU_TYPE, "value": gpu_type},
        {"name": ENV_OVER_QUOTA, "value": "true" if admission.get("over_quota") else "false"},
        {"name": ENV_ADMISSION, "value": str(admission.get("id") or "")},
        {"name": ENV_NODE, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    if "shape" in admission:
        shape = str(admission.get("shape") or "") if gpus else ""
        env += [
            {"name": ENV_SHAPE, "value": shape},
            {
                "name": ENV_SHAPE_TEXT,
                "value": str(admission.get("shape_text") or "") if shape else "",
            },
            {"name": ENV_GPU_EQUIVALENTS, "value": str(admission.get("gpu_equivalents") or "0")},
        ]
    if service_url:
        env.append({"name": ENV_SERVICE_URL, "value": service_url})
    return env


@dataclass(frozen=True)
class Placement:
    """This server as its environment tells it: where it runs and how to reach the hub and
    the gpupool service. ``pool`` is ``None`` when the server was not started by
    GPUPoolSpawner (or the spawner ran without the service, ``fail_open``)."""

    pool: str | None = None
    platform: str | None = None
    gpus: int = 0
    gpu_type: str | None = None
    over_quota: bool = False
    node: str | None = None
    admission: str | None = None
    service_url: str | None = None
    hub_api_url: str | None = None
    token: str = ""
    user: str | None = None
    server: str = ""
    cuda_visible_devices: str | None = None
    nvidia_visible_devices: str | None = None
    shape: str | None = None
    shape_text: str | None = None
    gpu_equivalents: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Placement:
        def text(name: str) -> str | None:
            value = environ.get(name, "").strip()
            return value or None

        try:
            gpus = max(int(environ.get(ENV_GPUS, "0") or 0), 0)
        except ValueError:
            gpus = 0
        return cls(
            pool=text(ENV_POOL),
            platform=text(ENV_PLATFORM),
            gpus=gpus,
            gpu_type=text(ENV_GPU_TYPE),
            over_quota=environ.get(ENV_OVER_QUOTA, "").strip().lower() in _TRUE,
            node=text(ENV_NODE),
            admission=text(ENV_ADMISSION),
            service_url=service_url_from(environ),
            hub_api_url=text("JUPYTERHUB_API_URL"),
            token=environ.get("JUPYTERHUB_API_TOKEN", "").strip(),
            user=text("JUPYTERHUB_USER"),
            server=environ.get("JUPYTERHUB_SERVER_NAME", "").strip(),
            cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
            nvidia_visible_devices=environ.get("NVIDIA_VISIBLE_DEVICES"),
            shape=text(ENV_SHAPE),
            shape_text=text(ENV_SHAPE_TEXT),
            gpu_equivalents=text(ENV_GPU_EQUIVALENTS),
        )

    @property
    def in_pool(self) -> bool:
        return self.pool is not None

    @property
    def shaped(self) -> bool:
        """Whether the server has a part of a GPU (a MIG instance, a shared GPU, a HAMi slice)
        and its words: a shape other than whole GPUs, with its text."""
        return bool(self.gpus and self.shape and self.shape != _WHOLE and self.shape_text)

    def label(self) -> str:
        """The one-line summary the status bar shows, what the server has in every surface's
        words (:func:`~jupyter_gpupool.core.words.shape_rows.admitted_text`'s):
        ``2 \u00d7 A100-80G · training-pool``, ``MIG 1g.10gb of an A100-80G · training-pool``
        (a shape other than whole GPUs), ``CPU · compute-pool``; ``not in a GPU pool`` without
        a pool."""
        if self.pool is None:
            return "not in a GPU pool"
        if not self.gpus:
            return f"CPU · {self.pool}"
        if self.shaped:
            return f"{self.shape_text} · {self.pool}"
        return f"{self.gpus} {TIMES} {self.gpu_type or 'GPU'} · {self.pool}"


def service_url_from(environ: Mapping[str, str]) -> str | None:
    """The service URL: ``GPUPOOL_SERVICE_URL``, else the hub's public URL (JupyterHub sets
    ``JUPYTERHUB_PUBLIC_URL`` when ``c.JupyterHub.public_url`` is configured) with
    ``services/gpupool/``."""
    url = environ.get(ENV_SERVICE_URL, "").strip()
    if url:
        return url.rstrip("/") + "/"
    public = environ.get("JUPYTERHUB_PUBLIC_URL", "").strip()
    if public:
        return public.rstrip("/") + "/services/gpupool/"
    return None
