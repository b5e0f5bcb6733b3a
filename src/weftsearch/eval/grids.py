"""Parameter families for sweeps and cross-validation: every built-in ``--sweep`` kind as candidate arms.

``weft-search eval --sweep KIND`` evaluates an arm family over a grid; with
``--cv N`` the same family is also the candidate set a cross-validated arm
chooses from (:mod:`weftsearch.eval.cv`). This module turns a sweep kind into
that family:

* ``rrf:ARM``: RRF k in (10, 20, 40, 60, 100) x depth in (10, 20, 50, 100, 200, 500);
* ``weights:ARM``: each non-first stream's weight in weighted RRF (others 1),
  one family per stream;
* ``bm25``: BM25 k1 x b;
* ``grid:ARM:NAME=V,V,...;NAME=V,...``: any grid over the arm's parameters.
  ``k`` is RRF's constant, ``weight`` the weight of the arm's last stream in
  weighted RRF (the others 1), ``depth`` the over-fetch depth; every other
  name is a keyword of the arm's last scorer expression (the graph stream of
  ``rrf(bm25, graph(seed=bm25))``, or the one scorer of a one-scorer arm), so
  ``grid:graph:seed_n=1,3,5,10;max_depth=1,2,3`` sweeps the graph scorer's own
  parameters. Values are numbers, ``true`` or ``false``, or names.

This is the part of the harness that rewrites arm specs, so it works on
:class:`~weftsearch.ranking.specs.ArmSpec` and builds through an
:class:`~weftsearch.ranking.specs.ArmBuilder`; it never names a scorer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import product
from typing import Any

from weftsearch.errors import InvalidParameterError
from weftsearch.fusion import RRF, WeightedRRF
from weftsearch.ranking.arm import Arm
from weftsearch.ranking.specs import FUSER_NAMES, ArmBuilder, ArmSpec, Expr, Value

__all__ = [
    "RRF_KS",
    "SWEEP_DEPTHS",
    "STREAM_WEIGHTS",
    "BM25_K1",
    "BM25_B",
    "Family",
    "families",
    "parse_grid",
]

#: The grids of the built-in sweeps (``weftsearch.cli.eval`` sweeps these).
RRF_KS = (10.0, 20.0, 40.0, 60.0, 100.0)
SWEEP_DEPTHS = (10, 20, 50, 100, 200, 500)
STREAM_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
BM25_K1 = (0.6, 0.9, 1.2, 1.5, 2.0)
BM25_B = (0.3, 0.5, 0.75, 0.9, 1.0)

#: Grid names that configure the fusion rather than the last scorer.
FUSION_PARAMETERS = ("k", "weight", "depth")


@dataclass(frozen=True, eq=False)
class Family:
    """An arm family over a grid.

    Attributes:
        label: the sweep's name in reports.
        target: the arm it varies (``None`` for ``bm25``).
        short: a short tag for the cross-validated arm's name (``rrf``, ``w2``, ``grid``).
        grid: parameter -> values, in sweep order.
        make_arm: the arm at one grid point (keywords = the grid's parameters).

    """

    label: str
    target: str | None
    short: str
    grid: Mapping[str, tuple[Any, ...]]
    make_arm: Callable[..., Arm]

    def points(self) -> list[dict[str, Any]]:
        """Every grid point, in sweep order (cartesian product, last parameter fastest)."""
        names = list(self.grid)
        return [dict(zip(names, values, strict=True)) for values in product(*self.grid.values())]

    def candidates(self) -> list[tuple[str, Arm]]:
        """``(label, arm)`` at every grid point, in sweep order (the chooser's tie-break order)."""
        return [(point_label(point), self.make_arm(**point)) for point in self.points()]

    def cv_name(self) -> str:
        """The name of the arm cross-validated over this family."""
        return f"{self.target or 'bm25'}-cv-{self.short}"


def point_label(point: Mapping[str, Any]) -> str:
    """``k=60, depth=100``: a grid point as text."""
    return ", ".join(
        f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in point.items()
    )


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def _grid_value(text: str, kind: str) -> Value:
    text = text.strip()
    if not text:
        raise InvalidParameterError(f"sweep {kind!r}: an empty value")
    if _NUMBER.fullmatch(text):
        return int(text) if re.fullmatch(r"[-+]?\d+", text) else float(text)
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
        return text
    raise InvalidParameterError(f"sweep {kind!r}: cannot read the value {text!r}")


def parse_grid(kind: str) -> tuple[str, dict[str, tuple[Value, ...]]]:
    """``grid:ARM:a=0.1,0.3;iterations=1,2`` -> ``("ARM", {"a": (0.1, 0.3), "iterations": (1, 2)})``.

    Raises:
        InvalidParameterError: not of that form, a parameter given twice or with no value.

    """
    parts = kind.split(":", 2)
    if len(parts) != 3 or parts[0] != "grid" or not parts[1] or not parts[2].strip():
        raise InvalidParameterError(
            f"cannot read sweep {kind!r}: expected grid:ARM:NAME=V,V;NAME=V (e.g. grid:graph:seed_n=1,3,5)"
        )
    grid: dict[str, tuple[Value, ...]] = {}
    for item in parts[2].split(";"):
        name, equals, values = item.partition("=")
        name = name.strip()
        if not equals or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?", name) is None:
            raise InvalidParameterError(f"sweep {kind!r}: expected NAME=V,V,... in {item.strip()!r}")
        if name in grid:
            raise InvalidParameterError(f"sweep {kind!r}: parameter {name!r} given twice")
        grid[name] = tuple(_grid_value(v, kind) for v in values.split(","))
    return parts[1], grid


def _with_keyword(expr: Expr, name: str, value: Value) -> Expr:
    kwargs = dict(expr.kwargs)
    kwargs[name] = value
    return Expr(expr.name, expr.args, tuple(kwargs.items()))


def _grid_family(kind: str, spec: ArmSpec, builder: ArmBuilder) -> Family:
    target, grid = parse_grid(kind)
    if spec.learned:
        raise InvalidParameterError(f"sweep {kind!r}: arm {target!r} learns its fuser; sweep a fixed arm")
    fused = spec.expr.name in FUSER_NAMES
    streams = len(spec.expr.args) if fused else 1
    if not fused and ("k" in grid or "weight" in grid):
        raise InvalidParameterError(f"sweep {kind!r}: arm {target!r} has one stream; k and weight need two")
    for value in grid.get("depth", ()):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidParameterError(f"sweep {kind!r}: depth must be a positive integer, got {value!r}")
    for name in ("k", "weight"):
        for value in grid.get(name, ()):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidParameterError(f"sweep {kind!r}: {name} must be a number, got {value!r}")

    names = list(grid)
    order = {values: i for i, values in enumerate(product(*grid.values()))}

    def make_arm(**point: Any) -> Arm:
        last = spec.expr.args[-1] if fused else spec.expr
        for name, value in point.items():
            if name not in FUSION_PARAMETERS:
                last = _with_keyword(last, name, value)
        expr = Expr(spec.expr.name, (*spec.expr.args[:-1], last), spec.expr.kwargs) if fused else last
        depth = point.get("depth", spec.depth)
        arm = builder.arm(ArmSpec(spec.name, expr, depth))
        if "k" in point or "weight" in point:
            k = float(point.get("k", 60.0))
            if "weight" in point:
                weights = [1.0] * streams
                weights[-1] = float(point["weight"])
                fuser: Any = WeightedRRF(weights, k=k)
            else:
                fuser = RRF(k=k)
            arm = Arm(arm.name, arm.scorers, fuser, depth=arm.depth, filter=arm.filter)
        index = order[tuple(point[n] for n in names)]
        return Arm(f"{spec.name}-g{index}", arm.scorers, arm.fuser, depth=arm.depth, filter=arm.filter)

    return Family(f"{target}: {' x '.join(grid)}", target, "grid", grid, make_arm)


def families(
    kind: str, arms: Mapping[str, Arm], specs: Mapping[str, ArmSpec], builder: ArmBuilder
) -> list[Family]:
    """The arm families of sweep ``kind`` (one, or one per weighted stream for ``weights:ARM``).

    Raises:
        InvalidParameterError: an unknown kind, an unknown arm, a bad grid.

    """
    name, _, target = kind.partition(":")
    if name == "grid":
        arm_name = kind.split(":", 2)[1] if kind.count(":") >= 2 else ""
        if arm_name not in specs:
            raise InvalidParameterError(f"sweep {kind!r}: no arm {arm_name!r} (arms: {', '.join(specs)})")
        return [_grid_family(kind, specs[arm_name], builder)]
    if name == "bm25":
        if target:
            raise InvalidParameterError("the bm25 sweep takes no arm: --sweep bm25")

        def bm25_arm(k1: float, b: float) -> Arm:
            return builder.arm(f"bm25-{k1:g}-{b:g}=bm25(k1={k1!r}, b={b!r})")

        return [Family("bm25 k1 x b", None, "k1b", {"k1": BM25_K1, "b": BM25_B}, bm25_arm)]
    if name not in ("rrf", "weights"):
        raise InvalidParameterError(
            f"unknown sweep {kind!r} (known: rrf:ARM, weights:ARM, bm25, grid:ARM:...)"
        )
    if target not in arms:
        raise InvalidParameterError(f"sweep {kind!r}: no arm {target!r} (arms: {', '.join(arms)})")
    arm = arms[target]
    if name == "rrf" and len(arm.scorers) < 2:
        raise InvalidParameterError(
            f"sweep {kind!r}: arm {target!r} has one stream, which passes through unfused; nothing to sweep"
        )
    if name == "rrf":

        def rrf_arm(k: float, depth: int) -> Arm:
            return Arm(f"{arm.name}-k{k:g}-d{depth}", arm.scorers, RRF(k=k), depth=depth, filter=arm.filter)

        return [
            Family(f"{arm.name}: RRF k x depth", target, "rrf", {"k": RRF_KS, "depth": SWEEP_DEPTHS}, rrf_arm)
        ]
    if len(arm.scorers) < 2:
        raise InvalidParameterError(f"sweep {kind!r}: arm {target!r} has one stream; nothing to weigh")
    out = []
    for stream in range(1, len(arm.scorers)):

        def weighted_arm(weight: float, stream: int = stream) -> Arm:
            weights = [1.0] * len(arm.scorers)
            weights[stream] = weight
            return Arm(
                f"{arm.name}-w{stream + 1}-{weight:g}",
                arm.scorers,
                WeightedRRF(weights),
                depth=arm.depth,
                filter=arm.filter,
            )

        label = f"{arm.name}: weight of stream {stream + 1} ({arm.scorers[stream].name}), others 1"
        out.append(Family(label, target, f"w{stream + 1}", {"weight": STREAM_WEIGHTS}, weighted_arm))
    return out
