"""Pool files on disk: which files a path names, reading them, and loading them as one registry.

The core (:mod:`jupyter_gpupool.core.pools.reading`) loads text only; everything that touches the file
system is here, shared by ``gpupool validate`` and ``gpupool create``/``delete`` (through
``commands/files.py``), the service's registry directory, the demo and the tests. A directory
stands for its pool files (not recursive, sorted, hidden files skipped), and a file over the
loader's size limit is refused before it is read into memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .core.documents.yaml_reader import MAX_TEXT_BYTES, DocumentError, Problem
from .core.pools.model import Registry
from .core.pools.reading import LoadReport, check_texts, in_reading_order, load_texts

#: What a pool file's name ends with, in a directory or a ConfigMap.
FILE_SUFFIXES = (".yaml", ".yml", ".json")


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files to read: each file as given, each directory's pool files (not recursive, sorted)."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(
                str(child)
                for child in sorted(path.iterdir())
                if child.is_file()
                and child.suffix in FILE_SUFFIXES
                and not child.name.startswith(".")
            )
        else:
            out.append(str(p))
    return out


def read_files(files: Iterable[str], problems: list[Problem]) -> list[tuple[str, str]]:
    """``(text, file name)`` of each file that can be read; the others go to ``problems``."""
    texts = []
    for f in files:
        try:
            size = Path(f).stat().st_size
            if size > MAX_TEXT_BYTES:  # refused before it is read into memory
                problems.append(
                    Problem(f, 1, "(file)", f"{size} bytes is too large; at most {MAX_TEXT_BYTES}")
                )
                continue
            texts.append((Path(f).read_text(encoding="utf-8"), f))
        except (OSError, UnicodeDecodeError) as e:
            problems.append(Problem(f, 1, "(file)", f"cannot read: {e}"))
    return texts


def load_paths(
    paths: Iterable[str | os.PathLike[str]], extra: Sequence[tuple[str, str]] = ()
) -> Registry:
    """Load files and directories as one registry, or raise with every problem in all of them
    (``extra``: more ``(text, name)`` to load with them, as ``gpupool validate --service``
    takes the service's pools)."""
    problems: list[Problem] = []
    files = expand_paths(paths)
    texts = read_files(files, problems)
    try:
        registry = load_texts([*texts, *extra])
    except DocumentError as e:
        problems.extend(e.problems)
    if problems:
        raise DocumentError(in_reading_order(problems, files))
    return registry


def check_paths(
    paths: Iterable[str | os.PathLike[str]], extra: Sequence[tuple[str, str]] = ()
) -> LoadReport:
    """Like :func:`load_paths` but reports per file instead of raising (``gpupool validate``);
    the report's files are the paths' (``extra`` is checked with them, not listed)."""
    files = expand_paths(paths)
    problems: list[Problem] = []
    texts = read_files(files, problems)
    return check_texts([*texts, *extra], files, problems)
