"""Retrieval effectiveness measures with trec_eval's semantics.

What a measure *is* (a name and an optional cutoff, written as ir_measures
writes it: ``nDCG@10``, ``R@100``, ``P@5``, ``AP``, ``RR``) is kept apart from
how it is computed (:func:`evaluate`). The computation reproduces trec_eval 9
(as wrapped by ``pytrec_eval``) to the last few ulps; the test suite checks
this on fixtures built to tell implementations apart. The rules, each one
checked against pytrec_eval:

* **Ordering.** The run's scores decide the ranking, not the order of the
  mapping. trec_eval stores scores as C ``float``, so each score is first
  rounded to float32 (round to nearest even): ``1.0`` and ``1.0 + 1e-9`` tie.
  Ties are broken by document id, **descending**, compared as strings (code
  point order, which is UTF-8 byte order): ``"b"`` ranks above ``"a"``,
  ``"a9"`` above ``"a10"``. ``0.0`` and ``-0.0`` tie. To keep an order you
  already have, build the run with :func:`run_from_rankings`.
* **Which queries count.** A query is evaluated when it has at least one
  judgement in the qrels (any grade, including 0 or negative) and appears in
  the run (an empty ranking counts as appearing). Queries of the run without
  judgements are skipped; judged queries absent from the run are skipped too,
  as trec_eval does without ``-c``; ``complete=True`` scores them 0, as
  ``trec_eval -c`` does.
* **A judged query with no relevant document** (all grades <= 0) is evaluated
  and counts in the mean with 0 for every measure (trec_eval guards the
  division by the number of relevant documents and reports 0).
* **Relevance.** For the binary measures (P, R, AP, RR) a document is relevant
  when its grade is >= 1 (trec_eval's default relevance level); grade 0,
  negative grades and unjudged documents are not relevant.
* **nDCG** uses linear gain (gain = grade; grades <= 0 and unjudged documents
  gain 0) and the discount ``log2(rank + 1)`` for 1-based ranks, including
  rank 1. The ideal ranking sorts the query's positive grades from the qrels
  (retrieved or not) in descending order. ``nDCG@k`` cuts both at ``k``; plain
  ``nDCG`` takes the whole run and the whole ideal list.
* **Cutoffs beyond the run's length.** ``P@k`` still divides by ``k``; the
  other measures simply see fewer documents.
* **No depth limit**: every ranked document is read (trec_eval's default).

Two measures compare rankings with each other rather than with judgements:
:func:`jaccard` (shared keys over all keys) and :func:`rank_biased_overlap`
(Webber, Moffat and Zobel 2010), which the server's ``compare`` reports.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, cast, get_args

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import InvalidParameterError, UnknownMeasureError

__all__ = [
    "MEASURE_NAMES",
    "Measure",
    "MeasureName",
    "Qrels",
    "Run",
    "Evaluation",
    "parse_measure",
    "evaluate",
    "run_from_rankings",
    "jaccard",
    "rank_biased_overlap",
]

#: The measure families, spelled as ir_measures spells them.
MeasureName = Literal["nDCG", "P", "R", "AP", "RR"]

#: Every accepted family name, canonical spelling.
MEASURE_NAMES: tuple[str, ...] = get_args(MeasureName)

#: Other spellings accepted by :func:`parse_measure`, mapped to the canonical one.
_ALIASES = {"MAP": "AP", "MRR": "RR"}

#: Families that mean nothing without a cutoff.
_NEEDS_CUTOFF = frozenset({"P", "R"})

_PATTERN = re.compile(r"(?P<name>[A-Za-z]+)(?:@(?P<cutoff>[1-9][0-9]*))?")

#: Judgements: query id -> document id -> integer grade.
Qrels = Mapping[str, Mapping[str, int]]

#: A run: query id -> document id -> score (higher is better).
Run = Mapping[str, Mapping[str, float]]

#: Longest ranking :func:`run_from_rankings` accepts: its scores must stay distinct in float32.
_MAX_RANKING = 2**24


@dataclass(frozen=True, slots=True)
class Measure:
    """One measure: a family name and an optional rank cutoff.

    ``str(measure)`` is the canonical name (``"nDCG@10"``, ``"AP"``), which
    :func:`parse_measure` reads back.

    Attributes:
        name: ``"nDCG"``, ``"P"`` (precision), ``"R"`` (recall), ``"AP"``
            (average precision; its mean is MAP) or ``"RR"`` (reciprocal rank
            of the first relevant document; its mean is MRR).
        cutoff: consider only the top ``cutoff`` documents; ``None`` reads the
            whole ranking (not allowed for ``P`` and ``R``).

    Raises:
        UnknownMeasureError: for an unknown name or a cutoff that is not a
            positive integer.

    """

    name: MeasureName
    cutoff: int | None = None

    def __post_init__(self) -> None:
        if self.name not in MEASURE_NAMES:
            raise UnknownMeasureError(f"unknown measure {self.name!r}; known: {', '.join(MEASURE_NAMES)}")
        if self.cutoff is None:
            if self.name in _NEEDS_CUTOFF:
                raise UnknownMeasureError(
                    f"measure {self.name!r} needs a cutoff, as in {self.name + '@10'!r}"
                )
        elif isinstance(self.cutoff, bool) or not isinstance(self.cutoff, int) or self.cutoff < 1:
            raise UnknownMeasureError(
                f"a measure's cutoff must be a positive integer, got {self.cutoff!r} for {self.name!r}"
            )

    def __str__(self) -> str:
        return self.name if self.cutoff is None else f"{self.name}@{self.cutoff}"


def parse_measure(name: str | Measure) -> Measure:
    """Parse an ir_measures-style name (``"nDCG@10"``, ``"R@100"``, ``"MAP"``).

    Names are case-sensitive. ``MAP`` and ``MRR`` are accepted as aliases of
    ``AP`` and ``RR``; ``str()`` of the result is always the canonical name.
    A :class:`Measure` is returned unchanged.

    Raises:
        UnknownMeasureError: the name is not ``FAMILY`` or ``FAMILY@k`` for a
            known family and a positive integer ``k`` without leading zeros.

    """
    if isinstance(name, Measure):
        return name
    if not isinstance(name, str):
        raise UnknownMeasureError(f"a measure name must be a string, got {name!r}")
    match = _PATTERN.fullmatch(name)
    family = None if match is None else _ALIASES.get(match["name"], match["name"])
    if match is None or family not in MEASURE_NAMES:
        raise UnknownMeasureError(
            f"unknown measure {name!r}; known: nDCG[@k], P@k, R@k, AP[@k], RR[@k] (aliases MAP, MRR)"
        )
    cutoff = None if match["cutoff"] is None else int(match["cutoff"])
    return Measure(cast(MeasureName, family), cutoff)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Per-query values and means of some measures over one run.

    Attributes:
        measures: the measures, in the order asked for (duplicates removed).
        qids: the evaluated queries, sorted (string order); every array in
            ``values`` follows this order.
        values: canonical measure name -> read-only float64 array of per-query
            values, aligned with ``qids``.
        unjudged: queries of the run skipped because the qrels judge nothing
            for them, sorted.
        missing: judged queries absent from the run, sorted; skipped unless
            :func:`evaluate` was called with ``complete=True`` (then they are in
            ``qids`` with 0 everywhere, and listed here as well).

    """

    measures: tuple[Measure, ...]
    qids: tuple[str, ...]
    values: Mapping[str, NDArray[np.float64]] = field(repr=False)
    unjudged: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    def array(self, measure: str | Measure) -> NDArray[np.float64]:
        """Per-query values of ``measure`` (name or object), aligned with :attr:`qids`."""
        key = str(parse_measure(measure))
        if key not in self.values:
            known = ", ".join(str(m) for m in self.measures)
            raise UnknownMeasureError(f"measure {key!r} was not evaluated; evaluated: {known}")
        return self.values[key]

    def per_query(self, measure: str | Measure) -> dict[str, float]:
        """``{qid: value}`` for ``measure``: the input :func:`paired_bootstrap` takes."""
        return dict(zip(self.qids, self.array(measure).tolist(), strict=True))

    def mean(self, measure: str | Measure) -> float:
        """Mean of ``measure`` over the evaluated queries (``nan`` if there are none)."""
        values = self.array(measure)
        return float(values.mean()) if values.size else math.nan

    @property
    def means(self) -> dict[str, float]:
        """Canonical measure name -> mean over the evaluated queries."""
        return {str(m): self.mean(m) for m in self.measures}


def run_from_rankings(rankings: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Turn ranked lists (best first) into a run whose scores keep that order.

    The document at 0-based position ``i`` of a list of ``n`` gets score
    ``n - i``: distinct, exactly representable in float32, so trec_eval's
    re-sorting can neither reorder nor tie them.

    Raises:
        InvalidParameterError: a query id or document id is not a string, a
            document appears twice in one list, or a list is longer than 2**24.

    """
    run: dict[str, dict[str, float]] = {}
    for qid, ranking in rankings.items():
        _check_id(qid, "query id")
        if isinstance(ranking, str):
            raise InvalidParameterError(f"the ranking of query {qid!r} must be a sequence of ids, got a str")
        n = len(ranking)
        if n > _MAX_RANKING:
            raise InvalidParameterError(f"the ranking of query {qid!r} has {n} documents; at most 2**24")
        scores: dict[str, float] = {}
        for position, docid in enumerate(ranking):
            _check_id(docid, f"document id in query {qid!r}")
            if docid in scores:
                raise InvalidParameterError(
                    f"document {docid!r} appears twice in the ranking of query {qid!r}"
                )
            scores[docid] = float(n - position)
        run[qid] = scores
    return run


def evaluate(
    qrels: Qrels, run: Run, measures: Iterable[str | Measure] | str | Measure, *, complete: bool = False
) -> Evaluation:
    """Evaluate ``run`` against ``qrels`` with trec_eval's semantics.

    See the module docstring for the rules (ordering, tie-break, which
    queries count, relevance, nDCG's gain and discount).

    Args:
        qrels: query id -> document id -> integer grade.
        run: query id -> document id -> score; any finite or infinite real
            number, not NaN. The mapping's order is ignored.
        measures: measure names or objects (one name alone is accepted).
        complete: also evaluate judged queries absent from the run, scoring
            them 0 (``trec_eval -c``).

    Returns:
        An :class:`Evaluation` with per-query arrays in sorted qid order.

    Raises:
        UnknownMeasureError: a measure name does not parse.
        InvalidParameterError: no measure is given; an id is not a string; a
            grade is not an integer; a score is not a real number or is NaN;
            no query is left to evaluate.

    Complexity: O(sum over evaluated queries of n log n) for rankings of n
    documents; one numpy sort per query.

    """
    wanted = tuple(dict.fromkeys(parse_measure(m) for m in _as_measure_list(measures)))
    if not wanted:
        raise InvalidParameterError("evaluate needs at least one measure")
    judged: dict[str, Mapping[str, int]] = {}
    for qid, judgements in qrels.items():
        _check_id(qid, "query id in the qrels")
        if judgements:
            _check_grades(qid, judgements)
            judged[qid] = judgements
    for qid in run:
        _check_id(qid, "query id in the run")
    unjudged = tuple(sorted(qid for qid in run if qid not in judged))
    missing = tuple(sorted(qid for qid in judged if qid not in run))
    qids = sorted(qid for qid in run if qid in judged)
    if complete:
        qids = sorted([*qids, *missing])
    if not qids:
        raise InvalidParameterError(
            f"no query to evaluate: the run has {len(run)} queries, the qrels judge {len(judged)}, "
            f"and they share none (first run qids: {sorted(run)[:5]!r}; first judged: {sorted(judged)[:5]!r})"
        )
    table = np.zeros((len(wanted), len(qids)), dtype=np.float64)
    empty: Mapping[str, float] = {}
    for column, qid in enumerate(qids):
        table[:, column] = _query_values(judged[qid], run.get(qid, empty), qid, wanted)
    table.flags.writeable = False
    values = {str(m): table[row] for row, m in enumerate(wanted)}
    return Evaluation(wanted, tuple(qids), values, unjudged, missing)


def _as_measure_list(measures: Iterable[str | Measure] | str | Measure) -> list[str | Measure]:
    if isinstance(measures, (str, Measure)):
        return [measures]
    return list(measures)


def _check_id(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise InvalidParameterError(f"a {what} must be a str, got {value!r}")


def _check_grades(qid: str, judgements: Mapping[str, int]) -> None:
    for docid, grade in judgements.items():
        _check_id(docid, f"document id in the qrels of query {qid!r}")
        if isinstance(grade, bool) or not isinstance(grade, numbers.Integral):
            raise InvalidParameterError(
                f"grades must be integers, got {grade!r} for document {docid!r} of query {qid!r}"
            )


def _ranked_grades(judgements: Mapping[str, int], scores: Mapping[str, float], qid: str) -> NDArray[np.int64]:
    """Grades of the run's documents in trec_eval's order (0 for unjudged documents)."""
    docids = list(scores)
    for docid in docids:
        _check_id(docid, f"document id in the run of query {qid!r}")
    try:
        values = np.fromiter(scores.values(), dtype=np.float64, count=len(docids))
    except (TypeError, ValueError):
        bad = next(
            (d, s) for d, s in scores.items() if isinstance(s, bool) or not isinstance(s, numbers.Real)
        )
        raise InvalidParameterError(
            f"scores must be real numbers, got {bad[1]!r} for document {bad[0]!r} of query {qid!r}"
        ) from None
    if np.isnan(values).any():
        docid = docids[int(np.flatnonzero(np.isnan(values))[0])]
        raise InvalidParameterError(f"score of document {docid!r} of query {qid!r} is NaN")
    with np.errstate(over="ignore"):
        key = values.astype(np.float32)  # trec_eval holds scores as C float
    by_docid = np.empty(len(docids), dtype=np.int64)
    by_docid[np.argsort(np.asarray(docids, dtype=object), kind="stable")] = np.arange(len(docids))
    # lexsort: the last key is primary. Score descending, then docid descending.
    order = np.lexsort((-by_docid, -key))
    return np.fromiter((judgements.get(docids[i], 0) for i in order), dtype=np.int64, count=len(docids))


def _query_values(
    judgements: Mapping[str, int], scores: Mapping[str, float], qid: str, measures: tuple[Measure, ...]
) -> list[float]:
    """Every measure's value for one query."""
    grades = _ranked_grades(judgements, scores, qid)
    n = grades.shape[0]
    relevant = grades >= 1
    hits = np.cumsum(relevant)  # relevant documents in the top i + 1
    judged_grades = np.fromiter(judgements.values(), dtype=np.int64, count=len(judgements))
    num_rel = int(np.count_nonzero(judged_grades >= 1))
    ideal = np.sort(judged_grades[judged_grades > 0])[::-1].astype(np.float64)
    gains = np.maximum(grades, 0).astype(np.float64)
    longest = max(n, ideal.shape[0])
    discount = np.log2(np.arange(2, longest + 2, dtype=np.float64))
    out: list[float] = []
    for measure in measures:
        depth = n if measure.cutoff is None else min(measure.cutoff, n)
        found = int(hits[depth - 1]) if depth else 0
        if measure.name == "P":
            out.append(found / cast(int, measure.cutoff))
        elif measure.name == "R":
            out.append(found / num_rel if num_rel else 0.0)
        elif measure.name == "AP":
            ranks = np.flatnonzero(relevant[:depth])
            precision = hits[ranks] / (ranks + 1.0)
            out.append(float(precision.sum()) / num_rel if num_rel else 0.0)
        elif measure.name == "RR":
            out.append(1.0 / (int(np.argmax(relevant[:depth])) + 1) if found else 0.0)
        else:
            ideal_depth = ideal.shape[0] if measure.cutoff is None else min(measure.cutoff, ideal.shape[0])
            ideal_dcg = float((ideal[:ideal_depth] / discount[:ideal_depth]).sum())
            dcg = float((gains[:depth] / discount[:depth]).sum())
            out.append(dcg / ideal_dcg if ideal_dcg > 0 else 0.0)
    return out


# ---------------------------------------------------------------------- overlap of two rankings


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """Shared keys over all keys of the two lists (Jaccard; 1.0 when both are empty)."""
    left, right = set(a), set(b)
    union = left | right
    return 1.0 if not union else len(left & right) / len(union)


def rank_biased_overlap(a: Sequence[str], b: Sequence[str], p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap of two rankings (Webber, Moffat and Zobel 2010, eq. 32).

    Handles lists of different lengths (the shorter is taken as seen in full);
    1.0 for identical lists, 0.0 for disjoint ones; 1.0 when both are empty and
    0.0 when only one is. ``p`` in (0, 1) is the persistence: at 0.9 the top
    10 ranks carry about 86% of the weight.

    Complexity: O(len(a) + len(b)).

    Raises:
        InvalidParameterError: ``p`` outside (0, 1), or a key twice in one list.

    """
    if not 0.0 < p < 1.0:
        raise InvalidParameterError(f"rank-biased overlap needs 0 < p < 1, got {p!r}")
    for ranking in (a, b):
        if len(set(ranking)) != len(ranking):
            raise InvalidParameterError("rank-biased overlap needs rankings without repeated keys")
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, length = len(short), len(long_)
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = 0
    total = 0.0
    overlap_at_s = 0
    for depth in range(1, length + 1):
        item = long_[depth - 1]
        if depth <= s:
            other = short[depth - 1]
            if other == item:
                overlap += 1
            else:
                overlap += (other in seen_long) + (item in seen_short)
            seen_short.add(other)
            seen_long.add(item)
            if depth == s:
                overlap_at_s = overlap
        else:
            overlap += item in seen_short
            seen_long.add(item)
        total += overlap / depth * p**depth
        if depth > s:
            total += overlap_at_s * (depth - s) / (s * depth) * p**depth
    return (1 - p) / p * total + ((overlap - overlap_at_s) / length + overlap_at_s / s) * p**length
