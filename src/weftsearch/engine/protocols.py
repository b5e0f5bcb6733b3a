"""The two contracts the engine is built around: Scorer and Fuser.

The engine calls every scorer the same way and hands every stream to the fuser
the same way; it never asks what kind of scorer it holds. A fuser sees only
streams (ids and scores) and the key order for ties; it never learns which
scorer produced a stream. Any object with these methods plugs in: there is no
base class to inherit and no registry to join.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import FusedStream, KeyOrder, Stream

__all__ = ["Scorer", "Fuser"]


@runtime_checkable
class Scorer(Protocol):
    """Ranks the documents of a snapshot for a query.

    ``score`` returns at most ``k`` candidates, best first. A document the
    scorer has no evidence for is left out rather than given a score of 0, and
    a scorer with no opinion on the query (no text, no vector, ...) returns
    :meth:`Stream.empty`. The engine re-orders each stream by descending
    score with ties broken by key, so scores must express the scorer's order
    (a stream already in that order, e.g. one made by :meth:`Stream.ranked`,
    is checked in O(k) and not re-sorted).

    Optional batch method (not part of the protocol check): a scorer may also
    offer ``score_many(snapshot, queries, k) -> Sequence[Stream]``, one stream
    per query in order, each exactly what ``score`` returns for that query.
    :meth:`~weftsearch.engine.index.Index.search_many` calls it once per chunk
    of queries instead of ``score`` per query, so a scorer can share work (a
    compiled loop, term lookups) across a batch.

    Optional whole-collection protocol (for a scorer that needs more of the
    collection than one document and its statistics, such as the link graph):
    ``collection_inputs(query) -> Sequence[tuple[Scorer, Query, int]]`` names
    the streams it reads (another scorer, the query that scorer sees, how
    many), and ``score_inputs(snapshot, query, k, inputs) -> Stream`` scores
    from those streams (one per entry, in order, over ``snapshot``'s ids),
    reading of ``snapshot`` only its keys, links, memo and ``allowed(query)``.
    ``score`` must equal ``score_inputs`` fed the named scorers' own streams.
    An :class:`~weftsearch.engine.index.Index` just calls ``score``; a
    ``ShardedIndex`` computes the input streams over all shards (global
    statistics, merged) and calls ``score_inputs`` once at its coordinator on
    a :class:`~weftsearch.engine.snapshot.LinkView` of the whole collection,
    so such a scorer is exact on shards (docs/SCALING.md, "Graph scorers").
    """

    @property
    def name(self) -> str:
        """A short label for explanations and reports (``"bm25"``, ``"vector"``)."""
        ...

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """Return the best ``k`` (at most) candidates of ``snapshot`` for ``query``."""
        ...


@runtime_checkable
class Fuser(Protocol):
    """Merges any number of streams into one ranking."""

    @property
    def name(self) -> str:
        """A short label for explanations and reports (``"rrf"``)."""
        ...

    def fuse(self, streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
        """Return the best ``k`` fused candidates, ties broken by ``keys``."""
        ...
