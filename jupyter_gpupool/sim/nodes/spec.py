"""Cluster files: the YAML that describes a simulated cluster's nodes.

Example (see ``examples/cluster.yaml`` for the demo's layout)::

    nodes:
      - name: gpu-node-1
        labels: {runwhere.ai/pool: training-pool}
        cpu: "96"
        memory: 1024Gi
        gpu: {count: 8, type: A100-80G, product: NVIDIA-A100-SXM4-80GB, memory: 81920}
        taints: [{key: dedicated, value: training, effect: NoSchedule}]
        conditions: {Ready: true, MemoryPressure: false}
        unschedulable: false

``gpu.type`` sets the ``runwhere.ai/gpu-type`` label (what ``gpuctl create`` does); ``gpu.product``
and ``gpu.memory`` set the labels NVIDIA GPU Feature Discovery would (``nvidia.com/gpu.product``,
``nvidia.com/gpu.count``, ``nvidia.com/gpu.memory``); ``gpu.device-plugin: false`` leaves out the
allocatable ``nvidia.com/gpu`` as on a node whose device plugin is not running.

``gpu.mig`` (``{strategy: mixed, devices: {"3g.40gb": 2}}`` or ``{strategy: single, profile:
"1g.10gb"}``), ``gpu.sharing`` (``{strategy: time-slicing|mps, replicas: 4, rename: false}``)
and ``gpu.hami`` (``{split: 10}``) partition the node's GPUs (:mod:`.partitions`): the node then
advertises the resources and labels NVIDIA's device plugin and GFD (or HAMi) would.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.documents.mig_parted import MigConfigs, read_configs
from ...core.documents.yaml_reader import (
    Document,
    DocumentError,
    Problem,
    load_documents,
    unknown_key_message,
)
from ...core.kube.names import is_dns1123_label, is_dns1123_subdomain, is_label_value
from ...core.kube.quantities import parse_quantity
from ...core.kube.tolerations import EFFECTS
from .partitions import (
    MIG_STRATEGIES,
    SHARING_STRATEGIES,
    Layout,
    MigSpec,
    SharingSpec,
    build,
)

CONDITION_TYPES = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
TAINT_EFFECTS = EFFECTS
GPU_RESOURCE = "nvidia.com/gpu"
#: the cluster file's own mig-parted config file (its text, or the same as a mapping)
MIG_PARTED_KEY = "mig-parted-config"

_NODE_KEYS = {
    "name",
    "labels",
    "annotations",
    "taints",
    "cpu",
    "memory",
    "pods",
    "gpu",
    "conditions",
    "unschedulable",
}
_GPU_KEYS = {"count", "type", "product", "memory", "device-plugin", "mig", "sharing", "hami"}
_MIG_KEYS = {"strategy", "profile", "devices"}
_SHARING_KEYS = {"strategy", "replicas", "rename"}
_HAMI_KEYS = {"split"}
_TOP_KEYS = {"nodes", "defaults", "namespaces", MIG_PARTED_KEY}
_DEFAULT_KEYS = {"cpu", "memory", "pods"}
_TAINT_KEYS = {"key", "value", "effect"}


@dataclass
class GPUSpec:
    count: int = 0
    type: str | None = None
    product: str | None = None
    memory_mib: int | None = None
    device_plugin: bool = True
    mig: MigSpec | None = None
    sharing: SharingSpec | None = None
    hami_split: int | None = None

    def layout(self) -> Layout | None:
        """How the GPUs are cut (None: whole GPUs); the spec was checked when it was read."""
        built = build(
            self.count, self.product, self.memory_mib, self.mig, self.sharing, self.hami_split
        )
        if isinstance(built, str):
            raise ValueError(built)
        return built


@dataclass
class NodeSpec:
    """One simulated node, as the cluster file describes it."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    cpu: str = "32"
    memory: str = "256Gi"
    pods: int = 110
    gpu: GPUSpec = field(default_factory=GPUSpec)
    conditions: dict[str, bool] = field(default_factory=dict)
    unschedulable: bool = False

    def all_labels(self) -> dict[str, str]:
        """Labels as the node would carry them: kubelet's, gpuctl's and GPU Feature Discovery's."""
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            # still set in v1.25 (the node lifecycle controller adds them where missing)
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
        }
        if self.gpu.type:
            labels["runwhere.ai/gpu-type"] = self.gpu.type
        if self.gpu.product:
            labels["nvidia.com/gpu.product"] = self.gpu.product
            labels["nvidia.com/gpu.count"] = str(self.gpu.count)
            if self.gpu.memory_mib is not None:
                labels["nvidia.com/gpu.memory"] = str(self.gpu.memory_mib)
        layout = self.gpu.layout()
        if layout is not None:
            labels.update(layout.labels(self.gpu.product, self.gpu.memory_mib))
        labels.update(self.labels)  # explicit labels win
        return labels

    def capacity(self) -> dict[str, str]:
        cap = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods)}
        if self.gpu.count and self.gpu.device_plugin:
            layout = self.gpu.layout()
            if layout is None:
                cap[GPU_RESOURCE] = str(self.gpu.count)
            else:
                cap.update((k, str(v)) for k, v in sorted(layout.resources().items()))
        return cap

    def condition_status(self, ctype: str) -> bool:
        return self.conditions.get(ctype, ctype == "Ready")


@dataclass
class ClusterSpec:
    nodes: list[NodeSpec] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    #: the configs ``nvidia.com/mig.config`` names (None: the GPU operator's default file's)
    mig_configs: MigConfigs | None = None


class _Checker:
    """Collects every problem in a document instead of stopping at the first."""

    def __init__(self, doc: Document):
        self.doc = doc
        self.problems: list[Problem] = []

    def add(self, path: tuple[Any, ...], message: str) -> None:
        self.problems.append(self.doc.problem(path, message))

    def mapping(self, value: Any, path: tuple[Any, ...], allowed: set[str] | None) -> dict:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.add(path, f"must be a mapping, not {type(value).__name__}")
            return {}
        if allowed is not None:
            for key in value:
                if str(key) not in allowed:
                    self.add((*path, str(key)), unknown_key_message(str(key), allowed))
        return dict(value)

    def string_map(self, value: Any, path: tuple[Any, ...], what: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, v in self.mapping(value, path, None).items():
            if isinstance(v, bool) or v is None or isinstance(v, (dict, list)):
                self.add((*path, str(k)), f"{what} values must be strings")
                continue
            out[str(k)] = str(v)
        return out

    def quantity(self, value: Any, path: tuple[Any, ...]) -> str | None:
        if isinstance(value, bool) or value is None:
            self.add(path, "must be a resource quantity such as 64 or 512Gi")
            return None
        try:
            if parse_quantity(value) < 0:
                raise ValueError
        except (ValueError, TypeError):
            self.add(path, f"{value!r} is not a resource quantity such as 64, 500m or 512Gi")
            return None
        return str(value)

    def count(self, value: Any, path: tuple[Any, ...]) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.add(path, f"must be a whole number >= 0, not {value!r}")
            return None
        return value


def _parse_partitions(c: _Checker, gpu: dict, path: tuple[Any, ...], spec: GPUSpec) -> None:
    """``gpu.mig``, ``gpu.sharing``, ``gpu.hami``: at most one, each checked against the GPUs."""
    given = [k for k in ("mig", "sharing", "hami") if k in gpu]
    if len(given) > 1:
        c.add((*path, given[1]), f"a node's GPUs are cut one way: {' and '.join(given)} given")
        return
    if not given:
        return
    key = given[0]
    where = (*path, key)
    if key == "mig":
        mig = c.mapping(gpu["mig"], where, _MIG_KEYS)
        strategy = mig.get("strategy")
        if strategy not in MIG_STRATEGIES:
            c.add((*where, "strategy"), f"must be one of {', '.join(MIG_STRATEGIES)}")
            return
        if strategy == "single":
            if "devices" in mig:
                c.add((*where, "devices"), "the single strategy takes a profile, not devices")
            profile = mig.get("profile")
            if not isinstance(profile, str) or not profile:
                c.add((*where, "profile"), 'needs a MIG profile such as "1g.10gb"')
                return
            spec.mig = MigSpec("single", profile=profile)
        else:
            if "profile" in mig:
                c.add((*where, "profile"), "the mixed strategy takes devices, not a profile")
            devices = c.mapping(mig.get("devices"), (*where, "devices"), None)
            if not devices:
                c.add((*where, "devices"), 'needs MIG devices such as {"3g.40gb": 2}')
                return
            pairs = []
            for name, n in devices.items():
                if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                    c.add((*where, "devices", str(name)), f"must be a whole number >= 1, not {n!r}")
                    return
                pairs.append((str(name), n))
            spec.mig = MigSpec("mixed", devices=tuple(pairs))
    elif key == "sharing":
        sharing = c.mapping(gpu["sharing"], where, _SHARING_KEYS)
        strategy = sharing.get("strategy")
        if strategy not in SHARING_STRATEGIES:
            c.add((*where, "strategy"), f"must be one of {', '.join(SHARING_STRATEGIES)}")
            return
        replicas = sharing.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
            c.add(
                (*where, "replicas"),
                f"must be a whole number >= 2 (the device plugin refuses fewer), not {replicas!r}",
            )
            return
        rename = sharing.get("rename", False)
        if not isinstance(rename, bool):
            c.add((*where, "rename"), "must be true or false")
            return
        spec.sharing = SharingSpec(strategy, replicas, rename)
    else:
        hami = c.mapping(gpu["hami"], where, _HAMI_KEYS)
        split = hami.get("split", 10)
        if isinstance(split, bool) or not isinstance(split, int) or split < 1:
            c.add((*where, "split"), f"must be a whole number >= 1, not {split!r}")
            return
        spec.hami_split = split
    if not spec.count:
        c.add(where, "needs gpu.count: there are no GPUs to cut")
        spec.mig = spec.sharing = spec.hami_split = None
        return
    built = build(
        spec.count, spec.product, spec.memory_mib, spec.mig, spec.sharing, spec.hami_split
    )
    if isinstance(built, str):
        c.add(where, built)
        spec.mig = spec.sharing = spec.hami_split = None


def _parse_mig_parted(c: _Checker, raw: Any) -> MigConfigs | None:
    """``mig-parted-config``: a mig-parted config file, as its text or as a mapping."""
    import yaml

    where = (MIG_PARTED_KEY,)
    if isinstance(raw, Mapping):
        text = yaml.safe_dump(dict(raw))
    elif isinstance(raw, str):
        text = raw
    else:
        c.add(where, "must be a mig-parted config file: its text, or a mapping with mig-configs")
        return None
    try:
        return read_configs(text, MIG_PARTED_KEY)
    except DocumentError as e:
        for problem in e.problems:
            c.add(where, f"{problem.path}: {problem.message}")
        return None


def _parse_node(c: _Checker, raw: Any, path: tuple[Any, ...], defaults: dict) -> NodeSpec | None:
    data = c.mapping(raw, path, _NODE_KEYS)
    if not data:
        if raw is not None and isinstance(raw, Mapping):
            c.add(path, "a node needs at least a name")
        return None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        c.add((*path, "name"), "every node needs a name")
        return None
    if not is_dns1123_subdomain(name):
        c.add((*path, "name"), f"{name!r} is not a valid node name (lowercase DNS subdomain)")
    node = NodeSpec(name=name)
    node.labels = c.string_map(data.get("labels"), (*path, "labels"), "label")
    for key, value in node.labels.items():
        if not is_label_value(value):
            c.add((*path, "labels", key), f"{value!r} is not a valid Kubernetes label value")
    node.annotations = c.string_map(data.get("annotations"), (*path, "annotations"), "annotation")
    for field_name in ("cpu", "memory"):
        raw_q = data.get(field_name, defaults.get(field_name, getattr(node, field_name)))
        q = c.quantity(raw_q, (*path, field_name))
        if q is not None:
            setattr(node, field_name, q)
    pods = c.count(data.get("pods", defaults.get("pods", 110)), (*path, "pods"))
    if pods is not None:
        node.pods = pods
    if "gpu" in data:
        gpu = c.mapping(data["gpu"], (*path, "gpu"), _GPU_KEYS)
        gcount = c.count(gpu.get("count", 0), (*path, "gpu", "count"))
        node.gpu.count = gcount or 0
        for key, attr in (("type", "type"), ("product", "product")):
            if key in gpu:
                v = gpu[key]
                if not isinstance(v, str) or not is_label_value(v):
                    c.add((*path, "gpu", key), f"{v!r} must be a valid label value")
                else:
                    setattr(node.gpu, attr, v)
        if "memory" in gpu:
            node.gpu.memory_mib = c.count(gpu["memory"], (*path, "gpu", "memory"))
        if "device-plugin" in gpu:
            if not isinstance(gpu["device-plugin"], bool):
                c.add((*path, "gpu", "device-plugin"), "must be true or false")
            else:
                node.gpu.device_plugin = gpu["device-plugin"]
        _parse_partitions(c, gpu, (*path, "gpu"), node.gpu)
    taints = data.get("taints") or []
    if not isinstance(taints, list):
        c.add((*path, "taints"), "must be a list of {key, value, effect}")
        taints = []
    for i, t in enumerate(taints):
        tpath = (*path, "taints", i)
        taint = c.string_map(t, tpath, "taint")
        for k in taint:
            if k not in _TAINT_KEYS:
                c.add((*tpath, k), unknown_key_message(k, _TAINT_KEYS))
        if not taint.get("key"):
            c.add(tpath, "a taint needs a key")
        if taint.get("effect") not in TAINT_EFFECTS:
            c.add((*tpath, "effect"), f"effect must be one of {', '.join(TAINT_EFFECTS)}")
        node.taints.append({k: v for k, v in taint.items() if k in _TAINT_KEYS})
    conds = c.mapping(data.get("conditions"), (*path, "conditions"), set(CONDITION_TYPES))
    for ctype, status in conds.items():
        if ctype not in CONDITION_TYPES:
            continue
        if not isinstance(status, bool):
            c.add((*path, "conditions", ctype), "must be true or false")
            continue
        node.conditions[ctype] = status
    unsched = data.get("unschedulable", False)
    if not isinstance(unsched, bool):
        c.add((*path, "unschedulable"), "must be true or false")
    else:
        node.unschedulable = unsched
    return node


def parse_cluster(text: str, file: str = "<cluster>") -> ClusterSpec:
    """Parse a cluster file; raises :class:`DocumentError` listing every problem."""
    docs = load_documents(text, file)
    if len(docs) != 1:
        line = docs[1].start_line if len(docs) > 1 else 1
        raise DocumentError([Problem(file, line, "(document)", "expected exactly one document")])
    doc = docs[0]
    c = _Checker(doc)
    top = c.mapping(doc.data, (), _TOP_KEYS)
    defaults = c.mapping(top.get("defaults"), ("defaults",), _DEFAULT_KEYS)
    spec = ClusterSpec()
    raw_nodes = top.get("nodes")
    if not isinstance(raw_nodes, list):
        c.add(("nodes",), "must be a list of nodes")
        raw_nodes = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_nodes):
        node = _parse_node(c, raw, ("nodes", i), defaults)
        if node is None:
            continue
        if node.name in seen:
            c.add(
                ("nodes", i, "name"),
                f"duplicate node name {node.name!r} (also nodes[{seen[node.name]}])",
            )
            continue
        seen[node.name] = i
        spec.nodes.append(node)
    if MIG_PARTED_KEY in top:
        spec.mig_configs = _parse_mig_parted(c, top[MIG_PARTED_KEY])
    namespaces = top.get("namespaces") or []
    if not isinstance(namespaces, list):
        c.add(("namespaces",), "must be a list of names")
        namespaces = []
    for i, ns in enumerate(namespaces):
        if not isinstance(ns, str) or not is_dns1123_label(ns):
            c.add(("namespaces", i), f"{ns!r} is not a valid namespace name")
        else:
            spec.namespaces.append(ns)
    if c.problems:
        raise DocumentError(c.problems)
    return spec


def load_cluster_file(path: str | os.PathLike[str]) -> ClusterSpec:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise DocumentError([Problem(str(p), 0, "(file)", f"cannot read: {e.strerror}")]) from None
    return parse_cluster(text, str(p))


#: The demo's cluster in a source tree; wheels carry a copy in the sim package (pyproject.toml).
EXAMPLE_CLUSTER = Path(__file__).resolve().parents[3] / "examples" / "cluster.yaml"


def example_cluster_spec() -> ClusterSpec:
    """The demo's cluster: from the source tree if present, else the copy in the package."""
    packaged = Path(__file__).resolve().parents[1] / "example_cluster.yaml"
    return load_cluster_file(EXAMPLE_CLUSTER if EXAMPLE_CLUSTER.exists() else packaged)


def node_spec_from_dict(data: Mapping[str, Any]) -> NodeSpec:
    """A node from the same mapping a cluster file's ``nodes`` entry holds (for live changes)."""
    import yaml

    spec = parse_cluster(yaml.safe_dump({"nodes": [dict(data)]}), "<node>")
    return spec.nodes[0]
