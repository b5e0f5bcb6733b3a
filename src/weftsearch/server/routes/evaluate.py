"""``/v1/compare`` and ``/v1/rank_eval``: two rankings side by side, and one ranking on judged queries."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from weftsearch.eval.metrics import jaccard, rank_biased_overlap
from weftsearch.server.compare import judged_comparison, judged_evaluation, moved
from weftsearch.server.errors import ApiError, about_field, answers
from weftsearch.server.models import (
    CompareRequest,
    CompareResponse,
    QueryIn,
    RankEvalRequest,
    RankEvalResponse,
)
from weftsearch.server.state import Ranking, Served, ServerState

__all__ = ["router"]

router = APIRouter()


def rankings_of(
    state: ServerState, ranking: Ranking, queries: dict[str, QueryIn], k: int, where: str
) -> tuple[dict[str, list[str]], dict[str, list[float]], int, str | None]:
    """Keys and scores per query id, the generation searched, and the model that embedded texts."""
    qids = list(queries)
    state.adopt_commits()
    built, sources = state.queries([(queries[qid], f"{where}{qid}.") for qid in qids], ranking)
    with about_field(where.rstrip(".")):
        results = state.run_search(ranking, built, k)
    keys = {qid: list(r.keys) for qid, r in zip(qids, results, strict=True)}
    scores = {qid: [float(s) for s in r.scores] for qid, r in zip(qids, results, strict=True)}
    embedded = next((s["model"] for s in sources if s["source"] == "server"), None)
    return keys, scores, results[0].generation if results else state.index.generation, embedded


def check_evaluation(
    state: ServerState, resamples: int, judgements: dict[str, dict[str, int]] | None
) -> None:
    """Refuse more resamples, or more judgements in all, than the server allows."""
    limits = state.limits
    if resamples > limits.max_resamples:
        raise state.too_large("resamples", resamples, limits.max_resamples, "max_resamples")
    bound = limits.max_queries * limits.max_k
    if judgements is not None and sum(len(j) for j in judgements.values()) > bound:
        raise state.too_large("judgements", sum(len(j) for j in judgements.values()), bound)


def compared(
    keys_a: dict[str, list[str]],
    scores_a: dict[str, list[float]],
    keys_b: dict[str, list[str]],
    scores_b: dict[str, list[float]],
    p: float,
) -> dict[str, dict[str, Any]]:
    """Per query: both rankings with their scores, what moved, and their overlap."""
    per_query: dict[str, dict[str, Any]] = {}
    for qid in keys_a:
        a, b = keys_a[qid], keys_b[qid]
        per_query[qid] = {
            "a": [{"key": key, "score": score} for key, score in zip(a, scores_a[qid], strict=True)],
            "b": [{"key": key, "score": score} for key, score in zip(b, scores_b[qid], strict=True)],
            "moved": moved(a, b),
            "jaccard": jaccard(a, b),
            "rbo": rank_biased_overlap(a, b, p),
        }
    return per_query


@router.post(
    "/v1/compare",
    tags=["evaluate"],
    summary="Rankings A and B side by side: moves, overlap, deltas",
    **answers(CompareResponse),
)
def compare(body: CompareRequest, state: Served) -> dict[str, Any]:
    state.check_k(body.k)
    if (body.query is None) == (body.queries is None):
        raise ApiError(422, "InvalidParameterError", "give one query or a set of queries", "query")
    queries = {"q": body.query} if body.query is not None else dict(body.queries or {})
    state.check_batch(len(queries), "queries", "max_queries")
    check_evaluation(state, body.resamples, body.judgements)
    ranking_a = state.ranking(body.a, "a.")
    ranking_b = state.ranking(body.b, "b.")
    keys_a, scores_a, generation_a, embedded_a = rankings_of(state, ranking_a, queries, body.k, "queries.")
    keys_b, scores_b, generation_b, embedded_b = rankings_of(state, ranking_b, queries, body.k, "queries.")
    per_query = compared(keys_a, scores_a, keys_b, scores_b, body.p)
    out: dict[str, Any] = {
        "a": ranking_a.label,
        "b": ranking_b.label,
        "k": body.k,
        "p": body.p,
        "generation": {"a": generation_a, "b": generation_b},
        "queries": per_query,
        "mean_jaccard": sum(float(q["jaccard"]) for q in per_query.values()) / len(per_query),
        "mean_rbo": sum(float(q["rbo"]) for q in per_query.values()) / len(per_query),
        "query_model": embedded_a or embedded_b,
    }
    if body.judgements is not None:
        with about_field("judgements"):
            out["judged"] = judged_comparison(
                keys_a,
                keys_b,
                body.judgements,
                body.measures,
                resamples=body.resamples,
                seed=body.seed,
                confidence=body.confidence,
            )
    return out


@router.post(
    "/v1/rank_eval",
    tags=["evaluate"],
    summary="Evaluate one ranking on judged queries, with intervals",
    **answers(RankEvalResponse),
)
def rank_eval(body: RankEvalRequest, state: Served) -> dict[str, Any]:
    state.check_k(body.k)
    state.check_batch(len(body.queries), "queries", "max_queries")
    check_evaluation(state, body.resamples, body.judgements)
    ranking = state.ranking(body.ranking, "ranking.")
    keys, _scores, generation_seen, embedded = rankings_of(state, ranking, body.queries, body.k, "queries.")
    with about_field("judgements"):
        result = judged_evaluation(
            keys,
            body.judgements,
            body.measures,
            resamples=body.resamples,
            seed=body.seed,
            confidence=body.confidence,
        )
    return {
        "ranking": ranking.label,
        "k": body.k,
        "generation": generation_seen,
        "query_model": embedded,
        **result,
    }
