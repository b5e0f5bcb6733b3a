"""Index behaviour: writes, key <-> id resolution, snapshots, generations, search and explain."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    Index,
    Query,
    ScoreFusion,
    Snapshot,
    Stream,
    VectorScorer,
    WeightedRRF,
)
from weftsearch.errors import (
    DuplicateKeyError,
    InvalidDocumentError,
    UnknownKeyError,
    VectorDimensionError,
)


class FixedScorer:
    """Returns the given keys with the given scores (in the given order)."""

    def __init__(self, keys: Sequence[str], scores: Sequence[float], name: str = "fixed") -> None:
        self.keys = list(keys)
        self.scores = list(scores)
        self.name = name
        self.asked: list[int] = []

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.asked.append(k)
        return Stream(snapshot.ids_of(self.keys), np.asarray(self.scores, dtype=np.float64))


def docs() -> list[Document]:
    return [
        Document("alpha", "sparse retrieval with bm25", fields={"year": 2001}),
        Document("beta", "dense retrieval with vectors", fields={"year": 2019, "title": "Beta"}),
        Document("gamma", "graph of citations"),
        Document("delta", "recency and time decay"),
    ]


def make_index() -> Index:
    index = Index(analyzer="simple")
    index.add_many(docs())
    return index


def bm25_keys(index: Index | Snapshot, text: str) -> list[str]:
    snapshot = index.snapshot() if isinstance(index, Index) else index
    return snapshot.keys_of(BM25Scorer().score(snapshot, Query(text), 100).ids)


# ---------------------------------------------------------------- writes


def test_add_and_get() -> None:
    index = Index(analyzer="simple")
    document = Document("k1", "hello world", fields={"title": "Hi"})
    index.add(document)
    assert len(index) == 1
    assert "k1" in index
    assert "k2" not in index
    assert 3 not in index
    assert index.get("k1") is document
    assert index.keys() == ["k1"]
    assert bm25_keys(index, "hello") == ["k1"]


def test_add_many_counts_and_accepts_any_iterable() -> None:
    index = Index(analyzer="simple")
    assert index.add_many(iter(docs())) == 4
    assert index.keys() == ["alpha", "beta", "delta", "gamma"]
    assert index.add_many([]) == 0
    assert len(index) == 4


def test_upsert_replaces() -> None:
    index = make_index()
    generation = index.generation
    index.add(Document("alpha", "completely new words", fields={"year": 2024}))
    assert len(index) == 4
    assert index.generation == generation + 1
    assert index.get("alpha").text == "completely new words"
    assert index.get("alpha").fields == {"year": 2024}
    assert bm25_keys(index, "sparse") == []
    assert bm25_keys(index, "completely") == ["alpha"]
    assert index.snapshot().doc_freq("retrieval") == 1
    # Upsert within add_many too.
    index.add_many([Document("beta", "graph"), Document("epsilon", "graph")])
    assert len(index) == 5
    assert bm25_keys(index, "graph") == ["beta", "epsilon", "gamma"]


def test_delete_and_delete_many() -> None:
    index = make_index()
    assert index.delete("alpha") is True
    assert index.delete("alpha") is False
    assert "alpha" not in index
    assert bm25_keys(index, "sparse") == []
    assert index.delete_many(["beta", "missing", "gamma", "beta"]) == 2
    assert index.keys() == ["delta"]
    assert index.delete_many(["nothing"]) == 0
    with pytest.raises(UnknownKeyError):
        index.get("alpha")
    snapshot = index.snapshot()
    assert snapshot.n_docs == 1
    assert snapshot.keys() == ["delta"]


def test_re_adding_a_deleted_key() -> None:
    index = make_index()
    index.delete("gamma")
    index.add(Document("gamma", "returns with citations"))
    assert bm25_keys(index, "returns") == ["gamma"]
    assert bm25_keys(index, "graph") == []


# ---------------------------------------------------------------- key <-> id


def test_key_id_resolution_through_snapshot() -> None:
    snapshot = make_index().snapshot()
    assert snapshot.n_docs == len(snapshot) == 4
    for key in ["alpha", "beta", "gamma", "delta"]:
        doc_id = snapshot.id_of(key)
        assert 0 <= doc_id < 4
        assert snapshot.key(doc_id) == key
        assert snapshot.document(doc_id).key == key
        assert key in snapshot
    ids = snapshot.ids_of(["gamma", "missing", "alpha", "", "zzz", "aaa"])
    assert ids.dtype == np.int64
    assert ids.tolist() == [snapshot.id_of("gamma"), -1, snapshot.id_of("alpha"), -1, -1, -1]
    assert snapshot.keys_of(snapshot.ids_of(["delta", "beta"])) == ["delta", "beta"]
    assert "missing" not in snapshot
    assert sorted(snapshot.keys()) == snapshot.keys()


def test_id_of_missing_key_raises_unknown_key() -> None:
    snapshot = make_index().snapshot()
    with pytest.raises(UnknownKeyError) as info:
        snapshot.id_of("missing")
    assert isinstance(info.value, KeyError)
    assert "missing" in str(info.value)
    with pytest.raises(UnknownKeyError):
        snapshot.key(4)
    with pytest.raises(UnknownKeyError):
        snapshot.key(-1)
    with pytest.raises(UnknownKeyError):
        snapshot.document(99)


def test_ids_of_on_empty_snapshot() -> None:
    snapshot = Index().snapshot()
    assert snapshot.ids_of(["a", "b"]).tolist() == [-1, -1]
    assert snapshot.ids_of([]).tolist() == []
    with pytest.raises(UnknownKeyError):
        snapshot.id_of("a")


# ---------------------------------------------------------------- snapshots and generations


def test_snapshot_isolation() -> None:
    index = make_index()
    before = index.snapshot()
    keys_before = before.keys()
    lengths_before = before.doc_lengths.tolist()
    avgdl_before = before.avgdl
    hits_before = bm25_keys(before, "retrieval")
    assert hits_before == ["alpha", "beta"]

    index.add(Document("alpha", "rewritten text entirely"))
    index.add(Document("omega", "retrieval retrieval brand new term zebra"))
    index.delete("beta")

    assert before.keys() == keys_before
    assert before.doc_lengths.tolist() == lengths_before
    assert before.avgdl == avgdl_before
    assert before.document(before.id_of("alpha")).text == "sparse retrieval with bm25"
    assert bm25_keys(before, "retrieval") == hits_before
    assert bm25_keys(before, "zebra") == []  # a term first seen after the snapshot
    assert before.doc_freq("zebra") == 0
    after = index.snapshot()
    assert after is not before
    assert bm25_keys(after, "retrieval") == ["omega"]
    assert bm25_keys(after, "zebra") == ["omega"]


def test_snapshot_arrays_are_read_only() -> None:
    snapshot = make_index().snapshot()
    with pytest.raises(ValueError):
        snapshot.doc_lengths[0] = 99


def test_generation_counter() -> None:
    index = Index(analyzer="simple")
    assert index.generation == 0
    assert index.snapshot().generation == 0
    index.add(Document("a", "x"))
    assert index.generation == 1
    index.add_many([Document("b", "y"), Document("c", "z")])
    assert index.generation == 2  # one bump per call, not per document
    index.add_many([])
    assert index.generation == 2
    assert index.delete("missing") is False
    assert index.generation == 2
    assert index.delete_many(["missing"]) == 0
    assert index.generation == 2
    snapshot = index.snapshot()
    assert snapshot.generation == 2
    assert index.snapshot() is snapshot  # shared until the next write
    index.delete("a")
    assert index.generation == 3
    index.delete_many(["b", "c"])
    assert index.generation == 4
    assert index.snapshot().generation == 4
    assert snapshot.generation == 2
    results = index.search("x", 5, RRF(), BM25Scorer())
    assert results.generation == 4


# ---------------------------------------------------------------- all or nothing


def assert_unchanged(index: Index, generation: int, snapshot: Snapshot) -> None:
    assert index.generation == generation
    assert index.snapshot() is snapshot
    assert index.keys() == ["alpha", "beta", "delta", "gamma"]
    assert index.get("alpha").text == "sparse retrieval with bm25"
    assert bm25_keys(index, "new") == []


def test_bulk_with_duplicate_key_changes_nothing() -> None:
    index = make_index()
    generation, snapshot = index.generation, index.snapshot()
    with pytest.raises(DuplicateKeyError):
        index.add_many([Document("alpha", "new"), Document("zeta", "new"), Document("zeta", "new again")])
    assert_unchanged(index, generation, snapshot)


def test_bulk_with_wrong_vector_width_changes_nothing() -> None:
    index = make_index()
    index.add(Document("vec", "v", vector=np.ones(3, dtype=np.float32)))
    index.delete("vec")
    generation, snapshot = index.generation, index.snapshot()
    with pytest.raises(VectorDimensionError):
        index.add_many(
            [
                Document("alpha", "new", vector=np.ones(3, dtype=np.float32)),
                Document("zeta", "new", vector=np.ones(2, dtype=np.float32)),
            ]
        )
    assert_unchanged(index, generation, snapshot)


def test_bulk_with_inconsistent_widths_on_empty_width_changes_nothing() -> None:
    index = make_index()
    generation, snapshot = index.generation, index.snapshot()
    with pytest.raises(VectorDimensionError):
        index.add_many(
            [
                Document("zeta", "new", vector=np.ones(3, dtype=np.float32)),
                Document("eta", "new", vector=np.ones(4, dtype=np.float32)),
            ]
        )
    assert_unchanged(index, generation, snapshot)
    assert index.vector_dim is None
    index.add(Document("eta", "new", vector=np.ones(4, dtype=np.float32)))
    assert index.vector_dim == 4


def test_bulk_with_non_document_changes_nothing() -> None:
    index = make_index()
    generation, snapshot = index.generation, index.snapshot()
    with pytest.raises(InvalidDocumentError):
        index.add_many([Document("zeta", "new"), {"key": "eta", "text": "new"}])  # type: ignore[list-item]
    assert_unchanged(index, generation, snapshot)


def test_bulk_whose_iterator_fails_changes_nothing() -> None:
    index = make_index()
    generation, snapshot = index.generation, index.snapshot()

    def documents() -> Iterator[Document]:
        yield Document("zeta", "new")
        yield Document("alpha", "new")
        yield Document("", "new")  # raises while the batch is being read

    with pytest.raises(InvalidDocumentError):
        index.add_many(documents())
    assert_unchanged(index, generation, snapshot)


# ---------------------------------------------------------------- ties and insertion order


def test_ties_broken_by_key_regardless_of_insertion_order() -> None:
    documents = [
        Document("m", "shared words here", vector=np.array([1.0, 0.0])),
        Document("c", "shared words here", vector=np.array([1.0, 0.0])),
        Document("x", "shared words here", vector=np.array([1.0, 0.0])),
        Document("a", "shared words here", vector=np.array([1.0, 0.0])),
        Document("k", "shared words", vector=np.array([0.0, 1.0])),
    ]
    forward = Index(analyzer="simple")
    forward.add_many(documents)
    backward = Index(analyzer="simple")
    for document in reversed(documents):
        backward.add(document)
    query = Query("shared here", vector=np.array([1.0, 0.0]))
    for fuser in (RRF(), ScoreFusion(), WeightedRRF([1.0, 2.0])):
        first = forward.search(query, 10, fuser, BM25Scorer(), VectorScorer())
        second = backward.search(query, 10, fuser, BM25Scorer(), VectorScorer())
        assert first.keys == second.keys
        assert first.scores.tolist() == second.scores.tolist()
        assert first.keys[:4] == ["a", "c", "m", "x"]
    bm25_only = forward.search("shared here", 10, RRF(), BM25Scorer())
    assert bm25_only.keys == ["a", "c", "m", "x", "k"]


# ---------------------------------------------------------------- search and explain


def test_explanation_signals() -> None:
    index = make_index()
    first = FixedScorer(["alpha", "beta", "gamma"], [3.0, 2.0, 1.0])
    second = FixedScorer(["gamma", "delta"], [0.9, 0.5])
    results = index.search("anything", 10, RRF(), first, second)
    assert results.signals == ("fixed", "fixed#2")
    assert results.fuser == "rrf"
    assert results.depth == 100
    assert first.asked == [100]
    # gamma: 1/63 + 1/61; alpha: 1/61; beta and delta tie at 1/62 -> key order.
    assert results.keys == ["gamma", "alpha", "beta", "delta"]
    expected: dict[str, list[tuple[int | None, float | None, float]]] = {
        "gamma": [(3, 1.0, 1 / 63), (1, 0.9, 1 / 61)],
        "alpha": [(1, 3.0, 1 / 61), (None, None, 0.0)],
        "beta": [(2, 2.0, 1 / 62), (None, None, 0.0)],
        "delta": [(None, None, 0.0), (2, 0.5, 1 / 62)],
    }
    for position, hit in enumerate(results, start=1):
        assert hit.rank == position
        assert len(hit.signals) == 2
        for signal, label, (rank, score, contribution) in zip(
            hit.signals, ["fixed", "fixed#2"], expected[hit.key], strict=True
        ):
            assert signal.signal == label
            assert signal.rank == rank
            assert signal.score == score
            assert signal.contribution == pytest.approx(contribution, rel=1e-15)
        assert hit.score == pytest.approx(sum(s.contribution for s in hit.signals), rel=1e-15)
    assert results[1].fields == {"year": 2001}
    assert dict(results[0].fields) == {}
    json.dumps(results.to_dict())


class RefusingFuser:
    """A fuser that must not be called (a one-stream search passes its stream through)."""

    name = "refusing"

    def __repr__(self) -> str:
        return "RefusingFuser()"

    def fuse(self, streams: Sequence[Stream], k: int, keys: Snapshot) -> object:
        raise AssertionError(f"fuse called with {len(streams)} stream(s)")


@pytest.mark.parametrize(
    "fuser",
    [RRF(), RRF(k=0), WeightedRRF([3.0]), ScoreFusion(), ScoreFusion(norm="zscore"), RefusingFuser()],
    ids=repr,
)
def test_one_stream_passes_through_with_its_own_scores(fuser: object) -> None:
    index = make_index()
    # Out of order, with ties: the canonical order is score desc, then key asc.
    scorer = FixedScorer(["gamma", "delta", "alpha", "beta"], [1.0, 2.0, 2.0, 0.5])
    # depth 4: the stream (4 long) is deeper than k, and cut to k after the canonical order.
    results = index.search("anything", 3, fuser, scorer, depth=4)  # type: ignore[arg-type]
    assert results.fuser == "passthrough"
    assert results.signals == ("fixed",)
    assert results.keys == ["alpha", "delta", "gamma"]
    assert results.scores.tolist() == [2.0, 2.0, 1.0]  # the scorer's scores, ties kept
    for position, hit in enumerate(results, start=1):
        [signal] = hit.signals
        assert (hit.rank, signal.signal, signal.rank) == (position, "fixed", position)
        assert signal.score == hit.score and signal.contribution == hit.score
    assert results.to_dict()["fuser"] == "passthrough"


def test_one_bm25_stream_gives_the_scorers_scores_exactly() -> None:
    index = make_index()
    snapshot = index.snapshot()
    stream = BM25Scorer().score(snapshot, Query("retrieval with"), 100)
    order = np.lexsort((np.asarray(snapshot.keys_of(stream.ids)), -stream.scores))
    results = index.search("retrieval with", 10, RRF(), BM25Scorer())
    assert results.keys == [snapshot.keys_of(stream.ids)[i] for i in order]
    assert results.scores.tolist() == stream.scores[order].tolist()
    assert results.scores[0] == results.scores[1]  # alpha and beta tie: a real tie stays a tie
    # Two streams are still fused by the fuser.
    assert index.search("retrieval with", 10, RRF(), BM25Scorer(), BM25Scorer()).fuser == "rrf"


def test_explanation_with_weights_and_real_scorers() -> None:
    index = Index(analyzer="simple")
    index.add_many(
        [
            Document("a", "cat cat", vector=np.array([0.0, 1.0])),
            Document("b", "cat dog", vector=np.array([1.0, 0.0])),
            Document("c", "dog", vector=np.array([1.0, 1.0])),
        ]
    )
    query = Query("cat", vector=np.array([1.0, 0.0]))
    results = index.search(query, 3, WeightedRRF([2.0, 1.0], k=10), BM25Scorer(), VectorScorer())
    snapshot = index.snapshot()
    bm25 = BM25Scorer().score(snapshot, query, 100)
    vector = VectorScorer().score(snapshot, query, 100)
    assert snapshot.keys_of(bm25.ids) == ["a", "b"]
    assert snapshot.keys_of(vector.ids) == ["b", "c", "a"]
    # a: 2/11 + 1/13 = 0.2587; b: 2/12 + 1/11 = 0.2576; c: 1/12.
    assert results.keys == ["a", "b", "c"]
    assert results.scores.tolist() == pytest.approx([2 / 11 + 1 / 13, 2 / 12 + 1 / 11, 1 / 12], rel=1e-15)
    a_hit = results[0]
    assert [s.rank for s in a_hit.signals] == [1, 3]
    assert [s.contribution for s in a_hit.signals] == pytest.approx([2 / 11, 1 / 13], rel=1e-15)
    b_hit = results[1]
    assert [s.signal for s in b_hit.signals] == ["bm25", "vector"]
    assert [s.rank for s in b_hit.signals] == [2, 1]
    assert b_hit.signals[0].score == float(bm25.scores[1])
    assert b_hit.signals[1].score == float(vector.scores[0])
    assert [s.contribution for s in b_hit.signals] == pytest.approx([2 / 12, 1 / 11], rel=1e-15)
    c_hit = results[2]
    assert c_hit.signals[0].rank is None
    assert c_hit.signals[0].score is None
    assert c_hit.signals[0].contribution == 0.0


def test_engine_reorders_an_unsorted_stream() -> None:
    index = make_index()
    scorer = FixedScorer(["delta", "alpha", "gamma"], [1.0, 5.0, 5.0])
    results = index.search("", 10, RRF(), scorer)
    assert results.keys == ["alpha", "gamma", "delta"]
    assert [hit.signals[0].rank for hit in results] == [1, 2, 3]
    assert [hit.signals[0].score for hit in results] == [5.0, 5.0, 1.0]


def test_depth_and_k() -> None:
    index = make_index()
    scorer = FixedScorer(["alpha", "beta", "gamma"], [3.0, 2.0, 1.0])
    results = index.search("q", 2, RRF(), scorer, depth=7)
    assert scorer.asked == [7]
    assert results.depth == 7
    assert results.keys == ["alpha", "beta"]
    big = index.search("retrieval", 1000, RRF(), BM25Scorer())
    assert big.depth == 1000
    assert big.keys == ["alpha", "beta"]


def test_string_query_equals_query_object() -> None:
    index = make_index()
    by_string = index.search("dense retrieval", 10, RRF(), BM25Scorer())
    by_query = index.search(Query("dense retrieval"), 10, RRF(), BM25Scorer())
    assert by_string.keys == by_query.keys == ["beta", "alpha"]
    assert by_string.scores.tolist() == by_query.scores.tolist()


def test_no_match_gives_empty_results() -> None:
    results = make_index().search("unknownword", 10, RRF(), BM25Scorer(), VectorScorer())
    assert len(results) == 0
    assert results.keys == []
    assert results.to_dict()["hits"] == []
