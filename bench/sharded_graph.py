"""The cost of graph scorers on a ShardedIndex: the link table and the coordinator's walk (docs/SCALING.md).

Usage (from the repository root, the ray extra installed for --ray)::

    PYTHONPATH=src python bench/sharded_graph.py [--ray] [--passes 3]

CACM (3,204 documents with citation links) from ../shared/datasets/cacm. For
one ordinary Index and for 1, 2 and 4 shards: the link table's build time
(the shards' ``links`` calls and the join at the coordinator, the median of
five builds) and its memory (sorted keys and the link matrix, then everything
the graph scorers memoise on it after the queries: the symmetric matrix, the
hop step, PageRank's walk), and the time per query, one query at a time over
every CACM query ``passes`` times, of BM25 alone, BM25 + graph (RRF) and
BM25 + PageRank (RRF). The graph arm's cost over BM25 alone, sharded against
the single index, is the coordinator's per-query cost of the walk. Prints one
JSON line per configuration and the load average at start and end (the
machine may be shared: read the figures with it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from weftsearch import RRF, BM25Scorer, GraphScorer, Index, PageRankScorer, Query, Scorer
from weftsearch.distributed import ShardedIndex
from weftsearch.eval.datasets import load_collection

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"
ARMS: dict[str, list[Scorer]] = {
    "bm25": [BM25Scorer()],
    "bm25+graph": [BM25Scorer(), GraphScorer(BM25Scorer())],
    "bm25+pagerank": [BM25Scorer(), PageRankScorer(BM25Scorer())],
}


def _ms_per_query(
    index: Index | ShardedIndex, queries: list[Query], scorers: list[Scorer], passes: int
) -> float:
    index.search(queries[0], 10, RRF(), *scorers)  # warm (and, sharded, the link table)
    start = time.perf_counter()
    for _ in range(passes):
        for query in queries:
            index.search(query, 10, RRF(), *scorers)
    return 1000.0 * (time.perf_counter() - start) / (passes * len(queries))


def _nbytes(value: Any) -> int:
    if isinstance(value, sp.sparray | sp.spmatrix):
        return sum(
            int(getattr(value, name).nbytes) for name in ("data", "indices", "indptr") if hasattr(value, name)
        )
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, tuple):
        return sum(_nbytes(item) for item in value)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ray", action="store_true", help="shards as Ray actors on a local cluster")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps({"load_start": os.getloadavg()}))
    collection = load_collection("cacm", DATA)
    documents = list(collection.documents)
    queries = [Query(text=text) for text in collection.queries.values()]
    factory = None
    if args.ray:
        from weftsearch.distributed.ray_shard import ray_shards, start_local_cluster

        start_local_cluster(num_cpus=2)
        factory = ray_shards()
    with tempfile.TemporaryDirectory() as root:
        single = Index.create(Path(root) / "single")
        single.add_many(documents, progress=False)
        single.commit()
        row: dict[str, Any] = {"config": "Index", "documents": len(documents), "queries": len(queries)}
        row["links"] = int(single.snapshot().links().nnz)
        for name, scorers in ARMS.items():
            row[f"{name}_ms"] = _ms_per_query(single, queries, scorers, args.passes)
        print(json.dumps(row))
        single.close()
        for count in (1, 2, 4):
            sharded = ShardedIndex.create(Path(root) / f"s{count}", count, factory=factory)
            sharded.add_many(documents, progress=False)
            sharded.commit()
            cut = sharded._cut  # the bench reaches in: the build is private to the coordinator
            seconds = []
            for _ in range(5):
                start = time.perf_counter()
                sharded._links = None
                table = sharded._link_table(cut, False, range(count))
                seconds.append(time.perf_counter() - start)
            view = table.view
            row = {"config": f"{'ray' if args.ray else 'local'} x{count}"}
            row["table_build_ms"] = 1000.0 * statistics.median(seconds)
            row["table_keys_bytes"] = int(view.keys_array.nbytes)
            row["table_links_bytes"] = _nbytes(view.links())
            row["table_shard_ids_bytes"] = sum(int(ids.nbytes) for ids in table.ids.values())
            for name, scorers in ARMS.items():
                row[f"{name}_ms"] = _ms_per_query(sharded, queries, scorers, args.passes)
            row["memo_bytes_after_queries"] = sum(_nbytes(value) for value in view._memo.values())
            print(json.dumps(row))
            sharded.close()
    print(json.dumps({"load_end": os.getloadavg()}))


if __name__ == "__main__":
    main()
