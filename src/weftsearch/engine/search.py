"""Running a search: call each scorer, check its stream, fuse, explain.

This is the only place scorers and a fuser meet, and it treats every scorer
alike: it calls ``score``, checks the stream against the contract, puts it in
canonical order, and passes the list on. It never branches on what a scorer
is, so the fused ranking for a snapshot depends only on the streams.

One stream passes through: a search with exactly one scorer returns that
stream's top ``k`` with the scorer's own scores, and the fuser is not called
(:func:`fuse_streams`). Fusing one stream could only rewrite its scores (RRF
turns every score into ``1 / (k + rank)``, so tied scores become distinct and
the key tie-break becomes part of the score) without adding evidence.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.documents import FieldValue
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import FusedStream, Stream, check_k, order_by_score
from weftsearch.errors import InvalidParameterError, InvalidQueryError, ScorerOutputError

__all__ = [
    "SignalHit",
    "Hit",
    "SearchResults",
    "search_snapshot",
    "DEFAULT_DEPTH",
    "canonical_stream",
    "stream_labels",
    "fuse_streams",
    "PASSTHROUGH",
]

#: Candidates asked of each scorer when ``depth`` is not given: ``max(k, DEFAULT_DEPTH)``.
DEFAULT_DEPTH = 100

#: :attr:`SearchResults.fuser` of a one-scorer search: the stream passed through unfused.
PASSTHROUGH = "passthrough"


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

    """

    key: str
    rank: int
    score: float
    signals: tuple[SignalHit, ...]
    fields: Mapping[str, FieldValue]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this hit."""
        return {
            "key": self.key,
            "rank": self.rank,
            "score": self.score,
            "fields": dict(self.fields),
            "signals": [
                {"signal": s.signal, "rank": s.rank, "score": s.score, "contribution": s.contribution}
                for s in self.signals
            ],
        }


class SearchResults(Sequence[Hit]):
    """The hits of one search, best first, with the context that produced them.

    Attributes:
        hits: the fused hits.
        signals: stream labels, in the order scorers were given.
        fuser: the fuser's name, or :data:`PASSTHROUGH` when one scorer's
            stream was passed through without calling the fuser.
        generation: the snapshot generation searched.
        depth: candidates asked of each scorer.

    """

    __slots__ = ("depth", "fuser", "generation", "hits", "signals")

    def __init__(
        self, hits: Sequence[Hit], signals: Sequence[str], fuser: str, generation: int, depth: int
    ) -> None:
        self.hits = tuple(hits)
        self.signals = tuple(signals)
        self.fuser = fuser
        self.generation = generation
        self.depth = depth

    @overload
    def __getitem__(self, index: int) -> Hit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Hit]: ...
    def __getitem__(self, index: int | slice) -> Hit | Sequence[Hit]:
        return self.hits[index]

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __repr__(self) -> str:
        return f"SearchResults({len(self.hits)} hits, signals={self.signals}, fuser={self.fuser!r})"

    @property
    def keys(self) -> list[str]:
        """Keys of the hits, best first."""
        return [hit.key for hit in self.hits]

    @property
    def scores(self) -> NDArray[np.float64]:
        """Fused scores of the hits, best first."""
        return np.array([hit.score for hit in self.hits], dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole result."""
        return {
            "generation": self.generation,
            "fuser": self.fuser,
            "signals": list(self.signals),
            "depth": self.depth,
            "hits": [hit.to_dict() for hit in self.hits],
        }


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
    seen: dict[str, int] = {}
    labels = []
    for scorer in scorers:
        base = str(scorer.name)
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return labels


def canonical_stream(stream: object, snapshot: Snapshot, depth: int, label: str) -> Stream:
    """Check a scorer's output against the contract and put it in canonical order.

    Raises:
        ScorerOutputError: not a Stream, longer than asked, ids out of range or
            repeated, or a NaN score. The message names the scorer.

    """
    if not isinstance(stream, Stream):
        raise ScorerOutputError(f"scorer {label!r} returned {type(stream).__name__}, not a Stream")
    if len(stream) > depth:
        raise ScorerOutputError(f"scorer {label!r} returned {len(stream)} candidates for depth {depth}")
    ids, scores = stream.ids, stream.scores
    if ids.size == 0:
        return stream
    if int(ids.min()) < 0 or int(ids.max()) >= snapshot.n_docs:
        raise ScorerOutputError(f"scorer {label!r} returned an id outside 0..{snapshot.n_docs - 1}")
    if np.unique(ids).size != ids.size:
        raise ScorerOutputError(f"scorer {label!r} returned the same document twice")
    if bool(np.isnan(scores).any()):
        raise ScorerOutputError(f"scorer {label!r} returned a NaN score")
    order = order_by_score(ids, scores, snapshot)
    return Stream(ids[order], scores[order])


def check_fused(fused: object, snapshot: Snapshot, k: int, streams: int, label: str) -> FusedStream:
    """Check a fuser's output against the contract.

    Raises:
        ScorerOutputError: not a FusedStream, more than ``k`` candidates,
            contributions for another number of streams, ids outside the
            snapshot or repeated. The message names the fuser.

    """
    if not isinstance(fused, FusedStream) or len(fused) > k:
        raise ScorerOutputError(f"fuser {label!r} did not return at most {k} fused candidates")
    if fused.contributions.shape[1] != streams:
        raise ScorerOutputError(f"fuser {label!r} returned contributions for the wrong streams")
    ids = fused.ids
    if ids.size:
        if int(ids.min()) < 0 or int(ids.max()) >= snapshot.n_docs:
            raise ScorerOutputError(f"fuser {label!r} returned an id outside 0..{snapshot.n_docs - 1}")
        if np.unique(ids).size != ids.size:
            raise ScorerOutputError(f"fuser {label!r} returned the same document twice")
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


def fuse_streams(fuser: Fuser, streams: Sequence[Stream], k: int, snapshot: Snapshot) -> FusedStream:
    """Fuse canonical ``streams`` to ``k`` candidates; a single stream passes through.

    With exactly one stream the result is that stream's first ``k``
    candidates with their own scores, and each candidate's contribution is
    its score; ``fuser`` is not called, so no fusion arithmetic runs and its
    parameters (weights, normalisation) are not consulted. With two or more
    streams the fuser's output is checked against the contract and returned.

    Args:
        fuser: merges two or more streams.
        streams: streams in canonical order (see :func:`canonical_stream`).
        k: fused candidates wanted (positive).
        snapshot: the snapshot the streams come from (key order, id range).

    Raises:
        ScorerOutputError: the fuser broke its contract.

    """
    if len(streams) == 1:
        head = streams[0].head(k)
        return FusedStream(head.ids, head.scores, head.scores.reshape(-1, 1))
    return check_fused(fuser.fuse(streams, k, snapshot), snapshot, k, len(streams), str(fuser.name))


def search_snapshot(
    snapshot: Snapshot,
    query: Query | str,
    k: int,
    fuser: Fuser,
    scorers: Sequence[Scorer],
    depth: int | None = None,
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
        depth: candidates asked of each scorer; ``None`` means ``max(k, 100)``.
            Must be at least ``k`` and at most ``MAX_K``.

    Raises:
        InvalidParameterError: bad ``k``/``depth`` (not a positive int, or above
            ``MAX_K``), no scorers, or a scorer or
            fuser that does not implement the protocol.
        InvalidQueryError: ``query`` is neither a Query nor a str.
        ScorerOutputError: a scorer or the fuser broke its contract.

    """
    k = check_k(k)
    depth = max(k, DEFAULT_DEPTH) if depth is None else check_k(depth, "depth")
    if depth < k:
        raise InvalidParameterError(f"depth ({depth}) must be at least k ({k})")
    if isinstance(query, str):
        query = Query(text=query)
    elif not isinstance(query, Query):
        raise InvalidQueryError(f"query must be a Query or str, got {type(query).__name__}")
    if not scorers:
        raise InvalidParameterError("search needs at least one scorer")
    for scorer in scorers:
        if not _implements(scorer, Scorer):
            raise InvalidParameterError(f"{scorer!r} is not a Scorer (needs .name and .score)")
    if not _implements(fuser, Fuser):
        raise InvalidParameterError(f"{fuser!r} is not a Fuser (needs .name and .fuse)")

    labels = stream_labels(scorers)
    streams = [
        canonical_stream(scorer.score(snapshot, query, depth), snapshot, depth, label)
        for scorer, label in zip(scorers, labels, strict=False)
    ]
    fused = fuse_streams(fuser, streams, k, snapshot)
    fuser_name = PASSTHROUGH if len(streams) == 1 else str(fuser.name)

    # A document whose stored record is damaged is reported absent, as
    # Index.get does; the others keep their places and scores.
    damaged = snapshot.damaged(fused.ids)
    if damaged.any():
        keep = ~damaged
        fused = FusedStream(fused.ids[keep], fused.scores[keep], fused.contributions[keep])
    ranks = [_rank_lookup(stream, fused.ids) for stream in streams]
    keys = snapshot.keys_of(fused.ids)
    fields = snapshot.fields_of(fused.ids)
    hits = []
    for row in range(len(fused)):
        signals = []
        for column, (stream, label) in enumerate(zip(streams, labels, strict=False)):
            rank = int(ranks[column][row])
            signals.append(
                SignalHit(
                    signal=label,
                    rank=rank or None,
                    score=float(stream.scores[rank - 1]) if rank else None,
                    contribution=float(fused.contributions[row, column]),
                )
            )
        hits.append(
            Hit(
                key=keys[row],
                rank=row + 1,
                score=float(fused.scores[row]),
                signals=tuple(signals),
                fields=fields[row],
            )
        )
    return SearchResults(hits, labels, fuser_name, snapshot.generation, depth)
