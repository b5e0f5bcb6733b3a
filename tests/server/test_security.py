"""Keys, body limits, no paths, no key in logs, writes serialised, searches never waiting on commits."""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import KEY, WRITE
from tests.server.serving import running_server
from weftsearch import Index
from weftsearch.server.app import ServerLimits, create_app

WRITES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/documents", {"documents": [{"key": "w", "text": "w"}]}),
    ("DELETE", "/v1/documents/d1", None),
    ("POST", "/v1/commit", None),
    ("POST", "/v1/profiles", {"name": "p", "spec": "bm25"}),
]
READS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/search", {"text": "graph", "spec": "bm25"}),
    ("POST", "/v1/search/batch", {"queries": [{"text": "graph"}], "spec": "bm25"}),
    ("GET", "/v1/documents/d1", None),
    ("GET", "/v1/stats", None),
    ("GET", "/v1/profiles", None),
    ("GET", "/metrics", None),
    ("POST", "/v1/compare", {"a": {"spec": "bm25"}, "b": {}, "query": {"text": "x", "vector": [0.5] * 8}}),
    (
        "POST",
        "/v1/rank_eval",
        {"queries": {"q": {"text": "x", "vector": [0.5] * 8}}, "judgements": {"q": {"d1": 1}}},
    ),
]


def call(
    client: TestClient, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]
) -> int:
    return client.request(method, path, json=body, headers=headers).status_code


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_writes_need_the_key(client: TestClient, method: str, path: str, body: dict[str, Any] | None) -> None:
    assert call(client, method, path, body, {}) == 401
    assert call(client, method, path, body, {"X-API-Key": KEY + "x"}) == 403
    assert call(client, method, path, body, {"X-API-Key": ""}) == 403
    assert call(client, method, path, body, {"Authorization": "Bearer wrong"}) == 403
    assert call(client, method, path, body, {"Authorization": f"Bearer {KEY}"}) in (200, 201)


@pytest.mark.parametrize(("method", "path", "body"), READS)
def test_reads_are_open_unless_the_flag_says(
    index_path: Path, method: str, path: str, body: dict[str, Any] | None
) -> None:
    with TestClient(create_app(index_path, api_key=KEY)) as client:
        assert call(client, method, path, body, {}) == 200
    with TestClient(create_app(index_path, api_key=KEY, read_key_required=True)) as client:
        assert call(client, method, path, body, {}) == 401
        assert call(client, method, path, body, {"X-API-Key": "nope"}) == 403
        assert call(client, method, path, body, WRITE) == 200
        assert client.get("/health").status_code == 200


def test_the_key_is_compared_in_constant_time(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert client.post("/v1/commit", headers={"X-API-Key": "guess"}).status_code == 403
    assert seen == [(hashlib.sha256(b"guess").digest(), hashlib.sha256(KEY.encode()).digest())]


def test_the_key_never_reaches_the_logs(index_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(index_path, api_key=KEY)) as client:
        for headers in (
            {"X-API-Key": KEY},
            {"Authorization": f"Bearer {KEY}"},
            {"X-API-Key": KEY + "-wrong"},
        ):
            client.post("/v1/documents", json={"documents": [{"key": "z"}]}, headers=headers)
            response = client.post("/v1/search", json={"text": "x", "k": 0}, headers=headers)
            assert KEY not in response.text
    assert "POST /v1/documents 403" in caplog.text  # the server does log requests
    assert KEY not in caplog.text


def test_oversize_bodies_are_413(index_path: Path) -> None:
    with TestClient(create_app(index_path, api_key=KEY, limits=ServerLimits(max_body_bytes=1_000))) as client:
        big = {"documents": [{"key": "big", "text": "x" * 2_000}]}
        response = client.post("/v1/documents", json=big, headers=WRITE)
        assert response.status_code == 413 and response.json()["error"]["type"] == "PayloadTooLarge"

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
            yield b'{"text": "'
            for _ in range(20):
                yield b"y" * 100
            yield b'"}'

        streamed = client.post("/v1/search", content=chunks(), headers={"content-type": "application/json"})
        assert streamed.status_code == 413
        assert client.post("/v1/search", json={"text": "graph", "spec": "bm25"}).status_code == 200
        assert client.get("/v1/documents/big").status_code == 404


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/search", {"text": "x", "path": "/etc/passwd"}),
        ("/v1/search", {"text": "x", "index": "/tmp/other"}),
        ("/v1/search", {"text": "x", "profile": "../../etc/passwd"}),
        ("/v1/search", {"text": "x", "profile": {"name": "/etc/passwd"}}),
        ("/v1/profiles", {"name": "../escape", "spec": "bm25"}),
        ("/v1/profiles", {"name": "ok", "spec": "bm25", "file": "/tmp/x"}),
        ("/v1/rank_eval", {"queries": {}, "judgements": {}, "dataset": "/data/scifact"}),
        ("/v1/documents", {"documents": [], "from_file": "/tmp/corpus.jsonl"}),
    ],
)
def test_no_field_can_name_a_file(
    client: TestClient, index_path: Path, path: str, body: dict[str, Any]
) -> None:
    response = client.post(path, json=body, headers=WRITE)
    assert response.status_code in (400, 422), response.text
    assert not (index_path.parent / "escape.v000001.json").exists()
    assert not (index_path / "profiles").exists() or list((index_path / "profiles").iterdir()) == []


def test_profile_paths_cannot_leave_the_folder(client: TestClient) -> None:
    for path in ("/v1/profiles/..%2F..%2Fetc%2Fpasswd", "/v1/profiles/..", "/v1/profiles/a.b/1"):
        assert client.get(path).status_code in (404, 422)


def test_concurrent_writes_serialise_without_losing_any(index_path: Path) -> None:
    threads_n, each = 6, 8
    errors: list[str] = []
    with TestClient(create_app(index_path, api_key=KEY)) as client:

        def writer(t: int) -> None:
            for i in range(each):
                doc = {"key": f"t{t}-{i}", "text": f"thread {t} item {i}", "fields": {"thread": t}}
                response = client.post("/v1/documents", json={"documents": [doc]}, headers=WRITE)
                if response.status_code != 200:
                    errors.append(response.text)
                if i % 3 == 2 and client.post("/v1/commit", headers=WRITE).status_code != 200:
                    errors.append("commit failed")
                client.post("/v1/search", json={"text": "thread item", "spec": "bm25"})

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert client.post("/v1/commit", headers=WRITE).status_code == 200
        assert errors == []
        assert client.get("/v1/stats").json()["documents"] == 6 + threads_n * each
    with Index.open(index_path, readonly=True) as index:
        assert all(f"t{t}-{i}" in index for t in range(threads_n) for i in range(each))


def test_a_search_never_waits_on_a_commit(index_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit held inside its manifest write: searches still answer, and see the last state."""
    from weftsearch.storage.directory import IndexDirectory

    entered, release = threading.Event(), threading.Event()
    real = IndexDirectory.publish

    def held(self: IndexDirectory, manifest: Any) -> Any:
        entered.set()
        assert release.wait(60)
        return real(self, manifest)

    with TestClient(create_app(index_path, api_key=KEY)) as client:
        assert (
            client.post(
                "/v1/documents", json={"documents": [{"key": "new", "text": "zebra"}]}, headers=WRITE
            ).status_code
            == 200
        )
        monkeypatch.setattr(IndexDirectory, "publish", held)
        committing = threading.Thread(target=lambda: client.post("/v1/commit", headers=WRITE))
        committing.start()
        try:
            assert entered.wait(60)
            answers: list[Any] = []

            def read() -> None:
                for _ in range(20):
                    answers.append(client.post("/v1/search", json={"text": "zebra", "spec": "bm25"}).json())
                answers.append(client.get("/v1/documents/new").status_code)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            reader.join(60)  # a deadlock detector, not a speed test: the commit is held until after
            assert not reader.is_alive(), "a search waited for the commit"
            assert all(a["hits"][0]["key"] == "new" for a in answers[:20]) and answers[20] == 200
        finally:
            release.set()
            committing.join()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/documents/"),
        ("POST", "/v1/%64ocuments"),  # percent-encoded: the check sees the decoded path the router sees
        ("POST", "/v1/commit/"),
        ("POST", "/v1/./commit"),
        ("POST", "/v1/x/../commit"),
        ("PUT", "/v1/documents"),
        ("PATCH", "/v1/documents/d1"),
        ("DELETE", "/v1/documents/%64%31"),
        ("POST", "/v1/profiles/"),
        ("DELETE", "/v1/profiles/p"),
    ],
)
def test_no_spelling_of_a_write_path_slips_past_the_key(
    client: TestClient, index_path: Path, method: str, path: str
) -> None:
    body = {"documents": [{"key": "slipped", "text": "x"}]}
    response = client.request(method, path, json=body)
    assert response.status_code == 401, (method, path, response.text)
    assert client.get("/v1/documents/d1").status_code == 200
    assert client.get("/v1/documents/slipped").status_code == 404


def test_unknown_routes_and_methods_answer_in_the_error_shape(open_client: TestClient) -> None:
    """Every 4xx is {"error": {type, field, message}}, routing errors included (not FastAPI's {"detail"})."""
    missing = open_client.get("/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.json() == {"error": {"type": "NotFound", "field": None, "message": "Not Found"}}
    method = open_client.put("/v1/search", json={})
    assert method.status_code == 405 and method.json()["error"]["type"] == "MethodNotAllowed"
    assert "allow" in {name.lower() for name in method.headers}


@pytest.mark.parametrize("workers", [1, 2])
def test_the_key_never_reaches_a_real_servers_output(index_path: Path, tmp_path: Path, workers: int) -> None:
    """``weft-search serve`` for real: uvicorn's access log, the server's log and, with two workers, the
    forwarding to the writer; requests with the right key, a wrong one that contains it, and a bearer."""
    log = tmp_path / "serve.log"
    args = ["--api-key-env", "WEFT_TEST_KEY", "--workers", str(workers)]
    with running_server(index_path, *args, env={"WEFT_TEST_KEY": KEY}, log=log) as base:
        import httpx

        with httpx.Client(base_url=base, timeout=30) as http:
            for headers in (
                {"X-API-Key": KEY},
                {"Authorization": f"Bearer {KEY}"},
                {"X-API-Key": KEY + "-x"},
            ):
                http.post("/v1/documents", json={"documents": [{"key": "k", "text": "t"}]}, headers=headers)
                http.post("/v1/commit", headers=headers)
                http.post("/v1/search", json={"text": "t", "k": 0}, headers=headers)  # a 422
            assert http.post("/v1/commit", headers=WRITE).status_code == 200
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "POST /v1/commit" in text and "403" in text  # the access log is there, and shows refusals
    assert KEY not in text
