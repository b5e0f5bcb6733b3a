"""Run ``weft-search serve`` for real in a child process on a free loopback port, and stop it.

A thin layer over the library's launcher (:mod:`weftsearch.server.launch`), which the load
ladder's ``serve:N`` target uses too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from weftsearch.server.launch import ServerProcess, free_port

__all__ = ["SRC", "free_port", "running_server"]

SRC = str(Path(__file__).resolve().parents[2] / "src")


@contextmanager
def running_server(
    index: Path,
    *args: str,
    env: dict[str, str] | None = None,
    start_seconds: float = 120.0,
    log: Path | None = None,
) -> Iterator[str]:
    """``weft-search serve --index INDEX ARGS`` on a free loopback port until the block ends; yields its URL.

    The child's output (stdout and stderr, the access log included) goes to
    ``log`` when given, else to a temporary file; a server that stops or does not
    answer ``/health`` within ``start_seconds`` raises ``ServerStartError`` with
    that output. At the end it gets SIGINT (uvicorn's graceful stop) and, after
    60 s, SIGKILL.
    """
    with ServerProcess(
        ["--index", str(index), *args], env=env, log=log, start_seconds=start_seconds
    ) as server:
        yield server.base_url
