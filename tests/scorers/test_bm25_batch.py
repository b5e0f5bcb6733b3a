"""BM25's batch path (``BM25Scorer.score_many``, one compiled call for many queries) and batch search.

``score_many`` must give, for every query, exactly what ``score`` gives (ids,
score bits, order) and what the exhaustive numpy path gives; ``search_many``
must give exactly what one ``search`` per query gives, for every built-in
scorer, on multi-segment snapshots with deletions, in threads or not.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weftsearch.scorers.bm25 as bm25_module
from tests.plans import without_paths
from tests.scorers.test_bm25_kernel import DISABLED, corpus, queries
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    GraphScorer,
    Index,
    PageRankScorer,
    PropagationScorer,
    Query,
    RecencyScorer,
    Scorer,
    Snapshot,
    Stream,
    VectorScorer,
)
from weftsearch.engine.search import canonical_stream
from weftsearch.engine.stream import _is_vouched, _is_vouched_batch, _vouched_batch, _vouched_stream
from weftsearch.errors import InvalidParameterError, ScorerOutputError
from weftsearch.native import bm25 as kernel
from weftsearch.scorers.bm25 import lists as bm25_lists

needs_batch = pytest.mark.skipif(
    DISABLED or not kernel.top_k_batch_available(), reason="no compiled BM25 batch function"
)


def same(one: Stream, other: Stream) -> bool:
    return one.ids.tobytes() == other.ids.tobytes() and one.scores.tobytes() == other.scores.tobytes()


def batch_mismatches(
    snapshot: Snapshot, texts: list[str], ks: list[int], params: list[tuple[float, float]]
) -> list[str]:
    """Every (query, k, k1, b) where ``score_many`` differs from ``score`` or the numpy oracle in any bit."""
    found = []
    batch = [Query(text) for text in texts]
    for k1, b in params:
        scorer = BM25Scorer(k1, b)
        for k in ks:
            many = scorer.score_many(snapshot, batch, k)
            assert len(many) == len(batch)
            for query, got in zip(batch, many, strict=True):
                if not same(got, scorer.score(snapshot, query, k)) or not same(
                    got, scorer._score_numpy(snapshot, query, k)
                ):
                    found.append(f"{query.text!r} k={k} k1={k1} b={b}")
    return found


PARAMS = st.sampled_from([(1.2, 0.75), (0.0, 1.0), (2.0, 0.0), (0.9, 0.4), (50.0, 1.0)])


@pytest.fixture(autouse=True)
def batch_at_any_k(monkeypatch: pytest.MonkeyPatch) -> None:
    """score_many takes the compiled batch at every k on these small corpora (else numpy above k = 10)."""
    monkeypatch.setattr(bm25_module, "_BATCH_COMPILED_MAX_K", 10**9)


@needs_batch
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 4),
    docs=st.integers(1, 400),
    vocabulary=st.integers(1, 30),
    deleted=st.sampled_from([0.0, 0.05, 0.5]),
    lengths=st.integers(1, 6),
    ks=st.lists(st.integers(1, 300), min_size=1, max_size=3),
    params=st.lists(PARAMS, min_size=1, max_size=2),
)
def test_score_many_is_score_for_each_query_to_the_bit(
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    lengths: int,
    ks: list[int],
    params: list[tuple[float, float]],
) -> None:
    index, words = corpus(seed, segments, docs, vocabulary, deleted, lengths)
    texts = [*queries(seed, words, 12), "", "absent-term only"]
    assert batch_mismatches(index.snapshot(), texts, ks, params) == []


@needs_batch
def test_score_many_on_the_compiled_single_path_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where ``score`` itself goes compiled (large snapshots), the batch still matches it bit for bit."""
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)
    index, words = corpus(21, 3, 900, 25, 0.1, 8)
    assert batch_mismatches(index.snapshot(), queries(21, words, 60), [1, 10, 100], [(1.2, 0.75)]) == []


@needs_batch
def test_queries_with_more_ties_than_the_batch_has_room_for_run_again_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every document ties: each query keeps all of them (far more than k + 8), and still matches."""
    index = Index("simple")
    index.add_many([Document(f"d{n:03d}", "same words here") for n in range(150)])
    index.add_many([Document(f"e{n:03d}", "same words") for n in range(150)])
    snapshot = index.snapshot()
    alone: list[int] = []
    real_run = bm25_lists.run

    def counting(*args: object, **kwargs: object) -> object:
        alone.append(1)
        return real_run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bm25_lists, "run", counting)
    batch = [Query("same"), Query("words here"), Query("nothing"), Query("same same words")]
    scorer = BM25Scorer()
    for k in (1, 5, 299):
        many = scorer.score_many(snapshot, batch, k)
        assert [len(stream) for stream in many][2] == 0
        for query, got in zip(batch, many, strict=True):
            assert same(got, scorer._score_numpy(snapshot, query, k))
    assert alone  # the overflow path ran (and its results matched)


def test_score_many_without_the_batch_function_scores_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel, "top_k_batch_available", lambda: False)
    library = kernel.compiled_bm25()
    if library is not None:  # a library built before weft_bm25_query: the older paths, same results
        older = dataclasses.replace(library, query=None, query_batch=None)
        monkeypatch.setattr(kernel, "compiled_bm25", lambda: older)
    index, words = corpus(4, 2, 300, 12, 0.1, 5)
    assert batch_mismatches(index.snapshot(), queries(4, words, 20), [3, 50], [(1.2, 0.75)]) == []


@needs_batch
@pytest.mark.parametrize(
    ("n_queries", "list_starts", "weight_starts"),
    [
        (2**62, [0, 0], [0, 0]),  # 5 * n_queries (the stats rows) would overflow
        (1, [-1, 0], [0, 1]),  # a negative offset
        (1, [1, 0], [0, 1]),  # a decreasing one
        (1, [0, 2**62], [0, 1]),  # 8 * offset (list descriptors) would overflow
        (1, [0, -(2**63)], [0, 1]),  # the difference itself would overflow
        (1, [0, 0], [3, 1]),  # decreasing weight offsets
        (1, [0, 0], [-5, 1]),
    ],
)
def test_the_batch_kernel_refuses_offsets_that_overflow_or_run_backwards(
    n_queries: int, list_starts: list[int], weight_starts: list[int]
) -> None:
    """The C batch entry point checks its offsets before forming any difference or product (code -2)."""
    function = kernel._top_k_batch()
    assert function is not None
    empty_i64, empty_f64 = np.zeros(8, dtype=np.int64), np.zeros(1, dtype=np.float64)
    starts, weight_offsets = np.array(list_starts, dtype=np.int64), np.array(weight_starts, dtype=np.int64)
    out, stats = np.zeros(4, dtype=np.int64), np.zeros(5, dtype=np.int64)
    code = function(
        empty_i64.ctypes.data, starts.ctypes.data, empty_i64.ctypes.data, 0,
        empty_f64.ctypes.data, weight_offsets.ctypes.data, n_queries, 1.2, 0.75, 10.0, 10, 1.0,
        out.ctypes.data, empty_f64.ctypes.data, 0, out.ctypes.data, out.ctypes.data, stats.ctypes.data,
    )  # fmt: skip
    assert code == -2


def test_a_vouched_stream_is_trusted_only_for_its_own_snapshot() -> None:
    """The engine skips its checks only for a built-in scorer's stream made for this very snapshot."""
    index, words = corpus(2, 2, 200, 10, 0.0, 4)
    snapshot = index.snapshot()
    stream = BM25Scorer().score(snapshot, Query(words[0]), 10)
    assert _is_vouched(stream, snapshot)
    assert canonical_stream(stream, snapshot, 10, "bm25") is stream
    with pytest.raises(ScorerOutputError, match="candidates for depth"):
        canonical_stream(stream, snapshot, len(stream) - 1, "bm25")  # the length is still checked
    index.add(Document("zz-new", words[0]))
    newer = index.snapshot()
    assert not _is_vouched(stream, newer)
    # For another snapshot a vouched stream is checked like any other: an id out of range is refused.
    bad = _vouched_stream(np.array([0, 10**6], dtype=np.int64), np.array([2.0, 1.0]), snapshot)
    with pytest.raises(ScorerOutputError, match="outside"):
        canonical_stream(bad, newer, 10, "x")
    # A plain Stream with the same arrays is never vouched for.
    assert not _is_vouched(Stream(stream.ids, stream.scores), snapshot)


def rich_index() -> Index:
    """Three segments with vectors, links and times, keys interleaved, and deletions."""
    rng = np.random.default_rng(5)
    words = ["graph", "dense", "sparse", "retrieval", "time", "decay", "vector", "bm25"]
    index = Index("simple")
    keys = [f"k{n:03d}" for n in range(180)]
    start = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    for segment in range(3):
        batch = []
        for key in keys[segment::3]:
            text = " ".join(rng.choice(words, size=int(rng.integers(1, 5))).tolist())
            vector = rng.integers(-2, 3, size=4).astype(np.float32)
            vector[0] = vector[0] or 1.0
            links = tuple(rng.choice(keys, size=int(rng.integers(0, 4))).tolist())
            time = start + dt.timedelta(days=int(rng.integers(0, 50)))
            batch.append(Document(key, text, vector=vector, links=links, time=time))
        index.add_many(batch)
        index.snapshot()
    index.delete_many(keys[::7])
    assert len(index.snapshot().parts) == 3
    return index


SCORERS: dict[str, Callable[[], list[Scorer]]] = {
    "bm25": lambda: [BM25Scorer()],
    "bm25 k1=0": lambda: [BM25Scorer(0.0, 1.0)],
    "vector": lambda: [VectorScorer()],
    "graph": lambda: [GraphScorer(BM25Scorer())],
    "pagerank": lambda: [PageRankScorer(BM25Scorer())],
    "propagation": lambda: [PropagationScorer(BM25Scorer())],
    "recency": lambda: [RecencyScorer(dt.timedelta(days=10))],
    "hybrid": lambda: [BM25Scorer(), VectorScorer(), RecencyScorer(dt.timedelta(days=10))],
}


@pytest.mark.parametrize("threads", [None, 2])
@pytest.mark.parametrize("name", list(SCORERS))
def test_search_many_is_one_search_per_query_for_every_built_in_scorer(
    name: str, threads: int | None
) -> None:
    index = rich_index()
    rng = np.random.default_rng(9)
    words = ["graph", "dense", "sparse", "retrieval", "time", "vector", "absent"]
    batch = [
        Query(
            " ".join(rng.choice(words, size=int(rng.integers(0, 4))).tolist()),
            vector=rng.normal(size=4).astype(np.float32),
        )
        for _ in range(150)
    ]
    for k in (1, 7):
        many = index.search_many(batch, k, RRF(), *SCORERS[name](), threads=threads)
        for query, results in zip(batch, many, strict=True):
            alone = index.search(query, k, RRF(), *SCORERS[name]())
            # The batch may take the compiled kernel where one search takes numpy: same results,
            # same plan counts but the path-specific ones.
            assert without_paths(results.to_dict()) == without_paths(alone.to_dict())
            assert results.score_array.tobytes() == alone.score_array.tobytes()
            got, want = results.explain_arrays(), alone.explain_arrays()
            assert got.ranks.tobytes() == want.ranks.tobytes()
            assert got.scores.tobytes() == want.scores.tobytes()
            assert got.contributions.tobytes() == want.contributions.tobytes()


def test_concurrent_searches_return_the_sequential_results() -> None:
    """Threads calling Index.search at once (one BM25 stream, hybrid) get exactly the sequential results."""
    index = rich_index()
    texts = ["graph retrieval", "dense", "time decay vector", "bm25 sparse graph", "absent"] * 8
    vectors = np.random.default_rng(1).normal(size=(len(texts), 4)).astype(np.float32)
    batch = [Query(text, vector=vector) for text, vector in zip(texts, vectors, strict=True)]

    def run(query: Query) -> tuple[object, object]:
        return (
            # A concurrent search may take the kernel (searches in flight): the path-free plan only.
            without_paths(index.search(query, 10, RRF(), BM25Scorer()).to_dict()),
            without_paths(index.search(query, 5, RRF(), BM25Scorer(), VectorScorer()).to_dict()),
        )

    sequential = [run(query) for query in batch]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            assert list(pool.map(run, batch)) == sequential


def test_one_scorer_without_a_depth_is_asked_for_k_and_gives_the_deeper_results() -> None:
    index, words = corpus(8, 2, 300, 15, 0.1, 5)
    asked: list[int] = []

    class Asking(BM25Scorer):
        def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
            asked.append(k)
            return super().score(snapshot, query, k)

    for text in queries(8, words, 10):
        shallow = index.search(text, 7, RRF(), Asking())
        deep = index.search(text, 7, RRF(), Asking(), depth=100)
        assert shallow.depth == 7 and deep.depth == 100
        assert (shallow.keys, shallow.score_array.tobytes()) == (deep.keys, deep.score_array.tobytes())
    assert set(asked) == {7, 100}
    two = index.search("w0", 7, RRF(), Asking(), Asking())
    assert two.depth == 100  # fusion still reads max(k, 100) candidates per stream


def test_score_many_is_one_batch_call_at_every_size_and_k(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31 item 2: small snapshots and large k went query by query through numpy; now one call."""
    calls: list[int] = []
    real = bm25_lists.run_planned

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bm25_lists, "run_planned", counting)
    index, words = corpus(6, 2, 300, 12, 0.1, 5)
    snapshot = index.snapshot()
    assert batch_mismatches(snapshot, queries(6, words, 20), [11, 50], [(1.2, 0.75)]) == []
    if not DISABLED:
        assert len(calls) == 2  # one call per score_many (one per k)


@needs_batch
@pytest.mark.parametrize("segments", [1, 3])
def test_a_batch_of_streams_is_a_sequence_of_each_querys_stream(segments: int) -> None:
    """``score_many`` without filters hands back one array batch; reading it gives ``score``'s streams."""
    index, words = corpus(9, segments, 200, 10, 0.1, 4)
    snapshot = index.snapshot()
    batch = [Query(words[0]), Query(""), Query("absent"), Query(f"{words[1]} {words[1]} {words[2]}")]
    scorer = BM25Scorer()
    many = scorer.score_many(snapshot, batch, 5)
    assert _is_vouched_batch(many, snapshot)
    assert len(many) == 4
    for position, query in enumerate(batch):
        want = scorer.score(snapshot, query, 5)
        for got in (
            many[position],
            many[position - 4],
            list(many)[position],
            many[position : position + 1][0],
        ):
            assert same(got, want) and got.plan == want.plan and got.complete
            assert _is_vouched(got, snapshot) and not got.ids.flags.writeable
    assert len(many[1:3]) == 2 and many[::-1][0].plan == many[3].plan
    with pytest.raises(IndexError):
        many[4]
    with pytest.raises(IndexError):
        many[-5]
    # A filter or a query tree in the batch: a list of streams, each its own.
    mixed = scorer.score_many(snapshot, [*batch, Query.parse(f"+{words[0]}")], 5)
    assert isinstance(mixed, list) and all(same(a, b) for a, b in zip(mixed, many, strict=False))


def test_a_vouched_batch_is_refused_when_its_bounds_do_not_fit() -> None:
    ids, scores = np.arange(4, dtype=np.int64), np.array([4.0, 3.0, 2.0, 1.0])
    index = Index("simple")
    snapshot = index.snapshot()
    for bounds in ([0, 2, 3], [1, 4], [0, 3, 2, 4], []):
        with pytest.raises(InvalidParameterError):
            _vouched_batch(
                ids.copy(), scores.copy(), np.array(bounds, dtype=np.int64), snapshot, lambda _: None
            )
    with pytest.raises(InvalidParameterError):
        _vouched_batch(
            ids.astype(np.int32), scores, np.array([0, 4], dtype=np.int64), snapshot, lambda _: None
        )


class _BatchScorer:
    """A scorer whose ``score_many`` hands back a vouched batch made for ``made_for`` (an engine scorer's)."""

    name = "batch"

    def __init__(self, made_for: Snapshot, ids: list[int], scores: list[float]) -> None:
        self.made_for, self.ids, self.scores = made_for, ids, scores

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return Stream(self.ids, self.scores)

    def score_many(self, snapshot: Snapshot, queries: list[Query], k: int) -> object:
        count = len(queries)
        ids = np.array(self.ids * count, dtype=np.int64)
        scores = np.array(self.scores * count, dtype=np.float64)
        bounds = np.arange(count + 1, dtype=np.int64) * len(self.ids)
        return _vouched_batch(ids, scores, bounds, self.made_for, lambda _: None)


def test_a_vouched_batch_is_checked_for_its_length_and_trusted_only_for_its_own_snapshot() -> None:
    index = Index("simple")
    index.add_many([Document(f"d{n}", "a b") for n in range(5)])
    snapshot = index.snapshot()
    queries = ["a", "b", "a b"]
    with pytest.raises(ScorerOutputError, match="3 candidates for depth 2"):
        index.search_many(queries, 2, RRF(), _BatchScorer(snapshot, [0, 1, 2], [3.0, 2.0, 1.0]), depth=2)
    index.add(Document("d9", "a"))
    newer = index.snapshot()
    # Made for another snapshot: checked like any stream (an id beyond the snapshot is refused) ...
    with pytest.raises(ScorerOutputError, match="outside"):
        index.search_many(queries, 3, RRF(), _BatchScorer(snapshot, [0, 60], [2.0, 1.0]))
    # ... and put in canonical order (scores ascending here), as a search of each query does.
    unordered = _BatchScorer(snapshot, [0, 1, 5], [1.0, 2.0, 3.0])
    many = index.search_many(queries, 3, RRF(), unordered)
    assert [results.keys for results in many] == [index.search(q, 3, RRF(), unordered).keys for q in queries]
    assert many[0].keys == ["d9", "d1", "d0"] and newer.n_docs == 6


def kept_set_up(snapshot: Snapshot, scorer: BM25Scorer, text: str) -> object:
    """The set-up ``score`` keeps for ``text`` on ``snapshot``, as comparable values (None: not kept)."""
    prepared = bm25_lists.prepared_queries(snapshot, scorer.k1, scorer.b, scorer._avgdl(snapshot))
    assert prepared is not None
    found = prepared.entries.get(text)
    if found is None:
        return None
    planned, terms = found
    if planned is None:
        return (None, terms)
    return (
        terms,
        list(planned.terms),
        [id(entry) for entry in planned.entries],
        planned.refs.tobytes(),
        planned.weights.tobytes(),
        (planned.matched, planned.postings, planned.lists),
        [id(held) for held in planned.held],
    )


@needs_batch
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 4),
    docs=st.integers(1, 300),
    vocabulary=st.integers(1, 20),
    deleted=st.sampled_from([0.0, 0.05, 0.5, 1.0]),
    k=st.integers(1, 60),
    params=PARAMS,
    kept_share=st.sampled_from([0, 2, 3]),
)
def test_kept_unseen_and_repeated_texts_in_one_batch_are_score_and_the_numpy_oracle(
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    k: int,
    params: tuple[float, float],
    kept_share: int,
) -> None:
    """A batch takes a text's kept set-up (made by ``score`` or an earlier batch) and keeps the others'.

    Kept and unseen texts, duplicates, empty text and texts with no known term
    mixed in one batch: every stream is the numpy oracle's and ``score``'s to
    the bit, twice (the second batch reads only kept set-ups); each set-up the
    batch kept is the one ``score`` plans for the text.
    """
    index, words = corpus(seed, segments, docs, vocabulary, deleted, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer(*params)
    texts = queries(seed, words, 12)
    if kept_share:
        for text in texts[::kept_share]:
            scorer.score(snapshot, Query(text), k)  # kept by the search
    batch = [*texts, *texts[1::2], "", "absent", "absent nowhere", texts[0]]
    for round_ in range(2):
        many = scorer.score_many(snapshot, [Query(text) for text in batch], k)
        found = [
            f"round {round_} {text!r}"
            for text, got in zip(batch, many, strict=True)
            if not same(got, scorer._score_numpy(snapshot, Query(text), k))
            or not same(got, scorer.score(snapshot, Query(text), k))
            or got.plan != scorer.score(snapshot, Query(text), k).plan
        ]
        assert found == []
    by_batch = {text: kept_set_up(snapshot, scorer, text) for text in set(batch) if text}
    assert all(value is not None for value in by_batch.values())
    prepared = bm25_lists.prepared_queries(snapshot, scorer.k1, scorer.b, scorer._avgdl(snapshot))
    assert prepared is not None
    prepared.clear()
    for text in by_batch:
        scorer.score(snapshot, Query(text), k)  # planned alone, as a search plans it
    assert {text: kept_set_up(snapshot, scorer, text) for text in by_batch} == by_batch


@needs_batch
def test_a_batch_of_texts_searched_before_analyses_and_plans_none_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 31: the texts of a repeated batch (or searched alone before) take their kept set-ups."""
    index, words = corpus(3, 2, 200, 12, 0.1, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    texts = queries(3, words, 30)
    scorer.score(snapshot, Query(texts[0]), 10)  # kept by a search
    analysed: list[list[str]] = []
    real = type(snapshot).query_terms_many

    def counting(self: Snapshot, batch: list[str]) -> list[tuple[str, ...]]:
        analysed.append(list(batch))
        return real(self, batch)

    monkeypatch.setattr(type(snapshot), "query_terms_many", counting)
    batch = [Query(text) for text in [*texts, texts[1], ""]]
    first = scorer.score_many(snapshot, batch, 10)
    assert texts[0] not in [text for call in analysed for text in call]  # kept by the search
    analysed.clear()
    again = scorer.score_many(snapshot, batch, 10)
    assert analysed == []
    assert all(same(one, other) for one, other in zip(first, again, strict=True))
