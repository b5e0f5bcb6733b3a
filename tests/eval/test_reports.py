"""Reports: the files written, JSON and TREC runs that reprint the numbers, Markdown, plots, refusals."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, ScoreFusion
from weftsearch.errors import InvalidParameterError
from weftsearch.eval import harness, reports
from weftsearch.eval.datasets import Collection, FileRecord
from weftsearch.eval.harness import (
    ArmResult,
    Comparison,
    LearnedFusion,
    Sweep,
    SweepPoint,
    build_testbed,
    compare,
    learn_fusion,
    sweep,
)
from weftsearch.eval.metrics import Evaluation
from weftsearch.eval.reports import PLOTS_SKIPPED_NOTE, format_table, markdown_report, write_report
from weftsearch.eval.stats import paired_bootstrap
from weftsearch.ranking.arm import Arm

# ---------------------------------------------------------------------------- a tiny judged collection

# Bags of words over a small vocabulary, of very different lengths (so BM25's k1 and b matter),
# with pseudo-random judgements: the arms disagree, and many scores tie. d20 is a twin of d03.
TEXTS = [
    "quince pear cherry cherry plum apple plum pear lemon cherry cherry cherry lemon lemon mango raisin "
    "pear olive raisin banana banana olive apple apple mango lemon quince olive",
    "mango lemon cherry apple banana peach banana grape apple plum banana cherry plum mango plum olive "
    "peach apple mango mango",
    "grape olive apple grape grape banana pear grape raisin mango olive olive peach banana lemon cherry "
    "grape apple raisin",
    "banana peach cherry plum olive banana plum raisin quince mango banana banana quince mango banana "
    "quince olive mango grape grape cherry apple plum lemon mango grape",
    "apple grape apple banana raisin olive lemon mango plum grape mango peach grape mango pear",
    "quince banana quince apple pear pear banana lemon pear apple olive pear mango peach cherry banana "
    "grape banana grape raisin mango grape cherry",
    "lemon raisin mango mango quince peach",
    "mango lemon plum grape quince apple lemon mango raisin cherry pear peach peach olive raisin grape "
    "grape banana apple banana quince plum banana olive lemon olive olive cherry",
    "lemon olive olive banana apple grape pear",
    "pear peach banana quince pear plum mango quince apple apple apple cherry cherry banana mango apple "
    "mango banana peach apple cherry quince mango pear olive olive banana mango",
    "pear raisin plum apple grape cherry banana olive pear cherry plum pear banana",
    "pear plum banana mango olive",
    "apple olive olive plum pear grape peach plum quince banana",
    "apple olive banana mango raisin grape cherry lemon olive apple grape banana olive plum grape grape "
    "mango banana cherry",
    "lemon apple pear mango cherry apple pear banana banana",
    "banana apple quince cherry cherry plum olive banana lemon quince grape peach",
    "peach pear plum peach grape apple mango pear banana cherry mango pear quince banana banana",
    "pear olive peach raisin quince plum",
    "grape olive banana pear pear peach",
    "lemon grape lemon apple plum mango grape mango peach grape plum quince grape banana pear raisin "
    "banana peach plum quince banana apple raisin banana",
]
TEXTS.append(TEXTS[3])

QUERIES = {
    "q0": "banana cherry",
    "q1": "raisin plum",
    "q2": "cherry mango",
    "q3": "pear cherry",
    "q4": "olive mango",
    "q5": "raisin peach",
}

QRELS = {
    "q0": {"d18": 1, "d10": 2, "d09": 2, "d19": 1},
    "q1": {"d04": 1, "d09": 1, "d02": 1, "d01": 2},
    "q2": {"d19": 2, "d16": 1, "d00": 1, "d04": 1},
    "q3": {"d08": 1, "d02": 1, "d20": 2, "d00": 2},
    "q4": {"d13": 2, "d17": 1, "d03": 2, "d18": 2},
    "q5": {"d06": 1, "d18": 1, "d09": 1, "d20": 1},
}

CORPUS_SHA = hashlib.sha256(b"toy corpus").hexdigest()
QRELS_SHA = hashlib.sha256(b"toy qrels").hexdigest()
WRONG_SHA = hashlib.sha256(b"something else").hexdigest()

K = 10
SEED = 1


def make_collection(*, publishable: bool = True, queries: dict[str, str] | None = None) -> Collection:
    """A judged collection built in memory (no loader), with a manifest as the loaders record it."""
    documents = [Document(f"d{i:02d}", text) for i, text in enumerate(TEXTS)]
    queries = dict(QUERIES if queries is None else queries)
    qrels = {qid: dict(j) for qid, j in QRELS.items() if qid in queries}
    qrels.update({qid: {"d00": 1} for qid in queries if qid not in qrels})
    manifest = (
        FileRecord("corpus.jsonl", 4096, CORPUS_SHA, 4096, CORPUS_SHA),
        # An unpublishable copy: the qrels file differs from its pin.
        FileRecord("qrels.tsv", 512, QRELS_SHA, 512, QRELS_SHA if publishable else WRONG_SHA),
    )
    return Collection(
        name="toy",
        folder=Path("/nonexistent/toy"),
        documents=documents,
        queries=queries,
        qrels=qrels,
        splits={},
        link_sets={},
        query_file_ids={qid: qid for qid in queries},
        manifest=manifest,
        publishable=publishable,
    )


@dataclass(frozen=True)
class Setup:
    testbed: harness.Testbed  # qualified: a bare Test* name would make pytest try to collect it
    comparison: Comparison
    sweeps: tuple[Sweep, ...]
    learned: dict[str, LearnedFusion]


BM25_A = BM25Scorer()
BM25_B = BM25Scorer(k1=0.5, b=0.3)


def arms() -> list[Arm]:
    return [
        Arm("text", (BM25_A,), ScoreFusion(), depth=20, notes="the baseline"),
        Arm("rrf", (BM25_A, BM25_B), RRF(), depth=20),
        Arm("zscore", (BM25_B, BM25_A), ScoreFusion([1.0, 0.5], norm="zscore"), depth=10),
    ]


@pytest.fixture(scope="module")
def setup() -> Setup:
    testbed = build_testbed(make_collection())
    comparison = compare(testbed, arms(), k=K, resamples=200, seed=SEED)
    reference = comparison.arms["text"].run

    def rrf_arm(k: float, depth: int) -> Arm:
        return Arm(f"rrf-k{k:g}-d{depth}", (BM25_A, BM25_B), RRF(k=k), depth=depth)

    def bm25_arm(k1: float, b: float) -> Arm:
        return Arm(f"bm25-k1{k1:g}-b{b:g}", (BM25Scorer(k1=k1, b=b),), ScoreFusion(), depth=K)

    def single(k: float) -> Arm:
        return rrf_arm(k, 20)

    sweeps = (
        sweep(testbed, "rrf k x depth", rrf_arm, {"k": (10.0, 60.0), "depth": (10, 20)}, k=K),
        sweep(
            testbed,
            "bm25 k1 x b",
            bm25_arm,
            {"k1": (0.5, 1.2, 2.0), "b": (0.3, 0.75)},
            k=K,
            reference=reference,
            resamples=200,
            seed=SEED,
        ),
        sweep(testbed, "rrf k", single, {"k": (1.0, 10.0, 60.0)}, k=K, reference=reference, resamples=100),
    )
    dev = testbed.with_split(None, ["q0", "q1", "q2"])
    learned = {"rrf": learn_fusion(dev, arms()[1], k=K)}
    return Setup(testbed, comparison, sweeps, learned)


def write(setup: Setup, out: Path, **options: Any) -> reports.ReportFiles:
    return write_report(
        setup.comparison,
        out,
        sweeps=setup.sweeps,
        learned=setup.learned,
        title="Toy report",
        command="weft-search eval toy --seed 1",
        **options,
    )


def strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-strict JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def read_trec(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, q0, docid, _rank, score, _tag = line.split()
        assert q0 == "Q0"
        run.setdefault(qid, {})[docid] = float(score)
    return run


# ---------------------------------------------------------------------------- the files


def test_write_report_writes_every_file(setup: Setup, tmp_path: Path) -> None:
    out = tmp_path / "nested" / "report"  # parents are created
    files = write(setup, out, plots=False)
    assert files.out_dir == out
    assert files.markdown == out / "report.md"
    assert files.json == out / "report.json"
    assert set(files.trec) == {"text", "rrf", "zscore"}
    assert all(files.trec[name] == out / f"{name}.trec" for name in files.trec)
    assert files.plots == ()
    assert files.notes == ()  # plots=False is a choice, not something to warn about
    for path in files.paths:
        assert path.is_file()
    assert str(files) == f"report.md, report.json, 3 TREC runs and 0 plots in {out}"
    # Atomic writes leave no temporary file behind.
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in files.paths)


def test_report_json_reprints_the_comparison(setup: Setup, tmp_path: Path) -> None:
    files = write(setup, tmp_path, plots=False)
    text = files.json.read_text(encoding="utf-8")
    record = strict_json(text)
    comparison = setup.comparison
    assert [a["arm"]["name"] for a in record["arms"]] == list(comparison.arms)
    for entry in record["arms"]:
        name = entry["arm"]["name"]
        for measure in comparison.measures:
            assert entry["means"][measure] == comparison.mean(name, measure)
    assert record["bootstrap"]["seed"] == SEED
    assert record["bootstrap"]["resamples"] == 200
    assert record["testbed"]["index_content_sha256"] == setup.testbed.content_hash
    assert [s["name"] for s in record["sweeps"]] == [s.name for s in setup.sweeps]
    assert record["learned"]["rrf"]["chosen"] == repr(setup.learned["rrf"].fuser)
    assert record["report"]["trec"] == {name: f"{name}.trec" for name in comparison.arms}
    # Stable: sorted keys, one-space indent, so two writes give the same bytes.
    assert text == json.dumps(record, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    assert write(setup, tmp_path / "again", plots=False).json.read_bytes() == files.json.read_bytes()


def test_report_json_per_query_values_recompute_the_intervals(setup: Setup, tmp_path: Path) -> None:
    record = strict_json(write(setup, tmp_path, plots=False).json.read_text(encoding="utf-8"))
    per_query = record["per_query"]
    comparison = setup.comparison
    for name, result in comparison.arms.items():
        for measure in comparison.measures:
            assert per_query[name][measure] == result.evaluation.per_query(measure)
    headline = comparison.measures[0]
    entry = next(a for a in record["arms"] if a["arm"]["name"] == "rrf")
    again = paired_bootstrap(
        per_query["rrf"][headline],
        per_query[comparison.baseline][headline],
        resamples=record["bootstrap"]["resamples"],
        seed=record["bootstrap"]["seed"],
    )
    stored = entry["against_baseline"][headline]
    assert (again.low, again.high, again.p_value) == (stored["low"], stored["high"], stored["bootstrap_p"])


@pytest.mark.reference
def test_trec_files_reprint_ndcg_under_trec_eval(setup: Setup, tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    files = write(setup, tmp_path, plots=False)
    qrels = {qid: dict(j) for qid, j in setup.testbed.qrels.items()}
    comparison = setup.comparison
    # The fixture has tied scores (twin documents d03 and d20, equal bags of words), where the
    # engine's order and trec_eval's differ: trec_eval, re-sorting, must still get our numbers.
    assert comparison.arms["text"].run.tied_total() > 0
    for name, path in files.trec.items():
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n")
        lines = text.splitlines()
        assert all(line.split()[-1] == name for line in lines)
        assert lines == list(comparison.arms[name].run.trec_lines())
        run = read_trec(path)
        values = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
        ours = comparison.arms[name].evaluation.per_query("nDCG@10")
        assert sorted(values) == sorted(ours)
        for qid, value in ours.items():
            assert abs(values[qid]["ndcg_cut_10"] - value) <= 1e-12, (name, qid)
        reprinted = float(np.mean([values[q]["ndcg_cut_10"] for q in sorted(values)]))
        assert abs(reprinted - comparison.mean(name, "nDCG@10")) <= 1e-12


# ---------------------------------------------------------------------------- Markdown


def test_markdown_holds_the_facts_needed_to_judge_the_numbers(setup: Setup, tmp_path: Path) -> None:
    files = write(setup, tmp_path, plots=False)
    text = files.markdown.read_text(encoding="utf-8")
    comparison = setup.comparison
    assert text.startswith("# Toy report\n")
    assert "UNPUBLISHABLE" not in text
    assert "weft-search eval toy --seed 1" in text
    for name in comparison.arms:
        assert name in text
    assert "text (baseline)" in text
    assert CORPUS_SHA in text and QRELS_SHA in text
    assert setup.testbed.content_hash in text
    assert f"seed {SEED}" in text
    assert "PCG64" in text and "nearest-rank" in text
    for measure in comparison.measures:
        boot = comparison.bootstrap["rrf", measure]
        assert reports._interval(boot) in text
    # Arm parameters: every scorer's and fuser's repr, and the depth.
    assert (
        repr(BM25_B) in text
        and repr(ScoreFusion([1.0, 0.5], norm="zscore")) in text
        and "depth (candidates per scorer): 10" in text
    )
    # Learned fusion: the choice, the dev mean and queries, and (at most) five candidates.
    choice = setup.learned["rrf"]
    assert f"chosen: `{choice.fuser!r}`" in text
    assert f"({choice.dev_queries} queries, {len(choice.tried)} candidates)" in text
    # Sweeps: both two-parameter grids as matrices, every point listed.
    for s in setup.sweeps:
        assert f"### {s.name}" in text
        for point in s.points:
            assert point.arm in text
    assert "k1 (rows) / b (columns)" in text
    assert "k (rows) / depth (columns)" in text
    assert text.count("\n| 1 | ") == 1 and "\n| 6 | " not in text  # top 5 only


def test_markdown_tie_diagnostic_and_code_version(setup: Setup) -> None:
    text = markdown_report(setup.comparison)
    assert "## Tie diagnostic" in text
    run = setup.comparison.arms["text"].run
    queries = sum(1 for v in run.tied.values() if v)
    assert f"| text | {run.tied_total()} | {queries} | {len(run.qids)} |" in text
    for key, value in setup.comparison.code.items():
        assert f"| {key} | {value} |" in text
    assert "## Plots" not in text


def test_markdown_links_given_plots(setup: Setup) -> None:
    text = markdown_report(setup.comparison, plots={"deltas": "per_query_deltas.png"})
    assert "![deltas](per_query_deltas.png)" in text


def test_unpublishable_data_is_marked_loudly() -> None:
    testbed = build_testbed(make_collection(publishable=False))
    comparison = compare(testbed, arms()[:2], k=K, resamples=50, seed=SEED)
    table = format_table(comparison)
    first = table.splitlines()[0]
    assert first.startswith("UNPUBLISHABLE: ")
    assert "qrels.tsv" in first and WRONG_SHA in first
    markdown = markdown_report(comparison)
    assert markdown.splitlines()[2].startswith("> **UNPUBLISHABLE: ")
    assert "**NO**" in markdown  # the file's row in the data record


def test_publishable_data_has_no_banner(setup: Setup) -> None:
    assert "UNPUBLISHABLE" not in format_table(setup.comparison)
    assert "UNPUBLISHABLE" not in markdown_report(setup.comparison)
    # A comparison that does not say whether its data matched cannot be vouched for.
    silent = replace(setup.comparison, testbed={})
    assert format_table(silent).startswith("UNPUBLISHABLE: ")


# ---------------------------------------------------------------------------- the terminal table


def test_format_table_shows_means_interval_p_and_ties(setup: Setup) -> None:
    comparison = setup.comparison
    table = format_table(comparison)
    headline = comparison.measures[0]
    boot = comparison.bootstrap["rrf", headline]
    interval = f"{boot.mean_difference:+.4f} [{boot.low:+.4f}, {boot.high:+.4f}]"
    assert interval in table
    lines = table.splitlines()
    rows = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in comparison.arms}
    assert set(rows) == set(comparison.arms)
    assert rows["text"].split()[1] == "*"
    assert "baseline" in rows["text"]
    for name in comparison.arms:
        assert f"{comparison.mean(name, headline):.4f}" in rows[name]
        run = comparison.arms[name].run
        assert rows[name].endswith(f"{run.tied_total()}/{sum(1 for v in run.tied.values() if v)}")
    assert reports._p(comparison.randomisation["rrf", headline].p_value, 200) in rows["rrf"]


def test_format_table_measures_subset_and_refusal(setup: Setup) -> None:
    table = format_table(setup.comparison, measures=["AP", "MRR"])  # aliases are canonicalised
    header = table.splitlines()[1]
    assert "AP" in header and "RR" in header and "P@10" not in header
    with pytest.raises(InvalidParameterError, match="not evaluated"):
        format_table(setup.comparison, measures=["nDCG@20"])


def test_p_values_of_zero_print_as_a_bound() -> None:
    assert reports._p(0.0, 200) == "<0.005"
    assert reports._p(0.25, 200) == "0.2500"


# ---------------------------------------------------------------------------- plots


def test_missing_matplotlib_skips_plots_with_a_note(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    files = write(setup, tmp_path, plots=True)
    assert files.plots == ()
    assert PLOTS_SKIPPED_NOTE in files.notes
    assert PLOTS_SKIPPED_NOTE in files.markdown.read_text(encoding="utf-8")
    assert strict_json(files.json.read_text(encoding="utf-8"))["report"]["notes"] == [PLOTS_SKIPPED_NOTE]
    assert not list(tmp_path.glob("*.png"))
    assert str(files).endswith(f"; {PLOTS_SKIPPED_NOTE}")


def test_plots_are_written_as_deterministic_pngs(setup: Setup, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    files = write(setup, tmp_path / "one", plots=True)
    names = [p.name for p in files.plots]
    assert names == [
        "per_query_deltas.png",
        "sweep-rrf-k-x-depth.png",
        "sweep-bm25-k1-x-b.png",
        "sweep-rrf-k.png",
    ]
    for path in files.plots:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = files.markdown.read_text(encoding="utf-8")
    for name in names:
        assert f"]({name})" in markdown
    again = write(setup, tmp_path / "two", plots=True)
    assert [p.read_bytes() for p in again.plots] == [p.read_bytes() for p in files.plots]


def test_plot_of_a_three_parameter_sweep_is_skipped_with_a_note(setup: Setup, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    point = SweepPoint({"a": 1, "b": 2, "c": 3}, "x", 0.5, None, 0)
    three = Sweep("three", "nDCG@10", {"a": (1,), "b": (2,), "c": (3,)}, (point,), None)
    files = write_report(setup.comparison, tmp_path, sweeps=[three])
    assert [p.name for p in files.plots] == ["per_query_deltas.png"]
    assert any("three" in note for note in files.notes)
    assert "| 1 | 2 | 3 | x | 0.5000 | 0 |" in files.markdown.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------- refusals and odd values


def test_an_out_dir_that_is_a_file_is_refused(setup: Setup, tmp_path: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("not a folder")
    with pytest.raises(InvalidParameterError, match="not a directory"):
        write_report(setup.comparison, blocker, plots=False)
    with pytest.raises(InvalidParameterError, match="is a file"):
        write_report(setup.comparison, blocker / "below", plots=False)
    assert blocker.read_text() == "not a folder"


def test_a_failed_write_keeps_the_old_file_and_no_temporary(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = write(setup, tmp_path, plots=False)
    before = files.markdown.read_bytes()

    def fail(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_report(setup.comparison, tmp_path, plots=False, title="other")
    assert files.markdown.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def nan_comparison(comparison: Comparison) -> Comparison:
    """``comparison`` with the second arm's per-query values all NaN (as if nothing was evaluated)."""
    name = list(comparison.arms)[1]
    result = comparison.arms[name]
    evaluation = result.evaluation
    values = {m: np.full(len(evaluation.qids), math.nan) for m in evaluation.values}
    broken = Evaluation(evaluation.measures, evaluation.qids, values)
    return replace(comparison, arms={**comparison.arms, name: ArmResult(result.run, broken)})


def test_nan_means_become_null_in_strict_json(setup: Setup, tmp_path: Path) -> None:
    comparison = nan_comparison(setup.comparison)
    point = SweepPoint({"k": 1.0}, "nan-arm", math.nan, None, 0)
    odd = Sweep("nan sweep", "nDCG@10", {"k": (1.0,)}, (point,), None)
    files = write_report(comparison, tmp_path, sweeps=[odd], plots=False)
    text = files.json.read_text(encoding="utf-8")
    assert "NaN" not in text
    record = strict_json(text)
    assert all(v is None for v in record["arms"][1]["means"].values())
    assert all(v is None for v in record["per_query"]["rrf"]["nDCG@10"].values())
    assert record["sweeps"][0]["points"][0]["mean"] is None
    row = next(line for line in format_table(comparison).splitlines() if line.startswith("rrf "))
    assert row.split()[1:6] == ["nan"] * 5
    assert "| nan-arm | nan |" in files.markdown.read_text(encoding="utf-8")


def test_nan_values_do_not_break_plots(setup: Setup, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    comparison = nan_comparison(setup.comparison)
    points = tuple(
        SweepPoint({"a": a, "b": b}, f"p{a}{b}", math.nan if a == b else 0.5, None, 0)
        for a in (1, 2)
        for b in (1, 2)
    )
    grid = Sweep("grid", "nDCG@10", {"a": (1, 2), "b": (1, 2)}, points, None)
    files = write_report(comparison, tmp_path, sweeps=[grid])
    assert [p.name for p in files.plots] == ["per_query_deltas.png", "sweep-grid.png"]


def test_a_single_arm_report_has_nothing_to_compare(tmp_path: Path) -> None:
    testbed = build_testbed(make_collection())
    comparison = compare(testbed, arms()[:1], k=K, resamples=20, seed=0)
    assert "baseline" in format_table(comparison)
    files = write_report(comparison, tmp_path)
    assert "nothing to compare" in files.markdown.read_text(encoding="utf-8")
    assert all(p.name != "per_query_deltas.png" for p in files.plots)


def test_queries_without_hits_get_a_trec_eval_note(tmp_path: Path) -> None:
    """An empty ranking has no line in a TREC file; trec_eval skips it unless run with -c."""
    queries = {**QUERIES, "q9": "zebra"}  # no document holds the word: every arm retrieves nothing
    testbed = build_testbed(make_collection(queries=queries))
    comparison = compare(testbed, arms()[:2], k=K, resamples=20, seed=0)
    files = write_report(comparison, tmp_path, plots=False)
    assert any("'text': 1 queries retrieved nothing" in note and "-c" in note for note in files.notes)
    assert "q9" not in read_trec(files.trec["text"])
    assert "trec_eval -c" in files.markdown.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------- unpublishable outputs


def png_text(data: bytes) -> dict[str, str]:
    """The tEXt chunks of a PNG file: keyword -> text."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    out: dict[str, str] = {}
    at = 8
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            keyword, _, text = body.partition(b"\0")
            out[keyword.decode("latin-1")] = text.decode("latin-1")
        at += 12 + length
    return out


def test_unpublishable_data_is_marked_in_trec_tags_json_and_plots(tmp_path: Path) -> None:
    testbed = build_testbed(make_collection(publishable=False))
    comparison = compare(testbed, arms()[:2], k=K, resamples=50, seed=SEED)
    rrf_arm = arms()[1]

    def rrf_k(k: float) -> Arm:
        return Arm(f"rrf-k{k:g}", rrf_arm.scorers, RRF(k=k), depth=20)

    reference = comparison.arms["text"].run
    curve = sweep(testbed, "rrf k", rrf_k, {"k": (10.0, 60.0)}, k=K, reference=reference, resamples=20)
    files = write_report(comparison, tmp_path, sweeps=[curve], plots=False)
    # TREC files have no comments: the run tag of every line carries the mark, and trec_eval reads them.
    for name, path in files.trec.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines and all(line.split()[-1] == f"UNPUBLISHABLE-{name}" for line in lines)
        assert reports.trec_tag(comparison, name) == f"UNPUBLISHABLE-{name}"
        assert read_trec(path) == comparison.arms[name].run.run
    record = strict_json(files.json.read_text(encoding="utf-8"))
    assert record["unpublishable"].startswith("UNPUBLISHABLE: ") and WRONG_SHA in record["unpublishable"]
    assert record["testbed"]["publishable"] is False
    # Plots: a red title over every figure, and the same words in the PNG's Title text chunk.
    pytest.importorskip("matplotlib")
    mark = reports.UNPUBLISHABLE_PLOT_TITLE
    assert mark.startswith("UNPUBLISHABLE")
    deltas, curve_figure = reports._delta_figure(comparison, mark), reports._sweep_figure(curve, mark)
    assert deltas is not None and deltas.get_suptitle() == mark
    assert curve_figure is not None and curve_figure.get_suptitle() == mark
    files = write_report(comparison, tmp_path / "plots", sweeps=[curve], plots=True)
    assert [p.name for p in files.plots] == ["per_query_deltas.png", "sweep-rrf-k.png"]
    for path in files.plots:
        assert png_text(path.read_bytes()).get("Title") == mark


def test_publishable_outputs_carry_no_mark(setup: Setup, tmp_path: Path) -> None:
    files = write(setup, tmp_path, plots=True)
    for name, path in files.trec.items():
        assert {line.split()[-1] for line in path.read_text(encoding="utf-8").splitlines()} == {name}
    assert strict_json(files.json.read_text(encoding="utf-8"))["unpublishable"] is None
    for path in files.plots:
        assert "Title" not in png_text(path.read_bytes())
        assert b"UNPUBLISHABLE" not in path.read_bytes()
    if files.plots:
        figure = reports._delta_figure(setup.comparison)
        assert figure is not None and figure.get_suptitle() == ""


def test_trec_lines_refuse_a_tag_that_is_not_one_word(setup: Setup) -> None:
    run = setup.comparison.arms["text"].run
    assert {line.split()[-1] for line in run.trec_lines("other-tag")} == {"other-tag"}
    for bad in ("", "two words", "tab\there"):
        with pytest.raises(InvalidParameterError, match="run tag"):
            run.trec_lines(bad)


# ---------------------------------------------------------------------------- the tie diagnostic in JSON


def test_tie_break_slots_per_query_in_report_json(tmp_path: Path) -> None:
    """A hand-built case whose counts follow from the definitions.

    q1: three identical documents tie under BM25. ``text`` (min-max fusion of one BM25 stream)
    keeps the tie: a1, a2, a3 all score 1.0 (b1 0.0), three tied slots, in the fused run and in
    its one stream. ``rrf`` fuses two BM25 streams that both rank a1, a2, a3 first (tied, in key
    order): rank r in both streams scores 2 / (60 + r), distinct per rank, so the fused run has no
    tie while each stream still has three tied slots.

    q2: no BM25 tie, but the two streams disagree. With k1 = 1.2, b = 0.75 (avgdl 2), c1 (one
    "cherry" in one word) scores 2.2 / 1.75 = 1.257 and c2 (two in four words) 4.4 / 4.1 = 1.073
    (times the same IDF); with k1 = 0.5, b = 0.3, c1 scores 1.5 / 1.425 = 1.053 and c2
    3.0 / 2.65 = 1.132. RRF gives each 1 / 61 + 1 / 62: two tied fused slots, none in a stream.
    """
    texts = {
        "a1": "apple banana",
        "a2": "apple banana",
        "a3": "apple banana",
        "b1": "apple",
        "c1": "cherry",
        "c2": "cherry cherry date fig",
    }
    queries = {"q1": "apple banana", "q2": "cherry"}
    collection = Collection(
        name="ties",
        folder=Path("/nonexistent/ties"),
        documents=[Document(key, text) for key, text in texts.items()],
        queries=queries,
        qrels={"q1": {"a2": 1}, "q2": {"c2": 1}},
        splits={},
        link_sets={},
        query_file_ids={qid: qid for qid in queries},
        manifest=(FileRecord("corpus.jsonl", 64, CORPUS_SHA, 64, CORPUS_SHA),),
        publishable=True,
    )
    testbed = build_testbed(collection)
    first, second = BM25Scorer(), BM25Scorer(k1=0.5, b=0.3)
    two = [Arm("text", (first,), ScoreFusion(), depth=10), Arm("rrf", (first, second), RRF(), depth=10)]
    comparison = compare(testbed, two, k=K, resamples=20, seed=0)
    assert list(comparison.arms["text"].run.keys["q1"]) == ["a1", "a2", "a3", "b1"]
    record = strict_json(write_report(comparison, tmp_path, plots=False).json.read_text(encoding="utf-8"))
    assert record["tie_break_slots_per_query"] == {
        "text": {"q1": {"fused": 3, "streams": [3]}, "q2": {"fused": 0, "streams": [0]}},
        "rrf": {"q1": {"fused": 0, "streams": [3, 3]}, "q2": {"fused": 2, "streams": [0, 0]}},
    }
    # The per-arm totals agree with the per-query counts.
    tied = {entry["arm"]["name"]: entry["tie_break_slots"] for entry in record["arms"]}
    assert tied == {"text": 3, "rrf": 2}
    assert comparison.arms["rrf"].run.scores["q2"].tolist() == [1 / 61 + 1 / 62] * 2


# ---------------------------------------------------------------------------- unpinned (private) data


def make_unpinned_collection() -> Collection:
    """The toy collection as a user's own: no file has a public pin (as load_beir records it)."""
    pinned = make_collection()
    manifest = tuple(
        FileRecord(record.path, record.size, record.sha256, None, None) for record in pinned.manifest
    )
    return replace(pinned, manifest=manifest, publishable=True)


def test_unpinned_data_is_not_unpublishable_and_every_output_says_no_pin_exists(tmp_path: Path) -> None:
    testbed = build_testbed(make_unpinned_collection())
    assert testbed.provenance == "unpinned" and testbed.publishable
    comparison = compare(testbed, arms()[:2], k=K, resamples=50, seed=SEED)
    # The terminal table: its first line says no public pin exists, never UNPUBLISHABLE.
    table = format_table(comparison)
    assert table.startswith("UNPINNED: no public pin exists") and "UNPUBLISHABLE" not in table
    assert "corpus.jsonl, qrels.tsv" in table.splitlines()[0]
    files = write_report(comparison, tmp_path, plots=True)
    markdown = files.markdown.read_text(encoding="utf-8")
    assert markdown.splitlines()[2].startswith("> UNPINNED: no public pin exists")
    assert "UNPUBLISHABLE" not in markdown and "the data did not match" not in markdown
    assert "- provenance: no public pin exists (your own data)" in markdown
    assert CORPUS_SHA in markdown and QRELS_SHA in markdown  # the files' hashes are recorded
    record = strict_json(files.json.read_text(encoding="utf-8"))
    assert record["unpublishable"] is None
    assert record["unpinned"].startswith("UNPINNED: ")
    assert record["testbed"]["provenance"] == "unpinned" and record["testbed"]["publishable"] is True
    assert {entry["sha256"] for entry in record["testbed"]["files"]} == {CORPUS_SHA, QRELS_SHA}
    # TREC tags stay the arms' names: there is nothing to warn about.
    for name, path in files.trec.items():
        assert {line.split()[-1] for line in path.read_text(encoding="utf-8").splitlines()} == {name}
    for path in files.plots:
        assert png_text(path.read_bytes()).get("Title") == reports.UNPINNED_PLOT_TITLE
        assert b"UNPUBLISHABLE" not in path.read_bytes()


def test_mismatched_data_is_still_unpublishable_and_never_called_unpinned(tmp_path: Path) -> None:
    testbed = build_testbed(make_collection(publishable=False))
    assert testbed.provenance == "mismatched"
    comparison = compare(testbed, arms()[:2], k=K, resamples=50, seed=SEED)
    assert format_table(comparison).startswith("UNPUBLISHABLE: ")
    files = write_report(comparison, tmp_path, plots=False)
    record = strict_json(files.json.read_text(encoding="utf-8"))
    assert record["unpinned"] is None and record["unpublishable"].startswith("UNPUBLISHABLE: ")
    assert "UNPINNED" not in files.markdown.read_text(encoding="utf-8")
    assert "**a file differs from its public pin**" in files.markdown.read_text(encoding="utf-8")
