"""One search tail: what it refuses of a fuser, one index and a sharded index refuse alike.

The single index and the sharded coordinator fuse, check and explain through the
same functions (``engine/search.py``: ``fuse_candidates``, ``check_fused``,
``explain_fused``), so each bad fuser output below must raise the same typed
error, with the same message, from both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, FusedStream, Index, KeyOrder, Query, Stream
from weftsearch.distributed import ShardedIndex
from weftsearch.errors import ScorerOutputError

DOCS = [Document(key=f"d{i:02d}", text=f"alpha beta {'gamma ' * (i % 4)} delta{i % 3}") for i in range(24)]


def _union(streams: Sequence[Stream]) -> list[int]:
    """The distinct ids of ``streams``, first seen first."""
    seen: dict[int, None] = {}
    for stream in streams:
        for doc in stream.ids.tolist():
            seen.setdefault(doc, None)
    return list(seen)


def _twice(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    doc = _union(streams)[0]
    return FusedStream([doc, doc], [2.0, 1.0], np.zeros((2, len(streams))))


def _unknown(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    return FusedStream([10**6], [1.0], np.zeros((1, len(streams))))


def _nan(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    ids = _union(streams)[:2]
    return FusedStream(ids, [1.0, np.nan], np.zeros((2, len(streams))))


def _infinite(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    ids = _union(streams)[:2]
    return FusedStream(ids, [np.inf, 1.0], np.zeros((2, len(streams))))


def _bad_contribution(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    ids = _union(streams)[:2]
    table = np.zeros((2, len(streams)))
    table[1, 0] = np.nan
    return FusedStream(ids, [2.0, 1.0], table)


def _ascending(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    ids = _union(streams)[:2]
    return FusedStream(ids, [1.0, 2.0], np.zeros((2, len(streams))))


def _ties_against_key_order(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    ids = np.array(_union(streams)[:2], dtype=np.int64)
    ranks = keys.key_rank(ids)
    later_key_first = ids[np.argsort(-ranks)]
    return FusedStream(later_key_first, [1.0, 1.0], np.zeros((2, len(streams))))


def _too_many(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    ids = _union(streams)[: k + 1]
    return FusedStream(ids, np.linspace(2.0, 1.0, len(ids)), np.zeros((len(ids), len(streams))))


def _wrong_width(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    ids = _union(streams)[:1]
    return FusedStream(ids, [1.0], np.zeros((1, len(streams) + 1)))


def _not_fused(streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
    return streams[0]  # type: ignore[return-value]  # the bad output under test


BAD: dict[str, tuple[Callable[[Sequence[Stream], int, KeyOrder], FusedStream], str]] = {
    "twice": (_twice, "the same document twice"),
    "unknown key": (_unknown, "an id outside"),
    "nan score": (_nan, "non-finite score"),
    "infinite score": (_infinite, "non-finite score"),
    "nan contribution": (_bad_contribution, "non-finite score or contribution"),
    "ascending": (_ascending, "out of order"),
    "ties against key order": (_ties_against_key_order, "out of order"),
    "too many": (_too_many, "did not return at most 3"),
    "wrong width": (_wrong_width, "contributions for 3 streams, not the 2"),
    "not a FusedStream": (_not_fused, "did not return at most"),
}


class BadFuser:
    """A fuser whose output breaks the contract in one way."""

    def __init__(self, fuse: Callable[[Sequence[Stream], int, KeyOrder], FusedStream]) -> None:
        self._fuse = fuse

    @property
    def name(self) -> str:
        return "bad"

    def fuse(self, streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
        return self._fuse(streams, k, keys)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Index | ShardedIndex]]:
    root: Path = tmp_path_factory.mktemp("tail")
    single = Index.create(root / "single")
    sharded = ShardedIndex.create(root / "sharded", 3)
    for index in (single, sharded):
        index.add_many(DOCS, progress=False)
        index.commit()
    yield {"index": single, "sharded": sharded}
    sharded.close()
    single.close()


@pytest.mark.parametrize("kind", ["index", "sharded"])
@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_fuser_output_is_refused_alike_by_index_and_sharded_index(
    indexes: dict[str, Index | ShardedIndex], kind: str, bad: str
) -> None:
    fuse, message = BAD[bad]
    index = indexes[kind]
    with pytest.raises(ScorerOutputError, match=message) as refused:
        index.search(Query(text="alpha gamma"), 3, BadFuser(fuse), BM25Scorer(), BM25Scorer(k1=0.9))
    assert "fuser 'bad'" in str(refused.value)
    # And through the batch path of each.
    with pytest.raises(ScorerOutputError, match=message):
        index.search_many(["alpha gamma"], 3, BadFuser(fuse), BM25Scorer(), BM25Scorer(k1=0.9))


@pytest.mark.parametrize("kind", ["index", "sharded"])
def test_a_good_fuser_passes_the_same_checks_and_one_stream_passes_through(
    indexes: dict[str, Index | ShardedIndex], kind: str
) -> None:
    """The checks refuse nothing a built-in fuser makes; both give the same hits."""
    index = indexes[kind]
    fused = index.search("alpha gamma", 5, RRF(), BM25Scorer(), BM25Scorer(k1=0.9))
    single = indexes["index"].search("alpha gamma", 5, RRF(), BM25Scorer(), BM25Scorer(k1=0.9))
    assert fused.keys == single.keys and fused.scores.tobytes() == single.scores.tobytes()
    alone = index.search("alpha gamma", 5, BadFuser(_twice), BM25Scorer())  # the fuser is never called
    assert alone.fuser == "passthrough" and len(alone) == 5
