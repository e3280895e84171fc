"""Resource quantities as they appear in pod specs and node capacity."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpupool.core.kube.quantities import (
    canonical_quantity,
    cpu_millis,
    format_bytes,
    memory_bytes,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", Decimal(0)),
        ("1", Decimal(1)),
        ("+1", Decimal(1)),
        ("-1", Decimal(-1)),
        ("0.5", Decimal("0.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("500m", Decimal("0.5")),
        ("1500m", Decimal("1.5")),
        ("100u", Decimal("0.0001")),
        ("7n", Decimal("0.000000007")),
        ("2k", Decimal(2000)),
        ("1M", Decimal(10**6)),
        ("1G", Decimal(10**9)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),
        ("1Ki", Decimal(1024)),
        ("1Mi", Decimal(2**20)),
        ("512Gi", Decimal(512 * 2**30)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("2Ti", Decimal(2 * 2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1.5e3", Decimal(1500)),
        ("1e+3", Decimal(1000)),
        ("5e-3", Decimal("0.005")),
        ("-2.5Mi", Decimal(-5 * 2**19)),
        ("123.456789Ei", Decimal("123.456789") * Decimal(2**60)),
    ],
)
def test_parse_quantity_strings(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (4, Decimal(4)),
        (0.5, Decimal("0.5")),
        (0.1, Decimal("0.1")),
        (Decimal("2.5"), Decimal("2.5")),
    ],
)
def test_parse_quantity_numbers(value: int | float | Decimal, expected: Decimal) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        " 1",
        "1 ",
        "1Gb",
        "1gi",
        "1KI",
        "1K",
        "1e",
        "e3",
        ".",
        "-",
        "1.2.3",
        "1e1.5",
        "1Mi1",
        "ten",
        "0x10",
        "1_000",
        "\u0661",  # ARABIC-INDIC DIGIT ONE: Python's \d would accept it
        "1e100000",
        True,
        None,
        [],
        float("nan"),
        float("inf"),
        Decimal("NaN"),
    ],
)
def test_invalid_quantities(value: object) -> None:
    with pytest.raises(ValueError, match=r"^invalid quantity "):
        parse_quantity(value)  # type: ignore[arg-type]


def test_invalid_quantity_message_quotes_the_value() -> None:
    with pytest.raises(ValueError) as info:
        parse_quantity("12 GB")
    assert str(info.value) == "invalid quantity '12 GB'"


@pytest.mark.parametrize(
    ("value", "millis"),
    [
        ("250m", 250),
        ("1", 1000),
        (2, 2000),
        ("1.5", 1500),
        (0.25, 250),
        ("0.0001", 1),  # rounds up, like Quantity.MilliValue
        ("1u", 1),
        ("0", 0),
        ("-100m", -100),
        ("1k", 1_000_000),
    ],
)
def test_cpu_millis(value: str | int | float, millis: int) -> None:
    assert cpu_millis(value) == millis


@pytest.mark.parametrize(
    ("value", "nbytes"),
    [
        ("1Gi", 2**30),
        ("1G", 10**9),
        ("1.5k", 1500),
        ("100m", 1),  # rounds up, like Quantity.Value
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("123Mi", 123 * 2**20),
        (1024, 1024),
    ],
)
def test_memory_bytes(value: str | int, nbytes: int) -> None:
    assert memory_bytes(value) == nbytes


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (512 * 2**30, "512Gi"),
        (1536 * 2**20, "1536Mi"),
        (2**30, "1Gi"),
        (1024, "1Ki"),
        (3 * 2**40, "3Ti"),
        (1000, "1000"),
        (123456789, "117.7Mi"),
        (1048535, "1.0Mi"),  # not "1024.0Ki"
        (10**9, "953.7Mi"),
        (-(2**30), "-1Gi"),
        ("1.5Gi", "1536Mi"),
        ("64Gi", "64Gi"),
    ],
)
def test_format_bytes(value: int | str, text: str) -> None:
    assert format_bytes(value) == text


@given(st.integers(min_value=0, max_value=2**62), st.sampled_from(["", "Ki", "Mi", "Gi", "Ti"]))
def test_binary_suffixes_are_powers_of_two(n: int, suffix: str) -> None:
    shift = {"": 0, "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[suffix]
    assert memory_bytes(f"{n}{suffix}") == n << shift


@given(st.integers(min_value=1, max_value=2**50))
def test_exact_format_bytes_parses_back(n: int) -> None:
    text = format_bytes(n)
    if "." not in text:
        assert memory_bytes(text) == n


@given(st.decimals(min_value=-(10**6), max_value=10**6, places=3, allow_nan=False))
def test_cpu_millis_of_plain_decimals(d: Decimal) -> None:
    assert cpu_millis(str(d)) == int(d * 1000)
    assert cpu_millis(f"{int(d * 1000)}m") == int(d * 1000)


@pytest.mark.parametrize(
    "written, stored",
    [
        ("1024Gi", "1Ti"),
        ("256Gi", "256Gi"),
        ("1.5Gi", "1536Mi"),
        ("1023Ki", "1023Ki"),
        ("1000m", "1"),
        ("500m", "500m"),
        ("0.5", "500m"),
        ("1024Mi", "1Gi"),
        ("2048", "2048"),
        ("128974848", "128974848"),
        ("12e6", "12e6"),
        ("1e3", "1e3"),
        ("0", "0"),
        (4, "4"),
        (0.5, "500m"),
    ],
)
def test_canonical_quantity_is_what_the_api_server_stores(written, stored):
    # tests/both/test_same_objects.py holds the simulator, which uses this, to a real API server
    assert canonical_quantity(written) == stored
