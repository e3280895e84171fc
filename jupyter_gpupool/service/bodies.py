"""Request bodies: parsed and checked before anything is looked up or changed.

Each parser takes the decoded JSON value and returns a plain value object, or raises a 400
:class:`~jupyter_gpupool.service.errors.ApiError` whose message names the field and says what is
wrong with it. Unknown fields are refused (with a suggestion for near misses), booleans never pass
as numbers, and GPU counts must be whole numbers between 0 and the configured maximum.

JSON is read by :mod:`~jupyter_gpupool.core.documents.json_reader`: a key given twice in an object is refused
with its line, and a number too long to convert reaches the field's check as a
:class:`~jupyter_gpupool.core.documents.json_reader.LongNumber`, which that check refuses by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.documents import json_reader
from ..core.documents.yaml_reader import unknown_key_message
from ..core.usage.labels import is_label_key, is_label_value
from ..core.words.launch_options import GPUCountError, gpu_count
from .errors import bad_request

#: Most pools one admission request may list (a spawn form offers a handful).
MAX_POOLS_PER_REQUEST = 64
#: Longest user, group, server or pool name accepted in a request.
MAX_NAME_LENGTH = 255


def parse_json(body: bytes) -> Any:
    """The JSON value of a request body; a 400 that says where the syntax breaks otherwise."""
    if not body.strip():
        raise bad_request("the request needs a JSON body")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad_request(f"the request body is not UTF-8: {e}") from None
    try:
        return json_reader.loads(text)
    except json.JSONDecodeError as e:
        raise bad_request(
            f"the request body is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        ) from None
    except json_reader.KeyTwice as e:
        raise bad_request(f"the request body is refused: {e}; give each key once") from None
    except RecursionError:
        raise bad_request("the request body is nested too deeply") from None


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, json_reader.LongNumber):
        return str(value)
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _object(value: Any, what: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise bad_request(f"{what} must be a JSON object, not {_describe(value)}")
    for key in value:
        if key not in allowed:
            raise bad_request(f"{what}: {unknown_key_message(str(key), allowed)}")
    return value


def _name(value: Any, field: str, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise bad_request(f"{field} must be a string, not {_describe(value)}")
    if not value and not empty_ok:
        raise bad_request(f"{field} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise bad_request(f"{field} is longer than {MAX_NAME_LENGTH} characters")
    return value


def _names(value: Any, field: str, *, limit: int | None = None) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise bad_request(f"{field} must be a list of strings, not {_describe(value)}")
    if limit is not None and len(value) > limit:
        raise bad_request(f"{field} lists {len(value)} entries; at most {limit} are allowed")
    return tuple(_name(v, f"{field}[{i}]") for i, v in enumerate(value))


def _gpu_count(value: Any, field: str, maximum: int) -> int:
    """A whole, non-negative GPU count no larger than ``maximum`` (the rule the spawner applies
    too); ``2.0`` is refused here: the API takes JSON integers."""
    try:
        return gpu_count(value, maximum, field=field, shown=_describe, request=True)
    except GPUCountError as e:
        raise bad_request(str(e)) from None


@dataclass(frozen=True)
class AdmissionBody:
    """``POST api/v1/admissions``. ``user``/``groups`` None: the caller's own."""

    user: str | None
    groups: tuple[str, ...] | None
    pools: tuple[str, ...]
    gpus: int
    gpu_type: str | None
    server: str
    reclaim: bool
    #: wait in line when no pool can take it now (202) instead of a refusal (409)
    queue: bool = False
    #: the shape asked of each entry of ``pools`` (None: whole GPUs), same order
    shapes: tuple[str | None, ...] = ()


ADMISSION_FIELDS = ("user", "groups", "pools", "gpus", "gpu_type", "server", "reclaim", "queue")


def parse_admission(value: Any, *, max_gpus: int) -> AdmissionBody:
    data = _object(value, "the admission request", ADMISSION_FIELDS)
    user = data.get("user")
    groups = data.get("groups")
    gpu_type = data.get("gpu_type")
    reclaim = data.get("reclaim", True)
    queue = data.get("queue", False)
    for key, value in (("reclaim", reclaim), ("queue", queue)):
        if not isinstance(value, bool):
            raise bad_request(f"{key} must be true or false, not {_describe(value)}")
    # a pool listed twice (with the same shape) is tried once
    entries = dict.fromkeys(_pool_entries(data.get("pools", [])))
    return AdmissionBody(
        user=None if user is None else _name(user, "user"),
        groups=None if groups is None else _names(groups, "groups"),
        pools=tuple(p for p, _ in entries),
        shapes=tuple(s for _, s in entries) if any(s for _, s in entries) else (),
        gpus=_gpu_count(data.get("gpus", 0), "gpus", max_gpus),
        gpu_type=None if gpu_type in (None, "") else _name(gpu_type, "gpu_type"),
        server=_name(data.get("server", ""), "server", empty_ok=True),
        reclaim=reclaim,
        queue=queue,
    )


POOL_ENTRY_FIELDS = ("pool", "shape")


def _pool_entries(value: Any) -> list[tuple[str, str | None]]:
    """``pools``: each entry a pool name (whole GPUs) or ``{"pool": NAME, "shape": ID}``."""
    if not isinstance(value, list):
        raise bad_request(
            'pools must be a list of pool names or {"pool": ..., "shape": ...} objects, '
            f"not {_describe(value)}"
        )
    if len(value) > MAX_POOLS_PER_REQUEST:
        raise bad_request(
            f"pools lists {len(value)} entries; at most {MAX_POOLS_PER_REQUEST} are allowed"
        )
    out: list[tuple[str, str | None]] = []
    for i, entry in enumerate(value):
        field = f"pools[{i}]"
        if isinstance(entry, str):
            out.append((_name(entry, field), None))
            continue
        if not isinstance(entry, Mapping):
            raise bad_request(
                f'{field} must be a pool name or a {{"pool": ..., "shape": ...}} object, '
                f"not {_describe(entry)}"
            )
        obj = _object(entry, field, POOL_ENTRY_FIELDS)
        if "pool" not in obj:
            raise bad_request(f"{field} needs a pool")
        pool = _name(obj["pool"], f"{field}.pool")
        shape = obj.get("shape")
        if shape is not None:
            shape = _name(shape, f"{field}.shape", empty_ok=True)
            if shape and not is_label_value(shape):
                raise bad_request(
                    f"{field}.shape {_describe(shape)} is not a shape id "
                    "(whole, mig-1g.10gb, shared-4...: see the pool's shapes in api/v1/pools)"
                )
        out.append((pool, None if shape in (None, "", "whole") else shape))
    return out


#: Most entries one question about places in line may list (``POST api/v1/admissions/wait``):
#: JupyterHub starts at most ``concurrent_spawn_limit`` (100) at once.
MAX_WAIT_IDS = 1000


@dataclass(frozen=True)
class WaitBody:
    """``POST api/v1/admissions/wait``: the entries asked about, each with what the asker last
    heard of it (``(state, position)``; None: nothing yet), and how long to hold the answer."""

    heard: dict[str, tuple[str, int | None] | None]
    wait: float


def parse_wait(value: Any) -> WaitBody:
    data = _object(value, "the question", ("ids", "wait"))
    ids = data.get("ids")
    if not isinstance(ids, Mapping) or not ids:
        what = "an empty object" if isinstance(ids, Mapping) else _describe(ids)
        raise bad_request(
            f"ids must be a non-empty object of admission id to what was heard, not {what}"
        )
    if len(ids) > MAX_WAIT_IDS:
        raise bad_request(f"ids lists {len(ids)} entries; at most {MAX_WAIT_IDS} are allowed")
    heard: dict[str, tuple[str, int | None] | None] = {}
    for key, was in ids.items():
        admission_id = _name(key, "ids")
        if was is None:
            heard[admission_id] = None
            continue
        what = f"ids[{admission_id!r}]"
        was = _object(was, what, ("state", "position"))
        state = _name(was.get("state"), f"{what}.state")
        position = was.get("position")
        if position is not None and (isinstance(position, bool) or not isinstance(position, int)):
            raise bad_request(f"{what}.position must be a whole number or null")
        heard[admission_id] = (state, position)
    wait = data.get("wait", 0)
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise bad_request(f"wait must be a number of seconds, not {_describe(wait)}")
    return WaitBody(heard=heard, wait=float(wait))


def parse_groups(text: str) -> tuple[str, ...]:
    """A ``groups`` query argument: a JSON list of group names (``[]`` for none)."""
    try:
        value = json_reader.loads(text)
    except (json.JSONDecodeError, json_reader.KeyTwice, RecursionError):
        raise bad_request(
            f'groups must be a JSON list of group names, e.g. ["ml-research"]; not {text[:40]!r}'
        ) from None
    return _names(value, "groups")


@dataclass(frozen=True)
class LabelPatch:
    """``PATCH api/v1/nodes/{name}/labels``: values to set, None to remove (kubectl's ``key-``)."""

    labels: Mapping[str, str | None]
    overwrite: bool


def parse_label_patch(value: Any) -> LabelPatch:
    data = _object(value, "the label change", ("labels", "overwrite"))
    if "labels" not in data:
        raise bad_request('the label change needs "labels": {"KEY": "VALUE" or null, ...}')
    labels = data["labels"]
    if not isinstance(labels, Mapping) or not labels:
        raise bad_request(
            f"labels must be a non-empty object of KEY: VALUE (null removes), "
            f"not {_describe(labels)}"
        )
    out: dict[str, str | None] = {}
    for key, val in labels.items():
        if not is_label_key(key):
            raise bad_request(f"{key!r} is not a valid Kubernetes label key (NAME or PREFIX/NAME)")
        if val is not None:
            if not isinstance(val, str):
                raise bad_request(
                    f"labels.{key} must be a string or null, not {_describe(val)}"
                    + (f' (quote it: "{val}")' if isinstance(val, (int, float)) else "")
                )
            if not is_label_value(val):
                raise bad_request(
                    f"labels.{key}: {val!r} is not a valid Kubernetes label value (at most 63 "
                    "letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
                )
        out[key] = val
    overwrite = data.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise bad_request(f"overwrite must be true or false, not {_describe(overwrite)}")
    return LabelPatch(out, overwrite)


def text_body(body: bytes) -> str:
    """A YAML or JSON document body as text (pool and quota documents)."""
    if not body.strip():
        raise bad_request("the request needs a YAML or JSON body with pool or quota documents")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad_request(f"the request body is not UTF-8: {e}") from None
