"""Arm specs: the grammar, the scorer registry, shared scorer objects, and every bad spec a typed error."""

from __future__ import annotations

import pytest

from weftsearch import RRF, BM25Scorer, GraphScorer, PageRankScorer, RecencyScorer
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream
from weftsearch.errors import InvalidParameterError, UnknownSignalError
from weftsearch.fusion import WeightedRRF
from weftsearch.ranking.arm import PASS_THROUGH
from weftsearch.ranking.specs import SCORER_FACTORIES, ArmBuilder, Expr, parse_arm, register_scorer
from weftsearch.scorers import VectorScorer


def test_parse_round_trips_to_canonical_text() -> None:
    spec = parse_arm("hy = rrf( bm25(k1=0.9,b=0.4), vector, k=60 ) @ 200")
    assert spec.name == "hy"
    assert spec.depth == 200
    assert str(spec) == "hy=rrf(bm25(k1=0.9, b=0.4), vector, k=60)@200"
    assert parse_arm(str(spec)) == spec


def test_values_numbers_flags_lists_and_nested_scorers() -> None:
    spec = parse_arm("g=weighted(bm25, graph(seed=bm25, keep_seeds=true, max_depth=2), weights=[1, 0.5])")
    graph = spec.expr.args[1]
    assert dict(graph.kwargs) == {"seed": Expr("bm25"), "keep_seeds": True, "max_depth": 2}
    assert dict(spec.expr.kwargs) == {"weights": [1, 0.5]}


def test_builder_builds_the_named_objects() -> None:
    builder = ArmBuilder(default_depth=50)
    text = builder.arm("text=bm25(k1=0.9, b=0.4)")
    assert isinstance(text.scorers[0], BM25Scorer)
    assert (text.scorers[0].k1, text.scorers[0].b) == (0.9, 0.4)
    assert text.depth == 50
    # One scorer: not fused (its stream passes through); the record says so.
    assert text.describe()["fuser"] == {"name": "none", "repr": PASS_THROUGH}
    hybrid = builder.arm("h=rrf(bm25, vector, k=20)@300")
    assert isinstance(hybrid.scorers[1], VectorScorer)
    assert isinstance(hybrid.fuser, RRF) and hybrid.fuser.k == 20 and hybrid.depth == 300
    weighted = builder.arm("w=weighted(bm25, vector, weights=[2, 1], k=10)")
    assert isinstance(weighted.fuser, WeightedRRF)
    assert builder.arm("z=score(bm25, vector, norm=zscore)").fuser.norm == "zscore"  # type: ignore[attr-defined]
    graph = builder.arm("g=rrf(bm25, graph(seed=bm25, keep_seeds=true))").scorers[1]
    assert isinstance(graph, GraphScorer) and graph.keep_seeds
    pagerank = builder.arm("p=rrf(bm25, pagerank(seed=bm25(k1=2), damping=0.5))").scorers[1]
    assert isinstance(pagerank, PageRankScorer) and pagerank.damping == 0.5
    recency = builder.arm("r=rrf(bm25, recency(half_life=2))").scorers[1]
    assert isinstance(recency, RecencyScorer) and recency.half_life == 2 * 86_400.0
    assert builder.arm("l=learned(bm25, vector)").notes


def test_equal_expressions_share_one_scorer_object() -> None:
    builder = ArmBuilder()
    a = builder.arm("a=bm25")
    b = builder.arm("b=rrf(bm25, graph(seed=bm25))")
    assert a.scorers[0] is b.scorers[0]
    assert builder.arm("c=bm25(k1=1.2)").scorers[0] is not a.scorers[0]  # different text, own object


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        "x=",
        "x y",
        "1x=bm25",
        "x=bm25(",
        "x=bm25)",
        "x=bm25(k1=1, k1=2)",
        "x=rrf(k=1, bm25)",
        "x=bm25@0",
        "x=bm25@1.5",
        "x=bm25 extra",
        "x=bm25(k1=$)",
        "x=rrf()",
        "x=bm25(k2=1)",
        "x=bm25(k1=true)",
        "x=bm25(k1=[1])",
        "x=graph(max_depth=1.5)",
        "x=graph(keep_seeds=1)",
        "x=graph(seed=3)",
        "x=weighted(bm25, vector)",
        "x=weighted(bm25, vector, weights=[1])",
        "x=weighted(bm25, vector, weights=[1, a])",
        "x=score(bm25, norm=l2)",
        "x=rrf(bm25, q=1)",
        "x=recency",
        "x=vector(dim=3)",
        "x=bm25(vector)",
        "bad name=bm25",
    ],
)
def test_bad_specs_are_typed_errors(text: str) -> None:
    with pytest.raises(InvalidParameterError):
        ArmBuilder().arm(text)


def test_unknown_scorer_names_the_known_ones() -> None:
    with pytest.raises(UnknownSignalError, match="bm25"):
        ArmBuilder().arm("x=nosuch")


class _Constant:
    name = "constant"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return Stream.empty()


def test_register_a_user_scorer() -> None:
    register_scorer("constant_test", lambda builder, expr: _Constant())
    try:
        arm = ArmBuilder().arm("c=rrf(bm25, constant_test)")
        assert isinstance(arm.scorers[1], _Constant)
        with pytest.raises(InvalidParameterError, match="already registered"):
            register_scorer("constant_test", lambda builder, expr: _Constant())
        with pytest.raises(InvalidParameterError):
            register_scorer("rrf", lambda builder, expr: _Constant())
        with pytest.raises(InvalidParameterError):
            register_scorer("not a name", lambda builder, expr: _Constant())
    finally:
        SCORER_FACTORIES.pop("constant_test", None)


def test_an_arm_can_carry_a_filter() -> None:
    from weftsearch.engine.filters import F
    from weftsearch.ranking.specs import ArmBuilder, parse_arm

    spec = parse_arm("recent=rrf(bm25, vector)@50 where year >= 1990 and not exists(retracted)")
    assert spec.depth == 50
    assert spec.filter == (F("year") >= 1990) & ~F("retracted").exists()
    assert str(spec) == "recent=rrf(bm25, vector)@50 where year >= 1990 and not exists(retracted)"
    arm = ArmBuilder().arm(spec)
    assert arm.filter == spec.filter
    assert arm.describe()["filter"] == "year >= 1990 and not exists(retracted)"
    with pytest.raises(InvalidParameterError, match=r"its filter: .*character"):
        parse_arm("recent=bm25 where year >")


def test_nesting_is_bounded() -> None:
    # Issue 26 item 4: a spec nested 500 deep (under 4,096 characters) was a RecursionError.
    from weftsearch.ranking.specs import MAX_SPEC_DEPTH

    assert (
        str(parse_arm("a=" + "rrf(" * MAX_SPEC_DEPTH + "bm25" + ")" * MAX_SPEC_DEPTH).expr).count("(") == 32
    )
    for text in [
        "a=" + "rrf(" * (MAX_SPEC_DEPTH + 1) + "bm25" + ")" * (MAX_SPEC_DEPTH + 1),
        "a=" + "rrf(" * 500 + "bm25" + ")" * 500,
        "a=weighted(bm25, vector, weights=" + "[" * 1000 + "1" + "]" * 1000 + ")",
        "a=" + "graph(seed=" * 300 + "bm25" + ")" * 300,
    ]:
        with pytest.raises(InvalidParameterError, match=f"nests more than {MAX_SPEC_DEPTH} deep") as caught:
            parse_arm(text)
        assert len(str(caught.value)) < 400  # the spec is shown clipped


@pytest.mark.parametrize(
    ("number", "message"),
    [
        ("1" + "0" * 400, "an integer of 401 digits"),
        ("1" + "0" * 5000, "an integer of 5,001 digits"),
        ("1e400", "out of range"),
        ("1e-400", "underflows to 0"),
    ],
    ids=["401-digits", "5001-digits", "1e400", "1e-400"],
)
def test_a_number_float64_cannot_hold_is_refused(number: str, message: str) -> None:
    for text in [f"a=rrf(bm25, k={number})", f"a=weighted(bm25, vector, weights=[1, {number}])"]:
        with pytest.raises(InvalidParameterError, match=message) as caught:
            parse_arm(text)
        assert len(str(caught.value)) < 400
