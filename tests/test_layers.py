"""The layers the folders promise (``docs/architecture.md``), checked on the source by AST.

- ``jupyter_gpupool/core/`` is pure: it imports only the standard library's pure modules, PyYAML
  and itself, and reads no files. So the service, the spawner, the CLI and the simulator can feed
  it objects and text, and its tests need no cluster, loop or disk.
- The notebook side and the hub side do not lean on each other: ``service/``, ``spawner/`` and
  ``commands/`` do not import ``notebook/``, and ``notebook/`` imports neither ``service/`` nor
  ``commands/`` (both sides talk through the shared clients and the core).
- ``db/`` (the service's database) uses the core and SQLAlchemy, never its users.
- The core is in rooms (``core/kube``, ``documents``, ``usage``, ``accounting``, ``time``,
  ``pools``, ``admission``, ``words``), each importing only the rooms below it; no room imports
  ``words/``, which never imports ``admission/``; the simulator uses only ``kube/``,
  ``documents/`` and ``words/``.
- The simulator is in rooms too (``sim/objects``, ``nodes``, ``api``), each importing only the
  rooms below it, with the modules that assemble a cluster beside them.
- No import circle anywhere in the package: each module can be read (and loaded) after the ones
  it imports, none of which needs it back.
- No module over 600 lines: past that a file holds more than one job (``STYLE.md``).

Imports are resolved to absolute module names (relative ones included, and those inside
functions or under ``TYPE_CHECKING``), so a late import cannot slip past.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "jupyter_gpupool"
CORE = PACKAGE / "core"

#: Standard library modules without I/O, processes, threads or the network.
PURE_STDLIB = frozenset(
    {
        "__future__",
        "abc",
        "bisect",
        "collections",
        "copy",
        "csv",  # writes to the file-like object it is given (a StringIO)
        "dataclasses",
        "datetime",
        "decimal",
        "difflib",
        "enum",
        "fractions",
        "functools",
        "hashlib",
        "heapq",
        "io",  # for StringIO; opening a file is caught as a call below
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "re",
        "string",
        "textwrap",
        "types",
        "typing",
        "zoneinfo",  # reads the IANA time-zone database (read-only data), never the clock
    }
)
#: Third-party modules the core may use: PyYAML parses text it is given.
CORE_THIRD_PARTY = frozenset({"yaml"})

#: Not pure, named so that the allow-list above cannot grow to take them by mistake.
IMPURE = frozenset(
    {
        "aiohttp",
        "asyncio",
        "glob",
        "http",
        "kubernetes",
        "kubernetes_asyncio",
        "os",
        "pathlib",
        "requests",
        "shutil",
        "socket",
        "sqlalchemy",
        "subprocess",
        "sys",
        "tempfile",
        "threading",
        "time",
        "tornado",
        "urllib",
    }
)

#: Calls that read the file system: builtins, and methods of ``os``/``pathlib``/``glob``.
FILE_READING_NAMES = frozenset({"open"})
FILE_READING_ATTRS = frozenset(
    {
        "open",
        "read_text",
        "read_bytes",
        "iterdir",
        "glob",
        "rglob",
        "listdir",
        "scandir",
        "walk",
        "stat",
        "lstat",
        "exists",
        "is_file",
        "is_dir",
    }
)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path, module: str | None = None) -> Iterator[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in the file, wherever it is.

    ``module`` is the file's module name (by default, from its place in the package).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = (module or module_name(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            yield node.lineno, prefix
            for alias in (
                node.names
            ):  # `from . import x`, `from ..core.documents import yaml_reader`: modules
                if node.module is None or is_module(f"{prefix}.{alias.name}"):
                    yield node.lineno, f"{prefix}.{alias.name}"


def is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of ours (a file or folder under the package)."""
    if top(name) != PACKAGE.name:
        return False
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def top(name: str) -> str:
    return name.split(".", 1)[0]


def test_the_lists_are_apart():
    assert not (PURE_STDLIB | CORE_THIRD_PARTY) & IMPURE


@pytest.mark.parametrize("path", files_under(CORE), ids=lambda p: p.name)
def test_core_imports_only_pure_modules(path: Path):
    bad = [
        f"{path.name}:{line}: imports {name}"
        for line, name in imported(path)
        if not (
            name == "jupyter_gpupool.core"
            or name.startswith("jupyter_gpupool.core.")
            or top(name) in PURE_STDLIB
            or top(name) in CORE_THIRD_PARTY
        )
    ]
    assert not bad, "the core must stay pure (no I/O, nothing outside core):\n" + "\n".join(bad)


def file_reading_calls(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in FILE_READING_NAMES:
            yield node.lineno, f"{func.id}("
        elif isinstance(func, ast.Attribute) and func.attr in FILE_READING_ATTRS:
            yield node.lineno, f".{func.attr}("


@pytest.mark.parametrize("path", files_under(CORE), ids=lambda p: p.name)
def test_core_reads_no_files(path: Path):
    bad = [f"{path.name}:{line}: calls {what}" for line, what in file_reading_calls(path)]
    assert not bad, (
        "reading files belongs to the callers (jupyter_gpupool/poolfiles.py for pool files):\n"
        + "\n".join(bad)
    )


NOTEBOOK = "jupyter_gpupool.notebook"


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("service", (NOTEBOOK,)),
        ("spawner", (NOTEBOOK,)),
        ("commands", (NOTEBOOK,)),
        ("notebook", ("jupyter_gpupool.service", "jupyter_gpupool.commands")),
        # the database is the service's store: it knows the core, not who uses it
        (
            "db",
            (
                NOTEBOOK,
                "jupyter_gpupool.service",
                "jupyter_gpupool.commands",
                "jupyter_gpupool.spawner",
            ),
        ),
    ],
)
def test_hub_side_and_notebook_side_stay_apart(folder: str, forbidden: tuple[str, ...]):
    bad = [
        f"{path.relative_to(PACKAGE)}:{line}: imports {name}"
        for path in files_under(PACKAGE / folder)
        for line, name in imported(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]
    assert not bad, f"{folder}/ must not import {', '.join(forbidden)}:\n" + "\n".join(bad)


def test_the_checker_sees_relative_and_late_imports(tmp_path: Path):
    """The checker itself: a relative import two levels up and one inside a function count, and
    a module imported by name from its package is seen as that module."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from ..service import app\nfrom .. import sim\nfrom ..sim import cluster\n\n"
        "def f():\n    import socket\n    open('x')\n"
    )
    names = {name for _, name in imported(probe, "jupyter_gpupool.core.probe")}
    assert {"jupyter_gpupool.service", "jupyter_gpupool.sim", "socket"} <= names
    assert "jupyter_gpupool.sim.cluster" in names
    assert [what for _, what in file_reading_calls(probe)] == ["open("]


# --- the service's rooms (docs/architecture.md) ---------------------------------------------------

SERVICE = PACKAGE / "service"
SVC = "jupyter_gpupool.service"
#: The service's rooms: folders named for their role. The modules beside them (app, context,
#: state, views, bodies, errors, clock, loops, health, settings) are shared by every room.
ROOMS = ("admission", "cluster", "monitoring", "records", "registry", "web")


def room_of(name: str) -> str | None:
    """The room of a module of the service, or None for a shared one (or outside the service)."""
    if not name.startswith(SVC + "."):
        return None
    first = name[len(SVC) + 1 :].split(".", 1)[0]
    return first if first in ROOMS else None


def service_imports() -> Iterator[tuple[str, int, str]]:
    """``(importing module, line, imported module)`` for every import in the service."""
    for path in files_under(SERVICE):
        for line, name in imported(path):
            yield module_name(path), line, name


def test_the_rooms_are_the_folders():
    """A new folder of the service gets its rules here (and a line in docs/architecture.md)."""
    folders = {p.name for p in SERVICE.iterdir() if (p / "__init__.py").exists()}
    assert set(ROOMS) <= folders <= set(ROOMS) | {"settings"}


def test_only_the_app_the_context_and_the_web_room_import_the_web_room():
    allowed = {f"{SVC}.app", f"{SVC}.context"}
    bad = [
        f"{mod}:{line}: imports {name}"
        for mod, line, name in service_imports()
        if room_of(name) == "web" and room_of(mod) != "web" and mod not in allowed
    ]
    assert not bad, "web/ is the outermost room: only app, context and web/ use it:\n" + "\n".join(
        bad
    )


def test_the_cluster_room_imports_no_other_room():
    bad = [
        f"{mod}:{line}: imports {name}"
        for mod, line, name in service_imports()
        if room_of(mod) == "cluster" and room_of(name) not in (None, "cluster")
    ]
    assert not bad, "cluster/ talks to Kubernetes and the hub, for every other room:\n" + "\n".join(
        bad
    )


def test_only_the_records_room_imports_the_database():
    bad = [
        f"{path.relative_to(PACKAGE)}:{line}: imports {name}"
        for path in files_under(PACKAGE)
        if not (path.is_relative_to(SERVICE / "records") or path.is_relative_to(PACKAGE / "db"))
        for line, name in imported(path)
        if name == "jupyter_gpupool.db" or name.startswith("jupyter_gpupool.db.")
    ]
    assert not bad, "records/ is the only writer of the database:\n" + "\n".join(bad)


def test_the_live_state_does_not_import_the_json_views():
    bad = [
        f"{mod}:{line}: imports {name}"
        for mod, line, name in service_imports()
        if mod == f"{SVC}.state" and name == f"{SVC}.views"
    ]
    assert not bad, (
        "what the state needs of a pool's rows lives in core/words/pool_rows.py:\n" + "\n".join(bad)
    )


def test_the_room_rules_see_a_break(tmp_path: Path):
    """The rules above, on a probe: a module of cluster/ that imports the web room is seen."""
    probe = tmp_path / "probe.py"
    probe.write_text("from ..web import api\nfrom ...db import store\nfrom .. import clock\n")
    names = [name for _, name in imported(probe, f"{SVC}.cluster.probe")]
    assert {n for n in names if room_of(n) == "web"} >= {f"{SVC}.web"}
    assert "jupyter_gpupool.db" in names
    assert {room_of(n) for n in names if n.startswith(f"{SVC}.clock")} == {None}


# --- the core's rooms (docs/architecture.md) ------------------------------------------------------

CORE_PKG = "jupyter_gpupool.core"
#: The core's rooms, each with the rooms it may import. They stand one above the other (kube/,
#: documents/, usage/, accounting/, time/, pools/, admission/), each importing only rooms below
#: it; words/ stands beside admission/, over pools/, and no room imports it.
CORE_ROOMS: dict[str, frozenset[str]] = {
    # Kubernetes semantics, shared with the simulator: nothing of the product
    "kube": frozenset(),
    # the spec of a document and its readers: text in, no model (pools/ builds the model)
    "documents": frozenset({"kube"}),
    # what runs, as Kubernetes says it: no quota, booking or pool model
    "usage": frozenset({"kube", "documents"}),
    "accounting": frozenset({"kube", "documents", "usage"}),
    "time": frozenset({"kube", "documents", "usage", "accounting"}),
    "pools": frozenset({"kube", "documents", "usage", "accounting", "time"}),
    "admission": frozenset({"kube", "documents", "usage", "accounting", "time", "pools"}),
    # what the front ends print: it reads the model and the usage, and never decides
    "words": frozenset({"kube", "documents", "usage", "accounting", "time", "pools"}),
}


def core_room_of(name: str) -> str | None:
    """The core's room of a module name, or None (outside the core, or the core's package)."""
    if not name.startswith(CORE_PKG + "."):
        return None
    return name[len(CORE_PKG) + 1 :].split(".", 1)[0]


def core_imports(paths: list[Path] | None = None) -> Iterator[tuple[str, int, str]]:
    """``(importing module, line, imported module)`` for every import inside the core."""
    for path in paths if paths is not None else files_under(CORE):
        for line, name in imported(path):
            yield module_name(path), line, name


def room_breaks(imports: Iterator[tuple[str, int, str]]) -> list[str]:
    return [
        f"{mod}:{line}: imports {name}"
        for mod, line, name in imports
        if (here := core_room_of(mod)) is not None
        and (there := core_room_of(name)) not in (None, here)
        and there not in CORE_ROOMS.get(here, frozenset())
    ]


def test_the_core_is_its_rooms():
    """Every module of the core is in a room (a folder with its rules above); a new folder gets
    its rules here and a row in docs/architecture.md's table of the core's rooms."""
    folders = {p.name for p in CORE.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(CORE_ROOMS)
    loose = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside the core's rooms: {loose}"


def test_each_core_room_imports_only_the_rooms_below_it():
    bad = room_breaks(core_imports())
    assert not bad, (
        "a room of the core imports only the rooms below it (kube, documents, usage, accounting, "
        "time, pools, admission; words over pools, imported by none):\n" + "\n".join(bad)
    )


def test_the_rooms_faces_import_nothing():
    """A room's ``__init__.py`` says what the room holds and imports nothing, so that loading one
    module of a room never loads the others (and no circle runs through a face)."""
    bad = [
        f"{path.relative_to(PACKAGE)}:{line}: imports {name}"
        for path in sorted(CORE.glob("*/__init__.py"))
        for line, name in imported(path)
    ]
    assert not bad, "\n".join(bad)


def test_the_simulator_uses_only_the_cores_semantics_readers_and_tables():
    """The simulator answers as Kubernetes would: it shares the core's Kubernetes semantics, its
    YAML reader and its tables, never the pool model, usage or admission, whose mistakes it would
    then share instead of showing them."""
    allowed = {"kube", "documents", "words"}
    bad = [
        f"{path.relative_to(PACKAGE)}:{line}: imports {name}"
        for path in files_under(PACKAGE / "sim")
        for line, name in imported(path)
        if (room := core_room_of(name)) is not None and room not in allowed
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("room", "line", "broken"),
    [
        ("documents", "from ..pools import model\n", True),
        ("documents", "from ..kube.names import is_label_key\n", False),
        ("usage", "from ..accounting.ledger import parse_time\n", True),
        ("words", "from ..admission.decision import Decision\n", True),
        ("words", "from ..pools.model import Pool\n", False),
        ("admission", "from ..words import tables\n", True),
        ("time", "from ..pools.model import Pool\n", True),
        ("pools", "from ..time.bookings import Booking\n", False),
    ],
)
def test_the_core_room_rules_see_a_break(tmp_path: Path, room: str, line: str, broken: bool):
    """The rule above, on probes: an import up the rooms is seen, one down them is not."""
    probe = tmp_path / "probe.py"
    probe.write_text(line)
    mod = f"{CORE_PKG}.{room}.probe"
    found = room_breaks((mod, n, name) for n, name in imported(probe, mod))
    assert bool(found) == broken, found


# --- the simulator's rooms (docs/architecture.md) ------------------------------------------------

SIM = PACKAGE / "sim"
SIM_PKG = "jupyter_gpupool.sim"
#: The simulator's rooms, each with the rooms it may import: the API's objects, the nodes that
#: hold them, the HTTP front over both. The modules beside them assemble a cluster.
SIM_ROOMS: dict[str, frozenset[str]] = {
    "objects": frozenset(),
    "nodes": frozenset({"objects"}),
    "api": frozenset({"objects", "nodes"}),
}
#: The modules beside the rooms: the cluster they make, and the ways in to it.
SIM_TOP = {"cluster", "credentials", "pytest_plugin", "remote", "scheduler", "testing"}


def sim_room_of(name: str) -> str | None:
    """The simulator's room of a module name; None for its top modules (or outside it)."""
    if not name.startswith(SIM_PKG + "."):
        return None
    first = name[len(SIM_PKG) + 1 :].split(".", 1)[0]
    return first if first in SIM_ROOMS else None


def sim_breaks(imports: Iterator[tuple[str, int, str]]) -> list[str]:
    return [
        f"{mod}:{line}: imports {name}"
        for mod, line, name in imports
        if (here := sim_room_of(mod)) is not None
        and name.startswith(SIM_PKG)
        and (there := sim_room_of(name)) != here
        and (there is None or there not in SIM_ROOMS[here])
    ]


def test_the_simulator_is_its_rooms_and_the_cluster_beside_them():
    folders = {p.name for p in SIM.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(SIM_ROOMS)
    top = {p.stem for p in SIM.glob("*.py")} - {"__init__"}
    assert top == SIM_TOP, "a new module of sim/ goes in a room (or gets its line here)"


def test_each_simulator_room_imports_only_the_rooms_below_it():
    imports = ((module_name(p), n, name) for p in files_under(SIM) for n, name in imported(p))
    bad = sim_breaks(imports)
    assert not bad, (
        "the simulator's rooms import downwards only (objects, nodes, api; the cluster above "
        "them all):\n" + "\n".join(bad)
    )


@pytest.mark.parametrize(
    ("room", "line", "broken"),
    [
        ("objects", "from ..nodes import kubelet\n", True),
        ("objects", "from .. import cluster\n", True),
        ("nodes", "from ..api import server\n", True),
        ("nodes", "from ..objects import store\n", False),
        ("api", "from ..nodes import dcgm\n", False),
    ],
)
def test_the_simulator_room_rules_see_a_break(tmp_path: Path, room: str, line: str, broken: bool):
    probe = tmp_path / "probe.py"
    probe.write_text(line)
    mod = f"{SIM_PKG}.{room}.probe"
    found = sim_breaks((mod, n, name) for n, name in imported(probe, mod))
    assert bool(found) == broken, found


#: Past this a module holds more than one job; split it by concern (``STYLE.md``).
MAX_MODULE_LINES = 600


def module_graph(paths: list[Path]) -> dict[str, dict[str, tuple[Path, int]]]:
    """Each module -> the modules of the package it imports, each with where (file, line).

    Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first, so the packages
    on the way count as imported too; but not the importer's own packages, which Python has
    begun loading before it (a package's ``__init__`` importing its modules is no circle).
    """
    modules = {module_name(path): path for path in paths}
    graph: dict[str, dict[str, tuple[Path, int]]] = {}
    for name, path in modules.items():
        edges = graph[name] = {}
        for line, target in imported(path):
            while target and target not in modules:  # `from .x import name`: the module is x
                target = target.rpartition(".")[0]
            while target and target != name and not name.startswith(target + "."):
                edges.setdefault(target, (path, line))
                target = target.rpartition(".")[0]
    return graph


def circles(graph: dict[str, dict[str, tuple[Path, int]]]) -> list[list[str]]:
    """The groups of modules that import one another, around (strongly connected, by
    Tarjan's algorithm, iteratively), each sorted; modules in no circle are left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, targets = work[-1]
            w = next(targets, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def one_way_round(graph: dict[str, dict[str, tuple[Path, int]]], group: list[str]) -> str:
    """A shortest circle through the group's first module, ``a (a.py:3) -> b (b.py:7) -> a``:
    each module with the line of its import that leads on."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while start not in came_from:  # breadth first, until the start is reached again
        v = queue.popleft()
        for w in sorted(graph[v]):
            if w in members and w not in came_from:
                came_from[w] = v
                queue.append(w)
    way = [start]
    while (before := came_from[way[-1]]) != start:
        way.append(before)
    way = [start, *reversed(way[1:]), start]
    steps = [
        f"{v} ({graph[v][w][0].relative_to(PACKAGE)}:{graph[v][w][1]})" for v, w in pairwise(way)
    ]
    return " -> ".join([*steps, start])


def test_no_import_circle():
    graph = module_graph(files_under(PACKAGE))
    found = circles(graph)
    assert not found, (
        f"{len(found)} import circle(s); move what both sides need to the module that owns it, "
        "or to a lower module both import:\n"
        + "\n".join(
            f"- {', '.join(group)}\n  e.g. {one_way_round(graph, group)}" for group in found
        )
    )


def test_the_circle_finder_finds_circles():
    """The checker itself: two circles (one through three modules), and a module that only
    imports into one is in none."""
    here = (PACKAGE / "core" / "usage" / "index.py", 1)
    graph = {
        "a": {"b": here},
        "b": {"c": here},
        "c": {"a": here, "d": here},
        "d": {"e": here},
        "e": {"d": here},
        "f": {"a": here},
    }
    assert circles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert one_way_round(graph, ["a", "b", "c"]) == (
        "a (core/usage/index.py:1) -> b (core/usage/index.py:1) -> c (core/usage/index.py:1) -> a"
    )


def test_no_module_is_too_long():
    lines = {
        path: len(path.read_text(encoding="utf-8").splitlines()) for path in files_under(PACKAGE)
    }
    long = [
        f"{path.relative_to(PACKAGE)}: {n} lines"
        for path, n in lines.items()
        if n > MAX_MODULE_LINES
    ]
    assert not long, (
        f"modules over {MAX_MODULE_LINES} lines (split them by concern):\n" + "\n".join(long)
    )
