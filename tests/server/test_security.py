"""Keys, body limits, no paths, no key in logs, writes serialised, searches never waiting on commits.

The tests of what a client can do run twice (issue 26, item 10b): against the app in this
process, and against a real ``weft-search serve --workers 2`` (two reader processes, writes
forwarded to a writer process), started once per configuration for the module since a start
takes seconds; that second run is in the slow suite. Tests that spy inside the process
(constant-time comparison, a held commit, caplog) run in-process only.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import KEY, WRITE, make_index
from tests.server.serving import running_server
from weftsearch import Index
from weftsearch.server.app import ServerLimits, create_app

WRITES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/documents", {"documents": [{"key": "w", "text": "w"}]}),
    ("DELETE", "/v1/documents/gone", None),  # the test adds "gone" first (d1 stays for the others)
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


@dataclass(frozen=True)
class Served:
    """A server under test: a client of it, and its index directory."""

    client: httpx.Client | TestClient
    index_path: Path


class _WorkerServers:
    """Real ``serve --workers 2`` servers, one per configuration, each started at its first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.stack = ExitStack()
        self.started: dict[bool, Served] = {}

    def get(self, reads_keyed: bool) -> Served:
        if reads_keyed not in self.started:
            index = make_index(self.root / f"idx-{'reads-keyed' if reads_keyed else 'keyed'}")
            args = ["--workers", "2", "--api-key-env", "WEFT_TEST_KEY"]
            args += ["--require-key-for-reads"] if reads_keyed else []
            base = self.stack.enter_context(running_server(index, *args, env={"WEFT_TEST_KEY": KEY}))
            client = self.stack.enter_context(httpx.Client(base_url=base, timeout=60))
            self.started[reads_keyed] = Served(client, index)
        return self.started[reads_keyed]


@pytest.fixture(scope="module")
def worker_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_WorkerServers]:
    servers = _WorkerServers(tmp_path_factory.mktemp("workers"))
    with servers.stack:
        yield servers


@pytest.fixture(
    params=[
        "one process",
        pytest.param(
            "--workers 2",
            marks=[
                pytest.mark.slow,
                pytest.mark.skipif(
                    not hasattr(socket, "AF_UNIX"), reason="the writer listens on a Unix socket"
                ),
            ],
        ),
    ]
)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _serve(mode: str, request: pytest.FixtureRequest, path: Path, reads_keyed: bool) -> Iterator[Served]:
    if mode == "one process":
        with TestClient(create_app(make_index(path), api_key=KEY, read_key_required=reads_keyed)) as client:
            yield Served(client, path)
    else:
        servers: _WorkerServers = request.getfixturevalue("worker_servers")
        yield servers.get(reads_keyed)


@pytest.fixture
def keyed(mode: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """A server with a key, reads open: in this process, or ``serve --workers 2`` (shared by the module)."""
    yield from _serve(mode, request, tmp_path / "idx-keyed", reads_keyed=False)


@pytest.fixture
def reads_keyed(mode: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """A server whose reads need the key too."""
    yield from _serve(mode, request, tmp_path / "idx-reads-keyed", reads_keyed=True)


def call(
    client: httpx.Client | TestClient,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    headers: dict[str, str],
) -> int:
    return client.request(method, path, json=body, headers=headers).status_code


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_writes_need_the_key(keyed: Served, method: str, path: str, body: dict[str, Any] | None) -> None:
    client = keyed.client
    if method == "DELETE":
        add = client.post("/v1/documents", json={"documents": [{"key": "gone"}]}, headers=WRITE)
        assert add.status_code == 200
    assert call(client, method, path, body, {}) == 401
    assert call(client, method, path, body, {"X-API-Key": KEY + "x"}) == 403
    assert call(client, method, path, body, {"X-API-Key": ""}) == 403
    assert call(client, method, path, body, {"Authorization": "Bearer wrong"}) == 403
    assert call(client, method, path, body, {"Authorization": f"Bearer {KEY}"}) in (200, 201)


@pytest.mark.parametrize(("method", "path", "body"), READS)
def test_reads_are_open_unless_the_flag_says(
    keyed: Served, reads_keyed: Served, method: str, path: str, body: dict[str, Any] | None
) -> None:
    assert call(keyed.client, method, path, body, {}) == 200
    client = reads_keyed.client
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


def test_oversize_bodies_are_413_at_the_default_limit(keyed: Served) -> None:
    """The default limit, declared or streamed; with --workers the reader refuses before forwarding."""
    limit = ServerLimits().max_body_bytes
    client = keyed.client
    big = {"documents": [{"key": "big", "text": "x" * limit}]}
    response = client.post("/v1/documents", json=big, headers=WRITE)
    assert response.status_code == 413 and response.json()["error"]["type"] == "PayloadTooLarge"

    def chunks() -> Iterator[bytes]:
        yield b'{"documents": [{"key": "big", "text": "'
        for _ in range(limit // 1_000_000 + 1):
            yield b"y" * 1_000_000
        yield b'"}]}'

    headers = {"content-type": "application/json", **WRITE}
    assert client.post("/v1/documents", content=chunks(), headers=headers).status_code == 413
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
def test_no_field_can_name_a_file(keyed: Served, path: str, body: dict[str, Any]) -> None:
    folder = keyed.index_path / "profiles"
    before = set(folder.iterdir()) if folder.exists() else set()
    response = keyed.client.post(path, json=body, headers=WRITE)
    assert response.status_code in (400, 422), response.text
    assert not (keyed.index_path.parent / "escape.v000001.json").exists()
    assert (set(folder.iterdir()) if folder.exists() else set()) == before


def test_profile_paths_cannot_leave_the_folder(keyed: Served) -> None:
    for path in ("/v1/profiles/..%2F..%2Fetc%2Fpasswd", "/v1/profiles/..", "/v1/profiles/a.b/1"):
        assert keyed.client.get(path).status_code in (404, 422)


def test_concurrent_writes_serialise_without_losing_any(keyed: Served) -> None:
    threads_n, each = 6, 8
    errors: list[str] = []
    start = keyed.client.get("/v1/stats").json()["documents"]
    base_url = str(keyed.client.base_url)

    def writer(t: int) -> None:
        # One client per thread for a real server (a connection each); the in-process one is shared.
        client = (
            keyed.client
            if isinstance(keyed.client, TestClient)
            else httpx.Client(base_url=base_url, timeout=60)
        )
        with ExitStack() as stack:
            if client is not keyed.client:
                stack.enter_context(client)
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
    assert keyed.client.post("/v1/commit", headers=WRITE).status_code == 200
    assert errors == []
    stats = keyed.client.get("/v1/stats").json()
    assert stats.get("documents") == start + threads_n * each, stats
    with Index.open(keyed.index_path, readonly=True) as index:
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
def test_no_spelling_of_a_write_path_slips_past_the_key(keyed: Served, method: str, path: str) -> None:
    client = keyed.client
    body = {"documents": [{"key": "slipped", "text": "x"}]}
    response = client.request(method, path, json=body)
    assert response.status_code == 401, (method, path, response.text)
    assert client.get("/v1/documents/d1").status_code == 200
    assert client.get("/v1/documents/slipped").status_code == 404


def test_unknown_routes_and_methods_answer_in_the_error_shape(keyed: Served) -> None:
    """Every 4xx is {"error": {type, field, message}}, routing errors included (not FastAPI's {"detail"})."""
    open_client = keyed.client
    missing = open_client.get("/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.json() == {"error": {"type": "NotFound", "field": None, "message": "Not Found"}}
    method = open_client.put("/v1/search", json={})
    assert method.status_code == 405 and method.json()["error"]["type"] == "MethodNotAllowed"
    assert "allow" in {name.lower() for name in method.headers}


#: Wrong keys a client may send: secrets too (another deployment's key, a typo of this one).
WRONG_KEYS = ("wrong-key-9876543210", KEY + "-x")
#: Every spelling of a key in a query string (names any case, values raw and percent-encoded).
QUERY_SPELLINGS = (
    "api_key={}",
    "API_KEY={}",
    "Api-Key={}",
    "key={}",
    "KEY={}",
    "token={}",
    "access_token={}",
    "apikey={}",
    "x-api-key={}",
    "X-API-Key={}",
    "auth=Bearer%20{}",
    "{}",
    "q=1&api_key={}&z=2",
)
#: Routes of every kind: reads, writes, unknown (404), a wrong method (405), the health check.
ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/stats", None),
    ("POST", "/v1/search", {"text": "graph"}),
    ("POST", "/v1/search", {"text": "graph", "k": 0}),  # a 422
    ("GET", "/v1/documents/d1", None),
    ("GET", "/v1/documents/missing", None),  # a 404 of the API
    ("POST", "/v1/documents", {"documents": [{"key": "k", "text": "t"}]}),
    ("DELETE", "/v1/documents/k", None),
    ("POST", "/v1/commit", None),
    ("POST", "/v1/profiles", {"name": "p", "spec": "bm25"}),
    ("GET", "/v1/profiles/no.such", None),  # a 422 of a path parameter
    ("GET", "/metrics", None),
    ("GET", "/health", None),
    ("GET", "/nothing-here", None),  # no such route
    ("PUT", "/v1/search", {}),  # no such method
]


def _raw_request(base: str, request: bytes) -> bytes:
    """Send bytes as they are (no client library to tidy them) and return what came back."""
    import socket

    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_key_never_reaches_a_real_servers_output(index_path: Path, tmp_path: Path, workers: int) -> None:
    """``weft-search serve`` for real, with a known key: requests carry it (and wrong keys) in every
    spelling (headers, query strings, the path) on every kind of route, malformed requests included;
    then the server is stopped and its whole output, its /metrics and every answer are searched for
    each key. Before the fix uvicorn's access log printed query strings whole: GET /v1/stats?api_key=KEY."""
    import httpx

    log = tmp_path / "serve.log"
    args = ["--api-key-env", "WEFT_TEST_KEY", "--workers", str(workers)]
    secrets = (KEY, *WRONG_KEYS)
    answers: list[str] = []
    with (
        running_server(index_path, *args, env={"WEFT_TEST_KEY": KEY}, log=log) as base,
        httpx.Client(base_url=base, timeout=60) as http,
    ):
        for secret in secrets:
            header_spellings: list[dict[str, str]] = [
                {"X-API-Key": secret},
                {"x-api-key": secret},
                {"X-API-KEY": secret},
                {"Authorization": f"Bearer {secret}"},
                {"authorization": f"bearer {secret}"},
                {"Authorization": secret},
                {"Authorization": f"Basic {secret}"},
                {"Cookie": f"api_key={secret}"},
            ]
            queries = [spelling.format(v) for spelling in QUERY_SPELLINGS for v in (secret, quote(secret))]
            # Every spelling on some route and every route with some spelling (the whole product
            # is thousands of requests), the routes turning round so each meets several.
            for i in range(max(len(ROUTES), len(header_spellings), len(queries))):
                method, path, body = ROUTES[i % len(ROUTES)]
                headers = header_spellings[i % len(header_spellings)]
                answers.append(http.request(method, path, json=body, headers=headers).text)
                method, path, body = ROUTES[(i + 5) % len(ROUTES)]
                answers.append(http.request(method, f"{path}?{queries[i % len(queries)]}", json=body).text)
        # The key where no key belongs: in the path, as a document key and as a route.
        for path in (f"/v1/documents/{KEY}", f"/{KEY}", f"/v1/profiles/{KEY}", f"/v1/{KEY}/x"):
            for method in ("GET", "POST", "DELETE"):
                answers.append(http.request(method, path, headers=WRITE).text)
        # Malformed requests, which the HTTP parser refuses before any route.
        for raw in (
            f"GET /v1/stats?api_key={KEY} HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
            f"GET /v1/stats?api_key={KEY} HTTP/9.9\r\nHost: x\r\nConnection: close\r\n\r\n",
            f"POST /v1/commit?token={KEY} HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
            f"POST /v1/documents HTTP/1.1\r\nHost: x\r\nX-API-Key: {KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\n{bad}",
            f"GET /v1/stats?api_key={KEY} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ):
            answers.append(_raw_request(base, raw.encode()).decode("utf-8", "replace"))
        assert http.post("/v1/commit", headers=WRITE).status_code == 200
        metrics = http.get("/metrics").text
        assert "weft_requests_total" in metrics
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "GET /v1/stats" in text and "401" in text and "403" in text  # the access log is there
    assert "no API key" not in text  # the warning of a server started without one
    for secret in secrets:
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            assert form not in text, f"the server's output holds {form!r}"
            assert form not in metrics, f"/metrics holds {form!r}"
            leaking = [answer for answer in answers if form in answer]
            assert leaking == [], f"answers hold {form!r}: {leaking[:3]}"
