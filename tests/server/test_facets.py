"""The server's list fields and facets (issue 30): upserts with lists, ``facets`` in a search
request and its answer, and 4xx (never 500) for a bad facet or list."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.server.conftest import WRITE
from weftsearch import Index


def test_list_fields_upsert_and_facets_in_a_search(client: TestClient, index_path: object) -> None:
    documents = [
        {"key": "t1", "text": "graph tags", "fields": {"tags": ["x", "y"], "year": 2000}},
        {"key": "t2", "text": "graph tags", "fields": {"tags": ["y"], "year": 2001}},
    ]
    assert client.post("/v1/documents", json={"documents": documents}, headers=WRITE).status_code == 200
    body = {
        "text": "graph",
        "spec": "bm25",
        "k": 1,
        "filter": "tags contains 'y'",
        "facets": ["tags", "year"],
    }
    answer = client.post("/v1/search", json=body)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert len(data["hits"]) == 1 and data["hits"][0]["fields"]["tags"] in (["x", "y"], ["y"])
    assert data["facets"] == {
        "tags": [{"value": "y", "count": 2}, {"value": "x", "count": 1}],
        "year": [{"value": 2000, "count": 1}, {"value": 2001, "count": 1}],
    }
    # Every live document without a filter; the server's index agrees with Index.facets.
    plain = client.post(
        "/v1/search", json={"text": "graph", "spec": "bm25", "facets": ["source"], "facet_k": 1}
    )
    assert plain.json()["facets"] == {"source": [{"value": "a", "count": 3}]}
    assert "facets" not in client.post("/v1/search", json={"text": "graph", "spec": "bm25"}).json()
    assert client.get("/v1/documents/t1").json()["fields"]["tags"] == ["x", "y"]


def test_bad_facets_and_lists_are_4xx_naming_the_field(client: TestClient) -> None:
    unknown = client.post("/v1/search", json={"text": "graph", "spec": "bm25", "facets": ["text"]})
    assert unknown.status_code == 400
    assert unknown.json()["error"]["type"] == "UnknownFieldError"
    assert unknown.json()["error"]["field"] == "facets"
    assert "'text' to facet on" in unknown.json()["error"]["message"]
    for body, status in (
        ({"text": "graph", "spec": "bm25", "facets": ["year"], "facet_k": 0}, 422),
        ({"text": "graph", "spec": "bm25", "facets": ["year"], "facet_k": 10_001}, 422),
        ({"text": "graph", "spec": "bm25", "facets": "year"}, 422),
        ({"text": "graph", "spec": "bm25", "facets": ["@time"]}, 400),
        ({"text": "graph", "spec": "bm25", "filter": "year contains 1"}, 400),
    ):
        answer = client.post("/v1/search", json=body)
        assert answer.status_code == status, (body, answer.text)
    for fields in ({"tags": ["a", 1]}, {"tags": [True]}, {"tags": [["a"]]}, {"tags": ["a"] * 1001}):
        answer = client.post(
            "/v1/documents",
            json={"documents": [{"key": "bad", "text": "t", "fields": fields}]},
            headers=WRITE,
        )
        assert answer.status_code in (400, 422), (fields, answer.text)
        assert client.get("/v1/documents/bad").status_code == 404
    # A scalar field stays scalar: the whole batch is refused, naming the field.
    mixed = client.post(
        "/v1/documents",
        json={
            "documents": [{"key": "ok", "text": "t"}, {"key": "m", "text": "t", "fields": {"year": [1, 2]}}]
        },
        headers=WRITE,
    )
    assert mixed.status_code == 400 and "'year'" in mixed.json()["error"]["message"]
    assert client.get("/v1/documents/ok").status_code == 404


def test_index_facets_match_the_server(index_path: object) -> None:
    with Index.open(index_path, readonly=True) as index:  # type: ignore[arg-type]
        assert index.facets(None, ["source"], 1) == {"source": [("a", 3)]}


def test_the_batch_endpoint_facets_each_query(client: TestClient) -> None:
    body = {
        "queries": [{"text": "graph", "filter": "year < 1992"}, {"text": "graph"}],
        "spec": "bm25",
        "facets": ["source"],
    }
    answer = client.post("/v1/search/batch", json=body)
    assert answer.status_code == 200, answer.text
    facets = [result["facets"] for result in answer.json()["results"]]
    assert facets == [
        {"source": [{"value": "a", "count": 1}, {"value": "b", "count": 1}]},
        {"source": [{"value": "a", "count": 3}, {"value": "b", "count": 3}]},
    ]
    plain = client.post("/v1/search/batch", json={"queries": [{"text": "graph"}], "spec": "bm25"})
    assert "facets" not in plain.json()["results"][0]
    unknown = client.post("/v1/search/batch", json={**body, "facets": ["text"]})
    assert unknown.status_code == 400 and unknown.json()["error"]["field"] == "facets"
