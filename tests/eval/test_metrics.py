"""Measures: agreement with trec_eval (through pytrec_eval), hand-derived values, names, validation.

The reference part runs every measure at several cutoffs on fixtures built so
that an implementation getting one rule wrong (tie-break direction, float32
scores, which queries count, gain of negative grades, the ideal ranking, P@k's
denominator past the run's end) disagrees on at least one number. The
behaviour part checks literals derived by hand in the comments: no generated
golden file is involved.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weftsearch.errors import InvalidParameterError, UnknownMeasureError, WeftError
from weftsearch.eval import Evaluation, Measure, evaluate, parse_measure, run_from_rankings
from weftsearch.eval.metrics import MEASURE_NAMES

QrelsDict = dict[str, dict[str, int]]
RunDict = dict[str, dict[str, float]]

CUTOFFS = (1, 3, 5, 10, 100)

#: Every measure the reference tests check, with pytrec_eval's name for it.
REFERENCE_MEASURES: dict[str, str] = {
    **{f"nDCG@{k}": f"ndcg_cut_{k}" for k in CUTOFFS},
    "nDCG": "ndcg",
    **{f"P@{k}": f"P_{k}" for k in CUTOFFS},
    **{f"R@{k}": f"recall_{k}" for k in CUTOFFS},
    "AP": "map",
    **{f"AP@{k}": f"map_cut_{k}" for k in CUTOFFS},
    "RR": "recip_rank",
}

TOLERANCE = 1e-12


# ---------------------------------------------------------------------------- fixtures


def _long_run_fixture() -> tuple[QrelsDict, RunDict]:
    """1,200 documents (trec_eval reads past 1,000), scores rounded so that many tie."""
    rng = random.Random(7)
    docs = [f"doc{i}" for i in range(1200)]
    run = {"q": {d: round(rng.random(), 2) for d in docs}}
    qrels = {"q": {d: rng.choice([0, 1, 2, 3]) for d in rng.sample(docs, 60)}}
    qrels["q"]["never-retrieved"] = 3
    return qrels, run


def _many_queries_fixture() -> tuple[QrelsDict, RunDict]:
    """Thirty queries of random graded judgements and coarse (tie-prone) scores."""
    rng = random.Random(11)
    qrels: QrelsDict = {}
    run: RunDict = {}
    for q in range(30):
        qid = f"Q{q}"
        pool = [f"D{rng.randrange(200)}" for _ in range(40)]
        qrels[qid] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3]) for d in pool[:20]}
        run[qid] = {d: float(rng.randrange(6)) for d in pool[5:]}
    return qrels, run


#: name -> (qrels, run). Dict order is deliberately scrambled throughout.
FIXTURES: dict[str, tuple[QrelsDict, RunDict]] = {
    # Graded judgements listed out of grade and id order; run listed out of score order.
    "graded-out-of-order": (
        {"q1": {"d4": 1, "d1": 3, "d9": 0, "d2": 2, "d7": 1}},
        {"q1": {"d2": 0.4, "d9": 0.9, "d1": 0.5, "d4": 0.8, "d5": 0.7, "d7": 0.1}},
    ),
    # All scores equal: only the tie-break (docid descending) orders the ranking.
    "all-tied": (
        {"q": {"a": 2, "c": 1, "e": 3}},
        {"q": {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 1.0}},
    ),
    # String, not numeric, comparison of tied ids: "d9" > "d100" > "d10" > "d1".
    "numeric-looking-ids": (
        {"q": {"d10": 1, "d1": 2, "d100": 1}},
        {"q": {"d1": 0.5, "d10": 0.5, "d100": 0.5, "d9": 0.5, "d2": 0.1}},
    ),
    # Case and non-ASCII ids tied: code point order ("é" > "z" > "a" > "Z" > "A").
    "case-and-unicode-ids": (
        {"q": {"A": 1, "é": 2, "a": 1}},
        {"q": {"A": 2.0, "Z": 2.0, "a": 2.0, "z": 2.0, "é": 2.0}},
    ),
    # Scores equal in float32 but not in float64 tie; just above half an ulp they do not.
    "float32-near-ties": (
        {"q": {"a": 1, "x": 2}},
        {
            "q": {
                "a": 1.0 + 1e-9,
                "b": 1.0,
                "w": 0.5 + 2**-26,  # exactly half a float32 ulp above 0.5: rounds to even, ties
                "x": 0.5,
                "y": 0.25 + 2**-27 + 2**-40,  # just above half an ulp: rounds up, no tie
                "z": 0.25,
            }
        },
    ),
    # Unjudged documents fill the top of the ranking.
    "unjudged-on-top": (
        {"q": {"r1": 1, "r2": 2, "n1": 0}},
        {"q": {"u1": 9.0, "u2": 8.0, "u3": 7.0, "r2": 6.0, "u4": 5.0, "n1": 4.0, "r1": 3.0}},
    ),
    # A judged query with no relevant document counts, with 0, next to a normal one.
    "no-relevant-document": (
        {"none": {"a": 0, "b": 0, "c": -1}, "some": {"a": 1}},
        {"none": {"a": 3.0, "b": 2.0, "c": 1.0}, "some": {"b": 2.0, "a": 1.0}},
    ),
    # Only negative grades (TREC Web's -2 "junk"): judged, so evaluated, with 0 everywhere.
    "only-negative-judgements": (
        {"junk": {"a": -2, "b": -1}, "ok": {"b": 1, "a": -2}},
        {"junk": {"a": 2.0, "b": 1.0}, "ok": {"a": 2.0, "b": 1.0}},
    ),
    # Queries skipped: in the run only, judged with an empty mapping, judged but not run.
    "query-sets-differ": (
        {"both": {"a": 1, "b": 1}, "empty-judgements": {}, "judged-only": {"a": 1}},
        {"both": {"b": 1.0, "c": 0.5}, "run-only": {"a": 1.0}, "empty-judgements": {"a": 1.0}},
    ),
    # Runs shorter than every cutoff, with more relevant documents than retrieved.
    "short-run": (
        {"q": {f"r{i}": 1 + i % 3 for i in range(12)}},
        {"q": {"r5": 0.3, "x": 0.2}},
    ),
    # Negative grades: no gain, not relevant, not in the ideal ranking; one at rank 1.
    "negative-grades": (
        {"q": {"a": -2, "b": 2, "c": -1, "d": 1, "e": 0}},
        {"q": {"a": 5.0, "c": 4.0, "b": 3.0, "e": 2.0, "d": 1.0}},
    ),
    # Tied scores straddle the cutoffs at ranks 3, 5 and 10.
    "ties-at-the-cutoff": (
        {"q": {f"t{i}": (i % 3) for i in range(14)}},
        {"q": {**{f"t{i}": (3.0 if i < 2 else 2.0 if i < 7 else 1.0) for i in range(14)}, "u": 2.0}},
    ),
    # A judged query whose ranking is empty is evaluated (with zeros) by pytrec_eval.
    "empty-ranking": (
        {"q": {"a": 1}, "r": {"a": 2, "b": 1}},
        {"q": {}, "r": {"b": 1.0, "a": 0.0}},
    ),
    # Infinities; 1e300 and 1e39 both overflow float32 to inf and tie; 1e-50 underflows to 0.
    "extreme-scores": (
        {"q": {"big": 1, "tiny": 2, "neg": 1, "minus-zero": 1}},
        {
            "q": {
                "inf": math.inf,
                "big": 1e300,
                "bigger": 1e39,
                "one": 1.0,
                "tiny": 1e-50,
                "zero": 0.0,
                "minus-zero": -0.0,
                "neg": -math.inf,
            }
        },
    ),
    # Integer scores; relevant documents at several grades never retrieved raise the ideal.
    "ideal-beyond-the-run": (
        {"q": {"a": 1, "b": 3, "c": 2, "d": 3, "e": 1}},
        {"q": {"a": 3, "z": 2, "e": 1}},  # ints on purpose
    ),
    "long-run": _long_run_fixture(),
    "many-queries": _many_queries_fixture(),
}


def f32(score: float) -> float:
    """``score`` rounded to float32, as trec_eval stores it (overflow to inf is expected)."""
    with np.errstate(over="ignore"):
        return float(np.float32(score))


def trec_order(scores: dict[str, float]) -> list[str]:
    """The order trec_eval ranks a query's documents in, written the slow obvious way."""
    by_docid = sorted(scores, reverse=True)  # docid descending ...
    return sorted(by_docid, key=lambda d: -f32(scores[d]))  # ... then score descending (stable)


def all_negative(judgements: dict[str, int]) -> bool:
    """A query judged, but only with negative grades."""
    return bool(judgements) and max(judgements.values()) < 0


def pytrec(qrels: QrelsDict, run: RunDict, names: set[str]) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query values, working around its crash on all-negative queries.

    pytrec_eval 0.5.11 (trec_eval 9.0.8 inside) segfaults or hangs when a query
    whose grades are all negative (max <= -2 reproduces it) is evaluated after
    a query with a positive grade in the same process: its relevance-level
    arrays are static and sized from the largest grade. Such queries are kept
    from it here and expected to score 0 everywhere; the subprocess test below
    checks that a fresh pytrec_eval says the same for them.
    """
    pytrec_eval = pytest.importorskip("pytrec_eval")
    safe = {q: j for q, j in qrels.items() if not all_negative(j)}
    result: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(safe, names).evaluate(run)
    for qid, judgements in qrels.items():
        if all_negative(judgements) and qid in run:
            result[qid] = dict.fromkeys(names, 0.0)
    return result


def assert_agrees(qrels: QrelsDict, run: RunDict, ours: Evaluation, measures: dict[str, str]) -> None:
    reference = pytrec(qrels, run, set(measures.values()))
    assert sorted(reference) == list(ours.qids)
    for name, trec_name in measures.items():
        expected = np.asarray([reference[q][trec_name] for q in ours.qids])
        got = ours.array(name)
        assert np.max(np.abs(got - expected)) <= TOLERANCE, (
            name,
            dict(zip(ours.qids, got, strict=True)),
            expected,
        )
        assert abs(ours.mean(name) - float(expected.mean())) <= TOLERANCE


# ---------------------------------------------------------------------------- agreement with trec_eval


@pytest.mark.reference
@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_every_measure_agrees_with_pytrec_eval(fixture: str) -> None:
    qrels, run = FIXTURES[fixture]
    ours = evaluate(qrels, run, list(REFERENCE_MEASURES))
    assert_agrees(qrels, run, ours, REFERENCE_MEASURES)


@pytest.mark.reference
@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_reciprocal_rank_at_k_is_trec_eval_on_the_truncated_run(fixture: str) -> None:
    """trec_eval has no RR@k; it is recip_rank of the run cut to its top k in trec_eval's order."""
    qrels, run = FIXTURES[fixture]
    for k in CUTOFFS:
        truncated = {q: {d: scores[d] for d in trec_order(scores)[:k]} for q, scores in run.items()}
        ours = evaluate(qrels, run, f"RR@{k}")
        reference = pytrec(qrels, truncated, {"recip_rank"})
        assert ours.per_query(f"RR@{k}") == pytest.approx(
            {q: reference[q]["recip_rank"] for q in ours.qids}, abs=TOLERANCE
        )


@pytest.mark.reference
@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_complete_matches_pytrec_eval_given_empty_rankings(fixture: str) -> None:
    """``complete=True`` is ``trec_eval -c``: the same as an empty ranking for each judged query not run."""
    qrels, run = FIXTURES[fixture]
    padded = {**{q: {} for q, judgements in qrels.items() if judgements}, **run}
    ours = evaluate(qrels, run, list(REFERENCE_MEASURES), complete=True)
    assert_agrees(qrels, padded, ours, REFERENCE_MEASURES)


@pytest.mark.reference
def test_all_negative_queries_score_zero_in_a_fresh_pytrec_eval() -> None:
    """The rule :func:`pytrec` assumes, checked where pytrec_eval does not crash: a fresh process."""
    pytest.importorskip("pytrec_eval")
    qrels = {"minus-two": {"a": -2}, "mixed": {"a": -2, "b": -1}, "minus-three": {"b": -3}}
    run = {q: {"a": 2.0, "b": 1.0, "c": 0.5} for q in qrels}
    names = sorted(set(REFERENCE_MEASURES.values()))
    script = (
        "import json, sys, pytrec_eval\n"
        "qrels, run, names = json.loads(sys.stdin.read())\n"
        "print(json.dumps(pytrec_eval.RelevanceEvaluator(qrels, set(names)).evaluate(run)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps([qrels, run, names]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reference = json.loads(done.stdout)
    assert sorted(reference) == sorted(qrels)
    assert all(value == 0.0 for values in reference.values() for value in values.values())
    ours = evaluate(qrels, run, list(REFERENCE_MEASURES))
    assert ours.qids == tuple(sorted(qrels))
    assert all(not array.any() for array in ours.values.values())


def _ascending_tie_break(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda d: (-f32(scores[d]), d))


def _float64_scores(scores: dict[str, float]) -> list[str]:
    return sorted(sorted(scores, reverse=True), key=lambda d: -float(scores[d]))


@pytest.mark.parametrize("wrong_order", [_ascending_tie_break, _float64_scores])
def test_the_fixtures_tell_a_wrong_ordering_apart(
    wrong_order: Callable[[dict[str, float]], list[str]],
) -> None:
    """Guard on the fixtures themselves: ranking another way changes some numbers on several of them."""
    changed = []
    for name, (qrels, run) in FIXTURES.items():
        altered = run_from_rankings({q: wrong_order(scores) for q, scores in run.items()})
        right = evaluate(qrels, run, list(REFERENCE_MEASURES)).values
        wrong = evaluate(qrels, altered, list(REFERENCE_MEASURES)).values
        if any(not np.array_equal(right[m], wrong[m]) for m in right):
            changed.append(name)
    assert len(changed) >= (6 if wrong_order is _ascending_tie_break else 2), changed


_ids = st.sampled_from([f"d{i}" for i in range(12)] + ["D", "é", "a10", "a9"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    qrels=st.dictionaries(
        st.sampled_from(["q1", "q2", "q3"]), st.dictionaries(_ids, st.integers(-2, 4), max_size=8), max_size=3
    ),
    run=st.dictionaries(
        st.sampled_from(["q1", "q2", "q3", "q4"]),
        st.dictionaries(_ids, st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-9, 2.0, -1.0, 1e40]), max_size=10),
        min_size=1,
        max_size=4,
    ),
)
@pytest.mark.reference
def test_random_inputs_agree_with_pytrec_eval(qrels: QrelsDict, run: RunDict) -> None:
    reference_qids = sorted(pytrec(qrels, run, {"map"}))
    if not reference_qids:
        with pytest.raises(InvalidParameterError):
            evaluate(qrels, run, "AP")
        return
    ours = evaluate(qrels, run, list(REFERENCE_MEASURES))
    assert_agrees(qrels, run, ours, REFERENCE_MEASURES)


# ---------------------------------------------------------------------------- hand-derived values


def test_ndcg_at_3_worked_example() -> None:
    # Ranking a, b, c with grades 2, 0, 1 (qrels list them out of order).
    # DCG@3  = 2/log2(2) + 0/log2(3) + 1/log2(4) = 2 + 0 + 0.5 = 2.5
    # IDCG@3 = 2/log2(2) + 1/log2(3)             = 2 + 0.6309297535714575 = 2.6309297535714575
    # nDCG@3 = 2.5 / 2.6309297535714575          = 0.95023441678983...
    qrels = {"q": {"c": 1, "b": 0, "a": 2}}
    run = {"q": {"b": 0.8, "c": 0.7, "a": 0.9}}
    result = evaluate(qrels, run, ["nDCG@3", "nDCG@1", "P@3", "R@3", "AP", "RR"])
    assert result.mean("nDCG@3") == pytest.approx(2.5 / (2 + 1 / math.log2(3)), abs=1e-15)
    assert result.mean("nDCG@3") == pytest.approx(0.9502344167898356, abs=1e-15)
    assert result.mean("nDCG@1") == 1.0  # a (grade 2) is the ideal first document
    assert result.mean("P@3") == pytest.approx(2 / 3)  # a and c are relevant (grade >= 1)
    assert result.mean("R@3") == 1.0
    assert result.mean("AP") == pytest.approx((1 / 1 + 2 / 3) / 2)  # relevant at ranks 1 and 3
    assert result.mean("RR") == 1.0


def test_ideal_ranking_comes_from_the_qrels_not_the_run() -> None:
    # Run: a (grade 1), z (unjudged). Qrels also hold b (3) and c (2), never retrieved.
    # DCG@3 = 1;  IDCG@3 = 3 + 2/log2(3) + 1/log2(4) = 3 + 1.2618595071429148 + 0.5
    qrels = {"q": {"a": 1, "b": 3, "c": 2}}
    run = {"q": {"a": 2.0, "z": 1.0}}
    result = evaluate(qrels, run, ["nDCG@3", "nDCG@1", "nDCG"])
    assert result.mean("nDCG@3") == pytest.approx(1 / (3 + 2 / math.log2(3) + 0.5), abs=1e-15)
    assert result.mean("nDCG@1") == pytest.approx(1 / 3, abs=1e-15)
    assert result.mean("nDCG") == pytest.approx(1 / (3 + 2 / math.log2(3) + 0.5), abs=1e-15)


def test_average_precision_divides_by_all_relevant_documents() -> None:
    # Ranked relevance 0, 1, 1; a third relevant document is never retrieved.
    # AP = (1/2 + 2/3) / 3 = 7/18; AP@2 = (1/2) / 3 = 1/6; RR = 1/2; RR@1 = 0.
    qrels = {"q": {"b": 1, "c": 1, "missing": 1}}
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    result = evaluate(qrels, run, ["AP", "AP@2", "RR", "RR@1", "MAP", "MRR"])
    assert result.mean("AP") == pytest.approx(7 / 18, abs=1e-15)
    assert result.mean("AP@2") == pytest.approx(1 / 6, abs=1e-15)
    assert result.mean("RR") == 0.5
    assert result.mean("RR@1") == 0.0
    assert result.mean("MAP") == result.mean("AP")  # an alias names the same measure


def test_precision_past_the_end_of_the_run_still_divides_by_k() -> None:
    # One relevant document in a run of two: P@5 = 1/5, P@100 = 1/100, R@100 = 1/2.
    qrels = {"q": {"a": 1, "x": 1}}
    run = {"q": {"a": 1.0, "b": 0.5}}
    result = evaluate(qrels, run, ["P@5", "P@100", "R@100"])
    assert result.means == {"P@5": 0.2, "P@100": 0.01, "R@100": 0.5}


def test_ties_break_by_docid_descending_as_strings() -> None:
    qrels = {"q": {"a": 1}}
    # "b" > "a": b ranks first, a second.
    assert evaluate(qrels, {"q": {"a": 1.0, "b": 1.0}}, "RR").mean("RR") == 0.5
    # "a" > "B" in code points: a ranks first.
    assert evaluate(qrels, {"q": {"a": 1.0, "B": 1.0}}, "RR").mean("RR") == 1.0
    # String comparison, not numeric: "a9" > "a10", so a9 ranks first.
    assert evaluate({"q": {"a9": 1}}, {"q": {"a10": 1.0, "a9": 1.0}}, "RR").mean("RR") == 1.0
    # The mapping's order never matters.
    assert evaluate(qrels, {"q": {"b": 1.0, "a": 1.0}}, "RR").mean("RR") == 0.5


def test_scores_are_compared_in_float32_as_trec_eval_does() -> None:
    qrels = {"q": {"a": 1}}
    # 1 + 1e-9 rounds to 1.0f: a tie, and "b" > "a" wins it.
    assert evaluate(qrels, {"q": {"a": 1.0 + 1e-9, "b": 1.0}}, "RR").mean("RR") == 0.5
    # 1 + 1e-6 is a different float32: a ranks first on score.
    assert evaluate(qrels, {"q": {"a": 1.0 + 1e-6, "b": 1.0}}, "RR").mean("RR") == 1.0
    # 0.0 and -0.0 tie.
    assert evaluate(qrels, {"q": {"a": 0.0, "b": -0.0}}, "RR").mean("RR") == 0.5


def test_negative_grades_have_no_gain_and_are_not_relevant() -> None:
    # Ranking a (-1), b (2), c (1). Negative gain would make DCG@3 = -1 + 2/log2(3) + 1/2;
    # trec_eval gives it 0: DCG@3 = 2/log2(3) + 1/2, IDCG@3 = 2 + 1/log2(3).
    qrels = {"q": {"a": -1, "b": 2, "c": 1}}
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    result = evaluate(qrels, run, ["nDCG@3", "P@1", "RR", "AP"])
    assert result.mean("nDCG@3") == pytest.approx(
        (2 / math.log2(3) + 0.5) / (2 + 1 / math.log2(3)), abs=1e-15
    )
    assert result.mean("P@1") == 0.0
    assert result.mean("RR") == 0.5
    assert result.mean("AP") == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_a_judged_query_without_relevant_documents_counts_as_zero() -> None:
    qrels = {"none": {"a": 0, "b": -1}, "one": {"a": 1}}
    run = {"none": {"a": 1.0}, "one": {"a": 1.0}}
    result = evaluate(qrels, run, ["nDCG@10", "R@100", "AP", "RR", "P@1"])
    assert result.qids == ("none", "one")
    assert result.per_query("R@100") == {"none": 0.0, "one": 1.0}
    assert result.means == {"nDCG@10": 0.5, "R@100": 0.5, "AP": 0.5, "RR": 0.5, "P@1": 0.5}


def test_which_queries_are_evaluated() -> None:
    qrels = {"b": {"x": 1}, "a": {"x": 0}, "empty": {}, "judged-not-run": {"x": 1}}
    run = {"b": {"x": 1.0}, "a": {"x": 1.0}, "empty": {"x": 1.0}, "unjudged": {"x": 1.0}}
    result = evaluate(qrels, run, "P@1")
    assert result.qids == ("a", "b")  # sorted; "empty" has no judgement; "unjudged" is not in the qrels
    assert result.unjudged == ("empty", "unjudged")
    assert result.missing == ("judged-not-run",)
    complete = evaluate(qrels, run, "P@1", complete=True)
    assert complete.qids == ("a", "b", "judged-not-run")
    assert complete.per_query("P@1") == {"a": 0.0, "b": 1.0, "judged-not-run": 0.0}
    assert complete.missing == ("judged-not-run",)


def test_run_from_rankings_keeps_the_given_order() -> None:
    # Without explicit scores these ids would tie and "c" would rank first.
    rankings = {"q": ["a", "b", "c"]}
    run = run_from_rankings(rankings)
    assert run == {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    result = evaluate({"q": {"a": 1, "c": 2}}, run, ["RR", "nDCG@2"])
    assert result.mean("RR") == 1.0
    assert result.mean("nDCG@2") == pytest.approx(1 / (2 + 1 / math.log2(3)), abs=1e-15)


def test_evaluation_arrays_are_aligned_and_read_only() -> None:
    qrels, run = FIXTURES["many-queries"]
    result = evaluate(qrels, run, ["nDCG@10", "nDCG@10", parse_measure("AP")])
    assert [str(m) for m in result.measures] == ["nDCG@10", "AP"]  # duplicates removed, order kept
    assert list(result.qids) == sorted(result.qids)
    array = result.array("nDCG@10")
    assert array.dtype == np.float64 and array.shape == (len(result.qids),)
    assert result.per_query(Measure("nDCG", 10)) == dict(zip(result.qids, array.tolist(), strict=True))
    with pytest.raises(ValueError, match="read-only"):
        array[0] = 1.0
    with pytest.raises(UnknownMeasureError, match="P@5"):
        result.array("P@5")


# ---------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("text", "name", "cutoff"),
    [
        ("nDCG@10", "nDCG", 10),
        ("nDCG", "nDCG", None),
        ("R@100", "R", 100),
        ("P@5", "P", 5),
        ("AP", "AP", None),
        ("AP@1000", "AP", 1000),
        ("RR", "RR", None),
        ("RR@10", "RR", 10),
    ],
)
def test_names_parse_and_print_back(text: str, name: str, cutoff: int | None) -> None:
    measure = parse_measure(text)
    assert (measure.name, measure.cutoff) == (name, cutoff)
    assert str(measure) == text
    assert parse_measure(str(measure)) == measure
    assert parse_measure(measure) is measure
    assert measure == Measure(name, cutoff)  # type: ignore[arg-type]
    assert hash(measure) == hash(Measure(name, cutoff))  # type: ignore[arg-type]


@pytest.mark.parametrize(("alias", "canonical"), [("MAP", "AP"), ("MRR", "RR"), ("MAP@10", "AP@10")])
def test_aliases_print_as_the_canonical_name(alias: str, canonical: str) -> None:
    assert str(parse_measure(alias)) == canonical


@pytest.mark.parametrize(
    "text",
    [
        "ndcg@10",
        "NDCG@10",
        "nDCG@0",
        "nDCG@010",
        "nDCG@-1",
        "nDCG@",
        "nDCG@ 10",
        " nDCG@10",
        "P",
        "R",
        "F1",
        "",
        "@5",
    ],
)
def test_unknown_names_raise_with_the_name_in_the_message(text: str) -> None:
    with pytest.raises(UnknownMeasureError) as caught:
        parse_measure(text)
    assert isinstance(caught.value, WeftError) and isinstance(caught.value, ValueError)
    assert repr(text) in str(caught.value) or repr(text.split("@")[0]) in str(caught.value)


@pytest.mark.parametrize(
    ("name", "cutoff"), [("F1", None), ("P", None), ("nDCG", 0), ("nDCG", True), ("AP", 2.5)]
)
def test_measure_objects_validate_too(name: Any, cutoff: Any) -> None:
    with pytest.raises(UnknownMeasureError):
        Measure(name, cutoff)


def test_measure_names_are_the_documented_families() -> None:
    assert MEASURE_NAMES == ("nDCG", "P", "R", "AP", "RR")


# ---------------------------------------------------------------------------- validation


GOOD_QRELS: QrelsDict = {"q": {"a": 1}}
GOOD_RUN: RunDict = {"q": {"a": 1.0}}


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: evaluate(GOOD_QRELS, GOOD_RUN, []), "at least one measure"),
        (lambda: evaluate(GOOD_QRELS, {"other": {"a": 1.0}}, "AP"), "no query to evaluate"),
        (lambda: evaluate({"q": {"a": 1.5}}, GOOD_RUN, "AP"), "1.5"),  # type: ignore[dict-item]
        (lambda: evaluate({"q": {"a": True}}, GOOD_RUN, "AP"), "True"),
        (lambda: evaluate(GOOD_QRELS, {"q": {"a": math.nan}}, "AP"), "NaN"),
        (lambda: evaluate(GOOD_QRELS, {"q": {"a": "high"}}, "AP"), "'high'"),  # type: ignore[dict-item]
        (lambda: evaluate({1: {"a": 1}}, GOOD_RUN, "AP"), "1"),  # type: ignore[dict-item]
        (lambda: evaluate(GOOD_QRELS, {"q": {2: 1.0}}, "AP"), "2"),  # type: ignore[dict-item]
        (lambda: run_from_rankings({"q": ["a", "b", "a"]}), "'a' appears twice"),
        (lambda: run_from_rankings({"q": "abc"}), "str"),
    ],
)
def test_bad_inputs_raise_invalid_parameter(call: Callable[[], object], fragment: str) -> None:
    with pytest.raises(InvalidParameterError, match=None) as caught:
        call()
    assert fragment in str(caught.value)


def test_numpy_grades_and_scores_are_accepted() -> None:
    qrels = {"q": {"a": np.int64(2), "b": np.int32(1)}}
    run = {"q": {"a": np.float32(0.5), "b": np.float64(0.7)}}
    result = evaluate(qrels, run, "nDCG@2")  # type: ignore[arg-type]
    assert result.mean("nDCG@2") == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
