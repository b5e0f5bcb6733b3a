"""Every plot the project draws keeps its legend off its data: rendered with Agg, the legend's box
meets no axes' box (issue 18: the load ladder's legend covered its curves on a busy panel).

The figures are the ones the commands write: the load ladder (``bench load --plot``, ``bench plot``),
the recall curve (``recall --plot``) and the eval report's sweep curve.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the plots need the 'eval' extra")

from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text

from weftsearch import _plotting
from weftsearch.bench.driver import RungResult
from weftsearch.bench.ladder import LadderResult
from weftsearch.bench.recall import RecallPoint, recall_figure
from weftsearch.bench.report import ladder_figure, ladders_from_json, plot_ladder
from weftsearch.cli import main
from weftsearch.errors import InvalidParameterError
from weftsearch.eval import reports
from weftsearch.eval.harness import Sweep, SweepPoint
from weftsearch.eval.stats import BootstrapResult


def _rung(offered: float, p50: float, p99: float, *, shed: int = 0) -> RungResult:
    latency = {"p50": p50, "p90": p99, "p99": p99, "p99.9": p99, "max": p99}
    return RungResult(
        label="x", fraction=None, offered=offered, seconds=1.0, scheduled=10, completed=10 - shed, errors=0,
        shed=shed, unfinished=0, achieved=offered, latency=latency, service=latency,
        lag={"p50": 0.0, "p99": 0.0, "max": 0.0}, peak_rss_mb=100.0, cpu_seconds=1.0, major_faults=0, seed=0,
    )  # fmt: skip


def _busy_ladders() -> list[LadderResult]:
    """Two arms, each with four weft targets and two peers (the peers also at the engine's rates)."""
    results = []
    targets = ["weft threads:2", "weft processes:2", "weft serve:2", "weft processes:2x2"]
    peers = ["tantivy processes:2", "lancedb threads:2"]
    for arm in ("bm25", "hybrid"):
        for number, target in enumerate([*targets, *peers]):
            # Curves everywhere: from the bottom left to the top right, as a real ladder's are.
            rungs = [
                _rung(
                    rate * (1 + number), 1.0 + number + step, (2.0 + number) * (1 + step) ** 2, shed=step // 5
                )
                for step, rate in enumerate((25.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0))
            ]
            absolute = [_rung(r.offered * 1.1, r.latency["p50"], r.latency["p99"] * 1.5) for r in rungs]
            results.append(
                LadderResult(
                    target, arm, target.split()[0], "this process", 300.0 * (1 + number), rungs, rungs[-1:],
                    1.0, absolute=absolute if target in peers else [],
                )
            )  # fmt: skip
    return results


def assert_legend_off_the_axes(figure: Figure) -> Legend:
    """Draw ``figure`` and check its legends' boxes meet none of its axes' boxes; the figure legend."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()  # type: ignore[no-untyped-call]
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    inside = [ax.get_legend() for ax in figure.axes]
    legends = [*figure.legends, *(legend for legend in inside if legend is not None)]
    assert legends, "the figure has no legend"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for axes in figure.axes:
            assert not box.overlaps(axes.get_window_extent(renderer)), (
                f"the legend {box} covers the axes {axes.get_title()!r} at {axes.get_window_extent(renderer)}"
            )
        # Inside the figure: moved off the axes, not off the page.
        page = figure.bbox
        assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1 and page.y0 - 1 <= box.y0, (box, page)
    assert figure.legends, "the entries are gathered into one figure legend"
    return figure.legends[0]


def test_the_load_ladders_legend_never_covers_a_busy_panel() -> None:
    results = _busy_ladders()
    legend = assert_legend_off_the_axes(ladder_figure(results, title="synthetic 20,000, 2026-12-04"))
    labels = [text.get_text() for text in legend.get_texts()]
    # One entry per target and curve, shared by both panels (a target keeps its colour in each).
    assert len(labels) == len(set(labels)) == 6 * 2 + 2
    assert "tantivy processes:2 p99 at the engine's rates" in labels


def test_a_target_keeps_its_colour_in_every_panel() -> None:
    results = _busy_ladders()
    figure = ladder_figure([r for r in results if r.arm == "bm25"] + list(reversed(results[6:])))
    colours = [{line.get_label(): line.get_color() for line in ax.get_lines()} for ax in figure.axes]
    assert colours[0]["weft serve:2 p50"] == colours[1]["weft serve:2 p50"]


def drawn_tick_labels(axis: Axis) -> list[Text]:
    """The tick labels ``axis`` drew (major and minor, in its view, with text), after a draw."""
    low, high = sorted(axis.get_view_interval())
    slack = (high - low) * 1e-9
    labels = []
    for ticks, locs in (
        (axis.get_major_ticks(), axis.get_majorticklocs()),
        (axis.get_minor_ticks(), axis.get_minorticklocs()),
    ):
        for tick, loc in zip(ticks, locs, strict=False):
            if low - slack <= loc <= high + slack and tick.label1.get_visible() and tick.label1.get_text():
                labels.append(tick.label1)
    return labels


def assert_tick_labels_apart(figure: Figure) -> None:
    """Draw ``figure`` and check no two tick labels of one axis meet, and each axis has two or more."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()  # type: ignore[no-untyped-call]
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            labels = drawn_tick_labels(axis)
            where = f"{axes.get_title()!r} {axis.axis_name}: {[label.get_text() for label in labels]}"
            assert len(labels) >= 2, f"a log axis needs two labels to be read: {where}"
            boxes = [label.get_window_extent(renderer) for label in labels]
            for first in range(len(boxes)):
                for second in range(first + 1, len(boxes)):
                    assert not boxes[first].overlaps(boxes[second]), (
                        f"tick labels {labels[first].get_text()!r} and {labels[second].get_text()!r} "
                        f"overlap on {where}"
                    )


def _ladder(low: float, high: float, p50: tuple[float, float], p99: tuple[float, float]) -> LadderResult:
    """One ladder of eight rungs from ``low`` to ``high`` q/s (geometric), latencies likewise."""
    rates = np.geomspace(low, high, 8)
    rungs = [
        _rung(float(rate), float(a), float(b))
        for rate, a, b in zip(rates, np.geomspace(*p50, 8), np.geomspace(*p99, 8), strict=True)
    ]
    return LadderResult("weft threads:2", "bm25", "weft-search", "this process", high, rungs, rungs[-1:], 1.0)


LADDER_RANGES = [
    # (case, offered load from-to, p50 from-to, p99 from-to)
    ("within one decade", (1_100.0, 9_000.0), (0.21, 0.9), (0.5, 0.95)),
    ("a narrow band", (2_100.0, 4_800.0), (0.31, 0.42), (0.6, 0.8)),
    ("across a decade boundary", (800.0, 3_000.0), (0.3, 2.5), (0.6, 6.0)),
    ("many decades", (0.5, 3e6), (0.01, 5e4), (0.02, 1e5)),
    ("SciFact-like", (1_000.0, 25_000.0), (0.22, 6.0), (0.55, 8.5)),
    # Ranges where matplotlib's own labels collided or gave a single label (found by a sweep):
    ("about a decade and a third", (3.75, 75.0), (0.075, 1.5), (0.19, 7.5)),
    ("a fraction of a decade", (0.13, 0.21), (0.0026, 0.0042), (0.0065, 0.013)),
    ("a band with one decade tick", (0.7, 1.75), (0.014, 0.035), (0.035, 0.17)),
    ("a band between decades", (108.0, 270.0), (2.16, 5.4), (5.4, 27.0)),
    ("a thin band", (2_100.0, 2_300.0), (0.41, 0.43), (0.8, 0.81)),
]


@pytest.mark.parametrize(
    ("offered", "p50", "p99"), [c[1:] for c in LADDER_RANGES], ids=[c[0] for c in LADDER_RANGES]
)
def test_the_load_ladders_log_tick_labels_never_overlap(
    offered: tuple[float, float], p50: tuple[float, float], p99: tuple[float, float]
) -> None:
    results = [_ladder(*offered, p50, p99)]
    assert_tick_labels_apart(ladder_figure(results))
    two_arms = [*results, dataclasses.replace(results[0], arm="hybrid")]
    assert_tick_labels_apart(ladder_figure(two_arms, title="synthetic 1,000,000"))


def test_the_busy_ladders_tick_labels_never_overlap() -> None:
    assert_tick_labels_apart(ladder_figure(_busy_ladders()))


def test_log_tick_values_are_two_to_max_round_values_inside_any_range() -> None:
    for low in np.geomspace(1e-4, 1e7, 40):
        for ratio in (1.01, 1.1, 1.6, 2.5, 4.0, 9.5, 13.0, 40.0, 300.0, 1e4, 1e9):
            for max_ticks in (2, 6, 8):
                values = _plotting.log_tick_values(low, low * ratio, max_ticks)
                where = (low, ratio, max_ticks, values)
                assert 2 <= len(values) <= max_ticks, where
                assert all(a < b for a, b in itertools.pairwise(values)), where
                assert low * (1 - 1e-6) <= values[0] and values[-1] <= low * ratio * (1 + 1e-6), where
    assert _plotting.log_tick_values(30.0, 700.0, 6) == [30.0, 50.0, 100.0, 200.0, 300.0, 500.0]
    assert _plotting.log_tick_values(1.0, 1e8, 6) == [1.0, 100.0, 1e4, 1e6, 1e8]
    assert [_plotting.tick_text(v) for v in (0.25, 40.0, 1500.0, 2e4, 3e6, 1e-5)] == [
        "0.25", "40", "1,500", "20k", "3M", "1e-05",
    ]  # fmt: skip


def test_the_recall_curves_tick_labels_never_overlap() -> None:
    for top in (90.0, 3_000.0, 2e6):
        points = [
            RecallPoint(n, {10: 1.0 - 0.5 / n}, 100.0 * n, 4e4 * n, top / n, 100) for n in (1, 2, 4, 8, 16)
        ]
        assert_tick_labels_apart(recall_figure(points, title="SciFact"))


def test_the_recall_curves_legend_is_off_the_axes() -> None:
    points = [
        RecallPoint(nprobe, {10: 1.0 - 0.5 / nprobe}, 100.0 * nprobe, 4e4 * nprobe, 20_000.0 / nprobe, 100)
        for nprobe in (1, 2, 4, 8, 16, 20, 32, 64)
    ]
    points.append(RecallPoint(None, {10: 1.0}, 5_183.0, 8e6, 150.0, 100))
    assert_legend_off_the_axes(recall_figure(points, title="SciFact, 5,183 vectors"))


def test_the_sweep_curves_legend_is_off_the_axes() -> None:
    values = (1.0, 10.0, 30.0, 60.0, 100.0)
    points = tuple(
        SweepPoint({"k": k}, f"rrf-k{k:g}", 0.6 + i / 100, BootstrapResult(0.01 * i, -0.02, 0.05, 0.5, 0.95,
                                                                             100, 0, 50), 0)
        for i, k in enumerate(values)
    )  # fmt: skip
    figure = reports._sweep_figure(Sweep("rrf k", "nDCG@10", {"k": values}, points, "text"))
    assert figure is not None
    assert_legend_off_the_axes(figure)


def test_legend_below_without_labels_adds_nothing() -> None:
    figure = Figure()
    figure.subplots().plot([1, 2], [3, 4])
    assert _plotting.legend_below(figure) is None and not figure.legends


def test_the_ladder_is_drawn_again_from_its_json(tmp_path: Path) -> None:
    """``bench plot`` reads what ``bench load --json`` wrote and draws the same figure."""
    results = _busy_ladders()
    saved = tmp_path / "load.json"
    saved.write_text(json.dumps({"ladders": [r.to_dict() for r in results]}), encoding="utf-8")
    again = ladders_from_json(saved)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in results]
    direct, replotted = tmp_path / "direct.png", tmp_path / "replotted.png"
    plot_ladder(results, direct)
    assert main(["bench", "plot", str(saved), "--out", str(replotted)]) == 0
    assert replotted.read_bytes() == direct.read_bytes()
    broken = tmp_path / "broken.json"
    broken.write_text('{"ladders": [{"target": "t"}]}', encoding="utf-8")
    with pytest.raises(InvalidParameterError, match="not the JSON of weft-search bench load"):
        ladders_from_json(broken)
