"""Benchmark: the Python tail of ``Index.search`` on SciFact (issue 31), old sources against new.

Run with ``PYTHONPATH=src python bench/search_tail.py [--data ../shared/datasets/scifact]
[--old /tmp/old/src] [--rounds 5]``. A script that prints figures, not a test: nothing here
asserts a speed.

SciFact raw text (title + text), ``english`` analyzer, one segment in memory; the 300 test
queries (``qrels/test.tsv``), each searched once before timing. Per k (10, 100) it prints:

- CPU µs a search (``time.process_time`` over all queries, best of ``--passes``): CPU time
  leaves out the time other processes took the core on a shared machine;
- the kernel's share: this thread's CPU time inside the compiled ``weft_bm25_query`` call
  (``time.thread_time`` around the ctypes call, so its argument conversion and the clock
  reads count as kernel: an upper bound on the part that runs without the GIL) against the
  thread's CPU time for the whole searches (wall time would count other processes' turns);
- 2 threads ÷ 1 thread: the queries searched by one thread, then split between two threads
  of a ``ThreadPoolExecutor`` (wall time, best of ``--passes``).

With ``--old SRC`` each round runs a child process on ``SRC`` and one on this file's
sources, alternating (old first in even rounds, new first in odd ones), and prints every
child's line and the medians; the load average is printed with each line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "scifact"
SOURCES = Path(__file__).resolve().parent.parent / "src"


def measure(data: Path, passes: int) -> dict[str, object]:
    """Build the index and time the rows in this process (the sources on ``sys.path``)."""
    from weftsearch import RRF, BM25Scorer, Document, Index, Query
    from weftsearch.native import bm25 as kernel

    with open(data / "corpus.jsonl", encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    with open(data / "qrels" / "test.tsv", encoding="utf-8") as lines:
        tested = {line.split("\t")[0] for line in lines if line.strip() and not line.startswith("query")}
    with open(data / "queries.jsonl", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    queries = [Query(row["text"]) for row in rows if row["_id"] in tested]
    index = Index("english")
    index.add_many(Document(r["_id"], (r.get("title", "") + " " + r["text"]).strip()) for r in records)
    index.snapshot()
    scorer, fuser = BM25Scorer(), RRF()
    figures: dict[str, object] = {"queries": len(queries), "load": os.getloadavg()[0]}

    in_kernel = [0.0]
    plain_rows = kernel.query_rows

    def timed_rows(function: object, *args: object) -> object:
        def call(*values: object) -> int:
            start = time.thread_time()
            try:
                return function(*values)  # type: ignore[operator, no-any-return]
            finally:
                in_kernel[0] += time.thread_time() - start

        return plain_rows(call, *args)  # type: ignore[arg-type]

    for k in (10, 100):
        for query in queries:
            index.search(query, k, fuser, scorer)

        def one_thread(k: int = k) -> None:
            for query in queries:
                index.search(query, k, fuser, scorer)

        half = len(queries) // 2
        pool = ThreadPoolExecutor(2)

        def two_threads(k: int = k, pool: ThreadPoolExecutor = pool, half: int = half) -> None:
            def run(part: list[Query]) -> None:
                for query in part:
                    index.search(query, k, fuser, scorer)

            for future in [pool.submit(run, queries[:half]), pool.submit(run, queries[half:])]:
                future.result()

        cpu = wall_one = wall_two = float("inf")
        for _ in range(passes):
            start = time.process_time()
            one_thread()
            cpu = min(cpu, time.process_time() - start)
            start = time.perf_counter()
            one_thread()
            wall_one = min(wall_one, time.perf_counter() - start)
            start = time.perf_counter()
            two_threads()
            wall_two = min(wall_two, time.perf_counter() - start)
        pool.shutdown()
        kernel.query_rows = timed_rows  # type: ignore[assignment]
        fastest, share = float("inf"), 0.0
        try:
            for _ in range(passes):  # the share in the pass that took the least CPU time
                in_kernel[0] = 0.0
                start = time.thread_time()
                one_thread()
                took = time.thread_time() - start
                if took < fastest:
                    fastest, share = took, in_kernel[0] / took
        finally:
            kernel.query_rows = plain_rows
        figures[f"top-{k} CPU us"] = round(cpu / len(queries) * 1e6, 2)
        figures[f"top-{k} kernel share"] = round(share, 3)
        figures[f"top-{k} 2 threads / 1"] = round(wall_one / wall_two, 3)
    figures["load after"] = os.getloadavg()[0]
    return figures


def main(argv: list[str] | None = None) -> int:
    """Measure here, or alternate child processes on the old and the new sources."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact in BEIR layout")
    parser.add_argument("--passes", type=int, default=7, help="timed passes per row (best kept)")
    parser.add_argument("--old", type=Path, help="the old sources' src directory: alternate old and new")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds with --old")
    args = parser.parse_args(argv)
    if args.old is None:
        print(json.dumps(measure(args.data, args.passes)))
        return 0
    lines: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for round_ in range(args.rounds):
        order = [("old", args.old), ("new", SOURCES)]
        for name, src in order if round_ % 2 == 0 else order[::-1]:
            env = {**os.environ, "PYTHONPATH": str(src)}
            command = [sys.executable, __file__, "--data", str(args.data), "--passes", str(args.passes)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            lines[name].append(figures)
            print(name, json.dumps(figures), flush=True)
    for name, runs in lines.items():
        medians = {key: statistics.median(run[key] for run in runs) for key in runs[0] if key != "queries"}
        print(name, "median", json.dumps({key: round(value, 3) for key, value in medians.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
