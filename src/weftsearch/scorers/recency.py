"""Recency: exponential decay with a document's age."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np

from weftsearch.engine.documents import TimeLike, as_timestamp
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream, check_k, top_k
from weftsearch.errors import InvalidDocumentError, InvalidParameterError

__all__ = ["RecencyScorer"]


class RecencyScorer:
    """Score ``0.5 ** (age / half_life)``: 1 for the newest, 0.5 one half-life older.

    Args:
        half_life: seconds (number) or a ``timedelta``; must be positive.
        now: the reference time. If ``None``, the query's ``time`` is used, and
            failing that the newest document time in the snapshot, so that the
            same index and query always give the same scores.
        name: label in explanations.

    Documents without a time are absent. A document newer than "now" gets age
    0 (score 1) rather than a score above 1. Complexity: O(N) per query.

    """

    def __init__(
        self, half_life: float | timedelta, *, now: TimeLike | None = None, name: str = "recency"
    ) -> None:
        seconds = half_life.total_seconds() if isinstance(half_life, timedelta) else half_life
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not math.isfinite(seconds)
            or seconds <= 0
        ):
            raise InvalidParameterError(f"half_life must be a positive duration, got {half_life!r}")
        self.half_life = float(seconds)
        try:
            self.now = None if now is None else as_timestamp(now, "RecencyScorer now")
        except InvalidDocumentError as exc:
            raise InvalidParameterError(str(exc)) from None
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
        scorer"); the evaluation harness reads it, the engine never does.
        """
        timed = snapshot.memo(("recency.timed",), lambda: bool((~np.isnan(snapshot.times())).any()))
        return None if timed else "document times in the index"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """The ``k`` most recent documents, scored by decay from "now"."""
        k = check_k(k)
        times = snapshot.times()
        ids = np.flatnonzero(~np.isnan(times)).astype(np.int64)
        if ids.size == 0:
            return Stream.empty()
        stamps = times[ids]
        now = query.timestamp if query.time is not None else self.now
        if now is None:
            now = float(stamps.max())
        age = np.maximum(now - stamps, 0.0)
        return Stream(*top_k(ids, np.exp2(-age / self.half_life), k, snapshot))
