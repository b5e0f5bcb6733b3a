"""What a load run reports: the text tables, the JSON's ladders read back, the plot, the machine.

:func:`format_ladder` prints a ladder as a table (ratios against the lowest
open-loop rung); :func:`ladder_figure` / :func:`plot_ladder` draw latency
against offered load (the ``eval`` extra's matplotlib); :func:`ladders_from_json`
reads back what ``bench load --json`` wrote, for ``bench plot``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weftsearch._plotting import legend_below, log_ticks, png_bytes
from weftsearch.bench.driver import RungResult
from weftsearch.bench.ladder import CommitResult, LadderResult
from weftsearch.errors import InvalidParameterError, MissingDependencyError

if TYPE_CHECKING:  # matplotlib is optional: only its types are needed at check time.
    from matplotlib.figure import Figure

__all__ = [
    "PLOT_INSTALL_HINT",
    "calibration_line",
    "commit_summary",
    "format_ladder",
    "ladder_figure",
    "ladders_from_json",
    "machine_state",
    "ms_text",
    "plot_ladder",
]

#: The install line of the ``eval`` extra, which brings matplotlib for the plots.
PLOT_INSTALL_HINT = "pip install 'weft-search[eval]'"


def ms_text(value: float) -> str:
    """A latency in milliseconds as the tables print it ("-" when not finite)."""
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
                *(ms_text(r.latency[p]) for p in ("p50", "p90", "p99", "p99.9", "max")),
                ms_text(r.service["p50"]),
                ms_text(r.service["p99"]),
                f"{r.latency['p50'] / lowest.latency['p50']:.2f}x",
                f"{r.peak_rss_mb:,.0f}",
                f"{r.peak_rss_mb / lowest.peak_rss_mb:.2f}x" if lowest.peak_rss_mb else "-",
                f"{r.cpu_seconds:,.1f}",
                f"{r.major_faults:,}",
                ms_text(r.lag["p99"]),
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
            f"{ms_text(min(spread['p50_ms']))}-{ms_text(max(spread['p50_ms']))} ms, p99 "
            f"{ms_text(min(spread['p99_ms']))}-{ms_text(max(spread['p99_ms']))} ms, shed "
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


def machine_state() -> dict[str, Any]:
    """The machine a run is on: date, CPU model, cores, Python and load average (for the JSON)."""
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


def calibration_line(what: str, result: RungResult) -> str:
    """One line of the driver's overhead: a no-op rung's latency, dispatcher lag, throughput and CPU."""
    return (
        f"{what} at {result.offered:,.1f} q/s: latency p50 {ms_text(result.latency['p50'])}, "
        f"p99 {ms_text(result.latency['p99'])}, p99.9 {ms_text(result.latency['p99.9'])}, max "
        f"{ms_text(result.latency['max'])} ms; dispatcher lag p99 {ms_text(result.lag['p99'])} ms; "
        f"achieved {result.achieved:,.1f} q/s, shed {result.shed:,}; CPU {result.cpu_seconds:.2f} s"
    )


def commit_summary(result: CommitResult, target: str, arm: str, rate: float, documents: int) -> str:
    """Commit under load in two lines: the window against outside it, and before against after."""
    return (
        f"commit under load ({target}, {arm}, 50% rung = {rate:,.1f} q/s): "
        f"commit of {documents:,} "
        f"documents {result.commit_seconds:.2f} s + merge {result.merge_seconds:.2f} s; p50 outside "
        f"{ms_text(result.outside['p50'])} -> inside {ms_text(result.inside['p50'])} ms; p99 outside "
        f"{ms_text(result.outside['p99'])} -> inside {ms_text(result.inside['p99'])} ms "
        f"(ratio {result.p99_ratio:.2f}; "
        f"{result.inside_count:,} requests inside, {result.outside_count:,} outside; "
        f"shed {result.rung.shed})\n"
        f"  before the window: p50 {ms_text(result.before['p50'])}, p99 {ms_text(result.before['p99'])} ms, "
        f"shed {result.shed['before']:,}; inside: shed {result.shed['inside']:,}; after: p50 "
        f"{ms_text(result.after['p50'])}, p99 {ms_text(result.after['p99'])} ms, "
        f"shed {result.shed['after']:,} "
        f"(inside p99 / after p99: {result.inside['p99'] / result.after['p99']:.2f})"
    )
