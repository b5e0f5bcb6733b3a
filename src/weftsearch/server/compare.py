"""Comparing two rankings and evaluating one, as the server's compare and rank_eval endpoints do.

Pure functions over ranked key lists and judgements; the measures (the overlap
measures :func:`~weftsearch.eval.metrics.jaccard` and
:func:`~weftsearch.eval.metrics.rank_biased_overlap` among them) and the
bootstrap are :mod:`weftsearch.eval.metrics` and :mod:`weftsearch.eval.stats`,
unchanged, so a number the server reports is the number ``weft-search eval``
would report for the same rankings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from weftsearch.errors import InvalidParameterError
from weftsearch.eval.metrics import evaluate, parse_measure, run_from_rankings
from weftsearch.eval.stats import paired_bootstrap

__all__ = ["moved", "judged_comparison", "judged_evaluation"]


def moved(a: Sequence[str], b: Sequence[str]) -> list[dict[str, Any]]:
    """Every key of either ranking with its 1-based rank in each (``None`` where absent).

    ``change`` is ``rank_a - rank_b`` (positive: B ranks it higher), ``None``
    for a key only one side returned. Listed in B's order, then the keys only A
    returned, in A's order.
    """
    ranks_a = {key: rank for rank, key in enumerate(a, 1)}
    ranks_b = {key: rank for rank, key in enumerate(b, 1)}
    rows: list[dict[str, Any]] = []
    for key in [*b, *(key for key in a if key not in ranks_b)]:
        rank_a, rank_b = ranks_a.get(key), ranks_b.get(key)
        change = None if rank_a is None or rank_b is None else rank_a - rank_b
        rows.append({"key": key, "rank_a": rank_a, "rank_b": rank_b, "change": change})
    return rows


def _measure_names(measures: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(str(parse_measure(m)) for m in measures))
    if not names:
        raise InvalidParameterError("give at least one measure, as in ['nDCG@10']")
    return names


def judged_comparison(
    rankings_a: Mapping[str, Sequence[str]],
    rankings_b: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
    *,
    resamples: int,
    seed: int,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Per-query measure values of A and B, their deltas (B - A), and the paired bootstrap of B - A.

    Queries with no judgement are skipped, as trec_eval skips them, and listed.

    Raises:
        UnknownMeasureError: a measure name that does not parse.
        InvalidParameterError: no judged query, a bad grade, a bad bootstrap parameter.

    """
    names = _measure_names(measures)
    eval_a = evaluate(qrels, run_from_rankings(rankings_a), names)
    eval_b = evaluate(qrels, run_from_rankings(rankings_b), names)
    out: dict[str, Any] = {"queries": list(eval_a.qids), "unjudged": list(eval_a.unjudged), "measures": {}}
    for name in names:
        per_a, per_b = eval_a.per_query(name), eval_b.per_query(name)
        interval = paired_bootstrap(per_b, per_a, resamples=resamples, seed=seed, confidence=confidence)
        out["measures"][name] = {
            "mean_a": eval_a.mean(name),
            "mean_b": eval_b.mean(name),
            "per_query": {
                qid: {"a": per_a[qid], "b": per_b[qid], "delta": per_b[qid] - per_a[qid]}
                for qid in eval_a.qids
            },
            "difference": {
                "mean": interval.mean_difference,
                "low": interval.low,
                "high": interval.high,
                "p_value": interval.p_value,
                "confidence": interval.confidence,
                "resamples": interval.resamples,
                "seed": interval.seed,
                "excludes_zero": interval.excludes_zero,
            },
        }
    return out


def judged_evaluation(
    rankings: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
    *,
    resamples: int,
    seed: int,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Per-query values and means of ``measures``, each mean with its percentile bootstrap interval.

    The interval is :func:`~weftsearch.eval.stats.paired_bootstrap` of the
    values against zero: resampling queries with replacement, the nearest-rank
    percentiles of the resampled means.

    Raises:
        UnknownMeasureError, InvalidParameterError: as :func:`judged_comparison`.

    """
    names = _measure_names(measures)
    result = evaluate(qrels, run_from_rankings(rankings), names)
    out: dict[str, Any] = {
        "queries": list(result.qids),
        "unjudged": list(result.unjudged),
        "missing": list(result.missing),
        "measures": {},
    }
    for name in names:
        values = result.per_query(name)
        zeros = dict.fromkeys(values, 0.0)
        interval = paired_bootstrap(values, zeros, resamples=resamples, seed=seed, confidence=confidence)
        out["measures"][name] = {
            "mean": result.mean(name),
            "low": interval.low,
            "high": interval.high,
            "confidence": interval.confidence,
            "resamples": interval.resamples,
            "seed": interval.seed,
            "per_query": values,
        }
    return out
