"""How an error message names a number that may be too large to print.

Python refuses to turn an integer of more than 4,300 digits into text
(``ValueError``), and one of a few hundred digits buries the message. Every
error that names a number a user gave (a field value, a time, a filter value)
goes through :func:`number_text`. This module imports nothing from weftsearch.
"""

from __future__ import annotations

import math

__all__ = ["number_text", "digit_count"]

#: Integers with more digits than this are named by their size, not printed.
_PRINTED_DIGITS = 40


def digit_count(value: int) -> int:
    """The number of decimal digits of ``abs(value)`` (1 for 0), without converting it to text. O(1)."""
    magnitude = abs(int(value))
    if magnitude < 10**_PRINTED_DIGITS:
        return len(str(magnitude))
    # log10 of a huge int is exact enough to count digits; the check fixes a power of ten
    # whose logarithm rounds down (10**n - 1 vs 10**n).
    digits = int(math.log10(magnitude)) + 1
    if digits <= 4_000 and magnitude >= 10**digits:
        digits += 1
    return digits


def number_text(value: object) -> str:
    """``repr(value)``, or ``an integer of N digits`` for an integer too long to print usefully."""
    if isinstance(value, int) and not isinstance(value, bool):
        digits = digit_count(value)
        if digits > _PRINTED_DIGITS:
            sign = "-" if value < 0 else ""
            return f"an integer of {digits:,} digits ({sign}{_leading(value)}...)"
    return repr(value)


def _leading(value: int) -> str:
    """The first few digits of a huge ``abs(value)``, cheaply (no full conversion)."""
    magnitude = abs(value)
    digits = digit_count(magnitude)
    return str(magnitude // 10 ** max(digits - 6, 0))
