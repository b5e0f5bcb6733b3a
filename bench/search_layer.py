"""Micro-benchmark of the search layer: queries/second of ``Index.search`` on SciFact.

Prints figures; never asserts. Arms (each over every SciFact query, one thread):

``bm25``         ``Index.search`` with one BM25 stream (passes through, no fusion)
``hybrid``       ``Index.search`` with BM25 + vector (frozen all-MiniLM-L6-v2 int8
                 vectors), RRF, depth ``max(k, 100)``
``bm25 many``    ``Index.search_many`` of the same queries (one BM25 stream), where
                 the checkout has it (skipped on a checkout without it)
``hybrid many``  the same for the hybrid search

each at top-10 and top-100. Passes alternate the arms (arm order rotates each pass)
so a change of machine load hits every arm alike; each arm's median and best q/s
over the passes are printed with the load average before and after. The machine
is shared and noisy: compare runs made back to back (``git stash``/another
worktree), and read the figures as indicative.

Then the share of a fast query spent analysing its text: ``analyzer.analyze`` of
every query text, against one BM25 ``Index.search`` top-10 per query.

The side-by-side figures of issue 14 (with peers, targets and load averages) come from
``bench/query_path.py`` (``make bench``); this is a quicker probe of the search layer alone.

Usage::

    PYTHONPATH=$PWD/src python bench/search_layer.py [--data DIR] [--passes 5] [--limit N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from weftsearch import RRF, BM25Scorer, Index, Query, Scorer, VectorScorer
from weftsearch.corpus import load_documents, load_queries, load_vectors

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "datasets" / "scifact"
VECTORS = "vectors/all-minilm-l6-v2-int8"


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def build(data: Path) -> tuple[Index, list[Query]]:
    corpus_vectors = load_vectors(data / VECTORS / "corpus.npy")
    query_vectors = load_vectors(data / VECTORS / "queries.npy")
    index = Index()
    index.add_many(load_documents(data, vectors=corpus_vectors, progress=False))
    index.snapshot()  # seal: one in-memory segment, as after a commit
    queries = [named.query for named in load_queries(data, vectors=query_vectors, progress=False)]
    return index, queries


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="BEIR folder (default: SciFact)")
    parser.add_argument("--passes", type=int, default=5, help="alternating passes over every arm")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N queries")
    args = parser.parse_args()

    print(f"load average at start: {load_average()}")
    started = time.perf_counter()
    index, queries = build(args.data)
    if args.limit is not None:
        queries = queries[: args.limit]
    with_vectors = [query for query in queries if query.vector is not None]
    print(
        f"indexed {len(index)} documents in {time.perf_counter() - started:.1f} s; "
        f"{len(queries)} queries ({len(with_vectors)} with vectors)"
    )
    bm25, vector, rrf = BM25Scorer(), VectorScorer(), RRF()
    has_many = hasattr(index, "search_many")

    def one_by_one(k: int, *scorers: Scorer) -> Callable[[], object]:
        return lambda: [index.search(query, k, rrf, *scorers) for query in queries]

    def batch(k: int, *scorers: Scorer) -> Callable[[], object]:
        # Built only where the checkout has search_many (the script also runs on older ones).
        return lambda: index.search_many(list(queries), k, rrf, *scorers)

    arms: dict[str, Callable[[], object]] = {}
    for k in (10, 100):
        arms[f"bm25 top-{k}"] = one_by_one(k, bm25)
        arms[f"hybrid top-{k}"] = one_by_one(k, bm25, vector)
        if has_many:
            arms[f"bm25 many top-{k}"] = batch(k, bm25)
            arms[f"hybrid many top-{k}"] = batch(k, bm25, vector)
    for run in arms.values():  # warm every cache once (postings, vector views, record verdicts)
        run()
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for number in range(args.passes):
        rotated = names[number % len(names) :] + names[: number % len(names)]
        for name in rotated:
            seconds[name].append(timed(arms[name]))
    print(f"\nqueries/second over {args.passes} alternating passes (load average now {load_average()})")
    print(f"{'arm':<22} {'median q/s':>11} {'best q/s':>10}")
    for name in names:
        rates = [len(queries) / s for s in seconds[name]]
        print(f"{name:<22} {statistics.median(rates):>11,.0f} {max(rates):>10,.0f}")
    if not has_many:
        print("(this checkout has no Index.search_many: batch arms skipped)")

    analyzer = index.snapshot().analyzer
    texts = [query.text for query in queries]
    analyse = [timed(lambda: [analyzer.analyze(text) for text in texts]) for _ in range(args.passes)]
    search = [timed(arms["bm25 top-10"]) for _ in range(args.passes)]
    per_query_analyse = statistics.median(analyse) / len(texts) * 1e6
    per_query_search = statistics.median(search) / len(texts) * 1e6
    print(
        f"\nquery analysis: {per_query_analyse:.1f} us per query text "
        f"({type(analyzer).__name__}); one BM25 Index.search top-10: {per_query_search:.1f} us; "
        f"analysis is {100 * per_query_analyse / per_query_search:.1f}% of it"
    )
    mean_terms = np.mean([len(analyzer.analyze(text)) for text in texts])
    print(f"mean analysed terms per query: {mean_terms:.1f}; load average at end: {load_average()}")


if __name__ == "__main__":
    main()
