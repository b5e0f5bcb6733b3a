"""Declared grids: the arms a selection evaluates, from a file, and the named rule that picks one.

A grid file (JSON, or TOML when its name ends in ``.toml``) declares a family
of arms as one template in the spec language (:mod:`weftsearch.ranking.specs`)
and the axes it varies; ``weft-search eval --grid FILE`` evaluates every cell
on development queries and picks one by the file's selection rule::

    {
      "name": "hybrid",
      "template": "weighted(bm25, vector(exact=true), weights=[{w}, {1-w}], k={k})@100",
      "axes": {"w": [0.2, 0.35, 0.5, 0.65, 0.8], "k": [5, 10, 20, 60]},
      "baseline": {"w": 0.5, "k": 60},
      "select": "nDCG@10,R@10,nearest:w,nearest:k"
    }

Entries:

* ``template`` (required): ``EXPR[@DEPTH] [where FILTER]`` with placeholders.
  ``{AXIS}`` is the cell's value on that axis; ``{C-AXIS}`` is the number C
  minus it (``{1-w}``: the semantic weight when ``w`` is the lexical one).
  Numbers are written with 12 significant digits, so ``1 - 0.8`` is ``0.2``.
  Every axis must appear in the template and every placeholder must name an
  axis; ``learned(...)`` is refused (a cell is a concrete ranking).
* ``axes`` (required): axis name -> a non-empty list of distinct values
  (numbers, ``true``/``false``, or names). The cells are the cartesian
  product in the order the axes are written, the last axis varying fastest;
  cell ``i`` is the arm ``NAME-gI``.
* ``baseline`` (optional): one value per axis, naming a cell: every other
  cell is compared with it (paired intervals), and ``nearest:AXIS`` measures
  distance from it. Without it, the first cell is the reference and the rule
  may not use ``nearest``.
* ``name`` (optional, default ``grid``): the cells' name prefix.
* ``select`` (optional): the selection rule (below); ``--select`` overrides it.

Selection rule: comma-separated keys, applied in order, each keeping only
the cells best on it: a measure name (``nDCG@10``, ``R@10``: highest mean
wins; means equal to 12 decimal places tie) or ``nearest:AXIS`` (smallest
``|value - baseline value|`` wins, to 12 decimal places). Cells still tied
after every key go by grid order (the first). The default,
:func:`default_rule`, is ``nDCG@10,R@10`` then ``nearest:AXIS`` for each
numeric axis in the order written: with the axes above,
``nDCG@10,R@10,nearest:w,nearest:k`` (judged recall, then nearest the
baseline's weights, then nearest its k).

Every error is an :class:`~weftsearch.errors.InvalidParameterError` naming
the file and the offending entry.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any, Literal

from weftsearch.errors import InvalidParameterError, UnknownMeasureError, WeftError
from weftsearch.eval.metrics import parse_measure
from weftsearch.ranking.specs import ArmSpec, parse_arm

__all__ = [
    "MAX_CELLS",
    "GridCell",
    "GridFile",
    "GridResult",
    "SelectionKey",
    "SelectionRule",
    "Selection",
    "default_rule",
    "load_grid",
    "parse_grid_file",
    "select",
]

#: The most cells a grid file may declare (the product of its axes' lengths).
MAX_CELLS = 10_000

#: Largest grid file read (a grid is a few lines; this refuses a wrong file quickly).
MAX_GRID_BYTES = 1 << 20

#: Scores and distances equal to this many decimal places tie (summation order
#: may differ in the last bits between equal figures).
TIE_DECIMALS = 12

_KEYS = ("name", "template", "axes", "baseline", "select")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+\-]{0,40}")
_NUMBER = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
_PLACEHOLDER = re.compile(rf"\{{\s*(?:(?P<constant>{_NUMBER})\s*-\s*)?(?P<axis>[A-Za-z_][A-Za-z0-9_]*)\s*\}}")
_BRACED = re.compile(r"\{[^{}]*\}")

AxisValue = float | int | bool | str


def _text(value: AxisValue) -> str:
    """An axis value as spec text (numbers to 12 significant digits)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format(value, ".12g")
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _identity(value: object) -> tuple[str, object]:
    """A hashable key equal for values :func:`_same` calls equal."""
    if isinstance(value, bool):
        return ("bool", value)
    if _is_number(value):
        return ("number", float(value))  # type: ignore[arg-type]
    return (type(value).__name__, value)


def _same(a: object, b: object) -> bool:
    """Equal as axis values: ``60 == 60.0``, but ``true`` is not ``1`` and a name is not a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


@dataclass(frozen=True, slots=True)
class GridCell:
    """One cell of a grid: its axis values and the arm they give.

    Attributes:
        index: position in grid order (0-based).
        name: the arm's name, ``NAME-gINDEX``.
        params: axis name -> value.
        spec: the arm's spec text after substitution (``EXPR[@DEPTH] [where FILTER]``).
        arm: the parsed spec.

    """

    index: int
    name: str
    params: Mapping[str, AxisValue]
    spec: str
    arm: ArmSpec

    def label(self) -> str:
        """``w=0.2, k=5``: the cell's axis values as text."""
        return ", ".join(f"{key}={_text(value)}" for key, value in self.params.items())


# ---------------------------------------------------------------------- the selection rule


@dataclass(frozen=True, slots=True)
class SelectionKey:
    """One key of a selection rule: a measure (highest wins) or nearness to the baseline on an axis."""

    kind: Literal["measure", "nearest"]
    name: str

    def __str__(self) -> str:
        return self.name if self.kind == "measure" else f"nearest:{self.name}"


@dataclass(frozen=True, slots=True)
class Selection:
    """What a rule picked, and why.

    Attributes:
        index: the picked cell's index.
        decided_by: the key that left one cell (``"grid order"`` when every key tied).
        tied: for each key applied, the cell indices still in the running after it.

    """

    index: int
    decided_by: str
    tied: tuple[tuple[str, tuple[int, ...]], ...]

    def record(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "index": self.index,
            "decided_by": self.decided_by,
            "after_each_key": [{"key": key, "cells": list(cells)} for key, cells in self.tied],
        }


@dataclass(frozen=True, slots=True)
class SelectionRule:
    """A named selection rule: keys applied in order, then grid order.

    Build one with :meth:`parse` (``"nDCG@10,R@10,nearest:w,nearest:k"``) or
    :func:`default_rule`.
    """

    keys: tuple[SelectionKey, ...]

    @classmethod
    def parse(cls, text: str, where: str = "selection rule") -> SelectionRule:
        """Read ``KEY,KEY,...`` (measure names, ``nearest:AXIS``).

        Raises:
            InvalidParameterError: not a string, an empty or repeated key, an
                unknown measure, ``nearest:`` without an axis name.

        """
        if not isinstance(text, str) or not text.strip():
            raise InvalidParameterError(f"{where}: expected keys like 'nDCG@10,R@10,nearest:w', got {text!r}")
        keys: list[SelectionKey] = []
        for item in text.split(","):
            item = item.strip()
            if not item:
                raise InvalidParameterError(f"{where} {text!r}: an empty key")
            if item.startswith("nearest:"):
                axis = item[len("nearest:") :].strip()
                if _IDENT.fullmatch(axis) is None:
                    raise InvalidParameterError(f"{where} {text!r}: {item!r} must be nearest:AXIS")
                key = SelectionKey("nearest", axis)
            else:
                try:
                    key = SelectionKey("measure", str(parse_measure(item)))
                except UnknownMeasureError as exc:
                    raise InvalidParameterError(
                        f"{where} {text!r}: {item!r} is neither a measure nor nearest:AXIS ({exc})"
                    ) from None
            if key in keys:
                raise InvalidParameterError(f"{where} {text!r}: key {str(key)!r} given twice")
            keys.append(key)
        return cls(tuple(keys))

    def __str__(self) -> str:
        return ",".join(str(key) for key in self.keys)

    def describe(self) -> str:
        """The rule in words, for reports."""
        words = [
            f"highest {key.name}" if key.kind == "measure" else f"nearest the baseline's {key.name}"
            for key in self.keys
        ]
        return ", then ".join([*words, "first in grid order"])

    def measures(self) -> tuple[str, ...]:
        """The measures the rule reads (canonical names)."""
        return tuple(key.name for key in self.keys if key.kind == "measure")

    def check(self, grid: GridFile) -> None:
        """Refuse a rule ``grid`` cannot apply: ``nearest`` on an unknown or non-numeric axis, or no baseline.

        Raises:
            InvalidParameterError: naming the key.

        """
        for key in self.keys:
            if key.kind != "nearest":
                continue
            if key.name not in grid.axes:
                raise InvalidParameterError(
                    f"selection rule {str(self)!r}: {str(key)!r} names no axis of {grid.source} "
                    f"(axes: {', '.join(grid.axes)})"
                )
            if grid.baseline is None:
                raise InvalidParameterError(
                    f"selection rule {str(self)!r}: {str(key)!r} needs a baseline in {grid.source}"
                )
            if not all(_is_number(v) for v in grid.axes[key.name]):
                raise InvalidParameterError(
                    f"selection rule {str(self)!r}: {str(key)!r}: axis {key.name!r} of {grid.source} "
                    "is not numeric"
                )

    def pick(
        self,
        params: Sequence[Mapping[str, AxisValue]],
        scores: Sequence[Mapping[str, float]],
        baseline: Mapping[str, AxisValue] | None = None,
    ) -> Selection:
        """The cell this rule picks among cells with axis values ``params`` and means ``scores``.

        Raises:
            InvalidParameterError: no cells, a measure missing from a cell's
                scores, ``nearest`` without a baseline or on a non-number.

        """
        if not params or len(params) != len(scores):
            raise InvalidParameterError(
                f"selection needs one score record per cell, got {len(params)} cells and {len(scores)}"
            )
        running = list(range(len(params)))
        tied: list[tuple[str, tuple[int, ...]]] = []
        for key in self.keys:
            values: dict[int, float] = {}
            for i in running:
                if key.kind == "measure":
                    if key.name not in scores[i]:
                        raise InvalidParameterError(f"selection: cell {i} has no {key.name} score")
                    mean = float(scores[i][key.name])
                    # Higher is better; a NaN mean (no judged query) ranks last.
                    values[i] = -math.inf if math.isnan(mean) else round(mean, TIE_DECIMALS)
                else:
                    if baseline is None or key.name not in baseline:
                        raise InvalidParameterError(f"selection: {key} needs a baseline value for {key.name}")
                    value, origin = params[i].get(key.name), baseline[key.name]
                    if not _is_number(value) or not _is_number(origin):
                        raise InvalidParameterError(f"selection: {key} on non-numbers {value!r}, {origin!r}")
                    values[i] = -round(abs(float(value) - float(origin)), TIE_DECIMALS)  # type: ignore[arg-type]
            best = max(values.values())
            running = [i for i in running if values[i] == best]
            tied.append((str(key), tuple(running)))
            if len(running) == 1:
                return Selection(running[0], str(key), tuple(tied))
        return Selection(running[0], "grid order", tuple(tied))


def default_rule(
    axes: Mapping[str, Sequence[AxisValue]], baseline: Mapping[str, AxisValue] | None
) -> SelectionRule:
    """``nDCG@10,R@10``, then (with a baseline) ``nearest:AXIS`` per numeric axis in the order written."""
    keys = [SelectionKey("measure", "nDCG@10"), SelectionKey("measure", "R@10")]
    if baseline is not None:
        keys += [
            SelectionKey("nearest", name)
            for name, values in axes.items()
            if all(_is_number(v) for v in values)
        ]
    return SelectionRule(tuple(keys))


# ---------------------------------------------------------------------- the grid file


@dataclass(frozen=True, eq=False)
class GridFile:
    """A parsed grid file.

    Attributes:
        source: where it was read from (for messages and the record).
        sha256: SHA-256 of the file's bytes (``""`` for a mapping given in code).
        name: the cells' name prefix.
        template: the spec template.
        axes: axis name -> values, in the order written.
        baseline: the baseline cell's axis values, or ``None``.
        rule: the file's selection rule (its ``select``, else :func:`default_rule`).
        cells: every cell, in grid order.

    """

    source: str
    sha256: str
    name: str
    template: str
    axes: Mapping[str, tuple[AxisValue, ...]]
    baseline: Mapping[str, AxisValue] | None
    rule: SelectionRule
    cells: tuple[GridCell, ...]

    @property
    def baseline_cell(self) -> GridCell:
        """The cell the others are compared with: the baseline's, else the first."""
        if self.baseline is None:
            return self.cells[0]
        wanted = dict(self.baseline)
        return next(cell for cell in self.cells if dict(cell.params) == wanted)

    def with_rule(self, rule: SelectionRule) -> GridFile:
        """The same grid under another rule (``--select``), checked against it.

        Raises:
            InvalidParameterError: the grid cannot apply ``rule``.

        """
        rule.check(self)
        return GridFile(
            self.source, self.sha256, self.name, self.template, self.axes, self.baseline, rule, self.cells
        )

    def record(self) -> dict[str, Any]:
        """JSON-ready: the file, its hash, the template, axes, baseline and rule."""
        return {
            "file": self.source,
            "sha256": self.sha256,
            "name": self.name,
            "template": self.template,
            "axes": {key: list(values) for key, values in self.axes.items()},
            "baseline": None if self.baseline is None else dict(self.baseline),
            "rule": str(self.rule),
            "rule_in_words": self.rule.describe(),
            "cells": len(self.cells),
        }


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidParameterError(f"key {key!r} given twice")
        out[key] = value
    return out


def _toml(path: Path) -> Any:
    """The standard library's TOML reader (Python 3.11+); on 3.10, a clear refusal."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: no TOML reader in the standard library
        raise InvalidParameterError(
            f"grid file {str(path)!r}: TOML grid files need Python 3.11 or later; write it as JSON"
        ) from None
    return tomllib


def load_grid(path: str | Path) -> GridFile:
    """Read and check the grid file at ``path`` (JSON, or TOML when it ends in ``.toml``).

    Raises:
        InvalidParameterError: the file is missing, unreadable, not JSON/TOML,
            or any entry is wrong (the message names the file and the entry).

    """
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_GRID_BYTES + 1)
    except OSError as exc:
        raise InvalidParameterError(
            f"grid file {str(path)!r}: cannot read it ({exc.strerror or exc})"
        ) from None
    if len(data) > MAX_GRID_BYTES:
        raise InvalidParameterError(f"grid file {str(path)!r}: larger than {MAX_GRID_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
        if path.suffix.lower() == ".toml":
            parsed: Any = _toml(path).loads(text)
        else:
            parsed = json.loads(text, object_pairs_hook=_refuse_duplicates)
    except UnicodeDecodeError:
        raise InvalidParameterError(f"grid file {str(path)!r}: not UTF-8 text") from None
    except (ValueError, RecursionError, InvalidParameterError) as exc:  # JSON/TOML syntax, a repeated key
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise InvalidParameterError(f"grid file {str(path)!r}: not valid {kind}: {exc}") from None
    return parse_grid_file(parsed, source=str(path), sha256=hashlib.sha256(data).hexdigest())


def _axis_values(source: str, axis: str, values: Any) -> tuple[AxisValue, ...]:
    where = f"grid file {source!r}: axes.{axis}"
    if _IDENT.fullmatch(axis) is None:
        raise InvalidParameterError(f"grid file {source!r}: axis name {axis!r} must be an identifier")
    if not isinstance(values, list) or not values:
        raise InvalidParameterError(f"{where} must be a non-empty list of values, got {values!r}")
    out: list[AxisValue] = []
    seen: set[tuple[str, object]] = set()
    for value in values:
        if _is_number(value):
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidParameterError(f"{where}: {value!r} is not a finite number")
        elif isinstance(value, str):
            if _IDENT.fullmatch(value) is None:
                raise InvalidParameterError(f"{where}: the value {value!r} is neither a number nor a name")
        elif not isinstance(value, bool):
            raise InvalidParameterError(f"{where}: the value {value!r} is not a number, true/false or a name")
        key = _identity(value)
        if key in seen:
            raise InvalidParameterError(f"{where}: the value {value!r} is given twice")
        seen.add(key)
        out.append(value)
    return tuple(out)


def _substitute(source: str, template: str, axes: Mapping[str, Any], point: Mapping[str, AxisValue]) -> str:
    def one(match: re.Match[str]) -> str:
        axis, constant = match["axis"], match["constant"]
        value = point[axis]
        if constant is None:
            return _text(value)
        if not _is_number(value):
            raise InvalidParameterError(
                f"grid file {source!r}: template placeholder {match[0]!r} subtracts the non-number {value!r}"
            )
        return _text(float(constant) - float(value))

    return _PLACEHOLDER.sub(one, template)


def parse_grid_file(data: Any, *, source: str = "<grid>", sha256: str = "") -> GridFile:
    """Check a grid file's parsed content (see the module docstring) and expand its cells.

    Raises:
        InvalidParameterError: naming ``source`` and the offending entry.

    """
    if not isinstance(data, dict):
        raise InvalidParameterError(
            f"grid file {source!r}: expected an object/table, got {type(data).__name__}"
        )
    unknown = [key for key in data if key not in _KEYS]
    if unknown:
        raise InvalidParameterError(
            f"grid file {source!r}: unknown entry {unknown[0]!r} (known: {', '.join(_KEYS)})"
        )
    name = data.get("name", "grid")
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise InvalidParameterError(
            f"grid file {source!r}: name {name!r} must be 1-41 letters, digits, '_', '.', '+' or '-'"
        )
    template = data.get("template")
    if not isinstance(template, str) or not template.strip():
        raise InvalidParameterError(
            f"grid file {source!r}: template must be a non-empty spec, as in "
            "'weighted(bm25, vector, weights=[{w}, {1-w}], k={k})@100', got {template!r}"
        )
    raw_axes = data.get("axes")
    if not isinstance(raw_axes, dict) or not raw_axes:
        raise InvalidParameterError(
            f"grid file {source!r}: axes must map each axis name to its values, got {raw_axes!r}"
        )
    axes = {str(axis): _axis_values(source, str(axis), values) for axis, values in raw_axes.items()}

    used: set[str] = set()
    for braced in _BRACED.finditer(template):
        match = _PLACEHOLDER.fullmatch(braced[0])
        if match is None:
            raise InvalidParameterError(
                f"grid file {source!r}: template placeholder {braced[0]!r} "
                "must be {AXIS} or {NUMBER-AXIS}"
            )
        if match["axis"] not in axes:
            raise InvalidParameterError(
                f"grid file {source!r}: template placeholder {braced[0]!r} names no axis "
                f"(axes: {', '.join(axes)})"
            )
        used.add(match["axis"])
    stray = _BRACED.sub("", template)
    if "{" in stray or "}" in stray:
        raise InvalidParameterError(f"grid file {source!r}: template {template!r} has an unmatched brace")
    for axis in axes:
        if axis not in used:
            raise InvalidParameterError(
                f"grid file {source!r}: axes.{axis} appears nowhere in the template (every cell would repeat)"
            )

    total = math.prod(len(values) for values in axes.values())
    if total > MAX_CELLS:
        raise InvalidParameterError(f"grid file {source!r}: {total:,} cells, more than {MAX_CELLS:,}")

    baseline_raw = data.get("baseline")
    baseline: dict[str, AxisValue] | None = None
    if baseline_raw is not None:
        if not isinstance(baseline_raw, dict):
            raise InvalidParameterError(
                f"grid file {source!r}: baseline must give a value for each axis, got {baseline_raw!r}"
            )
        for key in baseline_raw:
            if key not in axes:
                raise InvalidParameterError(f"grid file {source!r}: baseline.{key} names no axis")
        baseline = {}
        for axis, values in axes.items():
            if axis not in baseline_raw:
                raise InvalidParameterError(
                    f"grid file {source!r}: baseline gives no value for axis {axis!r}"
                )
            value = baseline_raw[axis]
            found = [v for v in values if _same(v, value)]
            if not found:
                raise InvalidParameterError(
                    f"grid file {source!r}: baseline.{axis} = {value!r} is not one of the axis's values "
                    f"{list(values)} (the baseline is a cell)"
                )
            baseline[axis] = found[0]

    cells: list[GridCell] = []
    names = list(axes)
    for index, values in enumerate(product(*axes.values())):
        point = dict(zip(names, values, strict=True))
        spec = _substitute(source, template, axes, point).strip()
        cell_name = f"{name}-g{index}"
        label = ", ".join(f"{key}={_text(value)}" for key, value in point.items())
        try:
            arm = parse_arm(f"{cell_name}={spec}")
        except WeftError as exc:
            raise InvalidParameterError(
                f"grid file {source!r}: the cell {label} gives {spec!r}: {exc}"
            ) from None
        if arm.learned:
            raise InvalidParameterError(
                f"grid file {source!r}: the template is learned(...); a cell must be a concrete ranking"
            )
        cells.append(GridCell(index, cell_name, point, spec, arm))

    select = data.get("select")
    if select is None:
        rule = default_rule(axes, baseline)
    else:
        rule = SelectionRule.parse(select, where=f"grid file {source!r}: select")
    grid = GridFile(source, sha256, name, template, axes, baseline, rule, tuple(cells))
    rule.check(grid)
    return grid


# ---------------------------------------------------------------------- a grid evaluated


@dataclass(frozen=True, eq=False)
class GridResult:
    """A grid evaluated on development queries, and the cell its rule picked.

    Attributes:
        grid: the grid file (its rule is the one applied).
        split: the judgements the cells were evaluated on, as named.
        queries: how many queries.
        removed: query id -> the query it duplicates, for queries the split left out.
        scores: each cell's means on ``split``, by measure, in grid order.
        selection: what the rule picked, and why.

    """

    grid: GridFile
    split: str | None
    queries: int
    removed: Mapping[str, str]
    scores: tuple[Mapping[str, float], ...]
    selection: Selection

    @property
    def picked(self) -> GridCell:
        """The cell the rule picked."""
        return self.grid.cells[self.selection.index]

    def cells_record(self) -> list[dict[str, Any]]:
        """Every cell: index, arm name, axis values, spec and means on the split."""
        return [
            {
                "index": cell.index,
                "arm": cell.name,
                "params": dict(cell.params),
                "spec": cell.spec,
                "means": dict(self.scores[cell.index]),
            }
            for cell in self.grid.cells
        ]

    def selection_record(self) -> dict[str, Any]:
        """The rule, in its text and in words, and the pick with the key that decided it."""
        picked = self.picked
        return {
            "rule": str(self.grid.rule),
            "rule_in_words": self.grid.rule.describe(),
            "tie_decimals": TIE_DECIMALS,
            **self.selection.record(),
            "arm": picked.name,
            "params": dict(picked.params),
            "spec": picked.spec,
        }

    def record(self) -> dict[str, Any]:
        """JSON-ready: the grid file, the split, every cell's scores and the pick."""
        return {
            "grid": self.grid.record(),
            "split": self.split,
            "queries": self.queries,
            "removed_query_ids": dict(self.removed),
            "cells": self.cells_record(),
            "selection": self.selection_record(),
        }


def select(
    grid: GridFile,
    scores: Sequence[Mapping[str, float]],
    *,
    split: str | None,
    queries: int,
    removed: Mapping[str, str] | None = None,
) -> GridResult:
    """Apply ``grid``'s rule to the cells' ``scores`` (grid order) and record the outcome.

    Raises:
        InvalidParameterError: a score record per cell is missing, or lacks a measure the rule reads.

    """
    params = [cell.params for cell in grid.cells]
    selection = grid.rule.pick(params, scores, grid.baseline)
    return GridResult(grid, split, queries, dict(removed or {}), tuple(dict(s) for s in scores), selection)
