"""RecencyScorer: exponential decay on Document.time, on hand-computed fixtures."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from weftsearch import Document, Index, Query, RecencyScorer, Snapshot
from weftsearch.errors import InvalidParameterError

DAY = 86400.0
NEWEST = datetime(2024, 3, 10, 12, 0, tzinfo=timezone.utc)


def make_index() -> Index:
    index = Index(analyzer="simple")
    index.add_many(
        [
            Document("new", "n", time=NEWEST),
            Document("day", "d", time=NEWEST - timedelta(days=1)),
            Document("two", "t", time=(NEWEST - timedelta(days=2)).timestamp()),  # POSIX seconds
            Document("week", "w", time=NEWEST - timedelta(days=7)),
            Document("half", "h", time=NEWEST - timedelta(hours=12)),
            Document("undated", "u"),
        ]
    )
    return index


def run(
    scorer: RecencyScorer, snapshot: Snapshot, query: Query | None = None, k: int = 100
) -> dict[str, float]:
    stream = scorer.score(snapshot, query or Query(), k)
    assert stream.scores.tolist() == sorted(stream.scores.tolist(), reverse=True)
    return dict(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))


EXPECTED_ONE_DAY = {
    "new": 1.0,
    "half": 2**-0.5,
    "day": 0.5,
    "two": 0.25,
    "week": 2.0**-7,
}


@pytest.mark.parametrize("half_life", [timedelta(days=1), DAY, 86400, timedelta(hours=24)])
def test_hand_computed_decay(half_life: float | timedelta) -> None:
    got = run(RecencyScorer(half_life), make_index().snapshot())
    assert got == pytest.approx(EXPECTED_ONE_DAY, rel=1e-14)


def test_half_life_scales_decay() -> None:
    got = run(RecencyScorer(timedelta(days=2)), make_index().snapshot())
    assert got == pytest.approx(
        {"new": 1.0, "half": 2**-0.25, "day": 2**-0.5, "two": 0.5, "week": 2**-3.5}, rel=1e-14
    )
    assert RecencyScorer(timedelta(minutes=90)).half_life == 5400.0


def test_order_is_newest_first() -> None:
    snapshot = make_index().snapshot()
    stream = RecencyScorer(DAY).score(snapshot, Query(), 3)
    assert snapshot.keys_of(stream.ids) == ["new", "half", "day"]


def test_documents_without_time_are_absent() -> None:
    got = run(RecencyScorer(DAY), make_index().snapshot())
    assert "undated" not in got
    index = Index(analyzer="simple")
    index.add(Document("a", "no time"))
    assert run(RecencyScorer(DAY), index.snapshot()) == {}


def test_default_now_is_newest_document() -> None:
    index = make_index()
    index.add(Document("future", "f", time=NEWEST + timedelta(days=1)))
    got = run(RecencyScorer(DAY), index.snapshot())
    assert got["future"] == 1.0
    assert got["new"] == pytest.approx(0.5, rel=1e-14)
    assert got["day"] == pytest.approx(0.25, rel=1e-14)


def test_query_time_overrides_default_and_scorer_now() -> None:
    snapshot = make_index().snapshot()
    later = NEWEST + timedelta(days=3)
    expected = {"new": 2**-3, "half": 2**-3.5, "day": 2**-4, "two": 2**-5, "week": 2**-10}
    assert run(RecencyScorer(DAY), snapshot, Query(time=later)) == pytest.approx(expected, rel=1e-14)
    scorer = RecencyScorer(DAY, now=NEWEST + timedelta(days=1))
    assert run(scorer, snapshot, Query(time=later)) == pytest.approx(expected, rel=1e-14)
    # Without a query time, the scorer's own "now" wins over the newest document.
    assert run(scorer, snapshot)["new"] == pytest.approx(0.5, rel=1e-14)
    # Query time as POSIX seconds.
    assert run(RecencyScorer(DAY), snapshot, Query(time=later.timestamp())) == pytest.approx(
        expected, rel=1e-14
    )


def test_document_newer_than_now_scores_one() -> None:
    snapshot = make_index().snapshot()
    got = run(RecencyScorer(DAY), snapshot, Query(time=NEWEST - timedelta(days=1)))
    assert got["new"] == 1.0
    assert got["half"] == 1.0
    assert got["day"] == 1.0
    assert got["two"] == pytest.approx(0.5, rel=1e-14)
    assert max(got.values()) == 1.0


def test_naive_datetime_is_utc() -> None:
    index = Index(analyzer="simple")
    naive = datetime(2024, 3, 10, 12, 0)
    index.add_many(
        [
            Document("naive", "n", time=naive),
            Document("aware", "a", time=naive.replace(tzinfo=timezone.utc)),
            Document("offset", "o", time=datetime(2024, 3, 10, 14, 0, tzinfo=timezone(timedelta(hours=2)))),
        ]
    )
    assert Document("x", time=naive).timestamp == NEWEST.timestamp()
    got = run(RecencyScorer(DAY), index.snapshot(), Query(time=datetime(2024, 3, 11, 12, 0)))
    assert got == pytest.approx({"naive": 0.5, "aware": 0.5, "offset": 0.5}, rel=1e-14)
    assert Query(time=naive).timestamp == NEWEST.timestamp()


def test_ties_broken_by_key() -> None:
    index = Index(analyzer="simple")
    index.add_many([Document(key, time=NEWEST) for key in ["m", "c", "x", "a"]])
    snapshot = index.snapshot()
    stream = RecencyScorer(DAY).score(snapshot, Query(), 10)
    assert snapshot.keys_of(stream.ids) == ["a", "c", "m", "x"]


@pytest.mark.parametrize("half_life", [0, -1.0, timedelta(0), timedelta(days=-1), float("nan"), float("inf")])
def test_bad_half_life_raises(half_life: float | timedelta) -> None:
    with pytest.raises(InvalidParameterError):
        RecencyScorer(half_life)
