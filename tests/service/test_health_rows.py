"""The health table (core/words/health_rows.py) that ``gpupool get health`` prints and the health
page shows: the utilization source has its row, said as the service's own report says it
(service/health.py's ``health_report`` makes the answer here, as the API does)."""

from __future__ import annotations

from jupyter_gpupool.core.words.health_rows import health_rows, problem_sentence
from jupyter_gpupool.service.health import health_report

NO_DATABASE = {"configured": False}


def answer(utilization):
    return health_report([], {}, NO_DATABASE, utilization, 1000.0, lambda t: f"t{t:g}")


def test_a_failing_utilization_source_has_its_row_and_its_sentence():
    failing = {
        "source": "prometheus",
        "interval_seconds": 15,
        "last_poll": "t880",
        "last_poll_seconds_ago": 120.0,
        "problem": "http://prom:9090 does not answer",
    }
    report = answer(failing)
    assert health_rows(report) == [
        {
            "part": "utilization prometheus",
            "state": "failing",
            "last": "2m ago",
            "every": "15s",
            "runs": "-",
            "failures": "-",
            "problem": "http://prom:9090 does not answer",
        }
    ]
    assert [problem_sentence(p) for p in report["problems"]] == [
        "GPU utilization: http://prom:9090 does not answer."
    ]
    polling = answer({**failing, "problem": None, "last_poll_seconds_ago": 3.0})
    assert health_rows(polling)[0]["state"] == "polling"
    assert health_rows(polling)[0]["last"] == "3s ago"


def test_no_utilization_source_no_row():
    none = {"source": "none", "interval_seconds": 15, "last_poll": None, "problem": None}
    assert health_rows(answer(none)) == []
