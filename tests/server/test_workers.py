"""`weft-search serve --workers 2` for real: two readers on one port, writes forwarded to the writer."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import KEY, WRITE
from weftsearch import Index


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="the writer listens on a Unix socket")
def test_two_workers_share_the_port_and_writes_reach_the_one_writer(index_path: Path) -> None:
    port = free_port()
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src, "WEFT_TEST_KEY": KEY}
    argv = [sys.executable, "-c", "from weftsearch.cli import main; raise SystemExit(main())"]
    argv += ["serve", "--index", str(index_path), "--port", str(port), "--workers", "2"]
    argv += ["--api-key-env", "WEFT_TEST_KEY"]
    server = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # start-up: a bounded wait for the processes, not a speed check
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, "the server stopped at start"
            time.sleep(0.1)
        with httpx.Client(base_url=base, timeout=30) as client:
            assert client.post("/v1/documents", json={"documents": [{"key": "x"}]}).status_code == 401
            for i in range(10):  # spread over both readers by the kernel; each forwards to the writer
                doc = {"key": f"w{i}", "text": f"walrus number {i}"}
                assert (
                    client.post("/v1/documents", json={"documents": [doc]}, headers=WRITE).status_code == 200
                )
            assert client.post("/v1/commit", headers=WRITE).status_code == 200
            for _ in range(6):  # whichever reader answers has adopted the commit
                hits = client.post("/v1/search", json={"text": "walrus", "spec": "bm25", "k": 20}).json()[
                    "hits"
                ]
                assert sorted(h["key"] for h in hits) == sorted(f"w{i}" for i in range(10))
            created = client.post("/v1/profiles", json={"name": "p", "spec": "bm25"}, headers=WRITE)
            assert created.status_code == 201
            assert client.get("/v1/profiles/p").json()["version"] == 1
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    with Index.open(index_path, readonly=True) as index:
        assert all(f"w{i}" in index for i in range(10))
