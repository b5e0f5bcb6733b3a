"""AsyncIndex (issue 30 item 5): Index answers awaited on threads; cancelled writes are whole or absent."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.engine.test_pages import RANKINGS, corpus, facts
from weftsearch import RRF, AsyncIndex, BM25Scorer, Document, Index
from weftsearch.errors import (
    DiscardedWritesWarning,
    IndexNotFoundError,
    InvalidParameterError,
    UnknownKeyError,
)


def test_gathered_searches_equal_the_index_s_own_answers(tmp_path: Path) -> None:
    with Index.create(tmp_path / "ix", analyzer="simple") as built:
        built.add_many(corpus(120), progress=False)
    plain = Index.open(tmp_path / "ix", readonly=True)

    async def main() -> list[Any]:
        async with await AsyncIndex.open(tmp_path / "ix", readonly=True) as index:
            calls = [index.search(q, 10, f, *s) for q, f, s in RANKINGS.values()] * 8
            gathered = await asyncio.gather(*calls)
            many = await index.search_many(["alpha", "beta gamma"], 5, RRF(), BM25Scorer())
            document = await index.get("d007")
            return [gathered, many, document]

    gathered, many, document = asyncio.run(main())
    expected = [facts(plain.search(q, 10, f, *s)) for q, f, s in RANKINGS.values()] * 8
    assert [facts(results) for results in gathered] == expected
    alone = plain.search_many(["alpha", "beta gamma"], 5, RRF(), BM25Scorer())
    assert [facts(r) for r in many] == [facts(r) for r in alone]
    assert (document.key, document.text, document.fields) == (
        plain.get("d007").key,
        plain.get("d007").text,
        plain.get("d007").fields,
    )


def test_a_search_sees_every_write_awaited_before_it_and_pages_work() -> None:
    async def main() -> None:
        index = AsyncIndex(Index(analyzer="simple"))
        await index.add_many(corpus(40))
        await index.add(Document("zz", "alpha alpha alpha alpha"))
        assert (await index.search("alpha", 1, RRF(), BM25Scorer()))[0].key == "zz"
        assert await index.delete("zz")
        assert "zz" not in (await index.search("alpha", 50, RRF(), BM25Scorer())).keys
        with pytest.raises(UnknownKeyError):
            await index.get("zz")
        first = await index.search("alpha", 4, RRF(), BM25Scorer())
        second = await index.search("alpha", 4, RRF(), BM25Scorer(), after=first.next_cursor)
        deep = await index.search("alpha", 8, RRF(), BM25Scorer())
        assert facts([first, second]) == facts(deep)
        with pytest.raises(InvalidParameterError, match="k must be a positive integer"):
            await index.search("alpha", 0, RRF(), BM25Scorer())
        await index.close()

    asyncio.run(main())


def test_the_loop_runs_while_a_call_blocks_its_thread() -> None:
    async def main() -> int:
        index = AsyncIndex(Index(analyzer="simple"))
        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        beating = asyncio.create_task(heartbeat())
        await index.run(lambda: time.sleep(0.3))  # a blocking read, on a thread
        await index.add_many(corpus(20))
        beating.cancel()
        await index.close()
        return ticks

    assert asyncio.run(main()) >= 10


def slow_commit(index: Index, started: threading.Event, release: threading.Event) -> None:
    """Make ``index.commit`` announce its start and wait for ``release`` before committing."""
    commit = index.commit

    def slow() -> int:
        started.set()
        release.wait(10)
        return commit()

    index.commit = slow  # type: ignore[method-assign]


def on_disk(path: Path) -> list[str]:
    with Index.open(path, readonly=True) as reader:
        return sorted(reader.keys())


def test_a_commit_cancelled_while_running_completes_before_the_cancel_arrives(tmp_path: Path) -> None:
    async def main() -> None:
        index = await AsyncIndex.create(tmp_path / "ix", analyzer="simple")
        await index.add_many(corpus(30))
        started, release = threading.Event(), threading.Event()
        slow_commit(index.index, started, release)
        task = asyncio.create_task(index.commit())
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # the cancel waits for the running commit
        assert on_disk(tmp_path / "ix") == []  # nothing half written meanwhile
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The commit is whole: every document durable, nothing pending.
        assert on_disk(tmp_path / "ix") == sorted(d.key for d in corpus(30))
        assert index.index._pending_writes() == ""
        await index.close()

    asyncio.run(main())


def test_a_commit_cancelled_while_queued_never_runs(tmp_path: Path) -> None:
    async def main() -> None:
        index = await AsyncIndex.create(tmp_path / "ix", analyzer="simple")
        await index.add_many(corpus(10))
        await index.commit()
        started, release = threading.Event(), threading.Event()

        # The writer thread is busy; an add and a commit queue behind it, in that order.
        def busy() -> None:
            started.set()
            release.wait(10)

        blocker = asyncio.create_task(index.run_write(busy))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        added = asyncio.create_task(index.add(Document("late", "alpha")))
        queued = asyncio.create_task(index.commit())
        await asyncio.sleep(0.05)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued  # at once: the commit had not started
        release.set()
        await blocker
        await added
        assert on_disk(tmp_path / "ix") == sorted(d.key for d in corpus(10))  # the commit never ran
        assert "late" in index.index  # the write queued before it is whole, pending
        assert await index.commit() > 0
        assert "late" in on_disk(tmp_path / "ix")
        await index.close()

    asyncio.run(main())


def test_async_with_commits_on_success_and_discards_on_an_error(tmp_path: Path) -> None:
    async def good() -> None:
        async with await AsyncIndex.create(tmp_path / "ix", analyzer="simple") as index:
            await index.add_many(corpus(5))

    async def bad() -> None:
        async with await AsyncIndex.open(tmp_path / "ix") as index:
            await index.add(Document("lost", "alpha"))
            raise RuntimeError("boom")

    asyncio.run(good())
    assert on_disk(tmp_path / "ix") == sorted(d.key for d in corpus(5))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="boom"):
            asyncio.run(bad())
    assert any(issubclass(w.category, DiscardedWritesWarning) for w in seen)
    assert "lost" not in on_disk(tmp_path / "ix")


def test_bad_arguments_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="wraps an Index"):
        AsyncIndex("idx")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="executor"):
        AsyncIndex(Index(), executor=4)  # type: ignore[arg-type]
    with pytest.raises(IndexNotFoundError):
        asyncio.run(AsyncIndex.open(tmp_path / "missing"))
