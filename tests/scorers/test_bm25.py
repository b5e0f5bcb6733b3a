"""BM25Scorer against rank_bm25 and against the formula solved by hand."""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from weftsearch import BM25Scorer, Document, Index, Query, SimpleAnalyzer, Snapshot
from weftsearch.scorers.bm25 import lucene_idf as scorer_idf

# A corpus built so that a wrong IDF, a wrong length normalisation, a missing
# query-term count or a score-0 leak each change some number below.
CORPUS: dict[str, str] = {
    "solo": "zebra",  # a single-token document
    "rep": "cat cat cat dog",  # a repeated term within a document
    "a": "cat mouse bird",
    "b": "dog bird fish",
    "c": "mouse cheese",
    "none": "lorem ipsum dolor",  # shares no term with any query below
    "e": "fish fish bird cat",
    # 12 tokens: three times the average length, 32 / 8 = 4 (checked below).
    "long": "cat bird bird ocean ocean ocean river river stone stone stone stone",
}

QUERIES: list[str] = [
    "cat cat mouse",  # a repeated query term
    "unicorn cat",  # a query term in no document
    "zebra",
    "bird",
    "dog fish unicorn",
    "ocean stone",
    "bird cat mouse dog fish zebra",
    "stone stone stone river",
]


def lucene_idf(n_docs: int, df: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_term(tf: float, df: int, n_docs: int, dl: float, avgdl: float, k1: float, b: float) -> float:
    return lucene_idf(n_docs, df) * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl))


def reference(corpus: Sequence[Sequence[str]], k1: float, b: float) -> BM25Okapi:
    """rank_bm25's BM25Okapi with its IDF replaced by Lucene's non-negative form.

    BM25Okapi's own IDF is Robertson's ``ln((N - df + 0.5) / (df + 0.5))`` with
    an epsilon floor for negative values; weft-search uses Lucene's
    ``ln(1 + (N - df + 0.5) / (df + 0.5))``. Everything else (tf saturation,
    length normalisation, one addition per query-term occurrence) is rank_bm25's
    own code. We overwrite the ``idf`` dict rather than subclass, since
    rank_bm25 ships no type information.
    """
    model = BM25Okapi([list(doc) for doc in corpus], k1=k1, b=b)
    n_docs = len(corpus)
    df: dict[str, int] = {}
    for frequencies in model.doc_freqs:
        for word in frequencies:
            df[word] = df.get(word, 0) + 1
    model.idf = {word: lucene_idf(n_docs, count) for word, count in df.items()}
    return model


def simple_index(corpus: dict[str, str]) -> Index:
    index = Index(analyzer="simple")
    index.add_many(Document(key, text) for key, text in corpus.items())
    return index


def stream_by_key(snapshot: Snapshot, scorer: BM25Scorer, text: str) -> dict[str, float]:
    stream = scorer.score(snapshot, Query(text), snapshot.n_docs + 5)
    keys = snapshot.keys_of(stream.ids)
    assert len(set(keys)) == len(keys)
    scores = stream.scores.tolist()
    assert scores == sorted(scores, reverse=True)
    return dict(zip(keys, scores, strict=True))


def test_corpus_discriminates() -> None:
    lengths = {key: len(text.split()) for key, text in CORPUS.items()}
    avgdl = sum(lengths.values()) / len(lengths)
    assert lengths["long"] == 3 * avgdl
    assert lengths["solo"] == 1
    query_terms = {t for q in QUERIES for t in q.split()}
    assert not set(CORPUS["none"].split()) & query_terms
    assert "unicorn" not in {t for text in CORPUS.values() for t in text.split()}


@pytest.mark.reference
@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (0.9, 0.4), (2.0, 1.0), (1.5, 0.0)])
def test_matches_rank_bm25(k1: float, b: float) -> None:
    index = simple_index(CORPUS)
    snapshot = index.snapshot()
    analyzer = SimpleAnalyzer()
    keys = list(CORPUS)
    model = reference([analyzer.analyze(CORPUS[key]) for key in keys], k1, b)
    scorer = BM25Scorer(k1=k1, b=b)
    for text in QUERIES:
        ours = stream_by_key(snapshot, scorer, text)
        theirs = model.get_scores(analyzer.analyze(text))
        assert len(ours) > 0
        for key, expected in zip(keys, theirs.tolist(), strict=True):
            if expected == 0.0:
                assert key not in ours, f"{key!r} present at score {ours.get(key)} for {text!r}"
                continue
            assert key in ours, f"{key!r} missing for {text!r}"
            got = ours[key]
            assert got > 0.0
            assert abs(got - expected) <= 1e-12, (text, key, got, expected)
            assert abs(got - expected) <= 1e-12 * abs(expected), (text, key, got, expected)
        assert "none" not in ours


def test_default_parameters_are_lucene_defaults() -> None:
    scorer = BM25Scorer()
    assert scorer.k1 == 1.2
    assert scorer.b == 0.75


def test_idf_recovered_from_single_term_score_is_non_negative_lucene_form() -> None:
    corpus = {
        "d1": "common x1",
        "d2": "common x2",
        "d3": "common common x3",
        "d4": "common x4",
        "d5": "x5 y",
    }
    n_docs, df = 5, 4
    assert df > n_docs / 2
    robertson = math.log((n_docs - df + 0.5) / (df + 0.5))
    assert robertson < 0  # the classic IDF would be negative here
    lucene = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
    index = simple_index(corpus)
    snapshot = index.snapshot()
    avgdl = 11 / 5
    assert snapshot.avgdl == pytest.approx(avgdl, rel=1e-15)
    k1, b = 1.2, 0.75
    ours = stream_by_key(snapshot, BM25Scorer(k1, b), "common")
    assert set(ours) == {"d1", "d2", "d3", "d4"}
    for key, tf, dl in [("d1", 1, 2), ("d3", 2, 3)]:
        idf = ours[key] * (tf + k1 * (1 - b + b * dl / avgdl)) / (tf * (k1 + 1))
        assert idf > 0
        assert idf == pytest.approx(lucene, rel=1e-12, abs=1e-12)
        assert idf == pytest.approx(math.log(4 / 3), rel=1e-12)


def test_parameters_per_scorer_without_reindexing() -> None:
    index = simple_index(CORPUS)
    snapshot = index.snapshot()
    generation = snapshot.generation
    n, avgdl = 8, 4.0
    results = {}
    for k1, b in [(1.2, 0.75), (0.5, 0.2), (3.0, 1.0)]:
        ours = stream_by_key(snapshot, BM25Scorer(k1=k1, b=b), "stone")
        # "stone" occurs only in "long": tf 4, dl 12, df 1.
        assert set(ours) == {"long"}
        assert ours["long"] == pytest.approx(bm25_term(4, 1, n, 12, avgdl, k1, b), rel=1e-13)
        results[(k1, b)] = ours["long"]
        # Both parameters are read per call, so an earlier scorer's cache never leaks.
        cat = stream_by_key(snapshot, BM25Scorer(k1=k1, b=b), "cat")
        assert cat["rep"] == pytest.approx(bm25_term(3, 4, n, 4, avgdl, k1, b), rel=1e-13)
        assert cat["long"] == pytest.approx(bm25_term(1, 4, n, 12, avgdl, k1, b), rel=1e-13)
    assert len(set(results.values())) == 3
    assert index.snapshot() is snapshot
    assert snapshot.generation == generation


def test_k1_zero_ignores_term_frequency_and_length() -> None:
    index = simple_index(CORPUS)
    snapshot = index.snapshot()
    ours = stream_by_key(snapshot, BM25Scorer(k1=0.0, b=0.75), "cat")
    idf = lucene_idf(8, 4)
    assert set(ours) == {"rep", "a", "e", "long"}
    for key in ours:
        assert ours[key] == pytest.approx(idf, rel=1e-14)


def test_b_zero_ignores_document_length() -> None:
    corpus = {"short": "cat", "longer": "cat dog dog dog dog dog dog dog", "two": "cat cat dog"}
    index = simple_index(corpus)
    ours = stream_by_key(index.snapshot(), BM25Scorer(k1=1.2, b=0.0), "cat")
    idf = lucene_idf(3, 3)
    assert ours["short"] == ours["longer"]
    assert ours["short"] == pytest.approx(idf * 2.2 / 2.2, rel=1e-14)
    assert ours["two"] == pytest.approx(idf * 2 * 2.2 / (2 + 1.2), rel=1e-14)
    # With b = 1 the two single-occurrence documents differ again.
    full = stream_by_key(index.snapshot(), BM25Scorer(k1=1.2, b=1.0), "cat")
    assert full["short"] > full["longer"]


def test_term_in_every_document_still_scores_positive() -> None:
    corpus = {"x": "alpha beta", "y": "alpha gamma", "z": "alpha"}
    ours = stream_by_key(simple_index(corpus).snapshot(), BM25Scorer(), "alpha")
    assert set(ours) == {"x", "y", "z"}
    assert all(score > 0 for score in ours.values())
    assert lucene_idf(3, 3) == pytest.approx(math.log(1 + 0.5 / 3.5))


def test_repeated_query_term_counts_per_occurrence() -> None:
    snapshot = simple_index(CORPUS).snapshot()
    once = stream_by_key(snapshot, BM25Scorer(), "mouse")
    twice = stream_by_key(snapshot, BM25Scorer(), "mouse mouse")
    assert set(once) == set(twice) == {"a", "c"}
    for key in once:
        assert twice[key] == pytest.approx(2 * once[key], rel=1e-14)


def test_documents_without_query_terms_are_absent() -> None:
    snapshot = simple_index(CORPUS).snapshot()
    ours = stream_by_key(snapshot, BM25Scorer(), "mouse unicorn")
    assert set(ours) == {"a", "c"}
    stream = BM25Scorer().score(snapshot, Query("unicorn"), 10)
    assert len(stream) == 0


@pytest.mark.parametrize("text", ["", "   ", ",,, !!"])
def test_empty_query_text_gives_empty_stream(text: str) -> None:
    snapshot = simple_index(CORPUS).snapshot()
    stream = BM25Scorer().score(snapshot, Query(text), 10)
    assert len(stream) == 0
    assert stream.ids.dtype == np.int64


def test_empty_index_gives_empty_stream() -> None:
    stream = BM25Scorer().score(Index(analyzer="simple").snapshot(), Query("cat"), 10)
    assert len(stream) == 0


def test_k_truncates_best_first() -> None:
    snapshot = simple_index(CORPUS).snapshot()
    full = BM25Scorer().score(snapshot, Query("bird cat"), 100)
    top = BM25Scorer().score(snapshot, Query("bird cat"), 2)
    assert len(full) == 5
    assert top.ids.tolist() == full.ids[:2].tolist()
    assert top.scores.tolist() == full.scores[:2].tolist()


def test_statistics_follow_deletes_and_upserts() -> None:
    index = simple_index({"p": "apple pear", "q": "apple", "r": "plum plum plum", "s": "fig"})
    before = index.snapshot()
    assert before.n_docs == 4
    assert before.avgdl == 7 / 4
    old = stream_by_key(before, BM25Scorer(), "apple")
    assert old["q"] == pytest.approx(bm25_term(1, 2, 4, 1, 7 / 4, 1.2, 0.75), rel=1e-14)

    index.delete("s")
    index.add(Document("p", "apple apple apple apple kiwi"))  # upsert: length 2 -> 5
    after = index.snapshot()
    assert after.n_docs == 3
    assert after.avgdl == 9 / 3
    assert after.doc_freq("apple") == 2
    assert after.doc_freq("pear") == 0
    assert after.doc_freq("fig") == 0
    new = stream_by_key(after, BM25Scorer(), "apple pear fig")
    assert set(new) == {"p", "q"}
    assert new["q"] == pytest.approx(bm25_term(1, 2, 3, 1, 3.0, 1.2, 0.75), rel=1e-14)
    assert new["p"] == pytest.approx(bm25_term(4, 2, 3, 5, 3.0, 1.2, 0.75), rel=1e-14)

    # The old snapshot still answers with the old statistics.
    assert stream_by_key(before, BM25Scorer(), "apple") == old
    assert set(stream_by_key(before, BM25Scorer(), "fig")) == {"s"}

    index.add(Document("q", "apple apple"))
    third = index.snapshot()
    assert third.avgdl == 10 / 3
    again = stream_by_key(third, BM25Scorer(), "apple")
    assert again["q"] == pytest.approx(bm25_term(2, 2, 3, 2, 10 / 3, 1.2, 0.75), rel=1e-14)


def test_dense_and_sparse_accumulation_agree() -> None:
    # Many documents, a rare term (sparse path) and a common one (dense path)
    # in one query: both paths must give the formula's numbers.
    corpus = {f"d{i:03d}": "common " * (1 + i % 3) + ("rare" if i % 50 == 0 else "") for i in range(200)}
    snapshot = simple_index(corpus).snapshot()
    lengths = {key: len(text.split()) for key, text in corpus.items()}
    avgdl = sum(lengths.values()) / 200
    rare = stream_by_key(snapshot, BM25Scorer(), "rare")
    assert set(rare) == {"d000", "d050", "d100", "d150"}
    for key, score in rare.items():
        assert score == pytest.approx(bm25_term(1, 4, 200, lengths[key], avgdl, 1.2, 0.75), rel=1e-13)
    common = stream_by_key(snapshot, BM25Scorer(), "common")
    assert len(common) == 200
    for key, score in common.items():
        tf = 1 + int(key[1:]) % 3
        assert score == pytest.approx(bm25_term(tf, 200, 200, lengths[key], avgdl, 1.2, 0.75), rel=1e-13)


@pytest.mark.reference
def test_the_term_cache_is_bounded_and_changes_no_score(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14 item 6: the per-term cache kept every term ever queried, without end."""
    import weftsearch.scorers.bm25 as bm25_module

    # The cache is the numpy path's (the oracle; the compiled path reads the segments' lists).
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 10**9)

    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(300)]
    documents = [
        Document(f"d{i:04d}", " ".join(rng.choice(words, size=int(rng.integers(3, 30))))) for i in range(400)
    ]
    queries = [Query(" ".join(rng.choice(words, size=3))) for _ in range(200)]
    # The reference: another index of the same documents, its cache never full.
    reference = Index(SimpleAnalyzer())
    reference.add_many(documents)
    expected = [BM25Scorer().score(reference.snapshot(), q, 10) for q in queries]

    budget = 500
    monkeypatch.setattr(bm25_module, "TERM_CACHE_POSTINGS", budget)
    index = Index(SimpleAnalyzer())
    index.add_many(documents)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    for order in (queries, queries[::-1]):  # the second pass recomputes evicted terms
        for query in order:
            got = scorer.score(snapshot, query, 10)
            want = expected[queries.index(query)]
            assert got.ids.tolist() == want.ids.tolist()
            assert got.scores.tobytes() == want.scores.tobytes()
    cache: Any = snapshot.memo(("bm25.terms", scorer.k1, scorer.b, snapshot.collection_avgdl), dict)
    assert 0 < cache.postings <= budget


def _correctly_rounded_idf(n_docs: int, df: int) -> float:
    """ln((2N + 2) / (2df + 1)) to 60 digits, rounded once to float64 (independent of the scorer's code)."""
    with decimal.localcontext() as context:
        context.prec = 60
        ratio = Fraction(2 * n_docs + 2, 2 * df + 1)
        return float((decimal.Decimal(ratio.numerator) / decimal.Decimal(ratio.denominator)).ln())


@pytest.mark.parametrize("n_docs", [1, 3, 8, 3204, 5183, 1_000_003])
def test_idf_is_the_correctly_rounded_value_on_every_machine(n_docs: int) -> None:
    # numpy's log1p is dispatched per CPU (a SIMD kernel on AVX-512 differs from the scalar one in the
    # last bit for ~7% of CACM's document frequencies), which made docs/EVAL.md's seed-weighted PageRank
    # row reprint differently on another x86-64 machine: the IDF must be one value everywhere, the
    # correctly rounded one.
    frequencies = np.unique(np.concatenate([np.arange(1, min(n_docs, 4000) + 1), [n_docs, n_docs + 1]]))
    got = scorer_idf(n_docs, frequencies.astype(np.int64))
    expected = np.array([_correctly_rounded_idf(n_docs, int(df)) for df in frequencies])
    wrong = np.flatnonzero(got != expected)
    assert wrong.size == 0, (
        f"{wrong.size} of {frequencies.size} idf values differ, first df {frequencies[wrong[:5]]}"
    )


def test_idf_keeps_the_shape_and_order_of_its_input() -> None:
    frequencies = np.array([7, 1, 7, 3], dtype=np.int64)
    got = scorer_idf(10, frequencies)
    assert got.dtype == np.float64
    assert got.tolist() == [_correctly_rounded_idf(10, int(df)) for df in frequencies]
    assert scorer_idf(10, np.array([], dtype=np.int64)).shape == (0,)


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=(1 << 62)), st.data())
def test_the_long_double_idf_is_right_or_defers(n_docs: int, data: st.DataObject) -> None:
    """exact_idf's first try (long double, where wider than float64): right, or ``None`` (decimal then)."""
    from weftsearch.scorers.bm25 import idf as idf_module

    if idf_module._WIDE is None:
        pytest.skip("long double is float64 here: exact_idf computes in decimal only")
    df = data.draw(st.one_of(st.integers(0, min(n_docs, 64)), st.integers(0, n_docs)))
    found = idf_module._wide_idf(idf_module._WIDE, n_docs, df)
    assert found is None or found == _correctly_rounded_idf(n_docs, df)
    assert idf_module.exact_idf(n_docs, df) == _correctly_rounded_idf(n_docs, df)


def test_exact_idf_defers_to_decimal_near_a_halfway_point_and_where_long_double_is_narrow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from weftsearch.scorers.bm25 import idf as idf_module

    pairs = [(5183, 37), (1_000_003, 1), (3, 3), (1 << 40, 12345)]
    if idf_module._WIDE is not None:
        # Most values are decided in long double; an error bound wider than every gap defers them all.
        assert all(idf_module._wide_idf(idf_module._WIDE, n, df) is not None for n, df in pairs[:2])
        monkeypatch.setattr(idf_module, "_WIDE_MARGIN", 1 << 60)
        assert all(idf_module._wide_idf(idf_module._WIDE, n, df) is None for n, df in pairs)
        assert idf_module._wide_idf(idf_module._WIDE, 1 << 63, 1) is None  # past exact integers
    for wide in (idf_module._WIDE, None):
        monkeypatch.setattr(idf_module, "_WIDE", wide)
        idf_module.exact_idf.cache_clear()
        want = [_correctly_rounded_idf(n, df) for n, df in pairs]
        assert [idf_module.exact_idf(n, df) for n, df in pairs] == want
    idf_module.exact_idf.cache_clear()
