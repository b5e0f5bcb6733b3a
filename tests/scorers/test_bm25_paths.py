"""BM25Scorer's fast paths give bit-for-bit the scores of the plain formula.

BM25Scorer picks, per query, between a single-term path, dense and sparse
accumulation, and a seeded top-k threshold; it also caches each posting's
tf-part per snapshot. None of that may change a bit of any score or the order
of any result. The reference below is the formula done the slow, obvious way
through the public snapshot API: per distinct query term in sorted order, the
term's contributions added into a score per document.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from numpy.typing import NDArray

import weftsearch.scorers.bm25 as bm25_module
from weftsearch import BM25Scorer, Document, Index, Query, Snapshot
from weftsearch.scorers.bm25 import lucene_idf

PATHS: dict[str, dict[str, float]] = {
    "default": {},
    "dense": {"_DENSE_BELOW_DOCS": 10**9},
    "sparse": {"_DENSE_BELOW_DOCS": 0, "_DENSE_RATIO": float("inf")},
    "dense-seeded": {"_DENSE_BELOW_DOCS": 10**9, "_MIN_SEED": 1},
}


def reference(
    snapshot: Snapshot, text: str, k1: float, b: float
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Every matching document (ascending id) and its score, one term at a time."""
    terms = snapshot.analyzer.analyze(text)
    counted = sorted(Counter(terms).items())
    n_docs = snapshot.n_docs
    if not counted or n_docs == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    avgdl = snapshot.avgdl if snapshot.avgdl > 0 else 1.0
    norm = k1 * (1.0 - b + b * snapshot.doc_lengths.astype(np.float64) / avgdl)
    query_tf = np.array([count for _, count in counted], dtype=np.float64)
    weights = query_tf * lucene_idf(n_docs, snapshot.postings([term for term, _ in counted]).doc_freq)
    total = np.zeros(n_docs, dtype=np.float64)
    matched = np.zeros(n_docs, dtype=np.bool_)
    for (term, _), weight in zip(counted, weights, strict=True):
        postings = snapshot.postings([term])
        tf = postings.term_freqs
        # Ids are unique within one term, so this adds each document's
        # contributions one after another, in sorted term order.
        np.add.at(total, postings.ids, weight * (tf * (k1 + 1.0) / (tf + norm[postings.ids])))
        matched[postings.ids] = True
    ids = np.flatnonzero(matched).astype(np.int64)
    return ids, total[ids]


def random_snapshots(seed: int) -> list[Snapshot]:
    """A Zipf-like corpus, and an older snapshot that misses later terms."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(60)]
    weights = 1.0 / np.arange(1, 61) ** 1.1
    weights /= weights.sum()
    index = Index("simple")
    index.add_many(
        Document(
            f"k{rng.integers(10**6):06d}-{i}",
            " ".join(rng.choice(vocabulary, rng.integers(0, 40), p=weights)),
        )
        for i in range(300)
    )
    older = index.snapshot()
    index.add_many([Document("late", "brandnew w0 w1"), Document("later", "brandnew brandnew w59")])
    index.delete(index.keys()[0])
    return [older, index.snapshot()]


def random_queries(seed: int) -> list[str]:
    rng = np.random.default_rng(seed + 1)
    pool = [f"w{i}" for i in range(60)] + ["brandnew", "absent"]
    queries = [" ".join(rng.choice(pool, rng.integers(0, 9))) for _ in range(40)]
    return [*queries, "w0", "w59", "brandnew", "absent", "w3 w3 w3", "w0 w1 w2 w0"]


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("params", [(1.2, 0.75), (0.0, 1.0), (2.0, 0.0), (0.9, 0.4)])
def test_every_path_matches_the_formula_bit_for_bit(
    path: str, params: tuple[float, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in PATHS[path].items():
        monkeypatch.setattr(bm25_module, name, value)
    k1, b = params
    scorer = BM25Scorer(k1, b)
    for seed in (1, 2):
        for snapshot in random_snapshots(seed):
            for text in random_queries(seed):
                want_ids, want_scores = reference(snapshot, text, k1, b)
                ids, scores = scorer.score_all(snapshot, Query(text))
                assert ids.tobytes() == want_ids.tobytes(), text
                assert scores.tobytes() == want_scores.tobytes(), text
                assert ids.flags.writeable, "score_all hands out arrays of the caller's own"
                order = np.lexsort((snapshot.key_rank(want_ids), -want_scores))
                for k in (1, 3, 10, 50, 1000):
                    stream = scorer.score(snapshot, Query(text), k)
                    assert stream.ids.tobytes() == want_ids[order[:k]].tobytes(), (text, k)
                    assert stream.scores.tobytes() == want_scores[order[:k]].tobytes(), (text, k)


def test_postings_are_read_only_views_of_one_snapshot() -> None:
    snapshot = random_snapshots(3)[1]
    for terms in (["w0"], ["w0", "w1", "absent", "w0"], []):
        postings = snapshot.postings(terms)
        for array in (postings.doc_freq, postings.ids, postings.term_freqs, postings.term_index):
            assert not array.flags.writeable
        assert postings.ids.shape == postings.term_freqs.shape == postings.term_index.shape
        assert int(postings.doc_freq.sum()) == postings.ids.shape[0]
