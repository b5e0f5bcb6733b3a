"""``/v1/documents`` with ``text_fields``: named text fields in, back out, an unknown name refused by name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")

from fastapi.testclient import TestClient

from weftsearch import Index
from weftsearch.distributed.sharded import ShardedIndex
from weftsearch.schema import Schema, TextField
from weftsearch.server.app import create_app


@pytest.fixture
def named(tmp_path: Path) -> Iterator[TestClient]:
    """A server over an index whose schema has ``title`` (stored) and ``notes`` (not stored)."""
    schema = Schema(
        (
            TextField("text", positions=True),
            TextField("title", positions=True),
            TextField("notes", stored=False),
        )
    )
    Index.create(tmp_path / "named", schema=schema).close()
    with TestClient(create_app(tmp_path / "named")) as client:
        yield client


def upsert(client: TestClient, *documents: dict[str, Any]) -> Any:
    # json.dumps escapes a lone surrogate (\\ud800), which httpx's json= cannot encode.
    body = json.dumps({"documents": list(documents)})
    return client.post("/v1/documents", content=body, headers={"Content-Type": "application/json"})


def test_text_fields_are_kept_returned_and_searched(named: TestClient) -> None:
    response = upsert(
        named,
        {"key": "a", "text": "gamma body", "text_fields": {"title": "Alpha beta", "notes": "zeta"}},
        {"key": "b", "text": "alpha beta body"},
    )
    assert response.status_code == 200, response.text
    got = named.get("/v1/documents/a")
    assert got.status_code == 200, got.text
    # notes is indexed, not stored: the document comes back without it (as Index.get gives it).
    assert got.json()["text_fields"] == {"title": "Alpha beta"}
    assert named.get("/v1/documents/b").json()["text_fields"] == {}
    for query, keys in (('title:"alpha beta"', ["a"]), ("notes:zeta", ["a"]), ("text:alpha", ["b"])):
        found = named.post("/v1/search", json={"text": query, "syntax": "lucene", "spec": "bm25"})
        assert found.status_code == 200, found.text
        assert [hit["key"] for hit in found.json()["hits"]] == keys, query


def test_an_unknown_text_field_is_a_400_naming_it_and_the_known_ones(named: TestClient) -> None:
    response = upsert(
        named,
        {"key": "ok", "text": "fine"},
        {"key": "bad", "text": "x", "text_fields": {"title": "t", "subject": "s"}},
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "InvalidDocumentError"
    assert error["field"] == "documents.1.text_fields.subject"
    assert "'subject'" in error["message"] and "title" in error["message"] and "notes" in error["message"]
    # All or nothing: the good document of the batch was not written either.
    assert named.get("/v1/documents/ok").status_code == 404


@pytest.mark.parametrize(
    ("text_fields", "status", "field"),
    [
        ({"text": "the default field"}, 400, "documents.0.text_fields"),  # that is the document's text
        ({"bad name": "x"}, 400, "documents.0.text_fields"),
        ({"title": "a\ud800b"}, 400, "documents.0.text_fields"),  # UTF-8 cannot store it
        ({"title": 3}, 422, "documents.0.text_fields.title"),
        ({"title": None}, 422, "documents.0.text_fields.title"),
        (["title"], 422, "documents.0.text_fields"),
    ],
)
def test_malformed_text_fields_are_refused(
    named: TestClient, text_fields: Any, status: int, field: str
) -> None:
    response = upsert(named, {"key": "m", "text": "x", "text_fields": text_fields})
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field
    assert named.get("/v1/documents/m").status_code == 404


def test_an_index_without_a_schema_refuses_any_text_field(open_client: TestClient) -> None:
    response = upsert(open_client, {"key": "n", "text": "x", "text_fields": {"title": "t"}})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["field"] == "documents.0.text_fields.title"
    assert "none besides 'text'" in error["message"]
    assert open_client.get("/v1/documents/d1").json()["text_fields"] == {}


def test_a_sharded_server_refuses_text_fields_before_writing(tmp_path: Path) -> None:
    with ShardedIndex.create(tmp_path / "s", 2) as sharded, TestClient(create_app(sharded)) as client:
        response = upsert(
            client,
            *({"key": f"k{i}", "text": "x"} for i in range(8)),
            {"key": "t", "text": "x", "text_fields": {"title": "t"}},
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["field"] == "documents.8.text_fields.title"
        assert all(client.get(f"/v1/documents/k{i}").status_code == 404 for i in range(8))


def test_a_sharded_server_answers_fielded_queries_and_bm25f_as_one_index(tmp_path: Path) -> None:
    """Parsed fielded queries and ``bm25f(...)`` rankings pass through to the shards: the same
    hits and score bits as a server over one index; what one index refuses is the same 400."""
    schema = Schema((TextField("text", positions=True), TextField("title", positions=False)))
    documents = [
        {"key": f"k{i}", "text": f"alpha w{i}x beta", "text_fields": {"title": f"zebra t{i}y"}}
        for i in range(80)
    ]
    Index.create(tmp_path / "one", schema=schema).close()
    sharded = ShardedIndex.create(tmp_path / "s", 3, schema=schema)
    answers = []
    try:
        for served in (tmp_path / "one", sharded):
            with TestClient(create_app(served)) as client:
                written = upsert(client, *documents)
                assert written.status_code == 200, written.text
                assert client.post("/v1/commit").status_code == 200
                answer = []
                for text, spec in [
                    ("title:zebra w1*", "bm25"),
                    ('"alpha w3x" OR title:t3y^2', "bm25"),
                    ("zebra alpha", "bm25f(title=2.0, text=1.0, b.title=0.5)"),
                    ("+alpha -title:t1y", "bm25f(title=2.0, text=1.0)"),
                    ("body:alpha", "bm25"),
                    ('title:"zebra t1y"', "bm25"),
                    ("w*", "bm25"),
                ]:
                    found = client.post("/v1/search", json={"text": text, "syntax": "lucene", "spec": spec})
                    body = found.json()
                    if found.status_code == 200:
                        answer.append([(hit["key"], hit["score"]) for hit in body["hits"]])
                    else:
                        assert found.status_code == 400, found.text
                        answer.append([(body["error"]["type"], body["error"]["message"])])
                answers.append(answer)
    finally:
        sharded.close()
    one, many = answers
    assert many == one
    assert all(one[n] for n in range(4))  # hits to compare
    assert [row[0][0] for row in one[4:]] == [
        "UnknownTextFieldError",
        "PhrasePositionsError",
        "InvalidQueryError",
    ]
