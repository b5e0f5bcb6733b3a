r"""The open-loop driver: one rung of Poisson arrivals, measured from each scheduled arrival.

A latency measured in a tight loop says little about a service: what a user
meets is the latency at a given arrival rate, including the time a request
waited. The driver (:func:`run_rung`) sends requests to a *target*
(:class:`Target`, :mod:`weftsearch.bench.targets`) on a schedule fixed in
advance, whatever the target does, and measures each request from the moment
it was **scheduled** to arrive.

* **Poisson arrivals** (:func:`poisson_schedule`): gaps drawn from an
  exponential distribution of mean ``1 / rate``, from a seeded
  :class:`numpy.random.Generator`; the query of each arrival is drawn from the
  same seed. Same seed, same rate, same duration: the same schedule to the bit.
* **Latency from the scheduled time** (the coordinated-omission correction, as
  wrk2 makes it): ``latency = completion - scheduled arrival``. A request the
  driver dispatched late, or that waited in a queue of the target, carries that
  wait in its latency. **Service time** (``completion - the moment a worker
  started it``) is reported beside it. For the HTTP target, service time is the
  client's request time (send to response), which includes any queueing inside
  the server.
* **In-flight cap** (default 32): an arrival that finds ``cap`` requests in
  flight is **shed** and counted, never delayed; a shed request has no latency.
  Requests still unfinished ``drain_seconds`` after the last arrival are
  counted as **unfinished** and recorded with the latency they had reached (a
  lower bound), not dropped.
* Latencies go into HDR histograms (:mod:`hdrh`, microseconds, 3 significant
  digits) per rung: p50, p90, p99, p99.9 and max, for latency and for service
  time.
* Per rung the target's processes are measured through ``/proc``
  (:mod:`weftsearch.bench.resources`). For an in-process target that is this
  process (the driver included); for a multi-process target the **sum over its
  workers** of each worker's peak, and their summed CPU and faults (the driver
  process is not included).
* A progress line on stderr at least every 10 s (``progress_seconds``, default 5).
* The dispatcher's own lag (``dispatched - scheduled``) is kept for every
  request and reported (p50/p99/max); :func:`weftsearch.bench.ladder.calibrate`
  runs the highest rung against a target that does nothing, so the driver's
  overhead is a measured figure beside the results.
"""

from __future__ import annotations

import collections
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import numpy as np
from numpy.typing import NDArray

from weftsearch.bench.resources import ProcessResources
from weftsearch.errors import InvalidParameterError, MissingDependencyError

__all__ = [
    "DEFAULT_CAP",
    "MAX_PROGRESS_SECONDS",
    "MAX_REASON",
    "RUNG_START_DELAY",
    "Done",
    "RungResult",
    "Schedule",
    "Target",
    "direct_throughput",
    "error_reason",
    "hdr_histogram_class",
    "percentiles",
    "poisson_schedule",
    "run_rung",
    "sequential_throughput",
]

#: Requests in flight at most; an arrival that finds this many is shed.
DEFAULT_CAP = 32
#: A rung prints a progress line at least this often (seconds), so it never looks hung.
MAX_PROGRESS_SECONDS = 10.0
#: Histogram range: 1 microsecond to one hour, 3 significant digits.
_HIST_MAX_US = 3_600_000_000
_US = 1e6
_PENDING, _OK, _ERROR, _SHED = 0, 1, 2, 3
#: A rung's schedule starts this long (seconds) after :func:`run_rung` is called.
RUNG_START_DELAY = 0.05


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


#: Called by a target when a request completes: (request, service start, service end, error);
#: times from :func:`time.perf_counter` (CLOCK_MONOTONIC on Linux, shared across processes);
#: ``error`` is ``None`` for a success, else why it failed (:func:`error_reason`).
Done = Callable[[int, float, float, str | None], None]

#: Longest error reason kept (characters): a reason names a kind of failure, not a whole report.
MAX_REASON = 160


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


# ---------------------------------------------------------------------- one rung


def hdr_histogram_class() -> Any:
    """The HDR histogram class, or a :class:`MissingDependencyError` naming the extra."""
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError:
        raise MissingDependencyError(
            "the load ladder keeps latencies in HDR histograms: pip install 'weft-search[bench]'"
        ) from None
    return HdrHistogram


def percentiles(values_s: NDArray[np.float64]) -> dict[str, float]:
    """p50, p90, p99, p99.9 and max in milliseconds, through an HDR histogram (microseconds)."""
    HdrHistogram = hdr_histogram_class()  # noqa: N806 (a class)

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


class _Rung:
    """One rung in flight: each request's times and state, the in-flight cap and the counters.

    The dispatcher thread writes ``dispatched``, ``sent`` and ``shed``; :meth:`done` (called
    from a target's threads) writes the rest. Each request's slot is written by one thread.
    """

    def __init__(self, n: int, cap: int) -> None:
        """Room for ``n`` scheduled requests, at most ``cap`` in flight."""
        self.starts = np.zeros(n)
        self.ends = np.zeros(n)
        self.status = np.zeros(n, dtype=np.int8)
        self.dispatched = np.zeros(n)
        self.slots = threading.BoundedSemaphore(cap)
        self.finished: list[int] = []
        self.reasons: collections.Counter[str] = collections.Counter()
        self.sent = 0
        self.shed = 0
        self.dispatching_over = threading.Event()
        self.all_done = threading.Event()

    def done(self, request: int, started: float, ended: float, error: str | None) -> None:
        """The :data:`Done` callback: record the request's times and outcome, free its slot."""
        self.starts[request] = started
        self.ends[request] = ended
        if error is None:
            self.status[request] = _OK
        else:
            self.status[request] = _ERROR
            self.reasons[error] += 1
        self.finished.append(request)
        self.slots.release()
        if len(self.finished) == self.sent and self.dispatching_over.is_set():
            self.all_done.set()

    def drain(self, seconds: float) -> None:
        """After the last arrival: wait up to ``seconds`` for the requests still in flight."""
        self.dispatching_over.set()
        if len(self.finished) == self.sent:
            self.all_done.set()
        self.all_done.wait(timeout=seconds)


def _check_rung_options(cap: int, progress_seconds: float) -> None:
    """Refuse a cap or a progress interval :func:`run_rung` cannot honour."""
    if cap <= 0:
        raise InvalidParameterError(f"the in-flight cap must be positive, got {cap}")
    if not 0 < progress_seconds <= MAX_PROGRESS_SECONDS:
        raise InvalidParameterError(
            f"progress lines come at least every {MAX_PROGRESS_SECONDS:g} s; got {progress_seconds!r}"
        )


def _start_progress(
    rung: _Rung,
    resources: ProcessResources,
    schedule: Schedule,
    name: str,
    origin: float,
    out: TextIO,
    progress_seconds: float,
) -> tuple[threading.Thread, threading.Event]:
    """A thread that samples the resident sets every 0.1 s and prints a progress line; its stop event."""
    stop = threading.Event()
    n = len(schedule)

    def sampler() -> None:
        next_line = time.perf_counter() + progress_seconds
        while not stop.wait(0.1):
            resources.sample()
            now = time.perf_counter()
            if now >= next_line:
                next_line = now + progress_seconds
                elapsed = now - origin
                print(
                    f"[load] {name} {schedule.rate:,.1f} q/s: {elapsed:,.1f}/{schedule.seconds:,.1f} s, "
                    f"sent {rung.sent:,} of {n:,}, done {len(rung.finished):,}, shed {rung.shed:,}, "
                    f"in flight {rung.sent - len(rung.finished)}",
                    file=out,
                    flush=True,
                )

    watcher = threading.Thread(target=sampler, name="load-progress", daemon=True)
    watcher.start()
    return watcher, stop


def _run_event(origin: float, at: float, action: Callable[[], None]) -> threading.Thread:
    """Sleep until offset ``at`` of the rung, then start ``action`` in a thread of its own."""
    delay = origin + at - time.perf_counter()
    if delay > 0:
        time.sleep(delay)
    helper = threading.Thread(target=action, name="load-event", daemon=True)
    helper.start()
    return helper


def _dispatch(
    target: Target,
    schedule: Schedule,
    rung: _Rung,
    origin: float,
    events: Sequence[tuple[float, Callable[[], None]]],
) -> list[threading.Thread]:
    """Submit every arrival at its scheduled time (or shed it at the cap); start the events on time.

    Returns the events' threads (events after the last arrival are started too).
    """
    helpers: list[threading.Thread] = []
    pending_events = sorted(events, key=lambda e: e[0])
    offsets = schedule.offsets.tolist()
    items = schedule.items.tolist()
    clock, sleep = time.perf_counter, time.sleep
    status, dispatched, slots, done = rung.status, rung.dispatched, rung.slots, rung.done
    for request in range(len(offsets)):
        due = origin + offsets[request]
        while pending_events and origin + pending_events[0][0] <= due:
            helpers.append(_run_event(origin, *pending_events.pop(0)))
        delay = due - clock()
        if delay > 50e-6:
            sleep(delay)
        dispatched[request] = clock()
        if not slots.acquire(blocking=False):
            status[request] = _SHED
            rung.shed += 1
            continue
        rung.sent += 1
        target.submit(request, items[request], done)
    helpers.extend(_run_event(origin, at, action) for at, action in pending_events)
    return helpers


def _lag_ms(lag: NDArray[np.float64]) -> dict[str, float]:
    """The dispatcher's lateness (seconds per request) as p50, p99 and max in milliseconds."""
    if not lag.size:
        return {"p50": math.nan, "p99": math.nan, "max": math.nan}
    return {
        "p50": float(np.percentile(lag, 50)) * 1e3,
        "p99": float(np.percentile(lag, 99)) * 1e3,
        "max": float(lag.max()) * 1e3,
    }


def _rung_result(
    rung: _Rung,
    schedule: Schedule,
    origin: float,
    cut: float,
    costs: tuple[float, float, int],
    name: str,
    fraction: float | None,
) -> RungResult:
    """The rung's figures: latencies from the scheduled arrivals, unfinished requests at ``cut``."""
    status, starts, ends = rung.status, rung.starts, rung.ends
    scheduled_at = origin + schedule.offsets
    ok_mask = status == _OK
    pending_mask = status == _PENDING
    latencies = np.concatenate([ends[ok_mask] - scheduled_at[ok_mask], cut - scheduled_at[pending_mask]])
    completed_mask = ok_mask | (status == _ERROR)
    completed = int(np.count_nonzero(completed_mask))
    last = float(ends[completed_mask].max()) if completed_mask.any() else cut
    sent_mask = status != _SHED
    peak, cpu, faults = costs
    return RungResult(
        label=name,
        fraction=fraction,
        offered=schedule.rate,
        seconds=schedule.seconds,
        scheduled=len(schedule),
        completed=completed,
        errors=int(np.count_nonzero(status == _ERROR)),
        shed=rung.shed,
        unfinished=int(np.count_nonzero(pending_mask)),
        achieved=completed / max(last - origin, 1e-9),
        latency=percentiles(latencies),
        service=percentiles(ends[ok_mask] - starts[ok_mask]),
        lag=_lag_ms(rung.dispatched[sent_mask] - scheduled_at[sent_mask]),
        peak_rss_mb=peak,
        cpu_seconds=cpu,
        major_faults=faults,
        seed=schedule.seed,
        error_reasons=dict(rung.reasons.most_common()),
        arrivals=schedule.offsets[ok_mask],
        latencies=ends[ok_mask] - scheduled_at[ok_mask],
        shed_arrivals=schedule.offsets[status == _SHED],
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
    own when the rung reaches its offset (commit under load). The rung's
    offsets count from :data:`RUNG_START_DELAY` seconds after the call.

    Raises:
        InvalidParameterError: ``cap`` is not positive.

    """
    _check_rung_options(cap, progress_seconds)
    rung = _Rung(len(schedule), cap)
    resources = ProcessResources(target.pids())
    origin = time.perf_counter() + RUNG_START_DELAY
    name = label or target.name
    out = sys.stderr if progress is None else progress
    watcher, stop = _start_progress(rung, resources, schedule, name, origin, out, progress_seconds)
    try:
        helpers = _dispatch(target, schedule, rung, origin, events)
        rung.drain(drain_seconds)
    finally:
        stop.set()
        watcher.join()
    for helper in helpers:
        helper.join()
    cut = time.perf_counter()
    return _rung_result(rung, schedule, origin, cut, resources.finish(), name, fraction)


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
