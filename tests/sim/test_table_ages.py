"""The AGE column the simulator's API server prints for kubectl, by kubectl's own duration rules
(k8s.io/apimachinery's HumanDuration, the same as everywhere else in gpupool)."""

import time

import pytest

from jupyter_gpupool.sim.api.tables import to_table


def stamp(seconds_ago: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))


@pytest.mark.parametrize(
    ("seconds_ago", "shown"),
    [
        (30, "30s"),
        (9 * 60 + 59, "9m59s"),
        (2 * 3600 + 59 * 60 + 10, "179m"),  # minutes up to 3 hours, as kubectl
        (3 * 3600 + 60 + 5, "3h1m"),
        (50 * 3600 + 5, "2d2h"),
    ],
)
def test_age_column_as_kubectl(seconds_ago, shown):
    node = {"metadata": {"name": "n", "creationTimestamp": stamp(seconds_ago)}, "status": {}}
    table = to_table("Node", [node], "1")
    names = [c["name"] for c in table["columnDefinitions"]]
    assert table["rows"][0]["cells"][names.index("Age")] == shown


def test_no_time_is_unknown_as_the_api_server_prints_it():
    table = to_table("Node", [{"metadata": {"name": "n"}, "status": {}}], "1")
    names = [c["name"] for c in table["columnDefinitions"]]
    assert table["rows"][0]["cells"][names.index("Age")] == "<unknown>"
