"""The words for what a server's GPUs do, as ``get jobs -o wide`` and ``%gpupool status`` show
them, from rows shaped as ``GET api/v1/servers`` gives them."""

from __future__ import annotations

from datetime import datetime, timezone

from jupyter_gpupool.core.words.gpu_use import (
    clock_words,
    gib,
    idle_cell,
    idle_line,
    memory_cell,
    percent,
    utilization_cell,
    utilization_line,
)

#: 2025-01-31 16:00 UTC
NOW = datetime(2025, 1, 31, 16, 0, tzinfo=timezone.utc).timestamp()
MIN = 60.0
MEASURED = {
    "gpu_utilization": 50.0,
    "gpu_utilization_max": 90.0,
    "gpu_memory_used_mib": 31744,  # 31.0 GiB
    "gpu_memory_total_mib": 163840,  # two 80 GiB GPUs
}
NOT_MEASURED = dict.fromkeys(MEASURED)


def test_percent_and_gib():
    assert [percent(v) for v in (50.0, 0.4, 99.6, None)] == ["50%", "0%", "100%", None]
    assert (gib(31744), gib(163840), gib(163840, decimals=False)) == ("31.0", "160.0", "160")
    assert gib(23028, decimals=False) == "22.5"  # an A10's 23028 MiB


def test_cells_of_a_measured_row_and_of_one_not_measured():
    assert (utilization_cell(MEASURED), memory_cell(MEASURED)) == ("50%", "31.0/160 GiB")
    assert (utilization_cell(NOT_MEASURED), memory_cell(NOT_MEASURED)) == (None, None)
    assert memory_cell({**MEASURED, "gpu_memory_total_mib": None}) == "31.0 GiB"


def test_utilization_line():
    assert utilization_line(MEASURED) == "50% (max 90%), memory 31.0 of 160 GiB"
    one_gpu = {**MEASURED, "gpu_utilization_max": 50.0, "gpu_memory_used_mib": None}
    assert utilization_line(one_gpu) == "50%"  # the max says nothing more
    assert utilization_line(NOT_MEASURED) is None


def test_idle_cells():
    stop = {"since": NOW - 65 * MIN, "warned": True, "stops_at": NOW + 55 * MIN, "action": "stop"}
    assert idle_cell(stop, NOW) == "idle 1h05m, stops in 55m"
    assert idle_cell({**stop, "stops_at": NOW - 5}, NOW) == "idle 1h05m, stopping"
    report = {"since": NOW - 10 * MIN, "warned": False, "stops_at": None, "action": "report"}
    assert idle_cell(report, NOW) == "idle 10m (report)"
    assert idle_cell(None, NOW) is None and idle_cell({}, NOW) is None


def test_idle_lines_say_the_clock_time_in_utc():
    since, stops = NOW - 115 * MIN, NOW + 5 * MIN  # 14:05 and 16:05 UTC
    stop = {"since": since, "warned": True, "stops_at": stops, "action": "stop"}
    assert idle_line(stop, NOW) == "idle since 14:05 UTC; will be stopped at 16:05 UTC"
    assert idle_line({**stop, "stops_at": NOW - 1}, NOW) == "idle since 14:05 UTC; being stopped"
    report = {"since": since, "warned": True, "stops_at": None, "action": "report"}
    assert idle_line(report, NOW) == "idle since 14:05 UTC; reported to admins"
    assert idle_line({**report, "due_at": stops}, NOW) == (
        "idle since 14:05 UTC; will be reported to admins at 16:05 UTC"
    )
    assert idle_line(None, NOW) is None


def test_clock_words_add_the_date_on_another_day():
    assert clock_words(NOW - 60, NOW) == "15:59 UTC"
    assert clock_words(NOW - 17 * 3600, NOW) == "2025-01-30 23:00 UTC"


def test_a_shared_gpus_figure_says_it_is_all_its_servers():
    shared = {**MEASURED, "gpu_utilization": 41.0, "gpu_utilization_max": 41.0}
    shared["gpu_utilization_shared"] = True
    assert utilization_cell(shared) == "41% (shared GPU: all its servers)"
    assert utilization_line(shared) == ("41% (shared GPU: all its servers), memory 31.0 of 160 GiB")
    assert utilization_cell({**NOT_MEASURED, "gpu_utilization_shared": None}) is None
