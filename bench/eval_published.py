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
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

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
)

#: Experiments cheap enough for the default test run (the small collections).
#: Experiment 4 (cacm-links, cacm-links-coupling, cisi-links) is left out: its cross-validation over
#: 161 grid points takes 30-70 s a collection, so it is checked under ``-m slow`` with SciFact.
SMALL = ("cacm-graph", "cacm-graph-coupling", "cisi-graph", "cranfield")


def _argv(experiment: Published, data: Path) -> list[str]:
    return [str(data) if a == "<DATA>" else a for a in experiment.argv]


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
    for name, result in comparison.arms.items():
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
