"""Candidate streams, and the one top-k selection every scorer and fuser shares.

A :class:`Stream` is what a scorer returns: internal document ids and their
scores, best first. Ids are dense integers that mean something only inside the
snapshot that produced them. A :class:`FusedStream` is what a fuser returns: the
same, plus how much each input stream contributed to each fused score.

Ordering rule, used everywhere: higher score first; equal scores are ordered
by document key, ascending (Python string order). Because the key, not the
internal id or the insertion order, breaks ties, a ranking never depends on
the order documents were added in or how the index is laid out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from weftsearch.errors import InvalidParameterError

__all__ = [
    "Stream",
    "FusedStream",
    "KeyOrder",
    "PlanValue",
    "top_k",
    "at_least_kth",
    "order_by_score",
    "check_k",
    "MAX_K",
]

IdArray = NDArray[np.int64]
ScoreArray = NDArray[np.float64]

#: A value in a stream's plan description: a JSON scalar, so a plan prints and serialises as it is.
PlanValue: TypeAlias = str | int | float | bool | None


def _checked_plan(plan: Mapping[str, PlanValue] | None) -> dict[str, PlanValue] | None:
    """A private copy of ``plan``; :class:`InvalidParameterError` unless it maps str to scalars. O(len)."""
    if plan is None:
        return None
    if not isinstance(plan, Mapping):
        raise InvalidParameterError(
            f"a stream's plan is a mapping of str to scalars, got {type(plan).__name__}"
        )
    copy: dict[str, PlanValue] = {}
    for key, value in plan.items():
        if not isinstance(key, str) or not (value is None or isinstance(value, (str, int, float, bool))):
            raise InvalidParameterError(
                f"a stream's plan maps str to str, int, float, bool or None; got {key!r}: {value!r}"
            )
        copy[key] = value
    return copy


#: The largest ``k`` (and ``depth``, ``nprobe``, ``seed_n``, graph depth and iterations) any
#: call accepts. Why a bound: every hit becomes Python objects (a hit with its signals and
#: fields is about 0.5-1 KB), so a million hits is already about a gigabyte of results, and
#: a larger number is a mistake rather than a request (issue 13: a k near 2^60 wrapped the
#: compiled scan's allocation and overwrote the heap). Why this number: it is a round
#: power of ten above every measured use (evaluation depths are at most 1,000) and far
#: below where sizes could wrap. A caller who wants every document iterates the snapshot.
MAX_K = 1_000_000


def check_k(k: int, what: str = "k") -> int:
    """Return ``k`` as an int if it is an int in ``[1, MAX_K]``, else raise :class:`InvalidParameterError`.

    Used for every count a caller passes (``k``, ``depth``, ``nprobe``, ...);
    see :data:`MAX_K` for why counts are bounded. O(1).
    """
    if type(k) is int and 0 < k <= MAX_K:
        return k  # the common case, before the checks below
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise InvalidParameterError(f"{what} must be a positive integer, got {k!r}")
    if k > MAX_K:
        raise InvalidParameterError(
            f"{what} must be at most {MAX_K:,} (weftsearch.engine.stream.MAX_K), got {k!r}"
        )
    return int(k)


class KeyOrder(Protocol):
    """Something that can order internal ids by their document keys (a snapshot)."""

    def key_rank(self, ids: IdArray) -> NDArray[np.int64]:
        """Integers that compare like the keys of ``ids`` compare. O(len(ids))."""
        ...


def _frozen(array: NDArray[np.generic]) -> None:
    # write=False, passed positionally (numpy's stubs say keyword-only; numpy takes either):
    # parsing the keyword costs as much again as the call, on every stream a search makes.
    array.setflags(False)  # type: ignore[call-arg]


@dataclass(frozen=True, slots=True)
class Stream:
    """A ranked list of candidates from one scorer.

    Two optional facts about how the stream was made, which any scorer (a
    user's included) may set and the engine reports without asking what the
    scorer is (:attr:`~weftsearch.engine.search.SearchResults.plans` and
    :attr:`~weftsearch.engine.search.SearchResults.cut_short`):

    Attributes:
        ids: int64 internal document ids, unique, best first.
        scores: float64 scores, same length, non-increasing. Their scale is the
            scorer's own business; rank-based fusers never read them.
        plan: what the scorer did for this query, as a flat mapping of names
            to JSON scalars (``{"path": "probed", "rows_read": 4096}``), or
            ``None`` (not described). A copy of what was given; explain shows it.
        complete: ``False`` when a budget stopped the scorer before it found
            every candidate it should have (fewer than ``min(k, documents it
            has evidence for)``); ``True`` otherwise, the default.

    """

    ids: IdArray
    scores: ScoreArray
    plan: dict[str, PlanValue] | None
    complete: bool

    def __init__(
        self,
        ids: ArrayLike,
        scores: ArrayLike,
        *,
        plan: Mapping[str, PlanValue] | None = None,
        complete: bool = True,
    ) -> None:
        id_array = np.ascontiguousarray(ids, dtype=np.int64)
        score_array = np.ascontiguousarray(scores, dtype=np.float64)
        if id_array.ndim != 1 or score_array.ndim != 1 or id_array.shape != score_array.shape:
            raise InvalidParameterError(
                f"stream ids and scores must be 1-D of equal length, got {id_array.shape} "
                f"and {score_array.shape}"
            )
        _frozen(id_array)
        _frozen(score_array)
        object.__setattr__(self, "ids", id_array)
        object.__setattr__(self, "scores", score_array)
        object.__setattr__(self, "plan", _checked_plan(plan))
        object.__setattr__(self, "complete", bool(complete))

    @classmethod
    def adopt(
        cls,
        ids: IdArray,
        scores: ScoreArray,
        *,
        plan: Mapping[str, PlanValue] | None = None,
        complete: bool = True,
    ) -> Stream:
        """A stream over these arrays themselves: no copy, no conversion (they are made read-only).

        For scorers on a hot path that already hold what the constructor would
        make: 1-D C-contiguous int64 ids and float64 scores of equal length,
        best first, that nothing else will write. The constructor checks all
        of that (about 1 us more per stream); this checks only the layout, and
        arrays in any other layout go through the constructor (converted, or
        refused with :class:`~weftsearch.errors.InvalidParameterError`).
        ``plan`` and ``complete`` as the constructor's.
        """
        stream = _adopted(cls, ids, scores, plan, complete)
        # None: another layout, which the constructor converts or refuses with its message.
        return cls(ids, scores, plan=plan, complete=complete) if stream is None else stream

    @classmethod
    def ranked(
        cls,
        ids: IdArray,
        scores: NDArray[np.floating],
        k: int,
        keys: KeyOrder,
        *,
        plan: Mapping[str, PlanValue] | None = None,
        complete: bool = True,
    ) -> Stream:
        """The best ``k`` of ``(ids, scores)`` as a stream in canonical order for ``keys``.

        :func:`top_k` then a stream of its output, with one difference: the
        stream remembers that the engine itself put it in canonical order
        (score descending, key ascending) for ``keys`` (the snapshot), so a
        search does not check or redo that order
        (:func:`~weftsearch.engine.search.canonical_stream`). The mark cannot
        be wrong: only this constructor sets it, after sorting, and the
        stream's arrays are read-only. Streams built any other way are
        checked in O(k) and re-ordered only when they are not canonical.
        The other contract checks (ids in range, no repeats, no NaN) run on
        every stream. O(n + m log m) as :func:`top_k`. ``plan`` and
        ``complete`` as the constructor's.
        """
        top_ids, top_scores = top_k(ids, scores, k, keys)
        stream = _RankedStream(top_ids, top_scores, plan=plan, complete=complete)
        object.__setattr__(stream, "_keys", keys)
        return stream

    def ranked_for(self, keys: KeyOrder) -> bool:
        """Whether :meth:`ranked` made this stream, in canonical order for ``keys``. O(1)."""
        return isinstance(self, _RankedStream) and getattr(self, "_keys", None) is keys

    @classmethod
    def empty(cls, *, plan: Mapping[str, PlanValue] | None = None, complete: bool = True) -> Stream:
        """A stream with no candidates (a scorer with no opinion on this query, or nothing matched)."""
        return cls(np.empty(0, np.int64), np.empty(0, np.float64), plan=plan, complete=complete)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def head(self, k: int) -> Stream:
        """The first ``k`` candidates (with this stream's plan and completeness)."""
        return Stream(self.ids[:k], self.scores[:k], plan=self.plan, complete=self.complete)

    def reordered(self, order: NDArray[np.intp]) -> Stream:
        """The candidates at positions ``order``: a plain stream with this one's plan and completeness."""
        return Stream(self.ids[order], self.scores[order], plan=self.plan, complete=self.complete)


def _plain_stream(
    ids: IdArray, scores: ScoreArray, plan: dict[str, PlanValue] | None, complete: bool
) -> Stream:
    """A plain :class:`Stream` (what a pickled or copied marked stream becomes)."""
    return Stream(ids, scores, plan=plan, complete=complete)


class _RankedStream(Stream):
    """A :class:`Stream` that :meth:`Stream.ranked` put in canonical order for ``_keys``."""

    __slots__ = ("_keys",)
    _keys: KeyOrder

    def __repr__(self) -> str:
        return (
            f"Stream(ids={self.ids!r}, scores={self.scores!r}, plan={self.plan!r}, complete={self.complete})"
        )

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # A copy (pickle, copy.copy) is a plain Stream: the mark names one
        # snapshot object, which a copy does not share.
        return (_plain_stream, (self.ids, self.scores, self.plan, self.complete))


class _VouchedStream(_RankedStream):
    """A stream a built-in scorer vouches for: canonical for ``_keys`` AND within the whole contract.

    Made only by :func:`_vouched_stream`, which only the engine's own scorers
    call, on output their construction guarantees: ids are the snapshot's own
    internal ids (read from its parts' id maps), each at most once (one
    document is scored once), scores are finite numbers (no NaN: finite
    weights times finite impacts), and the order is score descending then key
    ascending (sorted so by the kernel's (score, id) sort on one segment, by
    :func:`top_k` with the snapshot's key order otherwise). So a search skips
    every check of such a stream but its length (see
    :func:`~weftsearch.engine.search.canonical_stream`); user scorers never
    produce one and stay fully checked. A copy (pickle) is a plain Stream.
    """

    __slots__ = ()


def _vouched_stream(
    ids: IdArray,
    scores: ScoreArray,
    keys: KeyOrder,
    *,
    plan: dict[str, PlanValue] | None = None,
    complete: bool = True,
) -> Stream:
    """A :class:`_VouchedStream` over these arrays (no copy; made read-only). Engine scorers only.

    ``ids``: C-contiguous int64, ``scores``: C-contiguous float64 of the same
    length, meeting everything :class:`_VouchedStream` says, for the snapshot
    ``keys``. ``plan``: a dict of str to scalars made for this stream alone,
    which the stream takes over as it is (neither copied nor checked: that
    costs about a microsecond, 2% of a BM25 search on SciFact). Arrays in
    another layout go through the checked constructor and come back as a
    plain (checked) Stream. O(1).
    """
    if not _stream_layout(ids, scores):
        return Stream(ids, scores, plan=plan, complete=complete)
    # _adopted inlined (a search's every BM25 stream passes here: each call and check is ~0.1 us).
    _frozen(ids)
    _frozen(scores)
    stream = object.__new__(_VouchedStream)
    _SET_IDS(stream, ids)
    _SET_SCORES(stream, scores)
    _SET_PLAN(stream, plan)
    _SET_COMPLETE(stream, bool(complete))
    _SET_KEYS(stream, keys)
    return stream


def _vouched_kernel_stream(
    ids: IdArray, scores: ScoreArray, keys: KeyOrder, plan: dict[str, PlanValue] | None
) -> Stream:
    """:func:`_vouched_stream` of arrays known to be in a stream's layout: complete, the layout unread.

    For an engine scorer's own arrays made in that layout (1-D C-contiguous
    int64 ids and float64 scores of equal length, such as a compiled
    kernel's copied results or their leading slices): the layout check is a
    third of :func:`_vouched_stream`'s cost, on every search. O(1).
    """
    _frozen(ids)
    _frozen(scores)
    stream = object.__new__(_VouchedStream)
    _SET_IDS(stream, ids)
    _SET_SCORES(stream, scores)
    _SET_PLAN(stream, plan)
    _SET_COMPLETE(stream, True)
    _SET_KEYS(stream, keys)
    return stream


# numpy's dtypes of these two: an identity test is much cheaper than ``dtype == np.int64``,
# which converts its operand; an equal dtype that is another object falls back to ``==``.
_INT64 = np.dtype(np.int64)
_FLOAT64 = np.dtype(np.float64)


def _stream_layout(ids: IdArray, scores: ScoreArray) -> bool:
    """Whether these are a stream's arrays: 1-D C-contiguous int64 ids and float64 scores, equal length."""
    return (
        (ids.dtype is _INT64 or ids.dtype == np.int64)
        and (scores.dtype is _FLOAT64 or scores.dtype == np.float64)
        and ids.ndim == 1
        and ids.shape == scores.shape
        and ids.flags.c_contiguous
        and scores.flags.c_contiguous
    )


def _adopted(
    kind: type[Stream],
    ids: IdArray,
    scores: ScoreArray,
    plan: Mapping[str, PlanValue] | None,
    complete: bool,
) -> Stream | None:
    """A ``kind`` over these very arrays (made read-only), or ``None`` if their layout is not a stream's.

    A stream's layout: 1-D C-contiguous int64 ids and float64 scores of equal
    length. O(1): nothing is copied or checked beyond the layout.
    """
    if not _stream_layout(ids, scores):
        return None
    _frozen(ids)
    _frozen(scores)
    stream = object.__new__(kind)
    object.__setattr__(stream, "ids", ids)
    object.__setattr__(stream, "scores", scores)
    object.__setattr__(stream, "plan", _checked_plan(plan))
    object.__setattr__(stream, "complete", bool(complete))
    return stream


# The slots' own setters (the frozen dataclass refuses setattr): half the cost of
# object.__setattr__, which finds each slot by name first.
_SET_IDS = Stream.__dict__["ids"].__set__
_SET_SCORES = Stream.__dict__["scores"].__set__
_SET_PLAN = Stream.__dict__["plan"].__set__
_SET_COMPLETE = Stream.__dict__["complete"].__set__
_SET_KEYS = _RankedStream.__dict__["_keys"].__set__


def _is_vouched(stream: object, keys: KeyOrder) -> bool:
    """Whether ``stream`` came from :func:`_vouched_stream` for exactly ``keys``. O(1)."""
    return type(stream) is _VouchedStream and stream._keys is keys


class _VouchedBatch(Sequence[Stream]):
    """The streams of a batch of queries that a built-in scorer vouches for, over shared flat arrays.

    What ``score_many`` of an engine scorer may return instead of a list:
    stream ``q`` is ``ids[bounds[q]:bounds[q + 1]]`` with the same slice of
    ``scores``, meeting everything :class:`_VouchedStream` says for the
    snapshot ``_keys``, complete, with the plan ``plan_of(q)`` (a new dict
    each call, made when asked). Reading an item builds that stream (a
    :class:`_VouchedStream` over views of the arrays, O(1)), so a caller
    that wants a list of streams gets one; a search of the snapshot
    (:func:`~weftsearch.engine.search.search_snapshot_many`) reads the
    arrays themselves and builds no stream. Made only by
    :func:`_vouched_batch`; the arrays are read-only.
    """

    __slots__ = ("_keys", "_starts", "bounds", "ids", "plan_of", "scores")

    ids: IdArray
    scores: ScoreArray
    bounds: NDArray[np.int64]
    plan_of: Callable[[int], dict[str, PlanValue] | None]
    _keys: KeyOrder
    _starts: list[int]

    def __len__(self) -> int:
        return len(self._starts) - 1

    @overload
    def __getitem__(self, index: int) -> Stream: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Stream]: ...
    def __getitem__(self, index: int | slice) -> Stream | Sequence[Stream]:
        if isinstance(index, slice):
            return [self[position] for position in range(len(self))[index]]
        position = range(len(self))[index]  # IndexError and negative indices as a list's
        start, stop = self._starts[position], self._starts[position + 1]
        return _vouched_stream(
            self.ids[start:stop], self.scores[start:stop], self._keys, plan=self.plan_of(position)
        )

    def __repr__(self) -> str:
        return f"<{len(self)} streams of one batch, {self.ids.shape[0]} candidates>"


def _vouched_batch(
    ids: IdArray,
    scores: ScoreArray,
    bounds: NDArray[np.int64],
    keys: KeyOrder,
    plan_of: Callable[[int], dict[str, PlanValue] | None],
) -> _VouchedBatch:
    """A :class:`_VouchedBatch` over these arrays (no copy; made read-only). Engine scorers only.

    ``ids``/``scores`` as :func:`_vouched_stream` takes them for each
    stream's slice; ``bounds``: int64, one more than the streams, from 0,
    never decreasing, ending at ``len(ids)``. O(streams) (the bounds are
    read once into a list).
    """
    if not _stream_layout(ids, scores) or bounds.ndim != 1 or not bounds.shape[0]:
        raise InvalidParameterError("a batch of streams needs 1-D int64 ids, float64 scores and bounds")
    _frozen(ids)
    _frozen(scores)
    _frozen(bounds)
    batch = object.__new__(_VouchedBatch)
    batch.ids, batch.scores, batch.bounds, batch.plan_of = ids, scores, bounds, plan_of
    batch._keys = keys
    batch._starts = bounds.tolist()
    if batch._starts[0] != 0 or batch._starts[-1] != ids.shape[0] or bool((bounds[1:] < bounds[:-1]).any()):
        raise InvalidParameterError("a batch's bounds must run from 0 to its length without decreasing")
    return batch


def _is_vouched_batch(streams: object, keys: KeyOrder) -> bool:
    """Whether ``streams`` came from :func:`_vouched_batch` for exactly ``keys``. O(1)."""
    return type(streams) is _VouchedBatch and streams._keys is keys


@dataclass(frozen=True, slots=True)
class FusedStream:
    """The fuser's output: one ranked list, and where each score came from.

    Attributes:
        ids: int64 internal ids, best first.
        scores: float64 fused scores, non-increasing.
        contributions: float64 array of shape ``(len(ids), n_streams)``; row i,
            column j is the part of ``scores[i]`` owed to input stream j (0 when
            the document is absent from it). For additive fusers the row sums to
            the fused score.

    """

    ids: IdArray
    scores: ScoreArray
    contributions: NDArray[np.float64]

    def __init__(self, ids: ArrayLike, scores: ArrayLike, contributions: ArrayLike) -> None:
        base = Stream(ids, scores)
        table = np.ascontiguousarray(contributions, dtype=np.float64)
        if table.ndim != 2 or table.shape[0] != base.ids.shape[0]:
            raise InvalidParameterError(
                f"contributions must have shape (n, streams) with n={base.ids.shape[0]}, got {table.shape}"
            )
        _frozen(table)
        object.__setattr__(self, "ids", base.ids)
        object.__setattr__(self, "scores", base.scores)
        object.__setattr__(self, "contributions", table)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def head(self, k: int) -> FusedStream:
        """The first ``k`` fused candidates."""
        return FusedStream(self.ids[:k], self.scores[:k], self.contributions[:k])


def order_by_score(ids: IdArray, scores: NDArray[np.floating], keys: KeyOrder) -> NDArray[np.intp]:
    """Positions that sort ``(ids, scores)`` by descending score, then ascending key.

    O(n log n) in ``len(ids)``. Keys are looked up only for documents whose
    score another one shares (the key decides nothing else), so a list
    without ties never reads a key: on a multi-segment snapshot that saves a
    key lookup in each segment the documents come from.
    """
    n = ids.shape[0]
    if n <= 1 or getattr(keys, "ids_follow_keys", False):
        # Ids are key ranks here (one segment): nothing to look up.
        return np.lexsort((keys.key_rank(ids), -scores))
    by_score = np.argsort(-scores, kind="stable")
    ordered = scores[by_score]
    tied = ordered[1:] == ordered[:-1]
    if np.isnan(ordered[-1]):  # NaN sorts last; lexsort's rule for it stays the rule
        return np.lexsort((keys.key_rank(ids), -scores))
    if not tied.any():
        return by_score
    # Members of a run of equal scores get their key ranks (relative to each other, which
    # is all a run compares); the others never meet an equal score, so theirs is moot.
    member = np.zeros(n, dtype=bool)
    member[1:] = tied
    member[:-1] |= tied
    positions = by_score[member]
    ranks = np.zeros(n, dtype=np.int64)
    ranks[positions] = keys.key_rank(ids[positions])
    return np.lexsort((ranks, -scores))


def at_least_kth(scores: NDArray[np.floating], k: int) -> NDArray[np.intp]:
    """Positions, ascending, of every score at least the ``k``-th largest (all of them when n <= k).

    Ties with the k-th score are all kept, so the caller's tie-break (the key),
    never the selection, decides who makes the cut. NaN scores are never kept
    when n > k (with fewer than k numbers, all of them are kept).

    O(n): for n much larger than k, the k-th largest of ``8k`` group maxima
    bounds the k-th score from below (at least k groups hold a score that
    high), so one comparison pass leaves a handful of candidates and only
    those are partitioned; ``np.partition`` over all n scores (about 7 ns a
    score, three times the grouped pass) is the fallback.
    """
    n = scores.shape[0]
    if n <= k:
        return np.arange(n, dtype=np.intp)
    groups = 8 * k
    if n >= 4 * groups:
        # Group g holds scores g, g + groups, g + 2 * groups, ...: any partition
        # into groups works, and this one reduces along contiguous rows.
        width = n // groups
        maxima = scores[: groups * width].reshape(width, groups).max(axis=0)
        if not np.isnan(maxima.max()):  # a NaN maximum would hide its group's real one
            bound = np.partition(maxima, groups - k)[groups - k]
            candidates = np.flatnonzero(scores >= bound)
            chosen = scores[candidates]
            kth = -np.partition(-chosen, k - 1)[k - 1]
            kept: NDArray[np.intp] = candidates[chosen >= kth]
            return kept
    # Negating keeps NaN (sorted last) out of the cut; -(-x) == x.
    kth = -np.partition(-scores, k - 1)[k - 1]
    if np.isnan(kth):  # fewer than k scores are numbers: every number makes the cut
        return np.flatnonzero(~np.isnan(scores))
    return np.flatnonzero(scores >= kth)


def top_k(ids: IdArray, scores: NDArray[np.floating], k: int, keys: KeyOrder) -> tuple[IdArray, ScoreArray]:
    """Select the ``k`` best of ``(ids, scores)`` under the ordering rule.

    :func:`at_least_kth` finds every candidate at least as good as the k-th
    in O(n), keeping all ties with it (so the key, not the selection, decides
    who makes the cut), and only those are sorted: O(n + m log m) for m kept.

    Returns:
        ``(ids, scores)`` of at most ``k`` candidates, best first (scores as given, float32 or float64).

    """
    if ids.shape[0] > k:
        keep = at_least_kth(scores, k)
        ids = ids[keep]
        scores = scores[keep]
    order = order_by_score(ids, scores, keys)[:k]
    return ids[order], scores[order]  # type: ignore[return-value]
