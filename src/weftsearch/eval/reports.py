"""Reports of a :class:`~weftsearch.eval.harness.Comparison`: table, Markdown, JSON, TREC runs, plots.

What each output is for:

* :func:`format_table`: a plain-text table to read in a terminal right after a run.
* :func:`markdown_report`: the human-readable report. Besides the numbers it
  holds everything needed to judge them: every interval, the tie diagnostic,
  every arm's parameters, learned-fusion choices, sweeps, and the data record
  (file hashes, index content hash, code version, bootstrap parameters).
* :func:`write_report`: writes the Markdown, ``report.json`` (the same record
  plus every per-query value, so anyone can recompute the intervals), one TREC
  run per arm (so ``trec_eval`` itself can reprint the means) and, when
  matplotlib is installed, PNG plots.

Numbers that came from data which did not match its pinned hashes (the
testbed's provenance is ``"mismatched"``) are marked ``UNPUBLISHABLE``
everywhere they leave the harness, loudly, because such a number must never be
mistaken for a result on the real collection: the first line of the terminal
table and of the Markdown, the ``"unpublishable"`` entry of ``report.json``,
the run tag of every TREC line (``UNPUBLISHABLE-<arm>``: TREC files have no
comments, and the tag column is what every tool that reads them carries along)
and the title of every plot.

Data nobody pinned (provenance ``"unpinned"``: a collection of your own, or
vectors made for it) is not unpublishable: nothing public contradicts it.
Every output says instead that no public pin exists and where the files'
SHA-256 are recorded: the first line of the terminal table and of the
Markdown (:data:`UNPINNED_NOTE`), the ``"unpinned"`` entry of
``report.json`` (``"unpublishable"`` is ``null``) and the title of every plot
(:data:`UNPINNED_PLOT_TITLE`, in black). TREC run tags stay the arm's name:
a tag prefix is a warning, and there is nothing to warn about.

**Two orderings, labelled.** Every mean is first computed with trec_eval's
tie rule (scores as float32, ties by document id descending), so it is
comparable with trec_eval, pytrec_eval and published numbers, and every
interval and p-value uses it. The engine serves ties by key ascending, so
where fused scores tie the ranking users get can score differently: then the
terminal table and the Markdown add, under the arm, a row labelled
``<arm>: served order`` with the served ranking's means, and a note says which
is which. Where no tie changes a mean, only one number is printed (the two are
equal, and the note says so). ``report.json`` always holds both kinds per arm
(``"means"``, ``"served_means"``, the measures that differ in
``"served_differs"``, and what each is in ``"orderings"``), and
``"per_query_served"`` the served per-query values of the arms that differ.

Arms whose scorer lacked an input for some queries (a query without a vector,
say; see :mod:`weftsearch.eval.runs`) carry a coverage line beside them
(``vector: 812/1109 queries have a query vector``) in the terminal table, the
Markdown and ``report.json``.

matplotlib is optional (the ``eval`` extra): it is imported only inside the
plotting code, so this module imports without it, and a missing matplotlib
turns into a note in the report rather than a failure after a long run.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from weftsearch._atomic import write_atomic
from weftsearch._plotting import legend_below, png_bytes
from weftsearch.errors import InvalidParameterError
from weftsearch.eval.harness import Comparison, LearnedFusion, Sweep, SweepPoint
from weftsearch.eval.metrics import Measure, parse_measure
from weftsearch.eval.stats import BootstrapResult

if TYPE_CHECKING:  # matplotlib is optional: only its types are needed at check time.
    from matplotlib.figure import Figure

__all__ = [
    "PLOTS_SKIPPED_NOTE",
    "UNPINNED_NOTE",
    "UNPINNED_PLOT_TITLE",
    "UNPUBLISHABLE_PLOT_TITLE",
    "UNPUBLISHABLE_TAG",
    "ReportFiles",
    "format_table",
    "markdown_report",
    "report_record",
    "trec_tag",
    "write_report",
]

#: The note recorded (in :class:`ReportFiles` and the Markdown) when plots were asked for but
#: matplotlib cannot be imported.
PLOTS_SKIPPED_NOTE = "plots skipped: matplotlib not installed (pip install 'weft-search[eval]')"

#: How many learned-fusion candidates the Markdown lists, best first.
_TOP_CANDIDATES = 5

#: File-name-safe characters; anything else in a sweep name becomes "-" in its plot's name.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+\-]+")


# ---------------------------------------------------------------------- formatting numbers


def _num(value: float | None, *, signed: bool = False) -> str:
    """A mean or difference to 4 decimals; NaN (no query evaluated) prints as ``nan``."""
    if value is None or not math.isfinite(value):
        return "nan" if value is None or math.isnan(value) else ("+inf" if value > 0 else "-inf")
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _interval(result: BootstrapResult) -> str:
    """``+0.0305 [+0.0072, +0.0527]``: the mean difference and its interval."""
    difference = _num(result.mean_difference, signed=True)
    return f"{difference} [{_num(result.low, signed=True)}, {_num(result.high, signed=True)}]"


def _p(value: float, draws: int) -> str:
    """A Monte Carlo p-value; 0 means "below 1/draws" and is printed so, never as a bare 0."""
    if value == 0.0:
        return f"<{1.0 / draws:.4g}"
    return f"{value:.4f}"


def _value(value: Any) -> str:
    """A grid value or parameter for a table: strings bare, numbers plainly, the rest by repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))  # shortest round-trip: 0.1 stays 0.1, numpy scalars lose their wrapper
    return repr(value)


def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell (a ``|`` or a newline would break the row)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> list[str]:
    """A GitHub-flavoured Markdown table; ``align`` is one of ``l``/``r`` per column (default: left)."""
    marks = {"l": "---", "r": "---:"}
    spec = align if align is not None else "l" * len(header)
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "|".join(marks[a] for a in spec) + "|",
    ]
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return lines


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """A plain-text table with aligned columns (``l``/``r`` per column)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align, strict=True)]
        return "  ".join(parts).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


# ---------------------------------------------------------------------- facts shared by every output


def _canonical_measures(comparison: Comparison, measures: Sequence[str | Measure] | None) -> list[str]:
    """Canonical names of ``measures`` (default: all of the comparison's), checked to be evaluated."""
    if measures is None:
        return list(comparison.measures)
    if isinstance(measures, str):  # a lone name is a Sequence of characters; never what is meant
        measures = [measures]
    wanted = [str(parse_measure(m)) for m in measures]
    unknown = [m for m in wanted if m not in comparison.measures]
    if unknown:
        raise InvalidParameterError(
            f"measures {unknown} were not evaluated in this comparison "
            f"(evaluated: {list(comparison.measures)})"
        )
    if not wanted:
        raise InvalidParameterError("format_table needs at least one measure")
    return list(dict.fromkeys(wanted))


def _ties(comparison: Comparison, arm: str) -> tuple[int, int]:
    """(top-k slots decided by a tie-break over all queries, queries with at least one such slot)."""
    run = comparison.arms[arm].run
    return run.tied_total(), sum(1 for slots in run.tied.values() if slots)


def _files(testbed: Mapping[str, Any]) -> list[Any]:
    """The dataset files of the record, then the vector files."""
    files = list(testbed.get("files", ()))
    vectors = testbed.get("vectors")
    if isinstance(vectors, Mapping):
        files += list(vectors.get("files", ()))
    return files


def _provenance(testbed: Mapping[str, Any]) -> str:
    """``"pinned"``, ``"unpinned"``, ``"mismatched"``, or ``"unknown"`` for a record that does not say."""
    recorded = testbed.get("provenance")
    if recorded in ("pinned", "unpinned", "mismatched"):
        return str(recorded)
    if "publishable" not in testbed:
        return "unknown"
    # A record written before provenance was recorded: publishable meant "every file matched its pin".
    return "pinned" if testbed.get("publishable") is True else "mismatched"


#: The first line of the table and of report.md (and report.json's ``"unpinned"``) for unpinned data.
UNPINNED_NOTE = (
    "UNPINNED: no public pin exists for this data (a collection of your own, or vectors made for it), "
    "so nobody can check these numbers against a published copy; they are not unpublishable. "
    "The SHA-256 of every file read is in the data record (report.json: testbed.files)"
)

#: The title of every plot of a comparison on unpinned data.
UNPINNED_PLOT_TITLE = "unpinned data (no public pin): the files' SHA-256 are in report.json"


def _unpinned_note(testbed: Mapping[str, Any]) -> str | None:
    """:data:`UNPINNED_NOTE` with the unpinned files named, or ``None`` unless the data is unpinned."""
    if _provenance(testbed) != "unpinned":
        return None
    names = [
        str(record.get("path"))
        for record in _files(testbed)
        if isinstance(record, Mapping) and record.get("expected_sha256") is None
    ]
    return f"{UNPINNED_NOTE}. Unpinned files: {', '.join(names) or 'none recorded'}"


def _unpublishable_reason(testbed: Mapping[str, Any]) -> str | None:
    """Why the numbers must not be published, or ``None`` (every input matched its pin, or has none)."""
    provenance = _provenance(testbed)
    if provenance in ("pinned", "unpinned"):
        return None
    if provenance == "unknown":
        # A hand-built comparison that says nothing about its data cannot be vouched for.
        return "the comparison does not record whether its data matched its pins"
    bad: list[str] = []
    for record in _files(testbed):
        if not isinstance(record, Mapping) or record.get("verified"):
            continue
        if record.get("expected_sha256") is None:
            bad.append(f"{record.get('path')} (no pin)")
        else:
            bad.append(
                f"{record.get('path')} (expected SHA-256 {record.get('expected_sha256')}, "
                f"found {record.get('sha256')})"
            )
    which = "; ".join(bad) if bad else "see the data record"
    return (
        "the data did not match its pinned hashes, so these numbers are not results on the "
        f"published collection and must not be reported as such. Files: {which}"
    )


def _banner(testbed: Mapping[str, Any]) -> str | None:
    reason = _unpublishable_reason(testbed)
    return None if reason is None else f"UNPUBLISHABLE: {reason}"


#: The run tag prefix of the TREC lines of an unpublishable comparison (``UNPUBLISHABLE-<arm>``).
UNPUBLISHABLE_TAG = "UNPUBLISHABLE"

#: The title of every plot of an unpublishable comparison.
UNPUBLISHABLE_PLOT_TITLE = "UNPUBLISHABLE: the data did not match its pinned hashes"


def trec_tag(comparison: Comparison, arm: str) -> str:
    """The TREC run tag of ``arm``'s lines: its name, or ``UNPUBLISHABLE-<name>`` for unpublishable data."""
    if _unpublishable_reason(comparison.testbed) is None:
        return arm
    return f"{UNPUBLISHABLE_TAG}-{arm}"


def _coverage_lines(comparison: Comparison) -> list[tuple[str, str]]:
    """(arm, ``"vector: 812/1109 queries have a query vector"``) for every stream with partial input."""
    return [
        (name, item.describe())
        for name, result in comparison.arms.items()
        for item in result.run.partial_coverage()
    ]


def _empty_rankings(comparison: Comparison) -> dict[str, list[str]]:
    """Arm name -> queries whose ranking is empty (they cannot appear in a TREC run file)."""
    out: dict[str, list[str]] = {}
    for name, result in comparison.arms.items():
        empty = [qid for qid in result.run.qids if not result.run.keys[qid]]
        if empty:
            out[name] = empty
    return out


def _trec_notes(comparison: Comparison) -> list[str]:
    # An empty ranking leaves no line in a TREC file, and trec_eval without -c skips a query it
    # never sees, while the harness scored it 0: say so, or the reprinted means would differ.
    return [
        f"arm {arm!r}: {len(qids)} queries retrieved nothing (first: {qids[:3]}); they have no line in "
        f"{arm}.trec, so reprint its means with `trec_eval -c` (which scores them 0)"
        for arm, qids in _empty_rankings(comparison).items()
    ]


# ---------------------------------------------------------------------- the two orderings

#: How a row of served-order means is labelled in every report.
SERVED_LABEL = "served order"


def _served_row(comparison: Comparison, arm: str, measures: Sequence[str]) -> list[str] | None:
    """The served order's means of ``arm`` for ``measures``, or ``None`` when no shown mean differs."""
    result = comparison.arms[arm]
    if not result.served_differs(measures):
        return None
    return [_num(result.served_mean(m)) for m in measures]


def _orderings_note(comparison: Comparison, measures: Sequence[str]) -> str:
    """Which order the means are of, and whether any arm's served order scores differently."""
    differ = [name for name, result in comparison.arms.items() if result.served_differs(measures)]
    note = (
        "Means: trec_eval's tie rule (scores as float32, ties by document id descending), comparable "
        "with trec_eval, pytrec_eval and published numbers; intervals and p-values use them. "
    )
    if differ:
        return note + (
            f"'{SERVED_LABEL}' rows: the means of the ranking the engine serves (ties by key ascending), "
            f"which differ where scores tie ({', '.join(differ)})."
        )
    return note + "The served order (ties by key ascending) gives the same means for every arm."


# ---------------------------------------------------------------------- the terminal table


def format_table(comparison: Comparison, *, measures: Sequence[str | Measure] | None = None) -> str:
    """A plain-text table of ``comparison`` for the terminal.

    One row per arm, in the comparison's order: each measure's mean (4
    decimals); for every arm but the baseline, the headline measure's
    (the first of ``comparison.measures``) difference from the baseline with
    its 95% paired bootstrap interval, the bootstrap p and the randomisation
    p; and the tie diagnostic (top-k slots decided by a tie-break, summed over
    queries / queries with such a slot). The baseline row is marked ``*``.
    When the data did not match its pins the first line says ``UNPUBLISHABLE``.

    Args:
        comparison: what :func:`~weftsearch.eval.harness.compare` returned.
        measures: which means to show (default: every measure compared).

    Raises:
        InvalidParameterError: a measure that the comparison did not evaluate.

    """
    shown = _canonical_measures(comparison, measures)
    headline = comparison.measures[0]
    header = ["arm", *shown, f"{headline} vs baseline [95% CI]", "p boot", "p rand", "ties slots/queries"]
    rows: list[list[str]] = []
    for name in comparison.arms:
        means = [_num(comparison.mean(name, m)) for m in shown]
        slots, queries = _ties(comparison, name)
        if name == comparison.baseline:
            versus = ["baseline", "", ""]
        else:
            boot = comparison.bootstrap[name, headline]
            rand = comparison.randomisation[name, headline]
            versus = [_interval(boot), _p(boot.p_value, boot.resamples), _p(rand.p_value, rand.permutations)]
        label = f"{name} *" if name == comparison.baseline else name
        rows.append([label, *means, *versus, f"{slots}/{queries}"])
        served = _served_row(comparison, name, shown)
        if served is not None:
            rows.append([f"  {name}: {SERVED_LABEL}", *served, "", "", "", ""])
    lines: list[str] = []
    banner = _banner(comparison.testbed)
    if banner is not None:
        lines.append(banner)
    unpinned = _unpinned_note(comparison.testbed)
    if unpinned is not None:
        lines.append(unpinned)
    testbed = comparison.testbed
    split = testbed.get("split") or "default"
    judged = testbed.get("queries", "?")
    lines.append(f"{testbed.get('collection', '?')} (split {split}), {judged} queries, k={comparison.k}")
    derived = _split_derivation_line(testbed)
    if derived is not None:
        lines.append(f"  {derived}")
    lines.extend(_text_table(header, rows, "l" + "r" * (len(header) - 1)))
    lines.extend(f"  inputs of {arm}: {text}" for arm, text in _coverage_lines(comparison))
    lines.append(
        f"* baseline. Intervals: paired bootstrap, {comparison.resamples} resamples, seed {comparison.seed}; "
        "ties: top-k slots decided by a tie-break / queries with ties."
    )
    lines.append(_orderings_note(comparison, shown))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- Markdown


def _results_section(comparison: Comparison) -> list[str]:
    measures = list(comparison.measures)
    out = ["## Results", ""]
    testbed = comparison.testbed
    out.append(
        f"Collection `{testbed.get('collection')}`, split `{testbed.get('split')}`, "
        f"{testbed.get('queries')} judged queries, {testbed.get('documents')} documents, "
        f"k = {comparison.k}. Baseline: **{comparison.baseline}**. "
        f"Headline measure: **{measures[0]}**."
    )
    out.append("")
    rows = []
    for name in comparison.arms:
        label = f"{name} (baseline)" if name == comparison.baseline else name
        rows.append([label, *(_num(comparison.mean(name, m)) for m in measures)])
        served = _served_row(comparison, name, measures)
        if served is not None:
            rows.append([f"{name}: {SERVED_LABEL}", *served])
    out += _md_table(["arm", *measures], rows, "l" + "r" * len(measures))
    out += ["", _orderings_note(comparison, measures)]
    coverage = _coverage_lines(comparison)
    if coverage:
        out += [
            "",
            "Inputs: these arms' scorers lacked an input for some queries (their streams are empty there):",
            "",
        ]
        out += [f"- {arm}: {text}" for arm, text in coverage]
    out += [
        "",
        "### Differences from the baseline",
        "",
        "Arm minus baseline, with the 95% paired bootstrap percentile interval "
        f"({comparison.resamples} resamples, seed {comparison.seed}), the bootstrap p "
        "(shifted null) and Fisher's randomisation p (same number of sign vectors, same seed). "
        "`<x` means below one draw in the total.",
        "",
    ]
    rows = []
    for name in comparison.arms:
        if name == comparison.baseline:
            continue
        for measure in measures:
            boot = comparison.bootstrap[name, measure]
            rand = comparison.randomisation[name, measure]
            rows.append(
                [
                    name,
                    measure,
                    _num(comparison.mean(name, measure)),
                    _num(comparison.mean(comparison.baseline, measure)),
                    _interval(boot),
                    _p(boot.p_value, boot.resamples),
                    _p(rand.p_value, rand.permutations),
                    "yes" if boot.excludes_zero else "no",
                ]
            )
    if rows:
        out += _md_table(
            [
                "arm",
                "measure",
                "mean",
                "baseline",
                "difference [95% CI]",
                "p boot",
                "p rand",
                "CI excludes 0",
            ],
            rows,
            "llrrrrrl",
        )
    else:
        out.append("(only the baseline arm was run: nothing to compare)")
    return out


def _ties_section(comparison: Comparison) -> list[str]:
    out = [
        "## Tie diagnostic",
        "",
        "Top-k slots whose float32 fused score equals a neighbour's, so that the document in the slot "
        "was chosen by a tie-break rule rather than by its score (the engine breaks ties by key "
        "ascending, trec_eval by document id descending; the means above use trec_eval's rule, and a "
        f"'{SERVED_LABEL}' row the engine's where that changes a mean). "
        "Per stream: the same count in each scorer's own stream.",
        "",
    ]
    rows = []
    for name, result in comparison.arms.items():
        slots, queries = _ties(comparison, name)
        per_stream = [0] * len(result.run.signals)
        for counts in result.run.stream_tied.values():
            for i, count in enumerate(counts):
                per_stream[i] += count
        streams = ", ".join(f"{label}: {n}" for label, n in zip(result.run.signals, per_stream, strict=True))
        rows.append([name, slots, queries, len(result.run.qids), streams])
    out += _md_table(["arm", "tie-break slots", "queries with ties", "queries", "per stream"], rows, "lrrrl")
    return out


def _arms_section(comparison: Comparison) -> list[str]:
    out = ["## Arms", ""]
    for name, result in comparison.arms.items():
        description = result.run.description
        fuser = description.get("fuser", {})
        out.append(f"### {name}" + (" (baseline)" if name == comparison.baseline else ""))
        out.append("")
        out.append(f"- fuser: `{fuser.get('repr', fuser)}`")
        out.append(f"- depth (candidates per scorer): {description.get('depth')}")
        out.append(f"- run length k: {result.run.k}")
        labels = result.run.signals
        for i, scorer in enumerate(description.get("scorers", ())):
            label = labels[i] if i < len(labels) else scorer.get("name")
            out.append(f"- scorer `{label}`: `{scorer.get('repr')}`")
        for item in result.run.coverage:
            out.append(f"- inputs: {item.describe()}")
        if description.get("notes"):
            out.append(f"- notes: {description['notes']}")
        out.append("")
    return out[:-1]


def _learned_section(learned: Mapping[str, LearnedFusion]) -> list[str]:
    out = ["## Learned fusion", ""]
    for name, choice in learned.items():
        out.append(f"### {name}")
        out.append("")
        out.append(f"- chosen: `{choice.fuser!r}`")
        out.append(
            f"- {choice.measure} on the development queries: {_num(choice.dev_mean)} "
            f"({choice.dev_queries} queries, {len(choice.tried)} candidates)"
        )
        out.append("")
        # Stable sort: among equal means the earlier candidate (the one chosen on a tie) comes first.
        order = sorted(range(len(choice.tried)), key=lambda i: -_sortable(choice.tried[i][1]))
        rows = [[rank, choice.tried[i][0], _num(choice.tried[i][1])] for rank, i in enumerate(order, 1)]
        out += _md_table(["rank", "candidate", f"dev {choice.measure}"], rows[:_TOP_CANDIDATES], "rlr")
        out.append("")
    return out[:-1]


def _sortable(value: float) -> float:
    """NaN sorts last when sorting by ``-value``."""
    return -math.inf if math.isnan(value) else value


def _point_cell(point: SweepPoint) -> str:
    return _num(point.mean) if point.difference is None else _interval(point.difference)


def _sweep_matrix(sweep: Sweep) -> tuple[tuple[Any, ...], tuple[Any, ...], list[list[SweepPoint]]] | None:
    """For a two-parameter grid, (row values, column values, points[row][column]); else ``None``."""
    if len(sweep.grid) != 2:
        return None
    rows_values, columns_values = sweep.grid.values()
    if len(sweep.points) != len(rows_values) * len(columns_values):
        return None
    # The points are in cartesian-product order (first parameter slowest), so position decides the
    # cell; values are not looked up, since they need be neither hashable nor distinct.
    width = len(columns_values)
    matrix = [list(sweep.points[r * width : (r + 1) * width]) for r in range(len(rows_values))]
    return tuple(rows_values), tuple(columns_values), matrix


def _sweep_section(sweeps: Sequence[Sweep]) -> list[str]:
    out = ["## Sweeps", ""]
    for sweep in sweeps:
        names = list(sweep.grid)
        best = sweep.best()
        out.append(f"### {sweep.name}")
        out.append("")
        against = (
            f"; cells with a reference show the difference from run `{sweep.reference}` "
            "with its 95% paired bootstrap interval"
            if sweep.reference is not None
            else ""
        )
        grid = ", ".join(f"{k} in [{', '.join(map(_value, v))}]" for k, v in sweep.grid.items())
        at = ", ".join(f"{k}={_value(best.params.get(k))}" for k in names)
        out.append(f"Measure {sweep.measure}; grid {grid}{against}. Best: {at} ({_num(best.mean)}).")
        out.append("")
        matrix = _sweep_matrix(sweep)
        if matrix is not None:
            row_values, column_values, cells = matrix
            corner = f"{names[0]} (rows) / {names[1]} (columns)"
            header = [corner, *map(_value, column_values)]
            align = "l" + "r" * len(column_values)
            out += [f"Mean {sweep.measure}:", ""]
            rows = [
                [_value(v), *(_num(p.mean) for p in row)] for v, row in zip(row_values, cells, strict=True)
            ]
            out += [*_md_table(header, rows, align), ""]
            if sweep.reference is not None:
                out += [f"Difference from {sweep.reference} [95% CI]:", ""]
                rows = [
                    [_value(v), *(_point_cell(p) for p in row)]
                    for v, row in zip(row_values, cells, strict=True)
                ]
                out += [*_md_table(header, rows, align), ""]
        header = [*names, "arm", f"mean {sweep.measure}"]
        if sweep.reference is not None:
            header.append(f"difference from {sweep.reference} [95% CI]")
        header.append("tie-break slots")
        rows = []
        for point in sweep.points:
            row = [*(_value(point.params.get(k)) for k in names), point.arm, _num(point.mean)]
            if sweep.reference is not None:
                row.append("" if point.difference is None else _interval(point.difference))
            row.append(str(point.tie_break_slots))
            rows.append(row)
        out += _md_table(header, rows, "l" * (len(names) + 1) + "r" * (len(header) - len(names) - 1))
        out.append("")
    return out[:-1]


def _files_table(files: Iterable[Mapping[str, Any]]) -> list[str]:
    rows = []
    for record in files:
        verified = (
            "yes"
            if record.get("verified")
            else ("no pin" if record.get("expected_sha256") is None else "**NO**")
        )
        rows.append([f"`{record.get('path')}`", record.get("size"), f"`{record.get('sha256')}`", verified])
    return _md_table(["file", "bytes", "SHA-256", "verified"], rows, "lrll")


def _split_derivation_line(testbed: Mapping[str, Any]) -> str | None:
    """One line on how the testbed's split was derived (``testbed["split_derivation"]``), or ``None``.

    Names the split's source, what it was deduplicated against, and every
    removed query id with its twin, as the terminal and Markdown reports print it.
    """
    record = testbed.get("split_derivation")
    if not isinstance(record, Mapping):
        return None
    removed = (
        ", ".join(f"{item['id']} (twin of {item['twin']})" for item in record.get("removed", ())) or "none"
    )
    return (
        f"split {record.get('name')}: derived from {record.get('derived_from')}, deduplicated against "
        f"{record.get('deduplicated_against')} ({record.get('rule')}); {record.get('queries')} queries kept, "
        f"removed: {removed}"
    )


def _data_section(comparison: Comparison) -> list[str]:
    testbed = comparison.testbed
    out = ["## Data record", ""]
    out.append(f"- collection: `{testbed.get('collection')}`, split: `{testbed.get('split')}`")
    derived = _split_derivation_line(testbed)
    if derived is not None:
        out.append(f"- {derived}")
    out.append(f"- judged queries: {testbed.get('queries')}, documents: {testbed.get('documents')}")
    out.append(f"- analyzer: `{testbed.get('analyzer')}`, link set: `{testbed.get('link_set')}`")
    parameters = testbed.get("loader_parameters") or {}
    if parameters:
        out.append("- loader parameters: " + ", ".join(f"`{k}={v}`" for k, v in sorted(parameters.items())))
    out.append(f"- index content hash (SHA-256): `{testbed.get('index_content_sha256')}`")
    provenance = _provenance(testbed)
    out.append(f"- publishable: {'yes' if _unpublishable_reason(testbed) is None else '**NO**'}")
    out.append(
        "- provenance: "
        + {
            "pinned": "every file matched its public pin",
            "unpinned": "no public pin exists (your own data); the SHA-256 of every file is below",
            "mismatched": "**a file differs from its public pin**",
        }.get(provenance, "not recorded")
    )
    out.append("")
    out.append("Dataset files:")
    out.append("")
    out += _files_table(testbed.get("files", ()))
    vectors = testbed.get("vectors")
    if isinstance(vectors, Mapping):
        out += [
            "",
            f"Vectors: variant `{vectors.get('variant')}`, model `{vectors.get('model')}`, "
            f"{vectors.get('dims')} dimensions.",
            "",
            *_files_table(vectors.get("files", ())),
        ]
    else:
        out += ["", "Vectors: none (no vector was attached to documents or queries)."]
    out += ["", "Code:", ""]
    out += _md_table(["component", "version"], sorted(comparison.code.items()))
    out += [
        "",
        "Statistics:",
        "",
        f"- k (hits per query): {comparison.k}",
        f"- paired bootstrap: {comparison.resamples} resamples, seed {comparison.seed}, "
        "generator numpy PCG64, 95% interval by nearest-rank percentiles",
        f"- Fisher randomisation: {comparison.resamples} random sign vectors, seed {comparison.seed}, "
        "numpy PCG64, two-sided",
        "- measures follow trec_eval 9 (scores rounded to float32, ties by document id descending); "
        f"'{SERVED_LABEL}' means evaluate the engine's own order (ties by key ascending)",
    ]
    if comparison.extra:
        out += ["", "Extra:", "", "```json", _dumps(comparison.extra), "```"]
    return out


def markdown_report(
    comparison: Comparison,
    *,
    sweeps: Sequence[Sweep] = (),
    learned: Mapping[str, LearnedFusion] | None = None,
    title: str | None = None,
    command: str | None = None,
    plots: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The Markdown report of ``comparison``.

    Sections: title; the ``UNPUBLISHABLE`` banner when the data did not match
    its pins, or the unpinned note when it has none; the command that
    reprints the report; notes; the results table
    and every measure's difference from the baseline with its interval and
    p-values; the tie diagnostic; each arm's parameters; learned-fusion
    choices; sweeps (a matrix for a two-parameter grid, always the list of
    points); plots; the data record (files with size, SHA-256 and whether they
    matched their pins, vectors, index content hash, code version, bootstrap
    parameters, k).

    Args:
        comparison: what :func:`~weftsearch.eval.harness.compare` returned.
        sweeps: sweeps to report, in this order.
        learned: name -> learned-fusion choice (usually the arm it configured).
        title: the first heading (default: names the collection).
        command: the command line that reproduces the report.
        plots: plot name -> path relative to the report, embedded as images.
        notes: remarks to print near the top (skipped plots, TREC caveats).

    """
    testbed = comparison.testbed
    heading = title if title else f"weft-search evaluation: {testbed.get('collection', '?')}"
    out = [f"# {heading}", ""]
    banner = _banner(testbed)
    if banner is not None:
        out += [f"> **{banner}**", ""]
    unpinned = _unpinned_note(testbed)
    if unpinned is not None:
        out += [f"> {unpinned}", ""]
    if command is not None:
        out += ["Reprint this report with:", "", "```sh", command, "```", ""]
    if notes:
        out += [*(f"- Note: {note}" for note in notes), ""]
    out += [*_results_section(comparison), "", *_ties_section(comparison), "", *_arms_section(comparison), ""]
    if learned:
        out += [*_learned_section(learned), ""]
    if sweeps:
        out += [*_sweep_section(sweeps), ""]
    if plots:
        out += ["## Plots", ""]
        for name, path in plots.items():
            out += [f"### {name}", "", f"![{_cell(name)}]({path})", ""]
    out += _data_section(comparison)
    return "\n".join(out).rstrip("\n") + "\n"


# ---------------------------------------------------------------------- JSON


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON types; non-finite floats become ``None`` (strict JSON has no NaN)."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    # Anything else (a fuser object in `extra`, say) is recorded by repr rather than failing
    # after a run that may have taken an hour.
    return repr(value)


def _dumps(value: Any) -> str:
    """Strict, stable JSON: keys sorted, one-space indent, no NaN."""
    return json.dumps(_jsonable(value), sort_keys=True, indent=1, allow_nan=False, ensure_ascii=False)


def report_record(
    comparison: Comparison,
    *,
    sweeps: Sequence[Sweep] = (),
    learned: Mapping[str, LearnedFusion] | None = None,
) -> dict[str, Any]:
    """What ``report.json`` holds, JSON-ready (before NaN is mapped to ``null``).

    :meth:`Comparison.record` plus ``"unpublishable"`` (the ``UNPUBLISHABLE: ...``
    banner, ``None`` when every input matched its pin or has none), ``"unpinned"`` (the
    unpinned note, ``None`` unless some input has no public pin), ``"sweeps"`` (each :meth:`Sweep.record`),
    ``"learned"`` (name -> :meth:`LearnedFusion.record`) and ``"per_query"``
    (arm -> measure -> qid -> value): with the per-query values and the seed,
    anyone can recompute every interval.
    """
    record = comparison.record()
    # The banner itself (null when every input matched its pin), so no reader of the JSON misses it.
    record["unpublishable"] = _banner(comparison.testbed)
    # Likewise the note that no public pin exists (null unless the data is unpinned).
    record["unpinned"] = _unpinned_note(comparison.testbed)
    record["sweeps"] = [s.record() for s in sweeps]
    record["learned"] = {name: choice.record() for name, choice in (learned or {}).items()}
    record["per_query"] = {
        name: {m: result.evaluation.per_query(m) for m in comparison.measures}
        for name, result in comparison.arms.items()
    }
    # The served order's per-query values, for the arms where some mean differs (elsewhere they
    # are "per_query"'s).
    record["per_query_served"] = {
        name: {m: result.served.per_query(m) for m in comparison.measures}
        for name, result in comparison.arms.items()
        if result.served is not None and result.served_differs(comparison.measures)
    }
    # The tie diagnostic per arm and query: fused top-k slots decided by a
    # tie-break, and the same count for each input stream.
    record["tie_break_slots_per_query"] = {
        name: {
            qid: {"fused": result.run.tied[qid], "streams": list(result.run.stream_tied[qid])}
            for qid in result.run.qids
        }
        for name, result in comparison.arms.items()
    }
    return record


# ---------------------------------------------------------------------- plots


def _slug(name: str) -> str:
    return _UNSAFE.sub("-", name).strip("-") or "sweep"


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)


def _mark(figure: Figure, mark: str | None) -> None:
    """Title ``figure`` with ``mark`` above every panel.

    The unpublishable warning is red and bold, the unpinned note black.
    """
    if mark is not None:
        warning = mark == UNPUBLISHABLE_PLOT_TITLE
        figure.suptitle(
            mark,
            color="#d7301f" if warning else "black",
            fontweight="bold" if warning else "normal",
            fontsize=11,
        )


def _delta_figure(comparison: Comparison, mark: str | None = None) -> Figure | None:
    """Per-query deltas of the headline measure, one panel per non-baseline arm; ``mark`` titles it."""
    from matplotlib.figure import Figure

    others = [name for name in comparison.arms if name != comparison.baseline]
    if not others:
        return None
    headline = comparison.measures[0]
    base = comparison.arms[comparison.baseline].evaluation.per_query(headline)
    # A Figure made directly (not through pyplot) keeps no global state: nothing to close, no GUI.
    figure = Figure(figsize=(8.0, 2.6 * len(others)), layout="constrained")
    axes = figure.subplots(len(others), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, others, strict=True):
        values = comparison.arms[name].evaluation.per_query(headline)
        deltas = np.sort(np.array([values[q] - base[q] for q in sorted(base)], dtype=np.float64))[::-1]
        positions = np.arange(deltas.size)
        colours = np.where(deltas >= 0, "#2b7bba", "#d7301f")
        ax.bar(positions, deltas, width=1.0, color=colours.tolist(), linewidth=0)
        ax.axhline(0.0, color="black", linewidth=0.8)
        boot = comparison.bootstrap[name, headline]
        ax.set_title(f"{name} - {comparison.baseline}: {headline} delta {_interval(boot)}", fontsize=10)
        ax.set_ylabel(f"delta {headline}")
        ax.set_xlim(-0.5, max(deltas.size, 1) - 0.5)
        ax.set_xlabel(
            f"queries, sorted by delta ({deltas.size}; {int((deltas > 0).sum())} better, "
            f"{int((deltas < 0).sum())} worse)"
        )
    _mark(figure, mark)
    return figure


def _sweep_figure(sweep: Sweep, mark: str | None = None) -> Figure | None:
    """A curve (one parameter) or an annotated heatmap (two) of the sweep; ``None`` otherwise.

    ``mark`` (the unpublishable warning, or the unpinned note) titles the figure.
    """
    from matplotlib.figure import Figure

    with_reference = sweep.reference is not None and all(p.difference is not None for p in sweep.points)
    what = f"{sweep.measure} minus {sweep.reference}" if with_reference else f"mean {sweep.measure}"

    def height(point: SweepPoint) -> float:
        return point.difference.mean_difference if with_reference and point.difference else point.mean

    names = list(sweep.grid)
    if len(names) == 1:
        values = sweep.grid[names[0]]
        if len(values) != len(sweep.points):  # a hand-built sweep whose points do not fill its grid
            return None
        figure = Figure(figsize=(6.0, 3.6), layout="constrained")
        ax = figure.subplots()
        xs = np.asarray(values, dtype=np.float64) if _numeric(values) else np.arange(len(values), dtype=float)
        ys = np.array([height(p) for p in sweep.points], dtype=np.float64)
        ax.plot(xs, ys, marker="o")
        if with_reference:
            lows = [p.difference.low for p in sweep.points if p.difference is not None]
            highs = [p.difference.high for p in sweep.points if p.difference is not None]
            ax.fill_between(xs, lows, highs, alpha=0.25, label="95% interval")
            ax.axhline(0.0, color="black", linewidth=0.8)
            legend_below(figure)  # below the panel: a legend inside covers the curve or its band
        if not _numeric(values):
            ax.set_xticks(xs, [_value(v) for v in values])
        ax.set_xlabel(names[0])
        ax.set_ylabel(what)
        ax.set_title(f"{sweep.name}: {what}", fontsize=10)
        _mark(figure, mark)
        return figure
    matrix = _sweep_matrix(sweep)
    if matrix is None:
        return None
    row_values, column_values, cells = matrix
    grid = np.array([[height(p) for p in row] for row in cells], dtype=np.float64)
    size = (1.2 * len(column_values) + 3.0, 0.6 * len(row_values) + 2.4)
    figure = Figure(figsize=size, layout="constrained")
    ax = figure.subplots()
    finite = grid[np.isfinite(grid)]
    if with_reference:
        # A diverging map centred on zero: better and worse than the reference read apart at a glance.
        span = float(np.abs(finite).max()) if finite.size and np.abs(finite).max() > 0 else 1.0
        image = ax.imshow(grid, cmap="RdBu", vmin=-span, vmax=span, aspect="auto")
    else:
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
    figure.colorbar(image, ax=ax, label=what)
    ax.set_xticks(range(len(column_values)), [_value(v) for v in column_values])
    ax.set_yticks(range(len(row_values)), [_value(v) for v in row_values])
    ax.set_xlabel(names[1])
    ax.set_ylabel(names[0])
    ax.set_title(f"{sweep.name}: {what}", fontsize=10)
    for r in range(grid.shape[0]):
        for c in range(grid.shape[1]):
            value = float(grid[r, c])
            # Text in the contrasting colour of the cell it sits on, so every value stays legible.
            red, green, blue = np.asarray(image.to_rgba(np.asarray([value])), dtype=np.float64)[0, :3]
            dark = math.isfinite(value) and 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            colour = "white" if dark else "black"
            label = _num(value, signed=with_reference)
            ax.text(c, r, label, ha="center", va="center", fontsize=8, color=colour)
    _mark(figure, mark)
    return figure


def _png(figure: Figure, mark: str | None = None) -> bytes:
    # The mark is also in the file's text chunk, for tools that never look at pixels.
    return png_bytes(figure, None if mark is None else {"Title": mark})


def _render_plots(comparison: Comparison, sweeps: Sequence[Sweep]) -> tuple[dict[str, bytes], list[str]]:
    """File name -> PNG bytes, and notes; the note alone when matplotlib cannot be imported."""
    try:
        import matplotlib
    except ImportError:
        return {}, [PLOTS_SKIPPED_NOTE]
    import matplotlib.style

    if "matplotlib.pyplot" not in sys.modules:
        # Never a GUI backend: reports are written from scripts and CI, often without a display.
        # Once pyplot is imported, switching would close the session's open figures (a notebook's),
        # and is not needed: the figures here are drawn on an Agg canvas of their own (_png).
        matplotlib.use("Agg")
    mark: str | None = None
    if _unpublishable_reason(comparison.testbed) is not None:
        mark = UNPUBLISHABLE_PLOT_TITLE
    elif _unpinned_note(comparison.testbed) is not None:
        mark = UNPINNED_PLOT_TITLE
    # matplotlib's default style for these figures only: a user's matplotlibrc cannot change the bytes.
    with matplotlib.style.context("default"):
        files: dict[str, bytes] = {}
        notes: list[str] = []
        figure = _delta_figure(comparison, mark)
        if figure is not None:
            files["per_query_deltas.png"] = _png(figure, mark)
        used: set[str] = set(files)
        for sweep in sweeps:
            figure = _sweep_figure(sweep, mark)
            if figure is None:
                notes.append(f"sweep {sweep.name!r}: no plot for a grid of {len(sweep.grid)} parameters")
                continue
            stem = f"sweep-{_slug(sweep.name)}"
            name, n = f"{stem}.png", 1
            while name in used:  # two sweep names that slug alike still get their own files
                n += 1
                name = f"{stem}-{n}.png"
            used.add(name)
            files[name] = _png(figure, mark)
    return files, notes


# ---------------------------------------------------------------------- writing


@dataclass(frozen=True)
class ReportFiles:
    """The files :func:`write_report` wrote.

    Attributes:
        out_dir: the folder holding them.
        markdown: ``report.md``.
        json: ``report.json``.
        trec: arm name -> its TREC run file ``<arm>.trec``.
        plots: the PNG files, in the order written.
        notes: remarks also printed in the Markdown (skipped plots, TREC caveats).

    """

    out_dir: Path
    markdown: Path
    json: Path
    trec: Mapping[str, Path] = field(default_factory=dict)
    plots: tuple[Path, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[Path, ...]:
        """Every file written."""
        return (self.markdown, self.json, *self.trec.values(), *self.plots)

    def __str__(self) -> str:
        # What a command line prints after writing: short, with the notes a user must not miss.
        summary = (
            f"{self.markdown.name}, {self.json.name}, {len(self.trec)} TREC runs and "
            f"{len(self.plots)} plots in {self.out_dir}"
        )
        return "; ".join([summary, *self.notes])


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable by others (a report is meant to be shared)."""
    write_atomic(path, data, 0o644)


def _prepare(out_dir: str | os.PathLike[str]) -> Path:
    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        raise InvalidParameterError(f"report folder {str(folder)!r} exists and is not a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        raise InvalidParameterError(
            f"cannot create report folder {str(folder)!r}: a part of the path is a file ({error})"
        ) from error
    return folder


def write_report(
    comparison: Comparison,
    out_dir: str | os.PathLike[str],
    *,
    sweeps: Sequence[Sweep] = (),
    learned: Mapping[str, LearnedFusion] | None = None,
    title: str | None = None,
    command: str | None = None,
    plots: bool = True,
) -> ReportFiles:
    """Write every report of ``comparison`` into ``out_dir`` (created if needed).

    Files: ``<arm>.trec`` for each arm (``qid Q0 docid rank score tag``, what
    ``trec_eval`` reads to reprint the means; the tag is :func:`trec_tag`,
    ``UNPUBLISHABLE-<arm>`` when the data did not match its pins), PNG plots when ``plots`` and
    matplotlib is importable (the per-query deltas of the headline measure,
    one curve or heatmap per sweep), ``report.json`` (:func:`report_record`,
    strict JSON with sorted keys) and ``report.md``
    (:func:`markdown_report`), written last so that its presence means the
    rest is there. Each file is replaced atomically; files of an earlier
    report in the folder that this one does not write are left alone.

    Without matplotlib, ``plots=True`` does not fail: the returned
    :attr:`ReportFiles.notes` and the Markdown say the plots were skipped.

    Raises:
        InvalidParameterError: ``out_dir`` (or a folder above it) is a file.
        OSError: the folder cannot be created or written for another reason.

    """
    folder = _prepare(out_dir)
    notes = _trec_notes(comparison)
    trec: dict[str, Path] = {}
    for name, result in comparison.arms.items():
        lines = list(result.run.trec_lines(trec_tag(comparison, name)))
        path = folder / f"{name}.trec"
        _atomic_write(path, "".join(f"{line}\n" for line in lines).encode("utf-8"))
        trec[name] = path
    written_plots: list[Path] = []
    if plots:
        rendered, plot_notes = _render_plots(comparison, sweeps)
        notes += plot_notes
        for file_name, data in rendered.items():
            path = folder / file_name
            _atomic_write(path, data)
            written_plots.append(path)
    record = report_record(comparison, sweeps=sweeps, learned=learned)
    record["report"] = {
        "title": title,
        "command": command,
        "trec": {name: path.name for name, path in trec.items()},
        "plots": [path.name for path in written_plots],
        "notes": notes,
    }
    json_path = folder / "report.json"
    _atomic_write(json_path, (_dumps(record) + "\n").encode("utf-8"))
    markdown = markdown_report(
        comparison,
        sweeps=sweeps,
        learned=learned,
        title=title,
        command=command,
        plots={path.stem: path.name for path in written_plots},
        notes=notes,
    )
    md_path = folder / "report.md"
    _atomic_write(md_path, markdown.encode("utf-8"))
    return ReportFiles(folder, md_path, json_path, trec, tuple(written_plots), tuple(notes))
