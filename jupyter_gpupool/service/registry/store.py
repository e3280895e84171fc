"""Where pools and quotas are stored: files in a directory (the default), or a ConfigMap.

Both hold the same thing, named YAML texts (see :mod:`.documents`), and offer the same four
calls: :meth:`read` the current layout (raising :class:`~jupyter_gpupool.core.documents.yaml_reader.DocumentError`
when what is stored does not load), :meth:`key_for` a new document, :meth:`write` an edit, and
:meth:`fingerprint`, a cheap token that changes when someone else changed the store, so the
service can reload live.

Reading, parsing and writing run in a thread: a thousand pool files take a while, and the event
loop answers admissions meanwhile. Each store keeps the layout it last read or wrote, so the next
read parses only the texts that changed since.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...core.documents.yaml_reader import DocumentError, Problem
from ...poolfiles import FILE_SUFFIXES, expand_paths, read_files
from ..cluster.kube import Kube, KubeError
from ..errors import ApiError
from .documents import Edit, Layout, load_layout


class RegistryStore(ABC):
    #: Says where documents live, for logs and messages.
    description: str
    #: What was last read or written (its parsed texts are reused by the next read).
    last: Layout | None = None

    @abstractmethod
    async def read(self) -> Layout: ...

    @abstractmethod
    def key_for(self, stem: str) -> str: ...

    @abstractmethod
    async def write(self, edit: Edit) -> None: ...

    @abstractmethod
    async def fingerprint(self) -> Hashable: ...


class FileStore(RegistryStore):
    """Pool and quota files in one directory, one document per file when the service writes.

    Writes are atomic per file (a temporary file in the same directory, then a rename), so a
    reader never sees half a document; files starting with ``.`` are never loaded.
    """

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self.description = f"pool files in {self.directory}"

    def _files(self) -> list[str]:
        return expand_paths([self.directory])

    async def read(self) -> Layout:
        self.last = await asyncio.to_thread(self._read, self.last)
        return self.last

    def _read(self, previous: Layout | None) -> Layout:
        self.directory.mkdir(parents=True, exist_ok=True)
        problems: list[Problem] = []
        # the size limit is checked before a file is read into memory, as for gpupool validate
        texts = {name: text for text, name in read_files(self._files(), problems)}
        if problems:
            raise DocumentError(problems)
        return load_layout(texts, previous)

    def key_for(self, stem: str) -> str:
        return str(self.directory / f"{stem}.yaml")

    async def write(self, edit: Edit) -> None:
        await asyncio.to_thread(self._write, edit)
        self.last = edit.after

    def _write(self, edit: Edit) -> None:
        # Shared files lose documents first, then new files appear, then emptied files go: a
        # crash in between can drop a document, never define one twice (which would not load).
        rewritten = [n for n in edit.writes if n in edit.before.texts]
        new = [n for n in edit.writes if n not in edit.before.texts]
        try:
            for names in (rewritten, new):
                _write_all({n: edit.writes[n] for n in names})
            for name in edit.deletes:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)
        except OSError as e:
            raise ApiError(503, f"cannot write {self.description}: {e}") from e

    async def fingerprint(self) -> Hashable:
        return await asyncio.to_thread(self._fingerprint)

    def _fingerprint(self) -> Hashable:
        out = []
        for name in self._files():
            try:
                st = os.stat(name)
            except OSError:
                continue
            out.append((name, st.st_mtime_ns, st.st_size))
        return tuple(out)


#: Up to this many files are each written and fsynced on their own; more are synced together.
FEW = 8
#: Without syncfs: files fsynced at once (the file system commits concurrent fsyncs together).
WRITERS = 16


def _write_all(texts: Mapping[str, str]) -> None:
    """Write each text atomically; back when all are on disk (the first error raised).

    Many files (a POST of a thousand pools) are written to temporary files first, made durable
    with one ``syncfs`` per file system rather than one fsync per file (a thousand files: about
    0.03 s instead of 0.3 s with 16 fsyncs at a time, on ext4), then renamed into place, and the
    directories synced so the renames last too."""
    if len(texts) <= FEW:
        for name, text in texts.items():
            _atomic_write(Path(name), text)
        return
    written: list[tuple[str, Path]] = []
    try:
        for name, text in texts.items():
            path = Path(name)
            written.append((_write_temporary(path, text, sync=False), path))
        _sync_all([tmp for tmp, _ in written])
        for tmp, path in written:
            os.replace(tmp, path)
        written = []
        for directory in {path.parent for path in map(Path, texts)}:
            _sync_directory(directory)
    finally:
        for tmp, _ in written:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _write_temporary(path: Path, text: str, sync: bool) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _atomic_write(path: Path, text: str) -> None:
    tmp = _write_temporary(path, text, sync=True)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _syncfs() -> Callable[[int], int] | None:
    """Linux's ``syncfs(fd)`` (every dirty page of the file system holding ``fd``, written and
    waited for), or None where the C library has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.syncfs
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int]
    call.restype = ctypes.c_int
    return call


def _sync_all(names: Sequence[str]) -> None:
    """Every named file's data on disk: one syncfs per file system, else an fsync per file."""
    syncfs = _syncfs()
    if syncfs is None:
        with ThreadPoolExecutor(min(WRITERS, len(names))) as pool:
            for done in [pool.submit(_fsync, n) for n in names]:
                done.result()
        return
    done_devices: set[int] = set()
    for name in names:
        fd = os.open(name, os.O_RDONLY)
        try:
            device = os.fstat(fd).st_dev
            if device in done_devices:
                continue
            if syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"syncfs: {os.strerror(err)}", name)
            done_devices.add(device)
        finally:
            os.close(fd)


def _fsync(name: str) -> None:
    fd = os.open(name, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_directory(directory: Path) -> None:
    """The directory's entries (the renames) on disk; where directories cannot be opened, as
    on some platforms, nothing more can be done."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class ConfigMapStore(RegistryStore):
    """One ConfigMap; each data key (``NAME.yaml``) holds documents, as a file would.

    Writes replace the ConfigMap with the resourceVersion that was read, so a concurrent change
    by someone else is refused (409) instead of lost. A ConfigMap holds at most 1 MiB.
    """

    def __init__(self, kube: Kube, namespace: str, name: str):
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.description = f"ConfigMap {namespace}/{name}"
        self._resource_version: str | None = None

    async def _get(self) -> dict[str, Any] | None:
        try:
            return await self.kube.read_configmap(self.namespace, self.name)
        except KubeError as e:
            raise ApiError(503, f"cannot read {self.description}: {e.message}") from e

    async def read(self) -> Layout:
        cm = await self._get()
        data: dict[str, str] = {}
        self._resource_version = None if cm is None else _resource_version(cm)
        if cm is not None:
            raw = cm.get("data") or {}
            data = {k: v for k, v in raw.items() if k.endswith(FILE_SUFFIXES)}
        self.last = await asyncio.to_thread(load_layout, data, self.last)
        return self.last

    def key_for(self, stem: str) -> str:
        return f"{stem}.yaml"

    async def write(self, edit: Edit) -> None:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "gpupool"},
            },
            "data": dict(edit.after.texts),
        }
        try:
            if self._resource_version is None:
                cm = await self.kube.create_configmap(self.namespace, body)
            else:
                body["metadata"]["resourceVersion"] = self._resource_version
                cm = await self.kube.replace_configmap(self.namespace, self.name, body)
        except KubeError as e:
            if e.status == 409:
                # Also what a retried write that had in fact succeeded sees: compare the data.
                current = await self._get()
                if current is not None and (current.get("data") or {}) == edit.after.texts:
                    self._resource_version = _resource_version(current)
                    self.last = edit.after
                    return
                raise ApiError(
                    409, f"{self.description} was changed by someone else meanwhile; try again"
                ) from e
            raise ApiError(503, f"cannot write {self.description}: {e.message}") from e
        self._resource_version = _resource_version(cm)
        self.last = edit.after

    async def fingerprint(self) -> Hashable:
        cm = await self._get()
        return None if cm is None else _resource_version(cm)


def _resource_version(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    return meta.get("resourceVersion") if isinstance(meta, Mapping) else None
