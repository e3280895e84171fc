"""GPU amounts that need not be whole: what a server counts against quotas, in GPU-equivalents.

A whole GPU counts 1, a MIG instance its compute slices over the GPU's (``1/7`` for a 1g of an
A100), a shared replica ``1/replicas``, a HAMi slice its share of the GPU's memory
(:attr:`.shapes.Shape.equivalent`). Sums stay exact as :class:`~fractions.Fraction` (seven 1g
instances are exactly one GPU), and an amount that is whole stays an ``int``, so everything that
only ever sees whole GPUs reads and prints as before.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TypeAlias

Amount: TypeAlias = int | Fraction

#: The largest denominator an amount written on a pod may have (HAMi splits a GPU's memory in
#: MiB: 1/81920 is the finest a real card gives).
MAX_DENOMINATOR = 1 << 20


def whole_if_whole(value: Amount) -> Amount:
    """``value`` as an ``int`` when it is whole."""
    if isinstance(value, Fraction) and value.denominator == 1:
        return int(value)
    return value


def parse_amount(text: str) -> Amount | None:
    """``2``, ``1/7`` or ``0.25`` as an amount; None for anything else, or a negative amount."""
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        return None
    if value < 0 or value.denominator > MAX_DENOMINATOR:
        return None
    return whole_if_whole(value)


def amount_text(value: Amount) -> str:
    """``2``, ``1/7``, ``10/7``: exact, as annotations and the API write it."""
    return str(whole_if_whole(value))


def amount_number(value: Amount) -> int | float:
    """For JSON: an ``int`` when whole, else a float rounded to 3 decimals (``0.143``)."""
    value = whole_if_whole(value)
    return value if isinstance(value, int) else round(float(value), 3)


def amount_words(value: Amount) -> str:
    """For sentences: ``2``, ``0.14`` (two decimals: "you use 1.43 of your limit of 2 GPUs")."""
    value = whole_if_whole(value)
    return str(value) if isinstance(value, int) else f"{float(value):.2f}".rstrip("0")


def amount_gpus_text(value: Amount) -> str:
    """``1 GPU``, ``2 GPUs``, ``0.14 GPU-equivalents``."""
    value = whole_if_whole(value)
    if isinstance(value, int):
        return f"{value} GPU" if value == 1 else f"{value} GPUs"
    return f"{amount_words(value)} GPU-equivalents"


def json_default(value: object) -> object:
    """``json.dumps(..., default=json_default)``: amounts as :func:`amount_number` writes them."""
    if isinstance(value, Fraction):
        return amount_number(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
