r"""The load ladder: a target's rungs at fractions of its throughput, and a commit dropped into one.

The ladder (:func:`run_ladder`)
    Sequential throughput first (one request at a time through the same
    target, :func:`~weftsearch.bench.driver.sequential_throughput`), then one
    rung at each fraction of it (default 12.5%, 25%, 50%, 75%, 100%, 125%,
    150%), each lasting ``max(rung_seconds, min_requests / rate)``
    (``max_rung_seconds`` bounds that: "at least 5,000 requests or 60 s"). The
    **unloaded denominator is the lowest open-loop rung**, not the sequential
    loop: a tight loop measures a warm machine that no rung reproduces. Ratios
    ``p50 / lowest p50`` and ``peak RSS / lowest peak RSS`` are printed for
    every rung. The headline rung (100% by default) is run ``repetitions``
    times in all (different seeds) and the spread reported.

Commit under load (:func:`commit_under_load`)
    One commit of 20,000 documents and a forced merge, dropped into a read load
    at the 50% rung of an in-process target; p50/p99 of the requests scheduled
    inside the commit window against those outside it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from weftsearch.bench.driver import (
    DEFAULT_CAP,
    RUNG_START_DELAY,
    RungResult,
    Target,
    direct_throughput,
    hdr_histogram_class,
    percentiles,
    poisson_schedule,
    run_rung,
    sequential_throughput,
)
from weftsearch.bench.targets import NoopTarget
from weftsearch.errors import InvalidParameterError

__all__ = [
    "DEFAULT_RUNGS",
    "CommitResult",
    "LadderResult",
    "calibrate",
    "commit_under_load",
    "ladder_rates",
    "run_ladder",
    "rung_seconds_for",
]

#: The ladder's rungs, as fractions of the measured sequential throughput.
DEFAULT_RUNGS: tuple[float, ...] = (0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)


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
    hdr_histogram_class()  # before any request is sent: a missing extra fails at once, not after a rung
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
    # The rung's offsets count from RUNG_START_DELAY after run_rung's call.
    origin = started + RUNG_START_DELAY
    begin, end = window[0] - origin, window[1] - origin
    inside_mask = (result.arrivals >= begin) & (result.arrivals <= end)
    inside = percentiles(result.latencies[inside_mask])
    outside = percentiles(result.latencies[~inside_mask])
    before = percentiles(result.latencies[result.arrivals < begin])
    after = percentiles(result.latencies[result.arrivals > end])
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
