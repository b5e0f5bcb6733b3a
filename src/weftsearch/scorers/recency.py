"""Recency: exponential decay with a document's age."""

from __future__ import annotations

import numpy as np

from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream, check_k, top_k
from weftsearch.errors import InvalidParameterError
from weftsearch.times import DurationLike, TimeLike, as_seconds, as_timestamp

__all__ = ["RecencyScorer"]


class RecencyScorer:
    """Score ``0.5 ** (age / half_life)``: 1 for the newest, 0.5 one half-life older.

    Documents without a time are absent. A document newer than "now" gets age
    0 (score 1) rather than a score above 1. Complexity: O(N) per query.

    Args:
        half_life: the age at which the score halves: a ``timedelta``
            (``timedelta(days=365)``), an ISO-8601 duration in weeks, days,
            hours, minutes and seconds (``"P365D"``), or a bare number of
            **seconds** (not days: the command line's ``--half-life`` and the
            eval arm ``recency(half_life=...)`` take days). Must be positive.
            Kept as seconds in :attr:`half_life`.
        now: the reference time: a ``datetime`` (naive means UTC), a ``date``,
            an ISO-8601 string or POSIX seconds. The query's ``time`` wins
            when it has one; if both are ``None``, the newest document time in
            the snapshot is used, so that the same index and query always give
            the same scores.
        name: label in explanations.

    Raises:
        InvalidParameterError: ``half_life`` is not a positive duration, or
            ``now`` is not a point in time.

    """

    def __init__(
        self, half_life: DurationLike, *, now: TimeLike | None = None, name: str = "recency"
    ) -> None:
        #: The half-life in seconds.
        self.half_life = as_seconds(half_life, "half_life", InvalidParameterError)
        #: The reference time in POSIX seconds, or ``None`` (the query's, else the newest document's).
        self.now = None if now is None else as_timestamp(now, "RecencyScorer now", InvalidParameterError)
        self._name = name

    @property
    def name(self) -> str:
        """Label in explanations (``"recency"`` by default)."""
        return self._name

    def __repr__(self) -> str:
        return f"RecencyScorer(half_life={self.half_life}, now={self.now})"

    def missing_input(self, snapshot: Snapshot, query: Query) -> str | None:
        """``"document times in the index"`` when no document has a time, else ``None``.

        The optional input protocol (docs/ARCHITECTURE.md, "Adding a
        scorer"); the evaluation harness and the server read it, and an index with
        an embedder asks it whether to embed the query text.
        """
        timed = snapshot.memo(("recency.timed",), lambda: bool((~np.isnan(snapshot.times())).any()))
        return None if timed else "document times in the index"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """The ``k`` most recent documents, scored by decay from "now"."""
        k = check_k(k)
        times = snapshot.times()
        timed = ~np.isnan(times)
        now = query.timestamp if query.time is not None else self.now
        if now is None:
            # The newest time of the whole snapshot (of the whole collection, on a
            # shard's view), filter or not: a document's score never depends on
            # which others the filter lets through, or on the shard it is in.
            now = snapshot.latest_time
            if now is None:
                return Stream.empty()
        allowed = snapshot.allowed(query)
        if allowed is not None:
            timed &= allowed  # the filter applies before the top k
        ids = np.flatnonzero(timed).astype(np.int64)
        if ids.size == 0:
            return Stream.empty()
        stamps = times[ids]
        age = np.maximum(now - stamps, 0.0)
        return Stream(*top_k(ids, np.exp2(-age / self.half_life), k, snapshot))
