"""VectorScorer: exact cosine similarity on hand-computed fixtures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from weftsearch import Document, Index, Query, Snapshot, VectorScorer
from weftsearch.errors import InvalidVectorError, VectorDimensionError

SQRT_HALF = math.sqrt(0.5)


def make_index() -> Index:
    index = Index(analyzer="simple")
    index.add_many(
        [
            Document("east", "e", vector=np.array([2.0, 0.0, 0.0])),  # norm 2: cosine ignores scale
            Document("northeast", "ne", vector=np.array([1.0, 1.0, 0.0])),
            Document("north", "n", vector=np.array([0.0, 3.0, 0.0])),
            Document("west", "w", vector=np.array([-1.0, 0.0, 0.0])),
            Document("up", "u", vector=np.array([0.0, 0.0, 5.0])),
            Document("mixed", "m", vector=np.array([3.0, 4.0, 0.0])),  # norm 5
            Document("zero", "z", vector=np.array([0.0, 0.0, 0.0])),
            Document("novector", "x"),
        ]
    )
    return index


def scores_by_key(snapshot: Snapshot, query: Query, k: int = 100) -> dict[str, float]:
    stream = VectorScorer().score(snapshot, query, k)
    keys = snapshot.keys_of(stream.ids)
    assert stream.scores.tolist() == sorted(stream.scores.tolist(), reverse=True)
    return dict(zip(keys, stream.scores.tolist(), strict=True))


def test_hand_computed_cosines() -> None:
    snapshot = make_index().snapshot()
    got = scores_by_key(snapshot, Query(vector=np.array([1.0, 0.0, 0.0])))
    expected = {
        "east": 1.0,
        "northeast": SQRT_HALF,
        "mixed": 3 / 5,
        "north": 0.0,
        "up": 0.0,
        "west": -1.0,
    }
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-6), key


def test_hand_computed_cosines_oblique_query() -> None:
    snapshot = make_index().snapshot()
    # q = (1, 2, 2), |q| = 3.
    got = scores_by_key(snapshot, Query(vector=np.array([1.0, 2.0, 2.0])))
    expected = {
        "east": 1 / 3,
        "northeast": 3 / (3 * math.sqrt(2)),
        "north": 2 / 3,
        "west": -1 / 3,
        "up": 2 / 3,
        "mixed": (3 + 8) / 15,
    }
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-6), key
    # north and up tie exactly at 2/3 and come out in key order.
    stream = VectorScorer().score(snapshot, Query(vector=np.array([1.0, 2.0, 2.0])), 100)
    assert snapshot.keys_of(stream.ids)[:4] == ["mixed", "northeast", "north", "up"]
    assert stream.scores[2] == stream.scores[3]


def test_query_scale_does_not_matter() -> None:
    snapshot = make_index().snapshot()
    small = scores_by_key(snapshot, Query(vector=np.array([0.001, 0.002, 0.0])))
    large = scores_by_key(snapshot, Query(vector=np.array([1000.0, 2000.0, 0.0])))
    assert small.keys() == large.keys()
    for key in small:
        assert small[key] == pytest.approx(large[key], abs=1e-6)
    assert small["mixed"] == pytest.approx(11 / (5 * math.sqrt(5)), abs=1e-6)


def test_k_keeps_the_best() -> None:
    snapshot = make_index().snapshot()
    stream = VectorScorer().score(snapshot, Query(vector=np.array([1.0, 0.0, 0.0])), 2)
    assert snapshot.keys_of(stream.ids) == ["east", "northeast"]


def test_zero_norm_query_gives_empty_stream() -> None:
    snapshot = make_index().snapshot()
    assert len(VectorScorer().score(snapshot, Query(vector=np.zeros(3, dtype=np.float32)), 10)) == 0


def test_query_without_vector_gives_empty_stream() -> None:
    snapshot = make_index().snapshot()
    assert len(VectorScorer().score(snapshot, Query(text="e"), 10)) == 0


def test_index_without_vectors_gives_empty_stream() -> None:
    index = Index(analyzer="simple")
    index.add(Document("a", "text only"))
    assert len(VectorScorer().score(index.snapshot(), Query(vector=np.ones(4, dtype=np.float32)), 10)) == 0


def test_documents_without_vector_and_zero_vector_are_absent() -> None:
    snapshot = make_index().snapshot()
    got = scores_by_key(snapshot, Query(vector=np.array([0.3, -0.2, 0.9])))
    assert "novector" not in got
    assert "zero" not in got
    assert len(got) == 6


def test_query_of_wrong_width_raises() -> None:
    snapshot = make_index().snapshot()
    with pytest.raises(VectorDimensionError):
        VectorScorer().score(snapshot, Query(vector=np.ones(4, dtype=np.float32)), 10)
    with pytest.raises(VectorDimensionError):
        VectorScorer().score(snapshot, Query(vector=np.ones(2, dtype=np.float32)), 10)


def test_document_of_wrong_width_raises_and_changes_nothing() -> None:
    index = make_index()
    generation = index.generation
    with pytest.raises(VectorDimensionError):
        index.add(Document("bad", "b", vector=np.ones(4, dtype=np.float32)))
    assert "bad" not in index
    assert index.generation == generation


def test_fixed_width_index_rejects_other_widths() -> None:
    index = Index(analyzer="simple", vector_dim=2)
    with pytest.raises(VectorDimensionError):
        index.add(Document("a", vector=np.ones(3, dtype=np.float32)))
    index.add(Document("a", vector=np.ones(2, dtype=np.float32)))
    assert index.vector_dim == 2


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_vectors_raise(bad: float) -> None:
    with pytest.raises(InvalidVectorError):
        Document("a", "t", vector=np.array([1.0, bad]))
    with pytest.raises(InvalidVectorError):
        Query(vector=np.array([bad, 0.0]))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_float64_overflow_to_float32_infinity_raises() -> None:
    with pytest.raises(InvalidVectorError):
        Document("a", vector=np.array([1e300, 1.0]))


def test_stored_vectors_are_float32_and_read_only() -> None:
    document = Document("a", vector=[1, 2, 3])  # type: ignore[arg-type]
    assert document.vector is not None
    assert document.vector.dtype == np.float32
    assert not document.vector.flags.writeable


def test_upsert_replaces_vector_and_delete_removes_it() -> None:
    index = make_index()
    index.add(Document("west", "w", vector=np.array([1.0, 0.0, 0.0])))
    index.delete("east")
    got = scores_by_key(index.snapshot(), Query(vector=np.array([1.0, 0.0, 0.0])))
    assert "east" not in got
    assert got["west"] == pytest.approx(1.0, abs=1e-6)
    index.add(Document("northeast", "no vector any more"))
    got = scores_by_key(index.snapshot(), Query(vector=np.array([1.0, 0.0, 0.0])))
    assert "northeast" not in got
