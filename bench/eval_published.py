"""Reprint every number docs/EVAL.md publishes, and check or rewrite the tables there.

Each experiment below is one ``weft-search eval`` command. docs/EVAL.md holds,
for each, the command and a table between ``<!-- eval:NAME -->`` and
``<!-- /eval:NAME -->``; this script regenerates the tables from the code as
it is now.

Usage::

    python bench/eval_published.py --data ../shared/datasets [--only cacm-graph,...]
        [--write]          # rewrite the tables in docs/EVAL.md
        [--out eval-out]   # also write each experiment's full report (md, json, runs, plots)

Without ``--write`` it prints each table and exits 1 when docs/EVAL.md differs
(``make eval`` writes; the test suite checks).

Besides the ``weft-search eval`` experiments, one block is a workflow of several commands
(:data:`WORKFLOW`, issue 28): SciFact indexed with its frozen vectors, a declared grid
(:data:`GRID_FILE`) picked on development queries and frozen as a profile, and the frozen profile
compared with two baselines on the test queries through a server the trial command starts on
loopback itself (``trial run --serve``), interleaved and then as client cycles. Its latency
figures are measured, so they differ from run to run: the check compares that block with them
masked (:func:`stable`), and ``--write`` rewrites them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weftsearch.cli.eval import Experiment, experiment_from_args
from weftsearch.eval import reports

REPO = Path(__file__).resolve().parents[1]
EVAL_MD = REPO / "docs" / "EVAL.md"
DEFAULT_DATA = REPO.parent / "shared" / "datasets"


@dataclass(frozen=True)
class Published:
    """One published experiment: its name in EVAL.md and its ``weft-search eval`` arguments."""

    name: str
    argv: tuple[str, ...]
    new_documents: bool = (
        False  # also print each arm's top-10 share of documents the baseline did not retrieve
    )

    def command(self) -> str:
        """The command line as EVAL.md prints it (data folder written as DATA)."""
        return "weft-search " + shlex.join(self.argv).replace("'<DATA>'", "DATA").replace("<DATA>", "DATA")


#: Issue 29: the declared BM25F grid (title weight x b per field; rule: nDCG@10, R@10, nearest equal
#: weights and b 0.75), committed before its first run, and the cell it picked on SciFact's development
#: queries, which the test run evaluates.
BM25F_GRID = "bench/grids/scifact-bm25f.json"
BM25F_TEST_ARM = "bm25f(title=3, body=1, b.title=1, b.body=0.9)@100"
#: The same axes for CACM's cross-validation, each axis's equal-weights / b 0.75 value first (the chooser
#: keeps the earlier candidate on an exact tie of training nDCG@10).
BM25F_CV_SWEEP = "grid:bm25f:title=1,0.5,1.5,2,3,5;b.title=0.75,0.3,0.5,1;b.body=0.75,0.5,0.9"

#: Experiment 4 (issue 19): link constructions at frozen defaults and chosen by 5-fold cross-validation.
LINK_EXPERIMENT: tuple[str, ...] = (
    "--cv",
    "5",
    "--arms",
    "text=bm25",
    "graph=rrf(bm25, graph(seed=bm25))",
    "pagerank=rrf(bm25, pagerank(seed=bm25))",
    "pagerank-score=rrf(bm25, pagerank(seed=bm25, restart=score))",
    "propagate=propagate(seed=bm25)",
    "--sweep",
    "grid:graph:seed_n=1,3,5,10,20;max_depth=1,2,3;weight=0,0.1,0.25,0.5,1",
    "--sweep",
    "grid:pagerank:seed_n=1,3,5,10,20;weight=0,0.1,0.25,0.5,1",
    "--sweep",
    "grid:pagerank-score:seed_n=1,3,5,10,20;weight=0,0.1,0.25,0.5,1",
    "--sweep",
    "grid:propagate:a=0,0.1,0.2,0.3,0.5,0.7;iterations=1,2,3;expand=false,true",
)

EXPERIMENTS: tuple[Published, ...] = (
    Published(
        "scifact-bm25",
        (
            "eval",
            "scifact",
            "--data",
            "<DATA>",
            "--vectors",
            "none",
            "--arms",
            "text=bm25",
            "lucene-flat-params=bm25(k1=0.9, b=0.4)",
            "bm25s-params=bm25(k1=1.5, b=0.75)",
        ),
    ),
    Published(
        "scifact-hybrid",
        ("eval", "scifact", "--data", "<DATA>", "--sweep", "rrf:rrf", "--sweep", "weights:rrf"),
    ),
    Published(
        "scifact-ann",
        (
            "eval",
            "scifact",
            "--data",
            "<DATA>",
            "--arms",
            "rrf-exact=rrf(bm25, vector(exact=true))",
            "rrf-ivf=rrf(bm25, vector)",
            "vector-exact=vector(exact=true)",
            "vector-ivf=vector",
        ),
    ),
    Published(
        "cacm-graph", ("eval", "cacm", "--data", "<DATA>", "--sweep", "rrf:graph", "--sweep", "rrf:pagerank")
    ),
    Published(
        "cacm-graph-coupling",
        (
            "eval",
            "cacm",
            "--data",
            "<DATA>",
            "--link-set",
            "coupling",
            "--arms",
            "text=bm25",
            "graph=rrf(bm25, graph(seed=bm25))",
            "graph-seeds=rrf(bm25, graph(seed=bm25, keep_seeds=true))",
        ),
    ),
    Published("cisi-graph", ("eval", "cisi", "--data", "<DATA>", "--sweep", "rrf:graph")),
    Published("cranfield", ("eval", "cranfield", "--data", "<DATA>", "--sweep", "bm25")),
    *(
        Published(
            name, ("eval", dataset, "--data", "<DATA>", *link_set, *LINK_EXPERIMENT), new_documents=True
        )
        for name, dataset, link_set in (
            ("cacm-links", "cacm", ()),
            ("cacm-links-coupling", "cacm", ("--link-set", "coupling")),
            ("cisi-links", "cisi", ()),
        )
    ),
    # Issue 29: BM25F over title and body against BM25 over the joined text (--fields keeps the joined
    # text as the default field, so `text` is the published BM25 to the bit). SciFact: the grid file's
    # rule picks on the 807 development queries; the pick is then run on the 300 test queries
    # (BM25F_TEST_ARM, checked against the dev block by the tests). CACM: 5-fold cross-validation.
    Published("scifact-bm25f-dev", ("eval", "scifact", "--data", "<DATA>", "--fields", "--grid", BM25F_GRID)),
    Published(
        "scifact-bm25f",
        (
            "eval", "scifact", "--data", "<DATA>", "--fields", "--arms", "text=bm25",
            f"bm25f={BM25F_TEST_ARM}", "bm25f-equal=bm25f(title=1, body=1)",
        ),
    ),
    Published(
        "cacm-bm25f",
        (
            "eval", "cacm", "--data", "<DATA>", "--fields", "--cv", "5", "--arms", "text=bm25",
            "bm25f=bm25f(title=1, body=1)", "--sweep", BM25F_CV_SWEEP,
        ),
    ),
)  # fmt: skip

#: Experiments cheap enough for the default test run (the small collections).
#: Experiment 4 (cacm-links, cacm-links-coupling, cisi-links) is left out: its cross-validation over
#: 161 grid points takes 30-70 s a collection, so it is checked under ``-m slow`` with SciFact.
SMALL = ("cacm-graph", "cacm-graph-coupling", "cisi-graph", "cranfield")


#: The profile workflow's block in EVAL.md (issue 28).
WORKFLOW = "scifact-profile-workflow"
#: The guide's 20 cells: RRF k x lexical weight w (semantic 1 - w), 100 candidates a channel. A file of
#: the repository, beside this script that runs it, so its SHA-256 (in the profile's provenance) is fixed.
GRID_FILE = REPO / "bench" / "grids" / "scifact-rrf.json"
_VECTORS = "<DATA>/scifact/vectors/all-minilm-l6-v2-int8"
#: The workflow's commands, as EVAL.md prints them (run in a scratch folder; <DATA> is the data folder).
WORKFLOW_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("index", "<DATA>/scifact", "--index", "scifact-idx", "--vectors", f"{_VECTORS}/corpus.npy"),
    ("eval", "scifact", "--data", "<DATA>", "--grid", "bench/grids/scifact-rrf.json", "--save-profile",
     "hybrid", "--profile-index", "scifact-idx", "--no-plots", "--out", "dev-report"),
    ("trial", "plan", "--out", "plan.json", "--method", "bm25=bm25@100", "--method",
     "dense=vector(exact=true)@100", "--method", "hybrid:1", "--queries", "<DATA>/scifact/queries.jsonl",
     "--qrels", "<DATA>/scifact/qrels/test.tsv", "--query-vectors", f"{_VECTORS}/queries.npy",
     "--vector-model", "all-minilm-l6-v2-int8"),
    ("trial", "run", "plan.json", "--serve", "scifact-idx", "--report", "trial.json"),
    ("trial", "run", "plan.json", "--serve", "scifact-idx", "--vectors-record", f"{_VECTORS}/record.json",
     "--cycle", "--report", "cycle.json"),
)  # fmt: skip
#: A latency pair "p50 / p95" as the workflow's block prints it: what :func:`stable` masks.
_LATENCY = re.compile(r"\b\d+\.\d / \d+\.\d\b")


def stable(block_text: str) -> str:
    """``block_text`` with its measured latency pairs masked: what the check compares."""
    return _LATENCY.sub("p50 / p95", block_text)


def _workflow_argv(command: tuple[str, ...], data: Path) -> list[str]:
    return [
        a.replace("<DATA>", str(data)).replace("bench/grids/scifact-rrf.json", str(GRID_FILE))
        for a in command
    ]


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def run_workflow(data: Path, scratch: Path) -> dict[str, Any]:
    """Run :data:`WORKFLOW_COMMANDS` in ``scratch``; return the reports (``dev``, ``trial``, ``cycle``).

    Raises:
        RuntimeError: a command exited non-zero (the message names it and holds what it printed).

    """
    from weftsearch.cli import main as weft

    with _inside(scratch):
        for command in WORKFLOW_COMMANDS:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                status = weft(_workflow_argv(command, data))
            if status != 0:
                raise RuntimeError(
                    f"weft-search {shlex.join(command)} exited {status}:\n{printed.getvalue()}"
                )
        return {
            "dev": json.loads(Path("dev-report/report.json").read_text(encoding="utf-8")),
            "trial": json.loads(Path("trial.json").read_text(encoding="utf-8")),
            "cycle": json.loads(Path("cycle.json").read_text(encoding="utf-8")),
        }


def _interval(trial: dict[str, Any], method: str, measure: str) -> str:
    [item] = [i for i in trial["intervals"] if i["method"] == method and i["measure"] == measure]
    return f"{_signed(item['mean_difference'])} [{_signed(item['low'])}, {_signed(item['high'])}]"


def _pair(latency: dict[str, Any]) -> str:
    return f"{latency['p50_ms']:.1f} / {latency['p95_ms']:.1f}"


def workflow_table(reports: dict[str, Any]) -> str:
    """The workflow's block text: the dev pick, the test comparison through the server, latency."""
    grid, trial, cycle = reports["dev"]["extra"]["grid"], reports["trial"], reports["cycle"]
    pick = grid["selection"]
    removed = ", ".join(
        f"{q} (duplicates test {t})"
        for q, t in sorted(grid["removed_query_ids"].items(), key=lambda x: (len(x[0]), x[0]))
    )
    ws, ks = grid["grid"]["axes"]["w"], grid["grid"]["axes"]["k"]
    cells = {(c["params"]["w"], c["params"]["k"]): c["means"] for c in grid["cells"]}
    lines = [
        f"Dev pick: {len(grid['cells'])} cells on {grid['queries']} development queries (split "
        f"{grid['split']} less {removed}), rule `{pick['rule']}`; dev nDCG@10 (R@10):",
        "",
        "| w \\ k | " + " | ".join(f"{k:g}" for k in ks) + " |",
        "|" + "---|" * (len(ks) + 1),
    ]
    for w in ws:
        row = [f"{cells[w, k]['nDCG@10']:.4f} ({cells[w, k]['R@10']:.4f})" for k in ks]
        lines.append(f"| {w:g} | " + " | ".join(row) + " |")
    lines += [
        "",
        f"Picked w={pick['params']['w']:g}, k={pick['params']['k']:g} (decided by {pick['decided_by']}), "
        f"frozen as profile `hybrid` version 1: `{pick['spec']}`; grid file SHA-256 "
        f"`{grid['grid']['sha256'][:16]}...`.",
        "",
    ]
    plan = trial["plan"]["record"]
    baseline = plan["baseline"]
    names = list(trial["means"])
    lines += [
        f"Test through the server ({len(plan['queries'])} test queries x {len(names)} methods, seeded "
        f"shuffled order, {trial['concurrency']} in flight, every response validated: "
        f"{'valid' if trial['valid'] and cycle['valid'] else 'INVALID'}; {plan['resamples']} resamples, "
        f"seed {plan['seed']}; judged R@10, judgments_complete=false):",
        "",
        f"| method | nDCG@10 | R@10 | nDCG@10 vs {baseline} [95% CI] | R@10 vs {baseline} [95% CI] "
        f"| queries losing to {baseline} (nDCG@10) |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        means = trial["means"][name]
        if name == baseline:
            versus, losing = ("baseline", ""), ""
        else:
            versus = (_interval(trial, name, "nDCG@10"), _interval(trial, name, "R@10"))
            [pair] = [
                p
                for p in trial["pairwise"]
                if {p["a"], p["b"]} == {baseline, name} and p["measure"] == "nDCG@10"
            ]
            losing = str(len(pair["b_loses"] if pair["a"] == baseline else pair["a_loses"]))
        figures = f"{means['nDCG@10']:.4f} | {means['R@10']:.4f}"
        lines.append(f"| {name} | {figures} | {versus[0]} | {versus[1]} | {losing} |")
    check = cycle["vector_check"]
    lines += [
        "",
        "Latency in ms, p50 / p95 (measured: these vary from run to run), interleaved as above and as "
        "client cycles (one serial warm client, query text to response, the server embedding the text):",
        "",
        "| method | interleaved | cycle |",
        "|---|---|---|",
    ]
    for name in names:
        by_method = trial["latency"]["by_method"][name], cycle["latency"]["by_method"][name]
        lines.append(f"| {name} | {_pair(by_method[0])} | {_pair(by_method[1])} |")
    lines += [
        "",
        f"Query vectors the offline model regenerates against the frozen ones: {check['bit_equal']} of "
        f"{check['queries']} bit-equal, {check['within_tolerance']} within {check['tolerance']:g}, max "
        f"|difference| {check['max_abs_difference']:.3g}.",
    ]
    return "\n".join(lines)


def workflow_block(printed: str) -> str:
    """The workflow's marked block: its commands and ``printed``."""
    commands = "\n".join(
        "weft-search " + shlex.join(a.replace("<DATA>", "DATA") for a in c) for c in WORKFLOW_COMMANDS
    )
    return f"<!-- eval:{WORKFLOW} -->\n```sh\n{commands}\n```\n\n{printed}\n<!-- /eval:{WORKFLOW} -->"


def _argv(experiment: Published, data: Path) -> list[str]:
    # A grid file is the repository's (bench/grids/), wherever the script runs from.
    return [str(data) if a == "<DATA>" else str(REPO / a) if a.startswith("bench/grids/") else a
            for a in experiment.argv]  # fmt: skip


def run(experiment: Published, data: Path) -> Experiment:
    """Run one experiment through the same argument parser the CLI uses."""
    from weftsearch.cli import build_parser

    args = build_parser().parse_args(_argv(experiment, data))
    return experiment_from_args(args, experiment.command())


def _signed(value: float) -> str:
    return f"{value:+.4f}"


def new_in_top10(experiment: Experiment) -> str:
    """Per arm: the top-10 slots holding a document absent from the baseline's run (its top k)."""
    comparison = experiment.comparison
    base = comparison.arms[comparison.baseline].run
    parts = []
    for name, result in comparison.arms.items():
        if name == comparison.baseline:
            continue
        run = result.run
        slots = new = 0
        for qid in run.qids:
            retrieved = set(base.keys[qid])
            top = run.keys[qid][:10]
            slots += len(top)
            new += sum(1 for key in top if key not in retrieved)
        parts.append(f"{name} {new / max(slots, 1):.1%} ({new} of {slots})")
    return (
        f"Top-10 slots holding a document {comparison.baseline} did not retrieve in its top {comparison.k}: "
        + "; ".join(parts)
        + "."
    )


def table(experiment: Experiment, *, new_documents: bool = False) -> str:
    """The Markdown table EVAL.md shows for one experiment (deterministic text)."""
    comparison = experiment.comparison
    head = comparison.measures[0]
    lines = [
        f"| arm | {' | '.join(comparison.measures)} | {head} vs {comparison.baseline} [95% CI] | p (rand.) "
        "| tie-break slots |",
        "|" + "---|" * (len(comparison.measures) + 4),
    ]
    grid = experiment.grid
    shown = None if grid is None else {comparison.baseline, grid.picked.name}
    for name, result in comparison.arms.items():
        if shown is not None and name not in shown:
            continue  # a grid's other cells: in its report (report.md, report.json)
        means = " | ".join(f"{result.evaluation.mean(m):.4f}" for m in comparison.measures)
        if name == comparison.baseline:
            delta, p = "baseline", ""
        else:
            b = comparison.bootstrap[name, head]
            delta = f"{_signed(b.mean_difference)} [{_signed(b.low)}, {_signed(b.high)}]"
            p = f"{comparison.randomisation[name, head].p_value:.4f}"
        lines.append(f"| {name} | {means} | {delta} | {p} | {result.run.tied_total()} |")
    testbed = comparison.testbed
    lines.append("")
    lines.append(
        f"{testbed['queries']} queries, {testbed['documents']} documents, k={comparison.k}, "
        f"{comparison.resamples} resamples, seed {comparison.seed}; index content sha256 "
        f"`{testbed['index_content_sha256'][:16]}...`"
    )
    if grid is not None:
        picked = grid.picked
        lines.append(
            f"Grid `bench/grids/{Path(grid.grid.source).name}` ({len(grid.grid.cells)} cells, "
            f"baseline {comparison.baseline}) on "
            f"{grid.queries} queries of split {grid.split} (left out as duplicates of test queries: "
            f"{', '.join(sorted(grid.removed)) or 'none'}); rule `{grid.grid.rule}`: picked {picked.name} "
            f"`{picked.spec}`, decided by {grid.selection.decided_by}."
        )
    for name, choice in experiment.learned.items():
        lines.append(
            f"Learned ({name}): `{choice.fuser!r}`, {choice.measure} {choice.dev_mean:.4f} on "
            f"{choice.dev_queries} development queries."
        )
    if new_documents:
        lines.append(new_in_top10(experiment))
    for name, record in comparison.extra.get("cross_validation", {}).items():
        chosen = "; ".join(f"{c['chosen']}" for c in record["choices"])
        lines.append(
            f"Cross-validated ({name}): {record['folds']} folds over queries (seed {record['seed']}), "
            f"chosen per fold by {record['measure']}: {chosen}."
        )
    for swept in experiment.sweeps:
        lines.append("")
        lines.append(
            f"Sweep {swept.name}: {swept.measure} difference vs {swept.reference} (95% CI excludes 0: `*`)"
        )
        lines.append("")
        keys = list(swept.grid)
        if len(keys) == 2:
            rows, columns = swept.grid[keys[0]], swept.grid[keys[1]]
            lines.append(f"| {keys[0]} \\ {keys[1]} | " + " | ".join(f"{c:g}" for c in columns) + " |")
            lines.append("|" + "---|" * (len(columns) + 1))
            cells = {(p.params[keys[0]], p.params[keys[1]]): p for p in swept.points}
            for row in rows:
                values = []
                for column in columns:
                    d = cells[row, column].difference
                    assert d is not None
                    values.append(_signed(d.mean_difference) + ("*" if d.excludes_zero else ""))
                lines.append(f"| {row:g} | " + " | ".join(values) + " |")
        elif len(keys) > 2:
            # Too many points for a table here (report.md and report.json hold them all):
            # the count, the best point in hindsight, and how many points differ from the reference.
            best = swept.best()
            d = best.difference
            assert d is not None
            up = sum(
                1
                for p in swept.points
                if p.difference is not None
                and p.difference.excludes_zero
                and p.difference.mean_difference > 0
            )
            down = sum(
                1
                for p in swept.points
                if p.difference is not None
                and p.difference.excludes_zero
                and p.difference.mean_difference < 0
            )
            params = ", ".join(
                f"{key}={best.params[key]:g}"
                if isinstance(best.params[key], float)
                else f"{key}={best.params[key]}"
                for key in keys
            )
            lines.append(
                f"{len(swept.points)} points; best in hindsight {params}: {best.mean:.4f}, "
                f"{_signed(d.mean_difference)} [{_signed(d.low)}, {_signed(d.high)}]; "
                f"{up} points above and {down} below the reference with the interval excluding zero."
            )
        else:
            lines.append(f"| {keys[0]} | mean | difference |")
            lines.append("|---|---|---|")
            for point in swept.points:
                d = point.difference
                assert d is not None
                lines.append(
                    f"| {point.params[keys[0]]:g} | {point.mean:.4f} | "
                    f"{_signed(d.mean_difference)}{'*' if d.excludes_zero else ''} |"
                )
    return "\n".join(lines)


def block(experiment: Published, printed: str) -> str:
    """The marked block EVAL.md holds for ``experiment``."""
    name = experiment.name
    return f"<!-- eval:{name} -->\n```\n{experiment.command()}\n```\n\n{printed}\n<!-- /eval:{name} -->"


def published_block(text: str, name: str) -> str | None:
    """The block named ``name`` in EVAL.md's ``text``, or ``None``."""
    match = re.search(rf"<!-- eval:{re.escape(name)} -->.*?<!-- /eval:{re.escape(name)} -->", text, re.S)
    return None if match is None else match.group(0)


def _workflow_reports(data: Path, out: Path | None) -> dict[str, Any]:
    """Run the workflow in ``out/WORKFLOW`` (kept; an earlier one there is replaced) or a temporary folder."""
    if out is not None:
        scratch = out / WORKFLOW
        shutil.rmtree(scratch, ignore_errors=True)  # the trial refuses to overwrite its plan and reports
        scratch.mkdir(parents=True)
        return run_workflow(data.resolve(), scratch)
    with tempfile.TemporaryDirectory(prefix="weft-workflow-") as folder:
        return run_workflow(data.resolve(), Path(folder))


def main(argv: list[str] | None = None) -> int:
    """Run the experiments; check (default) or rewrite docs/EVAL.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--only", help="comma-separated experiment names")
    parser.add_argument("--write", action="store_true", help="rewrite the tables in docs/EVAL.md")
    parser.add_argument("--out", type=Path, help="also write each experiment's full report here")
    args = parser.parse_args(argv)
    wanted = [e for e in EXPERIMENTS if not args.only or e.name in args.only.split(",")]
    text = EVAL_MD.read_text(encoding="utf-8")
    stale = []
    for experiment in wanted:
        started = time.perf_counter()
        result = run(experiment, args.data)
        if args.out is not None:
            reports.write_report(
                result.comparison,
                args.out / experiment.name,
                sweeps=result.sweeps,
                learned=result.learned,
                title=experiment.name,
                command=experiment.command(),
            )
        printed = block(experiment, table(result, new_documents=experiment.new_documents))
        print(printed, f"\n({experiment.name}: {time.perf_counter() - started:.1f} s)\n", flush=True)
        old = published_block(text, experiment.name)
        if old is None:
            print(f"docs/EVAL.md has no block for {experiment.name}", file=sys.stderr)
            stale.append(experiment.name)
        elif old != printed:
            stale.append(experiment.name)
            text = text.replace(old, printed)
    if not args.only or WORKFLOW in args.only.split(","):
        started = time.perf_counter()
        printed = workflow_block(workflow_table(_workflow_reports(args.data, args.out)))
        print(printed, f"\n({WORKFLOW}: {time.perf_counter() - started:.1f} s)\n", flush=True)
        old = published_block(text, WORKFLOW)
        if old is None:
            print(f"docs/EVAL.md has no block for {WORKFLOW}", file=sys.stderr)
            stale.append(WORKFLOW)
        elif old != printed:
            text = text.replace(old, printed)  # --write keeps the latest measured latency too
            if stable(old) != stable(printed):
                stale.append(WORKFLOW)
    if args.write:
        EVAL_MD.write_text(text, encoding="utf-8")
        missing = [name for name in stale if published_block(text, name) is None]
        if missing:
            print(f"add marked blocks for {missing} to docs/EVAL.md", file=sys.stderr)
            return 1
        return 0
    if stale:
        print(f"docs/EVAL.md is stale for: {', '.join(stale)} (run make eval)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
