"""k-fold cross-validation over queries: fold assignment, held-out honesty, a hand-checked case."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.eval.test_harness import make_collection
from weftsearch.documents import Document
from weftsearch.engine.protocols import Fuser
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream
from weftsearch.errors import InvalidParameterError
from weftsearch.eval import harness
from weftsearch.eval.cv import (
    Choice,
    add_to_comparison,
    assign_folds,
    cross_validate,
    fusion_chooser,
    grid_chooser,
)
from weftsearch.eval.harness import build_testbed, compare
from weftsearch.eval.metrics import evaluate
from weftsearch.eval.runs import StreamCache, run_arm
from weftsearch.eval.stats import paired_bootstrap
from weftsearch.fusion import RRF, ScoreFusion, WeightedRRF
from weftsearch.ranking.arm import Arm
from weftsearch.scorers import BM25Scorer, GraphScorer

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"

# ---------------------------------------------------------------------------- fold assignment


def test_folds_partition_the_queries_in_near_equal_sizes() -> None:
    qids = [f"q{i}" for i in range(23)]
    folds = assign_folds(qids, 5, seed=0)
    assert sorted(folds) == sorted(qids)
    sizes = np.bincount(list(folds.values()), minlength=5)
    assert sorted(sizes.tolist()) == [4, 4, 5, 5, 5]


def test_folds_are_deterministic_and_ignore_input_order() -> None:
    qids = [f"q{i}" for i in range(40)]
    first = assign_folds(qids, 5, seed=7)
    assert assign_folds(list(reversed(qids)), 5, seed=7) == first
    assert assign_folds(qids, 5, seed=7) == first
    assert assign_folds(qids, 5, seed=8) != first  # the seed matters


def test_fold_assignment_is_the_recorded_rule() -> None:
    """Sorted ids, permuted by PCG64(seed); position i goes to fold i mod folds."""
    qids = ["b", "a", "d", "c", "e"]
    permutation = np.random.Generator(np.random.PCG64(3)).permutation(5)
    expected = {sorted(qids)[int(p)]: i % 2 for i, p in enumerate(permutation)}
    assert assign_folds(qids, 2, seed=3) == expected


@pytest.mark.parametrize(
    ("qids", "folds", "seed", "message"),
    [
        (["a", "b"], 1, 0, "at least 2 folds"),
        (["a", "b"], 3, 0, "3 folds for 2 queries"),
        (["a", "a", "b"], 2, 0, "distinct"),
        (["a", "b"], 2, -1, "seed"),
        (["a", "b"], True, 0, "at least 2 folds"),
    ],
)
def test_bad_fold_requests_are_refused(qids: list[str], folds: int, seed: int, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        assign_folds(qids, folds, seed)


# ---------------------------------------------------------------------------- no query scores its own choice


@pytest.fixture(scope="module")
def testbed() -> harness.Testbed:
    return build_testbed(make_collection())


def test_no_query_is_scored_by_a_choice_it_took_part_in(testbed: harness.Testbed) -> None:
    bm25 = BM25Scorer()
    graph = GraphScorer(seed_scorer=bm25)
    candidates = [
        (f"w={w:g}", Arm(f"c{i}", (bm25, graph), WeightedRRF([1.0, w]), depth=30))
        for i, w in enumerate((0.0, 0.5, 1.0, 3.0))
    ]
    inner = grid_chooser(candidates, k=30)
    seen: list[tuple[set[str], set[str]]] = []

    def recording(training: harness.Testbed, cache: StreamCache) -> Choice:
        seen.append((set(training.queries), set(training.qrels)))
        return inner(training, cache)

    cache = StreamCache(testbed.snapshot)
    result = cross_validate(testbed, "cv", recording, folds=4, seed=1, k=30, cache=cache)
    everything = set(testbed.queries)
    assert len(seen) == 4
    for fold, (queries, judged) in enumerate(seen):
        held = {q for q, f in result.assignment.items() if f == fold}
        assert held and queries == judged == everything - held
    # Each query is ranked by its own fold's choice, run on it alone.
    for qid in testbed.queries:
        arm = result.choices[result.assignment[qid]].arm
        alone = run_arm(cache, arm, {qid: testbed.queries[qid]}, 30)
        assert result.run.keys[qid] == alone.keys[qid]
        assert np.array_equal(result.run.scores[qid], alone.scores[qid])
    assert result.run.qids == tuple(testbed.queries)
    # Each fold's choice is the best candidate on exactly its training queries, evaluated afresh
    # (the chooser remembers a query's value from an earlier fold; that must change nothing).
    for fold, choice in enumerate(result.choices):
        train = {q: testbed.queries[q] for q in testbed.queries if result.assignment[q] != fold}
        qrels = {q: testbed.qrels[q] for q in train}
        means = [
            evaluate(qrels, run_arm(StreamCache(testbed.snapshot), arm, train, 30).run, ["nDCG@10"]).mean(
                "nDCG@10"
            )
            for _, arm in candidates
        ]
        best = int(np.argmax(means))
        assert (choice.label, choice.train_mean) == (candidates[best][0], means[best])


def test_fusion_chooser_learns_on_the_training_folds_only(testbed: harness.Testbed) -> None:
    bm25 = BM25Scorer()
    arm = Arm("fused", (bm25, GraphScorer(seed_scorer=bm25)), RRF(), depth=30)
    grid: list[Fuser] = [RRF(k=10.0), WeightedRRF([1.0, 0.2], k=60.0), ScoreFusion(norm="zscore")]
    chooser = fusion_chooser(arm, candidates=grid, k=30)
    result = cross_validate(testbed, "cv", chooser, folds=3, seed=0, k=30)
    for fold, choice in enumerate(result.choices):
        train = [q for q, f in result.assignment.items() if f != fold]
        training = replace(
            testbed,
            queries={q: testbed.queries[q] for q in train},
            qrels={q: testbed.qrels[q] for q in train},
        )
        means = []
        for fuser in grid:
            run = run_arm(StreamCache(testbed.snapshot), replace(arm, fuser=fuser), training.queries, 30)
            means.append(evaluate(training.qrels, run.run, ["nDCG@10"]).mean("nDCG@10"))
        best = int(np.argmax(means))  # argmax keeps the first maximum, as the chooser does
        assert choice.label == repr(grid[best])
        assert choice.train_mean == means[best]


# ---------------------------------------------------------------------------- a case checked by hand


class TableScorer:
    """Ranks query ``qN``'s relevant document ``rN`` first for the queries in ``good``; junk otherwise."""

    def __init__(self, name: str, good: Sequence[str]) -> None:
        self.name = name
        self.good = set(good)

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        keys = [f"r{query.text[1:]}", "x"] if query.text in self.good else ["x"]
        return Stream(snapshot.ids_of(keys), np.arange(len(keys), 0, -1, dtype=np.float64))


def test_hand_checked_two_fold_case() -> None:
    """Four queries, two folds (seed 0: fold 0 = {q2, q3}, fold 1 = {q1, q4}).

    A finds q1, q2, q3; B finds q1, q4 (nDCG@10 1 on a found query, else 0).
    Fold 0 trains on {q1, q4}: A 0.5, B 1.0 -> B, which scores q2 = q3 = 0.
    Fold 1 trains on {q2, q3}: A 1.0, B 0.0 -> A, which scores q1 = 1, q4 = 0.
    Held-out mean 0.25, though the best arm in hindsight (A) has 0.75.
    """
    qids = ("q1", "q2", "q3", "q4")
    assert assign_folds(qids, 2, seed=0) == {"q2": 0, "q3": 0, "q1": 1, "q4": 1}
    documents = [Document(key, f"text {key}") for key in ("r1", "r2", "r3", "r4", "x")]
    qrels = {q: {f"r{q[1:]}": 1} for q in qids}
    collection = make_collection(
        documents=documents,
        queries={q: q for q in qids},
        qrels=qrels,
        splits={},
        link_sets={},
        query_file_ids={q: q for q in qids},
    )
    bed = build_testbed(collection)
    a = Arm("A", (TableScorer("a", ["q1", "q2", "q3"]),), ScoreFusion(), depth=10)
    b = Arm("B", (TableScorer("b", ["q1", "q4"]),), ScoreFusion(), depth=10)
    cache = StreamCache(bed.snapshot)
    result = cross_validate(
        bed, "AorB", grid_chooser([("A", a), ("B", b)], k=10), folds=2, seed=0, k=10, cache=cache
    )
    assert [c.label for c in result.choices] == ["B", "A"]
    assert [c.train_mean for c in result.choices] == [1.0, 1.0]
    assert result.run.keys == {"q1": ("r1", "x"), "q2": ("x",), "q3": ("x",), "q4": ("x",)}

    comparison = add_to_comparison(compare(bed, [a], k=10, resamples=500, cache=cache), bed, [result])
    assert comparison.mean("A", "nDCG@10") == 0.75
    assert comparison.mean("AorB", "nDCG@10") == 0.25
    held = comparison.arms["AorB"].evaluation.per_query("nDCG@10")
    assert held == {"q1": 1.0, "q2": 0.0, "q3": 0.0, "q4": 0.0}
    # The held-out arm is evaluated in the served order too (no ties here: the same values).
    served = comparison.arms["AorB"].served
    assert served is not None
    assert served.per_query("nDCG@10") == evaluate(bed.qrels, result.run.served_run, "nDCG@10").per_query(
        "nDCG@10"
    )
    assert comparison.arms["AorB"].served_differs(comparison.measures) == ()
    expected = paired_bootstrap(
        held, comparison.arms["A"].evaluation.per_query("nDCG@10"), resamples=500, seed=0
    )
    assert comparison.bootstrap["AorB", "nDCG@10"] == expected
    record = comparison.record()
    assert record["extra"]["cross_validation"]["AorB"]["assignment"] == {"q1": 1, "q2": 0, "q3": 0, "q4": 1}
    assert [c["chosen"] for c in record["extra"]["cross_validation"]["AorB"]["choices"]] == ["B", "A"]


def test_a_cross_validated_arm_may_not_reuse_a_name(testbed: harness.Testbed) -> None:
    bm25 = BM25Scorer()
    arm = Arm("text", (bm25,), ScoreFusion(), depth=30)
    result = cross_validate(testbed, "text", grid_chooser([("only", arm)], k=30), folds=2, k=30)
    with pytest.raises(InvalidParameterError, match="two arms are named 'text'"):
        add_to_comparison(compare(testbed, [arm], k=30, resamples=50), testbed, [result])


# ---------------------------------------------------------------------------- from the command line


@pytest.mark.data
@pytest.mark.skipif(not DATA.is_dir(), reason="the shared datasets are absent")
def test_cv_on_cisi_adds_a_held_out_arm_per_sweep_family() -> None:
    from weftsearch.cli.eval import run_experiment

    experiment = run_experiment(
        "cisi",
        DATA,
        arms=["text=bm25", "fused=learned(bm25, pagerank(seed=bm25))"],
        sweeps=["grid:text:k1=0.9,1.2;b=0.75"],
        resamples=200,
        cv=3,
    )
    names = list(experiment.comparison.arms)
    assert names == ["text", "fused", "text-cv-grid"]
    records = experiment.comparison.extra["cross_validation"]
    assert set(records) == {"fused", "text-cv-grid"}
    assert all(len(r["choices"]) == 3 for r in records.values())
    assert sorted(set(records["fused"]["assignment"].values())) == [0, 1, 2]


def test_cli_cv_takes_at_least_two_folds(capsys: pytest.CaptureFixture[str]) -> None:
    from weftsearch.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["eval", "cacm", "--data", "x", "--cv", "5"]).cv == 5
    assert parser.parse_args(["eval", "cacm", "--data", "x"]).cv is None
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "cacm", "--data", "x", "--cv", "1"])
    assert "expected an integer >= 2" in capsys.readouterr().err
