"""Add a fifth signal without forking weft-search: popularity from your own table.

The scorer below knows nothing about weft-search's internals. It holds the
caller's own data (page views per document key, say from an analytics
table), joins it to the snapshot by key with the public ``Snapshot.ids_of``,
caches the join per snapshot with ``Snapshot.memo``, and returns a ``Stream``
selected with the shared ``top_k``. The engine and the fuser treat it exactly
like the built-in scorers.

Run it: ``python examples/custom_scorer.py``
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from weftsearch import RRF, BM25Scorer, Document, Index, Query, Snapshot, Stream, top_k


class PopularityScorer:
    """Scores documents by ``log(1 + views)``, from a table the caller owns.

    Documents missing from the table are absent from the stream (no evidence),
    and keys in the table that are not in the index are ignored.
    """

    def __init__(self, views: Mapping[str, float], name: str = "popularity") -> None:
        self._keys = list(views)
        self._values = np.array([float(views[key]) for key in self._keys], dtype=np.float64)
        self._name = name

    @property
    def name(self) -> str:
        """Label in explanations."""
        return self._name

    def _join(self, snapshot: Snapshot) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        ids = snapshot.ids_of(self._keys)
        present = ids >= 0
        return ids[present], np.log1p(self._values[present])

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """The ``k`` most viewed documents (the query is not read)."""
        # One join per snapshot, however many queries run against it.
        ids, scores = snapshot.memo(("popularity", id(self)), lambda: self._join(snapshot))
        if ids.size == 0:
            return Stream.empty()
        return Stream(*top_k(ids, scores, k, snapshot))


def main() -> tuple[list[str], list[str]]:
    """Index four documents; return the BM25-only ranking and BM25 fused with popularity."""
    index = Index()
    index.add_many(
        [
            Document("bm25", "BM25 ranks documents by term frequency and inverse document frequency"),
            Document("rrf", "Reciprocal rank fusion merges ranked lists by their ranks"),
            Document("dense", "Dense retrieval ranks documents by embedding similarity"),
            Document("faq", "Frequently asked questions about ranking"),
        ]
    )
    views = {"faq": 12000.0, "dense": 300.0, "bm25": 40.0, "not-indexed": 1e9}
    text_only = index.search("ranking documents", 4, RRF(), BM25Scorer())
    fused = index.search("ranking documents", 4, RRF(), BM25Scorer(), PopularityScorer(views))
    print("BM25 alone:       ", " ".join(text_only.keys))
    print("BM25 + popularity:")
    for hit in fused:
        parts = ", ".join(f"{s.signal} rank {s.rank}" for s in hit.signals)
        print(f"  {hit.rank}. {hit.key:6s} {hit.score:.5f}  ({parts})")
    return text_only.keys, fused.keys


if __name__ == "__main__":
    main()
