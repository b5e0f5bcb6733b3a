"""The HTTP API against the library: same answers, typed errors as 4xx JSON naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import KEY, WRITE, vector
from weftsearch import Document, Index, Query
from weftsearch.ranking.specs import ArmBuilder
from weftsearch.scorers.bm25 import PLAN_KEYS
from weftsearch.server.app import ServerLimits, create_app


def library_search(path: Path, spec: str, query: Query, k: int) -> tuple[list[str], list[float]]:
    arm = ArmBuilder().arm(f"x={spec}")
    with Index.open(path, readonly=True) as index:
        results = index.search(query, k, arm.fuser, *arm.scorers, depth=max(arm.depth, k))
        return list(results.keys), [float(s) for s in results.scores]


@pytest.mark.parametrize(
    "spec",
    [
        "bm25",
        "rrf(bm25, vector, k=60)@100",
        "weighted(bm25, vector, weights=[1, 0.5])",
        "recency(half_life=30)",
    ],
)
def test_search_answers_what_index_search_answers(index_path: Path, spec: str) -> None:
    client_vector = [float(x) for x in vector(3)]
    with TestClient(create_app(index_path)) as client:
        response = client.post(
            "/v1/search",
            json={
                "text": "graph ranking",
                "vector": client_vector,
                "spec": spec,
                "k": 4,
                "filter": "year >= 1991",
            },
        )
    assert response.status_code == 200, response.text
    body = response.json()
    query = Query(text="graph ranking", vector=vector(3), filter="year >= 1991")
    keys, scores = library_search(index_path, spec, query, 4)
    assert [hit["key"] for hit in body["hits"]] == keys
    assert [hit["score"] for hit in body["hits"]] == scores
    assert body["ranking"] == {"spec": spec}
    assert all("signals" not in hit for hit in body["hits"])


def test_explain_gives_each_signals_rank_and_contribution(open_client: TestClient) -> None:
    body = open_client.post(
        "/v1/search", json={"text": "graph", "spec": "rrf(bm25, recency(half_life=30))", "explain": True}
    ).json()
    hit = body["hits"][0]
    assert [s["signal"] for s in hit["signals"]] == body["signals"]
    assert sum(s["contribution"] for s in hit["signals"]) == pytest.approx(hit["score"])


def test_explain_gives_each_hit_its_explanation_down_to_the_terms(open_client: TestClient) -> None:
    body = open_client.post(
        "/v1/search",
        json={
            "text": "graph retrieval",
            "spec": "rrf(bm25, recency(half_life=30))",
            "explain": True,
            "explain_terms": True,
            "k": 3,
        },
    ).json()
    for hit in body["hits"]:
        tree = hit["explanation"]
        assert tree["value"] == hit["score"]
        assert [part["value"] for part in tree["details"]] == [s["contribution"] for s in hit["signals"]]
        bm25, recency = tree["details"]
        if hit["signals"][0]["rank"] is not None:
            (breakdown,) = bm25["details"]  # the BM25 scorer's own: per term, idf, tf, lengths
            assert breakdown["value"] == hit["signals"][0]["score"]
            assert breakdown["details"][0]["description"].startswith("weight(text:")
        assert recency["details"] == []  # the recency scorer offers no breakdown
    plain = open_client.post("/v1/search", json={"text": "graph", "spec": "bm25", "explain": True}).json()
    assert plain["hits"] and all("explanation" not in hit for hit in plain["hits"])  # signals only
    page = open_client.post(
        "/v1/search", json={"text": "graph", "spec": "bm25", "k": 1, "explain_terms": True}
    ).json()
    assert "explanation" in page["hits"][0]
    after = open_client.post(
        "/v1/search",
        json={"text": "graph", "spec": "bm25", "k": 1, "explain_terms": True, "after": page["next_cursor"]},
    )
    assert after.status_code == 400
    assert after.json()["error"]["field"] == "explain_terms" and "offset" in after.json()["error"]["message"]


def test_explain_shows_each_signals_plan_and_the_result_says_what_was_cut_short(
    open_client: TestClient,
) -> None:
    from tests.server.conftest import vector

    request = {"text": "graph", "vector": vector(3).tolist(), "filter": "source == 'a'", "k": 3}
    spec = "rrf(bm25, vector)"
    plain = open_client.post("/v1/search", json={**request, "spec": spec}).json()
    assert plain["cut_short"] == [] and "plans" not in plain
    explained = open_client.post("/v1/search", json={**request, "spec": spec, "explain": True}).json()
    assert explained["cut_short"] == []
    assert set(explained["plans"]) == set(explained["signals"])
    vector_plan = explained["plans"][explained["signals"][1]]
    assert vector_plan is not None and vector_plan["path"] == "exact"  # a handful of rows: scanned exactly
    assert [hit["key"] for hit in explained["hits"]] == [hit["key"] for hit in plain["hits"]]
    bm25_plan = explained["plans"][explained["signals"][0]]
    assert bm25_plan is not None and tuple(bm25_plan) == PLAN_KEYS  # every key, in order
    assert bm25_plan["path"] in ("numpy", "compiled") and bm25_plan["terms"] == 1


def test_batch_search_equals_single_searches(open_client: TestClient) -> None:
    queries = [
        {"text": "graph"},
        {"text": "vector search", "filter": "source == 'a'"},
        {"text": "nothing matches zzz"},
    ]
    batch = open_client.post("/v1/search/batch", json={"queries": queries, "spec": "bm25", "k": 3}).json()[
        "results"
    ]
    singles = [open_client.post("/v1/search", json={**q, "spec": "bm25", "k": 3}).json() for q in queries]
    assert [r["hits"] for r in batch] == [s["hits"] for s in singles]
    assert batch[2]["hits"] == []


def test_filter_errors_name_the_field_and_the_position(open_client: TestClient) -> None:
    syntax = open_client.post("/v1/search", json={"text": "graph", "filter": "year >= "})
    assert syntax.status_code == 400
    error = syntax.json()["error"]
    assert (error["type"], error["field"]) == ("FilterSyntaxError", "filter")
    assert "character 8" in error["message"]
    body = {"text": "graph", "spec": "bm25", "filter": "yeer >= 1"}
    unknown = open_client.post("/v1/search", json=body).json()["error"]
    assert unknown["type"] == "UnknownFieldError" and "year" in unknown["message"]
    batch = open_client.post(
        "/v1/search/batch", json={"queries": [{"text": "a"}, {"text": "b", "filter": "(("}]}
    )
    assert batch.status_code == 400 and batch.json()["error"]["field"] == "queries.1.filter"


@pytest.mark.parametrize(
    ("body", "field", "status"),
    [
        ({"text": "x", "k": 0}, "k", 422),
        ({"text": "x", "k": 51}, "k", 422),
        ({"text": "x", "vector": [1.0, 2.0]}, "vector", 400),
        ({"text": "x", "seeds": ["bad\nkey"]}, "seeds", 400),
        ({"text": "x", "time": "not a time"}, "time", 400),
        ({"text": "x", "spec": "rrf(bm25, nosuch)"}, "spec", 400),
        ({"text": "x", "spec": "learned(bm25, vector)"}, "spec", 400),
        ({"text": "x", "profile": "nosuch"}, "profile", 404),
        ({"text": "x", "profile": "../../etc/passwd"}, "profile", 400),
        ({"text": "x", "profile": {"name": "../etc", "version": 1}}, "profile", 422),
        ({"text": "x", "spec": "bm25", "profile": "p"}, "profile", 400),
        ({"text": "x", "index": "/tmp"}, "index", 422),
        ({"text": "x", "k": "ten"}, "k", 422),
    ],
)
def test_bad_requests_are_4xx_naming_the_field(
    open_client: TestClient, body: dict[str, object], field: str, status: int
) -> None:
    response = open_client.post("/v1/search", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field


def test_a_lone_surrogate_in_the_text_is_refused_naming_it(open_client: TestClient) -> None:
    body = b'{"text": "a \\ud800 b"}'
    response = open_client.post("/v1/search", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["field"] == "text"


def test_malformed_json_is_422(open_client: TestClient) -> None:
    response = open_client.post(
        "/v1/search", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422


def test_documents_upsert_get_delete_commit_round_trip(index_path: Path) -> None:
    with TestClient(create_app(index_path, api_key=KEY)) as client:
        doc = {
            "key": "n1",
            "text": "fresh graph note",
            "fields": {"year": 2020},
            "links": ["d1"],
            "time": "2020-01-02",
        }
        response = client.post("/v1/documents", json={"documents": [doc]}, headers=WRITE)
        assert response.status_code == 200 and response.json()["upserted"] == 1
        # visible to the next search at once (published), before any commit
        hits = client.post("/v1/search", json={"text": "fresh note", "spec": "bm25"}).json()["hits"]
        assert hits[0]["key"] == "n1"
        got = client.get("/v1/documents/n1").json()
        assert got["fields"] == {"year": 2020} and got["links"] == ["d1"] and got["time"] == 1577923200.0
        assert client.delete("/v1/documents/d2", headers=WRITE).status_code == 200
        assert client.get("/v1/documents/d2").status_code == 404
        assert client.delete("/v1/documents/d2", headers=WRITE).status_code == 404
        assert client.post("/v1/commit", headers=WRITE).status_code == 200
        assert client.get("/v1/stats").json()["documents"] == 6
    with Index.open(index_path, readonly=True) as index:
        assert "n1" in index and "d2" not in index


def test_a_bad_document_leaves_the_batch_unapplied(client: TestClient) -> None:
    docs = [{"key": "ok", "text": "fine"}, {"key": "bad", "fields": {"year": "not a number"}}]
    response = client.post("/v1/documents", json={"documents": docs}, headers=WRITE)
    assert response.status_code == 400 and response.json()["error"]["type"] == "FieldTypeError"
    assert client.get("/v1/documents/ok").status_code == 404


def test_document_keys_are_keys_never_paths(client: TestClient) -> None:
    assert client.get("/v1/documents/..%2F..%2Fetc%2Fpasswd").status_code == 404
    response = client.post("/v1/documents", json={"documents": [{"key": "../x", "text": "t"}]}, headers=WRITE)
    assert response.status_code == 200
    assert client.get("/v1/documents/..%2Fx").json()["key"] == "../x"


def test_stats_health_and_metrics(client: TestClient) -> None:
    stats = client.get("/v1/stats").json()
    assert stats["documents"] == 6 and stats["vector_dim"] == 8 and "path" not in stats
    assert client.get("/health").json() == {"status": "ok"}
    client.post("/v1/search", json={"text": "graph", "spec": "bm25"})
    client.post("/v1/search", json={"text": "graph", "k": 0})
    text = client.get("/metrics").text
    assert 'weft_requests_total{endpoint="/v1/search",method="POST",status="200"} 1.0' in text
    assert 'weft_requests_total{endpoint="/v1/search",method="POST",status="422"} 1.0' in text
    assert 'weft_request_seconds_bucket{endpoint="/v1/search",le="+Inf"} 2.0' in text
    assert f"weft_index_generation {float(stats['generation'])}" in text
    assert "weft_index_documents 6.0" in text


def test_uncommitted_writes_are_committed_at_a_graceful_shutdown(index_path: Path) -> None:
    with TestClient(create_app(index_path, api_key=KEY)) as client:
        client.post("/v1/documents", json={"documents": [{"key": "late", "text": "t"}]}, headers=WRITE)
    with Index.open(index_path, readonly=True) as index:
        assert "late" in index


def test_readonly_server_refuses_writes_and_sees_new_commits(index_path: Path) -> None:
    with TestClient(create_app(index_path, readonly=True)) as reader, Index.open(index_path) as writer:
        assert reader.post("/v1/documents", json={"documents": [{"key": "z"}]}).status_code == 409
        writer.add(Document("z", "zebra"))
        writer.commit()
        hits = reader.post("/v1/search", json={"text": "zebra", "spec": "bm25"}).json()["hits"]
        assert hits[0]["key"] == "z"  # the search itself adopted the commit
        assert reader.get("/v1/documents/z").status_code == 200
        assert reader.get("/v1/stats").json()["documents"] == 7


def test_limits_are_configurable(index_path: Path) -> None:
    limits = ServerLimits(max_query_chars=10, max_documents=1, max_batch=2)
    with TestClient(create_app(index_path, limits=limits)) as client:
        assert client.post("/v1/search", json={"text": "x" * 11}).json()["error"]["field"] == "text"
        two = [{"key": "a1"}, {"key": "a2"}]
        assert client.post("/v1/documents", json={"documents": two}).status_code == 422
        queries = [{"text": "a"}] * 3
        assert client.post("/v1/search/batch", json={"queries": queries}).status_code == 422
    with pytest.raises(Exception, match="max_k"):
        ServerLimits(max_k=0)


# Issue 26 items 2 and 4: numbers a field cannot hold, and deep nesting, are 400s naming the problem
# (were 500s from OverflowError, ValueError and RecursionError), in every place a filter enters.
BAD_FILTERS = [
    ("year >= 1" + "0" * 400, "an integer of 401 digits is beyond"),
    ("year in (1990, 1" + "0" * 4000 + ")", "an integer of 4,001 digits is beyond"),
    ("year < 1e400", "number 1e400 is out of range"),
    ("year != 1e-400", "underflows to 0"),
    ("not " * 600 + "year == 1990", "nests and/or/not more than 32 deep"),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILTERS)
def test_a_filter_number_or_nesting_out_of_bounds_is_a_400(
    open_client: TestClient, text: str, message: str
) -> None:
    attempts = [
        ("/v1/search", {"text": "graph", "filter": text}, "filter"),
        ("/v1/search/batch", {"queries": [{"text": "a"}, {"text": "b", "filter": text}]}, "queries.1.filter"),
        ("/v1/search", {"text": "graph", "spec": f"bm25 where {text}"}, "spec"),
        ("/v1/profiles", {"name": "p", "spec": "bm25", "filter": text}, None),
    ]
    for route, body, field in attempts:
        answer = open_client.post(route, json=body)
        assert answer.status_code == 400, (route, answer.text[:300])
        error = answer.json()["error"]
        assert message in error["message"] and len(error["message"]) < 600, (route, error)
        if field is not None:
            assert error["field"] == field


def test_integers_compare_exactly_through_the_server(open_client: TestClient) -> None:
    # year holds 1990..1995; 1995 + 2**53 has no float64, so nothing may match it by rounding.
    for text, want in [("year == 1991", 1), ("year < 9007199254740993", 6), ("year == 9007199254740993", 0)]:
        answer = open_client.post(
            "/v1/search", json={"text": "graph ranking search", "spec": "bm25", "filter": text, "k": 10}
        )
        assert answer.status_code == 200, answer.text
        hits = answer.json()["hits"]
        assert len({hit["key"] for hit in hits}) <= want and (want == 0) == (not hits), (text, hits)


@pytest.mark.parametrize("depth", [200, 900, 10_000])
@pytest.mark.parametrize(
    "route",
    ["/v1/search", "/v1/search/batch", "/v1/documents", "/v1/profiles", "/v1/compare", "/v1/rank_eval"],
)
def test_a_deeply_nested_json_body_is_a_client_error(open_client: TestClient, route: str, depth: int) -> None:
    # Issue 26 item 4: every route that reads JSON, with an array nested DEPTH deep in a field.
    deep = "[" * depth + "]" * depth
    for body in (deep, '{"text": "a", "vector": ' + deep + "}", '{"queries": [{"text": ' + deep + "}]}"):
        answer = open_client.post(route, content=body, headers={"content-type": "application/json"})
        assert answer.status_code in (400, 422), (route, depth, answer.status_code, answer.text[:200])
        assert "error" in answer.json()


@pytest.mark.parametrize(
    "vector", [[True] * 8, ["1.5"] * 8, [[1.0]] * 8], ids=["booleans", "numeric strings", "nested"]
)
def test_a_vector_of_anything_but_numbers_is_refused(open_client: TestClient, vector: list[Any]) -> None:
    # Issue 26 item 9d: pydantic's lax mode read true as 1.0 and "1.5" as 1.5 (200).
    search = open_client.post("/v1/search", json={"text": "graph", "vector": vector})
    assert search.status_code == 422, search.text
    assert search.json()["error"]["field"].startswith("vector")
    upsert = open_client.post(
        "/v1/documents", json={"documents": [{"key": "n", "text": "t", "vector": vector}]}
    )
    assert upsert.status_code == 422, upsert.text
    assert open_client.get("/v1/documents/n").status_code == 404


@pytest.mark.parametrize("value", [2**53 + 1, 10**400], ids=["2**53+1", "1e400"])
def test_an_integer_field_beyond_the_field_store_is_a_400(open_client: TestClient, value: int) -> None:
    # Issue 26 item 9b: 10**400 was accepted, then an OverflowError (500) at the commit.
    body = {"documents": [{"key": "n", "text": "t", "fields": {"year": value}}]}
    answer = open_client.post("/v1/documents", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert "beyond the integers a number field holds" in error["message"] and len(error["message"]) < 400
    assert open_client.post("/v1/commit").status_code == 200


def test_lucene_syntax_is_opt_in_and_its_errors_are_400_with_the_position(open_client: TestClient) -> None:
    # Issue 29: 'AND'/'NOT' were read as words; with "syntax": "lucene" they are operators.
    body = {"text": "ranking AND NOT graph", "spec": "bm25", "k": 10}
    parsed = open_client.post("/v1/search", json={**body, "syntax": "lucene"})
    plain = open_client.post("/v1/search", json=body)
    assert parsed.status_code == plain.status_code == 200
    assert {hit["key"] for hit in parsed.json()["hits"]} == {"d2", "d6"}  # ranking, rankings; no graph
    assert {hit["key"] for hit in plain.json()["hits"]} >= {"d1", "d2", "d4"}
    # The batch route reads each query's syntax the same way (one snapshot, the same answers).
    batched = open_client.post(
        "/v1/search/batch",
        json={
            "queries": [{"text": body["text"], "syntax": "lucene"}, {"text": body["text"]}],
            "spec": "bm25",
        },
    )
    assert batched.status_code == 200, batched.text
    answers = [[hit["key"] for hit in answer["hits"]] for answer in batched.json()["results"]]
    single = [[hit["key"] for hit in answer.json()["hits"]] for answer in (parsed, plain)]
    assert answers == single
    bad = open_client.post("/v1/search", json={"text": "ranking AND (graph", "syntax": "lucene"})
    assert bad.status_code == 400
    error = bad.json()["error"]
    assert (error["type"], error["field"], error["position"]) == ("QuerySyntaxError", "text", 12)
    assert "at position 12" in error["message"]
    batch = open_client.post(
        "/v1/search/batch",
        json={"queries": [{"text": "graph"}, {"text": '"graph', "syntax": "lucene"}], "spec": "bm25"},
    )
    assert batch.status_code == 400
    assert (batch.json()["error"]["field"], batch.json()["error"]["position"]) == ("queries.1.text", 0)
    unknown = open_client.post("/v1/search", json={"text": "graph", "syntax": "sql"})
    assert unknown.status_code == 422
    # Parsed, but not answerable by this index: typed 400s, never a 500.
    for text, kind in (("title:graph", "UnknownTextFieldError"), ('"graph ranking"', "PhrasePositionsError")):
        refused = open_client.post("/v1/search", json={"text": text, "syntax": "lucene", "spec": "bm25"})
        assert (refused.status_code, refused.json()["error"]["type"]) == (400, kind), refused.text
    # No text: nothing to parse, as in plain syntax (a vector-only query may say lucene all the same).
    vector_only = {"vector": vector(1).tolist(), "spec": "vector", "syntax": "lucene"}
    assert open_client.post("/v1/search", json=vector_only).status_code == 200
