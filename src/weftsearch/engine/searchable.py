"""What every searchable index offers: :class:`Searchable`, the protocol the callers of an index use.

An :class:`~weftsearch.Index` and a
:class:`~weftsearch.distributed.ShardedIndex` both implement it (the tests
check both, at run time and for mypy), and they answer alike: a search's
tail (fusion, the fuser's checks, the explained results) is the same code,
:mod:`weftsearch.engine.search`. The server, the LangChain retriever and
evaluation take a ``Searchable`` where they take an index, so they serve a
sharded index as they serve one index, with no adapter for the search path.

The protocol holds the read side only: writes, commits and closing stay with
whoever opened the index (their signatures differ: an index commits one
directory, a sharded index records a cut over its shards).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from weftsearch.documents import Document
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults
from weftsearch.engine.stats import IndexStats
from weftsearch.highlight import HighlightOptions

__all__ = ["Searchable"]


@runtime_checkable
class Searchable(Protocol):
    """An index that can be searched: one index, or one split over shards.

    Searches read one consistent state (a snapshot, or a sharded index's cut)
    from start to finish; :meth:`refresh` moves it forward (a read-only index
    adopts the newest commit on disk); :attr:`SearchResults.generation` names the state a search read.
    ``isinstance(obj, Searchable)`` checks that the
    members exist, not their signatures (mypy checks those).
    """

    @property
    def path(self) -> Path | None:
        """The index's directory, ``None`` for an index in memory."""
        ...

    @property
    def index_id(self) -> str:
        """The index's id (32 hex digits, ``""`` for an index in memory)."""
        ...

    @property
    def generation(self) -> int:
        """An index's generation (every write bumps it), a sharded index's cut number (every cut does)."""
        ...

    @property
    def readonly(self) -> bool:
        """Whether the index was opened read-only (writes are refused)."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the index was closed."""
        ...

    @property
    def vector_dim(self) -> int | None:
        """The width of the stored vectors, ``None`` while the index holds none."""
        ...

    def search(
        self,
        query: Query | str,
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        offset: int = 0,
        after: str | None = None,
        facets: Sequence[str] | None = None,
        facet_k: int = 10,
        highlight: bool | HighlightOptions | None = None,
    ) -> SearchResults:
        """The ``k`` best documents for ``query`` (from ``offset``, or after a cursor's hit), explained.

        Pages: :mod:`weftsearch.engine.pages`.
        ``facets``: fields whose value counts over every document the query's
        filter matches go in ``results.facets`` (``facet_k`` values each).
        ``highlight``: each hit's snippets of its stored text fields
        (:mod:`weftsearch.highlight`).
        """
        ...

    def search_many(
        self,
        queries: Sequence[Query | str],
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        threads: int | None = None,
        facets: Sequence[str] | None = None,
        facet_k: int = 10,
    ) -> Sequence[SearchResults]:
        """:meth:`search` for each of ``queries``, all reading one state, in order (``facets`` each)."""
        ...

    def get(self, key: str) -> Document:
        """The stored document with ``key`` (``UnknownKeyError`` when there is none)."""
        ...

    def stats(self) -> IndexStats:
        """Counts and sizes: documents, segments, generation, vectors, bytes on disk."""
        ...

    def refresh(self) -> object:
        """Make the newest state visible to searches (a read-only index adopts the newest commit)."""
        ...
