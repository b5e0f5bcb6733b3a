"""k and the other counts are bounded at the API (issue 13 item 1): a huge k is a typed error,
MAX_K itself works, and no scorer ever hands a huge k to the compiled scan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, GraphScorer, Index, Query, RecencyScorer, VectorScorer
from weftsearch.engine.search import search_snapshot
from weftsearch.engine.stream import MAX_K, check_k
from weftsearch.errors import InvalidParameterError

HUGE = [MAX_K + 1, 2**60, 1152921504606846976, 2**63, 2**64, 10**30]


def documents() -> list[Document]:
    rng = np.random.default_rng(5)
    return [
        Document(
            key=f"d{i}",
            text=f"doc {i} shared words",
            vector=rng.standard_normal(8).astype(np.float32),
            links=(f"d{(i + 1) % 12}",),
            time=float(i),
        )
        for i in range(12)
    ]


def small_index() -> Index:
    index = Index(analyzer="simple")
    index.add_many(documents())
    return index


@pytest.mark.parametrize("k", HUGE)
def test_check_k_refuses_above_the_maximum(k: int) -> None:
    with pytest.raises(InvalidParameterError, match="at most 1,000,000"):
        check_k(k)
    with pytest.raises(InvalidParameterError, match="depth"):
        check_k(np.uint64(min(k, 2**64 - 1)), "depth")  # type: ignore[arg-type]  # numpy ints count


def test_check_k_accepts_the_maximum() -> None:
    assert check_k(MAX_K) == MAX_K
    assert check_k(np.int64(MAX_K)) == MAX_K  # type: ignore[arg-type]  # numpy ints are accepted


@pytest.mark.parametrize("k", HUGE)
def test_search_and_every_scorer_refuse_a_huge_k(k: int) -> None:
    index = small_index()
    query = Query(text="shared", vector=np.ones(8, dtype=np.float32), seeds=("d1",))
    with pytest.raises(InvalidParameterError):
        index.search(query, k, RRF(), VectorScorer(nprobe=None))
    with pytest.raises(InvalidParameterError):
        index.search(query, 5, RRF(), VectorScorer(), depth=k)
    snapshot = index.snapshot()
    for scorer in (
        VectorScorer(),
        VectorScorer(nprobe=None),
        BM25Scorer(),
        RecencyScorer(half_life=10.0),
        GraphScorer(),
    ):
        with pytest.raises(InvalidParameterError):
            scorer.score(snapshot, query, k)
    with pytest.raises(InvalidParameterError):
        VectorScorer(nprobe=k)


def test_k_of_max_k_works_on_a_small_index(tmp_path: Path) -> None:
    index = small_index()
    query = Query(text="shared", vector=np.ones(8, dtype=np.float32))
    hits = index.search(query, MAX_K, RRF(), VectorScorer(nprobe=None), BM25Scorer(), depth=MAX_K)
    assert len(hits) == 12
    again = search_snapshot(index.snapshot(), query, 12, RRF(), [VectorScorer(nprobe=None), BM25Scorer()])
    assert [h.key for h in hits] == [h.key for h in again]
    # The same through a persisted index (one segment: the compiled scan's single-call path).
    disk = Index.create(tmp_path / "idx", analyzer="simple")
    disk.add_many(documents())
    disk.commit()
    vector_only = disk.search(query, MAX_K, RRF(), VectorScorer(nprobe=None))
    assert sorted(h.key for h in vector_only) == sorted(f"d{i}" for i in range(12))
    scores = VectorScorer(nprobe=None).score(disk.snapshot(), query, MAX_K)
    assert len(scores.ids) == 12
    disk.close()
