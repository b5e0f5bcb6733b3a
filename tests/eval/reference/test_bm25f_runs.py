"""Experiment 5's runs (BM25F over title and body, issue 29) against pytrec_eval: every arm's TREC
run the harness writes for SciFact test and CACM's cross-validation, scored by trec_eval's code,
gives the harness's nDCG@10 and R@100 means.

It runs two of EVAL.md's experiments (``bench/eval_published.py``): about a minute, so ``-m slow``.

Agreement-with-a-reference tests live in ``tests/*/reference/``, apart from behaviour tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.eval.reference.test_trial_scifact import DATA, _script, _trec
from weftsearch.eval import reports
from weftsearch.eval.datasets import load_collection


@pytest.mark.reference
@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize(("name", "collection"), [("scifact-bm25f", "scifact"), ("cacm-bm25f", "cacm")])
def test_bm25f_runs_agree_with_pytrec_eval(tmp_path: Path, name: str, collection: str) -> None:
    if not (DATA / collection).is_dir():
        pytest.skip(f"{collection} is not at {DATA / collection}")
    pytrec_eval = pytest.importorskip("pytrec_eval")
    script = _script()
    [experiment] = [e for e in script.EXPERIMENTS if e.name == name]
    result = script.run(experiment, DATA.resolve())
    comparison = result.comparison
    reports.write_report(comparison, tmp_path, plots=False)
    judged = load_collection(collection, DATA).qrels  # SciFact: test; CACM: its one set
    assert "bm25f" in comparison.arms and "text" in comparison.arms
    for arm, arm_result in comparison.arms.items():
        run = _trec(tmp_path / f"{arm}.trec")
        oracle = pytrec_eval.RelevanceEvaluator(
            {q: judged[q] for q in run}, {"ndcg_cut.10", "recall.100"}
        ).evaluate(run)
        evaluation = arm_result.evaluation
        queries = len(evaluation.qids)  # a query with no document retrieved counts 0
        assert set(oracle) <= set(evaluation.qids)
        ndcg = sum(o["ndcg_cut_10"] for o in oracle.values()) / queries
        recall = sum(o["recall_100"] for o in oracle.values()) / queries
        assert evaluation.mean("nDCG@10") == pytest.approx(ndcg, abs=1e-12), arm
        assert evaluation.mean("R@100") == pytest.approx(recall, abs=1e-12), arm
