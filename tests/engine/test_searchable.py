"""Index and ShardedIndex implement one searchable protocol, and answer through it alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from weftsearch import RRF, BM25Scorer, Document, Index
from weftsearch.distributed import ShardedIndex
from weftsearch.engine.searchable import Searchable
from weftsearch.errors import InvalidParameterError, UnknownKeyError

DOCS = [
    Document(key=f"k{i}", text=f"apple {'pie ' * (i % 3)}tart{i % 2}", fields={"n": i}) for i in range(12)
]


def _through_protocol(index: Searchable) -> tuple[list[str], list[list[str]], str, int, int | None]:
    """Everything the protocol's callers read, read only through the protocol."""
    index.refresh()
    one = index.search("apple pie", 5, RRF(), BM25Scorer(), BM25Scorer(k1=0.9))
    many = index.search_many(["apple", "tart1"], 3, RRF(), BM25Scorer(), threads=2)
    assert one.generation == index.generation
    assert not index.closed and not index.readonly and len(index.index_id) == 32
    with pytest.raises(UnknownKeyError):
        index.get("missing")
    return one.keys, [r.keys for r in many], index.get("k3").text, index.stats().documents, index.vector_dim


def test_index_and_sharded_index_both_satisfy_searchable_and_answer_alike(tmp_path: Path) -> None:
    single = Index.create(tmp_path / "single")
    sharded = ShardedIndex.create(tmp_path / "sharded", 3)
    for index in (single, sharded):
        index.add_many(DOCS)
        index.commit()
    # mypy checks the signatures of these assignments; isinstance checks the members at run time.
    as_single: Searchable = single
    as_sharded: Searchable = sharded
    assert isinstance(single, Searchable) and isinstance(sharded, Searchable)
    assert _through_protocol(as_single) == _through_protocol(as_sharded)
    assert sharded.generation == sharded.cut
    with pytest.raises(InvalidParameterError, match="threads must be an integer"):
        as_sharded.search_many(["apple"], 3, RRF(), BM25Scorer(), threads=0)
    sharded.close()
    single.close()


def test_something_without_search_is_not_searchable() -> None:
    assert not isinstance(object(), Searchable)
    assert not isinstance(DOCS[0], Searchable)
