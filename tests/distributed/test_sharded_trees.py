"""Parsed query trees on a sharded index: the same hits and score bits as on one index."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed.building import close_all, sharded_copies
from weftsearch import RRF, BM25Scorer, Document, Index, Query

TEXTS = [
    "alphabeta gamma delta",
    "gamma gamma retrieval",
    "retrieving delta epsilon",
    "alphabeta retrieval",
    "delta",
    "epsilon gamma alphabeta delta",
    "zeta",
]


@pytest.mark.parametrize(
    "text",
    [
        "gamma AND delta",
        "+delta -gamma",
        "retriev* OR alphabeta^2",
        # The query text analyses to "alph" and "abeta"; the tree's word is "alphabeta": the
        # collection statistics must be gathered for the tree's words, not the text's.
        "alph\\abeta OR (gamma AND NOT zeta)^0.5",
    ],
)
def test_trees_score_the_same_bits_sharded(tmp_path: Path, text: str) -> None:
    documents = [Document(f"d{i}", t) for i, t in enumerate(TEXTS)]
    single = Index.create(tmp_path / "one")
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [3])
    try:
        query = Query.parse(text)
        expected = single.search(query, 10, RRF(), BM25Scorer())
        got = sharded[3].search(query, 10, RRF(), BM25Scorer())
        assert expected.keys and list(got.keys) == list(expected.keys)
        assert [s.score for h in got for s in h.signals] == [s.score for h in expected for s in h.signals]
    finally:
        close_all(single, sharded)
