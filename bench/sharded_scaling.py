"""Indexing docs/s and query q/s of ShardedIndex against shard count (docs/SCALING.md).

Usage (from the repository root, the ray extra installed for --ray)::

    PYTHONPATH=src python bench/sharded_scaling.py [--ray] [--queries 300]

SciFact (5,183 documents, frozen vectors) from ../shared/datasets/scifact; for
each shard count 1, 2, 4: add_many + commit (docs/s), then BM25 top-10 and
BM25 + vector (RRF) top-10 one query at a time (q/s), BM25 top-10 as one
``search_many`` batch (q/s), and the same on one
ordinary Index for reference. Prints one JSON line per configuration and the
load average at start and end (the machine may be shared: read the figures
with it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.distributed.corpus import scifact_documents, scifact_queries

from weftsearch import RRF, BM25Scorer, Index, Query, Scorer, VectorScorer
from weftsearch.distributed import ShardedIndex


def _queries_per_second(index: Index | ShardedIndex, queries: list[Query], scorers: list[Scorer]) -> float:
    index.search(queries[0], 10, RRF(), *scorers)  # warm
    start = time.perf_counter()
    for query in queries:
        index.search(query, 10, RRF(), *scorers)
    return len(queries) / (time.perf_counter() - start)


def _batch_queries_per_second(
    index: Index | ShardedIndex, queries: list[Query], scorers: list[Scorer]
) -> float:
    start = time.perf_counter()
    index.search_many(queries, 10, RRF(), *scorers)
    return len(queries) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ray", action="store_true", help="shards as Ray actors on a local cluster")
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps({"load_start": os.getloadavg()}))
    documents = scifact_documents(None)
    queries = scifact_queries(args.queries)
    factory = None
    if args.ray:
        from weftsearch.distributed.ray_shard import ray_shards, start_local_cluster

        start_local_cluster(num_cpus=2)
        factory = ray_shards()
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        single = Index.create(Path(root) / "single", vector_dim=384)
        single.add_many(documents, progress=False)
        single.commit()
        built = time.perf_counter() - start
        row = {"config": "Index", "docs_per_s": len(documents) / built}
        row["bm25_qps"] = _queries_per_second(single, queries, [BM25Scorer()])
        row["hybrid_qps"] = _queries_per_second(single, queries, [BM25Scorer(), VectorScorer(nprobe=None)])
        row["bm25_batch_qps"] = _batch_queries_per_second(single, queries, [BM25Scorer()])
        print(json.dumps(row))
        single.close()
        for count in (1, 2, 4):
            start = time.perf_counter()
            sharded = ShardedIndex.create(Path(root) / f"s{count}", count, vector_dim=384, factory=factory)
            sharded.add_many(documents, progress=False)
            sharded.commit()
            built = time.perf_counter() - start
            row = {
                "config": f"{'ray' if args.ray else 'local'} x{count}",
                "docs_per_s": len(documents) / built,
            }
            row["bm25_qps"] = _queries_per_second(sharded, queries, [BM25Scorer()])
            row["hybrid_qps"] = _queries_per_second(
                sharded, queries, [BM25Scorer(), VectorScorer(nprobe=None)]
            )
            row["bm25_batch_qps"] = _batch_queries_per_second(sharded, queries, [BM25Scorer()])
            print(json.dumps(row))
            sharded.close()
    print(json.dumps({"load_end": os.getloadavg()}))


if __name__ == "__main__":
    main()
