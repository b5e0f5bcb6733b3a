"""The server launcher (:mod:`weftsearch.server.launch`): starts a real ``weft-search serve`` on loopback,
waits for ``/health``, stops it; a child that stops or hangs at start raises ``ServerStartError`` with
what it printed."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

pytest.importorskip("uvicorn", reason="a real server needs the 'server' extra")

from weftsearch.errors import InvalidParameterError, ServerStartError
from weftsearch.server.launch import LOOPBACK, ServerProcess, free_port


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((LOOPBACK, port)) == 0


def test_a_launched_server_answers_on_loopback_and_stops(index_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    server = ServerProcess(["--index", str(index_path)], log=log)
    with server:
        assert server.running
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        assert "--host" in server.argv() and server.argv()[server.argv().index("--host") + 1] == LOOPBACK
        assert httpx.get(f"{server.base_url}/health", timeout=10).status_code == 200
        assert server.start() == server.base_url  # already running: a no-op
    assert not server.running
    assert server.returncode == 0  # SIGINT is uvicorn's graceful stop
    assert not _listening(server.port)
    output = log.read_text(encoding="utf-8")
    assert f"127.0.0.1:{server.port}" in output  # uvicorn's start line
    # Started without a key, it says so: anyone on loopback may write (issue 26, item 16f).
    assert f"WARNING: no API key (--api-key-env NAME): anyone who can reach 127.0.0.1:{server.port}" in output
    assert server.stop() == 0  # idempotent


def test_a_server_that_stops_at_start_raises_with_its_output(tmp_path: Path) -> None:
    missing = tmp_path / "no-index-here"
    server = ServerProcess(["--index", str(missing)], start_seconds=60)
    with pytest.raises(ServerStartError, match="stopped at start") as caught:
        server.start()
    assert str(missing) in caught.value.output  # the child's own error, not a bare "it failed"
    assert str(missing) in str(caught.value)
    assert caught.value.returncode not in (None, 0)
    assert not server.running


def test_a_server_that_does_not_answer_in_time_is_stopped_and_raises(index_path: Path) -> None:
    server = ServerProcess(["--index", str(index_path)], start_seconds=0.05)
    with pytest.raises(ServerStartError, match="did not answer") as caught:
        server.start()
    assert caught.value.returncode is None  # it was running: the launcher stopped it
    assert not server.running
    assert not _listening(server.port)


@pytest.mark.parametrize("args", [["--host", "0.0.0.0"], ["--port", "80"], ["--port=80"]])
def test_the_launcher_chooses_the_address(args: list[str]) -> None:
    with pytest.raises(InvalidParameterError, match=r"binds 127\.0\.0\.1"):
        ServerProcess(["--index", "x", *args])


@pytest.mark.parametrize("port", [0, 70_000, True])
def test_a_given_port_is_checked(port: int) -> None:
    with pytest.raises(InvalidParameterError, match="port"):
        ServerProcess(["--index", "x"], port=port)


def test_free_port_is_a_loopback_port_nothing_listens_on() -> None:
    port = free_port()
    assert 1 <= port <= 65535 and not _listening(port)
