"""Run ``weft-search serve`` in a child process on a free loopback port, wait until it answers, stop it.

The one way the project starts a real server from Python: the load ladder's
``serve:N`` target (:class:`weftsearch.bench.targets.ServeTarget`) and the
tests that need a real server (several workers, the access log) both use
:class:`ServerProcess`. The child always binds ``127.0.0.1`` (a port asked of
the kernel just before), runs the weftsearch this process imported, and
writes its output to a file; a child that stops or does not answer
``/health`` in time raises :class:`~weftsearch.errors.ServerStartError`
carrying what it printed. Stopping is uvicorn's graceful stop (SIGINT), then
SIGKILL after a bound.

This module needs no web framework (the health check is a plain
``urllib`` request, with proxies off: it is always loopback).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import IO, NoReturn

from weftsearch.errors import InvalidParameterError, ServerStartError

__all__ = ["LOOPBACK", "ServerProcess", "free_port"]

#: The only address a launched server binds.
LOOPBACK = "127.0.0.1"
#: How much of the child's output a :class:`ServerStartError` carries (characters, the end of it).
OUTPUT_TAIL = 4_000
_MAIN = "from weftsearch.cli import main; raise SystemExit(main())"
_POLL_SECONDS = 0.1
#: The package directory's parent: the child imports the same weftsearch as this process.
_SOURCE = str(Path(__file__).resolve().parents[2])


def free_port() -> int:
    """A TCP port of ``127.0.0.1`` nothing listens on now (whoever binds it next, a moment later, gets it)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


class ServerProcess:
    """``weft-search serve ARGS --host 127.0.0.1 --port P`` in a child process.

    Args:
        args: ``serve``'s options but the address: ``["--index", DIR, "--workers", "2"]``
            or ``["--sharded", DIR]``. ``--host`` and ``--port`` are refused: the
            launcher picks a free loopback port, never another address.
        env: variables added to this process's environment for the child.
        log: a file for the child's stdout and stderr (the access log included);
            ``None``: a temporary file, removed at :meth:`stop`.
        port: the loopback port to bind; ``None``: a free one, asked of the kernel at each
            :meth:`start` (:func:`free_port`).
        start_seconds: the bound on the wait for ``/health`` (a start-up bound,
            not a speed check: loading a large index takes time).
        stop_seconds: how long :meth:`stop` waits after SIGINT before SIGKILL.

    Use as a context manager (started on entry, stopped on exit), or call
    :meth:`start` and :meth:`stop`. Not thread-safe.

    Raises:
        InvalidParameterError: ``args`` names an address, or a bound is not positive.

    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log: str | PathLike[str] | None = None,
        port: int | None = None,
        start_seconds: float = 120.0,
        stop_seconds: float = 60.0,
    ) -> None:
        self.args = [str(arg) for arg in args]
        named = [a for a in self.args if a.split("=")[0] in ("--host", "--port")]
        if named:
            raise InvalidParameterError(
                f"a launched server binds {LOOPBACK} on a free port of its own; do not give {named[0]}"
            )
        if port is not None and (
            isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535
        ):
            raise InvalidParameterError(f"a port is a number from 1 to 65535, got {port!r}")
        if not (start_seconds > 0 and stop_seconds > 0):
            raise InvalidParameterError(
                f"start_seconds and stop_seconds must be > 0, got {start_seconds!r}, {stop_seconds!r}"
            )
        self.env = dict(env or {})
        self.log = None if log is None else Path(log)
        self.start_seconds = float(start_seconds)
        self.stop_seconds = float(stop_seconds)
        self._fixed_port = port
        self.port = port or 0
        self.returncode: int | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (without a ``port`` given, the port is chosen at :meth:`start`)."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        """The child's process id (the launcher; with ``--workers N`` its workers are below it).

        Raises:
            InvalidParameterError: not started.

        """
        if self._child is None:
            raise InvalidParameterError("the server is not running: call start() first")
        return self._child.pid

    @property
    def running(self) -> bool:
        """Whether the child was started and has not stopped."""
        return self._child is not None and self._child.poll() is None

    def argv(self) -> list[str]:
        """The child's command line (this Python, ``weft-search serve``, the args, the loopback address)."""
        return [
            sys.executable,
            "-c",
            _MAIN,
            "serve",
            *self.args,
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
        ]

    def start(self) -> str:
        """Start the child and wait until ``/health`` answers 200; return :attr:`base_url`.

        A no-op returning the URL when already running.

        Raises:
            ServerStartError: the child stopped at start, or did not answer within
                ``start_seconds`` (it is stopped then); the error holds its output.

        """
        if self._child is not None:
            return self.base_url
        self.port = self._fixed_port or free_port()
        self.returncode = None
        environment = {**os.environ, **self.env}
        if Path(_SOURCE).name not in ("site-packages", "dist-packages"):
            # Run from a checkout (PYTHONPATH=src): the child imports this same weftsearch. An
            # installed one it finds anyway, and site-packages must not go ahead of the stdlib.
            inherited = environment.get("PYTHONPATH", "")
            environment["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE, inherited) if p)
        if self.log is None:
            self._output = tempfile.TemporaryFile()  # noqa: SIM115 (open while the child runs; closed in stop())
        else:
            self._output = self.log.open("wb")
        self._child = subprocess.Popen(
            self.argv(), env=environment, stdout=self._output, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + self.start_seconds
        while not self._healthy():
            if self._child.poll() is not None:
                code = self._child.returncode
                self._fail(f"weft-search serve stopped at start (exit status {code})", code)
            if time.monotonic() > deadline:
                self._fail(f"weft-search serve did not answer {self.base_url}/health within "
                           f"{self.start_seconds:g} s", None)  # fmt: skip
            time.sleep(_POLL_SECONDS)
        return self.base_url

    def _healthy(self) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        try:
            with opener.open(f"{self.base_url}/health", timeout=1) as answer:
                return int(answer.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def _fail(self, what: str, returncode: int | None) -> NoReturn:
        output = self.output()  # read before stop() closes a temporary file
        self.stop()
        output = self.output() or output  # after the stop: what it printed while stopping too
        raise ServerStartError(f"{what}; it printed:\n{output}", output=output, returncode=returncode)

    def output(self) -> str:
        """The end of what the child printed so far (:data:`OUTPUT_TAIL` characters; ``""`` when unknown)."""
        data = b""
        if self._output is not None and not self._output.closed:
            self._output.flush()
            if self.log is None:
                self._output.seek(0)
                data = self._output.read()
        if self.log is not None and self.log.is_file():
            data = self.log.read_bytes()
        return data.decode("utf-8", "replace")[-OUTPUT_TAIL:]

    def stop(self) -> int | None:
        """Stop the child: SIGINT (a graceful stop), SIGKILL after ``stop_seconds``; return its exit status.

        A no-op (returning the last status) when not running. Idempotent.
        """
        child, self._child = self._child, None
        if child is not None:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
            try:
                child.wait(self.stop_seconds)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            self.returncode = child.returncode
        if self._output is not None:
            self._output.close()
            self._output = None
        return self.returncode

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
