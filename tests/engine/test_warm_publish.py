"""A snapshot is warmed before a commit, merge or refresh publishes it (issue 31, item 5).

No timing here (bench/first_search.py measures the latency): the published snapshot's
segment readers have their tables built, and the newest searches were replayed on it, so
its first search finds each new segment's term lookups and the snapshot's caches built.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.engine import warming
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import CorruptIndexError

TABLES = ("terms", "blocks", "packed", "keys.table", "stored.table")


def _documents(prefix: str, count: int) -> list[Document]:
    words = ["graph", "retrieval", "vector", "search", "index", "merge", "commit"]
    return [
        Document(f"{prefix}{i:03d}", " ".join(words[(i + j) % len(words)] for j in range(1 + i % 5)))
        for i in range(count)
    ]


def _committed(tmp_path: Path) -> Index:
    """An index on disk holding ``_documents("a", 20)``, committed."""
    index = Index.create(tmp_path / "idx")
    index.add_many(_documents("a", 20), progress=False)
    index.commit()
    return index


def _readers(snapshot: Snapshot) -> list[object]:
    return [part.reader for part in snapshot._parts]


def _built(reader: object) -> set[str]:
    return {name for name in TABLES if name in reader._cache}  # type: ignore[attr-defined]


def test_a_commit_publishes_readers_with_their_tables_built(tmp_path: Path) -> None:
    with Index.create(tmp_path / "idx") as index:
        index.add_many(_documents("a", 40), progress=False)
        index.commit()
        for reader in _readers(index.snapshot()):
            assert _built(reader) == set(TABLES)
        index.add_many(_documents("b", 40), progress=False)
        index.commit()
        index.merge(force=True)
        readers = _readers(index.snapshot())
        assert len(readers) == 1
        assert _built(readers[0]) == set(TABLES)
    reopened = Index.open(tmp_path / "idx", readonly=True)
    assert reopened.search("graph", 3, RRF(), BM25Scorer())  # a live reader, serving searches
    old = {id(reader) for reader in _readers(reopened.snapshot())}
    writer = Index.open(tmp_path / "idx")
    with writer:
        writer.add(Document("c000", "graph commit"))
        writer.commit()
    assert reopened.refresh()
    new = [reader for reader in _readers(reopened.snapshot()) if id(reader) not in old]
    assert new
    for reader in new:
        assert _built(reader) == set(TABLES)


@pytest.mark.parametrize("publish", ["commit", "merge", "refresh"])
def test_the_newest_searches_are_replayed_before_publishing(tmp_path: Path, publish: str) -> None:
    scorer, fuser = BM25Scorer(), RRF()
    with Index.create(tmp_path / "idx") as index:
        index.add_many(_documents("a", 40), progress=False)
        index.commit()
        before = index.search("graph retrieval", 5, fuser, scorer)
        index.add_many(_documents("b", 40), progress=False)
        if publish == "commit":
            index.commit()
        elif publish == "merge":
            index.commit()
            index.search("graph retrieval", 5, fuser, scorer)
            index.merge(force=True)
        else:
            index.refresh()
        snapshot = index.snapshot()
        # Nothing searched this snapshot yet, but each new segment has looked the terms up
        # and the scorer's per-snapshot caches are built.
        for reader in _readers(snapshot):
            assert {"graph", "retriev"} <= set(reader._term_cache), reader  # type: ignore[attr-defined]
        assert any(str(key[0]).startswith("bm25") for key in snapshot._memo if isinstance(key, tuple))
        after = index.search("graph retrieval", 5, fuser, scorer)
        assert after and before


def test_warming_remembers_a_bounded_number_of_searches(tmp_path: Path) -> None:
    scorer, fuser = BM25Scorer(), RRF()
    with _committed(tmp_path) as index:
        for i in range(3 * warming.WARM_SEARCHES):
            index.search(Query(f"graph term{i}"), 3, fuser, scorer)
            index.search(Query(f"graph term{i}"), 3, fuser, scorer)  # the same search once
        recent = index._warming.recent
        assert len(recent) == warming.WARM_SEARCHES
        newest = [entry[0] for entry in recent.values()]
        assert newest[-1] == Query(f"graph term{3 * warming.WARM_SEARCHES - 1}")


class _FailsOnNewSnapshots:
    """A scorer that works on the first snapshot it sees and raises on any other."""

    name = "fails"

    def __init__(self) -> None:
        self.first: Snapshot | None = None
        self.calls = 0

    def score(self, snapshot: Snapshot, query: Query, depth: int) -> object:
        self.calls += 1
        if self.first is None:
            self.first = snapshot
        if snapshot is not self.first:
            raise CorruptIndexError("only the first snapshot is readable")
        return BM25Scorer().score(snapshot, query, depth)


def test_a_search_that_fails_while_warming_does_not_fail_the_commit(tmp_path: Path) -> None:
    scorer = _FailsOnNewSnapshots()
    with _committed(tmp_path) as index:
        index.search("graph", 3, RRF(), scorer)  # type: ignore[arg-type]
        index.add_many(_documents("b", 20), progress=False)
        index.commit()  # replays the search, which raises: the commit still succeeds
        assert scorer.calls == 2
        assert "b000" in index
        with pytest.raises(CorruptIndexError):
            index.search("graph", 3, RRF(), scorer)  # type: ignore[arg-type]


def test_a_text_query_and_its_text_are_one_remembered_search(tmp_path: Path) -> None:
    scorer, fuser = BM25Scorer(), RRF()
    with _committed(tmp_path) as index:
        index.search("graph term1", 3, fuser, scorer)
        index.search(Query("graph term1"), 3, fuser, scorer)
        assert len(index._warming.recent) == 1
        # A query with more than text (a time, seeds) is a search of its own.
        index.search(Query("graph term1", time=0), 3, fuser, scorer)
        index.search(Query("graph term1", seeds=("a-1",)), 3, fuser, scorer)
        assert len(index._warming.recent) == 3


def test_the_warming_log_is_bounded_and_read_while_searches_append(tmp_path: Path) -> None:
    """remember() only appends to a bounded log; recent() finds the distinct searches when read."""
    scorer, fuser = BM25Scorer(), RRF()
    with _committed(tmp_path) as index:
        index.search("graph first", 3, fuser, scorer)
        for _ in range(warming.WARM_LOG):
            index.search("graph hot", 3, fuser, scorer)
        # The first search fell out of the log: a hot search repeated WARM_LOG times is all it holds.
        assert [entry[0] for entry in index._warming.recent.values()] == ["graph hot"]
        assert len(index._warming._log) == warming.WARM_LOG
        stop = threading.Event()
        failures: list[BaseException] = []

        def search() -> None:
            i = 0
            while not stop.is_set():
                try:
                    index.search(f"graph term{i % 40}", 3, fuser, scorer)
                except BaseException as error:
                    failures.append(error)
                    return
                i += 1

        threads = [threading.Thread(target=search) for _ in range(2)]
        for thread in threads:
            thread.start()
        try:
            for round_ in range(20):
                index.add_many(_documents(f"r{round_}", 2), progress=False)
                index.commit()  # replays while the threads append
                recent = index._warming.recent
                assert len(recent) <= warming.WARM_SEARCHES
                assert len(set(recent)) == len(recent)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert not failures
