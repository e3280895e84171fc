from __future__ import annotations

import os
from pathlib import Path

import pytest
import pytest_asyncio
import quiet
from clusters import CLUSTERS, open_cluster
from hypothesis import HealthCheck, settings
from needs import under_ci

pytest_plugins = ["jupyter_gpupool.sim.pytest_plugin"]

# The tests run four to a 2-core machine, often shared: Hypothesis' timing checks (a slow first
# draw, a slow example) say how busy the machine is, not whether the code is right. What the
# properties assert is unchanged.
settings.register_profile(
    "shared-machine", suppress_health_check=[HealthCheck.too_slow], deadline=None
)
settings.load_profile("shared-machine")


@pytest.fixture(scope="session")
def realk8s_kubeconfig(tmp_path_factory: pytest.TempPathFactory):
    """A real control plane for the whole run (tests/realk8s.py), started on first use (in
    parallel runs, by the worker that runs the tier: see :func:`_group`)."""
    import realk8s

    where = tmp_path_factory.mktemp("realk8s") / "cp"
    yield from realk8s.start(where, unpacked=realk8s.binaries(tmp_path_factory))


@pytest.fixture(scope="session")
def realk8s_rbac_kubeconfig(tmp_path_factory: pytest.TempPathFactory):
    """A second real control plane, with ``AUTHZ=Node,RBAC``: only what RBAC allows is allowed."""
    import realk8s

    where = tmp_path_factory.mktemp("realk8s-rbac") / "cp"
    yield from realk8s.start(where, authz="Node,RBAC", unpacked=realk8s.binaries(tmp_path_factory))


@pytest.fixture(params=CLUSTERS)
def cluster_kind(request: pytest.FixtureRequest) -> str:
    """``simulated`` or ``real`` (tests/clusters.py): a test taking it runs on both."""
    return str(request.param)


@pytest_asyncio.fixture
async def cluster(cluster_kind: str, request: pytest.FixtureRequest):
    """The example cluster (examples/cluster.yaml's nodes), simulated or real, for one test."""
    real = request.getfixturevalue("realk8s_kubeconfig") if cluster_kind == "real" else None
    async with open_cluster(cluster_kind, realk8s_kubeconfig=real) as c:
        yield c


@pytest.fixture(scope="session")
def postgresql_url():
    """A throwaway PostgreSQL server for the whole run (tests/pg.py), started on first use: the
    SQLAlchemy URL of its database, ``postgresql+psycopg://gpupool@127.0.0.1:PORT/gpupool``."""
    import pg

    with pg.running() as server:
        yield server.url


@pytest.fixture
def fresh_postgresql_url(postgresql_url: str):
    """A new empty database on the ``postgresql_url`` server for one test (dropped after): its URL."""
    import pg

    url = pg.create_database(postgresql_url)
    yield url
    pg.drop_database(url, postgresql_url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A new empty database for the service: an SQLite file, or a database on the throwaway
    PostgreSQL server (a test taking it runs on both)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'gpupool.sqlite'}"
    return str(request.getfixturevalue("fresh_postgresql_url"))


@pytest.fixture
def db(db_url: str):
    """The service's :class:`~jupyter_gpupool.db.store.Database` on ``db_url``, open, its
    writer committing at once (``batch_seconds=0``)."""
    from jupyter_gpupool.db.store import Database

    database = Database(db_url, batch_seconds=0)
    database.open()
    yield database
    database.close()


@pytest.fixture
def outside(db_url: str):
    """An engine of the test's own on ``db_url``'s database (what it reads there is not the
    service's word)."""
    from sqlalchemy import create_engine

    engine = create_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def outage(request: pytest.FixtureRequest, tmp_path):
    """The service's database, which the test takes down and brings back (tests/outage.py):
    an SQLite file whose directory goes away, or a PostgreSQL server of its own that stops."""
    import outage

    with outage.outage(str(request.param), tmp_path) as o:
        yield o


# --- parallel runs (pytest-xdist; scripts/test.sh runs -n N --dist loadgroup) -------------------


def _worker() -> tuple[int, int] | None:
    """``(index, count)`` of this pytest-xdist worker (gw0 is 0), None outside one."""
    name, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not name or not count:
        return None
    return int(name.removeprefix("gw")), int(count)


def _share(low: int, high: int, index: int, count: int) -> str:
    """Slice ``index`` of ``count`` of ``low..high``, as ``LOW-HIGH``."""
    size = (high - low + 1) // count
    return f"{low + index * size}-{low + (index + 1) * size - 1}"


def pytest_configure(config: pytest.Config) -> None:
    """Each xdist worker picks its ports (``free_port``: the demo's hub, service and proxy, the
    stub servers) and its simulated pods' addresses (127.N.0.M) from ranges of its own, and the
    processes it starts inherit them: two workers picking at random from the same range could
    pick the same port before either binds it, or give two pods the same address and port."""
    worker = _worker()
    if worker is None:
        return
    from jupyter_gpupool.demo.run import FREE_PORTS_ENV, free_port_range
    from jupyter_gpupool.sim.nodes.kubelet import POD_NETS_ENV, pod_nets

    os.environ[FREE_PORTS_ENV] = _share(*free_port_range(), *worker)
    os.environ[POD_NETS_ENV] = _share(*pod_nets(), *worker)
    # the workers' temporary directories are popen-gwN in the run's own (tests/quiet.py)
    quiet.use_directory(Path(config.option.basetemp).parent)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Each test, fixtures included, runs holding the run's quiet lock shared (tests/quiet.py)."""
    quiet.hold_shared()
    try:
        return (yield)
    finally:
        quiet.release_shared()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A test marked ``quiet`` runs while no other test of the run does (tests/quiet.py)."""
    if item.get_closest_marker("quiet") is None:
        return (yield)
    with quiet.quiet():
        return (yield)


_SHARED_SCOPES = ("package", "module", "class")


def _group(item: pytest.Item) -> str | None:
    """The xdist_group of a test, so that ``--dist loadgroup`` runs the tests that share an
    expensive fixture on one worker, which then starts it once (each worker has a session of its
    own). The real-cluster tier shares the real control plane (``realk8s_kubeconfig``): one, not
    one per worker, each of which would keep running (and using CPU) to the end of the run. A
    module's other tests share its module-scoped fixtures (a demo, a hub, a browser). Other tests
    go to whichever worker is free."""
    if item.get_closest_marker("realk8s"):
        return "realk8s"
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs if info is not None else {}
    if any(d[-1].scope in _SHARED_SCOPES for d in defs.values() if d):
        return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ../shared/realk8s (and not under CI, where that is an error: the tests fail in
    tests/needs.py) the real-cluster tier is left out, said in one line at the end. Under xdist
    each test gets its group (:func:`_group`)."""
    import realk8s

    if _worker() is not None:
        for item in items:
            group = _group(item)
            if group is not None and not item.get_closest_marker("xdist_group"):
                item.add_marker(pytest.mark.xdist_group(group))
    if under_ci() or (realk8s.REALK8S / "up").exists():
        return
    tier = [item for item in items if item.get_closest_marker("realk8s")]
    if tier:
        items[:] = [item for item in items if not item.get_closest_marker("realk8s")]
        config.hook.pytest_deselected(items=tier)
        config.stash[_TIER_LEFT_OUT] = len(tier)


_TIER_LEFT_OUT = pytest.StashKey[int]()


def _skipped(session: pytest.Session) -> list[pytest.TestReport]:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    return list(reporter.stats.get("skipped", [])) if reporter is not None else []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI a skipped test fails the run: every test must run there (see tests/needs.py)."""
    if under_ci() and _skipped(session) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    left_out = config.stash.get(_TIER_LEFT_OUT, 0)
    if left_out:
        import realk8s

        terminalreporter.write_line(
            f"realk8s tier left out ({left_out} tests): no real control plane at {realk8s.REALK8S} "
            "(set GPUPOOL_REALK8S)",
            yellow=True,
        )
    skipped = terminalreporter.stats.get("skipped", [])
    if under_ci() and skipped:
        terminalreporter.write_line(
            f"CI: {len(skipped)} test(s) skipped, and under CI every test must run; "
            "the reasons are in the short test summary (-rs)",
            red=True,
        )
