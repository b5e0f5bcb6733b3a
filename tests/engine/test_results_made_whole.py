"""Every way a search makes its :class:`SearchResults` sets every slot.

The results are built by several constructors that skip ``__init__`` for speed
(``_from_arrays``, ``_passed_through``, ``_sliced``, a batch's lazy results): a slot
one of them forgets raises ``AttributeError`` only when a user first reads it. This
reads every slot of results made each way.
"""

from __future__ import annotations

import numpy as np

from weftsearch import RRF, BM25Scorer, Document, Index, Query, SearchResults, VectorScorer


def _slots(kind: type) -> list[str]:
    names = [name for klass in kind.__mro__ for name in getattr(klass, "__slots__", ())]
    return [name for name in names if name != "__weakref__"]


def _assert_whole(results: SearchResults) -> None:
    missing = [name for name in _slots(type(results)) if not hasattr(results, name)]
    assert missing == [], f"{type(results).__name__} made without {missing}"
    assert results.to_dict()["hits"]  # and readable end to end


def test_every_constructor_sets_every_slot() -> None:
    rng = np.random.default_rng(3)
    index = Index("english", vector_dim=4)
    vectors = rng.random((60, 4), dtype=np.float32)
    index.add_many(
        Document(f"d{i:03d}", f"graph {('dense', 'sparse')[i % 2]} {i}", vector=vectors[i]) for i in range(60)
    )
    bm25 = BM25Scorer()
    query = Query("graph sparse", vector=rng.random(4, dtype=np.float32))
    first = index.search(query, 5, RRF(), bm25)
    made: dict[str, SearchResults] = {
        "one stream passed through": first,
        "two streams fused": index.search(query, 5, RRF(), bm25, VectorScorer()),
        "a page (offset)": index.search(query, 5, RRF(), bm25, offset=5),
        "a page (cursor)": index.search(query, 5, RRF(), bm25, after=first.next_cursor),
    }
    batch = index.search_many([query, query], 5, RRF(), bm25)
    made.update({f"a batch's results {i}": results for i, results in enumerate(batch)})
    for name, results in made.items():
        assert len(results) == 5, name
        _assert_whole(results)
