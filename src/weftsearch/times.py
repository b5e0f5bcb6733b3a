"""Points in time and durations as the engine takes them, and their one conversion each.

Every time the engine accepts (:attr:`Document.time`, :attr:`Query.time`,
``RecencyScorer(now=...)``) is a :data:`TimeLike`, turned into POSIX seconds
(float, UTC) by :func:`as_timestamp`. Every duration (``RecencyScorer(half_life=...)``)
is a :data:`DurationLike`, turned into seconds by :func:`as_seconds`. A bare
number is always seconds here; the command line and the eval arm specs, which
take days, convert before they call the engine.

Rules, fixed so the same input always means the same instant:

* A naive ``datetime`` (no ``tzinfo``), a ``date`` and an ISO-8601 string
  without an offset are UTC, never the machine's local time zone.
* A ``date`` is its midnight (UTC).
* ISO-8601 strings are read by :meth:`datetime.fromisoformat` after a trailing
  ``Z`` is turned into ``+00:00``: ``"2009-06-01"``, ``"2009-06-01T12:30:00Z"``,
  ``"2009-06-01 12:30:00+02:00"``.
* ISO-8601 durations are taken in weeks, days, hours, minutes and seconds only
  (``"P30D"``, ``"PT12H"``, ``"P1DT6H"``, ``"P2W"``, ``"PT1.5S"``). Years and months
  (``"P1Y"``, ``"P6M"``) are refused: their length depends on the calendar.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta, timezone
from typing import Union

from weftsearch._numbers import number_text
from weftsearch.errors import InvalidDocumentError

__all__ = ["TimeLike", "DurationLike", "as_timestamp", "as_seconds"]

#: A point in time: a ``datetime`` (naive means UTC), a ``date`` (midnight UTC),
#: an ISO-8601 date or date-time string (no offset means UTC), or POSIX seconds.
TimeLike = Union[datetime, date, str, float, int]
#: A duration: a ``timedelta``, an ISO-8601 duration string in weeks, days, hours,
#: minutes and seconds (``"P30D"``), or a number of seconds.
DurationLike = Union[timedelta, str, float, int]

_NUMBER = r"(\d+(?:[.,]\d+)?)"
_DURATION = re.compile(
    rf"P(?:{_NUMBER}W|(?:{_NUMBER}D)?(?:T(?:{_NUMBER}H)?(?:{_NUMBER}M)?(?:{_NUMBER}S)?)?)",
    re.IGNORECASE,
)
_CALENDAR_UNITS = re.compile(r"P(?:\d+(?:[.,]\d+)?Y|[^T]*\d(?:[.,]\d+)?M)", re.IGNORECASE)
_SECONDS_PER = (7 * 86400.0, 86400.0, 3600.0, 60.0, 1.0)  # W, D, H, M, S


def as_timestamp(value: TimeLike, what: str, error: type[ValueError] = InvalidDocumentError) -> float:
    """Return the point in time ``value`` as POSIX seconds (float).

    Args:
        value: a ``datetime`` (naive: UTC), a ``date`` (midnight UTC), an
            ISO-8601 string (no offset: UTC; a trailing ``Z``: UTC), or POSIX
            seconds (``int``/``float``, finite).
        what: names the value in the error message (``"document 'd1'"``).
        error: the error class to raise (a :class:`~weftsearch.errors.WeftError`).

    Raises:
        error: any other type, a string that is not ISO-8601, or a number
            that is not finite.

    """
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc).timestamp()
    if isinstance(value, str):
        return as_timestamp(_parse_iso_time(value, what, error), what, error)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(
            f"{what}: time must be a datetime, a date, an ISO-8601 string or POSIX seconds, "
            f"got {type(value).__name__} {value!r}"
        )
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond float's range (10**400)
        raise error(f"{what}: time {number_text(value)} is out of range for seconds") from None
    if not math.isfinite(seconds):
        raise error(f"{what}: time must be finite, got {value!r}")
    return seconds


def _parse_iso_time(value: str, what: str, error: type[ValueError]) -> datetime:
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise error(
            f"{what}: time {value!r} is not an ISO-8601 date or date-time "
            "(e.g. '2009-06-01' or '2009-06-01T12:30:00Z')"
        ) from None


def as_seconds(value: DurationLike, what: str, error: type[ValueError]) -> float:
    """Return the positive duration ``value`` in seconds (float).

    Args:
        value: a ``timedelta``, an ISO-8601 duration string in weeks, days,
            hours, minutes and seconds (``"P30D"``, ``"PT12H"``), or a number
            of seconds.
        what: names the value in the error message (``"half_life"``).
        error: the error class to raise.

    Raises:
        error: any other type, a string that is not such a duration (years
            and months are refused: their length depends on the calendar), or
            a duration that is not finite and positive.

    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, str):
        seconds = _parse_iso_duration(value, what, error)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(
            f"{what} must be a timedelta, an ISO-8601 duration such as 'P30D', or seconds, "
            f"got {type(value).__name__} {value!r}"
        )
    else:
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond float's range (10**400)
            raise error(f"{what} {value!r} is out of range for seconds") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise error(f"{what} must be a positive duration, got {value!r}")
    return seconds


def _parse_iso_duration(value: str, what: str, error: type[ValueError]) -> float:
    text = value.strip()
    match = _DURATION.fullmatch(text)
    if match is None or not any(match.groups()) or text.upper().endswith("T"):
        if _CALENDAR_UNITS.match(text):
            raise error(
                f"{what}: {value!r} counts years or months, whose length depends on the calendar; "
                "give days instead (e.g. 'P365D')"
            )
        raise error(
            f"{what}: {value!r} is not an ISO-8601 duration in weeks, days, hours, minutes and seconds "
            "(e.g. 'P30D', 'PT12H', 'P1DT6H')"
        )
    return sum(
        float(part.replace(",", ".")) * unit
        for part, unit in zip(match.groups(), _SECONDS_PER, strict=True)
        if part is not None
    )
