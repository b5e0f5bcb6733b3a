"""``Index.explain`` / ``explain_many``: the fused score, each stream's part, each scorer's own breakdown.

The engine asks every scorer for a breakdown the same way (the optional ``explain`` method), never by
its type: a user's scorer with ``explain`` gets its tree under its stream, one without gets none.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from weftsearch import RRF, BM25Scorer, Document, Explanation, Index, Query, Snapshot, Stream, VectorScorer
from weftsearch.errors import InvalidParameterError, UnknownKeyError


class Length:
    """A user's scorer: longer keys score higher; it explains itself."""

    name = "length"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        keys = snapshot.keys()
        ids = snapshot.ids_of(keys)
        return Stream.ranked(ids, np.array([float(len(key)) for key in keys]), k, snapshot)

    def explain(self, snapshot: Snapshot, query: Query, ids: NDArray[np.int64]) -> list[Explanation]:
        return [Explanation(float(len(key)), f"length of {key!r}") for key in snapshot.keys_of(ids)]


class Mute(Length):
    """Breaks the explain contract: one explanation short."""

    def explain(self, snapshot: Snapshot, query: Query, ids: NDArray[np.int64]) -> list[Explanation]:
        return super().explain(snapshot, query, ids)[:-1]


def build() -> Index:
    index = Index(vector_dim=2)
    rows = [
        ("a", "graph retrieval", [1.0, 0.0]),
        ("bb", "retrieval of text", [0.0, 1.0]),
        ("ccc", "cooking", [1.0, 1.0]),
    ]
    index.add_many([Document(key, text, vector=np.array(vector)) for key, text, vector in rows])
    return index


def test_the_root_and_each_stream_are_the_searchs_numbers() -> None:
    index = build()
    scorers: Sequence[object] = (BM25Scorer(), VectorScorer(), Length())
    query = Query("retrieval", vector=np.array([1.0, 0.0]))
    results = index.search(query, 3, RRF(), *scorers)  # type: ignore[arg-type]
    explained = index.explain_many(query, results.keys, RRF(), *scorers)  # type: ignore[arg-type]
    for hit, found in zip(results, explained, strict=True):
        assert found.value == hit.score
        assert f"rank {hit.rank}" in found.description and "fused by rrf" in found.description
        for signal, stream in zip(hit.signals, found.details, strict=True):
            assert stream.value == signal.contribution
            assert stream.description.startswith(signal.signal)
    bm25, vector, length = explained[0].details
    assert bm25.details and bm25.details[0].value == results[0].signals[0].score  # BM25's own breakdown
    assert vector.details == ()  # VectorScorer offers none: the stream says its rank and score only
    assert length.details[0].description == f"length of {results[0].key!r}"


def test_one_scorer_passes_through_and_a_document_out_of_reach_is_explained() -> None:
    index = build()
    found = index.explain("retrieval", "a", RRF(), BM25Scorer())
    assert "the one stream's score" in found.description
    assert found.value == index.search("retrieval", 3, RRF(), BM25Scorer()).scores[0]
    out = index.explain("retrieval", "ccc", RRF(), BM25Scorer())
    assert out.value == 0.0 and "not among the top 100" in out.description
    assert "it does not match" in out.details[0].description
    assert out.details[0].details[0].description.startswith("no match")
    assert str(out).count("\n") == 2


def test_bad_requests_are_typed_errors() -> None:
    index = build()
    with pytest.raises(UnknownKeyError, match="'zz'"):
        index.explain("retrieval", "zz", RRF(), BM25Scorer())
    with pytest.raises(InvalidParameterError, match="at most 1000"):
        index.explain_many("retrieval", ["a"] * 1001, RRF(), BM25Scorer())
    with pytest.raises(InvalidParameterError, match="one Explanation per document"):
        index.explain("retrieval", "a", RRF(), Mute())
    with pytest.raises(InvalidParameterError, match="snapshot"):
        index.explain("retrieval", "a", RRF(), BM25Scorer(), snapshot=build().snapshot())


def test_a_snapshot_explains_the_state_it_searched() -> None:
    index = build()
    before = index.snapshot()
    index.add(Document("dd", "retrieval retrieval retrieval", vector=np.array([0.5, 0.5])))
    old = index.explain("retrieval", "a", RRF(), BM25Scorer(), snapshot=before)
    new = index.explain("retrieval", "a", RRF(), BM25Scorer())
    searched = index.search("retrieval", 3, RRF(), BM25Scorer(), snapshot=before)
    assert old.value == searched[searched.keys.index("a")].score
    assert old.value != new.value  # N and df moved with the added document
