"""Serving a :class:`~weftsearch.distributed.ShardedIndex`: the part of the index API the server calls.

:func:`weftsearch.server.app.create_app` takes an open sharded index in place
of a directory and wraps it in :class:`ShardedServing`, which answers the
calls the handlers make of an :class:`~weftsearch.engine.index.Index` by
calling the sharded index's own methods, adding nothing: a search returns
``ShardedIndex.search``'s results, a document is ``ShardedIndex.get``'s.
What the sharded index does not support is refused by it (a scorer reading
links without the whole-collection protocol raises ``PartialGraphError``, a
400) or here, with a typed error, never answered approximately.

This module imports neither the web framework nor
:mod:`weftsearch.distributed` (the library's scale-out package is reached
through the object the caller opened), so the dependency rules hold.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from weftsearch.engine.documents import Document
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults
from weftsearch.engine.stats import IndexStats, SegmentStats
from weftsearch.errors import IndexClosedError, InvalidParameterError
from weftsearch.ranking.profiles import PROFILES_DIR, ProfileStore

__all__ = ["ShardedServing", "SupportsShardedServing"]

LOG = logging.getLogger("weftsearch.server")


@runtime_checkable
class SupportsShardedServing(Protocol):
    """What the server needs of a sharded index (:class:`weftsearch.distributed.ShardedIndex` has it)."""

    @property
    def path(self) -> Path:
        """The sharded index directory."""

    @property
    def index_id(self) -> str | None:
        """The sharded index's id (``None``: recorded before ids, opened read-only)."""

    @property
    def shards(self) -> tuple[str, ...]:
        """The shards' names (directory names under :attr:`path`)."""

    @property
    def cut(self) -> int:
        """The cut searches read."""

    @property
    def readonly(self) -> bool:
        """Whether writes are refused."""

    @property
    def closed(self) -> bool:
        """Whether it was closed."""

    def search_many(
        self, queries: Sequence[Query | str], k: int, fuser: Fuser, *scorers: Scorer, depth: int | None = None
    ) -> Sequence[SearchResults]:
        """Search every shard; the single index's results."""

    def get(self, key: str) -> Document:
        """The document with ``key`` at the cut."""

    def shard_stats(self) -> Mapping[str, IndexStats]:
        """Each shard's :meth:`Index.stats`, by name."""

    def add_many(self, documents: Iterable[Document], *, progress: bool | None = None) -> int:
        """Add (upsert) documents."""

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete keys; how many were present."""

    def commit(self) -> int:
        """Commit every shard and record the cut; its number."""

    def refresh(self) -> int:
        """Publish the writes so far as a new cut; its number."""


class ShardedServing:
    """A sharded index seen through the calls the server makes of an :class:`Index`.

    The generation the API reports is the sharded index's cut number (each
    commit or refresh makes a new cut, docs/SCALING.md "Consistent cut").
    The server does not own the sharded index: :meth:`close` only stops
    serving it; whoever opened it closes it.

    Args:
        sharded: the open sharded index.

    """

    def __init__(self, sharded: SupportsShardedServing) -> None:
        self.sharded = sharded
        self._stopped = False
        # Writes made through the server since the last cut: refresh() makes a new cut only then,
        # so a commit (which is itself a cut searches read) is not followed by an empty one.
        self._unpublished = False
        self._vector_dim: int | None = None

    def profile_store(self) -> ProfileStore:
        """The sharded index's ranking profiles: ``DIR/profiles``, beside its commit record.

        Each profile file names the sharded index's id as its owner. Earlier
        versions kept them in the first shard's directory
        (``DIR/shard-0000/profiles``): when that holds profiles and ``DIR/profiles``
        none, a writable server copies every version there (same names,
        versions and contents; the old files stay) and logs it, so no profile
        is lost. A read-only server writes nothing: it reads the old place
        until a writable one has moved them (and says so in the log), as it
        does for a sharded index recorded before it had an id.

        Raises:
            CorruptIndexError: a profile file of the old place fails its checks.

        """
        root = Path(self.sharded.path)
        legacy = root / self.sharded.shards[0]
        index_id = self.sharded.index_id
        if index_id is None:
            LOG.warning(
                "%s was recorded before sharded indexes had an id and is open read-only: its ranking "
                "profiles are read from %s until a writable open gives it one",
                root,
                legacy / PROFILES_DIR,
            )
            return ProfileStore(legacy)
        store = ProfileStore.at(root, index_id)
        if store.names() or not (legacy / PROFILES_DIR).is_dir():
            return store
        old = ProfileStore(legacy)
        if not old.names():
            return store
        if self.sharded.readonly:
            LOG.warning(
                "the ranking profiles of %s are still in %s (where earlier versions kept them); a read-only "
                "server reads them there, and a writable one moves them to %s",
                root,
                old.folder,
                store.folder,
            )
            return old
        copied = store.adopt(old)
        LOG.warning(
            "moved the ranking profiles of %s from %s to %s (%d versions of %s); the old files are left "
            "in place and no longer read",
            root,
            old.folder,
            store.folder,
            copied,
            ", ".join(old.names()),
        )
        return store

    @property
    def readonly(self) -> bool:
        """Whether the sharded index refuses writes."""
        return self.sharded.readonly

    @property
    def closed(self) -> bool:
        """Whether the sharded index was closed (or the server stopped serving it)."""
        return self._stopped or self.sharded.closed

    @property
    def generation(self) -> int:
        """The cut searches read."""
        return self.sharded.cut

    @property
    def published(self) -> int:
        """The cut searches read (an index's published snapshot generation)."""
        return self.sharded.cut

    @property
    def vector_dim(self) -> int | None:
        """The width of the shards' vectors, ``None`` while none has any.

        Asked of the shards (one round trip each) until known, then kept: an
        index's vector width never changes once set.
        """
        if self._vector_dim is None:
            self._vector_dim = self.stats().vector_dim
        return self._vector_dim

    def _check_open(self) -> None:
        if self.closed:
            raise IndexClosedError(f"{self.sharded.path}: the sharded index is closed")

    def search(
        self, query: Query, k: int, fuser: Fuser, *scorers: Scorer, depth: int | None = None
    ) -> SearchResults:
        """``ShardedIndex.search`` (every shard must answer: no partial results over HTTP)."""
        return self.search_many([query], k, fuser, *scorers, depth=depth)[0]

    def search_many(
        self,
        queries: Sequence[Query],
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        threads: int | None = None,
    ) -> list[SearchResults]:
        """``ShardedIndex.search_many`` (``threads`` is unused: the shards search in parallel)."""
        self._check_open()
        return list(self.sharded.search_many(list(queries), k, fuser, *scorers, depth=depth))

    def get(self, key: str) -> Document:
        """``ShardedIndex.get``: the document at the cut searches read."""
        self._check_open()
        return self.sharded.get(key)

    def add_many(self, documents: Sequence[Document], *, progress: bool | None = None) -> int:
        """``ShardedIndex.add_many`` (visible to searches at the next :meth:`refresh`)."""
        self._check_open()
        added = self.sharded.add_many(documents, progress=False)
        self._unpublished = True
        return added

    def delete(self, key: str) -> bool:
        """Delete ``key`` from its shard; whether it was there."""
        self._check_open()
        found = self.sharded.delete_many([key]) > 0
        self._unpublished = self._unpublished or found
        return found

    def commit(self) -> int:
        """``ShardedIndex.commit``: every shard commits, then the cut is recorded; its number."""
        self._check_open()
        committed = self.sharded.commit()
        self._unpublished = False
        return committed

    def refresh(self) -> int:
        """Publish the server's writes since the last cut as a new cut; else keep the cut.

        A read-only sharded index adopts the newest cut its writer recorded
        (``ShardedIndex.refresh``: one record read when nothing changed), as a
        read-only :class:`Index` adopts the newest commit; the server calls
        this before every read.
        """
        self._check_open()
        if self.sharded.readonly:
            return self.sharded.refresh()
        if not self._unpublished:
            return self.sharded.cut
        published = self.sharded.refresh()
        self._unpublished = False
        return published

    def stats(self) -> IndexStats:
        """The shards' :meth:`Index.stats` summed: documents and bytes added, segments named by shard.

        ``generation`` is the cut searches read; ``path`` the sharded index's
        directory. Refuses shards that disagree on the analyzer or the vector
        type (they were created with the same options, so they never do).
        """
        self._check_open()
        parts = self.sharded.shard_stats()
        analyzers = {s.analyzer for s in parts.values()}
        dtypes = {s.vector_dtype for s in parts.values()}
        widths = {s.vector_dim for s in parts.values() if s.vector_dim is not None}
        if len(analyzers) != 1 or len(dtypes) != 1 or len(widths) > 1:
            raise InvalidParameterError(
                f"{self.sharded.path}: the shards disagree on analyzer {sorted(analyzers)}, "
                f"vector type {sorted(dtypes)} or vector width {sorted(widths)}"
            )
        return IndexStats(
            path=str(self.sharded.path),
            documents=sum(s.documents for s in parts.values()),
            pending=sum(s.pending for s in parts.values()),
            generation=self.sharded.cut,
            analyzer=analyzers.pop(),
            vector_dim=widths.pop() if widths else None,
            vector_dtype=dtypes.pop(),
            segments=tuple(
                SegmentStats(
                    None if segment.name is None else f"{name}/{segment.name}",
                    segment.documents,
                    segment.deleted,
                    segment.bytes,
                )
                for name, s in parts.items()
                for segment in s.segments
            ),
            bytes_on_disk=sum(s.bytes_on_disk for s in parts.values()),
        )

    def __len__(self) -> int:
        """Live documents over every shard."""
        return sum(s.documents for s in self.sharded.shard_stats().values())

    def close(self, *, discard: bool = False) -> None:
        """Stop serving (the sharded index stays open: its opener closes it)."""
        self._stopped = True
