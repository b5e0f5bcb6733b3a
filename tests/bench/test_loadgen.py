"""Tests of ``weft-search bench load``: the open-loop driver, its targets, the ladder and the command.

No timing assertions: where real time is involved, only bounds that hold on any
machine (a sleep lasts at least its length; a request that waited behind others
waited at least their service).
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from tests.bench.conftest import QUICK_LOAD
from weftsearch import Document, Index
from weftsearch import cli as weft_cli
from weftsearch.bench import driver, loadgen, peers
from weftsearch.bench.driver import (
    MAX_REASON,
    Done,
    RungResult,
    Schedule,
    error_reason,
    poisson_schedule,
    run_rung,
)
from weftsearch.bench.ladder import (
    DEFAULT_RUNGS,
    LadderResult,
    commit_under_load,
    ladder_rates,
    run_ladder,
    rung_seconds_for,
)
from weftsearch.bench.report import format_ladder, plot_ladder
from weftsearch.bench.targets import HttpTarget, NoopTarget, ProcessTarget, ThreadTarget
from weftsearch.bench.workloads import SleepSearcher, WeftSearcher, Workload
from weftsearch.errors import InvalidParameterError, MissingDependencyError

#: The repository's peer adapters (outside the installed package).
PEERS_DIR = Path(__file__).resolve().parents[2] / "bench" / "peers"

# ---------------------------------------------------------------------- the schedule


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    a = poisson_schedule(500.0, 4.0, 7, 30)
    b = poisson_schedule(500.0, 4.0, 7, 30)
    c = poisson_schedule(500.0, 4.0, 8, 30)
    assert a.offsets.tobytes() == b.offsets.tobytes()
    assert a.items.tobytes() == b.items.tobytes()
    assert a.offsets.tobytes() != c.offsets.tobytes()
    assert bool(np.all(np.diff(a.offsets) > 0))
    assert a.offsets[0] >= 0 and a.offsets[-1] < 4.0
    assert a.items.min() >= 0 and a.items.max() < 30


@pytest.mark.parametrize(("rate", "seconds", "seed"), [(1000.0, 20.0, 1), (37.5, 400.0, 2), (5000.0, 4.0, 3)])
def test_the_schedule_is_poisson_with_the_right_mean_rate(rate: float, seconds: float, seed: int) -> None:
    schedule = poisson_schedule(rate, seconds, seed, 10)
    expected = rate * seconds
    # The count of a Poisson process has variance equal to its mean: within 5 sigma.
    assert abs(len(schedule) - expected) < 5 * np.sqrt(expected)
    gaps = np.diff(np.concatenate([[0.0], schedule.offsets]))
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)
    # Exponential gaps: the Kolmogorov-Smirnov test does not reject (fixed seed: deterministic).
    assert stats.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue > 0.001
    # Counts in unit windows: Poisson, so the dispersion index (variance / mean) is near 1.
    counts = np.bincount((schedule.offsets * rate / 10).astype(int))  # windows of 10 expected arrivals
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=0.2)
    # Queries are drawn uniformly from the workload.
    assert set(np.unique(schedule.items).tolist()) == set(range(10))


@pytest.mark.parametrize(
    ("rate", "seconds", "items"),
    [(0.0, 1.0, 1), (-1.0, 1.0, 1), (float("nan"), 1.0, 1), (1.0, 0.0, 1), (1.0, 1.0, 0)],
)
def test_a_bad_schedule_is_refused(rate: float, seconds: float, items: int) -> None:
    with pytest.raises(InvalidParameterError):
        poisson_schedule(rate, seconds, 0, items)


# ---------------------------------------------------------------------- latency from the scheduled time


def _fixed(offsets: list[float], items: list[int] | None = None) -> Schedule:
    values = np.asarray(offsets, dtype=np.float64)
    chosen = np.zeros(values.size, dtype=np.int64) if items is None else np.asarray(items, dtype=np.int64)
    return Schedule(1.0, float(values[-1]) + 1e-3, 0, values, chosen)


class ScriptedTarget:
    """Reports each request as started ``queued`` s after it was submitted and served in ``service`` s.

    The times it reports are made up, so the driver's arithmetic is tested exactly.
    """

    def __init__(self, queued: float, service: float) -> None:
        self.queued, self.service = queued, service

    name = "scripted"
    rss_scope = "this process"

    def start(self) -> None:
        pass

    def submit(self, request: int, item: int, done: Done) -> None:
        import time

        started = time.perf_counter() + self.queued
        done(request, started, started + self.service, None)

    def pids(self) -> list[int]:
        import os

        return [os.getpid()]

    def close(self) -> None:
        pass


def test_latency_counts_the_queueing_delay_and_service_time_does_not() -> None:
    result = run_rung(
        ScriptedTarget(queued=0.5, service=0.002), _fixed([0.0, 0.01, 0.02, 0.03]), progress=io.StringIO()
    )
    assert result.completed == 4 and result.shed == 0
    # Service: exactly 2 ms (to the histogram's 3 significant digits).
    assert result.service["p50"] == pytest.approx(2.0, rel=1e-3)
    assert result.service["max"] == pytest.approx(2.0, rel=1e-3)
    # Latency: at least the 500 ms of queueing plus the service (and any dispatch lateness).
    assert result.latency["p50"] >= 502.0 * (1 - 1e-3)
    assert bool(np.all(result.latencies >= 0.502 - 1e-9))


def test_a_sleeping_target_shows_its_queue_in_latency_not_in_service_time() -> None:
    # One thread, ten requests 1 ms apart, each sleeping 20 ms: the k-th waits for the k-1 before it.
    target = ThreadTarget(SleepSearcher(0.02), 1, "sleep")
    target.start()
    try:
        result = run_rung(target, _fixed([i * 0.001 for i in range(10)]), progress=io.StringIO())
    finally:
        target.close()
    assert result.completed == 10 and result.shed == 0
    assert result.service["p50"] >= 20.0 * (1 - 1e-3)  # a sleep lasts at least its length
    # The last request was scheduled at 9 ms and could start only after 9 sleeps of 20 ms.
    assert result.latency["max"] >= (10 * 20.0 - 9.0) * (1 - 1e-3)
    order = np.argsort(result.arrivals)
    latencies = result.latencies[order]
    for position, latency in enumerate(latencies):
        assert latency >= (position + 1) * 0.02 - position * 0.001 - 1e-6


# ---------------------------------------------------------------------- the cap


class HoldingTarget:
    """Holds every request until :meth:`release` answers them all."""

    name = "holding"
    rss_scope = "this process"

    def __init__(self) -> None:
        self.held: list[tuple[int, Done]] = []

    def start(self) -> None:
        pass

    def submit(self, request: int, item: int, done: Done) -> None:
        self.held.append((request, done))

    def release(self) -> None:
        import time

        now = time.perf_counter()
        for request, done in self.held:
            done(request, now, now, None)
        self.held.clear()

    def pids(self) -> list[int]:
        import os

        return [os.getpid()]

    def close(self) -> None:
        pass


def test_the_cap_sheds_and_counts_what_finds_it_full() -> None:
    target = HoldingTarget()
    schedule = _fixed([i * 0.002 for i in range(10)])
    result = run_rung(target, schedule, cap=4, events=[(0.1, target.release)], progress=io.StringIO())
    assert result.scheduled == 10
    assert result.completed == 4
    assert result.shed == 6
    assert result.unfinished == 0
    assert result.arrivals.size == 4  # shed requests have no latency


def test_requests_still_running_at_the_end_are_counted_and_recorded_not_dropped() -> None:
    target = HoldingTarget()
    result = run_rung(target, _fixed([0.0, 0.001, 0.002]), cap=2, drain_seconds=0.05, progress=io.StringIO())
    assert (result.completed, result.shed, result.unfinished) == (0, 1, 2)
    assert result.latency["max"] >= 50.0 * (1 - 1e-3)  # recorded with the age they had reached
    target.release()


def test_a_cap_below_one_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="cap"):
        run_rung(HoldingTarget(), _fixed([0.0]), cap=0)


# ---------------------------------------------------------------------- progress


def test_a_progress_line_appears_while_a_rung_runs() -> None:
    stream = io.StringIO()
    target = ThreadTarget(SleepSearcher(0.0), 1, "sleep")
    target.start()
    try:
        run_rung(target, poisson_schedule(200.0, 0.6, 1, 1), progress=stream, progress_seconds=0.05)
    finally:
        target.close()
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("[load]")]
    assert lines
    assert all("sent" in line and "shed" in line and "in flight" in line for line in lines)


@pytest.mark.parametrize("seconds", [0.0, 10.5, 60.0])
def test_progress_lines_cannot_be_spaced_beyond_ten_seconds(seconds: float) -> None:
    with pytest.raises(InvalidParameterError, match="at least every 10 s"):
        run_rung(HoldingTarget(), _fixed([0.0]), progress_seconds=seconds)


def test_the_command_refuses_progress_lines_spaced_beyond_ten_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert weft_cli.main(["bench", "load", "--data", "x", "--progress-seconds", "30"]) == 2
    assert "--progress-seconds 30" in capsys.readouterr().err


# ---------------------------------------------------------------------- ladder math


def test_rates_are_fractions_of_the_measured_sequential_throughput() -> None:
    assert DEFAULT_RUNGS == (0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
    assert ladder_rates(1000.0, DEFAULT_RUNGS) == [125.0, 250.0, 500.0, 750.0, 1000.0, 1250.0, 1500.0]
    with pytest.raises(InvalidParameterError):
        ladder_rates(0.0, DEFAULT_RUNGS)
    with pytest.raises(InvalidParameterError):
        ladder_rates(100.0, [0.5, -1.0])
    assert rung_seconds_for(1000.0, 60.0, 5000) == 60.0
    assert rung_seconds_for(10.0, 60.0, 5000) == 500.0
    # Bounded: 5,000 requests or 60 s, whichever comes first, never below the rung length.
    assert rung_seconds_for(10.0, 20.0, 5000, max_rung_seconds=60.0) == 60.0
    assert rung_seconds_for(200.0, 20.0, 5000, max_rung_seconds=60.0) == 25.0
    assert rung_seconds_for(1000.0, 20.0, 5000, max_rung_seconds=60.0) == 20.0
    assert rung_seconds_for(10.0, 90.0, 5000, max_rung_seconds=60.0) == 90.0


def _rung(fraction: float, offered: float, p50: float, rss: float) -> RungResult:
    percentiles = {"p50": p50, "p90": p50, "p99": p50, "p99.9": p50, "max": p50}
    return RungResult(
        label="x", fraction=fraction, offered=offered, seconds=1.0, scheduled=10, completed=10, errors=0,
        shed=0, unfinished=0, achieved=offered, latency=percentiles, service=percentiles,
        lag={"p50": 0.0, "p99": 0.0, "max": 0.0}, peak_rss_mb=rss, cpu_seconds=0.0, major_faults=0, seed=0,
    )  # fmt: skip


def test_the_unloaded_denominator_is_the_lowest_open_loop_rung() -> None:
    # Rungs out of order, and a sequential throughput whose latency is not a rung at all.
    rungs = [_rung(1.0, 800.0, 4.0, 300.0), _rung(0.25, 200.0, 2.0, 100.0), _rung(0.5, 400.0, 3.0, 150.0)]
    ladder = LadderResult("t", "bm25", "e", "this process", 800.0, rungs, [rungs[0]], 1.0)
    assert ladder.lowest is rungs[1]
    record = ladder.to_dict()
    by_fraction = {r["fraction"]: r for r in record["rungs"]}
    assert by_fraction[1.0]["p50_over_lowest"] == 2.0
    assert by_fraction[1.0]["rss_over_lowest"] == 3.0
    assert by_fraction[0.25]["p50_over_lowest"] == 1.0
    assert "lowest open-loop rung (200.0 q/s)" in record["unloaded_denominator"]
    table = format_ladder(ladder)
    assert "lowest open-loop rung, 200.0 q/s" in table
    assert "2.00x" in table and "3.00x" in table
    assert "errors at" not in table


def test_the_table_says_why_requests_failed() -> None:
    failing = dataclasses.replace(_rung(1.25, 1000.0, 5.0, 100.0), errors=3,
                                  error_reasons={"HTTP 503: busy": 2, "ReadTimeout": 1})  # fmt: skip
    ladder = LadderResult("t", "bm25", "e", "this process", 800.0, [_rung(0.25, 200.0, 2.0, 100.0), failing],
                          [failing], 1.25)  # fmt: skip
    assert "errors at 125.0%: 2 x HTTP 503: busy; 1 x ReadTimeout" in format_ladder(ladder)


def test_the_denominator_is_the_larger_of_through_the_target_and_the_bare_search() -> None:
    # A pool whose every request sleeps 5 ms, and a bare function that does not: the rungs are
    # fractions of whichever sequential figure is larger, and both are reported.
    calls: list[int] = []
    target = ThreadTarget(SleepSearcher(0.005), 1, "sleep")
    target.start()
    try:
        ladder = run_ladder(
            target, 3, arm="bm25", engine="e", fractions=(0.25,), headline=0.25, rung_seconds=0.2,
            min_requests=1, sequential_seconds=0.2, repetitions=1, direct=calls.append,
            progress=io.StringIO(),
        )  # fmt: skip
    finally:
        target.close()
    assert calls  # the bare function was called in the tight loop
    assert ladder.through_target_qps is not None and ladder.direct_qps is not None
    assert ladder.sequential_qps == max(ladder.through_target_qps, ladder.direct_qps)
    assert ladder.rungs[0].offered == pytest.approx(0.25 * ladder.sequential_qps)
    record = ladder.to_dict()
    assert record["sequential_direct_qps"] == ladder.direct_qps
    assert "tight loop" in format_ladder(ladder)


@pytest.mark.parametrize(("choice", "direct"), [("fastest", None), ("direct", None)])
def test_an_unknown_or_impossible_denominator_is_refused(choice: str, direct: Any) -> None:
    with pytest.raises(InvalidParameterError, match="sequential_from"):
        run_ladder(HoldingTarget(), 1, arm="bm25", engine="e", sequential_from=choice, direct=direct)


def test_the_headline_must_be_one_of_the_rungs() -> None:
    with pytest.raises(InvalidParameterError, match="headline"):
        run_ladder(
            HoldingTarget(), 1, arm="bm25", engine="e", fractions=(0.5,), headline=1.0, sequential=10.0
        )


# ---------------------------------------------------------------------- end to end on a small index


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Workload]:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(200)]
    path = tmp_path_factory.mktemp("load") / "index"
    with Index.create(path, "simple", vector_dim=8) as index:
        index.add_many(
            (
                Document(
                    f"d{i:04d}",
                    " ".join(rng.choice(words, 15)),
                    vector=rng.standard_normal(8).astype(np.float32),
                )
                for i in range(500)
            ),
            progress=False,
        )
        index.commit()
    texts = tuple(" ".join(rng.choice(words, 3)) for _ in range(40))
    return str(path), Workload(texts, rng.standard_normal((40, 8)).astype(np.float32))


@pytest.mark.parametrize("arm", ["bm25", "hybrid"])
def test_a_tiny_in_process_ladder_runs_end_to_end(
    small_index: tuple[str, Workload], arm: str, tmp_path: Path
) -> None:
    path, workload = small_index
    target = ThreadTarget(WeftSearcher(path, workload, arm), 2, "weft")
    target.start()
    stream = io.StringIO()
    try:
        ladder = run_ladder(
            target, len(workload), arm=arm, engine="weft-search", fractions=(0.25, 0.5, 1.0),
            rung_seconds=0.3, min_requests=1, sequential_seconds=0.3, repetitions=2,
            absolute_rates=[50.0], progress=stream,
        )  # fmt: skip
    finally:
        target.close()
    assert ladder.sequential_qps > 0
    assert [r.fraction for r in ladder.rungs] == [0.25, 0.5, 1.0]
    assert [r.offered for r in ladder.rungs] == pytest.approx(
        [ladder.sequential_qps * f for f in (0.25, 0.5, 1.0)]
    )
    assert len(ladder.repetitions) == 2 and ladder.repetitions[0] is ladder.rungs[2]
    assert ladder.repetitions[1].seed != ladder.repetitions[0].seed
    assert [r.offered for r in ladder.absolute] == [50.0]
    # At another target's rate i, the very schedule that target's rung i had (seed + i).
    assert ladder.absolute[0].seed == ladder.rungs[0].seed
    for rung in [*ladder.rungs, *ladder.repetitions, *ladder.absolute]:
        assert rung.completed + rung.shed + rung.unfinished == rung.scheduled
        assert rung.errors == 0
        assert rung.peak_rss_mb > 0 and rung.cpu_seconds >= 0 and rung.major_faults >= 0
    json.dumps(ladder.to_dict(), allow_nan=True)
    assert "sequential throughput" in format_ladder(ladder)
    plot = tmp_path / "ladder.png"
    plot_ladder([ladder], plot)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def no_leftover_children() -> Iterator[None]:
    """Stop multiprocessing's resource tracker afterwards if this test started it.

    Spawning a worker starts the tracker, a child of this process that outlives
    the workers; other tests (tests/engine/test_ingest.py) check that this
    process has no children left.
    """
    from multiprocessing import resource_tracker

    tracker: Any = resource_tracker._resource_tracker
    running_before = tracker._fd is not None
    yield
    if not running_before:
        tracker._stop()


def test_a_process_target_answers_through_its_workers(
    small_index: tuple[str, Workload], no_leftover_children: None
) -> None:
    path, workload = small_index
    target = ProcessTarget(WeftSearcher(path, workload, "bm25"), 2)
    target.start()
    try:
        assert len(target.pids()) == 2
        result = run_rung(target, poisson_schedule(100.0, 0.3, 5, len(workload)), progress=io.StringIO())
    finally:
        target.close()
    assert result.completed == result.scheduled - result.shed
    assert result.errors == 0
    assert result.peak_rss_mb > 0
    assert "sum over 2 worker processes" in target.rss_scope
    # Each worker stopped when told to (not terminated after a timeout: closing a pipe the
    # collector thread is polling does not reach the worker as EOF).
    assert target.exit_codes == [0, 0]


def test_a_searcher_that_fails_counts_as_an_error(small_index: tuple[str, Workload]) -> None:
    path, workload = small_index
    target = ThreadTarget(WeftSearcher(path, workload, "hybrid"), 1)
    target.start()
    try:
        result = run_rung(target, _fixed([0.0, 0.001], items=[0, 99]), progress=io.StringIO())
    finally:
        target.close()
    assert (result.completed, result.errors) == (2, 1)
    # Why it failed is recorded, not only that it did (item 99 is past the workload's end).
    ((reason, count),) = result.error_reasons.items()
    assert count == 1 and reason.startswith("IndexError")
    assert result.to_dict()["error_reasons"] == {reason: 1}


def test_a_worker_process_sends_the_reason_of_a_failure(
    small_index: tuple[str, Workload], no_leftover_children: None
) -> None:
    path, workload = small_index
    target = ProcessTarget(WeftSearcher(path, workload, "bm25"), 1)
    target.start()
    try:
        result = run_rung(target, _fixed([0.0, 0.001, 0.002], items=[0, 99, 98]), progress=io.StringIO())
    finally:
        target.close()
    assert (result.completed, result.errors) == (3, 2)
    ((reason, count),) = result.error_reasons.items()
    assert count == 2 and reason.startswith("IndexError")


def test_an_error_reason_is_one_bounded_line() -> None:
    reason = error_reason(ValueError("first line\n  second line " + "x" * 500))
    assert reason.startswith("ValueError: first line second line x")
    assert "\n" not in reason and len(reason) == MAX_REASON
    assert error_reason(KeyboardInterrupt()) == "KeyboardInterrupt"


# ---------------------------------------------------------------------- the HTTP target


class _Handler(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]]
    status = 200

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        type(self).bodies.append({"path": self.path, **body})
        payload = json.dumps({"hits": [body["query"]]}).encode()
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"bodies": [], "status": 200})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_http_target_sends_every_request_to_a_local_server(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    workload = Workload(("alpha beta", "gamma"), np.ones((2, 3), dtype=np.float32))
    target = HttpTarget(url, workload, k=7, hybrid=True)
    target.start()
    try:
        result = run_rung(target, _fixed([i * 0.002 for i in range(20)], items=[i % 2 for i in range(20)]),
                          progress=io.StringIO())  # fmt: skip
    finally:
        target.close()
    assert (result.completed, result.errors, result.shed) == (20, 0, 0)
    assert len(handler.bodies) == 20
    assert {b["query"] for b in handler.bodies} == {"alpha beta", "gamma"}
    assert all(
        b["path"] == "/search" and b["k"] == 7 and b["vector"] == [1.0, 1.0, 1.0] for b in handler.bodies
    )


def test_an_http_error_status_counts_as_an_error(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.status = 503
    target = HttpTarget(url, Workload(("q",)))
    target.start()
    try:
        result = run_rung(target, _fixed([0.0, 0.001, 0.002]), progress=io.StringIO())
    finally:
        target.close()
    assert (result.completed, result.errors) == (3, 3)
    assert "vector" not in handler.bodies[0]
    # The status and the start of the body are the reason; the table prints it.
    assert result.error_reasons == {'HTTP 503: {"hits": ["q"]}': 3}


# ---------------------------------------------------------------------- the command


def test_the_command_is_wired_with_the_documented_defaults() -> None:
    args = weft_cli.build_parser().parse_args(["bench", "load", "--data", "somewhere"])
    assert args.handler is loadgen._load_handler
    assert args.rungs == list(DEFAULT_RUNGS)
    assert (args.rung_seconds, args.min_requests, args.cap, args.repetitions, args.headline) == (
        60.0, 5000, 32, 3, 1.0,
    )  # fmt: skip
    assert args.peer and args.calibrate and not args.commit_under_load
    assert args.denominator == "max"
    assert args.max_rung_seconds is None


def test_a_headline_outside_the_rungs_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    status = weft_cli.main(["bench", "load", "--data", "x", "--rungs", "0.5,1", "--headline", "0.75"])
    assert status == 2
    assert "--headline 0.75" in capsys.readouterr().err


@pytest.mark.data
@pytest.mark.slow
def test_the_command_on_scifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "scifact"
    if not (data / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {data}")
    pytest.importorskip("tantivy", reason="the BM25 peer needs the bench extra")
    out = tmp_path / "load.json"
    status = weft_cli.main(
        ["bench", "load", "--data", str(data), "--target", "threads:1", "--rungs", "0.5,1",
         "--rung-seconds", "0.5", "--min-requests", "1", "--sequential-seconds", "0.5", "--repetitions", "2",
         "--json", str(out), "--plot", str(tmp_path / "p.png")]
    )  # fmt: skip
    assert status == 0
    record = json.loads(out.read_text())
    engines = [ladder["engine"] for ladder in record["ladders"]]
    assert engines == ["weft-search", "tantivy"]
    assert "lowest open-loop rung" in capsys.readouterr().out


def test_percentiles_come_from_an_hdr_histogram_of_every_value() -> None:
    values = np.repeat(np.arange(1, 1001) / 1e3, 3)  # 1 ms to 1 s, each three times
    result = driver.percentiles(values)
    # HDR keeps 3 significant digits: each figure within 0.1% of the exact order statistic.
    for name, exact in (("p50", 500.0), ("p90", 900.0), ("p99", 990.0), ("p99.9", 999.0), ("max", 1000.0)):
        assert result[name] == pytest.approx(exact, rel=1e-3), name
    assert all(np.isnan(v) for v in driver.percentiles(np.zeros(0)).values())


def test_without_the_histogram_library_the_ladder_names_the_extra_before_sending_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "hdrh", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "hdrh.histogram", None)
    calls: list[int] = []
    target = ThreadTarget(SleepSearcher(0.0), 1, "sleep")
    target.start()
    try:
        with pytest.raises(MissingDependencyError, match=r"weft-search\[bench\]"):
            run_ladder(target, 3, arm="bm25", engine="e", direct=calls.append, progress=io.StringIO())
    finally:
        target.close()
    assert calls == []


BENCH = r": pip install 'weft-search\[bench\]'"
MISSING: list[tuple[str, list[str], list[str], str]] = [
    # (case, modules made missing, options, what the message must hold)
    ("histograms", ["hdrh"], ["--no-peer"], r"hdrh \(for the latency histograms\)" + BENCH),
    ("bm25 peer", ["tantivy"], ["--arms", "bm25"], r"tantivy \(for the bm25 arm's peer \(or --no-peer\)\)"),
    ("hybrid peer", ["lancedb"], ["--arms", "hybrid"], r"lancedb \(for the hybrid arm's peer"),
    ("arrow", ["pyarrow"], ["--arms", "bm25,hybrid"], r"pyarrow \(for the hybrid arm's peer"),
    ("server target", ["httpx"], ["--target", "http://127.0.0.1:9"],
     r"httpx \(for a server target\).*weft-search\[server\]"),
    ("serve target", ["uvicorn"], ["--target", "serve:1"], r"uvicorn \(for a serve:N target\)"),
    ("plot", ["matplotlib"], ["--no-peer", "--plot", "x.png"],
     r"matplotlib \(for --plot\): pip install 'weft-search\[eval\]'"),
    ("two at once", ["hdrh", "tantivy"], [], r"hdrh .*; tantivy .*" + BENCH + "$"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("modules", "options", "message"), [c[1:] for c in MISSING], ids=[c[0] for c in MISSING]
)
def test_a_missing_package_is_named_before_any_index_is_built(
    modules: list[str],
    options: list[str],
    message: str,
    no_work: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    assert weft_cli.main([*QUICK_LOAD, *options]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert no_work == []


def test_peers_are_not_needed_where_no_peer_runs(no_work: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("tantivy", "lancedb", "pyarrow"):
        monkeypatch.setitem(sys.modules, module, None)
    loadgen.check_load_dependencies(["bm25", "hybrid"], ["threads:1"], peer=False, plot=False)
    loadgen.check_load_dependencies(["bm25", "hybrid"], ["http://127.0.0.1:9"], peer=True, plot=False)
    with pytest.raises(MissingDependencyError, match="tantivy"):
        loadgen.check_load_dependencies(["bm25"], ["http://127.0.0.1:9", "threads:1"], peer=True, plot=False)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("threads:x", "unknown target 'threads:x'"),
        ("processes:0", "unknown target 'processes:0'"),
        ("serve:0", "unknown target 'serve:0': expected serve:N"),
        ("ray:2", "unknown target 'ray:2'"),
    ],
)
def test_a_bad_target_is_refused_before_any_index_is_built(
    target: str, message: str, no_work: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert weft_cli.main([*QUICK_LOAD, "--no-peer", "--target", target]) == 2
    assert message in capsys.readouterr().err
    assert no_work == []


def test_the_command_on_the_synthetic_corpus_runs_both_arms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "load.json"
    status = weft_cli.main(
        ["bench", "load", "--synthetic", "300", "--queries", "20", "--arms", "bm25,hybrid", "--no-peer",
         "--target", "threads:1", "--rungs", "0.5,1", "--rung-seconds", "0.3", "--min-requests", "1",
         "--sequential-seconds", "0.3", "--repetitions", "1", "--no-calibrate", "--json", str(out)]
    )  # fmt: skip
    assert status == 0
    record = json.loads(out.read_text())
    assert [(ladder["engine"], ladder["arm"]) for ladder in record["ladders"]] == [
        ("weft-search", "bm25"),
        ("weft-search", "hybrid"),
    ]
    for ladder in record["ladders"]:
        assert all(rung["errors"] == 0 for rung in ladder["rungs"])
    assert "synthetic 300" in capsys.readouterr().err


def test_the_command_wants_one_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert weft_cli.main(["bench", "load", "--arms", "bm25"]) == 2
    assert "one of the arguments --data --synthetic is required" in capsys.readouterr().err
    assert weft_cli.main(["bench", "load", "--data", "x", "--synthetic", "10"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_synthetic_vectors_are_seeded_unit_rows() -> None:
    from weftsearch.bench.synthetic import unit_vectors

    first, again = unit_vectors(250, 8), unit_vectors(250, 8)
    assert first.dtype == np.float32 and first.shape == (250, 8)
    assert first.tobytes() == again.tobytes()
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    assert unit_vectors(250, 8, seed=1).tobytes() != first.tobytes()


def test_the_no_op_target_answers_every_request_without_error() -> None:
    # The calibration's floor: a no-op that reported a failure would leave no latency to print.
    target = NoopTarget()
    target.start()
    try:
        result = run_rung(target, _fixed([0.0, 0.001, 0.002]), progress=io.StringIO())
    finally:
        target.close()
    assert (result.completed, result.errors, result.error_reasons) == (3, 0, {})
    assert result.latency["p50"] >= 0.0


def test_the_lancedb_peer_gets_an_ivf_index_on_a_large_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 1M rows an exact scan is no peer for an IVF engine: from LANCE_ANN_FROM_ROWS rows the
    # peer's table has an IVF_FLAT index with weft's list count, probed at weft's nprobe.
    lancedb = pytest.importorskip("lancedb", reason="the hybrid peer needs the bench extra")
    from weftsearch.storage.ivf import nlist_for

    rng = np.random.default_rng(5)
    n = 3000
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    keys = [f"d{i:05d}" for i in range(n)]
    texts = [" ".join(rng.choice([f"w{j}" for j in range(50)], 8)) for _ in range(n)]
    adapter = peers.load_adapter(PEERS_DIR / "lancedb_peer.py")
    monkeypatch.setattr(adapter, "LANCE_ANN_FROM_ROWS", 1000)
    adapter.build(tmp_path / "lance", keys, texts, vectors)
    table = lancedb.connect(str(tmp_path / "lance")).open_table("docs")
    indices = {index.columns[0]: index for index in table.list_indices()}
    assert indices["vector"].index_type == "IvfFlat"
    assert table.index_stats(indices["vector"].name).num_indices >= 1
    assert nlist_for(n) > 1
    search = adapter.open_search(str(tmp_path / "lance"), Workload((texts[0],), vectors[:1]), 5, 100)
    found = search(0)
    assert isinstance(found, list) and found[0] == keys[0]  # its own text and vector: itself first
    # Below the threshold: no vector index (an exact scan).
    adapter.build(tmp_path / "small", keys[:500], texts[:500], vectors[:500])
    small = lancedb.connect(str(tmp_path / "small")).open_table("docs")
    assert "vector" not in {index.columns[0] for index in small.list_indices()}


# ---------------------------------------------------------------------- commit under load


class _StallingWriter:
    """A stand-in writer: its commit and merge each hold a lock the searches need for 0.3 s."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[str] = []

    def search(self, item: int) -> object:
        with self.lock:
            return item

    def _stall(self, what: str) -> None:
        self.calls.append(what)
        with self.lock:
            threading.Event().wait(0.3)

    def commit(self) -> None:
        self._stall("commit")

    def merge(self, *, force: bool = False) -> None:
        assert force
        self._stall("merge")


def test_commit_under_load_splits_requests_at_the_window_and_counts_shed_in_each() -> None:
    writer = _StallingWriter()
    target = ThreadTarget(writer.search, 2, "stall")
    target.start()
    try:
        result = commit_under_load(target, writer, 50, 400.0, 1.8, at=0.6, cap=8, progress=io.StringIO())
    finally:
        target.close()
    assert writer.calls == ["commit", "merge"]
    begin, end = result.window
    assert begin == pytest.approx(0.6, abs=0.1) and end - begin == pytest.approx(0.6, abs=0.2)
    assert result.commit_seconds >= 0.3 and result.merge_seconds >= 0.3
    # Requests queued behind the stalled lock: slow inside, fast before; 8 in flight at most, the rest shed.
    assert result.inside["p99"] > 100 > result.before["p99"]
    assert result.shed["inside"] > 0 and result.shed["before"] == 0
    assert sum(result.shed.values()) == result.rung.shed
    assert result.inside_count + result.outside_count == result.rung.completed
    record = result.to_dict()
    assert set(record["shed"]) == {"before", "inside", "after"}
    assert record["before_ms"]["p50"] == result.before["p50"]
    json.dumps(record, allow_nan=True)


def test_a_deeply_nested_report_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    # Issue 26 item 4: a RecursionError before.
    from weftsearch.bench.report import ladders_from_json
    from weftsearch.errors import InvalidParameterError

    report = tmp_path / "load.json"
    report.write_text('{"ladders": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(InvalidParameterError, match="not the JSON of weft-search bench load"):
        ladders_from_json(report)
