"""The query helper's side-by-side timings: search overhead, batch, threads, segments, hybrid.

Prints figures; never asserts. Reuses ``bench/query_path.py``'s workloads and arms
(on-disk committed index, pre-analysed tokens, tantivy and bm25s built from the same
tokens). Every table times its arms in alternating passes (the arm order rotates each
pass) and prints the load average before and after.

Parts (``--parts``, comma-separated):

``scifact``   SciFact: ``BM25Scorer.score``, ``Index.search``, ``Index.search_many``
              (threads 1 and 2), concurrent ``Index.search`` in 2 threads, tantivy one
              call per query, bm25s numba one call and batch; top-10 and top-100.
``segments``  100,000 synthetic Zipfian documents (fixed seed), ``Index.search`` top-10
              and top-100 on one segment against the same documents committed in 10.
``hybrid``    SciFact ``Index.search`` BM25 + vector, RRF, depth 100, top-10: q/s and
              nDCG@10 on the judged queries.

Usage::

    PYTHONPATH=$PWD/src python bench/query_scaling.py --parts scifact,segments,hybrid --passes 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import query_path as qp  # the sibling script, for its workloads and arms


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def table(title: str, arms: Mapping[str, tuple[Callable[[], object], int]], passes: int) -> dict[str, float]:
    """Median q/s of each arm over ``passes`` alternating passes (one warm-up pass first)."""
    for run, _ in arms.values():
        run()
    names = list(arms)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    before = load()
    for number in range(passes):
        for name in names[number % len(names) :] + names[: number % len(names)]:
            started = time.perf_counter()
            arms[name][0]()
            seconds[name].append(time.perf_counter() - started)
    print(f"\n## {title}\nload average before {before}, after {load()}; {passes} alternating passes")
    print(f"{'arm':<46} {'median q/s':>11} {'min':>9} {'max':>9}")
    medians = {}
    for name in names:
        rates = [arms[name][1] / s for s in seconds[name]]
        medians[name] = statistics.median(rates)
        print(f"{name:<46} {medians[name]:>11,.0f} {min(rates):>9,.0f} {max(rates):>9,.0f}")
    return medians


def part_scifact(data: Path, passes: int) -> None:
    workload = qp.load_scifact(data, with_vectors=False)
    n = len(workload.query_tokens)
    with tempfile.TemporaryDirectory(prefix="weft-qs-") as tmp:
        weft = qp.Weft(workload, Path(tmp) / "weft", with_vectors=False)
        tantivy = qp.Tantivy(workload, Path(tmp) / "tantivy")
        numba = qp.Bm25s(workload, "numba")
        for k in (10, 100):
            arms = {
                "weft BM25Scorer.score": (partial(weft.run_scorer, k), n),
                "weft Index.search": (partial(weft.run_search, k), n),
                "weft Index.search, 2 threads": (partial(weft.run_search_threads, k, 2), n),
                "weft Index.search_many threads=1": (partial(weft.run_search_many, k, 1), n),
                "weft Index.search_many threads=2": (partial(weft.run_search_many, k, 2), n),
                "tantivy, one call per query": (partial(tantivy.run, k), n),
                "bm25s numba, one call per query": (partial(numba.run_each, k), n),
                "bm25s numba, batch": (partial(numba.run_batch, k), n),
            }
            got = table(f"SciFact top-{k}, {n} queries", arms, passes)
            base = got["weft Index.search"]
            many1 = got["weft Index.search_many threads=1"]
            many2 = got["weft Index.search_many threads=2"]
            print(
                f"search/tantivy {base / got['tantivy, one call per query']:.2f}x; "
                f"search_many/numba batch {many1 / got['bm25s numba, batch']:.2f}x; "
                f"threads 2/1: search {got['weft Index.search, 2 threads'] / base:.2f}x, "
                f"search_many {many2 / many1:.2f}x"
            )
        weft.close()


def part_segments(passes: int, n_docs: int) -> None:
    workload = qp.synthetic(n_docs, 1000)
    n = len(workload.query_tokens)
    with tempfile.TemporaryDirectory(prefix="weft-qs-") as tmp:
        one = qp.Weft(workload, Path(tmp) / "one", with_vectors=False)
        ten = qp.Weft(workload, Path(tmp) / "ten", with_vectors=False, segments=10)
        print(f"segments: {len(one.snapshot.parts)} and {len(ten.snapshot.parts)}")
        for k in (10, 100):
            arms = {
                "Index.search, 1 segment": (partial(one.run_search, k), n),
                "Index.search, 10 segments": (partial(ten.run_search, k), n),
                "Index.search_many, 1 segment": (partial(one.run_search_many, k, 1), n),
                "Index.search_many, 10 segments": (partial(ten.run_search_many, k, 1), n),
            }
            got = table(f"synthetic {n_docs:,} top-{k}, {n} queries", arms, passes)
            print(
                f"10 segments / 1 segment: search "
                f"{got['Index.search, 10 segments'] / got['Index.search, 1 segment']:.2f}x, search_many "
                f"{got['Index.search_many, 10 segments'] / got['Index.search_many, 1 segment']:.2f}x"
            )
        one.close()
        ten.close()


def part_hybrid(data: Path, passes: int) -> None:
    workload = qp.load_scifact(data, with_vectors=True)
    assert workload.qrels is not None
    judged = [i for i, qid in enumerate(workload.query_ids) if qid in workload.qrels]
    with tempfile.TemporaryDirectory(prefix="weft-qs-") as tmp:
        weft = qp.Weft(workload, Path(tmp) / "weft", with_vectors=True)
        queries = [weft.hybrid[i] for i in judged]
        arms = {"hybrid Index.search top-10": (partial(weft.run_hybrid, 10, queries), len(queries))}
        table(
            f"SciFact hybrid (BM25 + vector, RRF, depth {qp.DEPTH}), {len(queries)} judged queries",
            arms,
            passes,
        )
        rankings = weft.run_hybrid(10, queries)
        print(f"nDCG@10 {qp.ndcg10(workload, rankings, judged):.4f}")
        weft.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", default="scifact,segments,hybrid")
    parser.add_argument("--data", type=Path, default=qp.DEFAULT_DATA)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--docs", type=int, default=100_000, help="synthetic documents of the segments part")
    args = parser.parse_args()
    print(f"load average at start {load()}")
    for part in args.parts.split(","):
        if part == "scifact":
            part_scifact(args.data, args.passes)
        elif part == "segments":
            part_segments(args.passes, args.docs)
        elif part == "hybrid":
            part_hybrid(args.data, args.passes)
        else:
            raise SystemExit(f"unknown part {part!r}")


if __name__ == "__main__":
    main()
