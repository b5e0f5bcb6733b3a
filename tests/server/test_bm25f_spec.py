"""The server's ``spec`` takes ``bm25f(...)``: a field of the index scores, an unknown one is a 400."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_a_bm25f_spec_searches_and_an_unknown_field_is_a_400(open_client: TestClient) -> None:
    body = {"text": "ranking graph", "k": 10}
    fielded = open_client.post("/v1/search", json={**body, "spec": "bm25f(text=2, b.text=0.5)"})
    assert fielded.status_code == 200, fielded.text
    assert fielded.json()["hits"]
    unknown = open_client.post("/v1/search", json={**body, "spec": "bm25f(subject=2)"})
    assert unknown.status_code == 400, unknown.text
    assert "'subject' is not a text field" in unknown.json()["error"]["message"]
    malformed = open_client.post("/v1/search", json={**body, "spec": "bm25f(k1=1)"})
    assert malformed.status_code == 400, malformed.text
    assert "at least one field" in malformed.json()["error"]["message"]
