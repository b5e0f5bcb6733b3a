"""The lean search layer (issue 14 items 3 and 4): results over arrays with hits built when
read, O(k) stream checks with the re-ordering skipped for canonical streams, and batch search
(``Index.search_many``) equal to one search per query, with and without threads."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

import numpy as np
import pytest

import weftsearch.engine.search as search_module
from tests.plans import without_paths
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    Hit,
    Index,
    Query,
    SearchResults,
    SignalHit,
    Snapshot,
    Stream,
    VectorScorer,
)
from weftsearch.analysis import SimpleAnalyzer
from weftsearch.engine.search import canonical_stream, in_canonical_order
from weftsearch.engine.snapshot import QUERY_TERMS_ENTRIES, QUERY_TERMS_MAX_TEXT, QueryTerms
from weftsearch.engine.stream import order_by_score
from weftsearch.errors import InvalidParameterError, InvalidQueryError, ScorerOutputError

WORDS = ["graph", "retrieval", "sparse", "dense", "vector", "bm25", "time", "decay", "cite", "link"]


def corpus(n: int, seed: int, key_prefix: str = "doc") -> list[Document]:
    """Documents over a ten-word vocabulary (so many exact score ties) with 4-d vectors."""
    rng = np.random.default_rng(seed)
    documents = []
    for position in range(n):
        length = int(rng.integers(1, 6))
        text = " ".join(rng.choice(WORDS, size=length).tolist())
        vector = rng.integers(-2, 3, size=4).astype(np.float32)  # small integers: ties in cosine too
        if not vector.any():
            vector[0] = 1.0
        documents.append(
            Document(f"{key_prefix}-{position:04d}", text, vector=vector, fields={"n": position})
        )
    return documents


def segmented_index(segments: int, per_segment: int = 40, seed: int = 7) -> Index:
    """An in-memory index of ``segments`` committed segments, keys interleaved across them."""
    index = Index(analyzer="simple")
    documents = corpus(segments * per_segment, seed)
    for start in range(segments):
        index.add_many(documents[start::segments])  # each segment spans the whole key range
        index.snapshot()  # seals the buffered documents into an in-memory segment
    assert len(index.snapshot().parts) == segments
    return index


def queries(n: int, seed: int) -> list[Query]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))).tolist())
        vector = rng.normal(size=4).astype(np.float32)
        out.append(Query(text=text, vector=vector))
    return out


# ---------------------------------------------------------------- results built when read


def test_a_search_builds_no_hit_until_one_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys, scores and the explain arrays come without a single Hit or SignalHit object."""
    built: list[str] = []

    class CountingHit(Hit):
        __slots__ = ()

        def __init__(self, *args: object, **kwargs: object) -> None:
            built.append("hit")
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    class CountingSignalHit(SignalHit):
        __slots__ = ()

        def __init__(self, *args: object, **kwargs: object) -> None:
            built.append("signal")
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    fields_calls: list[int] = []
    real_fields_of = Snapshot.fields_of

    def counting_fields_of(self: Snapshot, ids: np.ndarray) -> object:
        fields_calls.append(len(ids))
        return real_fields_of(self, ids)

    monkeypatch.setattr(search_module, "Hit", CountingHit)
    monkeypatch.setattr(search_module, "SignalHit", CountingSignalHit)
    monkeypatch.setattr(Snapshot, "fields_of", counting_fields_of)
    index = segmented_index(2)
    results = index.search(queries(1, 3)[0], 10, RRF(), BM25Scorer(), VectorScorer())
    assert len(results) == 10
    assert len(results.keys) == 10
    assert results.scores.shape == (10,)
    explained = results.explain_arrays()
    assert explained.ranks.shape == (10, 2)
    assert built == [] and fields_calls == []
    first = results[0]
    assert built == ["signal", "signal", "hit"]  # one hit, not ten
    assert fields_calls == [10]  # every hit's (lazy) fields in one O(k) call
    assert results[0] is first  # kept once built
    assert len(list(results)) == 10
    assert built.count("hit") == 10 and fields_calls == [10]


def test_the_arrays_say_what_the_hits_say() -> None:
    index = segmented_index(3)
    for query in queries(20, 11):
        results = index.search(query, 15, RRF(), BM25Scorer(), VectorScorer(), depth=30)
        explained = results.explain_arrays()
        assert explained.signals == results.signals == ("bm25", "vector")
        assert results.keys == [hit.key for hit in results.hits]
        assert results.scores.tolist() == [hit.score for hit in results]
        assert results.score_array.tolist() == results.scores.tolist()
        assert not results.score_array.flags.writeable and not explained.ranks.flags.writeable
        for row, hit in enumerate(results):
            assert hit.rank == row + 1
            assert hit.fields == {"n": int(hit.key.split("-")[1])}
            for column, signal in enumerate(hit.signals):
                assert signal.rank == (int(explained.ranks[row, column]) or None)
                if signal.score is None:
                    assert np.isnan(explained.scores[row, column])
                else:
                    assert signal.score == explained.scores[row, column]
                assert signal.contribution == explained.contributions[row, column]


def test_results_built_from_hits_keep_the_old_constructor() -> None:
    index = segmented_index(2)
    lazy = index.search(queries(1, 5)[0], 8, RRF(), BM25Scorer(), VectorScorer())
    eager = SearchResults(
        list(lazy),
        lazy.signals,
        lazy.fuser,
        lazy.generation,
        lazy.depth,
        plans=list(lazy.plans.values()),
        cut_short=lazy.cut_short,
    )
    assert eager.to_dict() == lazy.to_dict()
    bare = SearchResults(list(lazy), lazy.signals, lazy.fuser, lazy.generation, lazy.depth)
    assert bare.plans == {"bm25": None, "vector": None} and bare.cut_short == ()
    assert eager.keys == lazy.keys and eager.scores.tolist() == lazy.scores.tolist()
    for name in ("ranks", "contributions"):
        assert np.array_equal(getattr(eager.explain_arrays(), name), getattr(lazy.explain_arrays(), name))
    assert np.array_equal(eager.explain_arrays().scores, lazy.explain_arrays().scores, equal_nan=True)
    assert list(eager) == list(lazy) and eager.hits == lazy.hits


def test_indexing_behaves_as_a_tuple() -> None:
    index = segmented_index(1)
    results = index.search("graph retrieval", 5, RRF(), BM25Scorer())
    hits = tuple(results)
    assert results[-1] == hits[-1] and results[1:3] == hits[1:3] and results[::-1] == hits[::-1]
    with pytest.raises(IndexError):
        results[len(hits)]
    with pytest.raises(IndexError):
        results[-len(hits) - 1]


def read_into(results: SearchResults, seen: list[dict[str, object]]) -> None:
    seen.append(results.to_dict())


def test_reading_hits_from_many_threads_gives_equal_hits() -> None:
    index = segmented_index(2)
    reference = index.search("graph vector", 20, RRF(), BM25Scorer(), VectorScorer()).to_dict()
    for _ in range(5):
        results = index.search("graph vector", 20, RRF(), BM25Scorer(), VectorScorer())
        seen: list[dict[str, object]] = []
        workers = [threading.Thread(target=read_into, args=(results, seen)) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert seen == [reference] * 4


# ---------------------------------------------------------------- stream checks and canonical order


class GivenStream:
    """A user scorer returning a stream built by the test."""

    name = "given"

    def __init__(self, make: object) -> None:
        self.make = make

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return self.make(snapshot)  # type: ignore[operator, no-any-return]


def test_a_canonical_stream_is_not_re_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    index = segmented_index(3)
    snapshot = index.snapshot()
    scores = np.array([5.0, 4.0, 4.0, 4.0, 1.0, 1.0, -2.0])
    ids = np.array([9, 30, 2, 71, 15, 3, 40], dtype=np.int64)
    order = order_by_score(ids, scores, snapshot)
    canonical = Stream(ids[order], scores[order])
    sorts: list[int] = []

    def counting_sort(*args: object) -> object:
        sorts.append(1)
        return order_by_score(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(search_module, "order_by_score", counting_sort)
    assert canonical_stream(canonical, snapshot, 10, "user") is canonical
    assert sorts == []
    ranked = Stream.ranked(ids, scores, 7, snapshot)
    assert ranked.ranked_for(snapshot)
    assert not Stream(ranked.ids, ranked.scores).ranked_for(snapshot)  # only Stream.ranked sets the mark
    assert not ranked.head(3).ranked_for(snapshot)
    assert canonical_stream(ranked, snapshot, 10, "engine") is ranked
    assert ranked.ids.tolist() == canonical.ids.tolist()
    # Not canonical: re-sorted, exactly as before.
    shuffled = Stream(ids, scores)
    fixed = canonical_stream(shuffled, snapshot, 10, "user")
    assert sorts == [1]
    assert fixed.ids.tolist() == canonical.ids.tolist() and fixed.scores.tolist() == canonical.scores.tolist()


def test_a_stream_ranked_for_another_snapshot_is_checked_not_trusted() -> None:
    index = segmented_index(2)
    old = index.snapshot()
    ids = np.arange(10, dtype=np.int64)
    ranked = Stream.ranked(ids, np.zeros(10), 10, old)
    index.add(Document("aaa-first", "graph"))  # a new snapshot: ids and keys move
    new = index.snapshot()
    assert not ranked.ranked_for(new)
    checked = canonical_stream(ranked, new, 10, "stale")
    expected = order_by_score(ids, np.zeros(10), new)
    assert checked.ids.tolist() == ids[expected].tolist()


@pytest.mark.parametrize("segments", [1, 3])
def test_the_order_check_agrees_with_the_sort(segments: int) -> None:
    """Random streams with many ties: the O(k) check says canonical exactly when sorting changes nothing."""
    snapshot = segmented_index(segments).snapshot()
    rng = np.random.default_rng(segments)
    for _ in range(400):
        size = int(rng.integers(0, 12))
        ids = rng.choice(snapshot.n_docs, size=size, replace=False).astype(np.int64)
        scores = rng.integers(0, 3, size=size).astype(np.float64)
        if rng.random() < 0.5:  # often already sorted, to exercise the "yes" answer
            order = order_by_score(ids, scores, snapshot)
            ids, scores = ids[order], scores[order]
        sorted_order = order_by_score(ids, scores, snapshot)
        assert in_canonical_order(ids, scores, snapshot) == bool((sorted_order == np.arange(size)).all())
        out = canonical_stream(Stream(ids, scores), snapshot, 20, "random")
        assert out.ids.tolist() == ids[sorted_order].tolist()


@pytest.mark.parametrize(
    ("ids", "scores", "message"),
    [
        ([0, 1, 0], [3.0, 2.0, 1.0], "same document twice"),
        ([0, 1, 2], [3.0, 1.0, 2.0], None),  # out of order: fixed, not refused
        ([0, 1, 999], [3.0, 2.0, 1.0], "outside"),
        ([0, -1], [3.0, 2.0], "outside"),
        ([0, 1], [np.nan, 2.0], "NaN"),
    ],
)
def test_user_streams_are_still_checked(ids: list[int], scores: list[float], message: str | None) -> None:
    index = segmented_index(1)
    scorer = GivenStream(lambda snapshot: Stream(np.array(ids), np.array(scores)))
    if message is None:
        assert index.search("x", 3, RRF(), scorer).scores.tolist() == sorted(scores, reverse=True)
        return
    with pytest.raises(ScorerOutputError, match=message):
        index.search("x", 3, RRF(), scorer)


def test_damaged_records_still_leave_the_hits() -> None:
    """The per-hit record check stays (O(k)): a damaged hit is left out, the rest keep their ranks."""
    index = segmented_index(1)
    snapshot = index.snapshot()
    results = index.search("graph", 5, RRF(), BM25Scorer())
    victim = snapshot.id_of(results.keys[1])
    [part] = snapshot.parts
    victim_local = int(part.live_locals[victim])
    # The record verdicts come from the segment reader (what both Snapshot.damaged and
    # the search's key lookups read): flag the victim's record there, as the reader's first
    # check of a damaged record does (verdict 2).
    verdicts = part.reader.key_views()[0]
    assert verdicts[victim_local] == 1  # checked sound by the first search
    verdicts[victim_local] = 2
    try:
        again = index.search("graph", 5, RRF(), BM25Scorer())
        assert bool(snapshot.damaged(np.array([victim]))[0])
    finally:
        verdicts[victim_local] = 1
    assert again.keys == results.keys[:1] + results.keys[2:]
    assert again.explain_arrays().ranks[:, 0].tolist() == [1, 3, 4, 5]
    assert [hit.rank for hit in again] == [1, 2, 3, 4]


# ---------------------------------------------------------------- batch search


@pytest.mark.parametrize("segments", [1, 3])
@pytest.mark.parametrize("threads", [None, 1, 4])
def test_search_many_equals_one_search_per_query(segments: int, threads: int | None) -> None:
    index = segmented_index(segments)
    batch: list[Query | str] = [*queries(300, 21), "graph retrieval", "nothing-matches"]
    for scorers in ([BM25Scorer()], [BM25Scorer(), VectorScorer()]):
        many = index.search_many(batch, 10, RRF(), *scorers, depth=25, threads=threads)
        assert len(many) == len(batch)
        for query, results in zip(batch, many, strict=True):
            alone = index.search(query, 10, RRF(), *scorers, depth=25)
            assert without_paths(results.to_dict()) == without_paths(alone.to_dict())  # batch: maybe compiled


class BatchScorer:
    """A user scorer offering the optional ``score_many``; counts how it is called."""

    name = "batch"

    def __init__(self) -> None:
        self.inner = BM25Scorer()
        self.batches: list[int] = []
        self.singles = 0

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.singles += 1
        return self.inner.score(snapshot, query, k)

    def score_many(self, snapshot: Snapshot, queries: Sequence[Query], k: int) -> list[Stream]:
        self.batches.append(len(queries))
        return [self.inner.score(snapshot, query, k) for query in queries]


def test_search_many_uses_score_many_when_a_scorer_offers_it() -> None:
    index = segmented_index(2)
    scorer = BatchScorer()
    batch = queries(150, 2)
    many = index.search_many(batch, 5, RRF(), scorer, threads=2)
    assert scorer.singles == 0 and sum(scorer.batches) == 150 and len(scorer.batches) > 1
    plain = index.search_many(batch, 5, RRF(), BM25Scorer())
    assert [r.keys for r in many] == [r.keys for r in plain]


def test_search_many_hands_bm25_its_threads_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31 item 2: threads were a Python pool over chunks of 64; BM25 now gets them, in one call."""
    calls: list[tuple[int, int]] = []
    real = BM25Scorer.score_many

    def spying(
        self: BM25Scorer, snapshot: Snapshot, batch: Sequence[Query], k: int, threads: int = 1
    ) -> object:
        calls.append((len(batch), threads))
        return real(self, snapshot, batch, k, threads)

    monkeypatch.setattr(BM25Scorer, "score_many", spying)
    index = segmented_index(3)
    batch = queries(150, 5)
    many = index.search_many(batch, 5, RRF(), BM25Scorer(), threads=3)
    assert calls == [(150, 3)]
    for query, results in zip(batch, many, strict=True):
        alone = index.search(query, 5, RRF(), BM25Scorer())
        assert without_paths(results.to_dict()) == without_paths(alone.to_dict())


def test_a_wrong_score_many_is_refused() -> None:
    class Short(BatchScorer):
        def score_many(self, snapshot: Snapshot, queries: Sequence[Query], k: int) -> list[Stream]:
            return super().score_many(snapshot, queries, k)[:-1]

    index = segmented_index(1)
    with pytest.raises(ScorerOutputError, match="score_many returned list of 1 streams for 2 queries"):
        index.search_many(["graph", "time"], 5, RRF(), Short())


def test_search_many_refuses_bad_input_before_searching() -> None:
    index = segmented_index(1)
    scorer = BatchScorer()
    with pytest.raises(InvalidQueryError, match=r"queries\[1\]"):
        index.search_many(["graph", 7], 5, RRF(), scorer)  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError, match="sequence"):
        index.search_many("graph", 5, RRF(), scorer)
    for threads in (0, -1, True, 2.0, 10_000):
        with pytest.raises(InvalidParameterError, match="threads"):
            index.search_many(["graph"], 5, RRF(), scorer, threads=threads)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        index.search_many(["graph"], 0, RRF(), scorer)
    assert scorer.batches == [] and scorer.singles == 0
    assert index.search_many([], 5, RRF(), scorer) == []


def test_search_many_counts_as_a_search_in_flight() -> None:
    index = segmented_index(1)
    seen: list[bool] = []
    index.search_many(["graph", "time"], 5, RRF(), _Plain(seen, index))
    assert seen == [True, True]
    assert not index._searches


class _Plain:
    """A scorer without ``score_many`` that records whether a search is in flight."""

    name = "plain"

    def __init__(self, seen: list[bool], index: Index) -> None:
        self.seen = seen
        self.index = index

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.seen.append(bool(self.index._searches))
        return BM25Scorer().score(snapshot, query, k)


def test_search_many_reads_one_snapshot() -> None:
    index = segmented_index(1)
    generations = {
        results.generation
        for results in index.search_many(queries(100, 1), 5, RRF(), BM25Scorer(), threads=3)
    }
    assert generations == {index.snapshot().generation}


# ---------------------------------------------------------------- query analysis cache


class CountingAnalyzer:
    """The simple analyzer, counting the texts it analyses."""

    name = "simple"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def analyze(self, text: str) -> list[str]:
        self.texts.append(text)
        return SimpleAnalyzer().analyze(text)


def test_a_query_text_is_analysed_once_across_searches_and_snapshots() -> None:
    analyzer = CountingAnalyzer()
    index = Index(analyzer=analyzer)
    index.add_many(corpus(30, 1))
    first = index.search("Graph Retrieval", 5, RRF(), BM25Scorer()).to_dict()
    assert index.search("Graph Retrieval", 5, RRF(), BM25Scorer()).to_dict() == first
    index.add(Document("zzz-new", "graph graph retrieval"))  # a new snapshot, the same analyzer
    assert "zzz-new" in index.search("Graph Retrieval", 5, RRF(), BM25Scorer()).keys
    index.search_many(["Graph Retrieval"] * 50, 5, RRF(), BM25Scorer(), threads=2)
    assert analyzer.texts.count("Graph Retrieval") == 1


def test_query_terms_are_the_analyzers_and_the_cache_is_bounded() -> None:
    analyzer = CountingAnalyzer()
    terms = QueryTerms(analyzer, entries=4)
    got = terms("Dense Vectors, dense!")
    assert got == SimpleAnalyzer().analyze("Dense Vectors, dense!")
    got.append("mutated")  # each call hands out a new list
    assert terms("Dense Vectors, dense!") == ["dense", "vectors", "dense"]
    for number in range(10):
        terms(f"text {number}")
    assert terms.cached() == 4  # least recently used texts dropped
    assert terms("Dense Vectors, dense!") == ["dense", "vectors", "dense"]
    assert analyzer.texts.count("Dense Vectors, dense!") == 2  # evicted, analysed again
    long_text = "word " * (QUERY_TERMS_MAX_TEXT // 5 + 1)
    terms(long_text)
    terms(long_text)
    assert analyzer.texts.count(long_text) == 2  # never cached: the bound holds in memory too
    assert QUERY_TERMS_ENTRIES > 0


def test_query_terms_many_are_query_terms_of_each_text_through_the_same_cache() -> None:
    analyzer = CountingAnalyzer()
    terms = QueryTerms(analyzer, entries=4)
    long_text = "word " * (QUERY_TERMS_MAX_TEXT // 5 + 1)
    texts = ["Dense Vectors, dense!", "", "graph", long_text, "Dense Vectors, dense!"]
    assert terms.many(texts) == [tuple(terms(text)) for text in texts]
    assert analyzer.texts.count("Dense Vectors, dense!") == 1  # cached, whichever call came first
    assert analyzer.texts.count(long_text) == 2  # never cached, as one text at a time
    index = Index(analyzer="simple")
    index.add_many(corpus(10, 2))
    snapshot = index.snapshot()
    assert snapshot.query_terms_many(texts[:3]) == [tuple(snapshot.query_terms(text)) for text in texts[:3]]


def test_a_copied_ranked_stream_is_a_plain_stream() -> None:
    import copy
    import pickle

    snapshot = segmented_index(1).snapshot()
    ranked = Stream.ranked(np.arange(5, dtype=np.int64), np.arange(5, dtype=np.float64), 3, snapshot)
    assert repr(ranked).startswith("Stream(ids=array([4, 3, 2])")
    for clone in (copy.copy(ranked), pickle.loads(pickle.dumps(ranked))):
        assert type(clone) is Stream and not clone.ranked_for(snapshot)
        assert clone.ids.tolist() == [4, 3, 2] and clone.scores.tolist() == [4.0, 3.0, 2.0]


@pytest.mark.parametrize("segments", [1, 3])
def test_sound_keys_is_damaged_then_keys_of(segments: int) -> None:
    """The one-pass key lookup of a search equals Snapshot.damaged then Snapshot.keys_of, damage or not."""
    index = segmented_index(segments, per_segment=120)
    index.delete_many(index.keys()[::5])
    snapshot = index.snapshot()
    rng = np.random.default_rng(segments)
    victims = set(rng.choice(snapshot.n_docs, size=6, replace=False).tolist())
    # Each victim's record flagged damaged in its reader's verdicts (what a reader's first
    # check of a damaged record records, and every key lookup of a search reads).
    flagged = [
        (part.reader.key_views()[0], int(part.live_locals[doc - part.base]))
        for part in snapshot.parts
        for doc in victims
        if part.base <= doc < part.base + part.n_live
    ]

    for size in (0, 1, 7, 40, snapshot.n_docs):  # one by one, the Python grouping and the numpy one
        ids = rng.choice(snapshot.n_docs, size=min(size, snapshot.n_docs), replace=False).astype(np.int64)
        keep, keys = snapshot.sound_keys(ids)
        assert keep is None and keys == snapshot.keys_of(ids)
        ids = np.concatenate([ids[: max(size - 1, 0)], np.array(sorted(victims)[:1], dtype=np.int64)])
        ids = np.unique(ids)
        snapshot.sound_keys(ids)  # every verdict known (sound) before the damage
        for verdicts, local in flagged:
            verdicts[local] = 2
        try:
            keep, keys = snapshot.sound_keys(ids)
            damaged = snapshot.damaged(ids)
        finally:
            for verdicts, local in flagged:
                verdicts[local] = 1
        assert damaged.tolist() == [int(doc) in victims for doc in ids.tolist()]
        if not damaged.any():
            assert keep is None and keys == snapshot.keys_of(ids)
        else:
            assert keep is not None and keep.tolist() == (~damaged).tolist()
            assert keys == snapshot.keys_of(ids[~damaged])


# ---------------------------------------------------------------- searching a given snapshot


def test_search_reads_the_snapshot_it_is_given_and_counts_in_flight() -> None:
    # A caller that reads documents after the search (the LangChain retriever) needs the
    # search to have read the same snapshot, and the search to count as one in flight.
    index = Index()
    index.add_many([Document("a", "graph retrieval"), Document("b", "graph")])
    before = index.snapshot()
    index.add(Document("c", "graph graph graph"))
    seen: list[bool] = []
    given = index.search("graph", 5, RRF(), _Plain(seen, index), snapshot=before)
    assert sorted(given.keys) == ["a", "b"] and seen == [True]
    assert index.search("graph", 5, RRF(), BM25Scorer()).keys[0] == "c"  # the current one has c
    assert not index._searches


def test_search_refuses_a_snapshot_of_another_index_or_not_a_snapshot() -> None:
    index = Index()
    index.add(Document("a", "graph"))
    other = Index()
    other.add(Document("z", "graph"))
    with pytest.raises(InvalidParameterError, match="a snapshot of another index"):
        index.search("graph", 5, RRF(), BM25Scorer(), snapshot=other.snapshot())
    with pytest.raises(InvalidParameterError, match="got str"):
        index.search("graph", 5, RRF(), BM25Scorer(), snapshot="latest")  # type: ignore[arg-type]
    assert not index._searches


@pytest.mark.parametrize("segments", [1, 3])
@pytest.mark.parametrize("k", [1, 7, 200])
def test_one_stream_passed_through_reads_as_the_general_results(segments: int, k: int) -> None:
    # The common search's own constructor (SearchResults._passed_through) against the general one
    # (_from_arrays, which a search with a damaged hit or several streams takes).
    index = segmented_index(segments)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    for text in ["graph retrieval", "sparse", "decay cite link"]:
        results = index.search(text, k, RRF(), scorer)
        stream = canonical_stream(scorer.score(snapshot, Query(text), k), snapshot, k, "bm25")
        fused = search_module.fuse_candidates(RRF(), [stream], k, snapshot)
        count = fused.ids.shape[0]
        column = fused.scores.reshape(-1, 1)
        general = SearchResults._from_arrays(
            keys=snapshot.keys_of(fused.ids),
            scores=fused.scores,
            ranks=np.arange(1, count + 1, dtype=np.int64).reshape(-1, 1),
            signal_scores=column,
            contributions=column,
            fields=functools.partial(snapshot.fields_of, fused.ids),
            signals=["bm25"],
            fuser=results.fuser,
            generation=snapshot.generation,
            depth=k,
            streams=[stream],
        )
        assert results.keys == general.keys and len(results) == len(general) == count
        assert results.score_array.tobytes() == general.score_array.tobytes()
        assert (results.signals, results.fuser, results.depth, results.cut_short, results.offset) == (
            general.signals,
            general.fuser,
            general.depth,
            general.cut_short,
            general.offset,
        )
        assert without_paths(results.plans) == without_paths(general.plans)
        mine, theirs = results.explain_arrays(), general.explain_arrays()
        for name in ("ranks", "scores", "contributions"):
            assert getattr(mine, name).tobytes() == getattr(theirs, name).tobytes()
            assert not getattr(mine, name).flags.writeable
        assert not results.score_array.flags.writeable
        assert [hit.to_dict() for hit in results] == [hit.to_dict() for hit in general]
        assert results.to_dict() == general.to_dict()
