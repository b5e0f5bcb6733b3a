"""docs/EVAL.md publishes what the code prints now.

Each published table is regenerated from its command and compared with the
block in docs/EVAL.md, character for character. The small collections run in
the default test run; SciFact (learned fusion over 807 development queries)
and Experiment 4 (5-fold cross-validation over 161 grid points) run under ``-m slow``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "datasets"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_published", ROOT / "bench" / "eval_published.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_published"] = module
    spec.loader.exec_module(module)
    return module


PUBLISHED = _script()
NAMES = [e.name for e in PUBLISHED.EXPERIMENTS]
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"the shared datasets are not at {DATA}")


def test_every_experiment_has_a_block_and_every_block_an_experiment() -> None:
    text = PUBLISHED.EVAL_MD.read_text(encoding="utf-8")
    for name in NAMES:
        assert PUBLISHED.published_block(text, name) is not None, f"docs/EVAL.md lacks the block {name}"
    import re

    blocks = re.findall(r"<!-- eval:([\w.-]+) -->", text)
    assert sorted(b for b in blocks if b != "NAME") == sorted(NAMES)  # the intro shows the marker form


def _check(name: str) -> None:
    [experiment] = [e for e in PUBLISHED.EXPERIMENTS if e.name == name]
    result = PUBLISHED.run(experiment, DATA)
    printed = PUBLISHED.block(experiment, PUBLISHED.table(result, new_documents=experiment.new_documents))
    recorded = PUBLISHED.published_block(PUBLISHED.EVAL_MD.read_text(encoding="utf-8"), name)
    assert printed == recorded, f"docs/EVAL.md is stale for {name}: run `make eval`"


@needs_data
@pytest.mark.data
@pytest.mark.parametrize("name", PUBLISHED.SMALL)
def test_small_collection_tables_are_current(name: str) -> None:
    _check(name)


@needs_data
@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if n not in PUBLISHED.SMALL])
def test_slow_tables_are_current(name: str) -> None:
    _check(name)


def test_new_in_top10_counts_top_ten_slots_outside_the_baselines_run() -> None:
    """The share printed under Experiment 4's tables, against a count made here."""
    from tests.eval.test_harness import make_collection
    from weftsearch.cli.eval import Experiment
    from weftsearch.eval.harness import build_testbed, compare
    from weftsearch.fusion import RRF, ScoreFusion
    from weftsearch.ranking.arm import Arm
    from weftsearch.scorers import BM25Scorer, GraphScorer

    testbed = build_testbed(make_collection())
    bm25 = BM25Scorer()
    arms = [
        Arm("text", (bm25,), ScoreFusion(), depth=5),
        Arm("graph", (bm25, GraphScorer(bm25)), RRF(), depth=12),
        Arm("same", (bm25,), RRF(), depth=5),
    ]
    comparison = compare(testbed, arms, k=5, resamples=20)
    base = comparison.arms["text"].run
    run = comparison.arms["graph"].run
    new = sum(1 for q in run.qids for key in run.keys[q][:10] if key not in base.keys[q])
    slots = sum(len(run.keys[q][:10]) for q in run.qids)
    assert new > 0  # the graph stream brings documents BM25's top 5 lacks
    line = PUBLISHED.new_in_top10(Experiment(comparison))
    assert line == (
        f"Top-10 slots holding a document text did not retrieve in its top 5: "
        f"graph {new / slots:.1%} ({new} of {slots}); same 0.0% (0 of {slots})."
    )
