"""free_port(): the ports the demo and the tests hand to child processes."""

import socket

import pytest

from jupyter_gpupool.demo.run import FREE_PORT_RANGE, free_port


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range():
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    # Linux gives outgoing connections ports from ip_local_port_range (32768-60999 by default)
    low, high = FREE_PORT_RANGE
    assert all(low <= p <= high < 32768 for p in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))


def test_a_port_someone_listens_on_or_handed_out_before_is_skipped(monkeypatch):
    from jupyter_gpupool.demo import run

    given = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        spare = free_port()
        monkeypatch.setattr(run, "_handed_out", {given})
        choices = iter([busy, given, busy, spare])
        monkeypatch.setattr(run.random, "randint", lambda a, b: next(choices))
        assert free_port() == spare


def test_gpupool_demo_ports_narrows_the_range(monkeypatch):
    from jupyter_gpupool.demo.run import FREE_PORTS_ENV, free_port_range

    monkeypatch.setenv(FREE_PORTS_ENV, "21000-21099")
    assert free_port_range() == (21000, 21099)
    assert all(21000 <= free_port() <= 21099 for _ in range(20))
    monkeypatch.setenv(FREE_PORTS_ENV, "")
    assert free_port_range() == FREE_PORT_RANGE


@pytest.mark.parametrize("bad", ["21000", "21000-", "a-b", "30000-20000", "80-90", "60000-70000"])
def test_a_bad_gpupool_demo_ports_is_refused_with_its_name(monkeypatch, bad):
    from jupyter_gpupool.demo.run import FREE_PORTS_ENV

    monkeypatch.setenv(FREE_PORTS_ENV, bad)
    with pytest.raises(ValueError, match=f"GPUPOOL_DEMO_PORTS={bad!r}: expected LOW-HIGH"):
        free_port()
