"""What serving a :class:`~weftsearch.distributed.ShardedIndex` needs beyond serving an :class:`Index`.

The server takes any :class:`~weftsearch.engine.searchable.Searchable`
that also writes (:class:`ServedIndex`): an :class:`Index` it opened, or an
open sharded index handed to :func:`weftsearch.server.app.create_app`. It
searches, reads, writes and reports statistics through that protocol alike
for both: a search returns ``ShardedIndex.search_many``'s results, a document
is ``ShardedIndex.get``'s, the statistics ``ShardedIndex.stats``'s, the
generation its cut. What is left here is what only a sharded index has: the
options it cannot be served with (:func:`check_sharded`) and where its
ranking profiles live (:func:`sharded_profile_store`).

This module imports neither the web framework nor
:mod:`weftsearch.distributed` (the library's scale-out package is reached
through the object the caller opened), so the dependency rules hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from weftsearch.documents import Document
from weftsearch.engine.explanation import Explanation
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.searchable import Searchable
from weftsearch.errors import InvalidParameterError
from weftsearch.ranking.profiles import ProfileStore

__all__ = ["ServedIndex", "SupportsShardedServing", "check_sharded", "sharded_profile_store"]


@runtime_checkable
class ServedIndex(Searchable, Protocol):
    """What the server calls of the index it serves: the searchable protocol and the writes."""

    def add_many(self, documents: Iterable[Document], *, progress: bool | None = None) -> int:
        """Add (upsert) documents; how many."""
        ...

    def delete(self, key: str) -> bool:
        """Delete ``key``; whether it was there."""
        ...

    def commit(self) -> int:
        """Make the writes durable; the generation (or cut) committed."""
        ...


@runtime_checkable
class SupportsShardedServing(ServedIndex, Protocol):
    """A sharded index as the server takes it (:class:`weftsearch.distributed.ShardedIndex` is one)."""

    @property
    def shards(self) -> tuple[str, ...]:
        """The shards' names (directory names under :attr:`path`)."""
        ...

    @property
    def cut(self) -> int:
        """The cut searches read."""
        ...

    @property
    def record_name(self) -> str:
        """The file name of the commit record in :attr:`path` (what the server watches)."""
        ...

    def recorded_index_id(self) -> str:
        """The sharded index id the record on disk names now (read again and checked)."""
        ...

    def explain_many(
        self,
        query: Query | str,
        keys: Sequence[str],
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        snapshot: Any = None,
    ) -> list[Explanation]:
        """Each key's explanation, one index's tree; ``snapshot``: the results whose cut is explained."""
        ...


def check_sharded(
    sharded: object,
    readonly: bool,
    writer_socket: str | None,
    vectors_record: str | PathLike[str] | None,
) -> SupportsShardedServing:
    """``sharded``, once the options :func:`create_app` was given with it are known to fit it.

    Raises:
        InvalidParameterError: not a sharded index; closed; ``readonly`` other
            than it was opened; a ``writer_socket`` or ``vectors_record`` (a
            sharded index is served by one process, with the query vectors
            sent in the requests).

    """
    if not isinstance(sharded, SupportsShardedServing):
        raise InvalidParameterError(
            f"create_app serves an index directory or an open ShardedIndex, got {type(sharded).__name__}"
        )
    if sharded.closed:
        raise InvalidParameterError(f"{sharded.path}: the sharded index is closed")
    if writer_socket is not None:
        raise InvalidParameterError("a sharded index is served by one process: no writer_socket")
    if readonly != sharded.readonly:
        raise InvalidParameterError(
            f"readonly={readonly}, but the sharded index at {sharded.path} was opened "
            f"{'read-only' if sharded.readonly else 'writable'}: open it as you mean to serve it"
        )
    if vectors_record is not None:
        raise InvalidParameterError(
            "vectors_record (embedding query texts) is not supported with a sharded index: "
            "send query vectors with the requests"
        )
    return sharded


def sharded_profile_store(sharded: SupportsShardedServing) -> ProfileStore:
    """The sharded index's ranking profiles: ``DIR/profiles``, beside its commit record.

    Each profile file names the sharded index's id as its owner.
    """
    return ProfileStore.at(Path(str(sharded.path)), sharded.index_id)
