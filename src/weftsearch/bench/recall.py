r"""Recall and speed of the IVF lists against the exact scan: ``weft-search recall``.

:func:`measure_recall` runs the same query vectors through
:class:`~weftsearch.scorers.vector.VectorScorer` once per ``nprobe`` and once
exactly (``nprobe=None``), on one snapshot, and reports for each setting:

* **recall@k**: the mean over queries of ``|approx top-k & exact top-k| / |exact top-k|``
  (the exact top-k has ``k`` documents unless the index holds fewer). A query
  whose exact result is empty (a zero vector) is left out of the mean;
* **candidates per query**: the mean number of stored rows the scorer computes
  a cosine for. For each segment's block this is the rows of the ranges
  :meth:`VectorBlock.probe <weftsearch.engine.snapshot.VectorBlock.probe>`
  returns, or every row of the block when it is scanned exactly (no lists,
  or probing would not pay: :func:`~weftsearch.storage.ivf.worth_probing`);
* **bytes per query**: what those rows and centroids occupy:
  ``nlist * dim * 4`` for the centroids of each probed block plus
  ``candidates * dim * itemsize`` (4 for float32 storage, 2 for float16). The
  row norms and ids the scorer also reads (12 bytes a row) are not counted;
* **queries per second**: one thread, wall clock over ``VectorScorer.score``
  alone (the :class:`~weftsearch.engine.query.Query` objects are built before
  the clock starts). Each setting first runs one untimed pass, which warms
  the snapshot's caches and collects the results recall is computed from, then
  ``timed_passes`` timed passes (one by default); the best pass counts.

The exact scan is always measured, as the reference row (``nprobe`` ``None``,
recall 1, every row a candidate).

The command (see :func:`add_subcommand`)::

    weft-search recall --index DIR --queries FILE.npy [--nprobe 1,2,4,8,16,20,32,64] \
        [--limit N] [--plot recall.png] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from weftsearch._argtypes import positive_int, positive_list
from weftsearch._plotting import legend_below, log_ticks, png_bytes
from weftsearch.engine.index import Index
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import InvalidParameterError, MissingDependencyError, VectorDimensionError
from weftsearch.scorers.vector import DEFAULT_NPROBE, VectorScorer

if TYPE_CHECKING:  # matplotlib is optional: only its types are needed at check time.
    from matplotlib.figure import Figure

__all__ = [
    "RecallPoint",
    "DEFAULT_NPROBES",
    "measure_recall",
    "format_table",
    "rows_read",
    "plot_recall",
    "recall_figure",
    "add_subcommand",
    "recall_command",
]

#: The ``nprobe`` values ``weft-search recall`` sweeps unless told otherwise.
DEFAULT_NPROBES: tuple[int, ...] = (1, 2, 4, 8, 16, 20, 32, 64)

#: What the plot needs, for the error when it is missing.
PLOT_INSTALL_HINT = "pip install 'weft-search[eval]'"

_CENTROID_ITEMSIZE = 4  # centroids are always float32


@dataclass(frozen=True, slots=True)
class RecallPoint:
    """One setting of the sweep: how close to exact, how much read, how fast.

    Attributes:
        nprobe: lists probed per segment; ``None`` for the exact scan.
        recall: k -> mean recall@k against the exact scan (see the module docstring).
        candidates_per_query: mean rows scored per query.
        bytes_per_query: mean bytes of vectors and centroids read per query.
        queries_per_second: single-threaded ``VectorScorer.score`` calls per second.
        queries: how many queries were run (zero-vector queries included).

    """

    nprobe: int | None
    recall: Mapping[int, float]
    candidates_per_query: float
    bytes_per_query: float
    queries_per_second: float
    queries: int

    @property
    def recall_at_10(self) -> float:
        """Mean recall@10 (NaN when 10 was not among the measured ``k``)."""
        return self.recall.get(10, math.nan)

    @property
    def recall_at_100(self) -> float:
        """Mean recall@100 (NaN when 100 was not among the measured ``k``)."""
        return self.recall.get(100, math.nan)

    @property
    def exact(self) -> bool:
        """Whether this is the exact-scan reference row."""
        return self.nprobe is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record of the point."""
        return {
            "nprobe": self.nprobe,
            "recall": {str(k): v for k, v in sorted(self.recall.items())},
            "candidates_per_query": self.candidates_per_query,
            "bytes_per_query": self.bytes_per_query,
            "queries_per_second": self.queries_per_second,
            "queries": self.queries,
        }


def _check_queries(snapshot: Snapshot, queries: NDArray[np.float32]) -> NDArray[np.float32]:
    dim = snapshot.vector_dim
    if dim is None or not snapshot.vector_blocks():
        raise InvalidParameterError("the index holds no vectors; there is nothing to measure recall on")
    array = np.asarray(queries)
    if array.ndim != 2:
        raise InvalidParameterError(f"query vectors must be a 2-D array (queries x width), got {array.shape}")
    if array.shape[1] != dim:
        raise VectorDimensionError(f"query vectors have width {array.shape[1]}; the index holds {dim}")
    if array.shape[0] == 0:
        raise InvalidParameterError("no query vectors given")
    if not np.issubdtype(array.dtype, np.floating) or not bool(np.all(np.isfinite(array))):
        raise InvalidParameterError("query vectors must be finite floating-point numbers")
    out: NDArray[np.float32] = np.ascontiguousarray(array, dtype=np.float32)
    return out


def _check_positive(values: Sequence[int], what: str) -> list[int]:
    checked = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) <= 0:
            raise InvalidParameterError(f"{what} must be positive integers, got {value!r}")
        checked.append(int(value))
    return checked


def rows_read(snapshot: Snapshot, unit_query: NDArray[np.float32], nprobe: int | None) -> tuple[int, int]:
    """Rows the vector scorer scores for one unit query, and the bytes of vectors and centroids read.

    Segment by segment, as :class:`VectorScorer` chooses them: the probed ranges,
    or every row of a block scanned exactly; ``nprobe=None`` is the exact scan.
    """
    rows = 0
    read = 0
    for block in snapshot.vector_blocks():
        dim = int(block.matrix.shape[1])
        itemsize = int(block.matrix.dtype.itemsize)
        ranges = None if nprobe is None else block.probe(unit_query, nprobe)
        if ranges is None:
            scanned = int(block.matrix.shape[0])
        else:
            scanned = sum(end - start for start, end in ranges)
            assert block.centroids is not None
            read += int(block.centroids.shape[0]) * dim * _CENTROID_ITEMSIZE
        rows += scanned
        read += scanned * dim * itemsize
    return rows, read


def _run(
    snapshot: Snapshot, scorer: VectorScorer, queries: Sequence[Query], k: int, timed_passes: int
) -> tuple[list[NDArray[np.int64]], float]:
    """Results of one untimed pass, then the best of ``timed_passes`` timed passes (seconds)."""
    results = [scorer.score(snapshot, query, k).ids for query in queries]
    best = math.inf
    for _ in range(timed_passes):
        started = time.perf_counter()
        for query in queries:
            scorer.score(snapshot, query, k)
        best = min(best, time.perf_counter() - started)
    return results, best


def measure_recall(
    snapshot: Snapshot,
    queries: NDArray[np.float32],
    nprobes: Sequence[int],
    *,
    k_values: Sequence[int] = (10, 100),
    timed_passes: int = 1,
) -> list[RecallPoint]:
    """Recall@k, rows read and speed of the vector scorer at each ``nprobe``, and exactly.

    Args:
        snapshot: what to search (``index.snapshot()``).
        queries: float32 ``(n, dim)`` query vectors, one a row.
        nprobes: lists probed per segment, one point each, in this order.
        k_values: the cut-offs recall is measured at; each query is searched
            once per setting at ``max(k_values)``, and the top ``k`` of that
            result is the top ``k`` (the order is total: score, then key).
        timed_passes: timed passes after the untimed one; the fastest counts.

    Returns:
        One :class:`RecallPoint` per ``nprobe``, in the given order, then the
        exact scan (``nprobe=None``).

    Raises:
        InvalidParameterError: the index holds no vectors, ``queries`` is not a
            non-empty finite 2-D array, or a parameter is not a positive integer.
        VectorDimensionError: the query width differs from the index's.

    Complexity: ``(len(nprobes) + 1) * (1 + timed_passes)`` searches per query.

    """
    matrix = _check_queries(snapshot, queries)
    probes = _check_positive(nprobes, "nprobe values")
    cutoffs = sorted(set(_check_positive(k_values, "k values")))
    if not cutoffs:
        raise InvalidParameterError("give at least one k to measure recall at")
    passes = _check_positive([timed_passes], "timed passes")[0]
    depth = cutoffs[-1]
    query_objects = [Query(vector=row) for row in matrix]
    norms = np.linalg.norm(matrix, axis=1)
    units = [row / np.float32(norm) if norm > 0 else None for row, norm in zip(matrix, norms, strict=True)]

    def point(nprobe: int | None, truth: list[NDArray[np.int64]] | None) -> tuple[RecallPoint, list[Any]]:
        results, seconds = _run(snapshot, VectorScorer(nprobe=nprobe), query_objects, depth, passes)
        reference = results if truth is None else truth
        recall: dict[int, float] = {}
        for k in cutoffs:
            fractions = []
            for found, exact in zip(results, reference, strict=True):
                wanted = exact[:k]
                if wanted.size:
                    fractions.append(np.intersect1d(found[:k], wanted).size / wanted.size)
            recall[k] = float(np.mean(fractions)) if fractions else math.nan
        reads = [rows_read(snapshot, unit, nprobe) if unit is not None else (0, 0) for unit in units]
        rows = float(np.mean([r for r, _ in reads]))
        read = float(np.mean([b for _, b in reads]))
        speed = len(query_objects) / seconds if seconds > 0 else math.inf
        return RecallPoint(nprobe, recall, rows, read, speed, len(query_objects)), results

    exact_point, truth = point(None, None)
    points = [point(nprobe, truth)[0] for nprobe in probes]
    return [*points, exact_point]


def _format_count(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _format_bytes(value: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def format_table(points: Sequence[RecallPoint], *, default_nprobe: int | None = DEFAULT_NPROBE) -> str:
    """The sweep as a text table; the speed-up is against the exact row (if there is one)."""
    exact = next((p for p in points if p.exact), None)
    cutoffs = sorted({k for p in points for k in p.recall})
    headers = ["nprobe", *(f"recall@{k}" for k in cutoffs), "candidates/q", "bytes/q", "q/s", "speed-up"]
    rows = []
    for p in points:
        label = "exact" if p.nprobe is None else str(p.nprobe)
        if p.nprobe is not None and p.nprobe == default_nprobe:
            label += " *"
        speedup = (
            f"{p.queries_per_second / exact.queries_per_second:.2f}x"
            if exact is not None and exact.queries_per_second > 0
            else "-"
        )
        rows.append(
            [
                label,
                *(f"{p.recall.get(k, math.nan):.4f}" for k in cutoffs),
                _format_count(p.candidates_per_query),
                _format_bytes(p.bytes_per_query),
                f"{p.queries_per_second:,.0f}",
                speedup,
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    if default_nprobe is not None and any(p.nprobe == default_nprobe for p in points):
        lines.append(f"* the default nprobe ({default_nprobe})")
    return "\n".join(lines) + "\n"


def plot_recall(points: Sequence[RecallPoint], path: str | Path, *, title: str = "") -> None:
    """Write a PNG of recall@10 against queries per second, one labelled point per ``nprobe``.

    The figure is :func:`recall_figure`'s.

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``eval`` extra).

    """
    Path(path).write_bytes(png_bytes(recall_figure(points, title=title)))


def recall_figure(points: Sequence[RecallPoint], *, title: str = "") -> Figure:
    """The figure :func:`plot_recall` writes, on an Agg canvas of its own; its legend sits below the axes.

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``eval`` extra).

    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError(f"--plot needs matplotlib: {PLOT_INSTALL_HINT}") from None
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    FigureCanvasAgg(figure)  # an Agg canvas of its own: no global backend is touched
    axes = figure.add_subplot()
    approx = [p for p in points if not p.exact]
    axes.plot(
        [p.queries_per_second for p in approx], [p.recall_at_10 for p in approx], "o-", label="IVF lists"
    )
    for p in approx:
        axes.annotate(
            f"nprobe {p.nprobe}",
            (p.queries_per_second, p.recall_at_10),
            textcoords="offset points",
            xytext=(4, -10),
            fontsize=8,
        )
    for p in points:
        if p.exact:
            axes.plot([p.queries_per_second], [p.recall_at_10], "s", color="black", label="exact scan")
    axes.set_xscale("log")
    log_ticks(axes.xaxis)  # plain round numbers: matplotlib's own labels collide near one decade
    axes.set_xlabel("queries / second (one thread)")
    axes.set_ylabel("recall@10 against the exact scan")
    axes.grid(True, alpha=0.3)
    legend_below(figure)  # outside the axes: inside, it covered the low-recall points
    if title:
        axes.set_title(title)
    return figure


# ---------------------------------------------------------------------- the command


def _load_queries(path: str) -> NDArray[np.float32]:
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise InvalidParameterError(f"{path} is not a .npy array of numbers ({exc})") from None
    if not isinstance(array, np.ndarray):
        raise InvalidParameterError(f"{path} holds several arrays; give one .npy array (queries x width)")
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.floating):
        raise InvalidParameterError(
            f"{path} holds a {array.dtype} array of shape {array.shape}; expected floats, queries x width"
        )
    out: NDArray[np.float32] = array.astype(np.float32, copy=False)
    return out


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingDependencyError(f"--plot needs matplotlib: {PLOT_INSTALL_HINT}") from None


def recall_command(args: argparse.Namespace) -> int:
    """Handler of ``weft-search recall`` (errors propagate as :class:`WeftError`/``OSError``)."""
    if args.plot is not None:
        _require_matplotlib()  # before the sweep, not after it
    queries = _load_queries(args.queries)
    with Index.open(args.index, readonly=True) as index:
        snapshot = index.snapshot()
        if snapshot.vector_dim is None:
            raise InvalidParameterError(f"the index at {args.index} holds no vectors")
        if queries.shape[1] != snapshot.vector_dim:
            raise VectorDimensionError(
                f"{args.queries} holds vectors of width {queries.shape[1]}; "
                f"the index at {args.index} holds {snapshot.vector_dim}"
            )
        if args.limit is not None:
            queries = queries[: args.limit]
        blocks = snapshot.vector_blocks()
        lists = [("-" if b.centroids is None else str(b.centroids.shape[0])) for b in blocks]
        rows = sum(int(b.matrix.shape[0]) for b in blocks)
        segments = [
            {"rows": int(b.matrix.shape[0]), "nlist": None if b.centroids is None else b.centroids.shape[0]}
            for b in blocks
        ]
        points = measure_recall(snapshot, queries, args.nprobe)
        dim = snapshot.vector_dim
    print(
        f"{args.index}: {rows:,} vectors (width {dim}) in {len(blocks)} segment(s), "
        f"lists per segment: {', '.join(lists) or '-'} ('-': scanned exactly); {queries.shape[0]:,} queries"
    )
    print("q/s: one thread, one timed pass after an untimed warm-up pass that collects the results")
    sys.stdout.write(format_table(points))
    sys.stdout.flush()  # the table before the notes on stderr
    if args.json is not None:
        payload = {
            "index": str(args.index),
            "queries_file": str(args.queries),
            "queries": int(queries.shape[0]),
            "vector_dim": dim,
            "vectors": rows,
            "segments": segments,
            "timing": "one thread; one timed pass after an untimed warm-up pass",
            "points": [p.to_dict() for p in points],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    if args.plot is not None:
        plot_recall(points, args.plot, title=f"{Path(args.index).name}: {queries.shape[0]:,} queries")
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def add_subcommand(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``recall`` to the subcommands of a ``weft-search`` parser; its handler is :func:`recall_command`.

    ``weft-search recall --index DIR --queries FILE.npy [--nprobe 1,2,4,...]
    [--limit N] [--plot recall.png] [--json out.json]``: recall@10 and @100
    of the IVF lists against the exact scan, rows and bytes read, and speed.
    """
    recall = commands.add_parser(
        "recall",
        help="measure recall and speed of the IVF lists against the exact vector scan",
        description=(
            "Run float32 query vectors (a .npy array, queries x width) through the vector scorer at "
            "each --nprobe and exactly, on the index at DIR opened read-only, and print recall@10 and "
            "@100 against the exact scan, candidates and bytes read per query, queries/second (one "
            "thread) and the speed-up over the exact scan."
        ),
    )
    recall.add_argument("--index", required=True, metavar="DIR", help="index directory")
    recall.add_argument("--queries", required=True, metavar="FILE.npy", help="query vectors, one a row")
    recall.add_argument(
        "--nprobe",
        type=positive_list(int, "1,4,20"),
        default=list(DEFAULT_NPROBES),
        metavar="N,N,...",
        help=f"lists per segment to probe ({','.join(map(str, DEFAULT_NPROBES))})",
    )
    recall.add_argument("--limit", type=positive_int, metavar="N", help="use only the first N queries")
    recall.add_argument(
        "--plot", metavar="FILE.png", help=f"write recall@10 against q/s as a PNG (needs {PLOT_INSTALL_HINT})"
    )
    recall.add_argument("--json", metavar="FILE", help="write the measurements as JSON")
    recall.set_defaults(handler=recall_command)
