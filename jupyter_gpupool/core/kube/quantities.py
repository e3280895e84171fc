"""Kubernetes resource quantities (``500m``, ``4``, ``512Gi``, ``1e3``) as exact decimals.

The grammar is the one documented on ``resource.Quantity`` in ``k8s.io/apimachinery``::

    <quantity>        ::= <sign><number><suffix>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>

Arithmetic uses an explicit ``decimal.Context`` so nothing depends on (or changes) the
thread's decimal context.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Context, Decimal, InvalidOperation
from typing import Any

__all__ = [
    "canonical_quantity",
    "cpu_millis",
    "format_memory",
    "memory_bytes",
    "parse_quantity",
    "quantity_int",
]

# Enough digits for any realistic quantity ("123.456789Ei" needs ~30) to stay exact.
_CTX = Context(prec=80, Emax=10_000, Emin=-10_000)

_QUANTITY_RE = re.compile(
    r"""
    (?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))
    (?:
        [eE](?P<exponent>[+-]?[0-9]+)       # decimal exponent; tried before the "E" (exa) suffix
      | (?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])
    )?
    """,
    re.VERBOSE,
)

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of two
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# Exponents far beyond anything Kubernetes can represent are rejected rather than computed.
_MAX_EXPONENT = 1000


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Parse a Kubernetes resource quantity into an exact ``Decimal``.

    Accepts what ``resource.ParseQuantity`` accepts (see the module docstring), plus ints,
    floats and Decimals as they appear in YAML/JSON manifests (``cpu: 2``, ``cpu: 0.5``).
    Raises ``ValueError("invalid quantity ...")`` for anything else, including booleans,
    NaN/infinity and strings with surrounding whitespace.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"invalid quantity {value!r}")
        # str() gives the shortest repr, so 0.1 becomes Decimal("0.1") and not 0.1000000000000000055
        return Decimal(str(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"invalid quantity {value!r}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"invalid quantity {value!r}")
    m = _QUANTITY_RE.fullmatch(value)
    if m is None:
        raise ValueError(f"invalid quantity {value!r}")
    number = Decimal(m["number"])
    try:
        if m["exponent"] is not None:
            exponent = int(m["exponent"])
            if abs(exponent) > _MAX_EXPONENT:
                raise ValueError(f"invalid quantity {value!r}")
            return number.scaleb(exponent, _CTX)
        suffix = m["suffix"]
        if suffix is None:
            return number
        if suffix in _BINARY:
            return _CTX.multiply(number, Decimal(2 ** _BINARY[suffix]))
        return number.scaleb(_DECIMAL[suffix], _CTX)
    except (ArithmeticError, InvalidOperation):
        raise ValueError(f"invalid quantity {value!r}") from None


_DECIMAL_SUFFIX = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}
_BINARY_SUFFIX = {bits: suffix for suffix, bits in _BINARY.items()}


def quantity_int(value: Any) -> int:
    """A count of devices from a quantity (``2``, ``"2"``); fractions round up as the
    scheduler's do; what is not a quantity counts 0."""
    if type(value) is int:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    try:
        q = parse_quantity(value)
    except ValueError:
        return 0
    return max(0, int(q.to_integral_value(rounding="ROUND_CEILING")))


def canonical_quantity(value: str | int | float | Decimal) -> str:
    """A quantity as the API server stores and returns it (``Quantity.CanonicalizeBytes``):
    ``1024Gi`` is ``1Ti``, ``1000m`` is ``1``, ``0.5`` is ``500m``, ``1.5Gi`` is ``1536Mi``.

    The format of the input is kept (binary suffixes, decimal suffixes, or ``e`` exponents),
    except that a binary quantity below 1024 or not a whole number is written in decimal; the
    value is rounded up to nano units, and the number is the smallest whole one the format's
    suffixes allow."""
    amount = parse_quantity(value)
    m = _QUANTITY_RE.fullmatch(value) if isinstance(value, str) else None
    binary = m is not None and m["suffix"] in _BINARY
    exponent_form = m is not None and m["exponent"] is not None
    nanos = _ceil(_CTX.multiply(amount, Decimal(10**9)))  # rounded up to nano units
    if nanos == 0:
        return "0"
    if binary and abs(nanos) >= 1024 * 10**9 and nanos % 10**9 == 0:
        whole, power = nanos // 10**9, 0
        while power < 60 and whole % 1024 == 0:
            whole, power = whole // 1024, power + 10
        return f"{whole}{_BINARY_SUFFIX.get(power, '')}"
    number, exp = nanos, -9
    while exp < 18 and number % 1000 == 0:
        number, exp = number // 1000, exp + 3
    if exponent_form:
        return f"{number}e{exp}" if exp else str(number)
    return f"{number}{_DECIMAL_SUFFIX[exp]}"


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING, context=_CTX))


def cpu_millis(value: str | int | float | Decimal) -> int:
    """A CPU quantity in millicores, rounded up like ``Quantity.MilliValue`` (``"1.5"`` → 1500,
    ``"0.0001"`` → 1)."""
    return _ceil(_CTX.multiply(parse_quantity(value), Decimal(1000)))


def memory_bytes(value: str | int | float | Decimal) -> int:
    """A byte quantity as an integer, rounded up like ``Quantity.Value`` (``"1Gi"`` → 1073741824,
    ``"1.5k"`` → 1500, ``"100m"`` → 1)."""
    return _ceil(parse_quantity(value))


_UNITS = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def format_bytes(value: int | str | float | Decimal) -> str:
    """A short human form of a byte count for messages and tables (may round: not for manifests).

    Exact multiples use the largest binary suffix that keeps an integer (``512Gi``, ``1536Mi``,
    ``0``); other values of at least 1Ki get one decimal in the largest suffix not exceeding
    them (``117.7Mi``), and values below 1Ki stay plain bytes (``1000``). Quantity strings such
    as ``"1.5Gi"`` are accepted and rounded up to whole bytes first.
    """
    n = value if isinstance(value, int) and not isinstance(value, bool) else memory_bytes(value)
    sign, n = ("-", -n) if n < 0 else ("", n)
    if n == 0:
        return "0"
    for unit, shift in _UNITS:
        if n % (1 << shift) == 0:
            return f"{sign}{n >> shift}{unit}"
    if n < 1024:
        return f"{sign}{n}"
    # Smallest suffix whose rounded figure stays below 1024, so 1048535 is "1.0Mi", not "1024.0Ki".
    for unit, shift in reversed(_UNITS):
        scaled = n / (1 << shift)
        if round(scaled, 1) < 1024 or unit == "Ei":
            return f"{sign}{scaled:.1f}{unit}"
    raise AssertionError("unreachable")


def format_cpu(cores: Decimal) -> str:
    """Whole cores as ``"8"``, fractions as millicores ``"1500m"``."""
    if cores == cores.to_integral_value():
        return str(int(cores))
    return f"{int((cores * 1000).to_integral_value())}m"


def format_memory(amount: Decimal) -> str:
    """The largest binary unit that divides the amount exactly: ``"32Gi"``, ``"1536Mi"``."""
    amount = amount.to_integral_value()
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = Decimal(2 ** dict(_UNITS)[suffix])
        if amount >= unit and amount % unit == 0:
            return f"{int(amount // unit)}{suffix}"
    return str(int(amount))
