"""Every form a time or a duration may take, and a typed error for every other one.

Times: ``Document.time``, ``Query.time`` and ``RecencyScorer(now=...)`` take a
``datetime`` (naive means UTC), a ``date`` (midnight UTC), an ISO-8601 string
(no offset means UTC) or POSIX seconds, and hold POSIX seconds from construction
on. Durations: ``RecencyScorer(half_life=...)`` takes a ``timedelta``, an
ISO-8601 duration in weeks/days/hours/minutes/seconds, or seconds.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest

from weftsearch import Document, Index, Query, RecencyScorer
from weftsearch.errors import InvalidDocumentError, InvalidParameterError, InvalidQueryError
from weftsearch.times import as_seconds, as_timestamp

#: 2009-06-01T00:00:00Z in POSIX seconds, computed independently of the code under test.
JUNE_1_2009 = 1_243_814_400.0
DAY = 86_400.0

SAME_INSTANT: list[Any] = [
    datetime(2009, 6, 1, tzinfo=timezone.utc),
    datetime(2009, 6, 1),  # naive: UTC, never the machine's zone
    datetime(2009, 6, 1, 2, tzinfo=timezone(timedelta(hours=2))),
    date(2009, 6, 1),
    "2009-06-01",
    "2009-06-01T00:00:00",
    "2009-06-01T00:00:00Z",
    "2009-06-01T00:00:00z",
    "2009-06-01 02:00:00+02:00",
    "  2009-06-01T00:00:00+00:00 ",
    JUNE_1_2009,
    int(JUNE_1_2009),
]

BAD_TIMES: list[Any] = [
    "2009",  # a year is not a date; a bare number 2009 would be 33 minutes after 1970
    "yesterday",
    "",
    "2009-13-01",
    "01/06/2009",
    b"2009-06-01",
    True,
    float("nan"),
    float("inf"),
    [2009, 6, 1],
    timedelta(days=1),  # a duration is not a point in time
]


@pytest.mark.parametrize("value", SAME_INSTANT, ids=repr)
def test_every_time_form_is_the_same_instant(value: Any) -> None:
    assert as_timestamp(value, "t") == JUNE_1_2009
    document = Document("d", time=value)
    assert document.time == JUNE_1_2009 and isinstance(document.time, float)
    assert document.timestamp == JUNE_1_2009
    query = Query(time=value)
    assert query.time == JUNE_1_2009 and query.timestamp == JUNE_1_2009
    assert RecencyScorer(DAY, now=value).now == JUNE_1_2009


def test_a_date_is_converted_at_construction_so_equal_documents_compare_equal() -> None:
    assert Document("d", time="2009-06-01") == Document("d", time=date(2009, 6, 1))
    # ...and a document reads back from the index as it went in.
    index = Index(analyzer="simple")
    index.add(Document("d", "x", time=datetime(2009, 6, 1, 12, 30)))
    snapshot = index.snapshot()
    assert snapshot.times().tolist() == [JUNE_1_2009 + 12.5 * 3600]


@pytest.mark.parametrize("value", BAD_TIMES, ids=repr)
def test_bad_times_raise_typed_errors_naming_the_value(value: Any) -> None:
    with pytest.raises(InvalidDocumentError, match="document 'd1'"):
        Document("d1", time=value)
    with pytest.raises(InvalidQueryError, match="query time"):
        Query(time=value)
    with pytest.raises(InvalidParameterError, match="RecencyScorer now"):
        RecencyScorer(DAY, now=value)


def test_bad_iso_string_message_shows_the_string_and_an_example() -> None:
    with pytest.raises(InvalidDocumentError, match=r"'yesterday' is not an ISO-8601 .*'2009-06-01'"):
        Document("d1", time="yesterday")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (timedelta(days=30), 30 * DAY),
        (timedelta(hours=1), 3600.0),
        ("P30D", 30 * DAY),
        ("p30d", 30 * DAY),
        ("P2W", 14 * DAY),
        ("PT12H", 12 * 3600.0),
        ("PT90M", 5400.0),
        ("PT1.5S", 1.5),
        ("PT0,5S", 0.5),
        ("P1DT6H", DAY + 6 * 3600.0),
        ("P1DT1H1M1S", DAY + 3661.0),
        (" P365D ", 365 * DAY),
        (5400, 5400.0),
        (0.25, 0.25),
    ],
    ids=repr,
)
def test_every_duration_form(value: Any, seconds: float) -> None:
    assert as_seconds(value, "half_life", InvalidParameterError) == seconds
    assert RecencyScorer(value).half_life == seconds


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("P1Y", "years or months"),
        ("P6M", "years or months"),
        ("P1Y2M3D", "years or months"),
        ("PT", "not an ISO-8601 duration"),
        ("P", "not an ISO-8601 duration"),
        ("P1DT", "not an ISO-8601 duration"),
        ("P1W2D", "not an ISO-8601 duration"),
        ("30 days", "not an ISO-8601 duration"),
        ("30", "not an ISO-8601 duration"),
        ("", "not an ISO-8601 duration"),
        ("P0D", "positive duration"),
        (0, "positive duration"),
        (-1.0, "positive duration"),
        (timedelta(0), "positive duration"),
        (timedelta(days=-1), "positive duration"),
        (float("inf"), "positive duration"),
        (float("nan"), "positive duration"),
        (True, "must be a timedelta"),
        (datetime(2009, 6, 1), "must be a timedelta"),
        (b"P1D", "must be a timedelta"),
    ],
    ids=repr,
)
def test_bad_durations_raise_typed_errors(value: Any, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message) as caught:
        RecencyScorer(value)
    assert "half_life" in str(caught.value)


def test_half_life_in_days_and_seconds_rank_alike() -> None:
    # The README's promise: a timedelta and the same number of seconds are one scorer.
    index = Index(analyzer="simple")
    index.add_many(
        [Document("old", "x", time="2000-01-01"), Document("new", "x", time="2010-01-01T00:00:00Z")]
    )
    snapshot = index.snapshot()
    a = RecencyScorer(timedelta(days=3652)).score(snapshot, Query(), 10)
    b = RecencyScorer(3652 * DAY).score(snapshot, Query(), 10)
    c = RecencyScorer("P3652D").score(snapshot, Query(), 10)
    assert a.ids.tolist() == b.ids.tolist() == c.ids.tolist()
    assert a.scores.tolist() == b.scores.tolist() == c.scores.tolist()
    assert snapshot.keys_of(a.ids) == ["new", "old"] and a.scores[1] == pytest.approx(0.5, abs=1e-3)
