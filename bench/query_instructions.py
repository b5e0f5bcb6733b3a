"""Benchmark: instructions a query of ``Index.search`` (one BM25 stream) under callgrind (issue 31).

Run with ``PYTHONPATH=src python bench/query_instructions.py --data ../shared/datasets/scifact``.
A script that prints figures, not a test: nothing here asserts a speed.

Instruction counts do not move with the load of a shared machine, which CPU time
does (docs/BENCHMARKS.md, "Lazy keys and the rest of the search tail"). SciFact raw
text (title + text, ``english`` analyzer) is committed once, in one segment, to a
directory (``--index``, made when absent); then ``valgrind --tool=callgrind`` runs
this script's ``--run`` mode twice per ``k``: open the index read-only, search every
query once (warm caches), then search every query ``passes`` more times (1, then 3).
The difference of the two totals over twice the query count is one query's
instructions, start-up and warm-up cancelled. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from weftsearch import RRF, BM25Scorer, Document, Index, Query

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "scifact"


def queries_of(data: Path) -> list[Query]:
    """The collection's queries."""
    with open(data / "queries.jsonl", encoding="utf-8") as lines:
        return [Query(json.loads(line)["text"]) for line in lines]


def build(data: Path, directory: Path) -> None:
    """Commit the collection's documents to ``directory`` in one segment."""
    with open(data / "corpus.jsonl", encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    with Index.create(directory, "english") as index:
        index.add_many(Document(r["_id"], (r.get("title", "") + " " + r["text"]).strip()) for r in records)
        index.commit()


def run(data: Path, directory: Path, k: int, passes: int) -> None:
    """What callgrind measures: a warm pass over the queries, then ``passes`` more."""
    queries = queries_of(data)
    index = Index.open(directory, readonly=True)
    scorer, fuser = BM25Scorer(), RRF()
    for _ in range(1 + passes):
        for query in queries:
            index.search(query, k, fuser, scorer)


def instructions(data: Path, directory: Path, k: int, passes: int) -> int:
    """Total instructions callgrind counts for :func:`run` (its output file is discarded)."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={scratch}/out",
            sys.executable,
            __file__,
            "--data",
            str(data),
            "--index",
            str(directory),
            "--run",
            str(k),
            str(passes),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no total:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: Sequence[str] | None = None) -> int:
    """Build the index if needed, count each k's instructions a query, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact in BEIR layout")
    parser.add_argument("--index", type=Path, default=None, help="where the index is (made when absent)")
    parser.add_argument("--k", type=int, nargs="+", default=[10, 100], help="k of the searches")
    parser.add_argument("--run", type=int, nargs=2, metavar=("K", "PASSES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run is not None:
        run(args.data, args.index, *args.run)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    made = args.index is None
    directory = Path(tempfile.mkdtemp(prefix="weft-instructions-")) / "index" if made else args.index
    try:
        if not directory.exists():
            build(args.data, directory)
        count = len(queries_of(args.data))
        figures: dict[str, object] = {"queries": count, "load": os.getloadavg()}
        for k in args.k:
            one, three = (instructions(args.data, directory, k, passes) for passes in (1, 3))
            figures[f"top-{k} Index.search (instructions a query)"] = round((three - one) / (2 * count))
        print(json.dumps(figures))
    finally:
        if made:
            shutil.rmtree(directory.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
