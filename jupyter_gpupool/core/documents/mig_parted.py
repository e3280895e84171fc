"""mig-parted config files: named MIG layouts, as NVIDIA's MIG manager applies them.

NVIDIA's MIG manager (part of the GPU operator) re-cuts a node's GPUs when the node's
``nvidia.com/mig.config`` label names a config of its mig-parted config file (the GPU
operator's ``default-mig-parted-config`` ConfigMap, key ``config.yaml``)::

    version: v1
    mig-configs:
      all-disabled:
        - devices: all
          mig-enabled: false
      all-1g.10gb:
        - devices: all
          mig-enabled: true
          mig-devices: {"1g.10gb": 7}

A config is a list of rules; each applies to ``devices`` (``all`` or GPU indexes) whose PCI
device id is in its ``device-filter`` (when it has one): MIG off (whole GPUs), or MIG on with
``mig-devices`` per GPU. A GPU no rule applies to is left as it is; this module reads it as
whole. Profile names keep mig-parted's spelling (``1g.10gb+me``); the device plugin's resource
replaces ``+`` by ``.`` (:func:`resource_profile`).

Both the service (which plans re-cuts with these layouts, ``core/admission/recut.py``) and the
simulator's MIG manager (which applies them) read configs here, so they agree on what a name
means. :data:`DEFAULT_CONFIG` holds the A100 configs of the GPU operator's default file;
docs/shapes.md names the sources and what could not be confirmed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .yaml_reader import DocumentError, Problem, safe_load

#: GFD's ``nvidia.com/gpu.product`` -> the PCI device id mig-parted's ``device-filter`` names
#: (vendor 10DE, NVIDIA). Only the cards whose MIG profiles the project knows.
PCI_DEVICE_IDS = {
    "NVIDIA-A100-SXM4-80GB": "0x20B210DE",
    "NVIDIA-A100-80GB-PCIe": "0x20B510DE",
    "NVIDIA-A100-SXM4-40GB": "0x20B010DE",
    "NVIDIA-A100-PCIE-40GB": "0x20F110DE",
}

#: The config the MIG manager applies for whole GPUs (the GPU operator's default file has it).
WHOLE_CONFIG = "all-disabled"

_A100_80 = '["0x20B210DE", "0x20B510DE"]'
_A100_40 = '["0x20B010DE", "0x20F110DE"]'

DEFAULT_CONFIG = f"""\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {{}}
  all-1g.5gb:
    - device-filter: {_A100_40}
      devices: all
      mig-enabled: true
      mig-devices: {{"1g.5gb": 7}}
  all-2g.10gb:
    - device-filter: {_A100_40}
      devices: all
      mig-enabled: true
      mig-devices: {{"2g.10gb": 3}}
  all-3g.20gb:
    - device-filter: {_A100_40}
      devices: all
      mig-enabled: true
      mig-devices: {{"3g.20gb": 2}}
  all-7g.40gb:
    - device-filter: {_A100_40}
      devices: all
      mig-enabled: true
      mig-devices: {{"7g.40gb": 1}}
  all-1g.10gb:
    - device-filter: {_A100_80}
      devices: all
      mig-enabled: true
      mig-devices: {{"1g.10gb": 7}}
  all-2g.20gb:
    - device-filter: {_A100_80}
      devices: all
      mig-enabled: true
      mig-devices: {{"2g.20gb": 3}}
  all-3g.40gb:
    - device-filter: {_A100_80}
      devices: all
      mig-enabled: true
      mig-devices: {{"3g.40gb": 2}}
  all-7g.80gb:
    - device-filter: {_A100_80}
      devices: all
      mig-enabled: true
      mig-devices: {{"7g.80gb": 1}}
  all-balanced:
    - device-filter: {_A100_40}
      devices: all
      mig-enabled: true
      mig-devices: {{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}
    - device-filter: {_A100_80}
      devices: all
      mig-enabled: true
      mig-devices: {{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}
"""


@dataclass(frozen=True)
class Rule:
    """One entry of a config: the GPUs it applies to and how they are cut."""

    devices: tuple[int, ...] | None  # None: all
    mig_enabled: bool
    mig_devices: tuple[tuple[str, int], ...] = ()
    device_filter: tuple[str, ...] = ()  # PCI device ids, upper-cased; empty: any

    def applies(self, index: int, pci_id: str | None) -> bool:
        if self.devices is not None and index not in self.devices:
            return False
        return not self.device_filter or (pci_id or "").upper() in self.device_filter


MigConfigs = Mapping[str, tuple[Rule, ...]]
#: what one GPU becomes: None for a whole GPU (MIG off), else its (profile, count) pairs
GPULayout = tuple[tuple[str, int], ...] | None


def resource_profile(profile: str) -> str:
    """The device plugin's spelling: ``1g.10gb+me`` -> ``1g.10gb.me``."""
    return profile.replace("+", ".")


def read_configs(text: str, file: str = "config.yaml") -> dict[str, tuple[Rule, ...]]:
    """Every named config of a mig-parted config file; DocumentError naming each problem."""
    data = safe_load(text, file)
    problems: list[str] = []
    out: dict[str, tuple[Rule, ...]] = {}
    if not isinstance(data, dict) or not isinstance(data.get("mig-configs"), dict):
        problems.append("mig-configs: a mapping of config names to lists of rules is needed")
    else:
        for name, rules in data["mig-configs"].items():
            if not isinstance(rules, list) or not rules:
                problems.append(f"mig-configs.{name}: must be a list of rules")
                continue
            read = [_rule(r, f"mig-configs.{name}[{i}]", problems) for i, r in enumerate(rules)]
            out[str(name)] = tuple(r for r in read if r is not None)
    if problems:
        raise DocumentError(
            Problem(file, 0, p.split(":", 1)[0], p.split(": ", 1)[1]) for p in problems
        )
    return out


def _rule(raw: Any, where: str, problems: list[str]) -> Rule | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping")
        return None
    devices_raw = raw.get("devices")
    devices: tuple[int, ...] | None
    if devices_raw == "all":
        devices = None
    elif isinstance(devices_raw, list) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices_raw
    ):
        devices = tuple(devices_raw)
    else:
        problems.append(f"{where}.devices: must be all or a list of GPU indexes")
        return None
    enabled = raw.get("mig-enabled")
    if not isinstance(enabled, bool):
        problems.append(f"{where}.mig-enabled: must be true or false")
        return None
    mig = raw.get("mig-devices") or {}
    if not isinstance(mig, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in mig.values()
    ):
        problems.append(f"{where}.mig-devices: must map profiles to counts")
        return None
    flt = raw.get("device-filter") or ()
    if isinstance(flt, str):
        flt = (flt,)
    if not isinstance(flt, (list, tuple)) or not all(isinstance(f, str) for f in flt):
        problems.append(f"{where}.device-filter: must be a PCI device id or a list of them")
        return None
    pairs = tuple((str(p), n) for p, n in mig.items() if n) if enabled else ()
    return Rule(devices, enabled, pairs, tuple(f.upper() for f in flt))


DEFAULT_CONFIGS: dict[str, tuple[Rule, ...]] = read_configs(
    DEFAULT_CONFIG, "default-mig-parted-config"
)


def gpu_layouts(
    rules: tuple[Rule, ...], gpu_count: int, product: str | None
) -> tuple[GPULayout, ...] | None:
    """What each of a node's ``gpu_count`` GPUs becomes under a config, or None when no rule
    applies to any of them (the config is not for this card: mig-parted changes nothing)."""
    pci_id = PCI_DEVICE_IDS.get(product or "")
    out: list[GPULayout] = []
    matched = False
    for index in range(gpu_count):
        rule = next((r for r in rules if r.applies(index, pci_id)), None)
        if rule is not None:
            matched = True
        out.append(rule.mig_devices if rule is not None and rule.mig_enabled else None)
    return tuple(out) if matched else None


def units(rules: tuple[Rule, ...], gpu_count: int, product: str | None) -> Counter[str] | None:
    """What a node offers under a config: ``whole`` GPUs and MIG instances by resource profile
    (``{"1g.10gb": 56}``); None when the config does not apply to the card."""
    layouts = gpu_layouts(rules, gpu_count, product)
    if layouts is None:
        return None
    out: Counter[str] = Counter()
    for layout in layouts:
        if layout is None:
            out["whole"] += 1
        else:
            for profile, n in layout:
                out[resource_profile(profile)] += n
    return out
