"""The one formatting module: ages as kubectl prints them, CSV cells that never run as formulas,
and gpuctl's aligned tables.

The ages are the tables of ``k8s.io/apimachinery/pkg/util/duration/duration_test.go``
(``TestHumanDuration`` and ``TestHumanDurationBoundaries``), the function behind kubectl's AGE
column; the formula characters are OWASP's (https://owasp.org/www-community/attacks/CSV_Injection).
"""

from __future__ import annotations

import csv
import io
import time

import pytest

from jupyter_gpupool.core.words.tables import (
    age,
    aligned_lines,
    cell,
    csv_cell,
    csv_text,
    format_table,
    human_duration,
)

S, M, H, D, Y = 1, 60, 3600, 86400, 365 * 86400
MS = 0.001

# (seconds, kubectl's HumanDuration), copied from apimachinery's duration_test.go
KUBECTL = [
    # TestHumanDuration
    (1 * S, "1s"),
    (70 * S, "70s"),
    (190 * S, "3m10s"),
    (70 * M, "70m"),
    (47 * H, "47h"),
    (49 * H, "2d1h"),
    ((8 * 24 + 2) * H, "8d"),
    (367 * 24 * H, "367d"),
    ((365 * 2 * 24 + 25) * H, "2y1d"),
    ((365 * 8 * 24 + 2) * H, "8y"),
    # TestHumanDurationBoundaries
    (-2 * S, "<invalid>"),
    (-2 * S + 1e-9, "0s"),
    (0, "0s"),
    (1 * S - MS, "0s"),
    (2 * M - MS, "119s"),
    (2 * M, "2m"),
    (2 * M + 1 * S, "2m1s"),
    (10 * M - MS, "9m59s"),
    (10 * M, "10m"),
    (10 * M + 1 * S, "10m"),
    (3 * H - MS, "179m"),
    (3 * H, "3h"),
    (3 * H + 1 * M, "3h1m"),
    (8 * H - MS, "7h59m"),
    (8 * H, "8h"),
    (8 * H + 59 * M, "8h"),
    (2 * D - MS, "47h"),
    (2 * D, "2d"),
    (2 * D + 1 * H, "2d1h"),
    (8 * D - MS, "7d23h"),
    (8 * D, "8d"),
    (8 * D + 23 * H, "8d"),
    (2 * Y - MS, "729d"),
    (2 * Y, "2y"),
    (2 * Y + 23 * H, "2y"),
    (2 * Y + 23 * H + 59 * M, "2y"),
    (2 * Y + 24 * H - MS, "2y"),
    (2 * Y + 24 * H, "2y1d"),
    (3 * Y, "3y"),
    (4 * Y, "4y"),
    (5 * Y, "5y"),
    (6 * Y, "6y"),
    (7 * Y, "7y"),
    (8 * Y - MS, "7y364d"),
    (8 * Y, "8y"),
    (8 * Y + 364 * D, "8y"),
    (9 * Y, "9y"),
]


@pytest.mark.parametrize(("seconds", "expected"), KUBECTL)
def test_human_duration_is_kubectls(seconds, expected):
    assert human_duration(seconds) == expected


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def test_age_of_a_timestamp():
    now = 1_700_000_000.0
    # the case the two old copies disagreed on: kubectl says 179m
    assert age(stamp(now - (2 * H + 59 * M)), now) == "179m"
    assert age(stamp(now - 42), now) == "42s"
    assert age(stamp(now - 9 * D), now) == "9d"
    assert age(stamp(now + 1), now) == "0s"  # a clock a second ahead is now
    assert age(stamp(now + 60), now) == "<invalid>"
    assert age(None, now) == age("", now) == age("garbage", now) == "-"
    assert age(None, now, unknown="<unknown>") == "<unknown>"


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_cells_never_start_a_formula(start):
    text = start + 'HYPERLINK("http://x")'
    assert csv_cell(text) == "'" + text
    row = next(csv.reader(io.StringIO(csv_text(["a"], [[text]]).split("\n", 1)[1])))
    assert row == ["'" + text]


def test_csv_cells_keep_numbers_and_plain_text():
    assert csv_cell(-1) == "-1"  # a number, not a formula
    assert csv_cell(2.5) == "2.5"
    assert csv_cell("a=b") == "a=b"  # only the first character counts
    assert csv_cell(None) == ""
    assert csv_cell(True) == "true" and csv_cell(False) == "false"
    assert csv_cell(["A100", "=T4"]) == "A100;=T4"
    assert csv_cell(["-x"]) == "'-x"
    assert csv_text(["a", "b"], [["x,y", 'say "hi"']]) == 'a,b\n"x,y","say ""hi"""\n'


def test_tables_are_aligned_to_their_widest_cell():
    assert aligned_lines([["A", "LONG HEADER", "C"], ["wide cell", "", "z"]]) == [
        "A          LONG HEADER  C",
        "wide cell               z",
    ]
    assert format_table(["A", "B"], [["x", None], [["p", "q"], True]]) == (
        "A    B\nx    -\np,q  yes\n"
    )
    assert format_table(["ONLY", "HEADER"], []) == "ONLY  HEADER\n"
    assert cell([]) == cell("") == "-"
