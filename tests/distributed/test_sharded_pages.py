"""Pages of a sharded index (issue 30 item 4): the single index's pages, to the bit; cursors pin the cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed.building import sharded_copies
from tests.engine.test_pages import RANKINGS, corpus, facts
from weftsearch import Document, Index, SearchResults
from weftsearch.distributed import ShardedIndex, ShardedResults
from weftsearch.errors import CursorExpiredError, InvalidCursorError


def pages_of(index: Index | ShardedIndex, name: str, size: int, count: int) -> list[SearchResults]:
    query, fuser, scorers = RANKINGS[name]
    out = [index.search(query, size, fuser, *scorers)]
    while len(out) < count and out[-1].next_cursor is not None:
        out.append(index.search(query, size, fuser, *scorers, after=out[-1].next_cursor))
    return out


@pytest.mark.parametrize("name", sorted(RANKINGS))
def test_sharded_pages_equal_the_single_index_and_one_deeper_search(tmp_path: Path, name: str) -> None:
    documents = corpus(150)
    single = Index(analyzer="simple")
    single.add_many(documents)
    (sharded,) = sharded_copies(tmp_path, documents, [3], analyzer="simple").values()
    try:
        query, fuser, scorers = RANKINGS[name]
        deep = sharded.search(query, 60, fuser, *scorers)
        paged = pages_of(sharded, name, 6, 10)
        assert facts(paged) == facts(deep) == facts(single.search(query, 60, fuser, *scorers))
        offsets = [sharded.search(query, 6, fuser, *scorers, offset=6 * page) for page in range(10)]
        assert facts(offsets) == facts(deep)
        assert all(isinstance(page, ShardedResults) and not page.partial for page in paged)
    finally:
        sharded.close()


def test_a_sharded_cursor_names_its_cut(tmp_path: Path) -> None:
    documents = corpus(60)
    (sharded,) = sharded_copies(tmp_path, documents, [2], analyzer="simple").values()
    single = Index(analyzer="simple")
    try:
        query, fuser, scorers = RANKINGS["bm25"]
        cursor = sharded.search(query, 5, fuser, *scorers).next_cursor
        assert cursor is not None
        with pytest.raises(InvalidCursorError, match="not issued by this index"):
            single.search(query, 5, fuser, *scorers, after=cursor)
        with pytest.raises(InvalidCursorError, match="another query or ranking"):
            sharded.search("gamma", 5, fuser, *scorers, after=cursor)
        sharded.add(Document("z", "alpha beta"))
        sharded.commit()
        with pytest.raises(CursorExpiredError, match="keeps no older cut"):
            sharded.search(query, 5, fuser, *scorers, after=cursor)
    finally:
        sharded.close()
