"""Filtered search, side by side: a selectivity sweep against LanceDB and Qdrant local (issue 15).

Prints Markdown tables (``--json FILE`` also writes them). Figures, not tests.

The corpus is SciFact (BEIR layout, ``--data``; 5,183 documents) with its frozen MiniLM
vectors, or ``--synthetic N`` documents (Zipfian vocabulary, random unit vectors). Every
document gets a synthetic integer field ``bucket`` in ``0 .. 999``, drawn from a seeded
generator, so the filter ``bucket < T`` matches about ``T / 1000`` of the corpus:
selectivities 0.1%, 1%, 10%, 50% and 99%, and an unfiltered row for reference.

Per selectivity and arm: queries/second (best of ``--passes`` round-robin passes, one
pass of every arm per round, the spread printed beside it) and recall@10 against the
exact filtered answer (the arm's own scorer, exhaustive, over the matching documents:
for BM25 the whole ranking filtered afterwards; for vectors the exact cosine over the
matching rows), and the share of queries that got as many results as the exact answer
has (``min(10, matching documents the arm has evidence for)``).

Arms: weft ``BM25Scorer``, weft ``VectorScorer()`` (IVF, default nprobe; the planner picks
an exact scan of the matching rows for selective filters), weft hybrid (both, RRF, depth
100); LanceDB (``where(..., prefilter=True)`` on an exact vector scan, and on its FTS);
Qdrant local (payload ``Range`` filter, exact dense). Peers not installed are skipped
with a reason. The load average is printed beside every table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from query_path import PreTokenizedAnalyzer, Workload, installed, load_scifact, synthetic

from weftsearch import RRF, BM25Scorer, Document, Index, Query, VectorScorer

SELECTIVITIES = (0.001, 0.01, 0.1, 0.5, 0.99)
BUCKETS = 1000
SEED = 20261203
K = 10


def buckets(n: int) -> NDArray[np.int64]:
    """The synthetic field: one integer in 0..999 per document (seeded)."""
    return np.random.default_rng(SEED).integers(0, BUCKETS, n)


def build_weft(workload: Workload, field: NDArray[np.int64], directory: Path) -> Index:
    vectors = workload.doc_vectors
    assert vectors is not None
    index = Index.create(directory, PreTokenizedAnalyzer(), vector_dim=int(vectors.shape[1]))
    documents = [
        Document(key, " ".join(tokens), vector=vectors[i], fields={"bucket": int(field[i])})
        for i, (key, tokens) in enumerate(zip(workload.doc_keys, workload.doc_tokens, strict=True))
    ]
    index.add_many(documents, progress=False)
    index.commit()
    return index


def exact_answers(
    index: Index, workload: Workload, expression: str | None, queries: Sequence[int]
) -> dict[str, list[list[str]]]:
    """The exact filtered top 10 of each arm: exhaustive scorers, the filter over every document."""
    snapshot = index.snapshot()
    vectors = workload.query_vectors
    assert vectors is not None
    out: dict[str, list[list[str]]] = {"bm25": [], "vector": [], "hybrid": []}
    for i in queries:
        text = " ".join(workload.query_tokens[i])
        query = Query(text, vector=vectors[i], filter=expression)
        out["bm25"].append(index.search(query, K, RRF(), BM25Scorer()).keys)
        out["vector"].append(index.search(query, K, RRF(), VectorScorer(nprobe=None)).keys)
        out["hybrid"].append(
            index.search(query, K, RRF(), BM25Scorer(), VectorScorer(nprobe=None), depth=100).keys
        )
    del snapshot
    return out


def recall(got: Sequence[Sequence[str]], want: Sequence[Sequence[str]]) -> float:
    """Mean recall@10 of ``got`` against ``want`` (queries whose exact answer is empty count 1)."""
    values = []
    for mine, theirs in zip(got, want, strict=True):
        values.append(1.0 if not theirs else len(set(mine) & set(theirs)) / len(theirs))
    return float(np.mean(values)) if values else 1.0


class Lance:
    """LanceDB with a ``bucket`` column: prefiltered exact vector scan, prefiltered FTS."""

    def __init__(self, workload: Workload, field: NDArray[np.int64], directory: Path) -> None:
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS

        vectors = workload.doc_vectors
        assert vectors is not None
        table = pa.table(
            {
                "key": workload.doc_keys,
                "text": [" ".join(tokens) for tokens in workload.doc_tokens],
                "bucket": field,
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
            }
        )
        self.table: Any = lancedb.connect(str(directory)).create_table("docs", table)
        self.table.create_index("text", config=FTS(base_tokenizer="whitespace", lower_case=False, stem=False))

    def vector(self, vector: NDArray[np.float32], where: str | None) -> list[str]:
        search = self.table.search(vector).metric("cosine")
        if where is not None:
            search = search.where(where, prefilter=True)
        return [str(row["key"]) for row in search.limit(K).select(["key"]).to_list()]

    def bm25(self, text: str, where: str | None) -> list[str]:
        search = self.table.search(text, query_type="fts")
        if where is not None:
            search = search.where(where, prefilter=True)
        return [str(row["key"]) for row in search.limit(K).select(["key"]).to_list()]


class Qdrant:
    """Qdrant local mode with a ``bucket`` payload: exact dense search under a ``Range`` filter."""

    def __init__(self, workload: Workload, field: NDArray[np.int64]) -> None:
        from qdrant_client import QdrantClient, models

        vectors = workload.doc_vectors
        assert vectors is not None
        self.models: Any = models
        self.client: Any = QdrantClient(":memory:")
        self.client.create_collection(
            "docs",
            vectors_config=models.VectorParams(size=int(vectors.shape[1]), distance=models.Distance.COSINE),
        )
        self.client.upload_points(
            "docs",
            [
                models.PointStruct(id=i, vector=vectors[i].tolist(), payload={"bucket": int(field[i])})
                for i in range(vectors.shape[0])
            ],
        )
        self.keys = workload.doc_keys

    def vector(self, vector: NDArray[np.float32], below: int | None) -> list[str]:
        models = self.models
        condition = None
        if below is not None:
            condition = models.Filter(
                must=[models.FieldCondition(key="bucket", range=models.Range(lt=below))]
            )
        result = self.client.query_points("docs", query=vector.tolist(), query_filter=condition, limit=K)
        return [self.keys[int(point.id)] for point in result.points]


def timed(run: Callable[[], list[list[str]]], queries: int) -> tuple[float, list[list[str]]]:
    started = time.perf_counter()
    answers = run()
    return queries / (time.perf_counter() - started), answers


def sweep(workload: Workload, passes: int, peers: bool, query_limit: int) -> list[dict[str, Any]]:
    vectors = workload.query_vectors
    assert vectors is not None
    field = buckets(len(workload.doc_keys))
    chosen = list(range(min(query_limit, len(workload.query_ids))))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        index = build_weft(workload, field, Path(tmp) / "weft")
        lance = Lance(workload, field, Path(tmp) / "lance") if peers and installed("lancedb") else None
        qdrant = Qdrant(workload, field) if peers and installed("qdrant_client") else None
        texts = [" ".join(workload.query_tokens[i]) for i in chosen]
        for selectivity in (None, *SELECTIVITIES):
            below = None if selectivity is None else max(1, round(selectivity * BUCKETS))
            expression = None if below is None else f"bucket < {below}"
            matching = len(workload.doc_keys) if below is None else int((field < below).sum())
            exact = exact_answers(index, workload, expression, chosen)

            def weft(scorers: Sequence[Any], expression: str | None = expression) -> list[list[str]]:
                return [
                    index.search(
                        Query(texts[j], vector=vectors[i], filter=expression), K, RRF(), *scorers
                    ).keys
                    for j, i in enumerate(chosen)
                ]

            arms: dict[str, tuple[str, Callable[[], list[list[str]]]]] = {
                "weft BM25": ("bm25", lambda: weft([BM25Scorer()])),
                "weft vector (IVF)": ("vector", lambda: weft([VectorScorer()])),
                "weft hybrid (IVF)": ("hybrid", lambda: weft([BM25Scorer(), VectorScorer()])),
            }
            if lance is not None:
                arms["LanceDB vector (prefilter)"] = (
                    "vector",
                    partial(_lance_vector, lance, vectors, chosen, expression),
                )
                arms["LanceDB FTS (prefilter)"] = ("bm25", partial(_lance_bm25, lance, texts, expression))
            if qdrant is not None:
                arms["Qdrant vector (payload filter)"] = (
                    "vector",
                    partial(_qdrant_vector, qdrant, vectors, chosen, below),
                )
            rates: dict[str, list[float]] = {name: [] for name in arms}
            answers: dict[str, list[list[str]]] = {}
            for name, (_, run) in arms.items():  # warm
                answers[name] = run()
            for _ in range(passes):
                for name, (_, run) in arms.items():
                    rate, _ = timed(run, len(chosen))
                    rates[name].append(rate)
            for name, (kind, _) in arms.items():
                # As many results as the exact filtered answer has (min(k, matching documents
                # the arm has evidence for: BM25 has none for a document without a query term).
                full = sum(
                    1 for got, want in zip(answers[name], exact[kind], strict=True) if len(got) >= len(want)
                )
                rows.append(
                    {
                        "selectivity": "none" if selectivity is None else f"{selectivity:.1%}",
                        "matching": matching,
                        "arm": name,
                        "qps": max(rates[name]),
                        "qps_min": min(rates[name]),
                        "recall@10": recall(answers[name], exact[kind]),
                        "full": full / len(chosen),
                    }
                )
            print(f"  done: selectivity {rows[-1]['selectivity']}", file=sys.stderr, flush=True)
        index.close()
    return rows


def render(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| selectivity | matching | arm | q/s (best) | spread | recall@10 vs exact | k results |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['selectivity']} | {row['matching']:,} | {row['arm']} | {row['qps']:,.0f} | "
            f"{row['qps_min']:,.0f}-{row['qps']:,.0f} | {row['recall@10']:.4f} | {row['full']:.0%} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/datasets/scifact"
    )
    parser.add_argument("--synthetic", type=int, default=0, metavar="N", help="N synthetic documents instead")
    parser.add_argument("--passes", type=int, default=3, help="timed round-robin passes (3)")
    parser.add_argument("--queries", type=int, default=300, help="queries per pass (300)")
    parser.add_argument("--no-peers", action="store_true", help="weft-search only")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    if args.synthetic:
        workload = synthetic(args.synthetic, args.queries)
        rng = np.random.default_rng(SEED)
        workload.doc_vectors = _unit(rng.normal(size=(args.synthetic, 64)).astype(np.float32))
        workload.query_vectors = _unit(rng.normal(size=(args.queries, 64)).astype(np.float32))
    else:
        if not (args.data / "corpus.jsonl").is_file():
            print(f"no SciFact at {args.data}; pass --data DIR or --synthetic N", file=sys.stderr)
            return 2
        workload = load_scifact(args.data)
        if workload.doc_vectors is None:
            print(f"no frozen vectors under {args.data}", file=sys.stderr)
            return 2
    load = os.getloadavg()
    rows = sweep(workload, args.passes, not args.no_peers, args.queries)
    print(f"## Filtered search: {workload.name}, {len(workload.doc_keys):,} documents, top {K}")
    print(f"load average before/after: {load[0]:.2f} / {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs\n")
    print(render(rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"load": load, "rows": rows}, indent=1), encoding="utf-8")
    return 0


def _unit(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    unit: NDArray[np.float32] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit


def _lance_vector(
    lance: Lance, vectors: NDArray[np.float32], chosen: Sequence[int], where: str | None
) -> list[list[str]]:
    return [lance.vector(vectors[i], where) for i in chosen]


def _lance_bm25(lance: Lance, texts: Sequence[str], where: str | None) -> list[list[str]]:
    return [lance.bm25(text, where) for text in texts]


def _qdrant_vector(
    qdrant: Qdrant, vectors: NDArray[np.float32], chosen: Sequence[int], below: int | None
) -> list[list[str]]:
    return [qdrant.vector(vectors[i], below) for i in chosen]


if __name__ == "__main__":
    raise SystemExit(main())
