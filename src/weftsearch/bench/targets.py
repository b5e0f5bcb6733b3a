"""The targets a load ladder drives: everything behind :class:`~weftsearch.bench.driver.Target`.

:class:`ThreadTarget` (N threads in this process), :class:`ProcessTarget` (N
worker processes, each opening the engine read-only, optionally with threads
each; a request goes to the worker with the fewest outstanding requests, the
lowest-numbered first, over a pipe), :class:`HttpTarget` (``POST`` to a base URL
through :mod:`httpx`'s async client) and :class:`ServeTarget` (``weft-search
serve --workers N`` started on a free loopback port, driven over HTTP);
:class:`NoopTarget` answers at once, for the driver's own overhead.
:func:`make_target` reads the ``--target`` kinds ``threads:N``, ``processes:N``
and ``processes:NxT``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue
import struct
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from multiprocessing.connection import Connection, wait
from os import PathLike
from typing import Any

from weftsearch.bench.driver import DEFAULT_CAP, MAX_REASON, Done, Target, error_reason
from weftsearch.bench.resources import descendants
from weftsearch.bench.workloads import Searcher, Workload
from weftsearch.errors import InvalidParameterError, MissingDependencyError
from weftsearch.server.launch import LOOPBACK, ServerProcess, free_port

__all__ = [
    "HTTP_APIS",
    "HttpTarget",
    "NoopTarget",
    "ProcessTarget",
    "ServeTarget",
    "ThreadTarget",
    "direct_search",
    "is_served",
    "make_target",
    "served_workers",
]


def _http_reason(status: int, body: bytes) -> str:
    """A non-2xx answer's reason: its status and the start of its body (weft-search's error type)."""
    text = " ".join(body.decode("utf-8", "replace").split())
    return f"HTTP {status}" + (f": {text}" if text else "")[: MAX_REASON - 9]


class ThreadTarget:
    """N threads in this process, each taking requests from one queue and calling ``search``.

    The driver runs in the same process, so its dispatcher competes with the
    searches for the GIL; its lag is reported per rung (and counted in latency).
    """

    def __init__(self, searcher: Searcher | Callable[[int], object], threads: int, label: str = "") -> None:
        """``searcher``: a :class:`Searcher` (opened at :meth:`start`) or a search function."""
        if threads <= 0:
            raise InvalidParameterError(f"a thread pool needs at least one thread, got {threads}")
        self._searcher = searcher
        self._threads_n = threads
        self._label = label or "threads"
        self._queue: queue.SimpleQueue[tuple[int, int, Done] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._search: Callable[[int], object] | None = None

    @property
    def name(self) -> str:
        """``"<label> threads:N"``."""
        return f"{self._label} threads:{self._threads_n}"

    @property
    def rss_scope(self) -> str:
        """The driver's own process (the driver included)."""
        return "this process (driver included)"

    def start(self) -> None:
        """Open the searcher and start the threads."""
        if self._search is not None:
            return
        opener = getattr(self._searcher, "open", None)
        self._search = opener() if callable(opener) else self._searcher  # type: ignore[assignment]
        for number in range(self._threads_n):
            thread = threading.Thread(target=self._work, name=f"load-worker-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        search = self._search
        assert search is not None
        take = self._queue.get
        clock = time.perf_counter
        while (job := take()) is not None:
            request, item, done = job
            started = clock()
            error = None
            try:
                search(item)
            except Exception as failure:  # any failure is the request's, counted with its reason
                error = error_reason(failure)
            done(request, started, clock(), error)

    @property
    def search_function(self) -> Callable[[int], object]:
        """The search function the threads call (after :meth:`start`)."""
        if self._search is None:
            raise InvalidParameterError("start the target before asking for its search function")
        return self._search

    def submit(self, request: int, item: int, done: Done) -> None:
        """Queue the request for the first free thread."""
        self._queue.put((request, item, done))

    def pids(self) -> list[int]:
        """The driver's own process."""
        return [os.getpid()]

    def close(self) -> None:
        """Stop the threads (after the requests already queued)."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=60)
        self._threads.clear()


class NoopTarget:
    """A target that answers at once, on the dispatcher's own thread: the driver's overhead alone."""

    @property
    def name(self) -> str:
        """``"no-op"``."""
        return "no-op"

    @property
    def rss_scope(self) -> str:
        """The driver's own process."""
        return "this process (driver included)"

    def start(self) -> None:
        """Nothing to open."""

    def submit(self, request: int, item: int, done: Done) -> None:
        """Complete the request at once."""
        now = time.perf_counter()
        done(request, now, now, None)

    def pids(self) -> list[int]:
        """The driver's own process."""
        return [os.getpid()]

    def close(self) -> None:
        """Nothing to close."""


_REQUEST = struct.Struct("<qq")
_REPLY = struct.Struct("<qdd?")
#: Tells a worker to exit. Closing the pipe is not enough: while the collector thread polls a
#: connection, Linux keeps the socket open after close(), so the worker would never see EOF.
_STOP = b"stop"


def _process_worker(searcher: Searcher, connection: Connection, threads: int) -> None:
    """A worker process: open the searcher, answer (request, item) pairs with timings until EOF."""
    search = searcher.open()
    connection.send_bytes(b"ready")
    clock = time.perf_counter
    send_lock = threading.Lock()

    def answer(request: int, item: int) -> None:
        started = clock()
        reason = b""
        try:
            search(item)
        except Exception as failure:  # counted with its reason; the worker keeps serving
            reason = error_reason(failure).encode("utf-8", "replace")
        reply = _REPLY.pack(request, started, clock(), bool(reason)) + reason
        with send_lock:
            connection.send_bytes(reply)

    if threads == 1:
        while True:
            try:
                data = connection.recv_bytes()
            except EOFError:
                return
            if data == _STOP:
                return
            answer(*_REQUEST.unpack(data))
    jobs: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()

    def work() -> None:
        while (job := jobs.get()) is not None:
            answer(*job)

    pool = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    while True:
        try:
            data = connection.recv_bytes()
        except EOFError:
            break
        if data == _STOP:
            break
        request, item = _REQUEST.unpack(data)
        jobs.put((request, item))
    for _ in pool:
        jobs.put(None)


class ProcessTarget:
    """N worker processes (spawned), each opening the engine itself, fed over one pipe each.

    A request goes to the worker with the fewest outstanding requests (the
    lowest-numbered among equals: the first free one when any is free). A
    collector thread in this process reads the replies.
    """

    def __init__(self, searcher: Searcher, processes: int, threads: int = 1, label: str = "") -> None:
        """``threads``: threads inside each worker (1: the worker's main thread answers)."""
        if processes <= 0 or threads <= 0:
            raise InvalidParameterError(f"need at least one process and thread, got {processes} x {threads}")
        self._searcher = searcher
        self._n = processes
        self._threads = threads
        self._label = label or "processes"
        self._connections: list[Connection] = []
        self._processes: list[Any] = []
        self._outstanding: list[int] = []
        self._callbacks: dict[int, Done] = {}
        self._lock = threading.Lock()
        self._collector: threading.Thread | None = None
        #: The workers' exit codes after :meth:`close` (0: each stopped when told to).
        self.exit_codes: list[int | None] = []

    @property
    def name(self) -> str:
        """``"<label> processes:N"`` (``xT`` with threads per worker)."""
        suffix = f"x{self._threads}" if self._threads > 1 else ""
        return f"{self._label} processes:{self._n}{suffix}"

    @property
    def rss_scope(self) -> str:
        """The sum over the workers of each one's peak."""
        return f"sum over {self._n} worker processes (driver not included)"

    def start(self) -> None:
        """Spawn the workers and wait until each has opened the engine."""
        if self._processes:
            return
        context = multiprocessing.get_context("spawn")
        for _ in range(self._n):
            mine, theirs = context.Pipe()
            process = context.Process(
                target=_process_worker, args=(self._searcher, theirs, self._threads), daemon=True
            )
            process.start()
            theirs.close()
            self._connections.append(mine)
            self._processes.append(process)
            self._outstanding.append(0)
        for connection, process in zip(self._connections, self._processes, strict=True):
            try:
                ready = connection.recv_bytes()
            except EOFError:
                process.join(timeout=5)
                raise InvalidParameterError(
                    f"a worker process exited before it was ready (exit code {process.exitcode})"
                ) from None
            assert ready == b"ready"
        self._collector = threading.Thread(target=self._collect, name="load-collector", daemon=True)
        self._collector.start()

    def _collect(self) -> None:
        owner = {id(c): n for n, c in enumerate(self._connections)}
        live = list(self._connections)
        while live:
            for ready in wait(live):
                assert isinstance(ready, Connection)
                try:
                    data = ready.recv_bytes()
                except (EOFError, OSError):
                    live.remove(ready)
                    continue
                request, started, ended, failed = _REPLY.unpack_from(data)
                error = data[_REPLY.size :].decode("utf-8", "replace") if failed else None
                with self._lock:
                    self._outstanding[owner[id(ready)]] -= 1
                    done = self._callbacks.pop(request)
                done(request, started, ended, error)

    def submit(self, request: int, item: int, done: Done) -> None:
        """Send the request to the least-loaded worker."""
        with self._lock:
            outstanding = self._outstanding
            worker = outstanding.index(min(outstanding))
            outstanding[worker] += 1
            self._callbacks[request] = done
        self._connections[worker].send_bytes(_REQUEST.pack(request, item))

    def pids(self) -> list[int]:
        """The workers' process ids."""
        return [int(p.pid) for p in self._processes]

    def close(self) -> None:
        """Tell the workers to stop, wait for them (and the collector), close the pipes."""
        for connection in self._connections:
            with suppress(OSError):
                connection.send_bytes(_STOP)
        for process in self._processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        self.exit_codes = [process.exitcode for process in self._processes]
        if self._collector is not None:
            self._collector.join(timeout=5)  # it ends when every worker's end has closed
        for connection in self._connections:
            connection.close()
        self._connections.clear()
        self._processes.clear()
        self._collector = None


#: The request bodies :class:`HttpTarget` can send, with each one's default search path.
HTTP_APIS = {"generic": "/search", "weft": "/v1/search"}


class HttpTarget:
    """A search server at ``base_url``: ``POST base_url + path`` with a JSON body per request.

    The body is ``{"query": text, "k": k}``, plus ``"vector": [...]`` when the
    workload has vectors and ``hybrid`` is set. With ``api="weft"`` it is what
    ``weft-search serve`` answers at ``/v1/search`` (the default path then):
    ``{"text": text, "k": k, "spec": ...}``, the spec being the arm's ranking
    (``bm25@DEPTH``, or ``rrf(bm25, vector, k=60)@DEPTH`` with the vector).
    Requests are sent by one
    :class:`httpx.AsyncClient` (at most ``cap`` connections) on an event loop in
    a thread of its own; a response whose status is not 2xx counts as an error.
    Service time is the client's (send to full response).
    """

    def __init__(
        self,
        base_url: str,
        workload: Workload,
        *,
        k: int = 10,
        hybrid: bool = False,
        path: str | None = None,
        cap: int = DEFAULT_CAP,
        server_pids: Sequence[int] = (),
        timeout: float = 60.0,
        api: str = "generic",
        depth: int = 100,
    ) -> None:
        """``server_pids``: the server's processes, to measure (none: no resource figures)."""
        if api not in HTTP_APIS:
            raise InvalidParameterError(f"unknown HTTP API {api!r} (known: {', '.join(HTTP_APIS)})")
        self._base = base_url.rstrip("/")
        path = path or HTTP_APIS[api]
        self._path = path if path.startswith("/") else "/" + path
        self._api = api
        self._depth = depth
        self._workload = workload
        self._k = k
        self._hybrid = hybrid
        self._cap = cap
        self._server_pids = list(server_pids)
        self._timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        """``"http <url>"``."""
        return f"http {self._base}"

    @property
    def rss_scope(self) -> str:
        """The server processes given, if any."""
        if not self._server_pids:
            return "not measured (no server pid given)"
        return f"sum over {len(self._server_pids)} server process(es)"

    def body(self, item: int) -> dict[str, Any]:
        """The JSON body of query number ``item``."""
        hybrid = self._hybrid and self._workload.vectors is not None
        body: dict[str, Any] = {"query": self._workload.texts[item], "k": self._k}
        if self._api == "weft":
            spec = "rrf(bm25, vector, k=60)" if hybrid else "bm25"
            body = {"text": self._workload.texts[item], "k": self._k, "spec": f"{spec}@{self._depth}"}
        if hybrid:
            assert self._workload.vectors is not None
            body["vector"] = [float(x) for x in self._workload.vectors[item]]
        return body

    def start(self) -> None:
        """Start the event loop thread and the client."""
        if self._loop is not None:
            return
        try:
            import httpx
        except ImportError:
            raise MissingDependencyError("the HTTP target needs httpx: pip install httpx") from None
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            limits = httpx.Limits(max_connections=self._cap, max_keepalive_connections=self._cap)
            self._client = httpx.AsyncClient(base_url=self._base, limits=limits, timeout=self._timeout)
            loop.call_soon(started.set)
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="load-http", daemon=True)
        self._thread.start()
        started.wait()
        self._loop = loop

    async def _send(self, request: int, item: int, done: Done) -> None:
        started = time.perf_counter()
        error = None
        try:
            response = await self._client.post(self._path, json=self.body(item))
            body = await response.aread()
            if not 200 <= response.status_code < 300:
                error = _http_reason(response.status_code, body)
        except Exception as failure:  # a connection that failed is the request's error
            error = error_reason(failure)
        done(request, started, time.perf_counter(), error)

    def _spawn(self, request: int, item: int, done: Done) -> None:
        task = asyncio.ensure_future(self._send(request, item, done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def submit(self, request: int, item: int, done: Done) -> None:
        """Hand the request to the event loop."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._spawn, request, item, done)

    def pids(self) -> list[int]:
        """The server processes given."""
        return list(self._server_pids)

    def close(self) -> None:
        """Close the client and stop the loop."""
        loop = self._loop
        if loop is None:
            return
        if self._client is not None:
            asyncio.run_coroutine_threadsafe(self._client.aclose(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)
        loop.close()
        self._loop = None


class ServeTarget(HttpTarget):
    """``weft-search serve --workers N`` started on a free loopback port, driven as an :class:`HttpTarget`.

    :meth:`start` runs the server in a child process on ``127.0.0.1`` (never
    another address) over the index directory ``index`` with
    :class:`weftsearch.server.launch.ServerProcess`: it waits until the server
    answers ``/health`` (at most ``start_seconds``; a server that stops or does
    not answer raises :class:`~weftsearch.errors.ServerStartError` with what
    it printed), then measures the server's own processes: the launcher and
    every worker below it. :meth:`close` stops it with SIGINT (uvicorn's
    graceful stop) and, after 60 seconds, SIGKILL. Requests are what the
    server validates (``api="weft"``, ``POST /v1/search``).
    """

    def __init__(
        self,
        index: str | PathLike[str],
        workers: int,
        workload: Workload,
        *,
        start_seconds: float = 120.0,
        **http: Any,
    ) -> None:
        """``http``: :class:`HttpTarget`'s keyword arguments (``k``, ``hybrid``, ``cap``, ``depth``)."""
        if workers < 1:
            raise InvalidParameterError(f"a served target needs at least one worker, got {workers}")
        port = free_port()
        super().__init__(f"http://{LOOPBACK}:{port}", workload, api="weft", **http)
        self._workers = workers
        self._server = ServerProcess(
            ["--index", str(index), "--workers", str(workers)], port=port, start_seconds=start_seconds
        )

    @property
    def name(self) -> str:
        """``"serve:N"``."""
        return f"serve:{self._workers}"

    def start(self) -> None:
        """Start the server, wait for it to answer, then the client.

        Raises:
            ServerStartError: the server stopped at start or did not answer in time.

        """
        if self._server.running:
            return
        self._server.start()
        # The launcher and the workers it spawned (with --workers N, the writer and N readers).
        self._server_pids = descendants(self._server.pid)
        super().start()

    def close(self) -> None:
        """Stop the client, then the server (SIGINT, SIGKILL after 60 seconds)."""
        super().close()
        self._server.stop()


def make_target(kind: str, searcher: Searcher, label: str) -> Target:
    """``threads:N``, ``processes:N`` or ``processes:NxT``."""
    name, _, count = kind.partition(":")
    try:
        if name == "threads":
            return ThreadTarget(searcher, int(count or 1), label)
        if name == "processes":
            processes, _, threads = count.partition("x")
            return ProcessTarget(searcher, int(processes or 1), int(threads or 1), label)
    except ValueError:
        pass
    raise InvalidParameterError(f"unknown target {kind!r}: expected threads:N, processes:N or processes:NxT")


def is_served(kind: str) -> bool:
    """Whether a ``--target`` is a server (``serve:N`` or a base URL): no peer runs beside it."""
    return kind.startswith(("http://", "https://", "serve:"))


def served_workers(kind: str) -> int:
    """N of ``serve:N``."""
    try:
        workers = int(kind.partition(":")[2])
    except ValueError:
        workers = 0
    if workers < 1:
        raise InvalidParameterError(f"unknown target {kind!r}: expected serve:N with N >= 1 workers")
    return workers


def direct_search(target: Target, searcher: Searcher) -> Callable[[int], object] | None:
    """The bare search function for the tight sequential loop: the pool's own, or opened here."""
    if isinstance(target, ThreadTarget):
        return target.search_function
    if isinstance(target, ProcessTarget):
        return searcher.open()  # in this process, which a process target's figures leave out
    return None
