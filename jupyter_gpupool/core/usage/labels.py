"""Label, annotation and resource names shared by every part of gpupool.

Kubernetes is the only store of usage (see docs/architecture.md), so the labels and annotations written on
server pods are the record that usage is rebuilt from after a restart. Keeping their names in one
module means the spawner that writes them and the usage index that reads them cannot drift apart.

Label *values* are restricted (63 characters of ``[A-Za-z0-9_.-]``, alphanumeric at both ends), but
JupyterHub user and group names are not (``alice@example.org``). So every raw name goes into an
annotation, and the label carries :func:`safe_label_value` of it, which is only used for
selecting; readers always prefer the annotation.
"""

from __future__ import annotations

import functools
import hashlib
import re

# The syntax rules live with the rest of Kubernetes' semantics; these names stay importable from
# here because the service, the CLI and pool documents check labels through this module.
from ..kube.names import is_label_key as is_label_key
from ..kube.names import is_label_value as is_label_value
from ..kube.names import is_node_name as is_node_name

# --- node labels ---------------------------------------------------------------------------------

#: gpuctl's pool membership label; the service makes the key configurable.
POOL_LABEL = "runwhere.ai/pool"
#: Nodes that carry no pool label form this pool, as in gpuctl and Run:ai.
DEFAULT_POOL = "default"
#: gpuctl's GPU type label, e.g. ``A100-80G`` (``""`` on CPU-only nodes).
GPU_TYPE_LABEL = "runwhere.ai/gpu-type"
#: NVIDIA GPU Feature Discovery labels, the fallback when gpuctl's type label is missing.
GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
GFD_MEMORY_LABEL = "nvidia.com/gpu.memory"
GFD_COUNT_LABEL = "nvidia.com/gpu.count"
#: Set by the kubelet; used for placement hints.
HOSTNAME_LABEL = "kubernetes.io/hostname"

# --- resources -----------------------------------------------------------------------------------

#: The extended resource the NVIDIA device plugin advertises in ``status.allocatable``.
GPU_RESOURCE = "nvidia.com/gpu"

# --- pod labels and annotations ------------------------------------------------------------------

PREFIX = "gpupool.jupyter.org/"

#: On a node the service re-cut (MIG layouts to demand, ``core/admission/recut.py``): when it
#: last asked the node to change (epoch seconds), and the shape id it asked the change for
#: (``mig-1g.10gb``; ``whole`` when the node went home).
NODE_RECUT_AT = PREFIX + "recut-at"
NODE_RECUT_FOR = PREFIX + "recut-for"
#: Pool the server was admitted to (label and annotation; pool names are valid label values).
POD_POOL = PREFIX + "pool"
#: The JupyterHub user: raw name in the annotation, :func:`safe_label_value` in the label.
POD_USER = PREFIX + "user"
#: The named server ("" for the default server): raw in the annotation, safe in the label.
POD_SERVER = PREFIX + "server"
#: The user's JupyterHub groups at admission time, comma separated (annotation only).
POD_GROUPS = PREFIX + "groups"
#: GPUs the server was admitted with (label).
POD_GPUS = PREFIX + "gpus"
#: ``"true"`` when the server borrows GPUs beyond its subject's guarantee and may be reclaimed.
POD_OVER_QUOTA = PREFIX + "over-quota"
#: Admission id, matching the pod to the reservation made for it (label).
POD_ADMISSION = PREFIX + "admission"
#: How the subject a server admitted within a booking is charged to begins (``booking:cs231``)
BOOKING_SUBJECT_PREFIX = "booking:"
#: The subject charged: ``group:NAME`` or ``user:NAME`` raw in the annotation, safe in the label.
POD_CHARGED = PREFIX + "charged"
#: The platform (GPU type route inside the pool) the server was admitted to (label).
POD_PLATFORM = PREFIX + "platform"
#: The shape the server was admitted with (label): ``whole``, ``mig-1g.10gb``, ``shared-4``...
#: (:mod:`.shapes`); absent on servers without GPUs.
POD_SHAPE = PREFIX + "shape"
#: What the server counts against quotas, in GPU-equivalents (annotation): ``2``, ``1/7``.
POD_EQUIVALENTS = PREFIX + "gpu-equivalents"

#: gpuctl's pool label is also put on pods, so ``gpuctl get jobs --pool`` style queries work.
POD_RUNWHERE_POOL = POOL_LABEL

#: KubeSpawner's own user/server annotations: a fallback that identifies servers started before
#: gpupool was installed, so they are still listed and charged to their user.
KUBESPAWNER_USER = "hub.jupyter.org/username"
KUBESPAWNER_SERVER = "hub.jupyter.org/servername"

# --- label syntax --------------------------------------------------------------------------------

_INVALID_CHARS = re.compile(r"[^-A-Za-z0-9_.]+")
_HASH_LEN = 8


@functools.lru_cache(maxsize=16384)
def safe_label_value(value: str) -> str:
    """A valid label value standing for ``value``: itself when already valid.

    Otherwise invalid characters become ``-``, the result is trimmed to alphanumerics at both ends,
    cut to fit, and suffixed with 8 hex digits of the SHA-256 of the raw value, so two different
    names that escape alike (``a@b`` and ``a#b``) still get different labels. Deterministic, so the
    same user always gets the same label.
    """
    if is_label_value(value):
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:_HASH_LEN]
    body = _INVALID_CHARS.sub("-", value).strip("-_.")
    body = body[: 63 - _HASH_LEN - 1].rstrip("-_.")
    return f"{body}-{digest}" if body else digest
