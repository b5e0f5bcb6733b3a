"""The argparse value types every ``weft-search`` command shares (counts, numbers, ports, lists).

Each is a function from the command-line text to the value, raising
:class:`argparse.ArgumentTypeError` with the message the user sees
(argparse prefixes it with the option: ``argument --workers: expected a
positive integer, got '0'``). One module, so that ``-k``, ``--workers`` and
``--rate`` refuse bad text in the same words whichever command reads them.

This module imports nothing from weftsearch: the command line, the
benchmarks and the server all import it, whatever their layer.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

__all__ = [
    "bounded_int",
    "int_at_least",
    "non_negative_float",
    "port",
    "positive_float",
    "positive_int",
    "positive_list",
]


def positive_int(text: str) -> int:
    """An integer >= 1: ``expected a positive integer, got '0'`` otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def bounded_int(limit: int, what: str = "") -> Callable[[str], int]:
    """A type: a positive integer up to ``limit``; ``what`` names the bound in the error.

    ``bounded_int(MAX_K, "(the largest k the engine accepts)")`` refuses ``"0"`` as
    :func:`positive_int` does and ``"10000000"`` with ``expected at most 10,000 (...)``.
    """

    def parse(text: str) -> int:
        value = positive_int(text)
        if value > limit:
            suffix = f" {what}" if what else ""
            raise argparse.ArgumentTypeError(f"expected at most {limit:,}{suffix}, got {text!r}")
        return value

    return parse


def int_at_least(minimum: int) -> Callable[[str], int]:
    """A type: an integer >= ``minimum`` (``expected an integer >= 2, got '1'``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


def _finite(text: str, least: float, *, strict: bool, wanted: str) -> float:
    """A finite number above ``least`` (``strict``) or at least ``least``; ``expected WANTED`` otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and (value > least if strict else value >= least)):
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (a weight, a constant)."""
    return _finite(text, 0.0, strict=False, wanted="a finite number >= 0")


def positive_float(text: str) -> float:
    """A finite number > 0 (a rate, a duration)."""
    return _finite(text, 0.0, strict=True, wanted="a positive number")


def port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {text!r}")
    return value


Number = TypeVar("Number", int, float)


def positive_list(kind: Callable[[str], Number], example: str) -> Callable[[str], list[Number]]:
    """A type: comma-separated positive numbers read by ``kind`` (``int`` or ``float``).

    ``example`` shows the form in the error: ``positive_list(float, "0.125,0.5,1")`` refuses
    ``"0,1"`` with ``expected positive numbers like 0.125,0.5,1, got '0,1'`` (``integers``
    with ``int``). Empty parts are skipped; at least one number is needed.
    """
    noun = "integers" if kind is int else "numbers"

    def parse(text: str) -> list[Number]:
        try:
            values = [kind(part.strip()) for part in text.split(",") if part.strip()]
        except ValueError:
            values = []
        if not values or not all(math.isfinite(v) and v > 0 for v in values):
            raise argparse.ArgumentTypeError(f"expected positive {noun} like {example}, got {text!r}")
        return values

    return parse
