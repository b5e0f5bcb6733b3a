"""Filtered search: every built-in scorer applies the filter before its top k.

The oracle: the scorer's exhaustive ranking of the whole snapshot (k = every
document), filtered afterwards with the same mask, then cut to k. A pre-filtering
scorer must return exactly that (ids, scores to the bit, order), so a search
returns ``min(k, matching documents)`` results whenever the scorer has evidence
for that many.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weftsearch.scorers.bm25 as bm25_module
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    GraphScorer,
    Index,
    PageRankScorer,
    Query,
    RecencyScorer,
    Stream,
    VectorScorer,
)
from weftsearch.engine.filters import F, parse_filter
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import FilterSyntaxError, FilterTypeError, ScorerOutputError, UnknownFieldError
from weftsearch.native import bm25 as kernel

WORDS = ["alpha", "beta", "gamma", "delta", "eps"]
SOURCES = ["a", "b", "c"]


def corpus(seed: int, n: int) -> list[Document]:
    rng = np.random.default_rng(seed)
    documents = []
    for i in range(n):
        fields: dict[str, Any] = {}
        if rng.random() < 0.8:
            fields["year"] = int(rng.integers(1990, 1996))
        if rng.random() < 0.9:
            fields["source"] = SOURCES[int(rng.integers(0, 3))]
        if rng.random() < 0.5:
            fields["open"] = bool(rng.random() < 0.5)
        text = " ".join(WORDS[int(w)] for w in rng.integers(0, len(WORDS), int(rng.integers(1, 6))))
        vector = rng.integers(-2, 3, 4).astype(np.float32)  # small integers: many exact ties
        links = tuple(f"d{int(t):03d}" for t in rng.integers(0, n, int(rng.integers(0, 3))))
        time = None if rng.random() < 0.2 else float(rng.integers(0, 5)) * 86400.0
        if rng.random() < 0.7:  # a list field (issue 30), sometimes empty
            fields["tags"] = [SOURCES[int(t)] for t in rng.integers(0, 3, int(rng.integers(0, 3)))]
        documents.append(Document(f"d{i:03d}", text, vector=vector, links=links, time=time, fields=fields))
    return documents


def build(tmp_path: Path, seed: int, n: int, segments: int, deletes: int) -> Index:
    """An in-memory index: each slice of documents sealed into its own segment."""
    index = Index("english", vector_dim=4)
    documents = corpus(seed, n)
    step = max(1, math.ceil(n / segments))
    for start in range(0, n, step):
        index.add_many(documents[start : start + step], progress=False)
        index.snapshot()  # seals the slice into a segment
    rng = np.random.default_rng(seed + 1)
    for position in rng.choice(n, size=min(deletes, n), replace=False).tolist():
        index.delete(f"d{position:03d}")
    return index


FILTERS = [
    "year >= 1992",
    "source == 'a'",
    "source in ('a', 'c') and not open == true",
    "exists(open) or year < 1991",
    "@time >= 86400 and year != 1993",
    "not exists(year)",
    "year == 1990 and source == 'zzz'",  # matches nothing
    "tags contains 'a'",
    "tags contains all ('a', 'b') or year == 1991",
    "not tags contains any ('b', 'c')",
]

SCORERS: dict[str, Callable[[], Any]] = {
    "bm25": lambda: BM25Scorer(),
    "bm25-compiled": lambda: BM25Scorer(),  # the compiled kernel forced on (see the test)
    "vector-exact": lambda: VectorScorer(nprobe=None),
    "vector-ivf": lambda: VectorScorer(nprobe=1),
    "recency": lambda: RecencyScorer(half_life=86400.0),
    "graph": lambda: GraphScorer(seed_scorer=BM25Scorer(), seed_n=5),
    "pagerank": lambda: PageRankScorer(seed_scorer=BM25Scorer(), seed_n=5),
}


def oracle(scorer: Any, snapshot: Snapshot, query: Query, mask: np.ndarray, k: int) -> Stream:
    """The exhaustive ranking without the filter, filtered afterwards, cut to k."""
    unfiltered = Query(text=query.text, vector=query.vector, seeds=query.seeds, time=query.time)
    full = scorer.score(snapshot, unfiltered, max(snapshot.n_docs, 1))
    keep = mask[full.ids]
    return Stream(full.ids[keep][:k], full.scores[keep][:k])


def query_for(rng: np.random.Generator, text_words: int) -> Query:
    text = " ".join(WORDS[int(w)] for w in rng.integers(0, len(WORDS), text_words))
    return Query(text=text, vector=rng.integers(-2, 3, 4).astype(np.float32))


@pytest.mark.parametrize("scorer_name", list(SCORERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 60),
    segments=st.integers(1, 3),
    deletes=st.integers(0, 5),
    filter_text=st.sampled_from(FILTERS),
    k=st.integers(1, 25),
)
def test_filtered_scorer_equals_the_filtered_exhaustive_ranking(
    tmp_path: Path, scorer_name: str, seed: int, n: int, segments: int, deletes: int, filter_text: str, k: int
) -> None:
    index = build(tmp_path, seed, n, segments, deletes)
    snapshot = index.snapshot()
    scorer = SCORERS[scorer_name]()
    compiled = kernel.compiled_bm25()
    if scorer_name == "bm25-compiled":
        if compiled is None:
            pytest.skip("the compiled BM25 kernel is not built")
        filtered_query = Query(text=query_for(np.random.default_rng(seed), 3).text, filter=filter_text)
        try:
            mask = snapshot.filter_mask(filter_text)
        except UnknownFieldError:
            return
        assert mask is not None
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)
            got = scorer.score(snapshot, filtered_query, k)
            batch = scorer.score_many(snapshot, [filtered_query, Query(filtered_query.text)], k)
        want = oracle(scorer, snapshot, Query(filtered_query.text), mask, k)
        assert got.ids.tolist() == want.ids.tolist()
        assert got.scores.tobytes() == want.scores.tobytes()
        assert batch[0].ids.tolist() == want.ids.tolist()
        return
    query = query_for(np.random.default_rng(seed), 3)
    filtered = Query(text=query.text, vector=query.vector, filter=filter_text)
    try:
        mask = snapshot.filter_mask(filter_text)
    except UnknownFieldError:
        return  # a random corpus may lack a field: refused, as it must be
    assert mask is not None
    got = scorer.score(snapshot, filtered, k)
    want = oracle(scorer, snapshot, query, mask, k)
    if scorer_name == "vector-ivf":
        # Approximate: only what was probed is found, but every result matches the
        # filter, scores are exact, and never fewer than k where k rows match.
        assert bool(mask[got.ids].all())
        matching_rows = int(np.count_nonzero(mask[want_universe(scorer, snapshot, query)]))
        assert len(got) == min(k, matching_rows)
        return
    assert got.ids.tolist() == want.ids.tolist()
    assert got.scores.tobytes() == want.scores.tobytes()
    index.close()


def want_universe(scorer: Any, snapshot: Snapshot, query: Query) -> np.ndarray:
    exact = VectorScorer(nprobe=None).score(snapshot, Query(vector=query.vector), max(snapshot.n_docs, 1))
    return exact.ids


def test_filtered_search_returns_k_when_k_match(tmp_path: Path) -> None:
    index = build(tmp_path, 7, 200, 3, 10)
    snapshot = index.snapshot()
    mask = snapshot.filter_mask("source == 'b'")
    assert mask is not None
    matching = int(mask.sum())
    assert matching > 10
    for k in (1, 5, 10, matching, matching + 5):
        results = index.search(
            Query(vector=np.ones(4, np.float32), filter="source == 'b'"), k, RRF(), VectorScorer(nprobe=None)
        )
        assert len(results) == min(k, matching)
        assert all(hit.fields["source"] == "b" for hit in results)


def test_hybrid_search_with_a_filter_fuses_filtered_streams(tmp_path: Path) -> None:
    index = build(tmp_path, 3, 120, 2, 4)
    query = Query(text="alpha beta", vector=np.ones(4, np.float32), filter=F("year") >= 1993)
    results = index.search(query, 10, RRF(), BM25Scorer(), VectorScorer())
    assert len(results) == 10
    assert all(cast(int, hit.fields.get("year", 0)) >= 1993 for hit in results)
    batch = index.search_many([query, query], 10, RRF(), BM25Scorer(), VectorScorer())
    assert [r.keys for r in batch] == [results.keys, results.keys]


def test_bad_filters_are_refused_before_scoring(tmp_path: Path) -> None:
    index = build(tmp_path, 1, 30, 1, 0)
    with pytest.raises(UnknownFieldError, match=r"'yera'.*did you mean 'year'"):
        index.search(Query(text="alpha", filter="yera > 1990"), 5, RRF(), BM25Scorer())
    with pytest.raises(FilterTypeError, match="'source'"):
        index.search(Query(text="alpha", filter="source > 3"), 5, RRF(), BM25Scorer())
    with pytest.raises(FilterSyntaxError, match="character"):
        Query(text="alpha", filter="year >")
    with pytest.raises(UnknownFieldError):
        index.search_many(
            [Query(text="alpha"), Query(text="beta", filter="nope == 1")], 5, RRF(), BM25Scorer()
        )


class IgnoresTheFilter:
    """A user scorer that forgets the filter: the engine must say so."""

    name = "careless"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        ids = np.arange(min(k, snapshot.n_docs), dtype=np.int64)
        return Stream(ids, np.ones(ids.shape[0]))


def test_the_engine_checks_that_custom_scorers_respect_the_filter(tmp_path: Path) -> None:
    index = build(tmp_path, 5, 40, 1, 0)
    with pytest.raises(ScorerOutputError, match=r"'careless'.*filter excludes"):
        index.search(Query(text="alpha", filter="source == 'a'"), 40, RRF(), IgnoresTheFilter())


def test_filter_masks_are_cached_and_bounded(tmp_path: Path) -> None:
    from weftsearch.engine.snapshot import FILTER_MASKS

    index = build(tmp_path, 2, 30, 1, 0)
    snapshot = index.snapshot()
    first = snapshot.filter_mask("year >= 1991")
    assert snapshot.filter_mask(parse_filter("year >= 1991")) is first
    assert first is not None and not first.flags.writeable
    for year in range(FILTER_MASKS + 5):
        snapshot.filter_mask(F("year") >= 1000 + year)
    assert len(snapshot._filter_masks) == FILTER_MASKS
    assert snapshot.filter_mask("year >= 1991") is not first  # evicted, recomputed equal
    assert np.array_equal(snapshot.filter_mask("year >= 1991"), first)  # type: ignore[arg-type]


def test_ivf_probing_continues_past_nprobe_until_k_matching_rows() -> None:
    from weftsearch.storage.ivf import IVF_MIN_VECTORS

    rng = np.random.default_rng(11)
    n = IVF_MIN_VECTORS + 400
    centres = rng.normal(size=(40, 8)).astype(np.float32)
    vectors = centres[rng.integers(0, 40, n)] + 0.1 * rng.normal(size=(n, 8)).astype(np.float32)
    shares = {"rare": 0.005, "some": 0.05, "half": 0.5}
    draws = rng.random(n)
    documents = []
    for i in range(n):
        tags = {name: bool(draws[i] < share) for name, share in shares.items()}
        documents.append(Document(f"d{i:05d}", "x", vector=vectors[i], fields=tags))
    index = Index("english", vector_dim=8)
    index.add_many(documents, progress=False)
    snapshot = index.snapshot()
    assert snapshot.vector_blocks()[0].centroids is not None, "the test needs a partitioned segment"
    for name in shares:
        query = Query(vector=rng.normal(size=8).astype(np.float32), filter=f"{name} == true")
        mask = snapshot.filter_mask(query.filter)
        assert mask is not None
        exact = VectorScorer(nprobe=None).score(snapshot, query, 10)
        for nprobe in (1, 3, 20):
            got = VectorScorer(nprobe=nprobe).score(snapshot, query, 10)
            assert len(got) == min(10, int(mask.sum())), (name, nprobe)
            assert bool(mask[got.ids].all())
            # Scores are exact cosines: a document both found has one score.
            _, in_got, in_exact = np.intersect1d(got.ids, exact.ids, return_indices=True)
            assert got.scores[in_got].tobytes() == exact.scores[in_exact].tobytes()
        # The selective filters are scanned exactly (recall 1).
        if name == "rare":
            assert VectorScorer(nprobe=1).score(snapshot, query, 10).ids.tolist() == exact.ids.tolist()


def test_a_fields_type_is_fixed_by_its_first_document(tmp_path: Path) -> None:
    from weftsearch.errors import FieldTypeError

    index = Index.create(tmp_path / "typed", "english")
    index.add(Document("a", "x", fields={"year": 1990, "lang": "en"}))
    with pytest.raises(FieldTypeError, match="document 'b': field 'year' holds number values"):
        index.add(Document("b", "x", fields={"year": "1991"}))
    with pytest.raises(FieldTypeError, match="'lang' holds keyword values"):
        index.add_many([Document("c", "x", fields={"lang": "de"}), Document("d", "x", fields={"lang": True})])
    assert "c" not in index  # the refused batch added nothing
    with pytest.raises(FieldTypeError, match="2\\*\\*53"):
        index.add(Document("e", "x", fields={"id": 2**60}))
    index.add(Document("f", "x", fields={"year": 1991.5, "open": False}))
    index.commit()
    assert index.field_kinds() == {"lang": "keyword", "open": "boolean", "year": "number"}
    index.close()
    reopened = Index.open(tmp_path / "typed")
    assert reopened.field_kinds() == {"lang": "keyword", "open": "boolean", "year": "number"}
    with pytest.raises(FieldTypeError, match="'open' holds boolean values"):
        reopened.add(Document("g", "x", fields={"open": 1}))
    reopened.close()
