"""BM25 over the snapshot's inverted index.

Score of document d for query q (Robertson & Zaragoza 2009, "The Probabilistic
Relevance Framework: BM25 and Beyond", eq. 3.15, with Lucene's IDF)::

    sum over distinct terms t of q:
        qtf(t) * idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

``qtf`` is how often t occurs in the analysed query, so a repeated query term
counts once per occurrence, as in rank_bm25 and Lucene. This IDF is Lucene's
non-negative form: it stays above 0 even for a term in every document, so a
document holding any query term always scores above 0, and a document holding
none is absent from the stream. N, avgdl and df come from one snapshot.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream, check_k, top_k
from weftsearch.errors import InvalidParameterError

__all__ = ["BM25Scorer", "lucene_idf"]

# Below this ratio of postings to documents, accumulating into a dense array of
# N scores costs more than sorting the postings; the two paths add the same
# numbers in the same order, so the choice never changes a score.
_DENSE_RATIO = 0.125


def lucene_idf(n_docs: int, doc_freq: NDArray[np.int64]) -> NDArray[np.float64]:
    """Lucene's BM25 IDF, ``ln(1 + (N - df + 0.5) / (df + 0.5))``, elementwise."""
    df = doc_freq.astype(np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


class BM25Scorer:
    """Okapi BM25 with Lucene's IDF; parameters are per scorer, not per index.

    Args:
        k1: term-frequency saturation, >= 0 (1.2 by default).
        b: length normalisation, in [0, 1] (0.75 by default).
        name: label in explanations.

    Complexity per query: O(P) for P postings of the query terms, plus
    O(min(N, P log P)) to accumulate them; vectorised throughout.

    """

    def __init__(self, k1: float = 1.2, b: float = 0.75, *, name: str = "bm25") -> None:
        if not isinstance(k1, (int, float)) or not math.isfinite(k1) or k1 < 0:
            raise InvalidParameterError(f"BM25 k1 must be a finite number >= 0, got {k1!r}")
        if not isinstance(b, (int, float)) or not 0.0 <= b <= 1.0:
            raise InvalidParameterError(f"BM25 b must be in [0, 1], got {b!r}")
        self.k1 = float(k1)
        self.b = float(b)
        self._name = name

    @property
    def name(self) -> str:
        """Label in explanations (``"bm25"`` by default)."""
        return self._name

    def __repr__(self) -> str:
        return f"BM25Scorer(k1={self.k1}, b={self.b})"

    def _length_norm(self, snapshot: Snapshot) -> NDArray[np.float64]:
        """``k1 * (1 - b + b * |d| / avgdl)`` for every document of the snapshot."""
        lengths = snapshot.doc_lengths.astype(np.float64)
        avgdl = snapshot.avgdl if snapshot.avgdl > 0 else 1.0
        norm = self.k1 * (1.0 - self.b + self.b * lengths / avgdl)
        norm.setflags(write=False)
        return norm

    def score_all(self, snapshot: Snapshot, query: Query) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Every document holding a query term and its score, ids ascending."""
        terms = snapshot.analyzer.analyze(query.text) if query.text else []
        if not terms or snapshot.n_docs == 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        counted = sorted(Counter(terms).items())
        postings = snapshot.postings([term for term, _ in counted])
        ids = postings.ids
        if ids.size == 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        query_tf = np.array([count for _, count in counted], dtype=np.float64)
        term_weight = (query_tf * lucene_idf(snapshot.n_docs, postings.doc_freq))[postings.term_index]
        norm = snapshot.memo(("bm25.length_norm", self.k1, self.b), lambda: self._length_norm(snapshot))
        tf = postings.term_freqs
        contributions = term_weight * (tf * (self.k1 + 1.0) / (tf + norm[ids]))
        if ids.size >= _DENSE_RATIO * snapshot.n_docs:
            dense = np.bincount(ids, weights=contributions, minlength=snapshot.n_docs).astype(np.float64)
            hit = np.flatnonzero(dense > 0.0)
            return hit.astype(np.int64), dense[hit]
        unique_ids, inverse = np.unique(ids, return_inverse=True)
        summed = np.bincount(inverse, weights=contributions).astype(np.float64)
        return unique_ids.astype(np.int64), summed

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """The ``k`` best documents for ``query.text``; empty without text."""
        k = check_k(k)
        ids, scores = self.score_all(snapshot, query)
        if ids.size == 0:
            return Stream.empty()
        return Stream(*top_k(ids, scores, k, snapshot))
