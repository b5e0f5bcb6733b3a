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

import threading
import time
from typing import Any

from weftsearch.engine.inflight import SearchesInFlight
from weftsearch.engine.pacing import YieldToSearches
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import search_snapshot
from weftsearch.engine.snapshot import Snapshot

__all__ = ["WARM_SEARCHES", "WARM_SECONDS", "RecentSearches"]

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
    hash is a Python call over its six fields, made twice a search (the key is
    removed, then stored): about half a microsecond of every search on a small
    index. A query with only text searches as its text does, so the two share
    one key (the newest is kept). Any other query is its own key.
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


class RecentSearches:
    """The newest :data:`WARM_SEARCHES` distinct searches of one index, and their replay.

    Thread-safe: searching threads remember while a writer replays.

    Args:
        searches: the index's searches in flight; a replay rests between
            searches while any run, as the encoder does.

    """

    def __init__(self, searches: SearchesInFlight) -> None:
        #: Search key -> the search, oldest first.
        self.recent: dict[tuple[Any, ...], _Search] = {}
        self._lock = threading.Lock()
        self._searches = searches

    def remember(
        self, query: Query | str, k: int, fuser: Fuser, scorers: tuple[Scorer, ...], depth: int | None
    ) -> None:
        """Keep this search among the newest :data:`WARM_SEARCHES` distinct ones (for :meth:`replay`)."""
        key = (_query_key(query), k, depth, id(fuser), *map(id, scorers))
        with self._lock:
            recent = self.recent
            try:  # hashing the key: a query that cannot be a key (TypeError) is not replayed
                recent.pop(key, None)
                recent[key] = (query, k, fuser, scorers, depth)
            except TypeError:  # nothing changed: pop on an empty dict does not hash, the store raised
                return
            if len(recent) > WARM_SEARCHES:
                del recent[next(iter(recent))]

    def replay(self, snapshot: Snapshot) -> None:
        """Replay the newest searches on ``snapshot``, newest first, for at most :data:`WARM_SECONDS`.

        Best effort: a search that fails here is left for its next run to
        report. The index calls it under its write lock (writers wait,
        searches do not).
        """
        with self._lock:
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
