"""``POST /v1/search`` with ``highlight``: Elasticsearch-like request, each hit's marked snippets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")

from fastapi.testclient import TestClient

from tests.server.conftest import TEXTS
from weftsearch import Document, Index
from weftsearch.distributed.sharded import ShardedIndex
from weftsearch.schema import Schema, TextField
from weftsearch.server.app import create_app


def search(client: TestClient, **body: Any) -> Any:
    response = client.post("/v1/search", json={"spec": "bm25", **body})
    return response


def test_hits_carry_marked_snippets(open_client: TestClient) -> None:
    response = search(open_client, text="graph ranking", highlight={})
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    assert {hit["key"] for hit in hits} == {"d1", "d2", "d4", "d6"}
    for hit in hits:
        text = TEXTS[hit["key"]]
        (snippet,) = hit["highlights"]["text"]["snippets"]
        assert hit["highlight"] == {"text": [snippet["marked"]]}
        assert snippet["text"] == text[snippet["start"] : snippet["end"]]
        # Marked as search matches: "rankings" stems as "ranking" does.
        assert [text[s:e] for s, e in snippet["spans"]] == [
            word for word in text.split() if word in ("graph", "ranking", "rankings")
        ]
    d4 = next(hit for hit in hits if hit["key"] == "d4")
    assert d4["highlight"]["text"] == ["<em>graph</em> neural networks for <em>ranking</em>"]


def test_elasticsearch_options(open_client: TestClient) -> None:
    body = {
        "fields": {"text": {}},
        "fragment_size": 10,
        "number_of_fragments": 1,
        "pre_tags": ["<mark>"],
        "post_tags": ["</mark>"],
        "encoder": "html",
    }
    response = search(open_client, text="vector", highlight=body)
    assert response.status_code == 200, response.text
    (d3,) = [hit for hit in response.json()["hits"] if hit["key"] == "d3"]
    (marked,) = d3["highlight"]["text"]
    assert "<mark>vector</mark>" in marked and len(d3["highlights"]["text"]["snippets"][0]["text"]) <= 10


def test_no_highlight_fields_unless_asked(open_client: TestClient) -> None:
    hit = search(open_client, text="graph").json()["hits"][0]
    assert "highlight" not in hit and "highlights" not in hit


def test_an_index_without_text_says_why(tmp_path: Path) -> None:
    with Index.create(tmp_path / "bare", store_text=False) as index:
        index.add_many([Document("a", "graph retrieval")], progress=False)
    with TestClient(create_app(tmp_path / "bare")) as client:
        hit = search(client, text="graph", highlight={"fields": ["text"]}).json()["hits"][0]
    assert hit["highlight"] == {"text": []}
    assert hit["highlights"]["text"]["reason"].startswith("the text is not stored")


@pytest.mark.parametrize(
    ("highlight", "status", "field", "message"),
    [
        ({"fields": ["title"]}, 400, "highlight", "unknown text field 'title'; text fields: text"),
        ({"fields": {"text": {"fragment_size": 5}}}, 400, "highlight.fields", "per-field highlight options"),
        ({"fragment_size": 0}, 422, None, None),
        ({"number_of_fragments": 101}, 422, None, None),
        ({"pre_tags": ["<a>", "<b>"]}, 422, None, None),
        ({"encoder": "xml"}, 422, None, None),
        ({"fields": [""]}, 400, "highlight", "non-empty field names"),
        ({"pre_tags": ["x" * 101]}, 400, "highlight", "pre_tag must be a string of at most 100"),
    ],
)
def test_bad_highlight_requests_are_4xx(
    open_client: TestClient, highlight: dict[str, Any], status: int, field: str | None, message: str | None
) -> None:
    response = search(open_client, text="graph", highlight=highlight)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    if message is not None:
        assert error["field"] == field and message in error["message"]


def test_a_sharded_index_highlights_as_one_index(tmp_path: Path) -> None:
    """Each hit's snippets read from its shard: the single index's answer, named fields included."""
    schema = Schema((TextField("text", positions=True), TextField("title", positions=True)))
    documents = [
        Document(key, text, text_fields={"title": f"graph {key} title"}) for key, text in TEXTS.items()
    ]
    with Index.create(tmp_path / "one", schema=schema) as index:
        index.add_many(documents, progress=False)
    sharded = ShardedIndex.create(tmp_path / "s", 3, schema=schema)
    sharded.add_many(documents, progress=False)
    sharded.commit()
    answers = []
    for served in (tmp_path / "one", sharded):
        with TestClient(create_app(served)) as client:
            body = {"text": 'graph OR title:"d1 title"', "syntax": "lucene"}
            response = search(client, **body, highlight={"fields": ["text", "title"], "fragment_size": 30})
            assert response.status_code == 200, response.text
            answers.append(response.json()["hits"])
            unknown = search(client, **body, highlight={"fields": ["body"]})
            assert unknown.status_code == 400 and "'body'" in unknown.json()["error"]["message"]
    sharded.close()
    one, many = answers
    assert one and all(hit["highlights"]["title"]["snippets"] for hit in one)
    assert [(h["key"], h["highlight"], h["highlights"]) for h in many] == [
        (h["key"], h["highlight"], h["highlights"]) for h in one
    ]


def test_named_fields_fielded_phrases_and_unknown_fields(tmp_path: Path) -> None:
    schema = Schema((TextField("text", positions=True), TextField("title", positions=True)))
    with Index.create(tmp_path / "named", schema=schema) as index:
        index.add_many(
            [
                Document("a", "gamma beta alpha", text_fields={"title": "Alpha beta runs"}),
                Document("b", "alpha beta", text_fields={"title": "beta alpha"}),
            ],
            progress=False,
        )
    with TestClient(create_app(tmp_path / "named")) as client:
        response = search(
            client,
            text='title:"alpha beta"',
            syntax="lucene",
            highlight={"fields": ["title", "text"]},
        )
        assert response.status_code == 200, response.text
        (hit,) = response.json()["hits"]
        assert hit["key"] == "a"
        assert hit["highlight"] == {"title": ["<em>Alpha beta</em> runs"], "text": []}
        response = search(client, text="body:alpha", syntax="lucene")
        assert response.status_code == 400, response.text
        assert "unknown text field 'body'" in response.json()["error"]["message"]
        assert "text, title" in response.json()["error"]["message"]
