"""Benchmark: CPU microseconds a query of the BM25 query path (issue 31), for runs on a shared machine.

Run with ``PYTHONPATH=src python bench/query_cpu.py [--data ../shared/datasets/scifact] [--segments 1]``.
A script that prints figures, not a test: nothing here asserts a speed.

Wall-clock q/s on a loaded 2-core VM moves by up to 2x between runs of the same code
(docs/BENCHMARKS.md, "After the re-layout"); this thread's CPU time leaves out the time
other processes took the core, so it tells a 10% change where wall clock cannot. SciFact
raw text (title + text) under the ``english`` analyzer, in memory, committed in
``--segments`` equal parts; every query searched once before timing (warm caches). Rows,
best of 3 passes over all queries: ``BM25Scorer.score``, ``Index.search`` (one BM25
stream, RRF), the same with texts never searched before (each pass appends a stopword a new
number of times: same terms, so the row shows what the kept per-text set-up saves), the same
on a reader just opened on the index's files (``cold reader``: every term is read for the
first time there, so each search pays the term's decoding and checks, the records' and keys'
first checks and the idf; the median pass of fresh readers), the same on the snapshot a commit
of one document just published (``first after a commit``: each query's first search there
computes its terms' IDFs for the new N and their impact tables for the new average length;
the median of passes, each after its own commit) and
``Index.search_many`` (threads=1) in CPU µs a query, and
``Index.search_many`` with ``threads=2`` in wall µs a query (its CPU time would add the
threads'). Prints one JSON line with the load average.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from weftsearch import RRF, BM25Scorer, Document, Index, Query

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "scifact"


def best_of(passes: int, run: Callable[[], object], clock: Callable[[], float]) -> float:
    """The shortest of ``passes`` runs of ``run`` on ``clock``, in seconds."""
    best = float("inf")
    for _ in range(passes):
        start = clock()
        run()
        best = min(best, clock() - start)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    """Build the index, time the rows, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact in BEIR layout")
    parser.add_argument("--segments", type=int, default=1, help="segments the corpus is committed in")
    parser.add_argument("--passes", type=int, default=3, help="timed passes per row")
    args = parser.parse_args(argv)
    with open(args.data / "corpus.jsonl", encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    with open(args.data / "queries.jsonl", encoding="utf-8") as lines:
        queries = [Query(json.loads(line)["text"]) for line in lines]
    index = Index("english")
    step = -(-len(records) // args.segments)
    for start in range(0, len(records), step):
        part = records[start : start + step]
        index.add_many(Document(r["_id"], (r.get("title", "") + " " + r["text"]).strip()) for r in part)
        index.snapshot()  # seals the part into its own segment
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    for query in queries:
        index.search(query, 10, RRF(), scorer)
    figures: dict[str, object] = {"segments": len(snapshot.parts), "load": os.getloadavg()}

    def scores(k: int) -> object:
        return [scorer.score(snapshot, query, k) for query in queries]

    def searches(k: int) -> object:
        return [index.search(query, k, RRF(), scorer) for query in queries]

    fresh_texts = iter(range(1, 1 << 30))

    def new_text_searches(k: int) -> float:
        # Texts this index has never seen, with the same terms (a stopword repeated a new number
        # of times, which the english analyzer drops): every search pays the analysis, term
        # look-up and plan that a repeated text takes from the per-snapshot kept set-up.
        padding = " the" * next(fresh_texts)
        fresh = [Query(query.text + padding) for query in queries]
        start = time.process_time()
        for query in fresh:
            index.search(query, k, RRF(), scorer)
        return time.process_time() - start

    scratch = tempfile.TemporaryDirectory()
    on_disk = Path(scratch.name) / "index"
    with Index.create(on_disk, "english") as writer:
        for start in range(0, len(records), step):
            part = records[start : start + step]
            writer.add_many(Document(r["_id"], (r.get("title", "") + " " + r["text"]).strip()) for r in part)
            writer.commit()

    def cold_searches(k: int) -> float:
        # A reader opened on files it did not write checks each term at its first read, so
        # every query here pays what the first query of a term pays after a restart.
        with Index.open(on_disk, readonly=True) as reader:
            start = time.process_time()
            for query in queries:
                reader.search(query, k, RRF(), scorer)
            return time.process_time() - start

    def after_commit_searches(k: int) -> float:
        # One document committed: the new snapshot has another N and average length, so each
        # query's first search on it computes its terms' IDFs and impact tables again (the
        # newest 16 searches were replayed before publishing; most queries here were not).
        with Index.open(on_disk) as writer:
            for query in queries:
                writer.search(query, k, RRF(), scorer)
            writer.add_many([Document(f"after-commit-{next(fresh_texts)}", "graph protein")])
            writer.commit()
            start = time.process_time()
            for query in queries:
                writer.search(query, k, RRF(), scorer)
            return time.process_time() - start

    def batch(k: int, threads: int = 1) -> object:
        return index.search_many(queries, k, RRF(), scorer, threads=threads)

    for k in (10, 100):
        rows = {"BM25Scorer.score": scores, "Index.search": searches, "search_many threads=1": batch}
        for name, row in rows.items():
            seconds = best_of(args.passes, functools.partial(row, k), time.process_time)
            figures[f"top-{k} {name} (CPU us)"] = round(seconds / len(queries) * 1e6, 1)
        seconds = min(new_text_searches(k) for _ in range(args.passes))
        figures[f"top-{k} Index.search, new texts (CPU us)"] = round(seconds / len(queries) * 1e6, 1)
        seconds = statistics.median(cold_searches(k) for _ in range(args.passes))
        figures[f"top-{k} Index.search, cold reader (CPU us)"] = round(seconds / len(queries) * 1e6, 1)
        seconds = statistics.median(after_commit_searches(k) for _ in range(args.passes))
        label = f"top-{k} Index.search, first after a commit (CPU us)"
        figures[label] = round(seconds / len(queries) * 1e6, 1)
        seconds = best_of(args.passes, functools.partial(batch, k, 2), time.perf_counter)
        figures[f"top-{k} search_many threads=2 (wall us)"] = round(seconds / len(queries) * 1e6, 1)
    scratch.cleanup()
    figures["load after"] = os.getloadavg()
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
