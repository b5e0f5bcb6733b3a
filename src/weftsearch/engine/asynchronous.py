"""An asyncio face of an index: :class:`AsyncIndex`.

Every call of :class:`~weftsearch.Index` blocks: a search runs compiled
scoring kernels, a write analyses text, a commit writes and syncs files. An
:class:`AsyncIndex` runs them on threads and awaits them, so the event loop
keeps serving while they run:

* **Reads** (``search``, ``search_many``, ``get``) go to a bounded thread pool
  (by default one shared by every AsyncIndex of the process, with one thread
  per CPU). Threads are the right tool here, not an event loop trick: the
  scoring kernels release the GIL, so searches on several threads really run
  in parallel (more threads than cores would only queue), and asyncio has no
  native file I/O to await instead (segments are memory maps; a page fault
  blocks whatever thread touches it). The pool is bounded so that a burst of
  ``gather()`` searches queues in it rather than starting a thread each, and
  so that it never starves the loop's default executor other libraries use.
* **Writes** (``add``, ``add_many``, ``delete``, ``delete_many``,
  ``commit``, ``merge``, ``close``) go to one writer thread of this
  AsyncIndex, in the order they were awaited: ``await add(...)`` then
  ``await commit()`` commits that document, as in one thread. A search
  awaited after a write sees it (the writer publishes its writes first, as
  the writing thread's next search does with an Index).

**Cancellation never leaves half a write.** A write whose await is
cancelled either had not started (it is then dropped: it never runs) or
runs to its end before the ``CancelledError`` reaches the caller: once the
cancelled await returns, the index holds the whole write or none of it, and
a commit is either durable or not begun. A cancelled read just has its
result dropped (a read changes nothing).

Example::

    async with await AsyncIndex.create("idx") as index:
        await index.add_many(documents)
        await index.commit()
        hits = await asyncio.gather(*(index.search(q, 10, RRF(), BM25Scorer()) for q in queries))
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from os import PathLike
from types import TracebackType
from typing import Any, TypeVar

from weftsearch.documents import Document
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import InvalidParameterError

__all__ = ["AsyncIndex", "read_executor"]

T = TypeVar("T")

_SHARED: ThreadPoolExecutor | None = None
_SHARED_LOCK = threading.Lock()


def read_executor() -> ThreadPoolExecutor:
    """The thread pool AsyncIndex reads run on by default: one per process, one thread per CPU."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = ThreadPoolExecutor(
                max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="weft-search-read"
            )
        return _SHARED


async def _read(executor: Executor, call: Callable[[], T]) -> T:
    """``call()`` on ``executor``, awaited; cancelling drops a queued call and forgets a running one."""
    return await asyncio.wrap_future(executor.submit(call))


async def _settled(future: Future[T]) -> T:
    """Await ``future``; if cancelled meanwhile, drop it when queued, else wait for its end, then re-raise.

    The second wait is shielded from further cancellations: the caller's
    ``CancelledError`` arrives only once the write is wholly done or was
    never begun.
    """
    waited = asyncio.wrap_future(future)
    try:
        return await asyncio.shield(waited)
    except asyncio.CancelledError:
        if future.cancel():  # still queued: it never runs
            raise
        while not future.done():
            try:
                await asyncio.shield(waited)
            except asyncio.CancelledError:
                continue  # cancelled again: still wait for the running write to end
            except BaseException:
                break
        raise


class AsyncIndex:
    """An :class:`~weftsearch.Index` for asyncio: every call awaited, run on threads.

    See :mod:`weftsearch.engine.asynchronous` for where each call runs and
    what cancelling one does. The wrapped index stays usable directly
    (:attr:`index`). :meth:`close`, and leaving ``async with``, close the
    wrapped index as ``close`` and ``with`` do for an Index (leaving the
    block normally commits pending writes; by an exception discards them).

    Args:
        index: the index to run calls on.
        executor: where reads run; ``None`` shares :func:`read_executor`
            (one thread per CPU) with every other AsyncIndex of the process.
            Writes always run on this AsyncIndex's own writer thread.

    Raises:
        InvalidParameterError: ``index`` is not an Index, or ``executor`` not an Executor.

    """

    def __init__(self, index: Index, *, executor: Executor | None = None) -> None:
        if not isinstance(index, Index):
            raise InvalidParameterError(f"AsyncIndex wraps an Index, got {type(index).__name__}")
        if executor is not None and not isinstance(executor, Executor):
            raise InvalidParameterError(f"executor must be a concurrent.futures.Executor, got {executor!r}")
        self._index = index
        self._reads = executor
        self._writer: ThreadPoolExecutor | None = None
        self._writer_lock = threading.Lock()
        # Writes the writer thread made since it last published; a search publishes them first.
        self._unpublished = False
        self._publishing: Future[bool] | None = None

    # ------------------------------------------------------------------ opening and closing

    @classmethod
    async def open(
        cls, path: str | PathLike[str], *, executor: Executor | None = None, **options: Any
    ) -> AsyncIndex:
        """:meth:`Index.open <weftsearch.Index.open>` (``options`` as there) on a thread, wrapped."""
        opened = await _read(executor or read_executor(), functools.partial(Index.open, path, **options))
        return cls(opened, executor=executor)

    @classmethod
    async def create(
        cls, path: str | PathLike[str], *, executor: Executor | None = None, **options: Any
    ) -> AsyncIndex:
        """:meth:`Index.create <weftsearch.Index.create>` (``options`` as there) on a thread, wrapped."""
        made = await _read(executor or read_executor(), functools.partial(Index.create, path, **options))
        return cls(made, executor=executor)

    @property
    def index(self) -> Index:
        """The wrapped index (its descriptive properties are safe to read from the loop)."""
        return self._index

    async def __aenter__(self) -> AsyncIndex:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Leave as ``with Index`` does: commit pending writes normally, discard them on an exception."""
        try:
            await self._write(self._index.__exit__, exc_type, exc, traceback)
        finally:
            self._stop_writer()

    async def close(self, *, discard: bool = False) -> None:
        """:meth:`Index.close <weftsearch.Index.close>` after every write awaited before it."""
        try:
            await self._write(functools.partial(self._index.close, discard=discard))
        finally:
            if self._index.closed:
                self._stop_writer()

    def _stop_writer(self) -> None:
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=False)

    # ------------------------------------------------------------------ running calls

    def _read_pool(self) -> Executor:
        return self._reads if self._reads is not None else read_executor()

    def _write_pool(self) -> ThreadPoolExecutor:
        with self._writer_lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="weft-search-write")
            return self._writer

    async def _write(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` on the writer thread, after the writes before it; cancel-safe (see the module)."""
        return await _settled(self._write_pool().submit(self._written, call, *args))

    def _written(self, call: Callable[..., T], *args: Any) -> T:
        try:
            return call(*args)
        finally:
            self._unpublished = True

    async def _published(self) -> None:
        """Publish the writer thread's writes (so reads on other threads see them)."""
        if self._unpublished and not self._index.readonly and not self._index.closed:
            self._unpublished = False
            self._publishing = self._write_pool().submit(self._index.refresh)
        pending = self._publishing
        if pending is not None and not pending.done():
            # Shared by every search waiting for it: one caller's cancel must not cancel it.
            await asyncio.shield(asyncio.wrap_future(pending))

    # ------------------------------------------------------------------ reads

    async def search(
        self,
        query: Query | str,
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        snapshot: Snapshot | None = None,
        offset: int = 0,
        after: str | None = None,
    ) -> SearchResults:
        """:meth:`Index.search <weftsearch.Index.search>` on a read thread (the same arguments and errors)."""
        await self._published()
        call = functools.partial(
            self._index.search,
            query,
            k,
            fuser,
            *scorers,
            depth=depth,
            snapshot=snapshot,
            offset=offset,
            after=after,
        )
        return await _read(self._read_pool(), call)

    async def search_many(
        self,
        queries: Sequence[Query | str],
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        threads: int | None = None,
        facets: Sequence[str] | None = None,
        facet_k: int = 10,
    ) -> list[SearchResults]:
        """:meth:`Index.search_many <weftsearch.Index.search_many>` on a read thread."""
        await self._published()
        call = functools.partial(
            self._index.search_many,
            queries,
            k,
            fuser,
            *scorers,
            depth=depth,
            threads=threads,
            facets=facets,
            facet_k=facet_k,
        )
        return await _read(self._read_pool(), call)

    async def get(self, key: str) -> Document:
        """:meth:`Index.get <weftsearch.Index.get>` on a read thread."""
        await self._published()
        return await _read(self._read_pool(), functools.partial(self._index.get, key))

    async def snapshot(self) -> Snapshot:
        """The snapshot searches read now (with every awaited write published)."""
        await self._published()
        return await _read(self._read_pool(), self._index.snapshot)

    async def run(self, call: Callable[[], T]) -> T:
        """Any other blocking read (``call()``) on a read thread, after awaited writes are published."""
        await self._published()
        return await _read(self._read_pool(), call)

    # ------------------------------------------------------------------ writes

    async def run_write(self, call: Callable[[], T]) -> T:
        """Any other blocking write (``call()``, using :attr:`index`) on the writer thread, in order.

        Cancel-safe as every write here: a cancelled await returns only once
        ``call`` has ended, or when it never started.
        """
        return await self._write(call)

    async def add(self, document: Document) -> None:
        """:meth:`Index.add <weftsearch.Index.add>` on the writer thread."""
        await self._write(self._index.add, document)

    async def add_many(self, documents: Iterable[Document], **options: Any) -> int:
        """:meth:`Index.add_many <weftsearch.Index.add_many>` (``options`` as there) on the writer thread.

        ``documents`` is consumed on the writer thread: pass a list, not a
        generator that needs the event loop.
        """
        return await self._write(functools.partial(self._index.add_many, documents, **options))

    async def delete(self, key: str) -> bool:
        """:meth:`Index.delete <weftsearch.Index.delete>` on the writer thread."""
        return await self._write(self._index.delete, key)

    async def delete_many(self, keys: Iterable[str]) -> int:
        """:meth:`Index.delete_many <weftsearch.Index.delete_many>` on the writer thread."""
        return await self._write(self._index.delete_many, keys)

    async def commit(self) -> int:
        """:meth:`Index.commit <weftsearch.Index.commit>` on the writer thread: the generation committed.

        Cancelled while running, the commit still completes (it is durable)
        before the ``CancelledError`` is raised; cancelled while queued, it
        never starts.
        """
        return await self._write(self._index.commit)

    async def merge(self, *, force: bool = False) -> int:
        """:meth:`Index.merge <weftsearch.Index.merge>` on the writer thread."""
        return await self._write(functools.partial(self._index.merge, force=force))
