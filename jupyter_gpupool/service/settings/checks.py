"""Checks that settings of several concerns share."""

from __future__ import annotations

from typing import Any

from traitlets import TraitError


def more_than_zero(proposal: Any, unit: str = "") -> float:
    """A ``@validate`` proposal's value as a float, refused (naming the setting) unless above 0.

    ``unit`` follows the 0 in the message: ``" seconds"`` gives "must be more than 0 seconds".
    """
    value = float(proposal["value"])
    if value <= 0:
        raise TraitError(f"{proposal['trait'].name} must be more than 0{unit}, not {value}")
    return value
