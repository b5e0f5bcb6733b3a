"""Warming a new snapshot: the newest searches, replayed on it before it is published.

A commit, merge or refresh builds the snapshot every thread then switches to.
What a search builds lazily on a new snapshot (each new segment's term
lookups and decoded postings, the snapshot's per-term and per-scorer caches:
BM25's impacts and IDFs, the length norms, the compiled path's per-segment
tables) is built here instead, in the committing thread, before any search can
reach the snapshot; the answers are dropped. Lucene's and Solr's searcher
warming does the same (docs/ARCHITECTURE.md, "Warming a new snapshot").
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from weftsearch.engine.inflight import SearchesInFlight
from weftsearch.engine.pacing import YieldToSearches
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import search_snapshot
from weftsearch.engine.snapshot import Snapshot

__all__ = ["WARM_LOG", "WARM_SEARCHES", "WARM_SECONDS", "RecentSearches"]

#: Distinct recent searches a commit, merge or refresh replays on its new snapshot before
#: publishing it (:meth:`RecentSearches.replay`): a handful of a workload's queries touch most of
#: its hot terms, and each replay costs about one cold search (docs/BENCHMARKS.md, issue 31).
WARM_SEARCHES = 16
#: At most this many seconds of replay per publish: bounds what warming adds to a commit.
WARM_SECONDS = 0.2

#: A search as :meth:`Index.search <weftsearch.Index.search>` takes it: query, k, fuser, scorers, depth.
_Search = tuple[Query | str, int, Fuser, tuple[Scorer, ...], int | None]


def _query_key(query: Query | str) -> object:
    """What a search's query counts as in :attr:`RecentSearches.recent`: a plain text query, its text.

    A ``str`` keeps its hash once computed, where a :class:`Query`'s dataclass
    hash is a Python call over its six fields. A query with only text searches
    as its text does, so the two share one key (the newest is kept). Any other
    query is its own key.
    """
    if (
        type(query) is Query
        and query.vector is None
        and query.tree is None
        and query.filter is None
        and query.time is None
        and not query.seeds
    ):
        return query.text
    return query


#: Searches :meth:`RecentSearches.remember` logs (newest last), among which a replay finds the
#: newest :data:`WARM_SEARCHES` distinct ones. A workload that repeats a few searches for
#: more than this many searches in a row warms only those.
WARM_LOG = 1024


class RecentSearches:
    """The newest :data:`WARM_SEARCHES` distinct searches of one index, and their replay.

    Thread-safe: searching threads remember while a writer replays. A search
    only appends itself to a bounded log (:data:`WARM_LOG`); which of the logged
    searches are distinct is worked out when a publish reads them, not by every
    search (the key, the lock and the dictionary moves cost about 1.5 µs of a
    SciFact search, about 6%).

    Args:
        searches: the index's searches in flight; a replay rests between
            searches while any run, as the encoder does.

    """

    def __init__(self, searches: SearchesInFlight) -> None:
        self._log: deque[_Search] = deque(maxlen=WARM_LOG)
        self._searches = searches

    def remember(
        self, query: Query | str, k: int, fuser: Fuser, scorers: tuple[Scorer, ...], depth: int | None
    ) -> None:
        """Log this search for :meth:`replay` (one append: atomic in CPython, no lock). O(1)."""
        self._log.append((query, k, fuser, scorers, depth))

    @property
    def recent(self) -> dict[tuple[Any, ...], _Search]:
        """The newest :data:`WARM_SEARCHES` distinct logged searches by key, oldest first.

        O(:data:`WARM_LOG`).

        Two searches are the same when their query (a text query as its text,
        see :func:`_query_key`), ``k``, ``depth``, fuser and scorers (the same
        objects) are; a query that cannot be hashed is never replayed.
        """
        newest: dict[tuple[Any, ...], _Search] = {}
        for search in reversed(self._log.copy()):  # a copy: searches append while this reads
            query, k, fuser, scorers, depth = search
            key = (_query_key(query), k, depth, id(fuser), *map(id, scorers))
            try:
                if key in newest:
                    continue
                newest[key] = search
            except TypeError:  # an unhashable query: not replayed
                continue
            if len(newest) == WARM_SEARCHES:
                break
        return dict(reversed(newest.items()))

    def replay(self, snapshot: Snapshot) -> None:
        """Replay the newest searches on ``snapshot``, newest first, for at most :data:`WARM_SECONDS`.

        Best effort: a search that fails here is left for its next run to
        report. The index calls it under its write lock (writers wait,
        searches do not).
        """
        searches = list(reversed(self.recent.values()))
        # Between replays, rest while searches run (as the encoder does), so the searches still
        # served by the previous snapshot keep the GIL.
        pause = YieldToSearches(self._searches)
        deadline = time.monotonic() + WARM_SECONDS
        for query, k, fuser, scorers, depth in searches:
            if time.monotonic() > deadline:
                break
            try:
                search_snapshot(snapshot, query, k, fuser, scorers, depth)
            except Exception:  # warming must never fail a commit; the search's next run reports it
                continue
            pause()
