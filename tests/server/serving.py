"""Run ``weft-search serve`` for real in a child process on a free loopback port, and stop it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

SRC = str(Path(__file__).resolve().parents[2] / "src")


def free_port() -> int:
    """A TCP port nothing listens on now (the server binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(
    index: Path,
    *args: str,
    env: dict[str, str] | None = None,
    start_seconds: float = 120.0,
    log: Path | None = None,
) -> Iterator[str]:
    """``weft-search serve --index INDEX --port P ARGS`` until the block ends; yields its base URL.

    The child's output (stdout and stderr, the access log included) goes to
    ``log`` when given, else to the null device. The wait for it to answer
    ``/health`` is bounded (a start-up bound, not a speed check); at the end
    it gets SIGINT (uvicorn's graceful stop) and, after 60 s, SIGKILL.
    """
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    argv = [sys.executable, "-c", "from weftsearch.cli import main; raise SystemExit(main())"]
    argv += ["serve", "--index", str(index), "--port", str(port), *args]
    output = subprocess.DEVNULL if log is None else log.open("wb")
    server = subprocess.Popen(argv, env=environment, stdout=output, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_seconds
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, "the server stopped at start"
            assert time.monotonic() < deadline, f"the server did not answer within {start_seconds} s"
            time.sleep(0.1)
        yield base
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if log is not None and not isinstance(output, int):
            output.close()
