"""Arms written as text, for the command line and for experiment files.

This is the one part of :mod:`weftsearch.eval` that knows scorer names: it
turns ``"hybrid=rrf(bm25, vector, k=60)@100"`` into an
:class:`~weftsearch.ranking.arm.Arm`. The harness itself receives built arms.

Grammar::

    arm    := NAME "=" expr ["@" DEPTH] ["where" FILTER]
    expr   := IDENT ["(" [item ("," item)*] ")"]
    item   := IDENT "=" value | expr
    value  := NUMBER | "true" | "false" | IDENT | "[" value ("," value)* "]" | expr

Expressions and lists nest at most :data:`MAX_SPEC_DEPTH` (32) deep, and a
number must be a finite float64 (an integer of at most 309 digits, no
overflow to infinity or underflow to zero): anything else is an
:class:`~weftsearch.errors.InvalidParameterError` naming it.

An ``expr`` whose name is a fuser (``rrf``, ``weighted``, ``score``, or
``learned``) takes scorers as its positional items and its own parameters as
keywords: ``rrf(bm25, vector, k=60)``, ``weighted(bm25, vector, weights=[1, 0.5])``,
``score(bm25, vector, norm=zscore)``. ``learned(bm25, vector)`` marks an arm
whose fuser is chosen on development queries (the caller does the choosing; see
:func:`~weftsearch.eval.harness.learn_fusion`). Any other ``expr`` is one
scorer, and an arm of one scorer is not fused: its run is the scorer's own
stream with the scorer's own scores, as a one-signal search ranks it (see
:mod:`weftsearch.eval.runs`), so the run's scores tie exactly where the
scorer's do. (The :class:`~weftsearch.ranking.arm.Arm` still holds a fuser, RRF,
which is never called.)

Scorers known by default (keywords are the constructors' parameters)::

    bm25(k1=1.2, b=0.75)
    bm25f(FIELD=WEIGHT, ..., k1=1.2, b=0.75, b.FIELD=B, ...)
                                         BM25F over named text fields (see below)
    vector(nprobe=20)                    (or vector(exact=true): scan every vector)
    graph(seed=bm25, max_depth=3, seed_n=5, keep_seeds=false, directed=false)
    pagerank(seed=bm25, damping=0.85, seed_n=5, keep_seeds=false, directed=false, restart=uniform)
                                         (restart=score: seed-weighted restart)
    recency(half_life=DAYS)
    propagate(seed=bm25, a=0.3, iterations=2, depth=100, expand=false, directed=false)

``bm25f`` is :class:`~weftsearch.scorers.BM25Scorer` with ``fields=`` and
``field_b=``: each bare keyword other than ``k1`` and ``b`` is a text field of
the index's schema and its weight (at least one), ``b.FIELD`` is that field's
own length normalisation (the others use ``b``), and ``w.FIELD`` is a weight
spelled explicitly (for a field named ``k1`` or ``b``)::

    bm25f(title=2.0, text=1.0)                   title counts twice the body
    bm25f(title=2, text=1, k1=0.9, b.title=0.3)  title lengths barely normalised

A field name has no dot, so ``b.title`` can name nothing but a ``b``. The
expression prints as written and reads back equal (``str(parse_arm(s).expr)``),
so a grid template (``bm25f(title={w}, text=1)``), a saved profile, the
server's ``rank`` and the CLI's ``--rank`` all take it.

Add your own with :func:`register_scorer`. Equal scorer expressions build one
shared object (within one :class:`ArmBuilder`), so two arms that both use
``bm25`` compute its stream once.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Union

from weftsearch.engine.filters import Filter, parse_filter
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.errors import InvalidParameterError, UnknownSignalError, WeftError
from weftsearch.fusion import RRF, ScoreFusion, WeightedRRF
from weftsearch.ranking.arm import Arm
from weftsearch.scorers import (
    BM25Scorer,
    GraphScorer,
    PageRankScorer,
    PropagationScorer,
    RecencyScorer,
    VectorScorer,
)
from weftsearch.scorers.vector import DEFAULT_NPROBE

__all__ = [
    "Expr",
    "ArmSpec",
    "parse_arm",
    "ArmBuilder",
    "register_scorer",
    "SCORER_FACTORIES",
    "FUSER_NAMES",
    "LEARNED",
    "MAX_SPEC_DEPTH",
]

_DAY = 86_400.0

#: The fuser name that marks an arm whose fuser is learned on development queries.
LEARNED = "learned"

#: Deepest nesting of expressions and lists in a spec (``rrf(graph(seed=bm25))`` is 2 deep):
#: the parser, and every pass over the parsed spec, recurses once per level.
MAX_SPEC_DEPTH = 32

#: Names an expression may use as its fuser.
FUSER_NAMES = ("rrf", "weighted", "score", LEARNED)

Value = Union[float, int, bool, str, "Expr", list["Value"]]


@dataclass(frozen=True, slots=True)
class Expr:
    """A parsed ``name(positional..., key=value...)``."""

    name: str
    args: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Value], ...] = ()

    def __str__(self) -> str:
        parts = [str(a) for a in self.args] + [f"{k}={_value_text(v)}" for k, v in self.kwargs]
        return self.name if not parts else f"{self.name}({', '.join(parts)})"


def _value_text(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return str(value)


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """A parsed arm: its name, its expression and the over-fetch depth (``None``: default)."""

    name: str
    expr: Expr
    depth: int | None
    filter: Filter | None = None

    @property
    def learned(self) -> bool:
        """Whether the arm's fuser is to be learned on development queries."""
        return self.expr.name == LEARNED

    def __str__(self) -> str:
        text = f"{self.name}={self.expr}" + ("" if self.depth is None else f"@{self.depth}")
        return text if self.filter is None else f"{text} where {self.filter}"


#: A text field's name (:class:`~weftsearch.schema.TextField`): never a dot, so ``b.title`` is unambiguous.
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

#: Where an arm's filter starts: the word ``where`` between spaces (the rest is the filter).
_WHERE = re.compile(r"\s+where\s+", re.IGNORECASE)

_TOKEN = re.compile(
    r"\s*(?:(?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)|(?P<ident>[A-Za-z_][A-Za-z0-9_.\-]*)"
    r"|(?P<punct>[()\[\],=@]))"
)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        position = 0
        while position < len(text):
            if text[position:].strip() == "":
                break
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                raise self.error(f"unexpected character {text[position:].lstrip()[:1]!r}", position)
            kind = match.lastgroup
            assert kind is not None
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            position = match.end()
        self.at = 0
        self.depth = 0

    def enter(self) -> None:
        """One level deeper (an expression's items, a list's values); refused past the limit."""
        self.depth += 1
        if self.depth > MAX_SPEC_DEPTH:
            raise self.error(f"it nests more than {MAX_SPEC_DEPTH} deep (expressions and lists)")

    def error(self, message: str, position: int | None = None) -> InvalidParameterError:
        if position is None:
            position = self.tokens[self.at][2] if self.at < len(self.tokens) else len(self.text)
        return InvalidParameterError(
            f"cannot read arm {_shown(self.text)}: {message} at column {position + 1}"
        )

    def peek(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            return ("end", "")
        kind, text, _ = self.tokens[self.at]
        return (kind, text)

    def take(self, kind: str, text: str | None = None) -> str:
        got_kind, got_text = self.peek()
        if got_kind != kind or (text is not None and got_text != text):
            wanted = text if text is not None else kind
            raise self.error(f"expected {wanted!r}, found {got_text or 'the end'!r}")
        self.at += 1
        return got_text

    def expr(self) -> Expr:
        name = self.take("ident")
        if self.peek() != ("punct", "("):
            return Expr(name)
        self.take("punct", "(")
        self.enter()
        args: list[Expr] = []
        kwargs: dict[str, Value] = {}
        if self.peek() != ("punct", ")"):
            while True:
                kind, text = self.peek()
                nxt = self.tokens[self.at + 1][1] if self.at + 1 < len(self.tokens) else ""
                if kind == "ident" and nxt == "=":
                    self.at += 2
                    if text in kwargs:
                        raise self.error(f"parameter {text!r} given twice")
                    kwargs[text] = self.value()
                else:
                    if kwargs:
                        raise self.error("a positional item after a keyword")
                    args.append(self.expr())
                if self.peek() == ("punct", ","):
                    self.take("punct", ",")
                    continue
                break
        self.take("punct", ")")
        self.depth -= 1
        return Expr(name, tuple(args), tuple(kwargs.items()))

    def value(self) -> Value:
        kind, text = self.peek()
        if kind == "number":
            number = self.number(text)
            self.at += 1
            return number
        if (kind, text) == ("punct", "["):
            self.take("punct", "[")
            self.enter()
            items: list[Value] = [self.value()]
            while self.peek() == ("punct", ","):
                self.take("punct", ",")
                items.append(self.value())
            self.take("punct", "]")
            self.depth -= 1
            return items
        if kind == "ident":
            if text in ("true", "false"):
                self.at += 1
                return text == "true"
            following = self.tokens[self.at + 1][1] if self.at + 1 < len(self.tokens) else ""
            if following == "(" or text in SCORER_FACTORIES:
                return self.expr()
            self.at += 1
            return text
        raise self.error(f"expected a value, found {text or 'the end'!r}")

    def number(self, text: str) -> int | float:
        """The number ``text`` spells, if float64 holds it (refused, not an OverflowError or 0)."""
        shown = _shown(text)
        if re.fullmatch(r"[-+]?\d+", text):
            # int() refuses over 4,300 digits (a ValueError); past 309 it is no float64 anyway.
            digits = text.lstrip("+-").lstrip("0")
            if len(digits) <= 309 and abs(int(text)) <= sys.float_info.max:
                return int(text)
            raise self.error(f"number {shown} is out of range (an integer of {len(digits):,} digits)")
        value = float(text)
        if not math.isfinite(value):
            raise self.error(f"number {shown} is out of range (beyond float64)")
        if value == 0.0 and any(c in "123456789" for c in text.lower().split("e")[0]):
            raise self.error(f"number {shown} underflows to 0 in float64")
        return value


def _shown(text: str) -> str:
    """``text`` quoted for a message, its middle left out when long (a spec may be 4,096 characters)."""
    if len(text) <= 120:
        return repr(text)
    return f"{text[:60]!r}...{text[-30:]!r} ({len(text):,} characters)"


def parse_arm(text: str) -> ArmSpec:
    """Parse ``NAME=EXPR[@DEPTH] [where FILTER]``.

    FILTER is the string form of :func:`~weftsearch.engine.filters.parse_filter`.

    Raises:
        InvalidParameterError: the text does not follow the grammar (the
            message gives the column).

    """
    if not isinstance(text, str):
        raise InvalidParameterError(f"an arm spec must be a string, got {text!r}")
    where = _WHERE.search(text)
    filter_ = None
    if where is not None:
        try:
            filter_ = parse_filter(text[where.end() :])
        except WeftError as exc:
            raise InvalidParameterError(f"arm spec {_shown(text)}: its filter: {exc}") from None
        text = text[: where.start()]
    parser = _Parser(text)
    name = parser.take("ident")
    parser.take("punct", "=")
    expr = parser.expr()
    depth: int | None = None
    if parser.peek() == ("punct", "@"):
        parser.take("punct", "@")
        raw = parser.take("number")
        if not raw.isdigit() or int(raw) < 1:
            raise parser.error(f"depth must be a positive integer, got {raw!r}")
        depth = int(raw)
    if parser.peek()[0] != "end":
        raise parser.error(f"unexpected {parser.peek()[1]!r}")
    return ArmSpec(name, expr, depth, filter_)


# ---------------------------------------------------------------------- building

ScorerFactory = Callable[["ArmBuilder", Expr], Scorer]


def _params(expr: Expr, allowed: Sequence[str]) -> dict[str, Value]:
    params = dict(expr.kwargs)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise InvalidParameterError(
            f"{expr.name}: unknown parameter(s) {', '.join(unknown)} (known: {', '.join(allowed) or 'none'})"
        )
    if expr.args:
        raise InvalidParameterError(f"{expr.name}: takes no positional items, got {len(expr.args)}")
    return params


def _number(expr: Expr, params: Mapping[str, Value], name: str, default: float) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidParameterError(f"{expr.name}: {name} must be a number, got {_value_text(value)}")
    return float(value)


def _integer(expr: Expr, params: Mapping[str, Value], name: str, default: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{expr.name}: {name} must be an integer, got {_value_text(value)}")
    return value


def _flag(expr: Expr, params: Mapping[str, Value], name: str) -> bool:
    value = params.get(name, False)
    if not isinstance(value, bool):
        raise InvalidParameterError(f"{expr.name}: {name} must be true or false, got {_value_text(value)}")
    return value


def _seed(builder: ArmBuilder, expr: Expr, params: Mapping[str, Value]) -> Scorer | None:
    seed = params.get("seed")
    if seed is None:
        return None
    if isinstance(seed, str):
        seed = Expr(seed)
    if not isinstance(seed, Expr):
        raise InvalidParameterError(f"{expr.name}: seed must be a scorer, got {_value_text(seed)}")
    return builder.scorer(seed)


def _bm25(builder: ArmBuilder, expr: Expr) -> Scorer:
    params = _params(expr, ("k1", "b"))
    return BM25Scorer(k1=_number(expr, params, "k1", 1.2), b=_number(expr, params, "b", 0.75))


#: ``bm25f``'s own parameters; every other bare keyword is a field weight.
_BM25F_PARAMS = ("k1", "b")


def _bm25f(builder: ArmBuilder, expr: Expr) -> Scorer:
    if expr.args:
        raise InvalidParameterError(f"bm25f: takes no positional items, got {len(expr.args)}")
    weights: dict[str, float] = {}
    per_field_b: dict[str, float] = {}
    for key, _ in expr.kwargs:
        if key in _BM25F_PARAMS:
            continue
        prefix, dot, field = key.partition(".")
        if dot and prefix in ("b", "w") and _FIELD_NAME.fullmatch(field):
            target = per_field_b if prefix == "b" else weights
            label = f"{prefix}.{field}"
        elif not dot and _FIELD_NAME.fullmatch(key):
            target, field, label = weights, key, key
        else:
            raise InvalidParameterError(
                f"bm25f: {key!r} is neither k1, b, a field weight (title=2), b.FIELD nor w.FIELD"
            )
        if field in target:
            raise InvalidParameterError(f"bm25f: field {field!r} given twice (as {label})")
        target[field] = _number(expr, dict(expr.kwargs), key, 0.0)
    if not weights:
        raise InvalidParameterError(
            "bm25f: give at least one field and its weight, as in bm25f(title=2.0, text=1.0)"
        )
    params = dict(expr.kwargs)
    return BM25Scorer(
        k1=_number(expr, params, "k1", 1.2),
        b=_number(expr, params, "b", 0.75),
        fields=weights,
        field_b=per_field_b,
        name="bm25f",
    )


def _vector(builder: ArmBuilder, expr: Expr) -> Scorer:
    params = _params(expr, ("nprobe", "exact"))
    if _flag(expr, params, "exact"):
        if "nprobe" in params:
            raise InvalidParameterError("vector: give nprobe or exact=true, not both")
        return VectorScorer(nprobe=None)
    return VectorScorer(nprobe=_integer(expr, params, "nprobe", DEFAULT_NPROBE))


_GRAPH_KEYS = ("seed", "seed_n", "keep_seeds", "directed")


def _graph(builder: ArmBuilder, expr: Expr) -> Scorer:
    params = _params(expr, (*_GRAPH_KEYS, "max_depth"))
    return GraphScorer(
        _seed(builder, expr, params),
        max_depth=_integer(expr, params, "max_depth", 3),
        seed_n=_integer(expr, params, "seed_n", 5),
        keep_seeds=_flag(expr, params, "keep_seeds"),
        directed=_flag(expr, params, "directed"),
    )


def _pagerank(builder: ArmBuilder, expr: Expr) -> Scorer:
    params = _params(expr, (*_GRAPH_KEYS, "damping", "restart"))
    restart = params.get("restart", "uniform")
    if restart not in ("uniform", "score"):
        raise InvalidParameterError(f"pagerank: restart must be uniform or score, got {_value_text(restart)}")
    return PageRankScorer(
        _seed(builder, expr, params),
        damping=_number(expr, params, "damping", 0.85),
        seed_n=_integer(expr, params, "seed_n", 5),
        keep_seeds=_flag(expr, params, "keep_seeds"),
        directed=_flag(expr, params, "directed"),
        restart="score" if restart == "score" else "uniform",
    )


def _recency(builder: ArmBuilder, expr: Expr) -> Scorer:
    params = _params(expr, ("half_life",))
    if "half_life" not in params:
        raise InvalidParameterError("recency: half_life (days) is required, as in recency(half_life=365)")
    return RecencyScorer(half_life=_number(expr, params, "half_life", 0.0) * _DAY)


def _propagate(builder: ArmBuilder, expr: Expr) -> Scorer:
    params = _params(expr, ("seed", "a", "iterations", "depth", "expand", "directed"))
    seed = _seed(builder, expr, params)
    if seed is None:
        raise InvalidParameterError("propagate: seed is required, as in propagate(seed=bm25)")
    return PropagationScorer(
        seed,
        a=_number(expr, params, "a", 0.3),
        iterations=_integer(expr, params, "iterations", 2),
        depth=_integer(expr, params, "depth", 100),
        expand=_flag(expr, params, "expand"),
        directed=_flag(expr, params, "directed"),
    )


#: Scorer name -> factory. Extend with :func:`register_scorer`.
SCORER_FACTORIES: dict[str, ScorerFactory] = {
    "bm25": _bm25,
    "bm25f": _bm25f,
    "vector": _vector,
    "graph": _graph,
    "pagerank": _pagerank,
    "recency": _recency,
    "propagate": _propagate,
}


def register_scorer(name: str, factory: ScorerFactory, *, replace: bool = False) -> None:
    """Make ``name(...)`` usable in arm specs.

    ``factory(builder, expr)`` returns the scorer; read its keywords from
    ``expr.kwargs`` and build nested scorers (seeds) with ``builder.scorer``.

    Raises:
        InvalidParameterError: a bad name, a fuser's name, or a taken name
            without ``replace=True``.

    """
    if not isinstance(name, str) or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is None:
        raise InvalidParameterError(f"a scorer name must be an identifier, got {name!r}")
    if name in FUSER_NAMES:
        raise InvalidParameterError(f"{name!r} names a fuser")
    if name in SCORER_FACTORIES and not replace:
        raise InvalidParameterError(f"scorer {name!r} is already registered (pass replace=True)")
    SCORER_FACTORIES[name] = factory


class ArmBuilder:
    """Builds arms from specs, sharing one scorer object per distinct expression."""

    def __init__(self, default_depth: int = 100) -> None:
        self.default_depth = default_depth
        self._scorers: dict[str, Scorer] = {}

    def scorer(self, expr: Expr) -> Scorer:
        """The scorer of ``expr``, built once per distinct expression text.

        Raises:
            UnknownSignalError: an unknown scorer name.
            InvalidParameterError: bad parameters.

        """
        key = str(expr)
        found = self._scorers.get(key)
        if found is None:
            factory = SCORER_FACTORIES.get(expr.name)
            if factory is None:
                known = ", ".join(sorted(SCORER_FACTORIES))
                raise UnknownSignalError(f"unknown scorer {expr.name!r} (known: {known})")
            found = factory(self, expr)
            self._scorers[key] = found
        return found

    def fuser(self, expr: Expr, streams: int) -> Fuser:
        """The fuser of a fuser expression (``learned`` gives a placeholder RRF).

        Raises:
            InvalidParameterError: bad parameters or a weight count that does
                not match the streams.

        """
        params = dict(expr.kwargs)
        if expr.name in ("rrf", LEARNED):
            unknown = sorted(set(params) - {"k"})
            if unknown:
                raise InvalidParameterError(
                    f"{expr.name}: unknown parameter(s) {', '.join(unknown)} (known: k)"
                )
            return RRF(k=_number(expr, params, "k", 60.0))
        weights = params.get("weights")
        if weights is not None and (
            not isinstance(weights, list)
            or any(isinstance(w, bool) or not isinstance(w, (int, float)) for w in weights)
        ):
            raise InvalidParameterError(f"{expr.name}: weights must be a list of numbers, as in [1, 0.5]")
        if weights is not None and len(weights) != streams:
            raise InvalidParameterError(f"{expr.name}: {len(weights)} weights for {streams} scorers")
        floats = None if weights is None else [float(w) for w in weights]  # type: ignore[arg-type]
        if expr.name == "weighted":
            unknown = sorted(set(params) - {"k", "weights"})
            if unknown:
                raise InvalidParameterError(f"weighted: unknown parameter(s) {', '.join(unknown)}")
            if floats is None:
                raise InvalidParameterError(
                    "weighted: weights are required, as in weighted(a, b, weights=[1, 0.5])"
                )
            return WeightedRRF(floats, k=_number(expr, params, "k", 60.0))
        unknown = sorted(set(params) - {"weights", "norm"})
        if unknown:
            raise InvalidParameterError(f"score: unknown parameter(s) {', '.join(unknown)}")
        norm = params.get("norm", "minmax")
        if norm not in ("minmax", "zscore"):
            raise InvalidParameterError(f"score: norm must be minmax or zscore, got {_value_text(norm)}")
        return ScoreFusion(floats, norm="zscore" if norm == "zscore" else "minmax")

    def arm(self, spec: ArmSpec | str) -> Arm:
        """The arm of ``spec`` (parsed first when a string).

        Raises:
            InvalidParameterError: a bad spec.
            UnknownSignalError: an unknown scorer.

        """
        if isinstance(spec, str):
            spec = parse_arm(spec)
        depth = self.default_depth if spec.depth is None else spec.depth
        if spec.expr.name in FUSER_NAMES:
            if not spec.expr.args:
                raise InvalidParameterError(f"arm {spec.name!r}: {spec.expr.name} needs at least one scorer")
            scorers = tuple(self.scorer(arg) for arg in spec.expr.args)
            fuser = self.fuser(spec.expr, len(scorers))
        else:
            scorers = (self.scorer(spec.expr),)
            fuser = RRF()  # never called: one stream passes through (weftsearch.eval.runs)
        notes = "fuser chosen on development queries" if spec.learned else ""
        return Arm(spec.name, scorers, fuser, depth=depth, notes=notes, filter=spec.filter)
