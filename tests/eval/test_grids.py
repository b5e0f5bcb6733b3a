"""Sweep families (eval.grids): grid:ARM:... over any arm parameter, and the built-in kinds as candidates."""

from __future__ import annotations

import pytest

from tests.eval.test_harness import make_collection
from weftsearch import BM25Scorer
from weftsearch.errors import InvalidParameterError
from weftsearch.eval.grids import families, parse_grid
from weftsearch.eval.harness import build_testbed, sweep
from weftsearch.eval.runs import StreamCache, run_arm
from weftsearch.fusion import RRF, WeightedRRF
from weftsearch.ranking.arm import Arm
from weftsearch.ranking.specs import ArmBuilder, ArmSpec, parse_arm
from weftsearch.scorers import GraphScorer, PageRankScorer, PropagationScorer


def setup(*texts: str) -> tuple[dict[str, Arm], dict[str, ArmSpec], ArmBuilder]:
    builder = ArmBuilder(default_depth=30)
    specs = {s.name: s for s in map(parse_arm, texts)}
    return {name: builder.arm(spec) for name, spec in specs.items()}, specs, builder


def test_parse_grid_reads_names_and_typed_values() -> None:
    target, grid = parse_grid("grid:graph:seed_n=1,3, 5;max_depth=2;directed=true,false;restart=score")
    assert target == "graph"
    assert grid == {"seed_n": (1, 3, 5), "max_depth": (2,), "directed": (True, False), "restart": ("score",)}
    assert parse_grid("grid:p:a=0.1,.5,1e-1")[1] == {"a": (0.1, 0.5, 0.1)}


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("grid:graph", "expected grid:ARM"),
        ("grid::a=1", "expected grid:ARM"),
        ("grid:graph:seed_n", "expected NAME=V"),
        ("grid:graph:seed_n=1;seed_n=2", "given twice"),
        ("grid:graph:seed_n=1,,2", "empty value"),
        ("grid:graph:seed_n=1$", "cannot read the value"),
    ],
)
def test_bad_grids_are_refused(kind: str, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        parse_grid(kind)


def test_scorer_parameters_go_to_the_last_stream_and_fusion_parameters_to_the_fuser() -> None:
    arms, specs, builder = setup("text=bm25", "graph=rrf(bm25, graph(seed=bm25))")
    [family] = families("grid:graph:seed_n=1,5;max_depth=2;weight=0.5;k=20;depth=50", arms, specs, builder)
    assert family.cv_name() == "graph-cv-grid"
    candidates = family.candidates()
    assert [label for label, _ in candidates] == [
        "seed_n=1, max_depth=2, weight=0.5, k=20, depth=50",
        "seed_n=5, max_depth=2, weight=0.5, k=20, depth=50",
    ]
    for (_, arm), seed_n in zip(candidates, (1, 5), strict=True):
        text, graph = arm.scorers
        assert text is arms["text"].scorers[0]  # the same bm25 object: its streams are shared
        assert isinstance(graph, GraphScorer) and (graph.seed_n, graph.max_depth) == (seed_n, 2)
        assert graph.seed_scorer is text
        assert isinstance(arm.fuser, WeightedRRF) and list(arm.fuser.weights) == [1.0, 0.5]
        assert arm.fuser.k == 20.0 and arm.depth == 50
    assert [arm.name for _, arm in candidates] == ["graph-g0", "graph-g1"]


def test_grid_without_fusion_parameters_keeps_the_arms_fuser() -> None:
    arms, specs, builder = setup("pr=rrf(bm25, pagerank(seed=bm25), k=40)", "prop=propagate(seed=bm25)")
    [family] = families("grid:pr:restart=uniform,score", arms, specs, builder)
    restarts = []
    for _, arm in family.candidates():
        assert isinstance(arm.fuser, RRF) and arm.fuser.k == 40.0
        scorer = arm.scorers[1]
        assert isinstance(scorer, PageRankScorer)
        restarts.append(scorer.restart)
    assert restarts == ["uniform", "score"]
    # A one-scorer arm: the scorer itself is varied; its stream passes through unfused, so every
    # candidate keeps the arm's own (never called) fuser.
    [family] = families("grid:prop:a=0.1,0.5;iterations=1,3", arms, specs, builder)
    points = [
        (s.a, s.iterations)
        for _, arm in family.candidates()
        for s in arm.scorers
        if isinstance(s, PropagationScorer)
    ]
    assert points == [(0.1, 1), (0.1, 3), (0.5, 1), (0.5, 3)]
    assert all(type(arm.fuser) is type(arms["prop"].fuser) for _, arm in family.candidates())


def test_grid_errors_name_the_problem() -> None:
    arms, specs, builder = setup(
        "text=bm25", "graph=rrf(bm25, graph(seed=bm25))", "fused=learned(bm25, graph(seed=bm25))"
    )
    with pytest.raises(InvalidParameterError, match="no arm 'nosuch'"):
        families("grid:nosuch:a=1", arms, specs, builder)
    with pytest.raises(InvalidParameterError, match="one stream; k and weight need two"):
        families("grid:text:k=10,20", arms, specs, builder)
    with pytest.raises(InvalidParameterError, match="learns its fuser"):
        families("grid:fused:seed_n=1", arms, specs, builder)
    with pytest.raises(InvalidParameterError, match="depth must be a positive integer"):
        families("grid:graph:depth=0.5", arms, specs, builder)
    [family] = families("grid:graph:damping=0.5", arms, specs, builder)
    with pytest.raises(InvalidParameterError, match="unknown parameter"):
        family.candidates()  # graph(...) has no damping: the builder says so
    with pytest.raises(InvalidParameterError, match="unknown sweep"):
        families("spiral:graph", arms, specs, builder)


def test_built_in_kinds_as_families_match_the_command_sweeps() -> None:
    arms, specs, builder = setup("text=bm25", "hybrid=rrf(bm25, graph(seed=bm25), pagerank(seed=bm25))")
    [rrf] = families("rrf:hybrid", arms, specs, builder)
    assert len(rrf.candidates()) == 30 and rrf.cv_name() == "hybrid-cv-rrf"
    weights = families("weights:hybrid", arms, specs, builder)
    assert [f.cv_name() for f in weights] == ["hybrid-cv-w2", "hybrid-cv-w3"]
    [bm25] = families("bm25", arms, specs, builder)
    assert len(bm25.candidates()) == 25 and bm25.cv_name() == "bm25-cv-k1b"


def test_the_grid_point_at_the_arms_own_parameters_reprints_the_arm() -> None:
    testbed = build_testbed(make_collection())
    arms, specs, builder = setup("text=bm25", "graph=rrf(bm25, graph(seed=bm25))")
    [family] = families("grid:graph:seed_n=2,5;max_depth=1,3", arms, specs, builder)
    cache = StreamCache(testbed.snapshot)
    result = sweep(testbed, family.label, family.make_arm, family.grid, k=30, cache=cache, resamples=50)
    own = run_arm(cache, arms["graph"], testbed.queries, 30)
    from weftsearch.eval.metrics import evaluate

    mean = evaluate(testbed.qrels, own.run, ["nDCG@10"]).mean("nDCG@10")
    [point] = [p for p in result.points if p.params == {"seed_n": 5, "max_depth": 3}]
    assert point.mean == mean


def test_a_grid_sweeps_a_dotted_keyword_of_bm25f() -> None:
    # Issue 29: bm25f's per-field b is b.FIELD; a sweep names it as the spec does.
    target, grid = parse_grid("grid:f:title=1,2;b.title=0.3,0.75")
    assert target == "f" and grid == {"title": (1, 2), "b.title": (0.3, 0.75)}
    specs = {"f": parse_arm("f=bm25f(title=1, text=1)")}
    builder = ArmBuilder()
    [family] = families("grid:f:title=1,2;b.title=0.3,0.75", {"f": builder.arm(specs["f"])}, specs, builder)
    scorers = [arm.scorers[0] for _, arm in family.candidates()]
    assert all(isinstance(s, BM25Scorer) and s.fields is not None for s in scorers)
    pairs = [
        (s.fields["title"], s.field_b["title"]) for s in scorers if isinstance(s, BM25Scorer) and s.fields
    ]
    assert pairs == [(1, 0.3), (1, 0.75), (2, 0.3), (2, 0.75)]
    for bad in ("grid:f:b..title=1", "grid:f:.b=1", "grid:f:b.title.x=1"):
        with pytest.raises(InvalidParameterError, match="NAME=V"):
            parse_grid(bad)
