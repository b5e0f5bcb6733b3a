"""The SciFact profile workflow's reports against pytrec_eval on the same runs (issue 28): the trial
reports' nDCG@10 and R@10 (interleaved with frozen vectors, and as client cycles with the server
embedding the text), and the development grid's cells from their TREC run files.

It runs the workflow EVAL.md publishes (``bench/eval_published.py``): minutes, so ``-m slow``; the
same check on a small collection runs by default (``tests/eval/test_trial.py``).

Agreement-with-a-reference tests live in ``tests/*/reference/``, apart from behaviour tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from weftsearch.corpus import load_qrels

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "datasets"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_published", ROOT / "bench" / "eval_published.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_published"] = module
    spec.loader.exec_module(module)
    return module


def _oracle(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    result: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "recall.10"}
    ).evaluate(run)
    return result


def _agree(qrels: dict[str, dict[str, int]], report: dict[str, Any]) -> None:
    assert report["valid"]
    for name, ranking in report["rankings"].items():
        run = {q: {h["key"]: float(h["score"]) for h in hits} for q, hits in ranking.items()}
        oracle = _oracle({q: qrels[q] for q in run}, run)
        assert set(report["per_query"][name]["nDCG@10"]) == set(run) == set(oracle)
        for q in run:
            assert report["per_query"][name]["nDCG@10"][q] == pytest.approx(
                oracle[q]["ndcg_cut_10"], abs=1e-12
            )
            assert report["per_query"][name]["R@10"][q] == pytest.approx(oracle[q]["recall_10"], abs=1e-12)
        mean = sum(oracle[q]["ndcg_cut_10"] for q in run) / len(run)
        assert report["means"][name]["nDCG@10"] == pytest.approx(mean, abs=1e-12)


def _trec(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _q0, doc, _rank, score, _tag = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    return run


@pytest.mark.reference
@pytest.mark.data
@pytest.mark.slow
def test_the_workflows_reports_agree_with_pytrec_eval(tmp_path: Path) -> None:
    if not (DATA / "scifact" / "vectors").is_dir():
        pytest.skip(f"SciFact with its frozen vectors is not at {DATA / 'scifact'}")
    pytest.importorskip("pytrec_eval")
    pytest.importorskip("uvicorn", reason="the trial's server needs the 'server' extra")
    reports = _script().run_workflow(DATA.resolve(), tmp_path)
    test_qrels = load_qrels(DATA / "scifact" / "qrels" / "test.tsv")
    assert len(reports["trial"]["per_query"]["bm25"]["nDCG@10"]) == 300
    _agree(test_qrels, reports["trial"])
    _agree(test_qrels, reports["cycle"])
    train = load_qrels(DATA / "scifact" / "qrels" / "train.tsv")
    grid = reports["dev"]["extra"]["grid"]
    for cell in grid["cells"]:
        run = _trec(tmp_path / "dev-report" / f"{cell['arm']}.trec")
        assert len(run) == grid["queries"] == 807
        oracle = _oracle({q: train[q] for q in run}, run)
        mean = sum(o["ndcg_cut_10"] for o in oracle.values()) / len(oracle)
        assert cell["means"]["nDCG@10"] == pytest.approx(mean, abs=1e-12), cell["arm"]
        recall = sum(o["recall_10"] for o in oracle.values()) / len(oracle)
        assert cell["means"]["R@10"] == pytest.approx(recall, abs=1e-12), cell["arm"]
