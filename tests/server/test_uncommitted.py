"""Every read route answers while writes are accepted but not committed (issue 26, item 3).

``GET /v1/stats`` answered 500: the segment an upsert seals in memory has no
file name yet (``SegmentStats.name`` is ``None``) and the response model said
a name is always a string. Each read route is checked in each uncommitted
state, on a single index and on a sharded one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")

from fastapi.testclient import TestClient

from tests.server.conftest import KEY, TEXTS, WRITE, vector
from weftsearch import Document
from weftsearch.distributed import ShardedIndex
from weftsearch.server.app import create_app

READS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/stats", None),
    ("GET", "/v1/documents/d2", None),
    ("POST", "/v1/search", {"text": "graph ranking", "spec": "bm25"}),
    ("POST", "/v1/search", {"text": "graph ranking", "spec": "bm25", "explain": True}),
    ("POST", "/v1/search/batch", {"queries": [{"text": "graph"}, {"text": "fresh"}], "spec": "bm25"}),
    ("POST", "/v1/compare", {"a": {"spec": "bm25"}, "b": {"spec": "bm25"}, "query": {"text": "fresh"}}),
    (
        "POST",
        "/v1/rank_eval",
        {"ranking": {"spec": "bm25"}, "queries": {"q": {"text": "fresh"}}, "judgements": {"q": {"n1": 1}}},
    ),
    ("GET", "/health", None),
    ("GET", "/metrics", None),
    ("GET", "/v1/profiles", None),
    ("GET", "/v1/profiles/p", None),
    ("GET", "/openapi.json", None),
    ("GET", "/", None),
]

_NEW = {"key": "n1", "text": "fresh graph document", "vector": [0.5] * 8, "fields": {"year": 2001}}


def _upsert(client: TestClient, key: str = "n1") -> None:
    _ok(client.post("/v1/documents", json={"documents": [{**_NEW, "key": key}]}, headers=WRITE))


def _delete(client: TestClient) -> None:
    _ok(client.delete("/v1/documents/d1", headers=WRITE))


#: The uncommitted states: the writes each makes through the API (no commit anywhere).
STATES: dict[str, list[Callable[[TestClient], None]]] = {
    "upserted": [_upsert],
    "deleted": [_delete],
    "upserted and deleted": [_upsert, _delete],
    "upserted twice": [_upsert, lambda c: _upsert(c, "n2")],
}


def _ok(response: Any) -> None:
    assert response.status_code == 200, response.text


@pytest.fixture
def sharded_app(tmp_path: Path) -> Iterator[Any]:
    with ShardedIndex.create(tmp_path / "s", 2, vector_dim=8) as sharded:
        sharded.add_many(
            [Document(key, text, vector=vector(i)) for i, (key, text) in enumerate(TEXTS.items())],
            progress=False,
        )
        sharded.commit()
    opened = ShardedIndex.open(tmp_path / "s")
    try:
        yield create_app(opened, api_key=KEY)
    finally:
        opened.close()


def _check_every_read(client: TestClient, state: str) -> None:
    assert client.post("/v1/profiles", json={"name": "p", "spec": "bm25"}, headers=WRITE).status_code == 201
    for write in STATES[state]:
        write(client)
    for method, path, body in READS:
        response = client.request(method, path, json=body)
        assert response.status_code == 200, (state, method, path, response.text)
    stats = client.get("/v1/stats").json()
    if "upserted" in state:  # the segment sealed in memory is listed, its name null
        assert [s for s in stats["segments"] if s["name"] is None], stats
    expected = 6 + ("upserted" in state) + ("twice" in state) - ("deleted" in state)
    assert stats["documents"] == expected
    # Committing names every segment, and the count holds.
    assert client.post("/v1/commit", headers=WRITE).status_code == 200
    committed = client.get("/v1/stats").json()
    assert committed["documents"] == expected
    assert all(isinstance(s["name"], str) for s in committed["segments"])


@pytest.mark.parametrize("state", list(STATES))
def test_every_read_route_answers_with_writes_uncommitted(index_path: Path, state: str) -> None:
    with TestClient(create_app(index_path, api_key=KEY), raise_server_exceptions=False) as client:
        _check_every_read(client, state)


@pytest.mark.parametrize("state", list(STATES))
def test_every_read_route_answers_with_writes_uncommitted_sharded(sharded_app: Any, state: str) -> None:
    with TestClient(sharded_app, raise_server_exceptions=False) as client:
        _check_every_read(client, state)
