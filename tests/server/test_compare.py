"""Compare and rank_eval: overlap measures, moves, and the eval package's measures and intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from weftsearch.eval.metrics import evaluate, jaccard, rank_biased_overlap, run_from_rankings
from weftsearch.eval.stats import paired_bootstrap
from weftsearch.server.app import ServerLimits, create_app
from weftsearch.server.compare import moved


def test_moved() -> None:
    assert moved(["a", "b", "c"], ["c", "a", "d"]) == [
        {"key": "c", "rank_a": 3, "rank_b": 1, "change": 2},
        {"key": "a", "rank_a": 1, "rank_b": 2, "change": -1},
        {"key": "d", "rank_a": None, "rank_b": 3, "change": None},
        {"key": "b", "rank_a": 2, "rank_b": None, "change": None},
    ]


QUERIES = {"q1": {"text": "graph ranking"}, "q2": {"text": "vector search"}, "q3": {"text": "hybrid text"}}
QRELS = {"q1": {"d1": 1, "d4": 2}, "q2": {"d3": 1}, "q3": {"d6": 2, "d2": 1}}


def test_compare_one_query(index_path: Path) -> None:
    with TestClient(create_app(index_path)) as client:
        body = {
            "a": {"spec": "bm25"},
            "b": {"spec": "rrf(bm25, recency(half_life=1))"},
            "query": QUERIES["q1"],
            "k": 4,
        }
        out = client.post("/v1/compare", json=body).json()
        a_keys = [
            h["key"]
            for h in client.post("/v1/search", json={**QUERIES["q1"], "spec": "bm25", "k": 4}).json()["hits"]
        ]
    result = out["queries"]["q"]
    assert [row["key"] for row in result["a"]] == a_keys
    b_keys = [row["key"] for row in result["b"]]
    assert result["moved"] == moved(a_keys, b_keys)
    assert result["jaccard"] == jaccard(a_keys, b_keys)
    assert result["rbo"] == rank_biased_overlap(a_keys, b_keys, 0.9)
    assert out["a"] == {"spec": "bm25"} and "judged" not in out


def test_compare_a_query_set_with_judgements_uses_the_eval_measures_and_bootstrap(index_path: Path) -> None:
    with TestClient(create_app(index_path)) as client:
        body = {
            "a": {"spec": "bm25"},
            "b": {"spec": "rrf(bm25, recency(half_life=30), k=60)"},
            "queries": QUERIES,
            "k": 5,
            "judgements": QRELS,
            "measures": ["nDCG@10", "P@5"],
            "resamples": 200,
            "seed": 7,
        }
        out = client.post("/v1/compare", json=body).json()
    keys_a = {qid: [h["key"] for h in q["a"]] for qid, q in out["queries"].items()}
    keys_b = {qid: [h["key"] for h in q["b"]] for qid, q in out["queries"].items()}
    ndcg_a = evaluate(QRELS, run_from_rankings(keys_a), ["nDCG@10"]).per_query("nDCG@10")
    ndcg_b = evaluate(QRELS, run_from_rankings(keys_b), ["nDCG@10"]).per_query("nDCG@10")
    judged = out["judged"]["measures"]["nDCG@10"]
    assert {qid: v["delta"] for qid, v in judged["per_query"].items()} == {
        q: ndcg_b[q] - ndcg_a[q] for q in QRELS
    }
    expected = paired_bootstrap(ndcg_b, ndcg_a, resamples=200, seed=7)
    assert (judged["difference"]["low"], judged["difference"]["high"]) == (expected.low, expected.high)
    assert judged["difference"]["mean"] == expected.mean_difference
    assert set(out["judged"]["measures"]) == {"nDCG@10", "P@5"}


def test_rank_eval_reports_ir_measures_with_intervals(index_path: Path) -> None:
    with TestClient(create_app(index_path)) as client:
        body = {
            "ranking": {"spec": "bm25"},
            "queries": QUERIES,
            "judgements": QRELS,
            "resamples": 100,
            "seed": 3,
        }
        out = client.post("/v1/rank_eval", json=body).json()
        keys = {
            qid: [
                h["key"]
                for h in client.post("/v1/search", json={**q, "spec": "bm25", "k": 100}).json()["hits"]
            ]
            for qid, q in QUERIES.items()
        }
        bad = client.post("/v1/rank_eval", json={**body, "measures": ["F1"]})
        unjudged = client.post("/v1/rank_eval", json={**body, "judgements": {"zz": {"d1": 1}}})
    assert set(out["measures"]) == {"nDCG@10", "P@10", "RR", "R@100"}
    expected = evaluate(QRELS, run_from_rankings(keys), ["nDCG@10", "RR"])
    for name in ("nDCG@10", "RR"):
        got = out["measures"][name]
        assert got["mean"] == expected.mean(name) and got["per_query"] == expected.per_query(name)
        zeros = dict.fromkeys(QRELS, 0.0)
        interval = paired_bootstrap(expected.per_query(name), zeros, resamples=100, seed=3)
        assert (got["low"], got["high"]) == (interval.low, interval.high)
        assert got["low"] <= got["mean"] <= got["high"]
    assert bad.status_code == 400 and bad.json()["error"] == {
        "type": "UnknownMeasureError",
        "field": "measures",
        "message": bad.json()["error"]["message"],
    }
    assert unjudged.status_code == 400 and "no query to evaluate" in unjudged.json()["error"]["message"]


def test_compare_refuses_both_or_neither_query(index_path: Path) -> None:
    with TestClient(create_app(index_path)) as client:
        both = {"a": {}, "b": {}, "query": {"text": "x"}, "queries": {"q": {"text": "x"}}}
        assert client.post("/v1/compare", json=both).status_code == 422
        assert client.post("/v1/compare", json={"a": {}, "b": {}}).status_code == 422


def _ten_thousand() -> dict[str, dict[str, str]]:
    words = ["graph", "ranking", "vector", "search", "hybrid", "text", "news", "citation"]
    return {f"q{i}": {"text": f"{words[i % 8]} {words[(i // 8) % 8]}"} for i in range(10_000)}


def test_one_call_covers_ten_thousand_queries_and_the_limit_is_named(index_path: Path) -> None:
    """rank_eval takes 10,000 queries in one call (SciFact's 300 test queries get one interval);
    one more is a 422 naming the limit and the option that raises it, for compare too.

    Before, both refused more than 256 queries (422), a limit stated nowhere.
    """
    queries = _ten_thousand()
    judgements = {qid: {"d1": 1, "d4": 2} for qid in queries}
    with TestClient(create_app(index_path)) as client:
        body = {
            "ranking": {"spec": "bm25"},
            "queries": queries,
            "judgements": judgements,
            "measures": ["nDCG@10"],
            "k": 10,
            "resamples": 100,
        }
        assert len(json.dumps(body)) < ServerLimits().max_body_bytes
        evaluated = client.post("/v1/rank_eval", json=body)
        assert evaluated.status_code == 200, evaluated.text[:500]
        assert len(evaluated.json()["measures"]["nDCG@10"]["per_query"]) == 10_000
        over = {**queries, "one-more": {"text": "graph"}}
        for path, request in (
            ("/v1/rank_eval", {**body, "queries": over}),
            ("/v1/compare", {"a": {"spec": "bm25"}, "b": {"spec": "bm25"}, "queries": over}),
        ):
            refused = client.post(path, json=request)
            assert refused.status_code == 422, refused.text[:500]
            error = refused.json()["error"]
            assert (error["type"], error["field"]) == ("LimitExceeded", "queries")
            assert "at most 10000" in error["message"] and "--max-queries" in error["message"]


def test_a_body_over_the_limit_is_413_naming_it(index_path: Path) -> None:
    with TestClient(create_app(index_path, limits=ServerLimits(max_body_bytes=1_000))) as client:
        refused = client.post("/v1/search", json={"text": "x" * 2_000, "spec": "bm25"})
        assert refused.status_code == 413
        message = refused.json()["error"]["message"]
        assert "1000 bytes" in message and "--max-body-bytes" in message


@pytest.mark.slow
def test_compare_covers_ten_thousand_queries_in_one_call(index_path: Path) -> None:
    """Compare searches both rankings: twice rank_eval's work, so in the slow suite."""
    queries = _ten_thousand()
    judgements = {qid: {"d1": 1} for qid in queries}
    with TestClient(create_app(index_path)) as client:
        body = {
            "a": {"spec": "bm25"},
            "b": {"spec": "bm25@5"},
            "queries": queries,
            "judgements": judgements,
            "resamples": 100,
        }
        compared = client.post("/v1/compare", json=body)
        assert compared.status_code == 200, compared.text[:500]
        assert len(compared.json()["queries"]) == 10_000
        assert compared.json()["judged"]["queries"] == sorted(queries)  # in id order, as measures list them
