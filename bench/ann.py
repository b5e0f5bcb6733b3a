"""Approximate vector search (IVF lists) against the exact scan and faiss ``IndexIVFFlat``.

Prints figures (markdown tables); never asserts. Parts, each selectable with ``--parts``:

``scifact``      SciFact's 5,183 frozen MiniLM vectors (one in-memory segment, sealed and
                 partitioned by ``index.snapshot()``), its 1,109 query vectors.
``clustered``    ``--n`` (default 1,000,000) x 384 float32 points: 1,000 gaussian clusters with
                 centres on the unit sphere and a small spread, normalised; ``--queries``
                 (default 1,000) held-out points from the same distribution.
``unclustered``  the same sizes, isotropic gaussian, normalised (the hard case for lists).
``commits``      recall after incremental commits, then after ``merge(force=True)``: SciFact in
                 5 commits (each segment below the IVF floor) and ``--commit-n`` (default 50,000)
                 clustered points in 5 commits (each segment partitioned).
``float16``      ``vector_dtype="float16"`` against float32, both on disk: vector and index
                 bytes, recall@10/@100 of the exact scan and recall@10 at the default nprobe
                 against the float32 exact top k, q/s, and SciFact's dense nDCG@10; SciFact
                 and ``--float16-n`` (default 100,000) clustered points, ``--float16-queries``
                 (default 200) queries.

For each: nlist, a sweep of ``--nprobe``, recall@10 against the exact top 10, rows scored
per query (and the fraction of an exact scan), queries/second of weft-search's
``VectorScorer`` and of faiss ``IndexIVFFlat`` (same nlist, trained on the same unit
vectors with spherical k-means, 16 iterations and 64 training points per list like ours,
``METRIC_INNER_PRODUCT``), their ratio, and the nprobe each needs for a recall target.

Method. Everything runs on one thread: ``OMP_NUM_THREADS`` and the BLAS thread variables
are set to 1 before numpy is imported (unless already set), and ``faiss.omp_set_num_threads(1)``.
Both sides search one query per call, k = 10. q/s is wall clock over the fastest of
``--passes`` (default 3) timed passes over all queries, the two sides' passes alternating
(weft, faiss, weft, faiss, ...; the results come from the first pass),
after an untimed warm-up of 20 queries (ours
also after one exact query, which maps every page of the index's memory map into the process,
as faiss's rows are in its own memory once added). The
exact top 10 is weft-search's own exact scan on SciFact (faiss ``IndexFlatIP`` is checked
against it) and faiss's brute force ``faiss.knn`` (inner product) on the synthetic sets (our
exact scan is checked against it and timed on ``--exact-queries`` queries).

Usage: ``python bench/ann.py [--parts scifact,clustered,unclustered,commits] [--n 1000000]
[--queries 1000] [--nprobe 1,2,4,...] [--json out.json]``; ``--n 100000`` runs in about a minute.
"""

# ruff: noqa: E402  (the thread variables must be set before numpy is imported)
from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse
import json
import math
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from numpy.typing import NDArray

from weftsearch import Document, Index, Query, Snapshot, VectorScorer
from weftsearch.bench.recall import rows_read
from weftsearch.scorers.vector import DEFAULT_NPROBE
from weftsearch.storage.ivf import IVF_MIN_VECTORS, TRAIN_ITERATIONS, TRAIN_PER_LIST, train_partitions

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "datasets"
DIM = 384
K = 10
WARMUP = 20
SEED = 20261202
CLUSTERS = 1_000
SPREAD = 0.6  # norm of a point's offset from its cluster centre (the centre has norm 1)
TARGETS = (0.90, 0.95, 0.99)
#: Timed passes over the queries per measurement; q/s is the fastest pass's
#: (this VM's neighbours slow single passes by up to 2x; set by --passes).
PASSES = 3
Matrix = NDArray[np.float32]
Ids = NDArray[np.int64]


@dataclass
class Row:
    """One nprobe of one part."""

    nprobe: int | None
    recall: float
    candidates: float
    qps: float
    faiss_recall: float = math.nan
    faiss_candidates: float = math.nan
    faiss_qps: float = math.nan


@dataclass
class Part:
    """What one part measured."""

    name: str
    vectors: int
    nlist: int
    queries: int
    build_s: float
    rows: list[Row] = field(default_factory=list)
    exact: Row | None = None
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- machine and data


def machine() -> dict[str, Any]:
    model = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "faiss": faiss.__version__,
        "threads": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
    }


def normalise(rows: Matrix) -> Matrix:
    """Unit rows, in place."""
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def synthetic(kind: str, n: int, queries: int, seed: int = SEED, chunk: int = 100_000) -> Iterator[Matrix]:
    """Chunks of ``n`` base points, then one chunk of ``queries`` held-out points (PCG64, fixed seed)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    centres = normalise(rng.standard_normal((CLUSTERS, DIM), dtype=np.float32))
    sigma = np.float32(SPREAD / math.sqrt(DIM))
    sizes = [min(chunk, n - start) for start in range(0, n, chunk)] + [queries]
    for size in sizes:
        noise = rng.standard_normal((size, DIM), dtype=np.float32)
        if kind == "clustered":
            noise *= sigma
            noise += centres[rng.integers(0, CLUSTERS, size)]
        yield normalise(noise)


def synthetic_arrays(kind: str, n: int, queries: int, seed: int = SEED) -> tuple[Matrix, Matrix]:
    """The whole base and the queries of :func:`synthetic` (one copy of the base)."""
    base = np.empty((n, DIM), dtype=np.float32)
    start = 0
    query_rows = np.empty((0, DIM), np.float32)
    for rows in synthetic(kind, n, queries, seed):
        if start < n:
            base[start : start + rows.shape[0]] = rows
            start += rows.shape[0]
        else:
            query_rows = rows
    return base, query_rows


def key(row: int) -> str:
    return f"{row:08d}"


# ---------------------------------------------------------------------- searching


def truth_ids(snapshot: Snapshot, rows: NDArray[np.int64]) -> Ids:
    """Internal ids of base rows ``rows`` (any shape); base row ``i`` has key ``key(i)``."""
    ids = snapshot.ids_of([key(int(r)) for r in rows.reshape(-1)]).reshape(rows.shape)
    assert bool(np.all(ids >= 0))
    return ids


def overlap(found: Sequence[Ids], truth: Ids | Sequence[Ids], k: int = K) -> float:
    """Mean over queries of |found[:k] ∩ truth[:k]| / k (truth: one row or array per query)."""
    return float(np.mean([np.intersect1d(f[:k], t[:k]).size / k for f, t in zip(found, truth, strict=True)]))


def ours(
    snapshot: Snapshot, queries: Matrix, nprobe: int | None, truth: Ids | None, passes: int | None = None
) -> tuple[Row, list[Ids]]:
    """Recall@10, rows scored and q/s of ``VectorScorer(nprobe=nprobe)``, one query per call."""
    found, qps = scan(snapshot, queries, nprobe, K, passes)
    candidates = float(np.mean([rows_read(snapshot, q / np.linalg.norm(q), nprobe)[0] for q in queries]))
    recall = math.nan if truth is None else overlap(found, truth)
    return Row(nprobe, recall, candidates, qps), found


def scan(
    snapshot: Snapshot, queries: Matrix, nprobe: int | None, k: int, passes: int | None = None
) -> tuple[list[Ids], float]:
    """Internal ids of the top ``k`` of ``VectorScorer(nprobe=nprobe)`` per query, and q/s.

    One query per call; q/s from the fastest of ``PASSES`` timed passes, after
    the warm-up. Two indexes of the same documents in one segment number them
    alike (ids follow key order), so ids compare across indexes.
    """
    scorer = VectorScorer(nprobe=nprobe)
    objects = [Query(vector=q) for q in queries]
    # One exact query reads every row, so every page of the memory map is
    # mapped into the process before timing, as faiss's rows are in its own
    # memory after `add` (first touches are a one-time cost per page).
    VectorScorer(nprobe=None).score(snapshot, objects[0], K)
    for query in objects[:WARMUP]:
        scorer.score(snapshot, query, k)
    found: list[Ids] = []
    seconds = math.inf
    for _ in range(PASSES if passes is None else passes):
        started = time.perf_counter()
        found = [scorer.score(snapshot, query, k).ids for query in objects]
        seconds = min(seconds, time.perf_counter() - started)
    return found, len(objects) / seconds


def faiss_ivf(base: Matrix, nlist: int) -> tuple[Any, float, float]:
    quantizer = faiss.IndexFlatIP(DIM)
    ivf = faiss.IndexIVFFlat(quantizer, DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    ivf.cp.spherical = True
    ivf.cp.niter = TRAIN_ITERATIONS
    ivf.cp.max_points_per_centroid = TRAIN_PER_LIST
    ivf.cp.seed = 0
    started = time.perf_counter()
    ivf.train(base)
    trained = time.perf_counter() - started
    started = time.perf_counter()
    ivf.add(base)
    return ivf, trained, time.perf_counter() - started


def faiss_row(
    ivf: Any, queries: Matrix, nprobe: int, truth_rows: NDArray[np.int64], row: Row, passes: int | None = None
) -> None:
    """Fill ``row``'s faiss columns: recall@10 against base rows, rows scanned, q/s (one query a call)."""
    ivf.nprobe = nprobe
    for i in range(min(WARMUP, queries.shape[0])):
        ivf.search(queries[i : i + 1], K)
    found: list[NDArray[np.int64]] = []
    seconds = math.inf
    for _ in range(PASSES if passes is None else passes):
        found = []
        started = time.perf_counter()
        for i in range(queries.shape[0]):
            found.append(ivf.search(queries[i : i + 1], K)[1][0])
        seconds = min(seconds, time.perf_counter() - started)
    _, lists = ivf.quantizer.search(queries, nprobe)
    sizes = np.array([ivf.invlists.list_size(i) for i in range(ivf.nlist)], dtype=np.int64)
    row.faiss_recall = overlap([f.astype(np.int64) for f in found], truth_rows)
    row.faiss_candidates = float(sizes[lists].sum(axis=1).mean())
    row.faiss_qps = queries.shape[0] / seconds


def single_block(snapshot: Snapshot) -> tuple[int, int]:
    blocks = snapshot.vector_blocks()
    rows = sum(int(b.matrix.shape[0]) for b in blocks)
    lists = [0 if b.centroids is None else int(b.centroids.shape[0]) for b in blocks]
    return rows, lists[0] if len(lists) == 1 else -1


def sweep(
    part: Part,
    snapshot: Snapshot,
    queries: Matrix,
    truth: Ids,
    nprobes: Sequence[int],
    ivf: Any,
    truth_rows: NDArray[np.int64],
) -> None:
    for nprobe in nprobes:
        if nprobe > part.nlist:
            continue
        # The two sides' passes alternate, so a slow spell of this shared VM
        # falls on both rather than on whichever was being timed.
        row, _ = ours(snapshot, queries, nprobe, truth, passes=1)
        faiss_row(ivf, queries, nprobe, truth_rows, row, passes=1)
        for _ in range(PASSES - 1):
            row.qps = max(row.qps, scan(snapshot, queries, nprobe, K, passes=1)[1])
            again = Row(nprobe, row.recall, row.candidates, row.qps)
            faiss_row(ivf, queries, nprobe, truth_rows, again, passes=1)
            row.faiss_qps = max(row.faiss_qps, again.faiss_qps)
        part.rows.append(row)
        print(f"  [{part.name}] nprobe {nprobe}: {row}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- reporting


def at_recall(rows: Sequence[Row], target: float, faiss_side: bool) -> Row | None:
    for row in rows:
        if (row.faiss_recall if faiss_side else row.recall) >= target:
            return row
    return None


def report(part: Part) -> str:
    n = part.vectors
    lines = [
        f"### {part.name}: {n:,} vectors x {DIM}, {part.queries:,} queries, nlist {part.nlist}",
        "",
        *part.notes,
        "",
        "| nprobe | weft recall@10 | faiss recall@10 | rows scored / query | fraction of exact |"
        " weft q/s | faiss q/s | weft / faiss |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in part.rows:
        bold = "**" if r.nprobe == DEFAULT_NPROBE else ""
        label = f"{bold}{r.nprobe}{' (default)' if bold else ''}{bold}"
        lines.append(
            f"| {label} | {bold}{r.recall:.4f}{bold} | {r.faiss_recall:.4f} | {r.candidates:,.0f} "
            f"(faiss {r.faiss_candidates:,.0f}) | {r.candidates / n:.3f} ({n / r.candidates:.1f}x fewer) | "
            f"{r.qps:,.0f} | {r.faiss_qps:,.0f} | {r.qps / r.faiss_qps:.2f} |"
        )
    if part.exact is not None:
        e = part.exact
        lines.append(f"| exact scan | {e.recall:.4f} | | {e.candidates:,.0f} | 1.000 | {e.qps:,.1f} | | |")
    lines += ["", "| recall@10 target | weft nprobe | weft q/s | faiss nprobe | faiss q/s | weft / faiss |"]
    lines.append("|---|---:|---:|---:|---:|---:|")
    for target in TARGETS:
        mine, theirs = at_recall(part.rows, target, False), at_recall(part.rows, target, True)
        cells = [
            "not reached" if mine is None else str(mine.nprobe),
            "" if mine is None else f"{mine.qps:,.0f}",
            "not reached" if theirs is None else str(theirs.nprobe),
            "" if theirs is None else f"{theirs.faiss_qps:,.0f}",
            "" if mine is None or theirs is None else f"{mine.qps / theirs.faiss_qps:.2f}",
        ]
        lines.append(f"| >= {target} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- parts


def part_scifact(nprobes: Sequence[int]) -> Part:
    from weftsearch.eval.datasets import load_collection, load_frozen_vectors

    collection = load_collection("scifact", DATA)
    frozen = load_frozen_vectors(collection)
    documents = frozen.attach(collection.documents)
    started = time.perf_counter()
    index = Index(vector_dim=DIM)
    index.add_many(documents, progress=False)
    snapshot = index.snapshot()  # seals the buffer into one partitioned segment
    build = time.perf_counter() - started
    rows, nlist = single_block(snapshot)
    queries = np.ascontiguousarray(frozen.queries, dtype=np.float32)
    part = Part("SciFact (frozen MiniLM)", rows, nlist, queries.shape[0], build)
    exact, truth_found = ours(snapshot, queries, None, None)
    truth = np.stack(truth_found)
    exact.recall = 1.0
    part.exact = exact
    # faiss sees the vectors in internal-id order, so a faiss row number is an internal id.
    block = snapshot.vectors()
    base = normalise(np.array(block.matrix, dtype=np.float32))
    assert bool(np.all(block.ids == np.arange(rows)))
    _, flat = faiss.knn(normalise(queries.copy()), base, K, metric=faiss.METRIC_INNER_PRODUCT)
    part.notes.append(
        f"Exact top 10 = weft-search's exact scan; faiss `IndexFlatIP` agrees on "
        f"{overlap(list(flat.astype(np.int64)), truth):.4f} of it. One segment built in {build:.2f} s."
    )
    ivf, _, _ = faiss_ivf(base, nlist)
    sweep(part, snapshot, queries, truth, nprobes, ivf, truth)
    part.notes.append(kernels(snapshot, queries, ivf))
    return part


def build_synthetic(kind: str, n: int, queries: int, directory: Path) -> tuple[Index, float, Matrix]:
    """One segment of ``n`` vector-only documents through the public path: add_many, one commit."""
    started = time.perf_counter()
    index = Index.create(directory, vector_dim=DIM)
    query_rows = np.empty((0, DIM), np.float32)
    offset = 0
    for rows in synthetic(kind, n, queries):
        if offset >= n:
            query_rows = rows
            break
        index.add_many(
            (Document(key=key(offset + i), vector=row) for i, row in enumerate(rows)), progress=False
        )
        offset += rows.shape[0]
    index.commit()
    index.close()
    return Index.open(directory, readonly=True), time.perf_counter() - started, query_rows


def part_synthetic(kind: str, n: int, n_queries: int, nprobes: Sequence[int], exact_queries: int) -> Part:
    with tempfile.TemporaryDirectory(prefix=f"ann-{kind}-") as tmp:
        index, build, queries = build_synthetic(kind, n, n_queries, Path(tmp) / "index")
        snapshot = index.snapshot()
        rows, nlist = single_block(snapshot)
        part = Part(f"synthetic {kind}", rows, nlist, queries.shape[0], build)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        part.notes.append(
            f"Built through `Index.create` + `add_many` ({n:,} vector-only documents) + one `commit`: "
            f"{build:.1f} s, {index.segment_count} segment, peak RSS {peak:.1f} GB (encoding child "
            f"{child:.1f} GB)."
        )
        base, _ = synthetic_arrays(kind, n, n_queries)
        started = time.perf_counter()
        _, truth_rows = faiss.knn(queries, base, K, metric=faiss.METRIC_INNER_PRODUCT)
        truth_rows = truth_rows.astype(np.int64)
        knn_s = time.perf_counter() - started
        truth = truth_ids(snapshot, truth_rows)
        sample = queries[:exact_queries]
        exact, _ = ours(snapshot, sample, None, truth[:exact_queries])
        part.exact = exact
        part.notes.append(
            f"Exact top 10 = faiss brute force (`faiss.knn`, {knn_s:.1f} s for all queries); weft-search's "
            f"exact scan agrees on {exact.recall:.4f} of it and runs at {exact.qps:.2f} q/s "
            f"(timed on {sample.shape[0]} queries)."
        )
        started = time.perf_counter()
        partitions = train_partitions(base)
        ours_train = time.perf_counter() - started
        assert partitions.nlist == nlist
        del partitions
        ivf, faiss_train, faiss_add = faiss_ivf(base, nlist)
        del base
        part.notes.append(
            f"k-means, one thread, {nlist} lists, {TRAIN_ITERATIONS} iterations on "
            f"{TRAIN_PER_LIST * nlist:,} sampled rows, plus assigning all rows: weft-search (numpy) "
            f"{ours_train:.1f} s; faiss `train` {faiss_train:.1f} s + `add` (assigns all rows) "
            f"{faiss_add:.1f} s."
        )
        sweep(part, snapshot, queries, truth, nprobes, ivf, truth_rows)
        part.notes.append(kernels(snapshot, queries, ivf))
        del ivf
        index.close()
    return part


def kernels(snapshot: Snapshot, queries: Matrix, ivf: Any, nprobe: int = DEFAULT_NPROBE) -> str:
    """Where the time goes at ``nprobe``: probe alone, probe + row-wise einsum, probe + BLAS, faiss.

    The einsum and BLAS loops are the designs the scorer replaced (docs/BENCHMARKS.md); the
    scorer itself is timed in the table.
    """
    [block] = snapshot.vector_blocks()
    units = [q / np.linalg.norm(q) for q in queries]
    ranges = [block.probe(u, nprobe) or [(0, block.matrix.shape[0])] for u in units]

    def rate(work: Any) -> float:
        started = time.perf_counter()
        for unit, spans in zip(units, ranges, strict=True):
            work(unit, spans)
        return len(units) / (time.perf_counter() - started)

    def probe_only(unit: Matrix, spans: list[tuple[int, int]]) -> None:
        block.probe(unit, nprobe)

    def einsum(unit: Matrix, spans: list[tuple[int, int]]) -> None:
        block.probe(unit, nprobe)
        for start, end in spans:
            np.einsum("ij,j->i", block.matrix[start:end], unit)

    def blas(unit: Matrix, spans: list[tuple[int, int]]) -> None:
        block.probe(unit, nprobe)
        for start, end in spans:
            block.matrix[start:end] @ unit

    ivf.nprobe = nprobe
    started = time.perf_counter()
    for i in range(queries.shape[0]):
        ivf.search(queries[i : i + 1], K)
    faiss_qps = queries.shape[0] / (time.perf_counter() - started)
    return (
        f"Where the time goes at nprobe {nprobe} (q/s of each loop alone, same queries): "
        f"`probe` (centroid ranking) {rate(probe_only):,.0f}; probe + row-wise `einsum` over the ranges "
        f"(the scorer's first design) {rate(einsum):,.0f}; probe + BLAS matrix-vector products instead "
        f"{rate(blas):,.0f}; the whole `VectorScorer.score` is in the table; faiss search {faiss_qps:,.0f}."
    )


def recall_at_default(snapshot: Snapshot, queries: Matrix, truth: Ids) -> str:
    row, _ = ours(snapshot, queries, DEFAULT_NPROBE, truth)
    blocks = snapshot.vector_blocks()
    lists = ", ".join("-" if b.centroids is None else str(b.centroids.shape[0]) for b in blocks)
    return f"{len(blocks)}: {lists} | {row.recall:.4f} | {row.candidates:,.0f} | {row.qps:,.0f}"


def part_commits(commit_n: int, n_queries: int, batches: int = 5) -> str:
    lines = [
        f"### Recall@10 at the default nprobe ({DEFAULT_NPROBE}) after {batches} commits, "
        "then after `merge(force=True)`",
        "",
        "| set | state | segments: lists per segment ('-': below the floor, scanned exactly) |"
        " recall@10 | rows scored / query | q/s |",
        "|---|---|---|---:|---:|---:|",
    ]
    from weftsearch.eval.datasets import load_collection, load_frozen_vectors

    collection = load_collection("scifact", DATA)
    frozen = load_frozen_vectors(collection)
    documents = frozen.attach(collection.documents)
    queries_sf = np.ascontiguousarray(frozen.queries, dtype=np.float32)
    sets: list[tuple[str, list[Document], Matrix, NDArray[np.int64] | None]] = [
        ("SciFact", documents, queries_sf, None)
    ]
    base, queries = synthetic_arrays("clustered", commit_n, n_queries, seed=SEED + 1)
    _, truth_rows = faiss.knn(queries, base, K, metric=faiss.METRIC_INNER_PRODUCT)
    synthetic_docs = [Document(key=key(i), vector=row) for i, row in enumerate(base)]
    del base
    sets.append((f"clustered {commit_n:,}", synthetic_docs, queries, truth_rows.astype(np.int64)))
    for name, docs, qs, rows in sets:
        with tempfile.TemporaryDirectory(prefix="ann-commits-") as tmp:
            index = Index.create(Path(tmp) / "index", vector_dim=DIM)
            order = np.random.Generator(np.random.PCG64(SEED)).permutation(len(docs))
            for batch in np.array_split(order, batches):
                index.add_many([docs[i] for i in batch.tolist()], progress=False)
                index.commit()
            for state in (f"{batches} commits", "merged"):
                if state == "merged":
                    index.merge(force=True)
                snapshot = index.snapshot()
                if rows is None:  # SciFact: the exact scan of this snapshot is the truth
                    truth = np.stack(ours(snapshot, qs, None, None)[1])
                else:
                    truth = truth_ids(snapshot, rows)
                cells = recall_at_default(snapshot, qs, truth)
                lines.append(f"| {name} | {state} | {cells} |")
                print(f"  [commits] {name} {state}: {cells}", file=sys.stderr, flush=True)
            index.close()
    return "\n".join(lines) + "\n"


def part_float16(n: int, n_queries: int) -> str:
    """Recall, nDCG and size cost of ``vector_dtype="float16"`` against float32, on disk."""
    from weftsearch.eval.datasets import load_collection, load_frozen_vectors
    from weftsearch.eval.metrics import evaluate

    lines = [
        "### float16 storage against float32 (the same documents, on disk, reopened read-only)",
        "",
        "Truth: the float32 index's exact top k. nDCG@10: SciFact's 300 test queries, exact scan.",
        "",
        "| set | dtype | vector bytes | index bytes | exact recall@10 | exact recall@100 |"
        f" recall@10 at nprobe {DEFAULT_NPROBE} | q/s at nprobe {DEFAULT_NPROBE} | exact q/s | nDCG@10 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    collection = load_collection("scifact", DATA)
    frozen = load_frozen_vectors(collection)
    scifact_docs = frozen.attach(collection.documents)
    scifact_queries = np.ascontiguousarray(frozen.queries, dtype=np.float32)
    base, queries = synthetic_arrays("clustered", n, n_queries, seed=SEED + 2)
    synthetic_docs = [Document(key=key(i), vector=row) for i, row in enumerate(base)]
    del base
    test = collection.judged_query_ids("test")
    test_rows = [frozen.query_ids.index(qid) for qid in test]
    sets = [("SciFact", scifact_docs, scifact_queries), (f"clustered {n:,}", synthetic_docs, queries)]
    for name, docs, qs in sets:
        truth10: list[Ids] = []
        truth100: list[Ids] = []
        for dtype in ("float32", "float16"):
            with tempfile.TemporaryDirectory(prefix="ann-f16-") as tmp:
                path = Path(tmp) / "index"
                writer = Index.create(path, vector_dim=DIM, vector_dtype=dtype)
                writer.add_many(docs, progress=False)
                writer.commit()
                writer.close()
                index = Index.open(path, readonly=True)
                snapshot = index.snapshot()
                vector_bytes = sum(block.matrix.nbytes for block in snapshot.vector_blocks())
                index_bytes = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
                exact100, exact_qps = scan(snapshot, qs, None, 100)
                if dtype == "float32":
                    truth10 = [t[:K] for t in exact100]
                    truth100 = exact100
                probed, probe_qps = scan(snapshot, qs, DEFAULT_NPROBE, K)
                ndcg = ""
                if name == "SciFact":
                    scorer = VectorScorer(nprobe=None)
                    run = {}
                    for qid, row in zip(test, test_rows, strict=True):
                        stream = scorer.score(snapshot, Query(vector=qs[row]), 10)
                        keys = snapshot.keys_of(stream.ids)
                        run[qid] = {k: float(v) for k, v in zip(keys, stream.scores, strict=True)}
                    value = evaluate(collection.judgements("test"), run, "nDCG@10").mean("nDCG@10")
                    ndcg = f"{value:.4f}"
                cells = [
                    name,
                    dtype,
                    f"{vector_bytes:,}",
                    f"{index_bytes:,}",
                    f"{overlap(exact100, truth10, K):.4f}",
                    f"{overlap(exact100, truth100, 100):.4f}",
                    f"{overlap(probed, truth10, K):.4f}",
                    f"{probe_qps:,.0f}",
                    f"{exact_qps:,.0f}",
                    ndcg,
                ]
                lines.append("| " + " | ".join(cells) + " |")
                print(f"  [float16] {cells}", file=sys.stderr, flush=True)
                index.close()
    return "\n".join(lines) + "\n"


def main() -> None:
    global PASSES
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", default="scifact,clustered,unclustered,commits,float16")
    parser.add_argument("--n", type=int, default=1_000_000, help="synthetic base size")
    parser.add_argument("--queries", type=int, default=1_000, help="synthetic queries")
    parser.add_argument("--nprobe", default="1,2,4,8,16,20,32,64,128,256")
    parser.add_argument("--exact-queries", type=int, default=20, help="queries our exact scan is timed on")
    parser.add_argument("--commit-n", type=int, default=50_000, help="synthetic set of the commits part")
    parser.add_argument("--float16-n", type=int, default=100_000, help="synthetic set of the float16 part")
    parser.add_argument("--float16-queries", type=int, default=200, help="queries of the float16 part")
    parser.add_argument("--passes", type=int, default=3, help="timed passes; the fastest counts")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    PASSES = max(1, args.passes)
    faiss.omp_set_num_threads(1)
    nprobes = [int(p) for p in args.nprobe.split(",")]
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    info = machine()
    print("## Machine\n")
    print(", ".join(f"{k}: {v}" for k, v in info.items()))
    print(f"\nIVF floor {IVF_MIN_VECTORS:,} vectors; default nprobe {DEFAULT_NPROBE}; k = {K}\n", flush=True)
    measured: list[Part] = []
    for name in parts:
        started = time.perf_counter()
        if name == "scifact":
            measured.append(part_scifact(nprobes))
            print(report(measured[-1]))
        elif name in ("clustered", "unclustered"):
            measured.append(part_synthetic(name, args.n, args.queries, nprobes, args.exact_queries))
            print(report(measured[-1]))
        elif name == "commits":
            print(part_commits(args.commit_n, args.queries))
        elif name == "float16":
            print(part_float16(args.float16_n, args.float16_queries))
        else:
            raise SystemExit(f"unknown part {name!r}")
        print(f"({name}: {time.perf_counter() - started:.0f} s)\n", flush=True)
    if args.json:
        payload = {"machine": info, "parts": [asdict(p) for p in measured]}
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
