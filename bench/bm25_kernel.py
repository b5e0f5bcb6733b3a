"""Benchmark: BM25Scorer.score compiled (block-max MaxScore, ``_bm25.c``) against its numpy path.

Run with ``.venv/bin/python bench/bm25_kernel.py [--synthetic 100000] [--segments 1]``.
A script that prints figures, not a test: nothing here asserts a speed.

Same workloads as ``bench/bm25_vs_bm25s.py`` (SciFact analysed once with the
english analyzer, and its synthetic Zipfian corpus), pre-analysed tokens, one
thread. Arms, timed in alternating passes (``measure`` from that script):

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
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bm25_vs_bm25s import DEFAULT_DATA, PreTokenizedAnalyzer, Workload, load_beir, measure, synthetic  # noqa: E402

import weftsearch.scorers.bm25 as bm25_module  # noqa: E402
from weftsearch import BM25Scorer, Document, Index, Query, Snapshot  # noqa: E402
from weftsearch.engine import bm25_kernel  # noqa: E402
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


def skipped(snapshot: Snapshot, queries: Sequence[Query], k: int) -> tuple[float, float, float]:
    """Mean share of blocks never scored, of postings never scored, and of documents fully scored."""
    library = bm25_kernel.compiled_bm25()
    assert library is not None
    blocks = postings = documents = 0.0
    counted = 0
    for query in queries:
        terms = snapshot.analyzer.analyze(query.text or "")
        distinct = sorted(set(terms))
        if not distinct:
            continue
        lists = bm25_kernel.gather(library, snapshot, distinct)
        if not lists.table.shape[0]:
            continue
        counts = [terms.count(term) for term in distinct]
        weights = lucene_idf(snapshot.n_docs, lists.doc_freq) * counts
        _, _, stats = bm25_kernel.search(library, snapshot, lists, weights, 1.2, 0.75, snapshot.avgdl, k)
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
            bm25_kernel._BOUND_SCALE = float("inf")
            try:
                for query in queries:
                    scorer.score(snapshot, query, k)
            finally:
                bm25_kernel._BOUND_SCALE = 1.0

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
        for timing in timings:
            best, median = timing.best_qps, timing.median_qps
            print(f"  {timing.label:32s} best {best:9.0f} q/s   median {median:9.0f} q/s")
        print(
            f"  speed-up (best): {timings[1].best_qps / timings[0].best_qps:.2f}x over numpy, "
            f"{timings[1].best_qps / timings[2].best_qps:.2f}x over no pruning"
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
    if bm25_kernel.compiled_bm25() is None:
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
