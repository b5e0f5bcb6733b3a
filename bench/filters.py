"""Filtered search, side by side: a selectivity sweep against LanceDB and Qdrant local (issue 15).

Prints Markdown tables (``--json FILE`` also writes them). Figures, not tests.

The corpus is SciFact (BEIR layout, ``--data``; 5,183 documents) with its frozen MiniLM
vectors, or ``--synthetic N`` documents (Zipfian vocabulary; clustered 384-d unit vectors,
``bench/ann.py``'s). Every
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

``--crossover`` measures instead where the vector planner should switch from scanning
the matching rows exactly to probing IVF lists: per selectivity (0.1% to 50%), the
scorer's own time (``VectorScorer.score``, top 10) with the exact path forced, with the
probed path forced, and unfiltered (the default probe), in alternating passes, with the
probed path's recall@10 against the exact one. Vectors only (no text), one partitioned
segment: SciFact's frozen MiniLM vectors (5,183 x 384) and ``--synthetic N`` random unit
vectors (``--dim``, 384 by default). The planner's constant
(``weftsearch.scorers.vector.EXACT_SCAN_FACTOR``) is set from the printed crossover.
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

import weftsearch.scorers.vector as vector_module
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


def sweep(
    workload: Workload,
    passes: int,
    peers: bool,
    query_limit: int,
    only: Sequence[str] = ("lancedb", "qdrant"),
) -> list[dict[str, Any]]:
    vectors = workload.query_vectors
    assert vectors is not None
    field = buckets(len(workload.doc_keys))
    chosen = list(range(min(query_limit, len(workload.query_ids))))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        index = build_weft(workload, field, Path(tmp) / "weft")
        use_lance = peers and "lancedb" in only and installed("lancedb")
        lance = Lance(workload, field, Path(tmp) / "lance") if use_lance else None
        use_qdrant = peers and "qdrant" in only and installed("qdrant_client")
        qdrant = Qdrant(workload, field) if use_qdrant else None
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


CROSSOVER_SELECTIVITIES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)


def crossover(
    name: str, doc_vectors: NDArray[np.float32], query_vectors: NDArray[np.float32], passes: int
) -> tuple[list[dict[str, Any]], str]:
    """Exact scan vs probe vs unfiltered, per selectivity: rows, and the crossover in one sentence."""
    field = buckets(doc_vectors.shape[0])
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        index = Index.create(Path(tmp) / "weft", "simple", vector_dim=int(doc_vectors.shape[1]))
        index.add_many(
            [
                Document(f"d{i:07d}", "", vector=doc_vectors[i], fields={"bucket": int(field[i])})
                for i in range(doc_vectors.shape[0])
            ],
            progress=False,
        )
        index.commit()
        snapshot = index.snapshot()
        blocks = snapshot.vector_blocks()
        assert len(blocks) == 1 and blocks[0].centroids is not None, "one partitioned segment expected"
        nlist = int(blocks[0].centroids.shape[0])
        scorer = VectorScorer()
        assert scorer.nprobe is not None
        probe_rows = scorer.nprobe * doc_vectors.shape[0] / nlist
        unfiltered = [Query(vector=vector) for vector in query_vectors]
        saved = vector_module.EXACT_SCAN_FACTOR
        try:
            for selectivity in CROSSOVER_SELECTIVITIES:
                below = max(1, round(selectivity * BUCKETS))
                queries = [Query(vector=vector, filter=f"bucket < {below}") for vector in query_vectors]
                matching = int((field < below).sum())
                arms = {"exact": float("inf"), "probed": 0.0, "unfiltered": saved}
                answers: dict[str, list[list[int]]] = {}
                times: dict[str, list[float]] = {arm: [] for arm in arms}
                for round_ in range(passes + 1):  # round 0 warms (caches, the matching rows)
                    for arm, factor in arms.items():
                        vector_module.EXACT_SCAN_FACTOR = factor
                        batch = unfiltered if arm == "unfiltered" else queries
                        started = time.perf_counter()
                        got = [scorer.score(snapshot, query, K).ids.tolist() for query in batch]
                        elapsed = time.perf_counter() - started
                        if round_:
                            times[arm].append(elapsed / len(batch) * 1e6)
                        answers[arm] = got
                vector_module.EXACT_SCAN_FACTOR = saved
                probe_recall = float(
                    np.mean(
                        [
                            1.0 if not want else len(set(got) & set(want)) / len(want)
                            for got, want in zip(answers["probed"], answers["exact"], strict=True)
                        ]
                    )
                )
                rows.append(
                    {
                        "selectivity": f"{selectivity:.1%}",
                        "matching": matching,
                        "ratio": matching / probe_rows,
                        "exact_us": min(times["exact"]),
                        "probed_us": min(times["probed"]),
                        "unfiltered_us": min(times["unfiltered"]),
                        "exact_spread": max(times["exact"]) - min(times["exact"]),
                        "probed_recall": probe_recall,
                    }
                )
                print(f"  done: crossover {selectivity:.1%}", file=sys.stderr, flush=True)
        finally:
            vector_module.EXACT_SCAN_FACTOR = saved
        index.close()
    return rows, _crossover_sentence(name, rows, nlist, probe_rows)


def _crossover_sentence(name: str, rows: Sequence[dict[str, Any]], nlist: int, probe_rows: float) -> str:
    """Where the exact scan stops being cheaper than the unfiltered probe, and than the filtered probe."""

    def first_dearer(against: str) -> str:
        for before, row in zip([None, *rows[:-1]], rows, strict=True):
            if row["exact_us"] > row[against]:
                if before is None:
                    return f"already at {row['selectivity']} (ratio {row['ratio']:.2f})"
                # Linear in the ratio between the two points that bracket the crossing.
                low = before["exact_us"] - before[against]
                high = row["exact_us"] - row[against]
                at = before["ratio"] + (row["ratio"] - before["ratio"]) * (-low) / (high - low)
                return (
                    f"at ratio ~{at:.2f} (between {before['selectivity']} and {row['selectivity']}, "
                    f"ratio {before['ratio']:.2f} to {row['ratio']:.2f})"
                )
        return "nowhere in the range measured"

    return (
        f"{name}: nlist {nlist}, an unfiltered probe reads {probe_rows:,.0f} rows; the exact scan of the "
        f"matching rows becomes dearer than the unfiltered probe {first_dearer('unfiltered_us')}, and "
        f"dearer than the filtered probe {first_dearer('probed_us')} (ratio: matching rows / rows an "
        f"unfiltered probe reads; the planner scans exactly up to ratio "
        f"{vector_module.EXACT_SCAN_FACTOR:g})"
    )


def render_crossover(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| selectivity | matching | matching / probe rows | exact scan us/q | probed us/q | "
        "unfiltered us/q | probed recall@10 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['selectivity']} | {row['matching']:,} | {row['ratio']:.2f} | {row['exact_us']:,.0f} | "
            f"{row['probed_us']:,.0f} | {row['unfiltered_us']:,.0f} | {row['probed_recall']:.4f} |"
        )
    return "\n".join(lines)


WEFT_ARMS = ("weft BM25", "weft vector (IVF)", "weft hybrid (IVF)")
#: Each weft arm and the peers' arms of the same kind it must beat at every selectivity.
PEERS = {
    "weft vector (IVF)": ("LanceDB vector (prefilter)", "Qdrant vector (payload filter)"),
    "weft BM25": ("LanceDB FTS (prefilter)",),
}


def targets(rows: Sequence[dict[str, Any]], corpus: str) -> list[str]:
    """Issue 15's targets, one line each: MET / MISSED by how much / NOT MEASURED (as bench/query_path.py)."""
    by = {(row["arm"], row["selectivity"]): row for row in rows}
    filtered = [row for row in rows if row["selectivity"] != "none"]
    lines = []

    def line(met: bool | None, name: str, needs: str, measured: str) -> None:
        verdict = "NOT MEASURED" if met is None else ("MET" if met else "MISSED")
        said = "" if not measured else (f": {measured}" if met is None else f": measured {measured}")
        lines.append(f"- {verdict}: {name} [{corpus}] (needs {needs}){said}")

    for arm in WEFT_ARMS:
        mine = [row for row in filtered if row["arm"] == arm]
        if not mine:
            line(None, f"{arm} recall@10 vs exact filtered, every selectivity", ">= 0.99", "")
            continue
        worst = min(mine, key=lambda row: row["recall@10"])
        value = worst["recall@10"]
        gap = "" if value >= 0.99 else f" (MISSED by {0.99 - value:.4f})"
        line(
            value >= 0.99,
            f"{arm} recall@10 vs exact filtered, every selectivity",
            ">= 0.99",
            f"lowest {value:.4f} at {worst['selectivity']}{gap}",
        )
    weft_rows = [row for row in filtered if row["arm"] in WEFT_ARMS]
    short = [row for row in weft_rows if row["full"] < 1.0]
    line(
        not short if weft_rows else None,
        "never fewer than k results where k match (weft arms)",
        "every query, every selectivity",
        "all full"
        if not short
        else ", ".join(f"{r['arm']} at {r['selectivity']}: {r['full']:.0%}" for r in short),
    )
    for arm in WEFT_ARMS:
        one, none = by.get((arm, "1.0%")), by.get((arm, "none"))
        if one is None or none is None:
            line(None, f"{arm} q/s at 1% >= unfiltered q/s", ">= 1.00x", "")
            continue
        ratio = one["qps"] / none["qps"]
        line(
            ratio >= 1.0,
            f"{arm} q/s at 1% / unfiltered q/s",
            ">= 1.00x",
            f"{ratio:.2f}x ({one['qps']:,.0f} vs {none['qps']:,.0f} q/s)",
        )
    for arm, peers in PEERS.items():
        for peer in peers:
            pairs = [
                (row["selectivity"], row["qps"] / by[(peer, row["selectivity"])]["qps"])
                for row in filtered
                if row["arm"] == arm and (peer, row["selectivity"]) in by
            ]
            if not pairs:
                line(None, f"{arm} ahead of {peer} at every selectivity", ">= 1.00x", "peer not run")
                continue
            where, ratio = min(pairs, key=lambda pair: pair[1])
            line(
                ratio >= 1.0,
                f"{arm} ahead of {peer} at every selectivity",
                ">= 1.00x",
                f"lowest {ratio:.2f}x at {where}",
            )
    return lines


def main_crossover(args: argparse.Namespace) -> int:
    """``--crossover``: SciFact's frozen vectors (unless ``--synthetic``) and ``--synthetic N`` if given."""
    sets: list[tuple[str, NDArray[np.float32], NDArray[np.float32]]] = []
    if not args.synthetic_only:
        if (args.data / "corpus.jsonl").is_file():
            workload = load_scifact(args.data)
            if workload.doc_vectors is not None and workload.query_vectors is not None:
                sets.append(
                    (
                        "SciFact",
                        workload.doc_vectors,
                        workload.query_vectors[: args.queries],
                    )
                )
        if not sets:
            print(f"no SciFact with frozen vectors at {args.data}; skipped", file=sys.stderr)
    if args.synthetic:
        rng = np.random.default_rng(SEED)
        docs = _unit(rng.normal(size=(args.synthetic, args.dim)).astype(np.float32))
        queries = _unit(rng.normal(size=(args.queries, args.dim)).astype(np.float32))
        sets.append((f"synthetic {args.synthetic:,} x {args.dim}", docs, queries))
    if not sets:
        return 2
    payload = []
    for name, docs, queries in sets:
        load = os.getloadavg()
        rows, sentence = crossover(name, docs, queries, args.passes)
        after = os.getloadavg()[0]
        print(f"## Exact scan vs probe under a filter: {name}, {docs.shape[0]:,} vectors, top {K}")
        print(f"load average before/after: {load[0]:.2f} / {after:.2f}; {os.cpu_count()} CPUs; ")
        print(f"{len(queries)} queries, best of {args.passes} alternating passes\n")
        print(render_crossover(rows))
        print(f"\n{sentence}\n")
        payload.append({"set": name, "load": [load[0], after], "rows": rows, "crossover": sentence})
    if args.json is not None:
        args.json.write_text(json.dumps({"crossover": payload}, indent=1), encoding="utf-8")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/datasets/scifact"
    )
    parser.add_argument("--synthetic", type=int, default=0, metavar="N", help="N synthetic documents instead")
    parser.add_argument("--passes", type=int, default=3, help="timed round-robin passes (3)")
    parser.add_argument("--queries", type=int, default=300, help="queries per pass (300)")
    parser.add_argument("--no-peers", action="store_true", help="weft-search only")
    parser.add_argument(
        "--peers",
        default="lancedb,qdrant",
        help="which peers (lancedb,qdrant); Qdrant's local mode keeps every point as Python objects, "
        "which a 1M-vector set does not fit",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    parser.add_argument(
        "--crossover", action="store_true", help="time exact scan vs probe per selectivity (vectors only)"
    )
    parser.add_argument("--dim", type=int, default=384, help="--crossover: synthetic vector width (384)")
    parser.add_argument(
        "--synthetic-only", action="store_true", help="--crossover: skip SciFact, only --synthetic N"
    )
    args = parser.parse_args(argv)
    if args.crossover:
        return main_crossover(args)
    if args.synthetic:
        workload = synthetic(args.synthetic, args.queries)
        # Clustered 384-d vectors, the IVF benchmark's (bench/ann.py): random unclustered vectors
        # defeat any IVF probe (recall@10 0.40 unfiltered at 1M), which says nothing of filters.
        from ann import synthetic_arrays

        docs, queries = synthetic_arrays("clustered", args.synthetic, args.queries)
        workload.doc_vectors, workload.query_vectors = docs, queries
    else:
        if not (args.data / "corpus.jsonl").is_file():
            print(f"no SciFact at {args.data}; pass --data DIR or --synthetic N", file=sys.stderr)
            return 2
        workload = load_scifact(args.data)
        if workload.doc_vectors is None:
            print(f"no frozen vectors under {args.data}", file=sys.stderr)
            return 2
    load = os.getloadavg()
    only = [name.strip() for name in args.peers.split(",") if name.strip()]
    rows = sweep(workload, args.passes, not args.no_peers, args.queries, only)
    print(f"## Filtered search: {workload.name}, {len(workload.doc_keys):,} documents, top {K}")
    print(f"load average before/after: {load[0]:.2f} / {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs\n")
    print(render(rows))
    summary = targets(rows, f"{workload.name}, {len(workload.doc_keys):,} documents")
    print("\n## Issue 15 targets\n")
    print("\n".join(summary))
    if args.json is not None:
        payload = {"load": load, "rows": rows, "targets": summary}
        args.json.write_text(json.dumps(payload, indent=1), encoding="utf-8")
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
