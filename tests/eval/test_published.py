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
NAMES = [e.name for e in PUBLISHED.EXPERIMENTS] + [PUBLISHED.WORKFLOW]
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
@pytest.mark.parametrize("name", [n for n in NAMES if n not in (*PUBLISHED.SMALL, PUBLISHED.WORKFLOW)])
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


# ---------------------------------------------------------------------------- the profile workflow


def test_the_workflow_block_shows_the_commands_the_script_runs() -> None:
    """The commands in EVAL.md's workflow block are those the script runs, and each parses."""
    from weftsearch.cli import build_parser

    block = PUBLISHED.published_block(PUBLISHED.EVAL_MD.read_text(encoding="utf-8"), PUBLISHED.WORKFLOW)
    assert block is not None
    commands = block.split("```sh\n", 1)[1].split("\n```", 1)[0]
    assert commands == PUBLISHED.workflow_block("x").split("```sh\n", 1)[1].split("\n```", 1)[0]
    for command in PUBLISHED.WORKFLOW_COMMANDS:
        build_parser().parse_args(PUBLISHED._workflow_argv(command, DATA))


def test_the_grid_file_is_the_one_the_declared_grids_section_shows() -> None:
    import json
    import re

    text = PUBLISHED.EVAL_MD.read_text(encoding="utf-8")
    section = text.split("## Declared grids", 1)[1]
    shown = json.loads(re.search(r"```json\n(.*?)\n```", section, re.S).group(1))  # type: ignore[union-attr]
    assert json.loads(PUBLISHED.GRID_FILE.read_text(encoding="utf-8")) == shown


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("| bm25 | 32.9 / 105.4 | 4.1 / 19.9 |", "| bm25 | p50 / p95 | p50 / p95 |"),
        ("| hybrid:1 | 0.7172 | 0.8450 | +0.0315 [+0.0111, +0.0518] |", None),
        ("300 of 300 bit-equal, max |difference| 0.", None),
    ],
)
def test_only_the_measured_latency_is_masked(text: str, masked: str | None) -> None:
    assert PUBLISHED.stable(text) == (text if masked is None else masked)


@needs_data
@pytest.mark.data
@pytest.mark.slow
def test_the_workflow_block_is_current(tmp_path: Path) -> None:
    """The whole workflow (index, dev grid, profile, two trials through a started server; minutes)."""
    printed = PUBLISHED.workflow_block(
        PUBLISHED.workflow_table(PUBLISHED.run_workflow(DATA.resolve(), tmp_path))
    )
    recorded = PUBLISHED.published_block(PUBLISHED.EVAL_MD.read_text(encoding="utf-8"), PUBLISHED.WORKFLOW)
    assert recorded is not None
    assert PUBLISHED.stable(printed) == PUBLISHED.stable(recorded), "docs/EVAL.md is stale: run `make eval`"


def test_the_bm25f_test_run_evaluates_the_cell_the_dev_block_picked() -> None:
    # Issue 29: the SciFact test comparison runs the development pick, never a cell chosen by hand.
    block = PUBLISHED.published_block(PUBLISHED.EVAL_MD.read_text(encoding="utf-8"), "scifact-bm25f-dev")
    assert block is not None
    picked = [line for line in block.splitlines() if "picked" in line]
    assert len(picked) == 1 and f"`{PUBLISHED.BM25F_TEST_ARM}`" in picked[0]
    [test] = [e for e in PUBLISHED.EXPERIMENTS if e.name == "scifact-bm25f"]
    assert f"bm25f={PUBLISHED.BM25F_TEST_ARM}" in test.argv
    # CACM's candidates start at equal weights and b 0.75: the chooser's tie-break.
    first = [axis.split("=")[1].split(",")[0] for axis in PUBLISHED.BM25F_CV_SWEEP.split(":")[2].split(";")]
    assert first == ["1", "0.75", "0.75"]
