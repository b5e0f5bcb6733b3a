"""Benchmark: BM25Scorer.score compiled (block-max MaxScore, ``_bm25.c``) against its numpy path.

Run with ``.venv/bin/python bench/bm25_kernel.py [--synthetic 100000] [--segments 1]``.
A script that prints figures, not a test: nothing here asserts a speed.

Same workloads as ``bench/bm25_vs_bm25s.py`` (SciFact analysed once with the
english analyzer, and its synthetic Zipfian corpus), pre-analysed tokens, one
thread. Arms, timed in alternating passes (wall clock and this thread's CPU time):

* ``numpy``: ``BM25Scorer._score_numpy``, the exhaustive path (every posting);
* ``compiled``: ``BM25Scorer.score`` through the kernel with early termination;
* ``compiled, no pruning``: the same kernel with infinite block bounds, so it
  scores every posting: what the early termination itself buys.

Also printed: whether the compiled results equal the numpy ones (ids and
score bits, every query), the share of blocks (of 128 postings) and of
postings each query left unscored, and the load average before and after
(the machine may be shared: figures are indicative only when it is not idle).
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bm25_vs_bm25s import DEFAULT_DATA, PreTokenizedAnalyzer, Workload, load_beir, synthetic  # noqa: E402

import weftsearch.scorers.bm25 as bm25_module  # noqa: E402
from weftsearch import BM25Scorer, Document, Index, Query, Snapshot  # noqa: E402
from weftsearch.native import bm25 as kernel  # noqa: E402
from weftsearch.scorers.bm25 import lists as bm25_lists  # noqa: E402
from weftsearch.scorers.bm25 import lucene_idf  # noqa: E402

# BM25Scorer.score goes compiled from 20,000 documents; here it always does, to compare.
bm25_module._COMPILED_FROM_DOCS = 0


def build(workload: Workload, segments: int) -> Snapshot:
    """An in-memory index of the workload in ``segments`` segments (documents dealt in order)."""
    index = Index(PreTokenizedAnalyzer())
    docs = list(zip(workload.doc_keys, workload.doc_tokens, strict=True))
    step = -(-len(docs) // segments)
    for start in range(0, len(docs), step):
        index.add_many(
            (Document(key, " ".join(tokens)) for key, tokens in docs[start : start + step]), progress=False
        )
        index.snapshot()
    return index.snapshot()


def measure(
    runs: Sequence[tuple[str, Callable[[], object]]], n_queries: int, repeat: int
) -> list[tuple[str, float, float, float]]:
    """Per arm: (label, best wall q/s, median wall q/s, best CPU q/s), passes alternating between arms.

    CPU time is this thread's (``time.thread_time``): on a shared machine it
    leaves out the time other processes held the core, so it moves less than
    the wall clock (caches and memory bandwidth are still shared).
    """
    for _, run_all in runs:
        run_all()
    walls: list[list[float]] = [[] for _ in runs]
    cpus: list[list[float]] = [[] for _ in runs]
    for _ in range(repeat):
        for arm, (_, run_all) in enumerate(runs):
            gc.collect()
            wall, cpu = time.perf_counter(), time.thread_time()
            run_all()
            cpus[arm].append(time.thread_time() - cpu)
            walls[arm].append(time.perf_counter() - wall)
    return [
        (label, n_queries / min(wall), n_queries / statistics.median(wall), n_queries / min(cpu))
        for (label, _), wall, cpu in zip(runs, walls, cpus, strict=True)
    ]


def skipped(snapshot: Snapshot, queries: Sequence[Query], k: int) -> tuple[float, float, float]:
    """Mean share of blocks never scored, of postings never scored, and of documents fully scored."""
    library = kernel.compiled_bm25()
    assert library is not None
    blocks = postings = documents = 0.0
    counted = 0
    for query in queries:
        terms = snapshot.analyzer.analyze(query.text or "")
        distinct = sorted(set(terms))
        if not distinct:
            continue
        lists = bm25_lists.gather(snapshot, distinct)
        if not lists.table.shape[0]:
            continue
        counts = [terms.count(term) for term in distinct]
        weights = lucene_idf(snapshot.n_docs, lists.doc_freq) * counts
        _, _, stats = bm25_lists.search(library, snapshot, lists, weights, 1.2, 0.75, snapshot.avgdl, k)
        blocks += 1.0 - stats.blocks_scored / stats.blocks
        postings += 1.0 - stats.postings_scored / stats.postings
        documents += stats.documents_scored / max(1, snapshot.n_docs)
        counted += 1
    return blocks / max(counted, 1), postings / max(counted, 1), documents / max(counted, 1)


def run(name: str, workload: Workload, segments: int, repeat: int) -> None:
    started = time.perf_counter()
    snapshot = build(workload, segments)
    print(
        f"\n## {name}: {snapshot.n_docs} documents, {len(snapshot.parts)} segment(s), "
        f"{len(workload.query_tokens)} queries (built in {time.perf_counter() - started:.0f} s)"
    )
    scorer = BM25Scorer()
    queries = [Query(" ".join(tokens)) for tokens in workload.query_tokens]
    for k in (10, 100):
        equal = True
        for query in queries:
            got, want = scorer.score(snapshot, query, k), scorer._score_numpy(snapshot, query, k)
            equal = equal and got.ids.tobytes() == want.ids.tobytes()
            equal = equal and got.scores.tobytes() == want.scores.tobytes()

        def numpy_pass(k: int = k) -> None:
            for query in queries:
                scorer._score_numpy(snapshot, query, k)

        def compiled_pass(k: int = k) -> None:
            for query in queries:
                scorer.score(snapshot, query, k)

        def unpruned_pass(k: int = k) -> None:
            kernel._BOUND_SCALE = float("inf")
            try:
                for query in queries:
                    scorer.score(snapshot, query, k)
            finally:
                kernel._BOUND_SCALE = 1.0

        runs: list[tuple[str, Callable[[], object]]] = [
            ("numpy (exhaustive)", numpy_pass),
            ("compiled, block-max MaxScore", compiled_pass),
            ("compiled, no pruning", unpruned_pass),
        ]
        load_before = os.getloadavg()
        timings = measure(runs, len(queries), repeat)
        load_after = os.getloadavg()
        blocks, postings, documents = skipped(snapshot, queries, k)
        print(f"\ntop-{k}: compiled == numpy on every query (ids, score bits, order): {equal}")
        print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)")
        for label, best, median, cpu in timings:
            print(f"  {label:30s} wall best {best:7.0f} median {median:7.0f} q/s, CPU best {cpu:7.0f} q/s")
        (_, numpy_best, _, numpy_cpu), (_, best, _, cpu), (_, flat_best, _, flat_cpu) = timings
        print(
            f"  compiled / numpy: {best / numpy_best:.2f}x wall, {cpu / numpy_cpu:.2f}x CPU; "
            f"compiled / no pruning: {best / flat_best:.2f}x wall, {cpu / flat_cpu:.2f}x CPU"
        )
        print(
            f"  per query, mean: {100 * blocks:.1f}% of blocks, {100 * postings:.1f}% of postings unscored, "
            f"{100 * documents:.2f}% of documents fully scored"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options and run SciFact and (optionally) a synthetic corpus."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--synthetic", type=int, default=0, metavar="N")
    parser.add_argument("--synthetic-queries", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=1)
    parser.add_argument("--no-scifact", action="store_true")
    args = parser.parse_args(argv)
    if kernel.compiled_bm25() is None:
        print("the compiled BM25 is not available (not built, or WEFTSEARCH_NO_COMPILED_BM25 set)")
        return 1
    print(
        f"# BM25Scorer compiled vs numpy, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()}"
    )
    if not args.no_scifact:
        run("SciFact", load_beir(args.data, None), args.segments, args.repeat)
    if args.synthetic > 0:
        workload = synthetic(args.synthetic, args.synthetic_queries)
        run(f"synthetic {args.synthetic}", workload, args.segments, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
