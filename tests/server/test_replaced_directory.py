"""The index directory deleted or replaced under a running server (issue 26, item 7).

Before, searches kept answering 200 from the old data (mapped files outlive
their names) and ``/health`` said ok, while stats and get answered 500. Now
the server notices at the next request: ``/health`` answers 503 with the
reason, and so does every route of the API, never a 200 of the old index
beside a 500; and it stays so (a restart serves what is there now).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")

from fastapi.testclient import TestClient

from tests.server.conftest import KEY, WRITE, make_index
from weftsearch import Document, Index
from weftsearch.distributed import RECORD, ShardedIndex
from weftsearch.server.app import create_app

QUERY = {"text": "graph", "vector": [0.5] * 8}  # the default ranking needs the query's vector

ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/search", {"text": "graph", "spec": "bm25"}),
    ("POST", "/v1/search", QUERY),
    ("POST", "/v1/search/batch", {"queries": [{"text": "graph"}], "spec": "bm25"}),
    ("GET", "/v1/documents/d1", None),
    ("GET", "/v1/stats", None),
    ("GET", "/v1/profiles", None),
    ("POST", "/v1/compare", {"a": {"spec": "bm25"}, "b": {}, "query": QUERY}),
    ("POST", "/v1/rank_eval", {"queries": {"q": QUERY}, "judgements": {"q": {"d1": 1}}}),
    ("POST", "/v1/documents", {"documents": [{"key": "w", "text": "w"}]}),
    ("DELETE", "/v1/documents/d2", None),
    ("POST", "/v1/commit", None),
    ("POST", "/v1/profiles", {"name": "p", "spec": "bm25"}),
]

OTHER_ID = "fedcba9876543210fedcba9876543210"


def _other_index(path: Path) -> Path:
    """A valid index of other documents under another id."""
    with Index.create(path, index_id=OTHER_ID) as index:
        index.add_many(
            [Document("o1", "graph other index"), Document("d1", "not the same d1")], progress=False
        )
    return path


def _delete(path: Path) -> None:
    shutil.rmtree(path)


def _replace_by_another(path: Path) -> None:
    other = _other_index(path.parent / "other")
    shutil.rmtree(path)
    os.rename(other, path)


def _replace_in_place(path: Path) -> None:
    """The same directory, its files now another index's (the directory's identity is unchanged)."""
    other = _other_index(path.parent / "other")
    for child in path.iterdir():
        if child.is_file() and child.name != "write.lock":
            child.unlink()
    for child in other.iterdir():
        if child.is_file() and child.name != "write.lock":
            shutil.copy2(child, path / child.name)


def _replace_by_garbage(path: Path) -> None:
    shutil.rmtree(path)
    path.mkdir()
    (path / "MANIFEST").write_bytes(b"\x00garbage\xff" * 10)
    (path / "seg-000001.wsg").write_bytes(os.urandom(256))


def _garbage_in_place(path: Path) -> None:
    (path / "MANIFEST").write_bytes(b'{"body": "not a manifest"}')


def _manifest_removed(path: Path) -> None:
    (path / "MANIFEST").unlink()


CHANGES: dict[str, Callable[[Path], None]] = {
    "deleted": _delete,
    "replaced by another index": _replace_by_another,
    "replaced in place by another index": _replace_in_place,
    "replaced by garbage": _replace_by_garbage,
    "garbage manifest in place": _garbage_in_place,
    "manifest removed": _manifest_removed,
}


def _check_unavailable(client: TestClient) -> None:
    health = client.get("/health")
    assert health.status_code == 503, health.text
    assert health.json()["status"] == "unavailable" and "restart the server" in health.json()["reason"]
    for method, path, body in ROUTES:
        answer = client.request(method, path, json=body, headers=WRITE)
        assert answer.status_code == 503, (method, path, answer.status_code, answer.text)
        error = answer.json()["error"]
        assert error["type"] == "IndexUnavailable" and error["message"] == health.json()["reason"]
    assert client.get("/metrics").status_code == 200  # the server's own counts still answer


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "read-only"])
def test_health_and_every_route_agree_once_the_directory_is_gone(
    tmp_path: Path, change: str, readonly: bool
) -> None:
    path = make_index(tmp_path / "idx")
    with TestClient(
        create_app(path, api_key=KEY, readonly=readonly), raise_server_exceptions=False
    ) as client:
        assert client.get("/health").json() == {"status": "ok"}
        for method, route, body in ROUTES[:8]:
            assert client.request(method, route, json=body).status_code == 200, (method, route)
        if not readonly:  # an uncommitted write: the shutdown must not commit it into what is there now
            assert (
                client.post("/v1/documents", json={"documents": [{"key": "late"}]}, headers=WRITE).status_code
                == 200
            )
        CHANGES[change](path)
        _check_unavailable(client)
        _check_unavailable(client)  # it stays unavailable
    if change.startswith("replaced") and "garbage" not in change:
        with Index.open(path, readonly=True) as now:  # the new index is untouched by the old server
            assert sorted(now.keys()) == ["d1", "o1"]


def test_a_commit_of_the_same_index_is_not_a_replacement(index_path: Path) -> None:
    """The writer's own commits, and a second writer's seen by a read-only server, change the manifest
    without changing the index: the server keeps serving."""
    with TestClient(create_app(index_path, api_key=KEY)) as client:
        for i in range(3):
            doc = {"key": f"n{i}", "text": "graph"}
            assert client.post("/v1/documents", json={"documents": [doc]}, headers=WRITE).status_code == 200
            assert client.post("/v1/commit", headers=WRITE).status_code == 200
            assert client.get("/health").json() == {"status": "ok"}
            assert client.get("/v1/stats").json()["documents"] == 7 + i
    with TestClient(create_app(index_path, readonly=True)) as reader:
        with Index.open(index_path) as writer:
            writer.add(Document("fresh", "graph"))
            writer.commit()
        assert reader.get("/health").json() == {"status": "ok"}
        assert reader.get("/v1/documents/fresh").status_code == 200


def _sharded(path: Path, documents: list[Document]) -> Path:
    with ShardedIndex.create(path, 2) as sharded:
        sharded.add_many(documents, progress=False)
        sharded.commit()
    return path


def _sharded_replaced_by_another(path: Path) -> None:
    other = _sharded(path.parent / "other", [Document("o1", "graph other index")])
    shutil.rmtree(path)
    os.rename(other, path)


def _garbage_record(path: Path) -> None:
    (path / RECORD).write_bytes(b"\x00garbage\xff" * 10)


def _record_removed(path: Path) -> None:
    (path / RECORD).unlink()


SHARDED_CHANGES: dict[str, Callable[[Path], None]] = {
    "deleted": _delete,
    "replaced by another sharded index": _sharded_replaced_by_another,
    "garbage record in place": _garbage_record,
    "record removed": _record_removed,
}


@pytest.mark.parametrize("change", list(SHARDED_CHANGES))
def test_a_sharded_server_is_watched_as_a_single_index_is(tmp_path: Path, change: str) -> None:
    """The sharded server watches its directory and SHARDS record: 503 with the reason, never old data."""
    path = _sharded(tmp_path / "s", [Document(f"d{i}", f"graph document {i}") for i in range(6)])
    with ShardedIndex.open(path) as sharded, TestClient(
        create_app(sharded, api_key=KEY), raise_server_exceptions=False
    ) as client:
        assert client.get("/health").json() == {"status": "ok"}
        assert client.post("/v1/search", json={"text": "graph", "spec": "bm25"}).status_code == 200
        SHARDED_CHANGES[change](path)
        health = client.get("/health")
        assert health.status_code == 503 and "restart the server" in health.json()["reason"], health.text
        for method, route, body in [
            ("POST", "/v1/search", {"text": "graph", "spec": "bm25"}),
            ("GET", "/v1/documents/d1", None),
            ("GET", "/v1/stats", None),
        ]:
            answer = client.request(method, route, json=body, headers=WRITE)
            assert answer.status_code == 503 and answer.json()["error"]["type"] == "IndexUnavailable"
