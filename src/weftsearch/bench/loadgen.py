r"""An open-loop load ladder: latency under a given arrival rate, ``weft-search bench load``.

A latency measured in a tight loop says little about a service: what a user
meets is the latency at a given arrival rate, including the time a request
waited. This module drives a *target* (something that answers searches) with
requests that arrive on a schedule fixed in advance, whatever the target does,
and measures each request from the moment it was **scheduled** to arrive.

The driver (:func:`run_rung`)
    * **Poisson arrivals** (:func:`poisson_schedule`): gaps drawn from an
      exponential distribution of mean ``1 / rate``, from a seeded
      :class:`numpy.random.Generator`; the query of each arrival is drawn from
      the same seed. Same seed, same rate, same duration: the same schedule to
      the bit.
    * **Latency from the scheduled time** (the coordinated-omission
      correction, as wrk2 makes it): ``latency = completion - scheduled
      arrival``. A request the driver dispatched late, or that waited in a
      queue of the target, carries that wait in its latency. **Service time**
      (``completion - the moment a worker started it``) is reported beside it.
      For the HTTP target, service time is the client's request time (send to
      response), which includes any queueing inside the server.
    * **In-flight cap** (default 32): an arrival that finds ``cap`` requests in
      flight is **shed** and counted, never delayed; a shed request has no
      latency. Requests still unfinished ``drain_seconds`` after the last
      arrival are counted as **unfinished** and recorded with the latency they
      had reached (a lower bound), not dropped.
    * Latencies go into HDR histograms (:mod:`hdrh`, microseconds, 3
      significant digits) per rung: p50, p90, p99, p99.9 and max, for latency
      and for service time.
    * Per rung the target's processes are measured through ``/proc``: peak
      resident set (``VmHWM`` after resetting it through ``clear_refs`` where
      the kernel allows, and the largest ``VmRSS`` sampled every 0.1 s), CPU
      seconds (user + system) and major page faults. For an in-process target
      that is this process (the driver included); for a multi-process target
      the **sum over its workers** of each worker's peak, and their summed CPU
      and faults (the driver process is not included).
    * A progress line on stderr at least every 10 s (``progress_seconds``,
      default 5).
    * The dispatcher's own lag (``dispatched - scheduled``) is kept for every
      request and reported (p50/p99/max); :func:`calibrate` runs the highest
      rung against a target that does nothing, so the driver's overhead is a
      measured figure beside the results.

The ladder (:func:`run_ladder`)
    Sequential throughput first (one request at a time through the same
    target, :func:`sequential_throughput`), then one rung at each fraction of
    it (default 12.5%, 25%, 50%, 75%, 100%, 125%, 150%), each lasting
    ``max(rung_seconds, min_requests / rate)`` (``max_rung_seconds`` bounds
    that: "at least 5,000 requests or 60 s"). The **unloaded denominator is
    the lowest open-loop rung**, not the sequential loop: a tight loop measures
    a warm machine that no rung reproduces. Ratios ``p50 / lowest p50`` and
    ``peak RSS / lowest peak RSS`` are printed for every rung. The headline
    rung (100% by default) is run ``repetitions`` times in all (different
    seeds) and the spread reported.

Targets (all behind :class:`Target`)
    :class:`ThreadTarget` (N threads in this process), :class:`ProcessTarget`
    (N worker processes, each opening the index read-only, optionally with
    threads each; a request goes to the worker with the fewest outstanding
    requests, the lowest-numbered first, over a pipe), :class:`HttpTarget`
    (``POST`` to a base URL through :mod:`httpx`'s async client). Engines:
    weft-search (BM25 alone, or BM25 + vector fused by RRF), tantivy-py (the
    BM25 peer), LanceDB (the hybrid peer); every engine returns the keys of its
    top k, so every engine pays for fetching them.

Commit under load (:func:`commit_under_load`)
    One commit of 20,000 documents and a forced merge, dropped into a read load
    at the 50% rung of an in-process target; p50/p99 of the requests scheduled
    inside the commit window against those outside it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import multiprocessing
import os
import platform
import queue
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import numpy as np
from numpy.typing import NDArray

from weftsearch._argtypes import positive_float, positive_int, positive_list
from weftsearch._plotting import legend_below, log_ticks, png_bytes
from weftsearch.errors import InvalidParameterError, MissingDependencyError
from weftsearch.scorers.vector import DEFAULT_NPROBE
from weftsearch.server.launch import LOOPBACK, ServerProcess, free_port
from weftsearch.storage.ivf import nlist_for

if TYPE_CHECKING:  # matplotlib is optional: only its types are needed at check time.
    from matplotlib.figure import Figure

__all__ = [
    "DEFAULT_CAP",
    "MAX_PROGRESS_SECONDS",
    "DEFAULT_RUNGS",
    "Schedule",
    "poisson_schedule",
    "rung_seconds_for",
    "ladder_rates",
    "Done",
    "MAX_REASON",
    "error_reason",
    "Target",
    "Searcher",
    "ThreadTarget",
    "ProcessTarget",
    "HttpTarget",
    "NoopTarget",
    "Workload",
    "WeftSearcher",
    "weft_search_function",
    "TantivySearcher",
    "LanceSearcher",
    "SleepSearcher",
    "RungResult",
    "LadderResult",
    "CommitResult",
    "run_rung",
    "sequential_throughput",
    "direct_throughput",
    "calibrate",
    "run_ladder",
    "commit_under_load",
    "format_ladder",
    "plot_ladder",
    "ladder_figure",
    "ladders_from_json",
    "add_subcommand",
    "load_command",
]

#: Requests in flight at most; an arrival that finds this many is shed.
DEFAULT_CAP = 32
#: The ladder's rungs, as fractions of the measured sequential throughput.
DEFAULT_RUNGS: tuple[float, ...] = (0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
#: A rung prints a progress line at least this often (seconds), so it never looks hung.
MAX_PROGRESS_SECONDS = 10.0
#: Histogram range: 1 microsecond to one hour, 3 significant digits.
_HIST_MAX_US = 3_600_000_000
_US = 1e6
_PENDING, _OK, _ERROR, _SHED = 0, 1, 2, 3
PLOT_INSTALL_HINT = "pip install 'weft-search[eval]'"

# ---------------------------------------------------------------------- the schedule


@dataclass(frozen=True, eq=False)
class Schedule:
    """When each request of a rung arrives, and which query it carries.

    Attributes:
        rate: the mean arrival rate, requests per second.
        seconds: the rung's length; every arrival is before it.
        seed: the seed the arrivals and queries were drawn from.
        offsets: float64 arrival times, seconds from the rung's start, increasing.
        items: int64 query numbers, one per arrival.

    """

    rate: float
    seconds: float
    seed: int
    offsets: NDArray[np.float64]
    items: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.offsets.size)


def poisson_schedule(rate: float, seconds: float, seed: int, n_items: int) -> Schedule:
    """A Poisson arrival process of mean ``rate`` over ``seconds``, queries drawn uniformly.

    Gaps are exponential with mean ``1 / rate`` (seconds), drawn from
    ``PCG64(SeedSequence(seed))``'s first child; the query numbers from its
    second. Same arguments, same schedule to the bit.

    Raises:
        InvalidParameterError: a rate or length that is not a positive finite
            number, or no queries.

    Complexity: O(rate * seconds).

    """
    if not (math.isfinite(rate) and rate > 0):
        raise InvalidParameterError(f"an arrival rate must be a positive number, got {rate!r}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvalidParameterError(f"a rung's length must be a positive number of seconds, got {seconds!r}")
    if n_items <= 0:
        raise InvalidParameterError("the schedule needs at least one query to draw from")
    gaps_seed, items_seed = np.random.SeedSequence(seed).spawn(2)
    gaps_rng = np.random.Generator(np.random.PCG64(gaps_seed))
    chunk = int(rate * seconds * 1.1) + 64
    parts: list[NDArray[np.float64]] = []
    last = 0.0
    while last < seconds:
        times = last + np.cumsum(gaps_rng.exponential(1.0 / rate, chunk))
        parts.append(times)
        last = float(times[-1])
    offsets = np.concatenate(parts)
    offsets = offsets[offsets < seconds]
    items_rng = np.random.Generator(np.random.PCG64(items_seed))
    items = items_rng.integers(0, n_items, size=offsets.size, dtype=np.int64)
    return Schedule(float(rate), float(seconds), int(seed), offsets, items)


def rung_seconds_for(
    rate: float, rung_seconds: float, min_requests: int, max_rung_seconds: float | None = None
) -> float:
    """A rung's length (seconds): ``rung_seconds``, longer if that would schedule under ``min_requests``.

    ``max_rung_seconds`` bounds the lengthening: a rung then lasts until it
    holds ``min_requests`` or ``max_rung_seconds`` have passed, whichever
    comes first, and never less than ``rung_seconds`` ("at least 5,000
    requests or 60 s": a peer answering 15 q/s would otherwise need 333 s a
    rung). ``None``: no bound.
    """
    seconds = max(rung_seconds, min_requests / rate)
    if max_rung_seconds is not None:
        seconds = min(seconds, max(max_rung_seconds, rung_seconds))
    return seconds


def ladder_rates(sequential: float, fractions: Sequence[float]) -> list[float]:
    """The offered rates of a ladder: each fraction of the measured sequential throughput (q/s).

    Raises:
        InvalidParameterError: a throughput or fraction that is not positive.

    """
    if not (math.isfinite(sequential) and sequential > 0):
        raise InvalidParameterError(f"sequential throughput must be positive, got {sequential!r}")
    if not fractions or any(not (math.isfinite(f) and f > 0) for f in fractions):
        raise InvalidParameterError(f"rung fractions must be positive numbers, got {list(fractions)!r}")
    return [sequential * f for f in fractions]


# ---------------------------------------------------------------------- targets

#: Called by a target when a request completes: (request, service start, service end, error);
#: times from :func:`time.perf_counter` (CLOCK_MONOTONIC on Linux, shared across processes);
#: ``error`` is ``None`` for a success, else why it failed (:func:`error_reason`).
Done = Callable[[int, float, float, str | None], None]

#: Longest error reason kept (characters): a reason names a kind of failure, not a whole report.
MAX_REASON = 160


def _http_reason(status: int, body: bytes) -> str:
    """A non-2xx answer's reason: its status and the start of its body (weft-search's error type)."""
    text = " ".join(body.decode("utf-8", "replace").split())
    return f"HTTP {status}" + (f": {text}" if text else "")[: MAX_REASON - 9]


def error_reason(error: BaseException) -> str:
    """A failed request's reason as the rung counts it: the exception's type and message, one line."""
    message = " ".join(str(error).split())
    reason = type(error).__name__ + (f": {message}" if message else "")
    return reason[:MAX_REASON]


class Target(Protocol):
    """Something that answers requests: the driver submits, the target calls ``done`` once each."""

    @property
    def name(self) -> str:
        """A label for tables ("weft threads:2")."""
        ...

    @property
    def rss_scope(self) -> str:
        """What the resource figures cover ("this process", "sum over 2 workers", ...)."""
        ...

    def start(self) -> None:
        """Open what the target needs (indexes, processes, connections)."""
        ...

    def submit(self, request: int, item: int, done: Done) -> None:
        """Start query ``item`` as request ``request`` without waiting for it."""
        ...

    def pids(self) -> list[int]:
        """The processes whose memory, CPU and faults are measured."""
        ...

    def close(self) -> None:
        """Release everything; idempotent."""
        ...


class Searcher(Protocol):
    """A picklable recipe for a search function: ``open()`` returns ``f(item) -> keys``."""

    def open(self) -> Callable[[int], object]:
        """Open the engine (in the calling process) and return its search function."""
        ...


@dataclass(frozen=True)
class Workload:
    """Queries a ladder sends: analysed text (space-joined tokens) and, for hybrid arms, vectors."""

    texts: tuple[str, ...]
    vectors: NDArray[np.float32] | None = None

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class WeftSearcher:
    """weft-search on an index directory opened read-only: BM25, or BM25 + vector by RRF.

    Each request is ``index.search(Query(text[, vector]), k, RRF(), BM25Scorer()[,
    VectorScorer()], depth=depth)`` and reads the hits' keys (what a user gets).
    """

    path: str
    workload: Workload
    arm: str = "bm25"
    k: int = 10
    depth: int = 100

    def open(self) -> Callable[[int], object]:
        """Open the index read-only; the search function of query number ``item``."""
        from weftsearch.engine.index import Index

        return weft_search_function(
            Index.open(self.path, readonly=True), self.workload, self.arm, self.k, self.depth
        )


def weft_search_function(
    index: Any, workload: Workload, arm: str, k: int, depth: int
) -> Callable[[int], object]:
    """The search function of ``arm`` over an open :class:`~weftsearch.engine.index.Index`."""
    from weftsearch.engine.query import Query
    from weftsearch.fusion.rrf import RRF
    from weftsearch.scorers.bm25 import BM25Scorer
    from weftsearch.scorers.vector import VectorScorer

    fuser = RRF()
    if arm == "bm25":
        queries = [Query(text=t) for t in workload.texts]
        scorers: tuple[Any, ...] = (BM25Scorer(),)
    elif arm == "hybrid":
        if workload.vectors is None:
            raise InvalidParameterError("the hybrid arm needs query vectors")
        queries = [Query(text=t, vector=workload.vectors[i]) for i, t in enumerate(workload.texts)]
        scorers = (BM25Scorer(), VectorScorer())
    else:
        raise InvalidParameterError(f"unknown arm {arm!r} (known: bm25, hybrid)")

    def search(item: int) -> object:
        return index.search(queries[item], k, fuser, *scorers, depth=depth).keys

    return search


def _peer_missing(peer: str, module: str) -> MissingDependencyError:
    """The error for a peer whose package is not installed (it names the extra and the way out)."""
    return MissingDependencyError(
        f"the {peer} peer needs {module}: pip install 'weft-search[bench]' "
        "(or leave the peers out: --no-peer)"
    )


@dataclass(frozen=True)
class TantivySearcher:
    """tantivy-py (the BM25 peer): a disjunction of term queries on a whitespace-tokenized field.

    Each request builds the query, searches the top ``k`` and reads their stored keys.
    """

    path: str
    workload: Workload
    k: int = 10

    def open(self) -> Callable[[int], object]:
        """Open the tantivy index at ``path``; the search function of query number ``item``."""
        try:
            import tantivy
        except ImportError:
            raise _peer_missing("tantivy", "tantivy") from None
        index = tantivy.Index.open(self.path)
        index.reload()
        searcher = index.searcher()
        schema = index.schema
        texts = self.workload.texts
        k = self.k

        def search(item: int) -> object:
            tokens = texts[item].split()
            terms = [tantivy.Query.term_query(schema, "body", t, index_option="freq") for t in tokens]
            if not terms:
                query = tantivy.Query.empty_query()
            elif len(terms) == 1:
                query = terms[0]
            else:
                query = tantivy.Query.boolean_query([(tantivy.Occur.Should, t) for t in terms])
            hits = searcher.search(query, k, count=False).hits
            return [searcher.doc(address)["key"][0] for _, address in hits]

        return search


@dataclass(frozen=True)
class LanceSearcher:
    """LanceDB (the hybrid peer): native FTS + its vector search fused by its RRFReranker (K = 60).

    The vector search is an exact scan, unless the table has an IVF index
    (:func:`_build_lance` makes one from :data:`LANCE_ANN_FROM_ROWS` rows): then
    ``nprobes`` of its lists are read, weft's default (``VectorScorer``'s
    ``DEFAULT_NPROBE``), so both engines probe the same share of the same
    number of lists.
    """

    path: str
    workload: Workload
    k: int = 10
    depth: int = 100
    nprobes: int = DEFAULT_NPROBE

    def open(self) -> Callable[[int], object]:
        """Open the LanceDB table ``docs`` at ``path``; the search function of query number ``item``."""
        # LanceDB's Rust side logs a deprecation warning per hybrid query on stderr unless told not
        # to (read at import): it would drown the progress lines and charge the peer for the writes.
        os.environ.setdefault("LANCEDB_LOG", "error")
        try:
            import lancedb
            from lancedb.rerankers import RRFReranker
        except ImportError:
            raise _peer_missing("LanceDB", "lancedb") from None
        table = lancedb.connect(self.path).open_table("docs")
        reranker = RRFReranker(K=60)
        texts, vectors = self.workload.texts, self.workload.vectors
        if vectors is None:
            raise InvalidParameterError("the LanceDB hybrid peer needs query vectors")
        k, depth, nprobes = self.k, max(self.depth, self.k), self.nprobes

        def search(item: int) -> object:
            hybrid: Any = table.search(query_type="hybrid")  # typed as the base builder: no nprobes
            rows = (
                hybrid.vector(vectors[item])
                .text(texts[item])
                .nprobes(nprobes)
                .rerank(reranker)
                .limit(depth)
                .select(["key"])
                .to_list()
            )
            return [row["key"] for row in rows[:k]]

        return search


@dataclass(frozen=True)
class SleepSearcher:
    """A stand-in engine for tests: each request sleeps ``seconds`` (releasing the GIL)."""

    seconds: float

    def open(self) -> Callable[[int], object]:
        """The sleeping function."""
        seconds = self.seconds

        def search(item: int) -> object:
            time.sleep(seconds)
            return item

        return search


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


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from ``/proc`` (Linux; elsewhere ``[pid]``). O(processes)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [pid]
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        # The command name (field 2) may hold spaces and parentheses: the parent id follows the last ')'.
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, ()))
    return sorted(found)


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
        self._server_pids = _descendants(self._server.pid)
        super().start()

    def close(self) -> None:
        """Stop the client, then the server (SIGINT, SIGKILL after 60 seconds)."""
        super().close()
        self._server.stop()


# ---------------------------------------------------------------------- resources


def _proc_stat(pid: int) -> tuple[float, int]:
    """CPU seconds (user + system) and major faults of ``pid`` so far, from ``/proc/PID/stat``."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # After the command: state(0) ppid ... majflt is field 12 of stat (index 9 here), utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / ticks, int(fields[9])


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class _Resources:
    """CPU, faults and peak resident set of a set of processes over a rung."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = list(pids)
        self.reset_ok = True
        for pid in self.pids:
            try:
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
            except OSError:
                self.reset_ok = False
        self.start = {pid: _proc_stat(pid) for pid in self.pids}
        self.peak_kb = {pid: _status_kb(pid, "VmRSS") for pid in self.pids}

    def sample(self) -> None:
        for pid in self.pids:
            with suppress(OSError):
                self.peak_kb[pid] = max(self.peak_kb[pid], _status_kb(pid, "VmRSS"))

    def finish(self) -> tuple[float, float, int]:
        """(peak RSS MB summed over the processes, CPU seconds, major faults)."""
        self.sample()
        cpu = 0.0
        faults = 0
        peak = 0.0
        for pid in self.pids:
            try:
                now_cpu, now_faults = _proc_stat(pid)
                hwm = _status_kb(pid, "VmHWM") if self.reset_ok else 0
            except OSError:
                continue
            cpu += now_cpu - self.start[pid][0]
            faults += now_faults - self.start[pid][1]
            peak += max(self.peak_kb[pid], hwm) / 1024
        return peak, cpu, faults


# ---------------------------------------------------------------------- one rung


def _hdr_histogram_class() -> Any:
    """The HDR histogram class, or a :class:`MissingDependencyError` naming the extra."""
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError:
        raise MissingDependencyError(
            "the load ladder keeps latencies in HDR histograms: pip install 'weft-search[bench]'"
        ) from None
    return HdrHistogram


def _percentiles(values_s: NDArray[np.float64]) -> dict[str, float]:
    """p50, p90, p99, p99.9 and max in milliseconds, through an HDR histogram (microseconds)."""
    HdrHistogram = _hdr_histogram_class()  # noqa: N806 (a class)

    histogram = HdrHistogram(1, _HIST_MAX_US, 3)
    micros = np.clip(np.rint(values_s * _US), 1, _HIST_MAX_US).astype(np.int64)
    values, counts = np.unique(micros, return_counts=True)  # one call per distinct value
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        histogram.record_value(value, count)
    if histogram.get_total_count() == 0:
        return {name: math.nan for name in ("p50", "p90", "p99", "p99.9", "max")}
    out = {
        name: histogram.get_value_at_percentile(q) / 1e3
        for name, q in (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))
    }
    out["max"] = histogram.get_max_value() / 1e3
    return out


@dataclass
class RungResult:
    """One rung's measurements (milliseconds, seconds, MB, requests per second).

    ``latency`` and ``service`` hold p50, p90, p99, p99.9 and max (ms); ``lag``
    is the dispatcher's lateness (p50, p99, max, ms). ``scheduled`` counts
    every arrival, ``completed`` those answered (``errors`` of them failed),
    ``shed`` those refused at the cap, ``unfinished`` those still running at
    the end of the drain (their latency is recorded as reached).
    """

    label: str
    fraction: float | None
    offered: float
    seconds: float
    scheduled: int
    completed: int
    errors: int
    shed: int
    unfinished: int
    achieved: float
    latency: dict[str, float]
    service: dict[str, float]
    lag: dict[str, float]
    peak_rss_mb: float
    cpu_seconds: float
    major_faults: int
    seed: int
    #: Why requests failed: reason (:func:`error_reason`, or ``HTTP <status>: <body>``) -> count.
    error_reasons: dict[str, int] = field(default_factory=dict)
    #: Per-request scheduled offsets (s) and latencies (s) of completed requests, for windows.
    arrivals: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0), repr=False)
    latencies: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0), repr=False)
    #: Scheduled offsets (s) of the requests shed at the cap, for windows.
    shed_arrivals: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0), repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (without the per-request arrays)."""
        return {
            "label": self.label,
            "fraction": self.fraction,
            "offered_qps": self.offered,
            "seconds": self.seconds,
            "scheduled": self.scheduled,
            "completed": self.completed,
            "errors": self.errors,
            "error_reasons": dict(self.error_reasons),
            "shed": self.shed,
            "unfinished": self.unfinished,
            "achieved_qps": self.achieved,
            "latency_ms": self.latency,
            "service_ms": self.service,
            "dispatch_lag_ms": self.lag,
            "peak_rss_mb": self.peak_rss_mb,
            "cpu_seconds": self.cpu_seconds,
            "major_faults": self.major_faults,
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> RungResult:
        """The rung :meth:`to_dict` wrote (without its per-request arrays).

        Raises:
            KeyError, TypeError, ValueError: not such a record.

        """
        return cls(
            label=str(record["label"]),
            fraction=None if record["fraction"] is None else float(record["fraction"]),
            offered=float(record["offered_qps"]),
            seconds=float(record["seconds"]),
            scheduled=int(record["scheduled"]),
            completed=int(record["completed"]),
            errors=int(record["errors"]),
            shed=int(record["shed"]),
            unfinished=int(record["unfinished"]),
            achieved=float(record["achieved_qps"]),
            latency={str(k): float(v) for k, v in record["latency_ms"].items()},
            service={str(k): float(v) for k, v in record["service_ms"].items()},
            lag={str(k): float(v) for k, v in record["dispatch_lag_ms"].items()},
            peak_rss_mb=float(record["peak_rss_mb"]),
            cpu_seconds=float(record["cpu_seconds"]),
            major_faults=int(record["major_faults"]),
            seed=int(record["seed"]),
            error_reasons={str(k): int(v) for k, v in record.get("error_reasons", {}).items()},
        )


def run_rung(
    target: Target,
    schedule: Schedule,
    *,
    cap: int = DEFAULT_CAP,
    label: str = "",
    fraction: float | None = None,
    progress: TextIO | None = None,
    progress_seconds: float = 5.0,
    drain_seconds: float = 30.0,
    events: Sequence[tuple[float, Callable[[], None]]] = (),
) -> RungResult:
    """Drive ``target`` (already started) through ``schedule``; measure every request.

    The dispatcher (this thread) sleeps until each arrival's scheduled time,
    sheds it if ``cap`` requests are in flight, otherwise submits it.
    ``events``: (offset seconds, action) pairs, each run once in a thread of its
    own when the rung reaches its offset (commit under load).

    Raises:
        InvalidParameterError: ``cap`` is not positive.

    """
    if cap <= 0:
        raise InvalidParameterError(f"the in-flight cap must be positive, got {cap}")
    if not 0 < progress_seconds <= MAX_PROGRESS_SECONDS:
        raise InvalidParameterError(
            f"progress lines come at least every {MAX_PROGRESS_SECONDS:g} s; got {progress_seconds!r}"
        )
    n = len(schedule)
    starts = np.zeros(n)
    ends = np.zeros(n)
    status = np.zeros(n, dtype=np.int8)
    dispatched = np.zeros(n)
    slots = threading.BoundedSemaphore(cap)
    finished: list[int] = []
    reasons: collections.Counter[str] = collections.Counter()
    all_done = threading.Event()
    sent = [0]
    shed = [0]

    def done(request: int, started: float, ended: float, error: str | None) -> None:
        starts[request] = started
        ends[request] = ended
        if error is None:
            status[request] = _OK
        else:
            status[request] = _ERROR
            reasons[error] += 1
        finished.append(request)
        slots.release()
        if len(finished) == sent[0] and dispatching_over.is_set():
            all_done.set()

    dispatching_over = threading.Event()
    resources = _Resources(target.pids())
    stop_sampler = threading.Event()
    origin = time.perf_counter() + 0.05
    out = sys.stderr if progress is None else progress
    name = label or target.name

    def sampler() -> None:
        next_line = time.perf_counter() + progress_seconds
        while not stop_sampler.wait(0.1):
            resources.sample()
            now = time.perf_counter()
            if now >= next_line:
                next_line = now + progress_seconds
                elapsed = now - origin
                print(
                    f"[load] {name} {schedule.rate:,.1f} q/s: {elapsed:,.1f}/{schedule.seconds:,.1f} s, "
                    f"sent {sent[0]:,} of {n:,}, done {len(finished):,}, shed {shed[0]:,}, "
                    f"in flight {sent[0] - len(finished)}",
                    file=out,
                    flush=True,
                )

    watcher = threading.Thread(target=sampler, name="load-progress", daemon=True)
    watcher.start()
    helpers: list[threading.Thread] = []
    pending_events = sorted(events, key=lambda e: e[0])
    offsets = schedule.offsets.tolist()
    items = schedule.items.tolist()
    clock, sleep = time.perf_counter, time.sleep
    try:
        for request in range(n):
            due = origin + offsets[request]
            while pending_events and origin + pending_events[0][0] <= due:
                at, action = pending_events.pop(0)
                delay = origin + at - clock()
                if delay > 0:
                    sleep(delay)
                helper = threading.Thread(target=action, name="load-event", daemon=True)
                helper.start()
                helpers.append(helper)
            delay = due - clock()
            if delay > 50e-6:
                sleep(delay)
            now = clock()
            dispatched[request] = now
            if not slots.acquire(blocking=False):
                status[request] = _SHED
                shed[0] += 1
                continue
            sent[0] += 1
            target.submit(request, items[request], done)
        for at, action in pending_events:  # events after the last arrival still run
            delay = origin + at - clock()
            if delay > 0:
                sleep(delay)
            helper = threading.Thread(target=action, name="load-event", daemon=True)
            helper.start()
            helpers.append(helper)
        dispatching_over.set()
        if len(finished) == sent[0]:
            all_done.set()
        all_done.wait(timeout=drain_seconds)
    finally:
        stop_sampler.set()
        watcher.join()
    for helper in helpers:
        helper.join()
    cut = clock()
    peak, cpu, faults = resources.finish()
    scheduled_at = origin + schedule.offsets
    ok_mask = status == _OK
    pending_mask = status == _PENDING
    unfinished = int(np.count_nonzero(pending_mask))
    latencies = np.concatenate([ends[ok_mask] - scheduled_at[ok_mask], cut - scheduled_at[pending_mask]])
    service = ends[ok_mask] - starts[ok_mask]
    completed_mask = ok_mask | (status == _ERROR)
    last = float(ends[completed_mask].max()) if completed_mask.any() else cut
    span = max(last - origin, 1e-9)
    sent_mask = status != _SHED
    lag = dispatched[sent_mask] - scheduled_at[sent_mask]
    lag_ms = (
        {
            "p50": float(np.percentile(lag, 50)) * 1e3,
            "p99": float(np.percentile(lag, 99)) * 1e3,
            "max": float(lag.max()) * 1e3,
        }
        if lag.size
        else {"p50": math.nan, "p99": math.nan, "max": math.nan}
    )
    return RungResult(
        label=name,
        fraction=fraction,
        offered=schedule.rate,
        seconds=schedule.seconds,
        scheduled=n,
        completed=int(np.count_nonzero(completed_mask)),
        errors=int(np.count_nonzero(status == _ERROR)),
        shed=shed[0],
        unfinished=unfinished,
        achieved=int(np.count_nonzero(completed_mask)) / span,
        latency=_percentiles(latencies),
        service=_percentiles(service),
        lag=lag_ms,
        peak_rss_mb=peak,
        cpu_seconds=cpu,
        major_faults=faults,
        seed=schedule.seed,
        error_reasons=dict(reasons.most_common()),
        arrivals=schedule.offsets[ok_mask],
        latencies=ends[ok_mask] - scheduled_at[ok_mask],
        shed_arrivals=schedule.offsets[status == _SHED],
    )


def sequential_throughput(
    target: Target, n_items: int, *, seconds: float = 10.0, warmup: int = 200, seed: int = 0
) -> float:
    """Requests per second with one request at a time through ``target`` (closed loop).

    ``warmup`` requests are answered first, untimed; then requests follow each
    other for ``seconds``. The queries are drawn from ``seed`` as the rungs' are.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    items = rng.integers(0, n_items, size=max(warmup, 1) + 65_536).tolist()  # cycled
    finished = threading.Event()

    def done(request: int, started: float, ended: float, error: str | None) -> None:
        finished.set()

    def one(request: int) -> None:
        finished.clear()
        target.submit(request, items[request % len(items)], done)
        finished.wait()

    for request in range(warmup):
        one(request)
    count = 0
    began = time.perf_counter()
    deadline = began + seconds
    while True:
        one(warmup + count)
        count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - began)


def direct_throughput(
    search: Callable[[int], object], n_items: int, *, seconds: float = 10.0, warmup: int = 200, seed: int = 0
) -> float:
    """Calls per second of ``search`` in a tight loop on the calling thread (no target, no handoff).

    The same queries as :func:`sequential_throughput` (drawn from ``seed``),
    after ``warmup`` untimed calls.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    items = rng.integers(0, n_items, size=max(warmup, 1) + 65_536).tolist()  # cycled
    for item in items[:warmup]:
        search(item)
    count = 0
    began = time.perf_counter()
    deadline = began + seconds
    while True:
        search(items[(warmup + count) % len(items)])
        count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - began)


def calibrate(rate: float, seconds: float, *, seed: int = 0, progress: TextIO | None = None) -> RungResult:
    """The driver against :class:`NoopTarget` at ``rate``: its own overhead, as latency and lag."""
    schedule = poisson_schedule(rate, seconds, seed, 1)
    return run_rung(NoopTarget(), schedule, label="driver (no-op target)", progress=progress)


# ---------------------------------------------------------------------- the ladder


@dataclass
class LadderResult:
    """A ladder on one target and arm: sequential throughput, rungs, repetitions of the headline rung."""

    target: str
    arm: str
    engine: str
    rss_scope: str
    sequential_qps: float
    rungs: list[RungResult]
    repetitions: list[RungResult]
    headline: float
    absolute: list[RungResult] = field(default_factory=list)
    #: One request at a time through the target, and the bare search function in a tight
    #: loop (``None`` when not measured); ``sequential_qps`` is the larger of the two.
    through_target_qps: float | None = None
    direct_qps: float | None = None

    @property
    def lowest(self) -> RungResult:
        """The lowest open-loop rung: the "unloaded" denominator."""
        return min(self.rungs, key=lambda r: r.offered)

    def spread(self) -> dict[str, list[float]]:
        """p50 and p99 (ms) of each repetition of the headline rung."""
        return {
            "p50_ms": [r.latency["p50"] for r in self.repetitions],
            "p99_ms": [r.latency["p99"] for r in self.repetitions],
            "shed": [float(r.shed) for r in self.repetitions],
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record."""
        lowest = self.lowest
        return {
            "target": self.target,
            "arm": self.arm,
            "engine": self.engine,
            "rss_scope": self.rss_scope,
            "sequential_qps": self.sequential_qps,
            "sequential_through_target_qps": self.through_target_qps,
            "sequential_direct_qps": self.direct_qps,
            "unloaded_denominator": f"lowest open-loop rung ({lowest.offered:.1f} q/s)",
            "rungs": [
                {
                    **r.to_dict(),
                    "p50_over_lowest": r.latency["p50"] / lowest.latency["p50"],
                    "rss_over_lowest": r.peak_rss_mb / lowest.peak_rss_mb if lowest.peak_rss_mb else None,
                }
                for r in self.rungs
            ],
            "headline_fraction": self.headline,
            "repetitions": [r.to_dict() for r in self.repetitions],
            "spread": self.spread(),
            "absolute_rungs": [r.to_dict() for r in self.absolute],
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> LadderResult:
        """The ladder :meth:`to_dict` wrote (its rungs without per-request arrays).

        Raises:
            KeyError, TypeError, ValueError: not such a record.

        """

        def optional(name: str) -> float | None:
            value = record.get(name)
            return None if value is None else float(value)

        return cls(
            target=str(record["target"]),
            arm=str(record["arm"]),
            engine=str(record["engine"]),
            rss_scope=str(record["rss_scope"]),
            sequential_qps=float(record["sequential_qps"]),
            rungs=[RungResult.from_dict(r) for r in record["rungs"]],
            repetitions=[RungResult.from_dict(r) for r in record["repetitions"]],
            headline=float(record["headline_fraction"]),
            absolute=[RungResult.from_dict(r) for r in record.get("absolute_rungs", [])],
            through_target_qps=optional("sequential_through_target_qps"),
            direct_qps=optional("sequential_direct_qps"),
        )


def run_ladder(
    target: Target,
    n_items: int,
    *,
    arm: str,
    engine: str,
    fractions: Sequence[float] = DEFAULT_RUNGS,
    rung_seconds: float = 60.0,
    min_requests: int = 5_000,
    max_rung_seconds: float | None = None,
    sequential_seconds: float = 10.0,
    repetitions: int = 3,
    headline: float = 1.0,
    absolute_rates: Sequence[float] = (),
    cap: int = DEFAULT_CAP,
    seed: int = 20261203,
    progress: TextIO | None = None,
    progress_seconds: float = 5.0,
    sequential: float | None = None,
    direct: Callable[[int], object] | None = None,
    sequential_from: str = "max",
) -> LadderResult:
    """Sequential throughput, then a rung at each fraction of it, then the headline rung again.

    ``target`` must be started. Rung ``i`` uses seed ``seed + i``; repetition
    ``j`` of the headline rung (``j`` >= 1; the ladder's own rung is the first)
    uses ``seed + 1000 + j``; ``absolute_rates`` (a peer run at another
    target's rates, in that target's rung order) use ``seed + i`` too, so at
    the same rate and length the peer receives the very schedule, arrival for
    arrival and query for query, that the other target's rung ``i`` received.
    ``sequential`` skips the measurement and uses that throughput.

    Sequential throughput is measured one request at a time through ``target``
    and, when ``direct`` (the bare search function) is given, in a tight loop
    calling it; the rungs are fractions of the **larger** figure. Handing a
    request to a thread or a process costs time a tight loop does not pay, so
    a denominator measured through the target alone would offer every rung a
    lower rate than the engine's own speed: the larger one never flatters.
    ``sequential_from`` chooses otherwise: ``"target"`` or ``"direct"`` alone.

    Raises:
        InvalidParameterError: bad fractions, lengths or counts.

    """
    if repetitions < 1:
        raise InvalidParameterError(f"repetitions must be at least 1, got {repetitions}")
    _hdr_histogram_class()  # before any request is sent: a missing extra fails at once, not after a rung
    if sequential_from not in ("max", "target", "direct") or (sequential_from == "direct" and direct is None):
        raise InvalidParameterError(
            "sequential_from must be max, target or direct (direct needs a search function), "
            f"got {sequential_from!r}"
        )
    if headline not in fractions:
        raise InvalidParameterError(f"the headline rung {headline} is not one of the rungs {list(fractions)}")
    out = sys.stderr if progress is None else progress
    through: float | None = None
    tight: float | None = None
    if sequential is None:
        print(
            f"[load] {target.name} {arm}: sequential throughput ({sequential_seconds:g} s)",
            file=out,
            flush=True,
        )
        through = sequential_throughput(target, n_items, seconds=sequential_seconds, seed=seed)
        tight = (
            None
            if direct is None
            else direct_throughput(direct, n_items, seconds=sequential_seconds, seed=seed)
        )
        if sequential_from == "target" or tight is None:
            sequential = through
        elif sequential_from == "direct":
            sequential = tight
        else:
            sequential = max(through, tight)
    rates = ladder_rates(sequential, fractions)

    def rung(rate: float, rung_seed: int, fraction: float | None, label: str) -> RungResult:
        seconds = rung_seconds_for(rate, rung_seconds, min_requests, max_rung_seconds)
        schedule = poisson_schedule(rate, seconds, rung_seed, n_items)
        print(f"[load] {label}: {rate:,.1f} q/s for {seconds:,.1f} s", file=out, flush=True)
        return run_rung(
            target, schedule, cap=cap, label=label, fraction=fraction, progress=out,
            progress_seconds=progress_seconds,
        )  # fmt: skip

    rungs = [
        rung(rate, seed + i, fraction, f"{target.name} {arm} {fraction:.1%}")
        for i, (rate, fraction) in enumerate(zip(rates, fractions, strict=True))
    ]
    head = rungs[list(fractions).index(headline)]
    reps = [head] + [
        rung(head.offered, seed + 1000 + j, headline, f"{target.name} {arm} {headline:.1%} rep {j + 1}")
        for j in range(1, repetitions)
    ]
    absolute = [
        rung(rate, seed + i, None, f"{target.name} {arm} at {rate:,.1f} q/s")
        for i, rate in enumerate(absolute_rates)
    ]
    return LadderResult(
        target.name,
        arm,
        engine,
        target.rss_scope,
        sequential,
        rungs,
        reps,
        headline,
        absolute,
        through,
        tight,
    )


# ---------------------------------------------------------------------- commit under load


@dataclass
class CommitResult:
    """Latency inside a commit (+ merge) window against outside it, at one rung.

    ``outside`` is every request outside the window; ``before`` and ``after``
    split it at the window, so a rise that outlasts the window (a larger index
    after the commit) is told from one the commit's own work causes. ``shed``
    counts requests shed at the cap in each of the three windows (their
    latency is in no percentile: a shed request was never answered).
    """

    rung: RungResult
    commit_seconds: float
    merge_seconds: float
    window: tuple[float, float]
    inside: dict[str, float]
    outside: dict[str, float]
    inside_count: int
    outside_count: int
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    #: Requests shed at the cap before, inside and after the window.
    shed: dict[str, int] = field(default_factory=dict)
    #: Sequential throughputs (q/s) the rate was chosen from, when known: ``before``, ``after``.
    sequential: dict[str, float] = field(default_factory=dict)

    @property
    def p99_ratio(self) -> float:
        """p99 inside over p99 outside."""
        return self.inside["p99"] / self.outside["p99"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "rung": self.rung.to_dict(),
            "commit_seconds": self.commit_seconds,
            "merge_seconds": self.merge_seconds,
            "window_s": list(self.window),
            "inside_ms": self.inside,
            "outside_ms": self.outside,
            "inside_count": self.inside_count,
            "outside_count": self.outside_count,
            "before_ms": self.before,
            "after_ms": self.after,
            "shed": dict(self.shed),
            "sequential_qps": dict(self.sequential),
            "p99_ratio": self.p99_ratio,
        }


def commit_under_load(
    target: Target,
    index: Any,
    n_items: int,
    rate: float,
    seconds: float,
    *,
    at: float | None = None,
    cap: int = DEFAULT_CAP,
    seed: int = 20261203,
    progress: TextIO | None = None,
) -> CommitResult:
    """One ``index.commit()`` and ``index.merge(force=True)`` at offset ``at`` of a rung at ``rate``.

    The documents to commit must already be added to ``index`` (the writer the
    in-process ``target`` searches), so both windows search the same published
    snapshot until the commit publishes. The window runs from the commit's
    start to the merge's end; requests are split by their scheduled arrival.
    """
    window: list[float] = []
    timings: list[float] = []

    def commit() -> None:
        began = time.perf_counter()
        index.commit()
        committed = time.perf_counter()
        index.merge(force=True)
        ended = time.perf_counter()
        window.extend([began, ended])
        timings.extend([committed - began, ended - committed])

    schedule = poisson_schedule(rate, seconds, seed, n_items)
    started = time.perf_counter()
    result = run_rung(
        target, schedule, cap=cap, label=f"{target.name} commit under load", progress=progress,
        events=[(seconds / 3 if at is None else at, commit)],
    )  # fmt: skip
    # run_rung's origin is 0.05 s after its call; offsets are relative to it.
    origin = started + 0.05
    begin, end = window[0] - origin, window[1] - origin
    inside_mask = (result.arrivals >= begin) & (result.arrivals <= end)
    inside = _percentiles(result.latencies[inside_mask])
    outside = _percentiles(result.latencies[~inside_mask])
    before = _percentiles(result.latencies[result.arrivals < begin])
    after = _percentiles(result.latencies[result.arrivals > end])
    shed_at = result.shed_arrivals
    shed = {
        "before": int(np.count_nonzero(shed_at < begin)),
        "inside": int(np.count_nonzero((shed_at >= begin) & (shed_at <= end))),
        "after": int(np.count_nonzero(shed_at > end)),
    }
    return CommitResult(
        result, timings[0], timings[1], (begin, end), inside, outside,
        int(np.count_nonzero(inside_mask)), int(np.count_nonzero(~inside_mask)), before, after, shed,
    )  # fmt: skip


# ---------------------------------------------------------------------- output


def _ms(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def format_ladder(result: LadderResult) -> str:
    """A ladder as a text table; ratios are against the lowest open-loop rung (the unloaded denominator)."""
    lowest = result.lowest
    headers = [
        "rung", "offered q/s", "achieved", "done", "errors", "shed", "p50", "p90", "p99", "p99.9", "max",
        "svc p50", "svc p99", "p50/low", "RSS MB", "RSS/low", "CPU s", "majflt", "lag p99",
    ]  # fmt: skip
    rows = []
    for r in [*result.rungs, *result.repetitions[1:], *result.absolute]:
        label = f"{r.fraction:.1%}" if r.fraction is not None else "abs"
        if r in result.repetitions[1:]:
            label += f" rep{result.repetitions.index(r) + 1}"
        rows.append(
            [
                label,
                f"{r.offered:,.1f}",
                f"{r.achieved:,.1f}",
                f"{r.completed:,}",
                f"{r.errors:,}",  # of done: a failed call, or an HTTP status other than 2xx
                f"{r.shed:,}" + (f" +{r.unfinished} unf" if r.unfinished else ""),
                *(_ms(r.latency[p]) for p in ("p50", "p90", "p99", "p99.9", "max")),
                _ms(r.service["p50"]),
                _ms(r.service["p99"]),
                f"{r.latency['p50'] / lowest.latency['p50']:.2f}x",
                f"{r.peak_rss_mb:,.0f}",
                f"{r.peak_rss_mb / lowest.peak_rss_mb:.2f}x" if lowest.peak_rss_mb else "-",
                f"{r.cpu_seconds:,.1f}",
                f"{r.major_faults:,}",
                _ms(r.lag["p99"]),
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = [
        f"{result.engine} {result.arm} on {result.target}: "
        f"sequential throughput {result.sequential_qps:,.1f} q/s"
        + (
            f" (one at a time through the target {result.through_target_qps:,.1f}, "
            f"the bare search in a tight loop {result.direct_qps:,.1f})"
            if result.through_target_qps is not None and result.direct_qps is not None
            else ""
        ),
        "latency from each request's scheduled arrival (ms); svc = service time; "
        "lag = dispatcher lateness (ms); "
        f"unloaded denominator (/low) = the lowest open-loop rung, {lowest.offered:,.1f} q/s; "
        f"RSS: {result.rss_scope}",
        "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)),
    ]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    spread = result.spread()
    if len(result.repetitions) > 1:
        lines.append(
            f"headline rung {result.headline:.1%} x{len(result.repetitions)}: p50 "
            f"{_ms(min(spread['p50_ms']))}-{_ms(max(spread['p50_ms']))} ms, p99 "
            f"{_ms(min(spread['p99_ms']))}-{_ms(max(spread['p99_ms']))} ms, shed "
            f"{', '.join(str(int(s)) for s in spread['shed'])}"
        )
    for r in [*result.rungs, *result.repetitions[1:], *result.absolute]:
        if r.error_reasons:  # why requests failed, so an error is never only a count
            label = f"{r.fraction:.1%}" if r.fraction is not None else f"abs {r.offered:,.1f} q/s"
            reasons = "; ".join(f"{count:,} x {reason}" for reason, count in r.error_reasons.items())
            lines.append(f"errors at {label}: {reasons}")
    return "\n".join(lines) + "\n"


def plot_ladder(results: Sequence[LadderResult], path: str | Path, *, title: str = "") -> None:
    """A PNG: latency p50 and p99 against offered load, one panel per arm, every target (and peer) in it.

    The figure is :func:`ladder_figure`'s. ``weft-search bench plot`` draws it again from the
    JSON ``bench load --json`` wrote (:func:`ladders_from_json`).

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``eval`` extra).

    """
    Path(path).write_bytes(png_bytes(ladder_figure(results, title=title)))


def ladder_figure(results: Sequence[LadderResult], *, title: str = "") -> Figure:
    """The figure :func:`plot_ladder` writes, on an Agg canvas of its own.

    One panel per arm; each target keeps one colour in every panel (p50 solid
    circles, p99 dashed squares, a peer's p99 at the engine's rates hollow
    triangles, shed rungs black crosses), and one legend for all panels sits
    below them, never over a curve.

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``eval`` extra).

    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError(f"--plot needs matplotlib: {PLOT_INSTALL_HINT}") from None
    arms = sorted({r.arm for r in results})
    targets = list(dict.fromkeys(r.target for r in results))  # a target's colour is the same in every panel
    figure = Figure(figsize=(6.5 * max(len(arms), 1), 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    for position, arm in enumerate(arms, start=1):
        axes = figure.add_subplot(1, len(arms), position)
        for result in (r for r in results if r.arm == arm):
            color = f"C{targets.index(result.target) % 10}"
            rungs = sorted(result.rungs, key=lambda r: r.offered)
            x = [r.offered for r in rungs]
            label = result.target  # "weft threads:2", "tantivy processes:2", ...
            axes.plot(x, [r.latency["p50"] for r in rungs], "o-", color=color, label=f"{label} p50")
            axes.plot(x, [r.latency["p99"] for r in rungs], "s--", color=color, label=f"{label} p99")
            if result.absolute:  # a peer at the other target's rates: p99 only, hollow triangles
                axes.plot(
                    [r.offered for r in result.absolute], [r.latency["p99"] for r in result.absolute], "^",
                    color=color, mfc="none", label=f"{label} p99 at the engine's rates",
                )  # fmt: skip
            shed = [r for r in rungs if r.shed]
            if shed:
                axes.plot(
                    [r.offered for r in shed], [r.latency["p99"] for r in shed], "x", color="black", ms=9
                )
        axes.set_xscale("log")
        axes.set_yscale("log")
        # Round values as plain numbers, never more than fit: matplotlib's own labels of a log
        # axis spanning about a decade collide (3x10^2 against 4x10^2).
        log_ticks(axes.xaxis)
        log_ticks(axes.yaxis, max_ticks=8)
        axes.set_xlabel("offered load (queries / second, Poisson)")
        axes.set_ylabel("latency from scheduled arrival (ms)")
        axes.set_title(f"{arm}" + (f": {title}" if title else "") + " (x: requests shed)", fontsize=9)
        axes.grid(True, which="both", alpha=0.3)
    legend_below(figure, fontsize=7)  # below the panels: inside, a busy panel's legend hid its curves
    return figure


def ladders_from_json(path: str | Path) -> list[LadderResult]:
    """The ladders of a ``bench load --json`` file, as :func:`plot_ladder` and :func:`format_ladder` take.

    Per-request arrays are not in the file, so the rungs' ``arrivals`` and
    ``latencies`` are empty.

    Raises:
        InvalidParameterError: not such a file (not JSON, or without its ladders).
        OSError: it cannot be read.

    """
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
        return [LadderResult.from_dict(record) for record in payload["ladders"]]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise InvalidParameterError(f"{path}: not the JSON of weft-search bench load ({exc!r})") from None


# ---------------------------------------------------------------------- SciFact and the command


def _scifact(data: str, hybrid: bool) -> tuple[list[str], list[str], Workload, NDArray[np.float32] | None]:
    """SciFact's keys, analysed document texts, queries and document vectors (english analyzer, once)."""
    from weftsearch.analysis import get_analyzer
    from weftsearch.eval.datasets import load_collection, load_frozen_vectors

    collection = load_collection("scifact", data)
    analyzer = get_analyzer("english")
    keys = [d.key for d in collection.documents]
    texts = [" ".join(analyzer.analyze(d.text)) for d in collection.documents]
    query_texts = tuple(" ".join(analyzer.analyze(t)) for t in collection.queries.values())
    doc_vectors = query_vectors = None
    if hybrid:
        vectors = load_frozen_vectors(collection)
        doc_vectors = np.ascontiguousarray(vectors.documents, dtype=np.float32)
        query_vectors = np.ascontiguousarray(vectors.queries, dtype=np.float32)
    return keys, texts, Workload(query_texts, query_vectors), doc_vectors


def _synthetic(
    n_docs: int, n_queries: int, hybrid: bool
) -> tuple[list[str], list[str], Workload, NDArray[np.float32] | None]:
    """The shared synthetic corpus (:mod:`weftsearch.bench.synthetic`) as :func:`_scifact` gives SciFact.

    Its tokens are the analysed text already; for the hybrid arm, seeded random unit
    vectors of width 384 (cost, not quality: they mean nothing).
    """
    from weftsearch.bench.synthetic import SEED, unit_vectors, zipf_corpus

    corpus = zipf_corpus(n_docs, n_queries)
    texts = [" ".join(tokens) for tokens in corpus.doc_tokens]
    query_texts = tuple(" ".join(tokens) for tokens in corpus.query_tokens)
    doc_vectors = query_vectors = None
    if hybrid:
        doc_vectors = unit_vectors(n_docs)
        query_vectors = unit_vectors(n_queries, seed=SEED + 2)
    return corpus.doc_keys, texts, Workload(query_texts, query_vectors), doc_vectors


def _build_weft(
    path: Path, keys: Sequence[str], texts: Sequence[str], vectors: NDArray[np.float32] | None
) -> None:
    from weftsearch.documents import Document
    from weftsearch.engine.index import Index

    dim = None if vectors is None else int(vectors.shape[1])
    with Index.create(path, "simple", vector_dim=dim) as index:
        index.add_many(
            (
                Document(k, t, vector=None if vectors is None else vectors[i])
                for i, (k, t) in enumerate(zip(keys, texts, strict=True))
            ),
            progress=False,
        )
        index.commit()


def _build_tantivy(path: Path, keys: Sequence[str], texts: Sequence[str]) -> None:
    try:
        import tantivy
    except ImportError:
        raise _peer_missing("tantivy", "tantivy") from None
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
    path.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(builder.build(), path=str(path))
    writer = index.writer(heap_size=500_000_000, num_threads=1)
    for key, text in zip(keys, texts, strict=True):
        writer.add_document(tantivy.Document(key=key, body=text))
    writer.commit()
    writer.wait_merging_threads()


#: Rows from which the LanceDB peer gets an IVF vector index (below, it scans exactly, as weft's
#: small segments do).
LANCE_ANN_FROM_ROWS = 100_000


def _build_lance(path: Path, keys: Sequence[str], texts: Sequence[str], vectors: NDArray[np.float32]) -> None:
    os.environ.setdefault("LANCEDB_LOG", "error")  # see LanceSearcher.open
    try:
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS
    except ImportError:
        raise _peer_missing("LanceDB", "lancedb") from None
    table = pa.table(
        {
            "key": list(keys),
            "text": list(texts),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
        }
    )
    created = lancedb.connect(str(path)).create_table("docs", table)
    created.create_index(
        "text",
        config=FTS(base_tokenizer="whitespace", lower_case=False, stem=False, remove_stop_words=False,
                   ascii_folding=False, with_position=False),
    )  # fmt: skip
    if len(keys) >= LANCE_ANN_FROM_ROWS:
        # An exact scan of a million vectors is about 1 q/s: no peer for an IVF engine. Its IVF
        # index without compression (IVF_FLAT, as weft's lists hold the full vectors), with as
        # many lists as weft makes for that many vectors (nlist_for).
        from lancedb.index import IvfFlat

        created.create_index(
            "vector", config=IvfFlat(distance_type="cosine", num_partitions=nlist_for(len(keys)))
        )


def _target(kind: str, searcher: Searcher, label: str) -> Target:
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


def _is_served(kind: str) -> bool:
    """Whether a ``--target`` is a server (``serve:N`` or a base URL): no peer runs beside it."""
    return kind.startswith(("http://", "https://", "serve:"))


def _served_workers(kind: str) -> int:
    """N of ``serve:N``."""
    try:
        workers = int(kind.partition(":")[2])
    except ValueError:
        workers = 0
    if workers < 1:
        raise InvalidParameterError(f"unknown target {kind!r}: expected serve:N with N >= 1 workers")
    return workers


def _direct(target: Target, searcher: Searcher) -> Callable[[int], object] | None:
    """The bare search function for the tight sequential loop: the pool's own, or opened here."""
    if isinstance(target, ThreadTarget):
        return target.search_function
    if isinstance(target, ProcessTarget):
        return searcher.open()  # in this process, which a process target's figures leave out
    return None


def _machine_state() -> dict[str, Any]:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


#: The install line of the ``bench`` extra (the histograms and the peers).
BENCH_INSTALL_HINT = "pip install 'weft-search[bench]'"
#: The install line of the ``server`` extra (``serve:N`` runs ``weft-search serve``; httpx drives it).
SERVER_INSTALL_HINT = "pip install 'weft-search[server]'"


def _module_missing(module: str) -> bool:
    """Whether ``module`` (a top-level name) cannot be imported, found without importing it. O(1)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is None  # None too for a sys.modules entry of None
    except (ImportError, ValueError):
        return True


def needed_modules(
    arms: Sequence[str], targets: Sequence[str], *, peer: bool, plot: bool
) -> list[tuple[str, str, str]]:
    """What ``bench load`` with these options imports: ``(module, what needs it, install line)`` each.

    The histograms always; a peer's engine where a peer runs (``peer`` and some
    target in-process or multi-process): tantivy for the bm25 arm, LanceDB and
    pyarrow for the hybrid arm; httpx for a server target, and the server's
    own packages for ``serve:N``; matplotlib for ``--plot``.
    """
    needed = [("hdrh", "the latency histograms", BENCH_INSTALL_HINT)]
    if peer and any(not _is_served(kind) for kind in targets):
        if "bm25" in arms:
            needed.append(("tantivy", "the bm25 arm's peer (or --no-peer)", BENCH_INSTALL_HINT))
        if "hybrid" in arms:
            needed.append(("lancedb", "the hybrid arm's peer (or --no-peer)", BENCH_INSTALL_HINT))
            needed.append(("pyarrow", "the hybrid arm's peer (or --no-peer)", BENCH_INSTALL_HINT))
    if any(_is_served(kind) for kind in targets):
        needed.append(("httpx", "a server target", SERVER_INSTALL_HINT))
    if any(kind.startswith("serve:") for kind in targets):
        needed.extend((module, "a serve:N target", SERVER_INSTALL_HINT) for module in ("fastapi", "uvicorn"))
    if plot:
        needed.append(("matplotlib", "--plot", PLOT_INSTALL_HINT))
    return needed


def check_load_dependencies(arms: Sequence[str], targets: Sequence[str], *, peer: bool, plot: bool) -> None:
    """Refuse at once, before any index is built, a ``bench load`` whose packages are not all installed.

    Raises:
        MissingDependencyError: naming every missing module, what needs it and
            the extra that installs it (``pip install 'weft-search[bench]'``, ...).

    """
    missing = [
        item for item in needed_modules(arms, targets, peer=peer, plot=plot) if _module_missing(item[0])
    ]
    if missing:
        parts = "; ".join(f"{module} (for {what})" for module, what, _ in missing)
        hints = " and ".join(dict.fromkeys(hint for _, _, hint in missing))
        raise MissingDependencyError(f"bench load needs packages that are not installed: {parts}: {hints}")


def _check_targets(targets: Sequence[str]) -> None:
    """Refuse an unknown ``--target`` before any work (the ladder would meet it after the builds)."""
    for kind in targets:
        if kind.startswith("serve:"):
            _served_workers(kind)
        elif not kind.startswith(("http://", "https://")):
            _target(kind, SleepSearcher(0.0), "check")  # builds the object only: nothing starts


def load_command(args: argparse.Namespace) -> int:
    """Handler of ``weft-search bench load`` (errors propagate as :class:`WeftError`/``OSError``).

    Everything that can be refused is refused before any work: the arms, the
    targets and every package they need (:func:`check_load_dependencies`).
    """
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for arm in arms:
        if arm not in ("bm25", "hybrid"):
            raise InvalidParameterError(f"unknown arm {arm!r} (known: bm25, hybrid)")
    _check_targets(args.target)
    check_load_dependencies(arms, args.target, peer=args.peer, plot=args.plot is not None)
    out = sys.stderr
    state = _machine_state()
    print(f"[load] machine: {state}", file=out, flush=True)
    results: list[LadderResult] = []
    calibration: RungResult | None = None
    handoffs: list[RungResult] = []
    commit_result: CommitResult | None = None
    if args.synthetic:
        corpus_name = f"synthetic {args.synthetic:,}"
        print(f"[load] drawing the {corpus_name} corpus", file=out, flush=True)
        keys, texts, workload, doc_vectors = _synthetic(args.synthetic, args.queries, "hybrid" in arms)
    else:
        corpus_name = "SciFact"
        keys, texts, workload, doc_vectors = _scifact(args.data, "hybrid" in arms)
    common = dict(
        fractions=args.rungs, rung_seconds=args.rung_seconds, min_requests=args.min_requests,
        max_rung_seconds=args.max_rung_seconds,
        sequential_seconds=args.sequential_seconds, repetitions=args.repetitions, headline=args.headline,
        sequential_from=args.denominator,
        cap=args.cap, seed=args.seed, progress=out, progress_seconds=args.progress_seconds,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="weft-load-", dir=args.workdir) as tmp:
        root = Path(tmp)
        print(f"[load] building the indexes in {root}", file=out, flush=True)
        _build_weft(root / "weft", keys, texts, doc_vectors)
        if args.commit_under_load:
            # First, before a peer is imported into this process: the commit forks its encoder.
            commit_result = _commit_run(args, root, keys, texts, workload, doc_vectors, arms[0], out)
        # A server's peer is run by whoever runs the peer's server: peers (and their indexes)
        # only where some target is in-process or multi-process.
        peers = args.peer and any(not _is_served(kind) for kind in args.target)
        if peers and "bm25" in arms:
            _build_tantivy(root / "tantivy", keys, texts)
        if peers and "hybrid" in arms:
            assert doc_vectors is not None
            _build_lance(root / "lance", keys, texts, doc_vectors)
        highest = 0.0
        for arm in arms:
            for kind in args.target:
                searcher = WeftSearcher(str(root / "weft"), workload, arm, args.k, args.depth)
                target: Target
                if kind.startswith("serve:"):
                    target = ServeTarget(
                        root / "weft", _served_workers(kind), workload, k=args.k, hybrid=arm == "hybrid",
                        cap=args.cap, depth=args.depth,
                    )  # fmt: skip
                elif kind.startswith(("http://", "https://")):
                    target = HttpTarget(
                        kind, workload, k=args.k, hybrid=arm == "hybrid", path=args.http_path, cap=args.cap,
                        server_pids=args.server_pid or (), api=args.http_api, depth=args.depth,
                    )  # fmt: skip
                else:
                    target = _target(kind, searcher, "weft")
                target.start()
                try:
                    direct = _direct(target, searcher)
                    mine = run_ladder(
                        target, len(workload), arm=arm, engine="weft-search", direct=direct, **common
                    )
                finally:
                    target.close()
                results.append(mine)
                sys.stdout.write(format_ladder(mine) + "\n")
                sys.stdout.flush()
                highest = max(highest, max(r.offered for r in mine.rungs))
                if not args.peer or isinstance(target, HttpTarget):
                    continue  # a server's peer is run by whoever runs the peer's server
                peer: Searcher
                if arm == "bm25":
                    peer, engine = TantivySearcher(str(root / "tantivy"), workload, args.k), "tantivy"
                else:
                    peer, engine = LanceSearcher(str(root / "lance"), workload, args.k, args.depth), "LanceDB"
                peer_target = _target(kind, peer, engine)
                peer_target.start()
                try:
                    theirs = run_ladder(
                        peer_target, len(workload), arm=arm, engine=engine, direct=_direct(peer_target, peer),
                        absolute_rates=[r.offered for r in mine.rungs], **common,
                    )  # fmt: skip
                finally:
                    peer_target.close()
                results.append(theirs)
                highest = max(highest, *(r.offered for r in (*theirs.rungs, *theirs.absolute)))
                sys.stdout.write(format_ladder(theirs) + "\n")
                sys.stdout.flush()
        if args.calibrate and highest > 0:
            seconds = min(args.rung_seconds, 10.0)
            print(f"[load] dispatcher overhead: no-op targets at {highest:,.1f} q/s", file=out, flush=True)
            calibration = calibrate(highest, seconds, seed=args.seed, progress=out)
            _print_calibration("driver alone (no-op on its own thread)", calibration)
            for kind in args.target:
                if _is_served(kind):
                    continue
                # The same pool or workers with a search that does nothing: the ceiling of the
                # driver plus the handoff (queue, pipes), which no engine behind it can beat.
                noop = _target(kind, SleepSearcher(0.0), "no-op")
                noop.start()
                try:
                    schedule = poisson_schedule(highest, seconds, args.seed, 1)
                    result = run_rung(
                        noop, schedule, cap=args.cap, label=f"{noop.name} (no-op search)", progress=out
                    )
                finally:
                    noop.close()
                handoffs.append(result)
                _print_calibration(f"driver + {noop.name} with a no-op search", result)
    payload = {
        "machine": state,
        "machine_after": _machine_state(),
        "command": "weft-search " + " ".join(getattr(args, "argv", [])),
        "latency": "from each request's scheduled (Poisson) arrival; service time beside it",
        "unloaded_denominator": "the lowest open-loop rung",
        "ladders": [r.to_dict() for r in results],
        "driver_overhead": None if calibration is None else calibration.to_dict(),
        "driver_and_handoff_overhead": [r.to_dict() for r in handoffs],
        "commit_under_load": None if commit_result is None else commit_result.to_dict(),
    }
    if args.json is not None:
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=out)
    if args.plot is not None and results:
        plot_ladder(results, args.plot, title=f"{corpus_name}, {state['date_utc']}")
        print(f"wrote {args.plot}", file=out)
    return 0


def _print_calibration(what: str, result: RungResult) -> None:
    print(
        f"{what} at {result.offered:,.1f} q/s: latency p50 {_ms(result.latency['p50'])}, "
        f"p99 {_ms(result.latency['p99'])}, p99.9 {_ms(result.latency['p99.9'])}, max "
        f"{_ms(result.latency['max'])} ms; dispatcher lag p99 {_ms(result.lag['p99'])} ms; "
        f"achieved {result.achieved:,.1f} q/s, shed {result.shed:,}; CPU {result.cpu_seconds:.2f} s"
    )


def _commit_run(
    args: argparse.Namespace,
    root: Path,
    keys: Sequence[str],
    texts: Sequence[str],
    workload: Workload,
    doc_vectors: NDArray[np.float32] | None,
    arm: str,
    out: TextIO,
) -> CommitResult:
    """The 50% rung of an in-process target, with one commit of ``--commit-docs`` and a merge.

    The commit grows the index (20,000 documents on SciFact's 5,183: each
    query's lists about five times longer), so a search after it costs more
    than before it. The rate is half the **smaller** of two sequential
    throughputs through the target: the writer's index before the documents
    are added, and a copy built with them (the index the commit and merge
    leave). So the rung is at most 50% on both sides of the window, and a rise
    inside it is the commit's and the merge's own work, not an index that
    outgrew the rate; ``after`` (the same documents as inside the window, once
    merged) is printed beside ``outside``.
    """
    from weftsearch.documents import Document
    from weftsearch.engine.index import Index

    n = args.commit_docs
    vectors = doc_vectors if arm == "hybrid" else None
    added_keys = [f"load-{i:07d}" for i in range(n)]
    added_texts = [texts[i % len(texts)] for i in range(n)]
    added_vectors = None if vectors is None else vectors[np.arange(n) % len(texts)]
    threads = next((int(k.split(":")[1]) for k in args.target if k.startswith("threads:")), 2)

    grown_path = root / "commit-grown"
    _build_weft(
        grown_path,
        [*keys, *added_keys],
        [*texts, *added_texts],
        None if vectors is None else np.concatenate([vectors, added_vectors]),
    )
    grown = Index.open(grown_path, readonly=True)
    try:
        probe = ThreadTarget(weft_search_function(grown, workload, arm, args.k, args.depth), threads, "weft")
        probe.start()
        try:
            sequential_after = sequential_throughput(probe, len(workload), seconds=args.sequential_seconds)
        finally:
            probe.close()
    finally:
        grown.close()

    path = root / "commit"
    _build_weft(path, keys, texts, vectors)
    index = Index.open(path)
    try:
        target = ThreadTarget(weft_search_function(index, workload, arm, args.k, args.depth), threads, "weft")
        target.start()
        try:
            sequential_before = sequential_throughput(target, len(workload), seconds=args.sequential_seconds)
            rate = min(sequential_before, sequential_after) * 0.5
            print(
                f"[load] commit under load: sequential {sequential_before:,.1f} q/s before the commit, "
                f"{sequential_after:,.1f} q/s on the index it leaves; the rung is half the smaller",
                file=out,
                flush=True,
            )
            print(f"[load] adding {n:,} documents to commit under load", file=out, flush=True)
            index.add_many(
                (
                    Document(key, text, vector=None if added_vectors is None else added_vectors[i])
                    for i, (key, text) in enumerate(zip(added_keys, added_texts, strict=True))
                ),
                progress=False,
            )
            seconds = args.commit_seconds or rung_seconds_for(
                rate, args.rung_seconds, args.min_requests, args.max_rung_seconds
            )
            result = commit_under_load(
                target, index, len(workload), rate, seconds, cap=args.cap, seed=args.seed, progress=out
            )
        finally:
            target.close()
    finally:
        index.close(discard=True)
    result.sequential = {"before": sequential_before, "after": sequential_after}
    print(
        f"commit under load ({target.name}, {arm}, 50% rung = {rate:,.1f} q/s): "
        f"commit of {args.commit_docs:,} "
        f"documents {result.commit_seconds:.2f} s + merge {result.merge_seconds:.2f} s; p50 outside "
        f"{_ms(result.outside['p50'])} -> inside {_ms(result.inside['p50'])} ms; p99 outside "
        f"{_ms(result.outside['p99'])} -> inside {_ms(result.inside['p99'])} ms "
        f"(ratio {result.p99_ratio:.2f}; "
        f"{result.inside_count:,} requests inside, {result.outside_count:,} outside; "
        f"shed {result.rung.shed})\n"
        f"  before the window: p50 {_ms(result.before['p50'])}, p99 {_ms(result.before['p99'])} ms, "
        f"shed {result.shed['before']:,}; inside: shed {result.shed['inside']:,}; after: p50 "
        f"{_ms(result.after['p50'])}, p99 {_ms(result.after['p99'])} ms, shed {result.shed['after']:,} "
        f"(inside p99 / after p99: {result.inside['p99'] / result.after['p99']:.2f})"
    )
    return result


def add_subcommand(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` (``bench load``, ``bench plot``) to the subcommands of a ``weft-search`` parser."""
    bench = commands.add_parser("bench", help="benchmarks that ship with the library (bench load)")
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCH", required=True)
    load = sub.add_parser(
        "load",
        help="an open-loop load ladder (Poisson arrivals, latency from the scheduled time), peer beside",
        description=(
            "Build weft-search (and peer) indexes of a SciFact folder (or of the synthetic corpus) in a "
            "temporary directory, measure each "
            "target's sequential throughput, then drive it with Poisson arrivals at each fraction of it "
            "(--rungs), latency measured from each request's scheduled arrival, an in-flight cap with shed "
            "requests counted; print a table per target and arm. The unloaded denominator is the lowest "
            "open-loop rung."
        ),
    )
    corpus = load.add_mutually_exclusive_group(required=True)
    corpus.add_argument("--data", metavar="DIR", help="SciFact folder (BEIR layout, frozen vectors)")
    corpus.add_argument(
        "--synthetic", type=positive_int, metavar="N",
        help="the shared synthetic corpus of N documents instead (Zipfian tokens, seed 20261203; the hybrid "
        "arm gets random unit vectors of width 384: cost, not quality)",
    )  # fmt: skip
    load.add_argument(
        "--queries", type=positive_int, default=1_000, metavar="N", help="queries of --synthetic (1,000)"
    )
    load.add_argument(
        "--target", action="append", default=None, metavar="KIND",
        help="threads:N, processes:N, processes:NxT, serve:N (weft-search serve --workers N on the built "
        "index, started on a free 127.0.0.1 port and stopped after) or a running server's base URL "
        "http://HOST:PORT (repeatable; default threads:2)",
    )  # fmt: skip
    load.add_argument(
        "--http-path",
        help="the search path of an HTTP target (default: /search, or /v1/search with --http-api weft)",
    )
    load.add_argument(
        "--http-api", choices=tuple(HTTP_APIS), default="generic",
        help="an HTTP target's request body: generic {query, k[, vector]}, or weft (weft-search serve: "
        "{text, k, spec[, vector]})",
    )  # fmt: skip
    load.add_argument(
        "--server-pid", type=positive_int, action="append", metavar="PID",
        help="a process of the HTTP server, whose memory, CPU and faults to measure (repeatable)",
    )  # fmt: skip
    load.add_argument("--arms", default="bm25", help="bm25, hybrid or bm25,hybrid (default bm25)")
    load.add_argument("--no-peer", dest="peer", action="store_false", help="leave out tantivy / LanceDB")
    load.add_argument(
        "--rungs", type=positive_list(float, "0.125,0.5,1"), default=list(DEFAULT_RUNGS), metavar="F,F,..."
    )
    load.add_argument("--rung-seconds", type=positive_float, default=60.0, metavar="S")
    load.add_argument("--min-requests", type=positive_int, default=5_000, metavar="N")
    load.add_argument(
        "--max-rung-seconds", type=positive_float, default=None, metavar="S",
        help="lengthen a rung for --min-requests up to S seconds at most (default: no bound)",
    )  # fmt: skip
    load.add_argument("--sequential-seconds", type=positive_float, default=10.0, metavar="S")
    load.add_argument(
        "--denominator", choices=("max", "target", "direct"), default="max",
        help="the sequential throughput the rungs are fractions of: the larger of one at a time through "
        "the target and the bare search in a tight loop (max, the default), or either alone",
    )  # fmt: skip
    load.add_argument("--repetitions", type=positive_int, default=3, metavar="N", help="of the headline rung")
    load.add_argument("--headline", type=positive_float, default=1.0, metavar="F", help="default 1.0 (100%%)")
    load.add_argument("--cap", type=positive_int, default=DEFAULT_CAP, metavar="N", help="in-flight cap (32)")
    load.add_argument("--seed", type=int, default=20261203)
    load.add_argument("--k", type=positive_int, default=10)
    load.add_argument("--depth", type=positive_int, default=100, help="per-stream depth of the hybrid arm")
    load.add_argument("--progress-seconds", type=positive_float, default=5.0, metavar="S")
    load.add_argument(
        "--no-calibrate", dest="calibrate", action="store_false", help="skip the no-op driver run"
    )
    load.add_argument("--commit-under-load", action="store_true", help="one commit + merge at the 50%% rung")
    load.add_argument("--commit-docs", type=positive_int, default=20_000, metavar="N")
    load.add_argument(
        "--commit-seconds", type=positive_float, metavar="S",
        help="length of the commit-under-load rung (default: as the other rungs); the commit starts "
        "a third of the way in",
    )  # fmt: skip
    load.add_argument(
        "--workdir", metavar="DIR", help="where the temporary indexes go (default: the system's)"
    )
    load.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    load.add_argument(
        "--plot", metavar="FILE.png", help=f"latency against offered load (needs {PLOT_INSTALL_HINT})"
    )
    load.set_defaults(handler=_load_handler)
    plot = sub.add_parser(
        "plot",
        help="draw the load ladder's plot again from the JSON of bench load --json",
        description="Draw latency against offered load (bench load --plot's figure) from one or more JSON "
        f"files bench load --json wrote, their ladders together (needs {PLOT_INSTALL_HINT}).",
    )
    plot.add_argument("json", nargs="+", metavar="FILE.json", help="bench load --json output")
    plot.add_argument("--out", required=True, metavar="FILE.png", help="the PNG to write")
    plot.add_argument("--title", default="", help="added to each panel's title")
    plot.set_defaults(handler=_plot_handler)


def _plot_handler(args: argparse.Namespace) -> int:
    results = [ladder for path in args.json for ladder in ladders_from_json(path)]
    if not results:
        raise InvalidParameterError(f"no ladders in {', '.join(args.json)}")
    plot_ladder(results, args.out, title=args.title)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _load_handler(args: argparse.Namespace) -> int:
    if args.target is None:
        args.target = ["threads:2"]
    if args.progress_seconds > MAX_PROGRESS_SECONDS:
        raise InvalidParameterError(
            f"--progress-seconds {args.progress_seconds:g}: a progress line comes at least every "
            f"{MAX_PROGRESS_SECONDS:g} s"
        )
    if args.headline not in args.rungs:
        raise InvalidParameterError(f"--headline {args.headline} is not one of --rungs {args.rungs}")
    return load_command(args)
