"""Arms and their runs: what the harness executes, and what it keeps of each query.

An :class:`~weftsearch.ranking.arm.Arm` is a name, the scorers whose streams it fuses, a fuser and an
over-fetch depth. The harness runs it the way :meth:`Index.search` does (each
scorer's stream checked against the contract and put in canonical order, then
fused), but keeps every stream in a :class:`StreamCache` so that arms sharing a
scorer, sweeps over fusion parameters and learned fusion pay for each
(scorer, query, depth) once.

**One stream passes through.** An arm of one scorer is not fused: its run is
the scorer's canonical stream, cut to ``k``, with the scorer's own scores (the
fused score is the stream's score and the stream's contribution is that
score), as a one-signal :meth:`Index.search` and ``weft-search search
--rank bm25`` rank it. So the run files of the same one-scorer arm are
identical from both commands, and trec_eval sees the scorer's real ties
(whatever the arm's fuser: RRF of one stream would turn BM25's ties into key
order, and score normalisation rewrites the scores, which can merge or split
float32 ties).

**Inputs.** Every run records, per stream, how many queries the scorer had an
input for (:class:`StreamCoverage`), and :func:`run_arm` refuses, with
:class:`~weftsearch.errors.MissingInputError` naming the arm and what is
missing, an arm with a scorer that had an input for no query: such a stream
is empty for every query, and its arm would report a difference of exactly
zero as if it were a measurement. The scorer is asked through an optional
method any scorer may implement (the engine never calls it)::

    def missing_input(self, snapshot, query) -> str | None: ...

It returns ``None`` when the scorer has what it reads for ``query``, and
otherwise what is missing, as a noun phrase (``"a query vector"``,
``"vectors in the index"``, ``"links in the index"``), which the refusal and
the coverage line ("vector: 812/1109 queries have a query vector") quote.

A scorer without the method is judged by its streams: a query whose stream
is empty had no input ("candidates" is then what is missing). Nothing here
branches on what a scorer is.

Nothing here knows what a scorer is: a scorer is an object with ``name`` and
``score``, a fuser one with ``name`` and ``fuse``. Scorers are told apart only
by object identity, so the same object in two arms is computed once and two
equal-looking objects are computed twice (never a wrong sharing).

**Scores and ties.** A run keeps each query's fused scores exactly as the
fuser returned them, and is evaluated with trec_eval's semantics (scores
rounded to float32, ties broken by document id descending; see
:mod:`weftsearch.eval.metrics`), so the TREC files the reports write reprint
the same numbers under trec_eval itself (with ``-c``: a query that retrieved
nothing has no line in a TREC file, and counts 0 here, as under ``-c``). Because the engine breaks ties by key
ascending and trec_eval by id descending, a tied slot can hold a different
document in the two orders: :attr:`ArmRun.tied` counts, per query, the top-k
slots whose float32 fused score equals a neighbour's (the slot is decided by a
tie-break, not by score), which is the tie diagnostic the reports print, and
:attr:`ArmRun.served_run` is the run in the engine's own order, which the
harness evaluates too (the "served order" means of the reports).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch.engine.filters import Filter
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import canonical_stream, fuse_streams, score_queries, stream_labels
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream, check_k
from weftsearch.errors import InvalidParameterError, MissingInputError, PairingError
from weftsearch.eval.metrics import run_from_rankings
from weftsearch.ranking.arm import Arm

__all__ = [
    "ArmRun",
    "StreamCache",
    "StreamCoverage",
    "run_arm",
    "tied_slots",
    "NO_CANDIDATES",
]

#: What is missing for a query whose stream is empty, for a scorer without ``missing_input``.
NO_CANDIDATES = "candidates"


def _same_query(a: Query, b: Query) -> bool:
    if (a.text, a.seeds, a.timestamp) != (b.text, b.seeds, b.timestamp):
        return False
    if a.vector is None or b.vector is None:
        return a.vector is None and b.vector is None
    return bool(np.array_equal(a.vector, b.vector))


def _filter_of(query: Query) -> Filter | None:
    found = query.filter
    return found if isinstance(found, Filter) else None


class StreamCache:
    """Checked, canonical streams per (scorer object, query id, depth).

    A stream asked at a smaller depth than one already computed is the head
    of that one only if the scorer says so; the cache does not assume it and
    computes each depth separately. Memory: one stream per entry, ``depth``
    ids and scores (16 bytes each).
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        # (scorer, query id, depth, the query's filter): an arm with a filter has streams of its own.
        self._streams: dict[tuple[int, str, int, Filter | None], Stream] = {}
        self._owners: dict[int, Scorer] = {}  # keeps ids stable: a cached scorer is never collected
        self._writable_keys: set[str] = set()
        self._queries: dict[str, Query] = {}
        self._keys: NDArray[np.object_] | None = None

    def keys_of(self, ids: NDArray[np.int64]) -> tuple[str, ...]:
        """Document keys of ``ids`` (the snapshot's key table is decoded once, on first use)."""
        if self._keys is None:
            self._keys = np.array(self.snapshot.keys(), dtype=object)
        return tuple(self._keys[ids].tolist())

    def check_keys(self, keys: Iterable[str], qid: str, arm: str) -> None:
        """Refuse a key that cannot be written to a TREC run (each distinct key checked once).

        Raises:
            PairingError: an empty key or one holding whitespace.

        """
        good = self._writable_keys
        for key in keys:
            if key not in good:
                _check_key(key, qid, arm)
                good.add(key)

    def stream(self, scorer: Scorer, label: str, qid: str, query: Query, depth: int) -> Stream:
        """The canonical stream of ``scorer`` for ``query`` at ``depth``, computed once.

        Raises:
            ScorerOutputError: the scorer broke its contract (the message names ``label``).

        """
        key = (id(scorer), qid, depth, _filter_of(query))
        cached = self._streams.get(key)
        known = self._queries.setdefault(qid, query)
        if known is not query and not _same_query(known, query):
            raise InvalidParameterError(
                f"query id {qid!r} was cached with another query; use one cache per query set"
            )
        if cached is None:
            self._owners[id(scorer)] = scorer
            stream = scorer.score(self.snapshot, query, depth)
            cached = canonical_stream(stream, self.snapshot, depth, label, self.snapshot.allowed(query))
            self._streams[key] = cached
        return cached

    def fill(self, scorer: Scorer, label: str, queries: Mapping[str, Query], depth: int) -> None:
        """Compute, in one batch, the streams of ``queries`` this cache lacks for ``scorer`` at ``depth``.

        A scorer with the optional ``score_many`` batch method (see
        :func:`~weftsearch.engine.search.search_snapshot_many`) is called once
        for all the missing queries, so a compiled batch loop serves the whole
        query set; any other scorer is called per query, as :meth:`stream`
        would. Either way each stream is checked and canonical, and equals
        what :meth:`stream` computes. O(missing queries) scorer work.

        Raises:
            ScorerOutputError: the scorer broke its contract (the message names ``label``).
            InvalidParameterError: a query id cached with another query.

        """
        owner = id(scorer)
        for qid, query in queries.items():
            known = self._queries.setdefault(qid, query)
            if known is not query and not _same_query(known, query):
                raise InvalidParameterError(
                    f"query id {qid!r} was cached with another query; use one cache per query set"
                )
        wanted = [
            (qid, query)
            for qid, query in queries.items()
            if (owner, qid, depth, _filter_of(query)) not in self._streams
        ]
        if not wanted:
            return
        self._owners[owner] = scorer
        streams = score_queries(scorer, label, self.snapshot, [query for _, query in wanted], depth)
        for (qid, query), stream in zip(wanted, streams, strict=True):
            self._streams[(owner, qid, depth, _filter_of(query))] = stream

    def put(self, scorer: Scorer, label: str, qid: str, query: Query, depth: int, stream: Stream) -> None:
        """Store a stream computed elsewhere (another process, a cluster) for this snapshot, checked.

        The stream goes through the same contract checks and canonical order
        as :meth:`stream`'s own, so a run reads it exactly as if it had been
        computed here (``weft-search eval --ray``).

        Raises:
            ScorerOutputError: the stream breaks the contract (the message names ``label``).
            InvalidParameterError: a query id cached with another query.

        """
        known = self._queries.setdefault(qid, query)
        if known is not query and not _same_query(known, query):
            raise InvalidParameterError(
                f"query id {qid!r} was cached with another query; use one cache per query set"
            )
        self._owners[id(scorer)] = scorer
        checked = canonical_stream(stream, self.snapshot, depth, label, self.snapshot.allowed(query))
        self._streams[(id(scorer), qid, depth, _filter_of(query))] = checked

    def __len__(self) -> int:
        return len(self._streams)


def tied_slots(scores: NDArray[np.float64], k: int) -> int:
    """How many of the first ``k`` slots hold a float32 score equal to a neighbour's.

    ``scores`` is a ranking's scores, best first, possibly one longer than
    ``k`` so that a tie across the cut is seen. Such a slot's occupant was
    chosen by a tie-break rule, not by its score. O(len(scores)).
    """
    with np.errstate(over="ignore"):
        rounded = np.asarray(scores, dtype=np.float64).astype(np.float32)
    if rounded.size < 2:
        return 0
    equal = rounded[1:] == rounded[:-1]
    tied = np.zeros(rounded.size, dtype=bool)
    tied[1:] |= equal
    tied[:-1] |= equal
    return int(np.count_nonzero(tied[:k]))


@dataclass(frozen=True, slots=True)
class StreamCoverage:
    """How many queries one stream's scorer had an input for.

    Attributes:
        signal: the stream's label.
        covered: queries the scorer had an input for.
        queries: queries run.
        missing: what the uncovered queries lacked, most frequent first
            (a scorer's ``missing_input`` phrases, or :data:`NO_CANDIDATES`);
            empty when every query was covered.

    """

    signal: str
    covered: int
    queries: int
    missing: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every query had an input."""
        return self.covered == self.queries

    def describe(self) -> str:
        """``"vector: 812/1109 queries have a query vector"``."""
        what = self.missing[0] if self.missing else "an input"
        return f"{self.signal}: {self.covered}/{self.queries} queries have {what}"

    def record(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "signal": self.signal,
            "covered": self.covered,
            "queries": self.queries,
            "missing": list(self.missing),
        }


def _missing_input(scorer: Scorer, snapshot: Snapshot, query: Query, stream: Stream) -> str | None:
    """What ``scorer`` lacked for ``query`` (its own ``missing_input``, else an empty stream), or ``None``."""
    ask = getattr(scorer, "missing_input", None)
    if callable(ask):
        answer = ask(snapshot, query)
        if answer is not None and not isinstance(answer, str):
            raise InvalidParameterError(
                f"scorer {scorer!r}: missing_input must return None or a string, got {answer!r}"
            )
        return answer or None
    return None if len(stream) else NO_CANDIDATES


@dataclass(frozen=True, eq=False)
class ArmRun:
    """One arm's rankings over a query set.

    Attributes:
        arm: the arm's name.
        k: the run length asked (hits per query).
        qids: the queries, in the order they were run.
        keys: qid -> document keys, best first (at most ``k``).
        scores: qid -> float64 fused scores aligned with ``keys``; read-only.
        tied: qid -> top-``k`` slots decided by a tie-break (see :func:`tied_slots`).
        stream_tied: qid -> per stream, top-``k`` slots of that stream decided
            by a tie-break (a single-scorer arm's own ties show here).
        signals: the stream labels, in the arm's scorer order.
        description: :meth:`Arm.describe` of the arm that produced it.
        coverage: per stream, how many queries its scorer had an input for.

    """

    arm: str
    k: int
    qids: tuple[str, ...]
    keys: Mapping[str, tuple[str, ...]]
    scores: Mapping[str, NDArray[np.float64]]
    tied: Mapping[str, int]
    stream_tied: Mapping[str, tuple[int, ...]]
    signals: tuple[str, ...]
    description: Mapping[str, Any] = field(default_factory=dict)
    coverage: tuple[StreamCoverage, ...] = ()

    def partial_coverage(self) -> tuple[StreamCoverage, ...]:
        """The streams whose scorer lacked an input for some (not all) queries."""
        return tuple(c for c in self.coverage if not c.complete)

    @property
    def run(self) -> dict[str, dict[str, float]]:
        """``{qid: {key: score}}``, the input :func:`~weftsearch.eval.metrics.evaluate` takes.

        Evaluated as is, ties are re-broken by trec_eval's rule (document id
        descending); :attr:`served_run` keeps the engine's order instead.
        """
        return {qid: dict(zip(self.keys[qid], self.scores[qid].tolist(), strict=True)) for qid in self.qids}

    @property
    def served_run(self) -> dict[str, dict[str, float]]:
        """The run in the order the engine serves it (ties by key ascending), ready to evaluate.

        The scores are replaced by ``n - position``
        (:func:`~weftsearch.eval.metrics.run_from_rankings`), so evaluating it
        measures exactly the ranking :meth:`Index.search` returns; where the
        fused scores tie, this can differ from evaluating :attr:`run`.
        """
        return run_from_rankings({qid: self.keys[qid] for qid in self.qids})

    def trec_lines(self, tag: str | None = None) -> Iterable[str]:
        """The run in TREC format, ``qid Q0 docid rank score tag``, rank 1-based, engine order.

        Scores are printed with ``repr`` (shortest round-trip), so trec_eval
        reads back exactly the values evaluated here. The run tag is ``tag``
        (default: the arm's name).

        Raises:
            InvalidParameterError: a tag that is empty or holds whitespace.

        """
        tag = self.arm if tag is None else tag
        if not tag or any(c.isspace() for c in tag):
            raise InvalidParameterError(f"a TREC run tag must be one non-empty word, got {tag!r}")
        return (
            f"{qid} Q0 {key} {rank} {score!r} {tag}"
            for qid in self.qids
            for rank, (key, score) in enumerate(
                zip(self.keys[qid], self.scores[qid].tolist(), strict=True), 1
            )
        )

    def tied_total(self) -> int:
        """Top-k slots decided by a tie-break, summed over queries."""
        return sum(self.tied.values())


def _check_key(key: str, qid: str, arm: str) -> None:
    if not key or any(c.isspace() for c in key):
        raise PairingError(
            f"arm {arm!r}, query {qid!r}: document key {key!r} is empty or holds whitespace; "
            "it cannot be written to a TREC run"
        )


def run_arm(
    cache: StreamCache,
    arm: Arm,
    queries: Mapping[str, Query],
    k: int,
    *,
    fuser: Fuser | None = None,
    depth: int | None = None,
    progress: bool | None = False,
) -> ArmRun:
    """Run ``arm`` over ``queries`` against ``cache.snapshot``.

    Args:
        cache: the snapshot and the streams already computed.
        arm: what to run.
        queries: qid -> query, run in this order.
        k: hits kept per query.
        fuser: use this fuser instead of the arm's (sweeps, learned fusion).
        depth: use this over-fetch depth instead of the arm's.
        progress: a progress bar over queries; ``None`` shows one on a terminal.

    An arm of one scorer is not fused (``fuser`` is not called): its run is
    the scorer's stream with the scorer's own scores (the module docstring
    says why).

    Raises:
        InvalidParameterError: ``k`` or ``depth`` is bad, or ``depth < k``.
        MissingInputError: a scorer of the arm had an input for no query
            (the message names the arm, the scorer and what was missing).
        ScorerOutputError: a scorer or the fuser broke its contract.
        PairingError: a document key cannot be written to a TREC run.

    Complexity: one call of each scorer per query not yet cached, one fusion
    per query (asked for ``k + 1`` hits, so a tie across the cut is seen).

    """
    k = check_k(k)
    depth = arm.depth if depth is None else check_k(depth, "depth")
    if depth < k:
        raise InvalidParameterError(f"arm {arm.name!r}: depth ({depth}) must be at least k ({k})")
    fuser = arm.fuser if fuser is None else fuser
    if arm.filter is not None:  # the arm's filter replaces each query's own
        queries = {qid: dataclasses.replace(query, filter=arm.filter) for qid, query in queries.items()}
    labels = stream_labels(arm.scorers)
    snapshot = cache.snapshot
    keys: dict[str, tuple[str, ...]] = {}
    scores: dict[str, NDArray[np.float64]] = {}
    tied: dict[str, int] = {}
    stream_tied: dict[str, tuple[int, ...]] = {}
    for qid in queries:
        if not isinstance(qid, str) or not qid or any(c.isspace() for c in qid):
            raise PairingError(
                f"query id {qid!r} is empty or holds whitespace; it cannot be written to a TREC run"
            )
    disable = None if progress is None else not progress
    missing: list[Counter[str]] = [Counter() for _ in arm.scorers]
    # Streams not yet cached are computed per scorer in one batch: a scorer's
    # score_many (when it has one) serves every query at once; the streams are
    # the same as one call per query, so the run is too.
    for scorer, label in zip(arm.scorers, labels, strict=True):
        if callable(getattr(scorer, "score_many", None)):
            cache.fill(scorer, label, queries, depth)
    for qid, query in tqdm(queries.items(), desc=arm.name, unit="q", disable=disable, leave=False):
        streams = [
            cache.stream(scorer, label, qid, query, depth)
            for scorer, label in zip(arm.scorers, labels, strict=True)
        ]
        for position, (scorer, stream) in enumerate(zip(arm.scorers, streams, strict=True)):
            lacked = _missing_input(scorer, snapshot, query, stream)
            if lacked is not None:
                missing[position][lacked] += 1
        # One stream passes through with its own scores, exactly as in Index.search.
        fused = fuse_streams(fuser, streams, k + 1, snapshot)
        tied[qid] = tied_slots(fused.scores, k)
        stream_tied[qid] = tuple(tied_slots(s.scores[: k + 1], k) for s in streams)
        head = fused.head(k)
        # A damaged stored record is reported absent, as in Index.search.
        damaged = snapshot.damaged(head.ids)
        ids = head.ids[~damaged] if damaged.any() else head.ids
        ranked = head.scores[~damaged] if damaged.any() else head.scores
        found = cache.keys_of(ids)
        cache.check_keys(found, qid, arm.name)
        keys[qid] = found
        frozen = np.array(ranked, dtype=np.float64)
        frozen.setflags(write=False)
        scores[qid] = frozen
    coverage = tuple(
        StreamCoverage(
            label,
            len(queries) - sum(lacked.values()),
            len(queries),
            tuple(what for what, _ in sorted(lacked.items(), key=lambda item: (-item[1], item[0]))),
        )
        for label, lacked in zip(labels, missing, strict=True)
    )
    for item in coverage:
        if item.queries and item.covered == 0:
            raise MissingInputError(
                f"arm {arm.name!r}: scorer {item.signal!r} has no input for any of the {item.queries} "
                f"queries (missing: {', '.join(item.missing)}); its stream would be empty for every "
                "query, so the arm is refused rather than reported as a difference of zero"
            )
    description = arm.describe()
    if fuser is not arm.fuser and len(arm.scorers) > 1:
        description["fuser"] = {"name": str(fuser.name), "repr": repr(fuser)}
    description["depth"] = depth
    return ArmRun(
        arm=arm.name,
        k=k,
        qids=tuple(queries),
        keys=keys,
        scores=scores,
        tied=tied,
        stream_tied=stream_tied,
        signals=tuple(labels),
        description=description,
        coverage=coverage,
    )
