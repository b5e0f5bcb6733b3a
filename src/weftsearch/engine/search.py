"""Running a search: call each scorer, check its stream, fuse, explain.

This is the only place scorers and a fuser meet, and it treats every scorer
alike: it calls ``score``, checks the stream against the contract, puts it in
canonical order, and passes the list on. It never branches on what a scorer
is, so the fused ranking for a snapshot depends only on the streams.

The tail of a search (fuse, check the fuser's output, resolve keys, build
the explained results: :func:`fuse_candidates` then :func:`explain_fused`)
is written once, over plain arguments (an :class:`IdSpace`, a key resolver,
a fields reader), and both :meth:`Index.search <weftsearch.Index.search>` and
the sharded coordinator (:mod:`weftsearch.distributed.sharded`) call it, so a
check added to the tail reaches both.

One stream passes through: a search with exactly one scorer returns that
stream's top ``k`` with the scorer's own scores, and the fuser is not called
(:func:`fuse_candidates`). Fusing one stream could only rewrite its scores (RRF
turns every score into ``1 / (k + rank)``, so tied scores become distinct and
the key tie-break becomes part of the score) without adding evidence.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, overload

import numpy as np
from numpy.typing import NDArray

from weftsearch.documents import FieldValue
from weftsearch.engine.facets import (
    Facets,
    check_facet_fields,
    check_facet_k,
    count_facets,
    facets_to_json,
    top_facets,
)
from weftsearch.engine.filters import Filter
from weftsearch.engine.pages import PageStart, check_offset
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import (
    FusedStream,
    KeyOrder,
    PlanValue,
    Stream,
    _is_vouched,
    _is_vouched_batch,
    _VouchedBatch,
    check_k,
    order_by_score,
)
from weftsearch.errors import InvalidParameterError, InvalidQueryError, ScorerOutputError
from weftsearch.highlight import FieldHighlight

__all__ = [
    "SignalHit",
    "Hit",
    "SearchResults",
    "ExplainArrays",
    "search_snapshot",
    "search_snapshot_many",
    "facet_mask",
    "query_facets",
    "score_queries",
    "MAX_THREADS",
    "results_of",
    "in_canonical_order",
    "DEFAULT_DEPTH",
    "canonical_stream",
    "stream_labels",
    "fuse_streams",
    "PASSTHROUGH",
    "IdSpace",
    "Fused",
    "check_fused",
    "fuse_candidates",
    "explain_fused",
    "page_of",
]

#: Candidates asked of each scorer when ``depth`` is not given: ``max(k, DEFAULT_DEPTH)``.
DEFAULT_DEPTH = 100

#: :attr:`SearchResults.fuser` of a one-scorer search: the stream passed through unfused.
PASSTHROUGH = "passthrough"


class IdSpace(KeyOrder, Protocol):
    """Where a search's candidate ids live: their range and their key order.

    All the search tail (:func:`fuse_candidates`, :func:`check_fused`) reads
    of the source of its streams: a :class:`Snapshot` is one, and so are the
    merged candidates of a sharded search (ids are positions in their sorted
    keys). The fuser receives it as its :class:`KeyOrder`.
    """

    @property
    def n_docs(self) -> int:
        """Ids run from 0 to ``n_docs - 1``."""
        ...

    @property
    def ids_follow_keys(self) -> bool:
        """Whether id order is key order (then :meth:`key_rank` is the ids themselves)."""
        ...


#: Each stream's plan, or what makes them when first read (a batch's results: :func:`_passed_through_batch`).
_Plans = tuple[dict[str, PlanValue] | None, ...] | Callable[[], tuple[dict[str, PlanValue] | None, ...]]

#: Computes one hit's highlights from its key (see :meth:`SearchResults._highlight_with`).
Highlighter = Callable[[str], Mapping[str, FieldHighlight]]


@dataclass(frozen=True, slots=True)
class SignalHit:
    """One stream's part in one hit.

    Attributes:
        signal: the stream's label (the scorer's ``name``, suffixed ``#2``, ``#3``
            when two scorers share a name).
        rank: 1-based rank of the document in that stream, ``None`` if absent.
        score: the scorer's raw score, ``None`` if absent.
        contribution: the part of the fused score owed to this stream.

    """

    signal: str
    rank: int | None
    score: float | None
    contribution: float


@dataclass(frozen=True, slots=True)
class Hit:
    """One fused result.

    Attributes:
        key: the document's key.
        rank: 1-based position in the fused ranking.
        score: the fused score.
        signals: one :class:`SignalHit` per stream, in the order scorers were given.
        fields: the document's stored metadata.
        highlights: when the search asked for them (``highlight=``), the
            snippets of each highlighted text field, by field name (see
            :mod:`weftsearch.highlight`); ``None`` when not asked. Computed
            when the hit is first read, not by the search.

    """

    key: str
    rank: int
    score: float
    signals: tuple[SignalHit, ...]
    fields: Mapping[str, FieldValue]
    highlights: Mapping[str, FieldHighlight] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this hit (``highlights`` only when the search asked for them)."""
        row: dict[str, Any] = {
            "key": self.key,
            "rank": self.rank,
            "score": self.score,
            "fields": dict(self.fields),
            "signals": [
                {"signal": s.signal, "rank": s.rank, "score": s.score, "contribution": s.contribution}
                for s in self.signals
            ],
        }
        if self.highlights is not None:
            row["highlights"] = {name: found.to_dict() for name, found in self.highlights.items()}
        return row


@dataclass(frozen=True, slots=True)
class ExplainArrays:
    """Every hit's explanation as arrays: row ``i`` is hit ``i`` (best first), column ``j`` is stream ``j``.

    What :attr:`Hit.signals` says, without building one object per hit and
    stream. The arrays are read-only and shared with the results.

    Attributes:
        signals: stream labels, one per column (as :attr:`SearchResults.signals`).
        ranks: int64 ``(hits, streams)``: the hit's 1-based rank in the stream,
            0 where the stream does not hold it (:attr:`SignalHit.rank` ``None``).
        scores: float64 ``(hits, streams)``: the stream's raw score of the hit,
            NaN where the stream does not hold it (:attr:`SignalHit.score` ``None``).
        contributions: float64 ``(hits, streams)``: the part of the fused score
            owed to each stream (:attr:`SignalHit.contribution`).

    """

    signals: tuple[str, ...]
    ranks: NDArray[np.int64]
    scores: NDArray[np.float64]
    contributions: NDArray[np.float64]


def _frozen_array(values: NDArray[Any]) -> NDArray[Any]:
    if values.flags.writeable:  # a passed-through stream's views are read-only already
        values.setflags(write=False)
    return values


class SearchResults(Sequence[Hit]):
    """The hits of one search, best first, with the context that produced them.

    A search fills the results with arrays (fused scores, and each
    stream's ranks, scores and contributions), decides which documents are
    hits, and makes their keys when one is first read (:attr:`keys`, a hit,
    :meth:`to_dict`, :attr:`next_cursor`); it builds a :class:`Hit`
    (with its :class:`SignalHit` explanation and its fields) only when one
    is read: by indexing, iteration, :attr:`hits` or :meth:`to_dict`. A
    caller that needs only :attr:`keys`, :attr:`scores`, :attr:`score_array`
    or :meth:`explain_arrays` never pays for Hit objects. The results built
    by a search keep a reference to the snapshot searched (fields are read
    from its segments, and :attr:`next_cursor` keeps it for the next page),
    so hold them no longer than needed. Safe to read from many threads.

    Attributes:
        signals: stream labels, in the order scorers were given.
        fuser: the fuser's name, or :data:`PASSTHROUGH` when one scorer's
            stream was passed through without calling the fuser.
        generation: the snapshot generation searched.
        depth: candidates asked of each scorer.
        cut_short: labels of the streams a budget stopped before they found
            ``min(depth, documents they have evidence for)`` candidates (their
            :attr:`Stream.complete <weftsearch.engine.stream.Stream.complete>`
            is ``False``), in scorer order; empty when no budget was hit, and
            then every stream is as long as the filter and its evidence allow.
        offset: hits of the ranking before these (0 for a first page): the
            first hit's :attr:`Hit.rank` is ``offset + 1``.
        facets: when the search asked for them (``search(..., facets=[...])``),
            field -> ``[(value, count), ...]`` over every live document the
            query's filter matches (:mod:`weftsearch.engine.facets`); else ``None``.

    """

    __slots__ = (
        "_built",
        "_contributions",
        "_count",
        "_cursor",
        "_field_rows",
        "_fields",
        "_highlighter",
        "_key_source",
        "_keys",
        "_plans",
        "_ranks",
        "_rows",
        "_scores",
        "_signal_scores",
        "cut_short",
        "depth",
        "facets",
        "fuser",
        "generation",
        "offset",
        "signals",
    )

    def __init__(
        self,
        hits: Sequence[Hit],
        signals: Sequence[str],
        fuser: str,
        generation: int,
        depth: int,
        *,
        plans: Sequence[Mapping[str, PlanValue] | None] | None = None,
        cut_short: Sequence[str] = (),
    ) -> None:
        hits = tuple(hits)
        self.signals = tuple(signals)
        self.fuser = fuser
        self.generation = generation
        self.depth = depth
        self._plans: _Plans = _plan_copies(plans, len(self.signals))
        self.cut_short: tuple[str, ...] = tuple(cut_short)
        self.facets: Facets | None = None
        width = len(self.signals)
        self._keys: tuple[str, ...] | None = tuple(hit.key for hit in hits)
        self._key_source: Callable[[], Sequence[str]] | None = None
        self._count = len(hits)
        self._scores: NDArray[np.float64] = _frozen_array(np.array([hit.score for hit in hits], np.float64))
        ranks = np.zeros((len(hits), width), dtype=np.int64)
        scores = np.full((len(hits), width), np.nan, dtype=np.float64)
        contributions = np.zeros((len(hits), width), dtype=np.float64)
        for row, hit in enumerate(hits):
            for column, signal in enumerate(hit.signals[:width]):
                ranks[row, column] = signal.rank or 0
                scores[row, column] = np.nan if signal.score is None else signal.score
                contributions[row, column] = signal.contribution
        self._ranks: NDArray[np.int64] = _frozen_array(ranks)
        self._signal_scores: NDArray[np.float64] = _frozen_array(scores)
        self._contributions: NDArray[np.float64] = _frozen_array(contributions)
        self._fields: Callable[[], Sequence[Mapping[str, FieldValue]]] | None = None
        self._field_rows: Sequence[Mapping[str, FieldValue]] = tuple(hit.fields for hit in hits)
        self._built: list[Hit | None] = list(hits)
        self._rows: tuple[list[Any], list[Any], list[Any], list[Any]] | None = None
        self.offset = 0
        self._cursor: str | Callable[[int, float, str], str] | None = None
        self._highlighter: Highlighter | None = None

    @classmethod
    def _from_arrays(
        cls,
        *,
        keys: Sequence[str] | Callable[[], Sequence[str]],
        scores: NDArray[np.float64],
        ranks: NDArray[np.int64],
        signal_scores: NDArray[np.float64],
        contributions: NDArray[np.float64],
        fields: Callable[[], Sequence[Mapping[str, FieldValue]]],
        signals: Sequence[str],
        fuser: str,
        generation: int,
        depth: int,
        streams: Sequence[Stream] = (),
    ) -> SearchResults:
        """Results over arrays (the search's own constructor); hits are built when read.

        ``keys``: the hits' keys, or what returns them (called when a key is
        first read: :attr:`keys`, a hit, :meth:`to_dict`, iteration or
        :attr:`next_cursor`; it may be called again by a racing thread and
        must then return equal keys). ``fields`` returns every hit's fields
        mapping, in hit order; it is called at most once, when the first hit
        is built. ``scores`` has one row per hit. ``streams``: the
        canonical streams searched, in label order, for their plans and
        completeness (their plans are already private copies). O(streams):
        nothing else is copied.
        """
        results = object.__new__(cls)
        results.signals = tuple(signals)
        results.fuser = fuser
        results.generation = generation
        results.depth = depth
        if len(streams) == 1:  # one stream passed through: the common search
            stream = streams[0]
            results._plans = (stream.plan,)
            results.cut_short = () if stream.complete else results.signals[:1]
        else:
            results._plans = tuple(stream.plan for stream in streams) or (None,) * len(results.signals)
            results.cut_short = tuple(
                label for label, stream in zip(results.signals, streams, strict=False) if not stream.complete
            )
        if callable(keys):
            results._keys, results._key_source = None, keys
        else:
            results._keys, results._key_source = tuple(keys), None
        results._count = int(scores.shape[0])
        results._scores = _frozen_array(scores)
        results._ranks = _frozen_array(ranks)
        results._signal_scores = _frozen_array(signal_scores)
        results._contributions = _frozen_array(contributions)
        results._fields = fields
        results._field_rows = ()
        results._built = [None] * results._count
        results._rows = None
        results.offset = 0
        results._cursor = None
        results._highlighter = None
        results.facets = None
        return results

    @classmethod
    def _passed_through(
        cls,
        keys: Sequence[str] | Callable[[], Sequence[str]],
        scores: NDArray[np.float64],
        fields: Callable[[], Sequence[Mapping[str, FieldValue]]],
        signals: Sequence[str],
        fuser: str,
        generation: int,
        depth: int,
        stream: Stream,
    ) -> SearchResults:
        """:meth:`_from_arrays` of one stream passed through with every hit kept: the search's common results.

        ``scores``: the stream's scores (or their first rows), one per hit, the
        score, signal score and contribution of each; the ranks are the shared
        column ``1..n``. The same results as :meth:`_from_arrays`, without its
        keyword parsing and per-array checks (one array to make read-only,
        the others views of it or already read-only). O(1).
        """
        results = object.__new__(cls)
        results.signals = tuple(signals)
        results.fuser = fuser
        results.generation = generation
        results.depth = depth
        results._plans = (stream.plan,)
        results.cut_short = () if stream.complete else results.signals[:1]
        if callable(keys):
            results._keys, results._key_source = None, keys
        else:
            results._keys, results._key_source = tuple(keys), None
        count = int(scores.shape[0])
        results._count = count
        results._scores = _frozen_array(scores)
        results._ranks = _rank_column(count)
        results._signal_scores = results._contributions = scores.reshape(-1, 1)  # read-only as scores
        results._fields = fields
        results._field_rows = ()
        results._built = [None] * count
        results._rows = None
        results.offset = 0
        results._cursor = None
        results._highlighter = None
        results.facets = None
        return results

    def _sliced(self, start: int, stop: int) -> SearchResults:
        """Rows ``start:stop`` of these results as results of their own (hits ranked from ``start + 1``).

        The arrays are views; fields are read (for the slice only) when a hit is first read. O(1).
        """
        page = object.__new__(type(self))
        page.signals, page.fuser = self.signals, self.fuser
        page.generation, page.depth = self.generation, self.depth
        page._plans, page.cut_short = self._plans, self.cut_short
        keys = self._key_state()
        if callable(keys):
            page._keys = None
            page._key_source = lambda: tuple(keys())[start:stop]
        else:
            page._keys, page._key_source = keys[start:stop], None
        page._count = len(range(self._count)[start:stop])
        page._scores = self._scores[start:stop]
        page._ranks = self._ranks[start:stop]
        page._signal_scores = self._signal_scores[start:stop]
        page._contributions = self._contributions[start:stop]
        source, rows = self._fields, self._field_rows
        page._fields = lambda: (rows if source is None else source())[start:stop]
        page._field_rows = ()
        page._built = [None] * page._count
        page._rows = None
        page.offset = self.offset + start
        page._cursor = None
        page._highlighter = self._highlighter
        page.facets = self.facets
        return page

    def _key_state(self) -> tuple[str, ...] | Callable[[], Sequence[str]]:
        """The keys if resolved, else what resolves them. O(1)."""
        keys = self._keys
        if keys is not None:
            return keys
        source = self._key_source
        if source is not None:
            return source
        # Another thread resolved the keys between the two reads: _keys is set before
        # _key_source is dropped, so they are there now.
        keys = self._keys
        assert keys is not None
        return keys

    def _key_tuple(self) -> tuple[str, ...]:
        """The hits' keys, resolved on the first call and kept. O(k) the first time.

        Two racing threads may both resolve them: the source gives equal keys,
        and either's tuple is kept.
        """
        keys = self._key_state()
        if callable(keys):
            resolved = tuple(keys())
            self._keys = resolved
            self._key_source = None  # after _keys is set (see _key_state); lets the segments go
            return resolved
        return keys

    def _offer_cursor(self, issue: Callable[[int, float, str], str], k: int) -> None:
        """Let :attr:`next_cursor` call ``issue(position, score, key)`` when first read.

        No cursor when these results hold fewer than ``k`` hits: the ranking
        ended here (every stream ran out of candidates before the depth).
        """
        if self._count and self._count >= k:
            self._cursor = issue

    @property
    def next_cursor(self) -> str | None:
        """An opaque, URL-safe cursor for the page after this one (``search(..., after=cursor)``).

        ``None`` when the ranking ended on this page (fewer hits than ``k``),
        or when these results were not made by an index's search. Reading it
        the first time asks the index to keep this snapshot generation for the
        next page (see :mod:`weftsearch.engine.pages` for which generations a
        cursor may name).
        """
        cursor = self._cursor
        if callable(cursor):
            cursor = cursor(self.offset + self._count, float(self._scores[-1]), self._key_tuple()[-1])
            self._cursor = cursor  # two racing readers store equal cursors
        return cursor

    def _highlight_with(self, highlighter: Highlighter) -> None:
        """Give every hit built from now on its highlights, computed by ``highlighter(key)`` when built.

        Called by the search that made these results, before any hit is read
        (a hit already built keeps ``highlights=None``).
        """
        self._highlighter = highlighter

    def _hit(self, row: int) -> Hit:
        """Hit ``row`` (0-based), built on first read and kept. O(streams)."""
        built = self._built[row]
        if built is not None:
            return built
        if self._fields is not None:
            # Every hit's (lazily decoded) fields at once: one O(k) pass, and the
            # snapshot reference is dropped as soon as all hits hold theirs.
            # Another thread may do the same at once: both get equal fields, and
            # the rows are in place before the source is dropped.
            source = self._fields
            if source is not None:
                self._field_rows = source()
                self._fields = None
        fields = self._field_rows[row]
        rows = self._rows
        if rows is None:
            # The arrays as Python numbers, once for all hits (one tolist per array instead
            # of a numpy scalar read per hit and stream; the same values: tolist gives
            # the float of each float64 and the int of each int64).
            rows = (
                self._ranks.tolist(),
                self._signal_scores.tolist(),
                self._contributions.tolist(),
                self._scores.tolist(),
            )
            self._rows = rows  # two racing threads store equal lists
        ranks, scores, contributions, fused = rows[0][row], rows[1][row], rows[2][row], rows[3][row]
        signals = tuple(
            SignalHit(
                signal=label,
                rank=ranks[column] or None,
                score=scores[column] if ranks[column] else None,
                contribution=contributions[column],
            )
            for column, label in enumerate(self.signals)
        )
        highlighter = self._highlighter
        key = self._key_tuple()[row]
        hit = Hit(
            key=key,
            rank=self.offset + row + 1,
            score=fused,
            signals=signals,
            fields=fields,
            highlights=None if highlighter is None else highlighter(key),
        )
        self._built[row] = hit
        return hit

    @property
    def hits(self) -> tuple[Hit, ...]:
        """Every hit, best first (built now if not yet read). O(k * streams) the first time."""
        return tuple(self._hit(row) for row in range(self._count))

    @overload
    def __getitem__(self, index: int) -> Hit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Hit]: ...
    def __getitem__(self, index: int | slice) -> Hit | Sequence[Hit]:
        if isinstance(index, slice):
            return tuple(self._hit(row) for row in range(self._count)[index])
        return self._hit(range(self._count)[index])  # IndexError and negative indices as a tuple's

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Hit]:
        return (self._hit(row) for row in range(self._count))

    def __repr__(self) -> str:
        return f"SearchResults({self._count} hits, signals={self.signals}, fuser={self.fuser!r})"

    @property
    def keys(self) -> list[str]:
        """Keys of the hits, best first (a new list; no Hit is built). O(k).

        A search decides which documents are hits (deletes, filters, damaged
        records) when it runs, and makes their keys when they are first read
        (here, a hit, iteration, :meth:`to_dict` or :attr:`next_cursor`):
        the same keys, whenever read, even after the index changed or closed.
        """
        return list(self._key_tuple())

    @property
    def scores(self) -> NDArray[np.float64]:
        """Fused scores of the hits, best first (a new array; no Hit is built). O(k)."""
        return self._scores.copy()

    @property
    def score_array(self) -> NDArray[np.float64]:
        """Fused scores of the hits, best first, as the results' own read-only array. O(1), no copy."""
        return self._scores

    def explain_arrays(self) -> ExplainArrays:
        """Every hit's explanation (ranks, raw scores, contributions per stream) as arrays. O(1), no copy.

        The same facts as each hit's :attr:`Hit.signals`, without building
        any Hit; see :class:`ExplainArrays` for the layout.
        """
        return ExplainArrays(self.signals, self._ranks, self._signal_scores, self._contributions)

    @property
    def plans(self) -> dict[str, dict[str, PlanValue] | None]:
        """Each stream's plan (what its scorer did: exact scan, lists probed, budget spent), by label.

        ``None`` for a scorer that does not describe its plan; see
        :attr:`Stream.plan <weftsearch.engine.stream.Stream.plan>`. New dicts
        on every read. O(streams).
        """
        plans = self._plans
        if callable(plans):  # a batch's plans, made when read (see _passed_through_batch)
            plans = plans()
        return {
            label: None if plan is None else dict(plan)
            for label, plan in zip(self.signals, plans, strict=True)
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole result (with each stream's plan and the streams cut short)."""
        return {
            "generation": self.generation,
            "fuser": self.fuser,
            "signals": list(self.signals),
            "depth": self.depth,
            "cut_short": list(self.cut_short),
            "plans": self.plans,
            "hits": [hit.to_dict() for hit in self],
            **({} if self.facets is None else {"facets": facets_to_json(self.facets)}),
        }


def _plan_copies(
    plans: Sequence[Mapping[str, PlanValue] | None] | None, width: int
) -> tuple[dict[str, PlanValue] | None, ...]:
    """Private copies of ``plans`` (one per signal; ``None``: no plans), checked as a Stream checks one."""
    if plans is None:
        return (None,) * width
    copies = tuple(Stream.empty(plan=plan).plan for plan in plans)
    if len(copies) != width:
        raise InvalidParameterError(f"{len(copies)} plans for {width} signals")
    return copies


_CHECKED: set[tuple[type, type]] = set()


def _implements(value: object, protocol: type) -> bool:
    """``isinstance(value, protocol)``, remembered per class (runtime protocol checks are slow).

    Classes whose instances could lack an attribute their class has (objects
    with ``__getattr__`` or per-instance ``__dict__`` tricks) are rare; a
    class is cached only after an instance passes, and the scorer's methods
    are called anyway, so a wrong cache hit still fails loudly.
    """
    pair = (type(value), protocol)
    if pair in _CHECKED:
        return True
    if isinstance(value, protocol):
        _CHECKED.add(pair)
        return True
    return False


def stream_labels(scorers: Sequence[Scorer]) -> list[str]:
    """Stream labels: each scorer's ``name``, suffixed ``#2``, ``#3`` when names repeat."""
    if len(scorers) == 1:  # the common search: nothing can repeat
        return [str(scorers[0].name)]
    seen: dict[str, int] = {}
    labels = []
    for scorer in scorers:
        base = str(scorer.name)
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return labels


def _in_range(stream: Stream, snapshot: Snapshot, label: str) -> NDArray[np.int64]:
    """``stream.ids``, refused with :class:`ScorerOutputError` if any is outside the snapshot. O(k)."""
    ids = stream.ids
    if int(ids.min()) < 0 or int(ids.max()) >= snapshot.n_docs:
        raise ScorerOutputError(f"scorer {label!r} returned an id outside 0..{snapshot.n_docs - 1}")
    return ids


def canonical_stream(
    stream: object, snapshot: Snapshot, depth: int, label: str, allowed: NDArray[np.bool_] | None = None
) -> Stream:
    """Check a scorer's output against the contract and put it in canonical order.

    Every stream is checked: a Stream, at most ``depth`` long, ids in
    ``0 .. n_docs - 1``, no id twice, no NaN score (a stream a built-in scorer
    vouches for, made for this snapshot, is checked for its length only: its
    construction guarantees the rest, see ``_VouchedStream`` in
    :mod:`weftsearch.engine.stream`; user scorers cannot make one). Then the canonical order
    (score descending, key ascending): a stream made by
    :meth:`Stream.ranked` for this snapshot is in it by construction and is
    returned as is; any other stream is checked for it in O(k) (scores never
    increase, and neighbours with equal scores are in key order) and sorted
    only when it is not. The checks cost O(k log k) in the stream's length
    (the repeat check sorts the ids), never anything in the snapshot's size.

    Raises:
        ScorerOutputError: not a Stream, longer than asked, ids out of range or
            repeated, a NaN score, or (given ``allowed``, the query's filter
            mask) a document the filter excludes. The message names the scorer.

    """
    if not isinstance(stream, Stream):
        raise ScorerOutputError(f"scorer {label!r} returned {type(stream).__name__}, not a Stream")
    if len(stream) > depth:
        raise ScorerOutputError(f"scorer {label!r} returned {len(stream)} candidates for depth {depth}")
    if (
        allowed is not None
        and stream.ids.size
        and not bool(allowed[_in_range(stream, snapshot, label)].all())
    ):
        # Checked for every stream, vouched or not: O(k), and a filter is a promise to the caller.
        raise ScorerOutputError(
            f"scorer {label!r} returned a document the query's filter excludes "
            "(a scorer applies Snapshot.allowed(query) before its top k; docs/ARCHITECTURE.md)"
        )
    if _is_vouched(stream, snapshot):
        # A built-in scorer's stream for this very snapshot: in range, unique, no NaN
        # and canonical by construction (see weftsearch.engine.stream._VouchedStream).
        return stream
    ids, scores = stream.ids, stream.scores
    if ids.size == 0:
        return stream
    if int(ids.min()) < 0 or int(ids.max()) >= snapshot.n_docs:
        raise ScorerOutputError(f"scorer {label!r} returned an id outside 0..{snapshot.n_docs - 1}")
    if ids.size > 1:
        ascending = np.sort(ids)
        if bool((ascending[1:] == ascending[:-1]).any()):
            raise ScorerOutputError(f"scorer {label!r} returned the same document twice")
    if bool(np.isnan(scores).any()):
        raise ScorerOutputError(f"scorer {label!r} returned a NaN score")
    if stream.ranked_for(snapshot) or in_canonical_order(ids, scores, snapshot):
        return stream
    return stream.reordered(order_by_score(ids, scores, snapshot))


def in_canonical_order(ids: NDArray[np.int64], scores: NDArray[np.float64], keys: IdSpace) -> bool:
    """Whether unique ``ids`` with non-NaN ``scores`` are already in canonical order.

    Scores must never increase, and each pair of neighbours with equal
    scores must be in ascending key order (by id when ``keys``' ids follow
    its keys, else by the keys of the tied neighbours only). O(k) plus
    O(t log t) for t tied neighbours in a multi-segment snapshot.
    """
    if ids.shape[0] <= 1:
        return True
    earlier, later = scores[:-1], scores[1:]
    if bool((later > earlier).any()):
        return False
    ties = np.flatnonzero(later == earlier)
    if not ties.size:
        return True
    if keys.ids_follow_keys:
        return bool((ids[ties] < ids[ties + 1]).all())
    ranks = keys.key_rank(np.concatenate((ids[ties], ids[ties + 1])))
    return bool((ranks[: ties.shape[0]] < ranks[ties.shape[0] :]).all())


def check_fused(fused: object, space: IdSpace, k: int, streams: int, label: str) -> FusedStream:
    """Check a fuser's output against the contract, for any candidate id space.

    ``space`` is where the ids come from: a :class:`Snapshot` for one index,
    the merged candidates of a sharded search; only its id range
    (``n_docs``) and key order are read, so every search path runs the same
    checks (docs/ARCHITECTURE.md, "the search tail"). O(k log k).

    Raises:
        ScorerOutputError: not a FusedStream, more than ``k`` candidates,
            contributions for another number of streams, ids outside
            ``0 .. n_docs - 1`` (a document no stream holds) or repeated, a
            non-finite score or contribution, or candidates out of canonical
            order (scores descending, ties by key ascending). The message
            names the fuser.

    """
    if not isinstance(fused, FusedStream) or len(fused) > k:
        raise ScorerOutputError(f"fuser {label!r} did not return at most {k} fused candidates")
    if fused.contributions.shape[1] != streams:
        raise ScorerOutputError(
            f"fuser {label!r} returned contributions for {fused.contributions.shape[1]} streams, "
            f"not the {streams} it was given"
        )
    ids = fused.ids
    if ids.size:
        n_docs = space.n_docs
        if int(ids.min()) < 0 or int(ids.max()) >= n_docs:
            raise ScorerOutputError(f"fuser {label!r} returned an id outside 0..{n_docs - 1}")
        if np.unique(ids).size != ids.size:
            raise ScorerOutputError(f"fuser {label!r} returned the same document twice")
        # A NaN or infinite fused score would sort arbitrarily and cannot be sent as JSON;
        # every built-in fuser's scores are finite sums of finite parts.
        if not bool(np.isfinite(fused.scores).all()) or not bool(np.isfinite(fused.contributions).all()):
            raise ScorerOutputError(f"fuser {label!r} returned a non-finite score or contribution")
        if not in_canonical_order(ids, fused.scores, space):
            raise ScorerOutputError(
                f"fuser {label!r} returned its candidates out of order "
                "(scores must not increase; equal scores go by key, ascending)"
            )
    return fused


def _rank_lookup(stream: Stream, wanted: NDArray[np.int64]) -> NDArray[np.int64]:
    """1-based rank of each ``wanted`` id in ``stream``, 0 where absent. O((n + m) log n)."""
    if len(stream) == 0:
        return np.zeros(wanted.shape[0], dtype=np.int64)
    by_id = np.argsort(stream.ids, kind="stable")
    sorted_ids = stream.ids[by_id]
    slots = np.minimum(np.searchsorted(sorted_ids, wanted), sorted_ids.size - 1)
    found = sorted_ids[slots] == wanted
    return np.where(found, by_id[slots] + 1, 0).astype(np.int64)


@dataclass(frozen=True, slots=True)
class Fused:
    """One query's fused candidates, checked: what :func:`explain_fused` turns into results.

    Attributes:
        ids: candidate ids, best first (in the id space they were fused in).
        scores: their fused scores.
        contributions: ``(len(ids), streams)`` parts of each score, or
            ``None`` for one stream passed through (its scores are the
            contributions; no table is made).
        fuser: the fuser's name, or :data:`PASSTHROUGH`.

    """

    ids: NDArray[np.int64]
    scores: NDArray[np.float64]
    contributions: NDArray[np.float64] | None
    fuser: str


# The slots' own setters: a frozen dataclass's __init__ goes through object.__setattr__,
# about 1 us a search for these four fields.
_SET_FUSED = tuple(Fused.__dict__[name].__set__ for name in ("ids", "scores", "contributions", "fuser"))


def _fused(
    ids: NDArray[np.int64], scores: NDArray[np.float64], contributions: NDArray[np.float64] | None, fuser: str
) -> Fused:
    """``Fused(ids, scores, contributions, fuser)``, made without the frozen dataclass's checks. O(1)."""
    fused = object.__new__(Fused)
    set_ids, set_scores, set_contributions, set_fuser = _SET_FUSED
    set_ids(fused, ids)
    set_scores(fused, scores)
    set_contributions(fused, contributions)
    set_fuser(fused, fuser)
    return fused


def fuse_candidates(fuser: Fuser, streams: Sequence[Stream], k: int, space: IdSpace) -> Fused:
    """Fuse canonical ``streams`` to ``k`` candidates, checked; one stream passes through.

    The first half of the search tail, shared by :meth:`Index.search
    <weftsearch.Index.search>` and the sharded coordinator: with exactly one
    stream its first ``k`` candidates are kept with their own scores and
    ``fuser`` is not called; with two or more the fuser runs over plain
    Streams and its output goes through :func:`check_fused`. ``space``: the
    streams' id space (a snapshot, or a sharded search's merged candidates).

    Raises:
        ScorerOutputError: the fuser broke its contract.

    """
    if len(streams) == 1:
        stream = streams[0]
        ids, scores = stream.ids, stream.scores
        if ids.shape[0] > k:
            ids, scores = ids[:k], scores[:k]
        return _fused(ids, scores, None, PASSTHROUGH)
    # The fuser sees plain Streams (the same arrays, no copy): what a stream's maker
    # vouched for is the engine's business, never the fuser's.
    plain = [
        stream
        if type(stream) is Stream
        else Stream.adopt(stream.ids, stream.scores, plan=stream.plan, complete=stream.complete)
        for stream in streams
    ]
    name = str(fuser.name)
    fused = check_fused(fuser.fuse(plain, k, space), space, k, len(streams), name)
    return _fused(fused.ids, fused.scores, fused.contributions, name)


def fuse_streams(fuser: Fuser, streams: Sequence[Stream], k: int, snapshot: IdSpace) -> FusedStream:
    """Fuse canonical ``streams`` to ``k`` candidates; a single stream passes through.

    With exactly one stream the result is that stream's first ``k``
    candidates with their own scores, and each candidate's contribution is
    its score; ``fuser`` is not called, so no fusion arithmetic runs and its
    parameters (weights, normalisation) are not consulted. With two or more
    streams the fuser's output is checked against the contract
    (:func:`check_fused`) and returned. :func:`fuse_candidates` as a
    :class:`FusedStream`.

    Args:
        fuser: merges two or more streams.
        streams: streams in canonical order (see :func:`canonical_stream`).
        k: fused candidates wanted (positive).
        snapshot: the snapshot the streams come from (key order, id range).

    Raises:
        ScorerOutputError: the fuser broke its contract.

    """
    fused = fuse_candidates(fuser, streams, k, snapshot)
    contributions = fused.scores.reshape(-1, 1) if fused.contributions is None else fused.contributions
    return FusedStream(fused.ids, fused.scores, contributions)


def _check_call(k: int, fuser: Fuser, scorers: Sequence[Scorer], depth: int | None) -> tuple[int, int]:
    """``(k, depth)`` checked, once the scorers and the fuser are known to implement their protocols."""
    k = check_k(k)
    # One scorer's stream passes through cut to k, so candidates past k would be
    # thrown away: ask for k (the first k of a deeper stream are the same k).
    default = k if len(scorers) == 1 else max(k, DEFAULT_DEPTH)
    depth = default if depth is None else check_k(depth, "depth")
    if depth < k:
        raise InvalidParameterError(f"depth ({depth}) must be at least k ({k})")
    if not scorers:
        raise InvalidParameterError("search needs at least one scorer")
    for scorer in scorers:
        if not _implements(scorer, Scorer):
            raise InvalidParameterError(f"{scorer!r} is not a Scorer (needs .name and .score)")
    if not _implements(fuser, Fuser):
        raise InvalidParameterError(f"{fuser!r} is not a Fuser (needs .name and .fuse)")
    return k, depth


def _as_query(query: object, position: int | None = None) -> Query:
    """``query`` as a :class:`Query` (a string is its text), else :class:`InvalidQueryError`."""
    if isinstance(query, Query):
        return query
    if isinstance(query, str):
        return Query(text=query)
    where = "" if position is None else f" (queries[{position}])"
    raise InvalidQueryError(f"query must be a Query or str, got {type(query).__name__}{where}")


def facet_mask(
    snapshot: Snapshot,
    query: Query | Filter | str | None,
    *,
    top: int | None = None,
    fuser: Fuser | None = None,
    scorers: Sequence[Scorer] = (),
    depth: int | None = None,
) -> NDArray[np.bool_] | None:
    """The live documents facets count for ``query`` (``None``: every live document).

    ``query``: a :class:`Query` (its filter), a filter (a
    :class:`~weftsearch.engine.filters.Filter` or its string form: a ``str``
    here is a filter, not query text) or ``None``. With ``top=N``: the top
    ``N`` hits of ``query``'s ranking by ``scorers`` fused by ``fuser`` (a
    :class:`Query` and at least one scorer are then required).

    Raises:
        InvalidParameterError: ``top`` without a Query and scorers, or out of range.
        InvalidFilterError: the filter is malformed or does not fit the fields.

    """
    if top is None:
        node = query.filter if isinstance(query, Query) else query
        return snapshot.filter_mask(node)
    if not isinstance(query, Query) or not scorers or fuser is None:
        raise InvalidParameterError(
            "facets over the top hits (top=N) rank a Query: give a Query, a fuser and at least one scorer"
        )
    results = search_snapshot(snapshot, query, top, fuser, scorers, depth)
    mask = np.zeros(snapshot.n_docs, dtype=np.bool_)
    ids = snapshot.ids_of(results.keys)
    mask[ids[ids >= 0]] = True
    return mask


def query_facets(
    snapshot: Snapshot,
    query: Query | Filter | str | None,
    fields: Sequence[str],
    k: int = 10,
    *,
    top: int | None = None,
    fuser: Fuser | None = None,
    scorers: Sequence[Scorer] = (),
    depth: int | None = None,
) -> Facets:
    """Facet counts of ``fields`` over the documents :func:`facet_mask` selects, top ``k`` per field.

    See :mod:`weftsearch.engine.facets` (exact counts, order, cost, bounds).
    """
    names = check_facet_fields(fields, snapshot.field_kinds())
    k = check_facet_k(k)
    mask = facet_mask(snapshot, query, top=top, fuser=fuser, scorers=scorers, depth=depth)
    return top_facets(count_facets(snapshot, mask, names), k)


def search_snapshot(
    snapshot: Snapshot,
    query: Query | str,
    k: int,
    fuser: Fuser,
    scorers: Sequence[Scorer],
    depth: int | None = None,
    *,
    offset: int = 0,
    after: PageStart | None = None,
) -> SearchResults:
    """Search ``snapshot``: run each scorer to ``depth``, fuse to ``k``, explain.

    With exactly one scorer its stream passes through (:func:`fuse_streams`):
    the hits are the stream's top ``k`` in canonical order (score desc, key
    asc), each hit's score and its one contribution are the scorer's raw
    score, ``fuser`` is not called (whatever fuser is given), and
    :attr:`SearchResults.fuser` is :data:`PASSTHROUGH`.

    Args:
        snapshot: the snapshot to search; every scorer reads this one.
        query: a :class:`Query`, or a string taken as ``Query(text=...)``.
        k: number of fused hits wanted, 1 to :data:`~weftsearch.engine.stream.MAX_K`
            (1,000,000: each hit is Python objects, and a larger k is a mistake).
        fuser: merges the streams (e.g. ``RRF()``); not called for one scorer.
        scorers: one or more scorers; their streams are fused in this order.
        depth: candidates asked of each scorer; ``None`` means ``max(k, 100)``
            with two or more scorers and ``k`` with one (its stream passes
            through cut to ``k``, so deeper candidates would be dropped
            unread). Must be at least ``k`` and at most ``MAX_K``.
        offset: hits to skip: the results are hits ``offset .. offset + k - 1``
            of this search with ``k = offset + k`` (``depth`` defaulted from
            that ``k``); ``offset + k`` at most ``MAX_K``. See :mod:`weftsearch.engine.pages`.
        after: the start of a page read from a cursor: the results are the
            ``k`` hits ranked after its hit in the search with ``k = after.position + k``.

    Raises:
        InvalidParameterError: bad ``k``/``depth``/``offset`` (not a positive int, or above
            ``MAX_K``), no scorers, or a scorer or
            fuser that does not implement the protocol.
        InvalidQueryError: ``query`` is neither a Query nor a str.
        ScorerOutputError: a scorer or the fuser broke its contract.

    """
    page = check_k(k)
    if after is None and type(offset) is int and offset == 0:
        skip = 0  # a first page, the common search
    else:
        skip = check_offset(after.position if after is not None else offset, page)
    if skip and isinstance(depth, int) and not isinstance(depth, bool) and 0 < depth < skip + page:
        raise InvalidParameterError(
            f"depth ({depth}) must be at least offset + k ({skip} + {page} = {skip + page}): "
            "a page is a slice of the search with k = offset + k"
        )
    k, depth = _check_call(skip + page, fuser, scorers, depth)
    query = _as_query(query)
    labels = stream_labels(scorers)
    allowed = snapshot.allowed(query)  # a bad filter is refused before any scorer runs
    streams = [
        canonical_stream(scorer.score(snapshot, query, depth), snapshot, depth, label, allowed)
        for scorer, label in zip(scorers, labels, strict=False)
    ]
    results = results_of(snapshot, streams, labels, k, fuser, depth)
    return results if skip == 0 and after is None else page_of(results, skip, page, after)


def page_of(results: SearchResults, offset: int, k: int, after: PageStart | None = None) -> SearchResults:
    """The page of ``k`` hits of ``results`` (a deeper search) from ``offset``, or after ``after``'s hit.

    With ``after``, the page starts at the first hit ranked after the hit
    ``(after.score, after.key)`` in canonical order (score descending, key
    ascending), wherever it is: the same hit as row ``after.position`` when
    the deeper search reproduces the pages before (the same snapshot and
    ranking). O(k) (O(t) more for t hits tied with the boundary's score when
    the row is not the expected one).
    """
    first = offset if after is None else _first_after(results, after)
    return results._sliced(first, first + k)


def _first_after(results: SearchResults, after: PageStart) -> int:
    """The row of the first hit ranked after ``(after.score, after.key)`` (``len(results)`` if none)."""
    keys, scores = results._key_tuple(), results._scores
    row = after.position
    if 0 < row <= len(keys) and keys[row - 1] == after.key and scores[row - 1] == after.score:
        return row
    lower = np.flatnonzero(scores < after.score)
    end = int(lower[0]) if lower.size else len(keys)
    for tied in np.flatnonzero(scores[:end] == after.score).tolist():
        if keys[tied] > after.key:
            return int(tied)
    return end


def results_of(
    snapshot: Snapshot, streams: Sequence[Stream], labels: Sequence[str], k: int, fuser: Fuser, depth: int
) -> SearchResults:
    """Fuse canonical ``streams`` to ``k`` and wrap them as :class:`SearchResults` (hits built when read).

    The search tail of one index: :func:`fuse_candidates`, then
    :func:`explain_fused` with the snapshot's keys and fields. A hit whose
    stored record is damaged is left out, as ``Index.get`` reports it absent
    (O(k): each record's verdict is remembered per segment).
    """
    fused = fuse_candidates(fuser, streams, k, snapshot)
    return explain_fused(
        fused,
        streams,
        labels,
        depth,
        generation=snapshot.generation,
        sound_keys=snapshot._sound_ids,
        fields=snapshot.fields_of,
    )


@functools.lru_cache(maxsize=256)
def _rank_column(count: int) -> NDArray[np.int64]:
    """``[[1], [2], ..., [count]]`` as int64, read-only, shared (one per hit count)."""
    return _frozen_array(np.arange(1, count + 1, dtype=np.int64).reshape(-1, 1))


#: Resolves fused ids to keys: ``(keep, keys)``, ``keep`` the mask of the ids whose documents
#: can be reported (``None``: all of them), ``keys`` the keys of the kept ones, in order, or
#: what returns them when first read (then callable from any thread, more than once, with
#: equal results, for as long as the results live: :meth:`Snapshot._sound_ids`).
SoundKeys = Callable[
    [NDArray[np.int64]], tuple[NDArray[np.bool_] | None, list[str] | Callable[[], list[str]]]
]

#: Reads the stored fields of kept ids, in order (called at most once, when a hit is first read).
FieldsOf = Callable[[NDArray[np.int64]], Sequence[Mapping[str, FieldValue]]]


def explain_fused(
    fused: Fused,
    streams: Sequence[Stream],
    labels: Sequence[str],
    depth: int,
    *,
    generation: int,
    sound_keys: SoundKeys,
    fields: FieldsOf,
    results_type: type[SearchResults] = SearchResults,
) -> SearchResults:
    """The second half of the search tail: fused candidates as :class:`SearchResults`, explained.

    Shared by one index and the sharded coordinator. ``sound_keys`` drops
    the candidates whose documents cannot be reported (a damaged record, a
    shard's document gone) and names the others; each kept hit's rank and
    raw score in every stream come from the streams themselves, its fused
    score and contributions from ``fused``. Which candidates are kept is
    decided here; their keys (when ``sound_keys`` gives a callable), fields,
    Hit objects and their explanations wait until read. O(k) for one
    stream passed through; O(d log d) per stream for several (each hit's
    rank in each stream of ``d`` candidates).
    """
    ids, scores = fused.ids, fused.scores
    keep, keys = sound_keys(ids)
    if fused.contributions is None and keep is None and len(streams) == 1:
        # The common search: one stream passed through, every hit kept.
        return results_type._passed_through(
            keys, scores, functools.partial(fields, ids), labels, fused.fuser, generation, depth, streams[0]
        )
    if fused.contributions is None:
        # One stream passed through: the results hold views of its read-only arrays
        # (rank i + 1, score and contribution the stream's own), no fused copy.
        ranks = _rank_column(int(ids.shape[0]))
        if keep is not None:
            ids, scores, ranks = ids[keep], scores[keep], ranks[keep]
        signal_scores = contributions = scores.reshape(-1, 1)
    else:
        contributions = fused.contributions
        if keep is not None:
            ids, scores, contributions = ids[keep], scores[keep], contributions[keep]
        ranks = np.zeros((ids.shape[0], len(streams)), dtype=np.int64)
        signal_scores = np.full((ids.shape[0], len(streams)), np.nan, dtype=np.float64)
        for column, stream in enumerate(streams):
            found_ranks = _rank_lookup(stream, ids)
            ranks[:, column] = found_ranks
            found = found_ranks > 0
            signal_scores[found, column] = stream.scores[found_ranks[found] - 1]
    return results_type._from_arrays(
        keys=keys,
        scores=scores,
        ranks=ranks,
        signal_scores=signal_scores,
        contributions=contributions,
        fields=functools.partial(fields, ids),
        signals=labels,
        fuser=fused.fuser,
        generation=generation,
        depth=depth,
        streams=streams,
    )


#: The most threads :func:`search_snapshot_many` accepts (a larger number is a mistake: the
#: scoring kernels release the GIL, so threads beyond the machine's cores only queue).
MAX_THREADS = 256

#: Queries a batch hands to one task: each task scores its queries (through a scorer's
#: ``score_many`` when it has one), then fuses them. Small enough that ``threads`` tasks
#: share a batch evenly, large enough that a ``score_many`` amortises its set-up.
_CHUNK = 64


def score_queries(
    scorer: Scorer,
    label: str,
    snapshot: Snapshot,
    queries: Sequence[Query],
    depth: int,
    threads: int = 1,
) -> list[Stream]:
    """Each query's checked, canonical stream from ``scorer``, in order.

    Calls the scorer's optional ``score_many(snapshot, queries, depth)`` once
    when it has one (see :func:`search_snapshot_many`), else ``score`` per
    query; every stream then goes through :func:`canonical_stream`.
    ``threads`` above 1 is passed on as ``score_many(..., threads=threads)``
    to a scorer that declares it takes it (``score_many_threads`` is ``True``).

    Raises:
        ScorerOutputError: ``score_many`` returned other than one stream per
            query, or a stream broke the contract. The message names ``label``.

    """
    streams = _scored(scorer, label, snapshot, queries, depth, threads)
    return _canonical(streams, snapshot, queries, depth, label)


def _canonical(
    streams: Sequence[Stream], snapshot: Snapshot, queries: Sequence[Query], depth: int, label: str
) -> list[Stream]:
    """Each of ``streams`` (one per query, in order) through :func:`canonical_stream`."""
    return [
        canonical_stream(stream, snapshot, depth, label, snapshot.allowed(query))
        for stream, query in zip(streams, queries, strict=True)
    ]


def _scored(
    scorer: Scorer, label: str, snapshot: Snapshot, queries: Sequence[Query], depth: int, threads: int
) -> Sequence[Stream]:
    """The scorer's streams for ``queries`` as it returns them (:func:`score_queries` before the checks)."""
    many = getattr(scorer, "score_many", None)
    if not callable(many):
        return [scorer.score(snapshot, query, depth) for query in queries]
    if threads > 1 and getattr(scorer, "score_many_threads", False) is True:
        streams = many(snapshot, queries, depth, threads=threads)
    else:
        streams = many(snapshot, queries, depth)
    if not isinstance(streams, Sequence) or len(streams) != len(queries):
        raise ScorerOutputError(
            f"scorer {label!r}: score_many returned {type(streams).__name__} "
            f"of {len(streams) if isinstance(streams, Sequence) else '?'} streams "
            f"for {len(queries)} queries"
        )
    return streams


def _passed_through_many(
    snapshot: Snapshot, streams: Sequence[Stream], labels: Sequence[str], k: int, depth: int
) -> list[SearchResults]:
    """:func:`results_of` of each of one scorer's canonical ``streams``, the hits' verdicts read once.

    One stream passes through cut to ``k`` (:func:`fuse_candidates`); the
    verdicts of every query's hits are read in one ``Snapshot._sound_ids``
    pass over the batch (a vectorised gather instead of a loop per query),
    which each query's :func:`explain_fused` then takes its share of: a
    verdict and a key are functions of the document alone, so each result
    is what :func:`results_of` gives for its stream alone. The keys stay
    unmade until a result's are first read; then the batch's are made
    once and each result takes its slice. O(hits of the batch).
    """
    cut = [stream.ids[:k] for stream in streams]
    sizes = [int(ids.shape[0]) for ids in cut]
    keep: NDArray[np.bool_] | None = None
    batch_keys: Callable[[], list[str]] = list
    if any(sizes):
        keep, batch_keys = snapshot._sound_ids(np.concatenate(cut))
    shared = _BatchKeys(batch_keys)
    results: list[SearchResults] = []
    start = kept_start = 0
    for stream, ids, size in zip(streams, cut, sizes, strict=True):
        mask: NDArray[np.bool_] | None = None
        kept = size
        if keep is not None:
            mask = keep[start : start + size]
            kept = int(np.count_nonzero(mask))
            if kept == size:
                mask = None
        resolved = (mask, functools.partial(shared.slice, kept_start, kept_start + kept))
        start, kept_start = start + size, kept_start + kept
        results.append(
            explain_fused(
                Fused(ids, stream.scores[:k], None, PASSTHROUGH),
                (stream,),
                labels,
                depth,
                generation=snapshot.generation,
                sound_keys=lambda _ids, resolved=resolved: resolved,  # type: ignore[misc]
                fields=snapshot.fields_of,
            )
        )
    return results


class _BatchKeys:
    """A batch's kept keys, made by ``make`` on the first :meth:`slice` and kept.

    Racing threads may both make them: equal lists, the last one kept.
    """

    __slots__ = ("_keys", "_make")

    def __init__(self, make: Callable[[], list[str]]) -> None:
        self._make = make
        self._keys: list[str] | None = None

    def slice(self, start: int, stop: int) -> list[str]:
        """Keys ``start ..< stop`` of the kept hits: O(batch hits) the first time, then O(stop - start)."""
        keys = self._keys
        if keys is None:
            keys = self._keys = self._make()
        return keys[start:stop]


def _passed_through_batch(
    snapshot: Snapshot, batch: _VouchedBatch, labels: Sequence[str], k: int, depth: int
) -> list[SearchResults]:
    """:func:`_passed_through_many` of a scorer's vouched batch, read from its arrays: no stream per query.

    The batch's streams are canonical and within the contract for this
    snapshot by construction (:class:`~weftsearch.engine.stream._VouchedBatch`),
    so only their lengths are checked, as :func:`canonical_stream` checks a
    vouched stream's. Each query's results are what :func:`results_of` gives
    its stream: the first ``k`` candidates, the hits' verdicts read in one
    pass over the batch, rank ``i + 1`` in the stream, score and contribution
    the stream's own; their arrays are views of the batch's (read-only), and
    their keys, fields, plan and Hit objects are made when first read. Each
    query's results object holds only the batch and its position until it is
    first read (:class:`_BatchResults`). O(hits of the batch) in numpy, O(1)
    Python per query (two attribute stores).

    Raises:
        ScorerOutputError: a stream is longer than ``depth``.

    """
    ids, scores, bounds = batch.ids, batch.scores, batch.bounds
    sizes = np.diff(bounds)
    longest = int(sizes.max()) if sizes.size else 0
    if longest > depth:
        raise ScorerOutputError(f"scorer {labels[0]!r} returned {longest} candidates for depth {depth}")
    if longest > k:
        # One stream passes through cut to k: each query's first k candidates.
        cut = np.minimum(sizes, k)
        rows = np.repeat(bounds[:-1], cut) + _positions(cut)
        ids, scores, sizes = ids[rows], scores[rows], cut
    ranks: NDArray[np.int64] | None = None
    batch_keys: Callable[[], list[str]] = list
    if ids.shape[0]:
        keep, batch_keys = snapshot._sound_ids(ids)
        if keep is not None:
            ranks = _frozen_array((_positions(sizes)[keep] + 1).reshape(-1, 1))
            ids, scores = ids[keep], scores[keep]
            # Kept hits before each query's first candidate: the query's new start.
            before = np.zeros(keep.shape[0] + 1, dtype=np.int64)
            np.cumsum(keep, out=before[1:])
            ends = np.cumsum(sizes)
            sizes = np.diff(before[ends], prepend=0)
    starts = [0, *np.cumsum(sizes).tolist()]
    scores = _frozen_array(np.ascontiguousarray(scores))
    ids = _frozen_array(np.ascontiguousarray(ids))
    shared = _BatchResultsSource(
        starts,
        ids,
        scores,
        ranks,
        _BatchKeys(batch_keys),
        snapshot.fields_of,
        batch.plan_of,
        tuple(labels),
        snapshot.generation,
        depth,
    )
    # Each query's results hold only the batch and their position until one of their
    # attributes is first read (_BatchResults.__getattr__): a batch read by nobody, or
    # only in part, costs no slice, partial or list per query.
    new, cls = object.__new__, _BatchResults
    results: list[SearchResults] = []
    append = results.append
    for position in range(len(starts) - 1):
        found = new(cls)
        found._source, found._position = shared, position
        append(found)
    return results


class _BatchResultsSource:
    """What every :class:`_BatchResults` of one batch reads its own attributes from (the batch's arrays)."""

    __slots__ = (
        "columns",
        "depth",
        "fields_of",
        "generation",
        "ids",
        "keys",
        "lock",
        "plan_of",
        "ranks",
        "scores",
        "signals",
        "starts",
    )

    def __init__(
        self,
        starts: list[int],
        ids: NDArray[np.int64],
        scores: NDArray[np.float64],
        ranks: NDArray[np.int64] | None,
        keys: _BatchKeys,
        fields_of: Callable[[NDArray[np.int64]], Sequence[Mapping[str, FieldValue]]],
        plan_of: Callable[[int], dict[str, PlanValue] | None],
        signals: tuple[str, ...],
        generation: int,
        depth: int,
    ) -> None:
        self.starts, self.ids, self.scores, self.ranks, self.keys = starts, ids, scores, ranks, keys
        self.columns = scores.reshape(-1, 1)
        self.fields_of, self.plan_of = fields_of, plan_of
        self.signals, self.generation, self.depth = signals, generation, depth
        self.lock = threading.Lock()

    def fill(self, results: SearchResults, position: int) -> None:
        """Set each attribute of ``results`` (query ``position``) not set yet, as a search sets it.

        What :func:`results_of` gives the query's stream (the first ``k``
        candidates, rank ``i + 1`` in the stream, score and contribution the
        stream's own), over views of the batch's arrays. An attribute already
        set (``facets``, by :meth:`Index.search_many
        <weftsearch.engine.index.Index.search_many>`) is kept. Under the
        batch's lock, so racing first reads agree. O(1) and a few slices.
        """
        start, stop = self.starts[position], self.starts[position + 1]
        ranks = self.ranks
        values: dict[str, object] = {
            "signals": self.signals,
            "fuser": PASSTHROUGH,
            "generation": self.generation,
            "depth": self.depth,
            "_plans": functools.partial(_one_plan, self.plan_of, position),
            "cut_short": (),
            "_keys": None,
            "_key_source": functools.partial(self.keys.slice, start, stop),
            "_count": stop - start,
            "_scores": self.scores[start:stop],
            "_ranks": _rank_column(stop - start) if ranks is None else ranks[start:stop],
            "_signal_scores": self.columns[start:stop],
            "_contributions": self.columns[start:stop],
            "_fields": functools.partial(self.fields_of, self.ids[start:stop]),
            "_field_rows": (),
            "_built": [None] * (stop - start),
            "_rows": None,
            "_cursor": None,
            "_highlighter": None,
            "facets": None,
            "offset": 0,
        }
        read = object.__getattribute__
        with self.lock:
            for name, value in values.items():
                try:
                    read(results, name)
                except AttributeError:
                    setattr(results, name, value)


class _BatchResults(SearchResults):
    """One query's :class:`SearchResults` of a batch read from a scorer's arrays, filled when first read.

    Made by :func:`_passed_through_batch` with only the batch (``_source``)
    and the query's position; the first read of any other attribute sets
    them all (:meth:`_BatchResultsSource.fill`), after which it is plain
    :class:`SearchResults` (every method reads the same attributes).
    """

    __slots__ = ("_position", "_source")

    _source: _BatchResultsSource
    _position: int

    def __getattr__(self, name: str) -> Any:
        # Called only for an attribute not set yet: fill them all, then read it.
        if name not in _RESULTS_SLOTS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._source.fill(self, self._position)
        return object.__getattribute__(self, name)


#: The attributes :meth:`_BatchResultsSource.fill` sets (every slot of SearchResults).
_RESULTS_SLOTS = frozenset(SearchResults.__slots__)


def _one_plan(
    plan_of: Callable[[int], dict[str, PlanValue] | None], position: int
) -> tuple[dict[str, PlanValue] | None]:
    """``(plan_of(position),)``: one stream's plan as results hold their plans."""
    return (plan_of(position),)


def _positions(sizes: NDArray[np.int64]) -> NDArray[np.int64]:
    """Each element's position in its run, for runs of ``sizes`` laid end to end: ``[0, 1, 0, 1, 2, ...]``."""
    total = int(sizes.sum())
    starts = np.zeros(sizes.shape[0], dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    return np.arange(total, dtype=np.int64) - np.repeat(starts, sizes)


def _score_chunk(
    snapshot: Snapshot,
    queries: Sequence[Query],
    k: int,
    fuser: Fuser,
    scorers: Sequence[Scorer],
    labels: Sequence[str],
    depth: int,
    threads: int = 1,
    unfiltered: bool | None = None,
) -> list[SearchResults]:
    """Search each of ``queries``; a scorer offering ``score_many`` is called once for all of them.

    ``unfiltered``: whether no query has a filter, when the caller knows (``None``: looked at here).
    """
    if len(scorers) == 1:
        streams = _scored(scorers[0], labels[0], snapshot, queries, depth, threads)
        if _is_vouched_batch(streams, snapshot) and (
            all(query.filter is None for query in queries) if unfiltered is None else unfiltered
        ):
            return _passed_through_batch(snapshot, streams, labels, k, depth)  # type: ignore[arg-type]
        return _passed_through_many(
            snapshot, _canonical(streams, snapshot, queries, depth, labels[0]), labels, k, depth
        )
    columns = [
        score_queries(scorer, label, snapshot, queries, depth, threads)
        for scorer, label in zip(scorers, labels, strict=True)
    ]
    return [
        results_of(snapshot, [column[row] for column in columns], labels, k, fuser, depth)
        for row in range(len(queries))
    ]


def search_snapshot_many(
    snapshot: Snapshot,
    queries: Sequence[Query | str],
    k: int,
    fuser: Fuser,
    scorers: Sequence[Scorer],
    depth: int | None = None,
    threads: int | None = None,
) -> list[SearchResults]:
    """Search ``snapshot`` for each of ``queries``: one :class:`SearchResults` per query, in order.

    Each result is exactly what :func:`search_snapshot` returns for that
    query on the same snapshot (same hits, scores, explanations), whatever
    ``threads`` is. Queries go in chunks of 64 (one chunk of all of them when
    every scorer has ``score_many`` and one thread runs them); each chunk is
    one task: for each scorer, if it offers the optional batch method
    ``score_many(snapshot, queries, k) -> Sequence[Stream]`` (one stream per
    query, in order, each what ``score`` would return for that query) it is
    called once for the chunk, else ``score`` is called per query; then each
    query's streams are checked and fused as in a single search.

    Args:
        snapshot: the one snapshot every query reads.
        queries: :class:`Query` objects or strings (taken as query text); all
            are checked before any is searched.
        k: fused hits wanted per query, as in :func:`search_snapshot`.
        fuser: merges each query's streams; not called for one scorer.
        scorers: one or more scorers, fused in this order.
        depth: candidates asked of each scorer per query; ``None`` means ``max(k, 100)``,
            or ``k`` with one scorer (as :func:`search_snapshot`).
        threads: ``None`` or 1 runs the chunks in this thread; ``n`` runs them
            on a pool of ``n`` threads (1 to :data:`MAX_THREADS`). The scoring
            kernels release the GIL, so threads overlap their scoring. When
            every scorer's ``score_many_threads`` is ``True`` (BM25), its
            ``score_many`` gets all the queries in one call with
            ``threads=n`` and runs them on threads inside compiled code.

    Raises:
        InvalidParameterError: as :func:`search_snapshot`, ``queries`` not a
            sequence, or a bad ``threads``.
        InvalidQueryError: an item of ``queries`` is neither a Query nor a str
            (the message gives its position).
        ScorerOutputError: a scorer (or its ``score_many``) or the fuser broke its contract.

    """
    if isinstance(queries, (str, Query)) or not isinstance(queries, Sequence):
        raise InvalidParameterError(
            f"queries must be a sequence of Query or str, got {type(queries).__name__}"
        )
    k, depth = _check_call(k, fuser, scorers, depth)
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS
    ):
        raise InvalidParameterError(f"threads must be an integer from 1 to {MAX_THREADS}, got {threads!r}")
    # A Query itself needs no call (the common batch); anything else goes through _as_query.
    checked = [
        query if type(query) is Query else _as_query(query, place) for place, query in enumerate(queries)
    ]
    filtered = [query for query in checked if query.filter is not None]
    for query in filtered:
        snapshot.allowed(query)  # every bad filter is refused before any query is searched
    labels = stream_labels(scorers)
    chunks = [checked[start : start + _CHUNK] for start in range(0, len(checked), _CHUNK)]
    results: list[SearchResults] = []
    if (
        threads is not None
        and threads > 1
        and all(getattr(scorer, "score_many_threads", False) is True for scorer in scorers)
    ):
        # Every scorer shares its batch out on threads of its own (inside compiled code):
        # one call per scorer for all the queries, no Python pool.
        return _score_chunk(snapshot, checked, k, fuser, scorers, labels, depth, threads, not filtered)
    if (threads is None or threads == 1) and all(callable(getattr(s, "score_many", None)) for s in scorers):
        # One thread, and every scorer takes a batch: one call per scorer for all the
        # queries (a chunk's set-up, its distinct terms' look-ups included, paid once).
        return _score_chunk(snapshot, checked, k, fuser, scorers, labels, depth, unfiltered=not filtered)
    if threads is None or threads == 1 or len(chunks) <= 1:
        for chunk in chunks:
            results.extend(_score_chunk(snapshot, chunk, k, fuser, scorers, labels, depth))
        return results
    with ThreadPoolExecutor(max_workers=min(threads, len(chunks)), thread_name_prefix="weft-search") as pool:
        futures = [
            pool.submit(_score_chunk, snapshot, chunk, k, fuser, scorers, labels, depth) for chunk in chunks
        ]
        for future in futures:  # in submission order: results stay in query order
            results.extend(future.result())
    return results
