"""Every figure of issue 14, side by side: weft-search against bm25s, tantivy, LanceDB and Qdrant.

The one benchmark command (``make bench``). Prints Markdown tables, each with the load
average, and ends with one line per issue-14 target (MET / MISSED by how much / NOT
MEASURED); ``--json PATH`` writes the same as JSON. A script that prints figures, not a
test: nothing here asserts a speed.

Usage::

    python bench/query_path.py [--json bench.json]     # the full run (idle machine, 1M corpus)
    python bench/query_path.py --quick [--json q.json] # SciFact only, few passes: 1-2 minutes

Parts (``--parts``, comma separated; default all, ``--quick``: ``scifact,index``):

``scifact``          SciFact (BEIR layout, 5,183 documents, 1,109 queries): the BM25 rows at
                     top-10 and top-100, and the hybrid arm (BM25 + MiniLM vectors, RRF, depth
                     100) against LanceDB and Qdrant local on the 300 judged test queries;
                     with ``--quick`` also the RSS growth over distinct queries.
``index``            indexing docs/s on SciFact (add + commit on disk) for weft-search (text
                     stored, and ``store_text=False`` where the option exists), bm25s and
                     tantivy, the peak RSS of each build and its size on disk.
``synthetic``        the BM25 rows on each ``--sizes`` corpus (default 100,000 and 1,000,000
                     documents from ``bench/synthetic_corpus.py``: Zipfian vocabulary, lengths
                     around 100 tokens, fixed seed; ``--synthetic-queries`` queries), and the
                     RSS growth over ``--rss-queries`` distinct queries on the largest.
``index-synthetic``  the indexing table on the largest ``--sizes`` corpus.

Each BM25 table also gives the share of postings and of blocks each query's compiled
BM25 pass skipped (``KernelStats``, captured by :func:`kernel_skips`, no public API).

What each row computes
----------------------
Every engine gets the same tokens: documents (``title + " " + text``) and queries are
analysed once, beforehand, with weft-search's ``english`` analyzer; weft-search indexes
them joined by spaces under an analyzer that only splits on whitespace, bm25s gets the
token lists, tantivy, LanceDB and Qdrant get the space-joined tokens (tantivy and
LanceDB with their ``whitespace`` tokenizers, no stemming, lower-casing or stop words).
So the BM25 rows compare scoring, top-k selection and the call around them, not
tokenisers; one extra row (``raw text``) shows ``Index.search`` analysing raw query
text with the english analyzer, which is the analysis cost the others leave out.

* ``weft BM25Scorer.score``: the scorer alone on the committed snapshot
  (``scorer.score(snapshot, Query(text), k)``, k1 = 1.2, b = 0.75).
* ``weft Index.search``: ``index.search(Query(text), k, RRF(), BM25Scorer())``, what a
  user calls (one stream), on an index created on disk and committed (one segment).
  With 2 threads the queries are split between two threads searching at once; the
  figure is the aggregate (queries / wall seconds).
* ``weft Index.search (10 segments)``: the same call on the same documents committed in 10
  equal parts kept as 10 segments (``--segments N``; 0 leaves the row out), as after an
  incremental ingest before merging.
* ``weft Index.search_many``: ``index.search_many(queries, k, RRF(), BM25Scorer(),
  threads=T)`` when the installed weft-search has it (feature-detected); otherwise
  its rows print "not available".
* ``bm25s numba`` / ``bm25s numpy``: ``bm25s.BM25(method="lucene", k1=1.2, b=0.75)``,
  one ``retrieve`` call per query and (numba) all queries in one call, one thread
  (``n_threads=1`` for numba, ``0`` for numpy: its fastest single-thread mode). bm25s's
  Lucene BM25 is weft's divided by ``k1 + 1``, in float32.
* ``tantivy``: tantivy-py, a disjunction of term queries (a repeated query term counts
  twice, as BM25's qtf), ``searcher.search(query, k)``, one segment, one call per query.
  Its BM25 is weft's, but on document lengths stored in one lossy byte.
* hybrid ``weft``: ``index.search(Query(text, vector), k, RRF(), BM25Scorer(),
  VectorScorer(), depth=100)`` (the vector scorer's default nprobe), and the same with
  ``VectorScorer(nprobe=None)`` (the exact scan the peers run), to compare at equal nDCG@10.
* hybrid ``LanceDB``: a table with the text (native FTS index, whitespace tokenizer,
  BM25) and the vectors (no vector index: an exact flat scan, L2 on unit vectors, the
  same order as cosine), ``search(query_type="hybrid").vector(v).text(t)
  .rerank(RRFReranker(K=60)).limit(100)``, the first k kept.
* hybrid ``Qdrant local``: ``QdrantClient(":memory:")`` (the pure-Python local mode),
  a dense vector (dot product, exact) and a sparse vector per point holding BM25's
  document factor ``tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))`` computed here, with
  the collection's ``Modifier.IDF`` supplying BM25's idf ``ln(1 + (N - n + 0.5) / (n + 0.5))``
  at query time; the query's sparse vector holds each term's count. Two prefetches of
  100 (sparse, dense) fused with ``RrfQuery(rrf=Rrf(k=60))``. So Qdrant computes the
  same BM25 and the same RRF as weft-search.
  LanceDB's BM25 and its RRF reranker are its own (its FTS scores are not weft's to the
  bit), so their nDCG@10 is printed beside each q/s to show the quality they reach.

How it is timed
---------------
One run, every row on the same machine state. Each row first answers every query once,
untimed (caches, numba's JIT, page faults). Then ``--passes`` rounds; in each round every
row runs one full pass over its queries, weft rows and peer rows alternating (weft,
peer, weft, peer, ...), and the order is reversed every other round, so a slow spell of
a shared machine falls on both sides alike. The table reports the **fastest** pass: the
other jobs on a shared machine only ever add time to a pass, never remove it, so the
fastest pass is the closest estimate of the engine's own cost; the median and the
spread (slowest to fastest pass, in q/s) are printed beside it to show how noisy the
run was. The load average (``os.getloadavg()``) is printed beside every table. Python
thread pools and numeric libraries are pinned to one thread (``*_NUM_THREADS=1``)
except where a row says 2 threads.

The slow peers (LanceDB, Qdrant local) are timed on the first ``--slow-queries``
judged queries only; every hybrid row's nDCG@10 is over the first ``--ndcg-queries``
judged queries (all of them by default), from one untimed run.

Indexing (``index``, ``index-synthetic``): ``--build-passes`` builds of each engine,
round-robin, each in its own child process (``--build-child``) that reads the corpus
lines before its clock starts; docs/s is documents / (add + commit seconds, on disk).
weft-search's commit encoder runs at normal priority (see :func:`create_options`). A
bare launcher interpreter starts each child and, once it has exited, prints
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``: the child's peak resident set, including
the descendants it waited for (weft-search's forked encoder); the child also reports its
own ``VmHWM``. (Not this process: a child forked from it would carry this process's
resident set in its high-water mark.) A child that only reads the lines gives the
baseline. The size on disk is the sum of the sizes of the files the build left.

Ratios against targets are fastest pass over fastest pass, with the same ratio taken
round by round (:func:`round_ratios`) beside them to show the noise.
"""

# ruff: noqa: E402  (the thread variables must be set before numpy is imported)
from __future__ import annotations

import os

for _variable in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
):
    os.environ.setdefault(_variable, "1")
# LanceDB's Rust logger warns on every hybrid query about a column-projection change to come.
os.environ.setdefault("LANCEDB_LOG", "error")

import argparse
import gc
import inspect
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import partial
from importlib import metadata
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

import weftsearch
from weftsearch import RRF, BM25Scorer, Document, Index, Query, Snapshot, VectorScorer
from weftsearch.engine.merge_policy import MergePolicy
from weftsearch.eval.metrics import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared generator beside this file
from synthetic_corpus import SEED, distinct_queries, zipf_corpus

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "datasets" / "scifact"
VECTORS = Path("vectors") / "all-minilm-l6-v2-int8"
K1 = 1.2
B = 0.75
RRF_K = 60
DEPTH = 100
PARTS = ("scifact", "index", "synthetic", "index-synthetic")
NOT_INSTALLED = "not installed"
#: Hybrid ``Index.search`` (BM25 + vector, RRF, depth 100) on SciFact before issue 14, q/s
#: (the issue's own side-by-side run); the target is twice this.
HYBRID_BASELINE_QPS = 1442.0
#: Its nDCG@10 on SciFact's judged test queries (pre-analysed tokens, frozen MiniLM vectors,
#: default nprobe), which must stay unchanged: measured by this script on the tree the
#: issue-14 work started from (commit 78faf31).
HYBRID_BASELINE_NDCG10 = 0.7124


# --------------------------------------------------------------------------- data


class PreTokenizedAnalyzer:
    """An analyzer for text that is already analysed: it only splits on whitespace.

    The english analyzer never emits a token containing whitespace, so joining its
    tokens with spaces and splitting them again gives the same tokens back.
    """

    @property
    def name(self) -> str:
        """Registry name: ``"pretokenized"``."""
        return "pretokenized"

    def analyze(self, text: str) -> list[str]:
        """Split ``text`` on whitespace."""
        return text.split()


@dataclass
class Workload:
    """A corpus and its queries, analysed into tokens, with optional vectors and judgements."""

    name: str
    doc_keys: list[str]
    doc_tokens: list[list[str]]
    query_ids: list[str]
    query_tokens: list[list[str]]
    raw_docs: list[str] | None = None
    raw_queries: list[str] | None = None
    doc_vectors: NDArray[np.float32] | None = None
    query_vectors: NDArray[np.float32] | None = None
    #: query id -> document key -> grade (the test split), when judged.
    qrels: dict[str, dict[str, int]] | None = None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_scifact(data: Path, with_vectors: bool = True) -> Workload:
    """SciFact in BEIR layout, analysed once with the english analyzer; vectors if present."""
    analyzer = weftsearch.get_analyzer("english")
    corpus = _read_jsonl(data / "corpus.jsonl")
    keys = [str(r["_id"]) for r in corpus]
    texts = [f"{r.get('title', '')} {r.get('text', '')}" for r in corpus]
    queries = _read_jsonl(data / "queries.jsonl")
    query_ids = [str(r["_id"]) for r in queries]
    query_texts = [str(r["text"]) for r in queries]
    qrels: dict[str, dict[str, int]] | None = None
    test = data / "qrels" / "test.tsv"
    if test.is_file():
        qrels = {}
        for number, line in enumerate(test.read_text(encoding="utf-8").splitlines()):
            parts = line.split("\t")
            if number == 0 and parts[0] == "query-id":
                continue
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    workload = Workload(
        name="SciFact",
        doc_keys=keys,
        doc_tokens=[analyzer.analyze(t) for t in texts],
        query_ids=query_ids,
        query_tokens=[analyzer.analyze(q) for q in query_texts],
        raw_docs=texts,
        raw_queries=query_texts,
        qrels=qrels,
    )
    folder = data / VECTORS
    if with_vectors and (folder / "corpus.npy").is_file():
        workload.doc_vectors = _aligned(folder, "corpus", keys)
        workload.query_vectors = _aligned(folder, "queries", query_ids)
    return workload


def _aligned(folder: Path, name: str, ids: Sequence[str]) -> NDArray[np.float32]:
    """The rows of ``name.npy`` in the order of ``ids`` (the file's own order is ``name_ids.txt``)."""
    matrix = np.load(folder / f"{name}.npy").astype(np.float32, copy=False)
    order = (folder / f"{name}_ids.txt").read_text(encoding="utf-8").split()
    row = {key: i for i, key in enumerate(order)}
    return np.ascontiguousarray(matrix[[row[key] for key in ids]])


def synthetic(n_docs: int, n_queries: int, seed: int = SEED) -> Workload:
    """The shared synthetic corpus (``bench/synthetic_corpus.py``) as a :class:`Workload`."""
    corpus = zipf_corpus(n_docs, n_queries, seed)
    return Workload(
        name=corpus.name,
        doc_keys=corpus.doc_keys,
        doc_tokens=corpus.doc_tokens,
        query_ids=[f"q{i}" for i in range(n_queries)],
        query_tokens=corpus.query_tokens,
    )


# --------------------------------------------------------------------------- rows and timing


@dataclass
class Arm:
    """One row to time: ``run()`` is one full pass over ``n_queries`` queries."""

    label: str
    side: str  # "weft" or "peer"
    run: Callable[[], object]
    n_queries: int
    note: str = ""


@dataclass
class Row:
    """One table row: the timed passes and what they give."""

    label: str
    side: str
    n_queries: int
    seconds: list[float] = field(default_factory=list)
    note: str = ""
    ndcg10: float | None = None
    #: Fraction of queries whose top-k set equals weft BM25Scorer's (BM25 rows only).
    same_as_weft: float | None = None
    unavailable: str = ""  # why the row has no figures ("not installed", ...)

    @property
    def best(self) -> float:
        """Queries per second of the fastest pass (0.0 without passes)."""
        return self.n_queries / min(self.seconds) if self.seconds else 0.0

    @property
    def median(self) -> float:
        """Queries per second of the median pass."""
        return self.n_queries / statistics.median(self.seconds) if self.seconds else 0.0

    @property
    def slowest(self) -> float:
        """Queries per second of the slowest pass."""
        return self.n_queries / max(self.seconds) if self.seconds else 0.0


def round_ratios(mine: Row, other: Row) -> list[float]:
    """``mine``'s q/s over ``other``'s, round by round (both rows timed in the same rounds)."""
    return [
        (mine.n_queries / a) / (other.n_queries / b)
        for a, b in zip(mine.seconds, other.seconds, strict=False)
        if a > 0 and b > 0
    ]


@dataclass
class Target:
    """One of issue 14's targets, checked against what this run measured.

    ``value`` is the measured figure (a ratio, or MB), ``needed`` the target;
    ``at_least`` says which side of it meets the target. ``spread`` is the
    range of the same ratio computed round by round (the rows' passes of one
    round against each other), when the figure comes from timed rows.
    """

    name: str
    corpus: str
    value: float | None
    needed: float
    at_least: bool = True
    unit: str = "x"
    spread: tuple[float, float] | None = None
    row: str = ""  # the table row the figure belongs to (its "target" cell)
    detail: str = ""

    @property
    def met(self) -> bool | None:
        """Whether the target is met (``None`` when nothing was measured)."""
        if self.value is None:
            return None
        return self.value >= self.needed if self.at_least else self.value <= self.needed

    def _fmt(self, value: float) -> str:
        if self.unit == "x":
            return f"{value:.2f}x"
        if self.unit == "MB":
            return f"{value:,.1f} MB"
        return f"{value:.4f} {self.unit}"

    def cell(self) -> str:
        """A short table cell: measured against needed."""
        if self.value is None:
            return f"{self.name}: n/a ({'>=' if self.at_least else '<='} {self._fmt(self.needed)})"
        sign = ">=" if self.at_least else "<="
        mark = "met" if self.met else "MISSED"
        return f"{self.name}: {self._fmt(self.value)} ({sign} {self._fmt(self.needed)}: {mark})"

    def line(self) -> str:
        """One line of the targets summary: MET / MISSED by how much."""
        sign = ">=" if self.at_least else "<="
        head = f"{self.name} [{self.corpus}] (needs {sign} {self._fmt(self.needed)})"
        if self.value is None:
            return f"- NOT MEASURED: {head}{': ' + self.detail if self.detail else ''}"
        spread = ""
        if self.spread is not None:
            spread = f"; round by round {self._fmt(self.spread[0])} to {self._fmt(self.spread[1])}"
        if self.met:
            verdict = "MET"
        elif self.unit == "x" and self.at_least:
            verdict = (
                f"MISSED by {self.needed - self.value:.2f}x ({self.value / self.needed:.0%} of the target)"
            )
        else:
            verdict = f"MISSED by {self._fmt(abs(self.value - self.needed))}"
        detail = f"; {self.detail}" if self.detail else ""
        return f"- {verdict}: {head}: measured {self._fmt(self.value)}{spread}{detail}"

    def as_json(self) -> dict[str, Any]:
        """The target as plain data."""
        return asdict(self) | {"met": self.met}


def ratio_target(
    name: str, corpus: str, rows: dict[str, Row], mine: str, other: str, needed: float, detail: str = ""
) -> Target:
    """A ``>= needed`` target on row ``mine``'s fastest q/s over row ``other``'s."""
    a, b = rows.get(mine), rows.get(other)
    if a is None or b is None or not a.seconds or not b.seconds:
        missing = [label for label, row in ((mine, a), (other, b)) if row is None or not row.seconds]
        return Target(name, corpus, None, needed, row=mine, detail=f"no figure for {', '.join(missing)}")
    ratios = round_ratios(a, b)
    spread = (min(ratios), max(ratios)) if ratios else None
    return Target(name, corpus, a.best / b.best, needed, spread=spread, row=mine, detail=detail)


def alternate(arms: Sequence[Arm]) -> list[Arm]:
    """Interleave weft and peer arms: weft, peer, weft, peer, ... then whichever is left."""
    weft = [a for a in arms if a.side == "weft"]
    peer = [a for a in arms if a.side != "weft"]
    order: list[Arm] = []
    for i in range(max(len(weft), len(peer))):
        order += weft[i : i + 1] + peer[i : i + 1]
    return order


def measure(arms: Sequence[Arm], passes: int) -> dict[str, Row]:
    """Warm every arm up once, then time ``passes`` rounds of alternating passes."""
    rows = {a.label: Row(a.label, a.side, a.n_queries, note=a.note) for a in arms}
    order = alternate(arms)
    for arm in order:
        arm.run()
    for number in range(passes):
        for arm in order if number % 2 == 0 else reversed(order):
            gc.collect()
            start = time.perf_counter()
            arm.run()
            rows[arm.label].seconds.append(time.perf_counter() - start)
    return rows


# --------------------------------------------------------------------------- weft-search


def _weft_documents(workload: Workload, with_vectors: bool) -> list[Document]:
    vectors = workload.doc_vectors if with_vectors else None
    return [
        Document(key, " ".join(tokens), vector=None if vectors is None else vectors[i])
        for i, (key, tokens) in enumerate(zip(workload.doc_keys, workload.doc_tokens, strict=True))
    ]


def has_search_many() -> bool:
    """Whether the installed weft-search has ``Index.search_many`` (issue 14, item 4)."""
    return hasattr(Index, "search_many")


class Weft:
    """weft-search through its public API, on an index created on disk and committed."""

    def __init__(
        self, workload: Workload, directory: Path, *, with_vectors: bool = True, segments: int = 1
    ) -> None:
        """Build the index; ``segments`` > 1 commits the documents in that many equal parts.

        The parts stay separate segments (a merge factor above their number), as after
        an incremental ingest before merging.
        """
        vectors = with_vectors and workload.doc_vectors is not None
        dim = workload.doc_vectors.shape[1] if vectors and workload.doc_vectors is not None else None
        policy = MergePolicy(factor=max(10, segments + 1))
        self.index = Index.create(
            directory, PreTokenizedAnalyzer(), vector_dim=dim, merge_policy=policy, **create_options()
        )
        documents = _weft_documents(workload, vectors)
        bounds = np.linspace(0, len(documents), segments + 1).astype(int)
        for start, stop in pairwise(bounds.tolist()):
            self.index.add_many(documents[start:stop], progress=False)
            self.index.commit()
        del documents
        self.snapshot: Snapshot = self.index.snapshot()
        self.scorer = BM25Scorer(k1=K1, b=B)
        self.vector = VectorScorer()
        self.fuser = RRF(RRF_K)
        self.queries = [Query(text=" ".join(tokens)) for tokens in workload.query_tokens]
        self.hybrid: list[Query] = []
        if vectors and workload.query_vectors is not None:
            self.hybrid = [
                Query(text=q.text, vector=workload.query_vectors[i]) for i, q in enumerate(self.queries)
            ]

    def close(self) -> None:
        """Close the index (it holds a writer lock)."""
        self.index.close()

    def run_scorer(self, k: int) -> None:
        """Every query through ``BM25Scorer.score`` alone."""
        scorer, snapshot = self.scorer, self.snapshot
        for query in self.queries:
            scorer.score(snapshot, query, k)

    def run_search(self, k: int, queries: Sequence[Query] | None = None) -> None:
        """Every query through ``Index.search`` with the one BM25 stream."""
        index, fuser, scorer = self.index, self.fuser, self.scorer
        for query in self.queries if queries is None else queries:
            index.search(query, k, fuser, scorer)

    def run_search_threads(self, k: int, threads: int) -> None:
        """The queries split between ``threads`` threads calling ``Index.search`` at once."""
        if threads == 1:
            self.run_search(k)
            return
        shares = [self.queries[i::threads] for i in range(threads)]
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(self.run_search, k, share) for share in shares]:
                future.result()

    def run_search_many(self, k: int, threads: int) -> None:
        """All queries in one ``Index.search_many`` call (only when it exists)."""
        search_many: Any = getattr(self.index, "search_many")  # noqa: B009  (feature-detected)
        search_many(self.queries, k, self.fuser, self.scorer, threads=threads)

    def run_hybrid(
        self, k: int, queries: Sequence[Query], vector: VectorScorer | None = None
    ) -> list[list[str]]:
        """BM25 + vector fused by RRF at depth 100; the keys of each query's hits.

        ``vector`` defaults to ``VectorScorer()`` (its default nprobe on partitioned segments).
        """
        index, fuser, bm25 = self.index, self.fuser, self.scorer
        vector = self.vector if vector is None else vector
        return [[hit.key for hit in index.search(q, k, fuser, bm25, vector, depth=DEPTH)] for q in queries]

    def rankings(self, k: int) -> list[list[str]]:
        """The scorer's top-k keys per query."""
        return [self.snapshot.keys_of(self.scorer.score(self.snapshot, q, k).ids) for q in self.queries]

    def search_rankings(self, k: int) -> list[list[str]]:
        """``Index.search``'s top-k keys per query."""
        return [[h.key for h in self.index.search(q, k, self.fuser, self.scorer)] for q in self.queries]


class WeftRaw:
    """``Index.search`` on raw query text with the english analyzer (analysis included).

    Built like :class:`Weft` (on disk, committed, one segment), so the difference
    between the two rows is the analysis of the query text.
    """

    def __init__(self, workload: Workload, directory: Path) -> None:
        assert workload.raw_docs is not None and workload.raw_queries is not None
        self.index = Index.create(directory, "english", **create_options())
        self.index.add_many(
            (Document(key, text) for key, text in zip(workload.doc_keys, workload.raw_docs, strict=True)),
            progress=False,
        )
        self.index.commit()
        self.scorer = BM25Scorer(k1=K1, b=B)
        self.fuser = RRF(RRF_K)
        self.queries = list(workload.raw_queries)

    def run_search(self, k: int) -> None:
        """Every raw query string through ``Index.search``."""
        index, fuser, scorer = self.index, self.fuser, self.scorer
        for text in self.queries:
            index.search(text, k, fuser, scorer)


# --------------------------------------------------------------------------- peers


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (a peer that is missing prints "not installed")."""
    import importlib.util

    return importlib.util.find_spec(module) is not None


class Bm25s:
    """bm25s, Lucene BM25 (weft's score / (k1 + 1), float32), on one backend."""

    def __init__(self, workload: Workload, backend: str) -> None:
        import bm25s

        self.backend = backend
        self.retriever: Any = bm25s.BM25(method="lucene", k1=K1, b=B, backend=backend)
        self.retriever.index(workload.doc_tokens, show_progress=False)
        self.queries = workload.query_tokens
        self.doc_keys = workload.doc_keys

    def retrieve(self, queries: list[list[str]], k: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Top-k document numbers and scores, one ``retrieve`` call, one thread."""
        documents, scores = self.retriever.retrieve(
            queries,
            k=min(k, len(self.doc_keys)),
            show_progress=False,
            n_threads=0 if self.backend == "numpy" else 1,
            backend_selection=self.backend,
        )
        return np.asarray(documents), np.asarray(scores)

    def run_each(self, k: int, limit: int | None = None) -> None:
        """One ``retrieve`` call per query (as weft-search is called); the first ``limit`` queries."""
        for query in self.queries[:limit]:
            self.retrieve([query], k)

    def run_batch(self, k: int, limit: int | None = None) -> None:
        """The queries (the first ``limit``) in one ``retrieve`` call."""
        self.retrieve(self.queries[:limit], k)

    def rankings(self, k: int) -> list[list[str]]:
        """Top-k keys per query; documents scored 0 (no query term) are dropped."""
        documents, scores = self.retrieve(self.queries, k)
        return [[self.doc_keys[int(i)] for i in row[s > 0]] for row, s in zip(documents, scores, strict=True)]


class Tantivy:
    """tantivy-py: whitespace tokenizer, BM25, a disjunction of term queries, one segment."""

    def __init__(
        self, workload: Workload, directory: Path, rows: Iterable[tuple[str, str]] | None = None
    ) -> None:
        """Index ``workload``'s documents (or ``rows`` of key and space-joined tokens) in ``directory``."""
        import tantivy

        self.tantivy: Any = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
        self.schema = builder.build()
        directory.mkdir(parents=True, exist_ok=True)
        self.index = tantivy.Index(self.schema, path=str(directory))
        writer = self.index.writer(heap_size=1_000_000_000, num_threads=1)
        if rows is None:
            rows = (
                (key, " ".join(tokens))
                for key, tokens in zip(workload.doc_keys, workload.doc_tokens, strict=True)
            )
        for key, text in rows:
            writer.add_document(tantivy.Document(key=key, body=text))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.prepared = [self.query(tokens) for tokens in workload.query_tokens]

    def query(self, tokens: Sequence[str]) -> Any:
        """The disjunction of ``tokens`` (a repeated token counts twice)."""
        query_type = self.tantivy.Query
        if not tokens:
            return query_type.empty_query()
        terms = [query_type.term_query(self.schema, "body", t, index_option="freq") for t in tokens]
        if len(terms) == 1:
            return terms[0]
        return query_type.boolean_query([(self.tantivy.Occur.Should, term) for term in terms])

    def run(self, k: int) -> None:
        """Every query: build its term disjunction, search the top k."""
        searcher = self.searcher
        for prepared in self.prepared:
            searcher.search(prepared, k, count=False)

    def rankings(self, k: int) -> list[list[str]]:
        """Top-k keys per query."""
        out = []
        for prepared in self.prepared:
            hits = self.searcher.search(prepared, k, count=False).hits
            out.append([str(self.searcher.doc(address)["key"][0]) for _, address in hits])
        return out


class Lance:
    """LanceDB: native FTS (BM25) + exact vector scan, fused by its RRFReranker."""

    def __init__(self, workload: Workload, directory: Path) -> None:
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS
        from lancedb.rerankers import RRFReranker

        assert workload.doc_vectors is not None
        vectors = workload.doc_vectors
        table = pa.table(
            {
                "key": workload.doc_keys,
                "text": [" ".join(tokens) for tokens in workload.doc_tokens],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
            }
        )
        self.table: Any = lancedb.connect(str(directory)).create_table("docs", table)
        self.table.create_index(
            "text",
            config=FTS(
                base_tokenizer="whitespace",
                lower_case=False,
                stem=False,
                remove_stop_words=False,
                ascii_folding=False,
                with_position=False,
            ),
        )
        self.reranker = RRFReranker(K=RRF_K)

    def search(self, text: str, vector: NDArray[np.float32], k: int) -> list[str]:
        """One hybrid query: the first ``k`` keys of the RRF of 100 + 100 candidates."""
        rows = (
            self.table.search(query_type="hybrid")
            .vector(vector)
            .text(text)
            .rerank(self.reranker)
            .limit(max(DEPTH, k))
            .select(["key"])
            .to_list()
        )
        return [str(row["key"]) for row in rows[:k]]

    def run_many(self, texts: Sequence[str], vectors: NDArray[np.float32], k: int) -> list[list[str]]:
        """One hybrid query per text (one call each); the keys of each."""
        return [self.search(text, vectors[i], k) for i, text in enumerate(texts)]


class Qdrant:
    """Qdrant local mode: exact dense + sparse BM25 (IDF modifier), fused by RRF (k = 60)."""

    def __init__(self, workload: Workload) -> None:
        from qdrant_client import QdrantClient, models

        assert workload.doc_vectors is not None
        self.models: Any = models
        self.client: Any = QdrantClient(":memory:")
        self.vocabulary: dict[str, int] = {}
        dim = int(workload.doc_vectors.shape[1])
        self.client.create_collection(
            "docs",
            vectors_config={"dense": models.VectorParams(size=dim, distance=models.Distance.DOT)},
            sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        avgdl = sum(len(t) for t in workload.doc_tokens) / len(workload.doc_tokens)
        points = []
        for number, tokens in enumerate(workload.doc_tokens):
            counts = Counter(tokens)
            norm = K1 * (1.0 - B + B * len(tokens) / avgdl)
            indices = [self.vocabulary.setdefault(t, len(self.vocabulary)) for t in counts]
            values = [tf * (K1 + 1.0) / (tf + norm) for tf in counts.values()]
            points.append(
                models.PointStruct(
                    id=number,
                    vector={
                        "dense": workload.doc_vectors[number].tolist(),
                        "bm25": models.SparseVector(indices=indices, values=values),
                    },
                )
            )
        self.client.upload_points("docs", points)
        self.keys = workload.doc_keys

    def search(self, tokens: Sequence[str], vector: NDArray[np.float32], k: int) -> list[str]:
        """One hybrid query: RRF of the sparse and dense top 100, the first ``k`` keys."""
        models = self.models
        counts = Counter(t for t in tokens if t in self.vocabulary)
        sparse = models.SparseVector(
            indices=[self.vocabulary[t] for t in counts], values=[float(c) for c in counts.values()]
        )
        result = self.client.query_points(
            "docs",
            prefetch=[
                models.Prefetch(query=sparse, using="bm25", limit=DEPTH),
                models.Prefetch(query=vector.tolist(), using="dense", limit=DEPTH),
            ],
            query=models.RrfQuery(rrf=models.Rrf(k=RRF_K)),
            limit=k,
        )
        return [self.keys[int(point.id)] for point in result.points]

    def bm25(self, tokens: Sequence[str], k: int) -> list[str]:
        """The sparse vector alone: Qdrant's top-k by BM25 (the smoke test checks it against weft's)."""
        counts = Counter(t for t in tokens if t in self.vocabulary)
        sparse = self.models.SparseVector(
            indices=[self.vocabulary[t] for t in counts], values=[float(c) for c in counts.values()]
        )
        result = self.client.query_points("docs", query=sparse, using="bm25", limit=k)
        return [self.keys[int(point.id)] for point in result.points]

    def run_many(
        self, queries: Sequence[Sequence[str]], vectors: NDArray[np.float32], k: int
    ) -> list[list[str]]:
        """One hybrid query per token list (one call each); the keys of each."""
        return [self.search(tokens, vectors[i], k) for i, tokens in enumerate(queries)]


# --------------------------------------------------------------------------- quality


def ndcg10(
    workload: Workload, rankings: Sequence[Sequence[str]], query_numbers: Sequence[int]
) -> float | None:
    """Mean nDCG@10 (trec_eval semantics) of ``rankings`` over the judged queries among them."""
    if workload.qrels is None:
        return None
    run: dict[str, dict[str, float]] = {}
    for number, ranking in zip(query_numbers, rankings, strict=True):
        qid = workload.query_ids[number]
        if qid in workload.qrels:
            # Scores from ranks, so the engine's own order (its tie-breaks) is what is judged.
            run[qid] = {key: float(len(ranking) - rank) for rank, key in enumerate(ranking)}
    if not run:
        return None
    # Only the judged queries asked: ``complete=True`` scores a judged query with no run as 0.
    asked = {qid: workload.qrels[qid] for qid in run}
    return float(np.mean(evaluate(asked, run, ["nDCG@10"], complete=True).values["nDCG@10"]))


def same_sets(mine: Sequence[Sequence[str]], theirs: Sequence[Sequence[str]]) -> float:
    """Fraction of queries whose two top-k lists hold the same documents (order aside)."""
    same = sum(set(a) == set(b) for a, b in zip(mine, theirs, strict=True))
    return same / max(len(mine), 1)


# --------------------------------------------------------------------------- tables


@dataclass
class Table:
    """One printed table: its rows, the load average when it was measured, notes."""

    title: str
    load: tuple[float, float, float]
    rows: list[Row]
    passes: int
    notes: list[str] = field(default_factory=list)
    #: Reference rows for the ratio columns: label of the weft scorer and search rows.
    scorer_label: str = ""
    search_label: str = ""
    #: A table with its own layout (indexing): its Markdown body and JSON records.
    custom_markdown: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)
    #: Issue 14's targets this table's figures check (also collected in the summary).
    targets: list[Target] = field(default_factory=list)
    #: Other measurements of the table (kernel statistics, RSS growth), as plain data.
    extra: dict[str, Any] = field(default_factory=dict)

    def ratio(self, label: str, row: Row) -> float | None:
        """``label``'s fastest q/s over ``row``'s (``None`` when either has no figure)."""
        mine = next((r for r in self.rows if r.label == label), None)
        if mine is None or not mine.seconds or not row.seconds or not row.best:
            return None
        return mine.best / row.best

    def as_json(self) -> dict[str, Any]:
        """The table as plain data (each row with its q/s and its ratios)."""
        rows = []
        for row in self.rows:
            data = asdict(row)
            data.update(
                qps_fastest=row.best,
                qps_median=row.median,
                qps_slowest=row.slowest,
                ratio_weft_scorer_over_row=self.ratio(self.scorer_label, row),
                ratio_weft_search_over_row=self.ratio(self.search_label, row),
            )
            rows.append(data)
        return {
            "title": self.title,
            "loadavg": list(self.load),
            "passes": self.passes,
            "rows": rows,
            "notes": self.notes,
            "targets": [t.as_json() for t in self.targets],
            "extra": self.extra,
        }

    def target_cell(self, row: Row) -> str:
        """The targets whose figure is ``row``'s, as one cell."""
        return "; ".join(t.cell() for t in self.targets if t.row == row.label)

    def markdown(self) -> str:
        """The table in Markdown, the load average above it."""
        load = ", ".join(f"{x:.2f}" for x in self.load)
        one = self.scorer_label == self.search_label  # the hybrid table: one weft reference
        lines = [
            f"### {self.title}",
            "",
            f"load average {load}; fastest of {self.passes} alternating passes (median, slowest beside it)",
            "",
            "| row | queries | q/s fastest | q/s median | q/s slowest | nDCG@10 | same top-k as weft scorer "
            f"| {self._short(self.scorer_label)} ÷ row |"
            + ("" if one else f" {self._short(self.search_label)} ÷ row |")
            + " issue 14 target (fastest ÷ fastest) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|" + ("" if one else "---:|") + "---|",
        ]

        def fmt(value: float | None, spec: str) -> str:
            return "" if value is None else format(value, spec)

        for row in self.rows:
            if row.unavailable:
                lines.append(
                    f"| {row.label} | | {row.unavailable} | | | | | |" + ("" if one else " |") + " |"
                )
                continue
            lines.append(
                f"| {row.label} | {row.n_queries:,} | {row.best:,.0f} | {row.median:,.0f} "
                f"| {row.slowest:,.0f} "
                f"| {fmt(row.ndcg10, '.4f')} | {fmt(row.same_as_weft, '.1%')} "
                f"| {fmt(self.ratio(self.scorer_label, row), '.2f')} |"
                + ("" if one else f" {fmt(self.ratio(self.search_label, row), '.2f')} |")
                + f" {self.target_cell(row)} |"
            )
        lines += ["", *(f"- {note}" for note in self.notes)]
        return "\n".join(lines)

    @staticmethod
    def _short(label: str) -> str:
        return label.replace("weft ", "weft `").replace(" (", "` (") + ("`" if "(" not in label else "")


def loadavg() -> tuple[float, float, float]:
    """``os.getloadavg()``, or zeros where there is none."""
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


# --------------------------------------------------------------------------- kernel statistics, memory


def kernel_skips(snapshot: Snapshot, scorer: BM25Scorer, queries: Sequence[Query], k: int) -> dict[str, Any]:
    """The share of postings and of blocks each query's compiled BM25 pass skipped (untimed).

    A bench-only path, no public API: ``weftsearch.scorers.bm25.lists.run`` or ``.search`` (which
    returns a ``KernelStats`` beside the results ``BM25Scorer.score`` keeps) is wrapped
    for the duration, and every query goes through ``scorer.score`` as a user's would.
    Where ``score`` takes its numpy path (snapshots below its compiled threshold), the
    scorer's compiled method is called instead, so the figures say what the kernel
    would skip there (``path`` tells which). Returns ``{"unavailable": reason}`` when
    the kernel is not built or its interface is not the one expected.
    """
    try:
        from weftsearch.native import bm25 as kernel
        from weftsearch.scorers.bm25 import lists as bm25_lists
    except ImportError as error:  # pragma: no cover - the modules ship with the package
        return {"unavailable": f"no BM25 kernel modules ({error})"}
    library = kernel.compiled_bm25() if hasattr(kernel, "compiled_bm25") else None
    if library is None or not (hasattr(bm25_lists, "search") or hasattr(bm25_lists, "run")):
        return {"unavailable": "compiled BM25 kernel not built (or WEFTSEARCH_NO_COMPILED_BM25 set)"}
    # The scorer's one-call path (``run``, issue 31) and the older ``search``: both return the
    # KernelStats third; whichever the installed version has is wrapped.
    # ``run_kept`` (a repeated text's kept set-up) returns the kernel's statistics as a list in
    # KernelStats' order, not as a KernelStats.
    names = ("run", "run_kept", "search")
    originals = {name: getattr(bm25_lists, name) for name in names if hasattr(bm25_lists, name)}
    seen: list[Any] = []

    def spying(original: Any) -> Any:
        def spy(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            stats = result[2]
            seen.append(kernel.KernelStats(*stats[:5]) if isinstance(stats, list) else stats)
            return result

        return spy

    compiled: Any = getattr(scorer, "_score_compiled", None)
    per_query: list[tuple[int, int, int, int, int]] = []
    path = "BM25Scorer.score (compiled: its own path on this snapshot)"
    for name, original in originals.items():
        setattr(bm25_lists, name, spying(original))
    try:
        for query in queries:
            before = len(seen)
            scorer.score(snapshot, query, k)
            if len(seen) == before and compiled is not None:
                path = "kernel called through the scorer's compiled method (score() runs numpy here)"
                compiled(library, snapshot, query, k)
            stats = seen[-1] if len(seen) > before else None
            if stats is not None:
                per_query.append(
                    tuple(
                        int(getattr(stats, name, 0))
                        for name in (
                            "blocks",
                            "blocks_scored",
                            "postings",
                            "postings_scored",
                            "documents_scored",
                        )
                    )  # type: ignore[arg-type]
                )
    except Exception as error:
        return {"unavailable": f"kernel statistics failed: {type(error).__name__}: {error}"}
    finally:
        for name, original in originals.items():
            setattr(bm25_lists, name, original)
    counted = [q for q in per_query if q[0] > 0 and q[2] > 0]
    if not counted:
        return {"unavailable": "no query reached the compiled kernel"}
    blocks_skipped = [1.0 - q[1] / q[0] for q in counted]
    postings_skipped = [1.0 - q[3] / q[2] for q in counted]
    return {
        "path": path,
        "queries": len(counted),
        "blocks_skipped_mean": statistics.fmean(blocks_skipped),
        "blocks_skipped_median": statistics.median(blocks_skipped),
        "postings_skipped_mean": statistics.fmean(postings_skipped),
        "postings_skipped_median": statistics.median(postings_skipped),
        "blocks_skipped_total": 1.0 - sum(q[1] for q in counted) / sum(q[0] for q in counted),
        "postings_skipped_total": 1.0 - sum(q[3] for q in counted) / sum(q[2] for q in counted),
        "documents_scored_mean": statistics.fmean(q[4] for q in counted),
    }


def skips_note(label: str, skips: dict[str, Any]) -> str:
    """One table note from :func:`kernel_skips`."""
    if "unavailable" in skips:
        return f"skipped by {label}: not measured ({skips['unavailable']})"
    return (
        f"skipped by {label} ({skips['queries']:,} queries; {skips['path']}): postings "
        f"{skips['postings_skipped_mean']:.1%} a query on average "
        f"(median {skips['postings_skipped_median']:.1%}, "
        f"{skips['postings_skipped_total']:.1%} of all), blocks {skips['blocks_skipped_mean']:.1%} "
        f"(median {skips['blocks_skipped_median']:.1%}, {skips['blocks_skipped_total']:.1%} of all); "
        f"{skips['documents_scored_mean']:,.0f} documents fully scored a query"
    )


def proc_status_kib(field_name: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``, ``RssAnon``...), 0 where absent."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def rss_growth(weft: Weft, workload: Workload, n_queries: int, k: int = 10) -> dict[str, Any]:
    """Resident memory before and after ``n_queries`` distinct ``Index.search`` calls (untimed).

    The queries are drawn from the corpus's own tokens (``synthetic_corpus.distinct_queries``),
    pairwise distinct, so every per-term or per-query cache is asked to grow. ``RssAnon``
    (memory the process owns: caches) is what the target is checked on; ``VmRSS`` also
    counts the pages of the index's memory map the queries touched (file pages, shared
    and reclaimable), printed beside it.
    """
    queries = [Query(" ".join(tokens)) for tokens in distinct_queries(workload.doc_tokens, n_queries)]
    weft.run_search(k, weft.queries[:100])  # the code paths warm before the first reading
    gc.collect()
    anon0, rss0 = proc_status_kib("RssAnon"), proc_status_kib("VmRSS")
    peak_anon = 0
    index, fuser, scorer = weft.index, weft.fuser, weft.scorer
    step = max(1, n_queries // 10)
    start = time.perf_counter()
    for number, query in enumerate(queries, start=1):
        index.search(query, k, fuser, scorer)
        if number % step == 0:
            peak_anon = max(peak_anon, proc_status_kib("RssAnon") - anon0)
    seconds = time.perf_counter() - start
    gc.collect()
    anon1, rss1 = proc_status_kib("RssAnon"), proc_status_kib("VmRSS")
    return {
        "queries": n_queries,
        "k": k,
        "rss_anon_growth_mb": (anon1 - anon0) / 1024,
        "rss_anon_growth_peak_mb": max(peak_anon, anon1 - anon0) / 1024,
        "vm_rss_growth_mb": (rss1 - rss0) / 1024,
        "rss_anon_before_mb": anon0 / 1024,
        "vm_rss_before_mb": rss0 / 1024,
        "seconds": seconds,
    }


def memory_table(workload: Workload, growth: dict[str, Any], load: tuple[float, float, float]) -> Table:
    """The RSS growth as a small table with its target."""
    n = len(workload.doc_keys)
    title = (
        f"{workload.name}: RSS growth over {growth['queries']:,} distinct Index.search queries "
        f"(top-{growth['k']})"
    )
    table = Table(title, load, [], 1)
    table.custom_markdown = "\n".join(
        [
            "| documents | queries | RssAnon growth MB (end) | RssAnon growth MB (largest reading) "
            "| VmRSS growth MB | RssAnon before MB | seconds |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {n:,} | {growth['queries']:,} | {growth['rss_anon_growth_mb']:+,.1f} "
            f"| {growth['rss_anon_growth_peak_mb']:+,.1f} | {growth['vm_rss_growth_mb']:+,.1f} "
            f"| {growth['rss_anon_before_mb']:,.0f} | {growth['seconds']:.1f} |",
        ]
    )
    table.records = [growth]
    table.extra = {"rss_growth": growth}
    table.notes = [
        "RssAnon: memory the process owns (caches); VmRSS adds the index's memory-mapped pages "
        "the queries touched",
        f"load average after: {', '.join(f'{x:.2f}' for x in loadavg())}",
    ]
    at_1m = "" if n >= 1_000_000 else f" (the target is stated for 1M documents; this corpus has {n:,})"
    table.targets = [
        Target(
            "RSS growth over 10,000 distinct queries",
            workload.name,
            growth["rss_anon_growth_peak_mb"],
            100.0,
            at_least=False,
            unit="MB",
            detail=(
                f"{growth['queries']:,} queries, RssAnon; VmRSS {growth['vm_rss_growth_mb']:+,.1f} MB{at_1m}"
            ),
        )
    ]
    return table


# --------------------------------------------------------------------------- the BM25 tables


SCORER = "weft BM25Scorer.score"
SEARCH = "weft Index.search (1 thread)"


def bm25_targets(workload: Workload, k: int, rows: dict[str, Row], split_label: str | None) -> list[Target]:
    """Issue 14's BM25 targets on this table's rows (see "Targets" in issue 14).

    On every corpus: ``Index.search`` >= 1.0x tantivy one call per query; two threads
    >= 1.6x one thread (concurrent ``search``, and ``search_many``); 10 segments >= 0.8x
    one segment. On SciFact: the scorer >= 1.0x bm25s numba one call per query, and
    ``search_many`` (one thread) >= 1.0x bm25s numba batch. On a corpus of 1M documents
    or more, at top-10: the scorer >= 2.0x bm25s numba one call per query.
    """
    corpus = f"{workload.name}, top-{k}"
    n_docs = len(workload.doc_keys)
    targets = [
        ratio_target(
            "Index.search (one BM25 stream) ÷ tantivy one call",
            corpus,
            rows,
            SEARCH,
            "tantivy, one call per query",
            1.0,
        ),
        ratio_target(
            "Index.search 2 threads ÷ 1 thread (aggregate q/s)",
            corpus,
            rows,
            "weft Index.search (2 threads)",
            SEARCH,
            1.6,
        ),
        ratio_target(
            "Index.search_many threads=2 ÷ threads=1 (aggregate q/s)",
            corpus,
            rows,
            "weft Index.search_many (threads=2)",
            "weft Index.search_many (threads=1)",
            1.6,
        ),
    ]
    if split_label is not None:
        targets.append(
            ratio_target("Index.search, 10 segments ÷ 1 segment", corpus, rows, split_label, SEARCH, 0.8)
        )
    if workload.name == "SciFact":
        targets.append(
            ratio_target(
                "BM25Scorer.score ÷ bm25s numba one call",
                corpus,
                rows,
                SCORER,
                "bm25s numba, one call per query",
                1.0,
            )
        )
        targets.append(
            ratio_target(
                "Index.search_many (threads=1) ÷ bm25s numba batch",
                corpus,
                rows,
                "weft Index.search_many (threads=1)",
                "bm25s numba, batch",
                1.0,
            )
        )
    if n_docs >= 1_000_000 and k == 10:
        targets.append(
            ratio_target(
                "BM25Scorer.score ÷ bm25s numba one call (early termination)",
                corpus,
                rows,
                SCORER,
                "bm25s numba, one call per query",
                2.0,
            )
        )
    return targets


def bm25_tables(
    workload: Workload,
    ks: Sequence[int],
    passes: int,
    *,
    peers: Sequence[str] = ("bm25s", "tantivy"),
    threads: Sequence[int] = (1, 2),
    segments: int = 10,
    numpy_queries: int | None = None,
    rss_queries: int = 0,
) -> list[Table]:
    """Time every BM25 row on ``workload`` at each k; one table per k.

    ``segments`` > 1 adds ``Index.search`` on the same documents committed in that many
    segments (issue 14's target: >= 0.8x the one-segment q/s); 0 or 1 leaves it out.
    ``numpy_queries`` times bm25s numpy (which scores every document of a query term) on
    that many queries only. ``rss_queries`` > 0 adds, after the timed passes, the RSS
    growth of the one-segment index over that many distinct queries (its own table).
    Each table also carries the share of postings and blocks the compiled BM25 pass
    skipped (:func:`kernel_skips`) and the targets of issue 14 its figures check.
    """
    tables = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="weft-bench-") as tmp:
        weft = Weft(workload, Path(tmp) / "weft", with_vectors=False)
        split = (
            Weft(workload, Path(tmp) / "split", with_vectors=False, segments=segments)
            if segments > 1
            else None
        )
        split_label = f"weft Index.search ({segments} segments)"
        raw = WeftRaw(workload, Path(tmp) / "raw") if workload.raw_queries is not None else None
        numba = (
            Bm25s(workload, "numba")
            if "bm25s" in peers and installed("numba") and installed("bm25s")
            else None
        )
        numpy_ = Bm25s(workload, "numpy") if "bm25s" in peers and installed("bm25s") else None
        tantivy = (
            Tantivy(workload, Path(tmp) / "tantivy") if "tantivy" in peers and installed("tantivy") else None
        )
        n = len(workload.query_tokens)
        numpy_n = n if numpy_queries is None else min(n, numpy_queries)
        setup_seconds = time.perf_counter() - started
        for k in ks:
            arms: list[Arm] = [
                Arm(SCORER, "weft", partial(weft.run_scorer, k), n),
                Arm(SEARCH, "weft", partial(weft.run_search, k), n),
            ]
            unavailable: list[Row] = []
            for t in threads:
                if t != 1:
                    arms.append(
                        Arm(
                            f"weft Index.search ({t} threads)",
                            "weft",
                            partial(weft.run_search_threads, k, t),
                            n,
                        )
                    )
            if split is not None:
                arms.append(Arm(split_label, "weft", partial(split.run_search, k), n))
            for t in threads:
                label = f"weft Index.search_many (threads={t})"
                if has_search_many():
                    arms.append(Arm(label, "weft", partial(weft.run_search_many, k, t), n))
                else:
                    unavailable.append(
                        Row(label, "weft", n, unavailable="not available (no Index.search_many)")
                    )
            if raw is not None:
                arms.append(
                    Arm(
                        "weft Index.search, raw text (english analysis)",
                        "weft",
                        partial(raw.run_search, k),
                        n,
                    )
                )
            peer_rows: list[tuple[str, Callable[[], object] | None, str]] = [
                (
                    "bm25s numba, one call per query",
                    None if numba is None else (partial(numba.run_each, k)),
                    "bm25s/numba",
                ),
                (
                    "bm25s numba, batch",
                    None if numba is None else (partial(numba.run_batch, k)),
                    "bm25s/numba",
                ),
                (
                    "bm25s numpy, one call per query",
                    None if numpy_ is None else (partial(numpy_.run_each, k, numpy_n)),
                    "bm25s",
                ),
                (
                    "bm25s numpy, batch",
                    None if numpy_ is None else (partial(numpy_.run_batch, k, numpy_n)),
                    "bm25s",
                ),
                (
                    "tantivy, one call per query",
                    None if tantivy is None else (partial(tantivy.run, k)),
                    "tantivy",
                ),
            ]
            for label, run, package in peer_rows:
                if run is None:
                    unavailable.append(Row(label, "peer", n, unavailable=f"{package} {NOT_INSTALLED}"))
                else:
                    arms.append(Arm(label, "peer", run, numpy_n if "numpy" in label else n))
            load = loadavg()
            timed_from = time.perf_counter()
            rows = measure(arms, passes)
            # Quality and agreement, untimed.
            everyone = list(range(n))
            mine = weft.rankings(k)
            rankings: dict[str, list[list[str]]] = {SCORER: mine, SEARCH: weft.search_rankings(k)}
            if split is not None:
                rankings[split_label] = split.search_rankings(k)
            if numba is not None:
                rankings["bm25s numba, one call per query"] = rankings["bm25s numba, batch"] = numba.rankings(
                    k
                )
            if numpy_ is not None and numpy_n == n:
                rankings["bm25s numpy, one call per query"] = rankings["bm25s numpy, batch"] = (
                    numpy_.rankings(k)
                )
            if tantivy is not None:
                rankings["tantivy, one call per query"] = tantivy.rankings(k)
            for label, ranking in rankings.items():
                rows[label].ndcg10 = ndcg10(workload, ranking, everyone)
                rows[label].same_as_weft = same_sets(mine, ranking)
            ordered = [rows[a.label] for a in arms] + unavailable
            notes = [
                f"load average after the passes: {', '.join(f'{x:.2f}' for x in loadavg())}",
                "same top-k: bm25s's float32 scores and tantivy's one-byte lengths break near ties "
                "differently; nDCG@10 only where the corpus is judged",
            ]
            notes.append(
                f"wall time: building every engine {setup_seconds:,.0f} s (once for all k), "
                f"this table's passes and checks {time.perf_counter() - timed_from:,.0f} s"
            )
            if numpy_ is not None and numpy_n < n:
                notes.append(
                    f"bm25s numpy rows timed on the first {numpy_n:,} queries (it scores every document)"
                )
            extra: dict[str, Any] = {
                "skips": {"1 segment": kernel_skips(weft.snapshot, weft.scorer, weft.queries, k)}
            }
            notes.append(skips_note("BM25Scorer.score, 1 segment", extra["skips"]["1 segment"]))
            if split is not None:
                extra["skips"][f"{segments} segments"] = kernel_skips(
                    split.snapshot, split.scorer, split.queries, k
                )
                notes.append(
                    skips_note(
                        f"BM25Scorer.score, {segments} segments", extra["skips"][f"{segments} segments"]
                    )
                )
            table = Table(
                f"{workload.name}: {len(workload.doc_keys):,} documents, {n:,} queries, top-{k}, BM25",
                load,
                ordered,
                passes,
                notes=notes,
                scorer_label=SCORER,
                search_label=SEARCH,
                extra=extra,
            )
            table.targets = bm25_targets(workload, k, rows, split_label if split is not None else None)
            tables.append(table)
        if rss_queries > 0:
            load = loadavg()
            tables.append(memory_table(workload, rss_growth(weft, workload, rss_queries), load))
        weft.close()
        if split is not None:
            split.close()
        if raw is not None:
            raw.index.close()
    return tables


# --------------------------------------------------------------------------- the hybrid table


def hybrid_tables(
    workload: Workload, ks: Sequence[int], passes: int, slow_queries: int, ndcg_queries: int | None = None
) -> list[Table]:
    """weft hybrid against LanceDB and Qdrant local on the judged queries, at each k.

    ``ndcg_queries`` computes every arm's nDCG@10 on the first that many judged queries
    only (``--quick``: Qdrant's local mode answers a few queries a second); the target
    "nDCG@10 unchanged" is always checked on weft's nDCG@10 over every judged query.
    """
    assert workload.qrels is not None and workload.query_vectors is not None
    everything = [i for i, qid in enumerate(workload.query_ids) if qid in workload.qrels]
    judged = everything[:ndcg_queries] if ndcg_queries else everything
    slow = judged[:slow_queries]
    tables: list[Table] = []
    if not judged:
        return tables
    with tempfile.TemporaryDirectory(prefix="weft-bench-hybrid-") as tmp:
        weft = Weft(workload, Path(tmp) / "weft")
        queries = [weft.hybrid[i] for i in everything]
        lance = Lance(workload, Path(tmp) / "lance") if installed("lancedb") else None
        qdrant = Qdrant(workload) if installed("qdrant_client") else None
        vectors = workload.query_vectors
        texts = [" ".join(t) for t in workload.query_tokens]
        quality: dict[str, float | None] = {}
        # nDCG@10 once per engine over every judged query (untimed): top-10 is the same
        # prefix of every engine's depth-100 fusion whatever k the table shows.
        weft_label, lance_label, qdrant_label = (
            "weft Index.search, BM25 + vector, RRF, depth 100",
            "LanceDB hybrid (FTS BM25 + flat vector, RRFReranker)",
            "Qdrant local (sparse BM25 + dense, RRF k=60)",
        )
        exact_label = "weft Index.search, BM25 + exact vector scan (nprobe=None), RRF, depth 100"
        exact = VectorScorer(nprobe=None)
        quality[weft_label] = ndcg10(workload, weft.run_hybrid(10, queries[: len(judged)]), judged)
        quality[exact_label] = ndcg10(workload, weft.run_hybrid(10, queries[: len(judged)], exact), judged)
        weft_all = ndcg10(workload, weft.run_hybrid(10, queries), everything)
        if lance is not None:
            ranked = lance.run_many([texts[i] for i in judged], vectors[judged], 10)
            quality[lance_label] = ndcg10(workload, ranked, judged)
        if qdrant is not None:
            ranked = qdrant.run_many([workload.query_tokens[i] for i in judged], vectors[judged], 10)
            quality[qdrant_label] = ndcg10(workload, ranked, judged)
        for k in ks:
            arms = [
                Arm(weft_label, "weft", partial(weft.run_hybrid, k, queries), len(queries)),
                Arm(exact_label, "weft", partial(weft.run_hybrid, k, queries, exact), len(queries)),
            ]
            unavailable = []
            if lance is not None:
                arms.append(
                    Arm(
                        lance_label,
                        "peer",
                        partial(lance.run_many, [texts[i] for i in slow], vectors[slow], k),
                        len(slow),
                    )
                )
            else:
                unavailable.append(Row(lance_label, "peer", 0, unavailable=f"lancedb {NOT_INSTALLED}"))
            if qdrant is not None:
                arms.append(
                    Arm(
                        qdrant_label,
                        "peer",
                        partial(qdrant.run_many, [workload.query_tokens[i] for i in slow], vectors[slow], k),
                        len(slow),
                    )
                )
            else:
                unavailable.append(Row(qdrant_label, "peer", 0, unavailable=f"qdrant-client {NOT_INSTALLED}"))
            load = loadavg()
            rows = measure(arms, passes)
            for label, row in rows.items():
                row.ndcg10 = quality.get(label)
            targets: list[Target] = []
            if k == 10:
                mine = rows[weft_label]
                qps_ratio = mine.best / HYBRID_BASELINE_QPS
                per_round = [mine.n_queries / sec / HYBRID_BASELINE_QPS for sec in mine.seconds]
                targets.append(
                    Target(
                        f"hybrid Index.search q/s ÷ before issue 14 ({HYBRID_BASELINE_QPS:,.0f} q/s)",
                        f"{workload.name}, top-10",
                        qps_ratio,
                        2.0,
                        spread=(min(per_round), max(per_round)),
                        row=weft_label,
                        detail="the baseline is the issue's own run, not re-measured here",
                    )
                )
                got = weft_all
                if workload.name == "SciFact" and got is not None:
                    targets.append(
                        Target(
                            f"hybrid nDCG@10 unchanged (|measured - {HYBRID_BASELINE_NDCG10:.4f}|)",
                            f"{workload.name}, judged queries",
                            abs(got - HYBRID_BASELINE_NDCG10),
                            0.0005,
                            at_least=False,
                            unit="nDCG@10",
                            detail=f"measured {got:.4f}",
                        )
                    )
            tables.append(
                Table(
                    f"{workload.name} hybrid: {len(workload.doc_keys):,} documents, judged queries, top-{k}",
                    load,
                    [rows[a.label] for a in arms] + unavailable,
                    passes,
                    notes=[
                        f"load average after the passes: {', '.join(f'{x:.2f}' for x in loadavg())}",
                        f"weft timed on the {len(queries)} judged queries, the peers on the first "
                        f"{len(slow)} of them; nDCG@10 over the first {len(judged)} of the {len(everything)} "
                        "judged queries for every row (one untimed run)",
                    ],
                    scorer_label=weft_label,
                    search_label=weft_label,
                    targets=targets,
                )
            )
        weft.close()
    return tables


# --------------------------------------------------------------------------- indexing


@dataclass
class Build:
    """One engine's indexing runs, each in a child process."""

    engine: str
    docs: int
    seconds: list[float] = field(default_factory=list)
    #: Peak RSS of each build: the launcher's ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` (the build
    #: child and the descendants it waited for, e.g. weft-search's forked encoder), MiB.
    maxrss_mb: list[float] = field(default_factory=list)
    #: The build process's own ``VmHWM`` (``/proc/self/status``) at its end, MiB.
    vmhwm_mb: list[float] = field(default_factory=list)
    bytes_on_disk: int = 0
    unavailable: str = ""

    @property
    def docs_per_second(self) -> float:
        """Documents per second of the fastest add + commit (0.0 without builds)."""
        return self.docs / min(self.seconds) if self.seconds and min(self.seconds) > 0 else 0.0

    @property
    def median_docs_per_second(self) -> float:
        """Documents per second of the median build."""
        return self.docs / statistics.median(self.seconds) if self.seconds else 0.0

    @property
    def slowest_docs_per_second(self) -> float:
        """Documents per second of the slowest build."""
        return self.docs / max(self.seconds) if self.seconds and max(self.seconds) > 0 else 0.0

    @property
    def peak_mb(self) -> float:
        """The largest peak RSS over the builds (child and its descendants), MiB."""
        return max([*self.maxrss_mb, *self.vmhwm_mb], default=0.0)


#: The build arms: engine name in the child, module that must be importable.
BUILD_ENGINES = (
    ("weft", "weftsearch"),
    ("weft-no-text", "weftsearch"),
    ("bm25s", "bm25s"),
    ("tantivy", "tantivy"),
)
#: The raw-text build arms (SciFact): each engine runs its own English analysis inside the
#: clock (weft's ``english`` analyzer; ``bm25s.tokenize`` with English stopwords and the
#: PyStemmer stemmer; tantivy's ``en_stem`` tokenizer), as ``bench/ingest.py`` builds.
RAW_ENGINES = (
    ("weft english", "weftsearch"),
    ("bm25s english", "Stemmer"),
    ("tantivy en_stem", "tantivy"),
)


def create_options() -> dict[str, Any]:
    """``Index.create`` options every build of this script passes: the commit's encoder child
    at normal priority where the option exists (as ``weft-search index`` runs it).

    The library's default, the idle scheduling class, lets every other process on a busy
    machine run first: under load, a build would measure the other jobs, not weft-search.
    """
    if "commit_priority" in inspect.signature(Index.create).parameters:
        return {"commit_priority": "normal"}
    return {}


def store_text_option() -> str | None:
    """Where this weft-search takes ``store_text`` (``"create"`` for ``Index.create``), or ``None``.

    Feature-detected so the script runs on trees with and without the option
    (issue 14 item 7: an index without the stored document text).
    """
    if "store_text" in inspect.signature(Index.create).parameters:
        return "create"
    return None


def write_tokens(workload: Workload, path: Path) -> None:
    """The corpus as the build children read it: ``key<TAB>space-joined tokens`` per line."""
    with path.open("w", encoding="utf-8") as handle:
        for key, tokens in zip(workload.doc_keys, workload.doc_tokens, strict=True):
            handle.write(f"{key}\t{' '.join(tokens)}\n")


def read_lines(path: Path) -> tuple[list[str], list[str]]:
    """What :func:`write_tokens` wrote: the keys and the space-joined token strings."""
    keys: list[str] = []
    texts: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            key, _, text = line.rstrip("\n").partition("\t")
            keys.append(key)
            texts.append(text)
    return keys, texts


def build_child(engine: str, corpus: Path, directory: Path) -> dict[str, Any]:
    """In the child: read the token file ``corpus``, time ``engine``'s add + commit into ``directory``.

    Every engine gets the lines (key, space-joined tokens) read before the clock starts,
    as the load-only child (``none``) does; weft-search and tantivy are fed one document
    at a time from them (weft through a generator, so its peak RSS is its own), bm25s gets
    token lists split before the clock (its API takes lists; the strings are interned so
    the lists cost 8 bytes a token).
    """
    keys, texts = read_lines(corpus)
    n = len(keys)
    tokens: list[list[str]] = []
    if engine == "bm25s":
        vocabulary: dict[str, str] = {}
        tokens = [[vocabulary.setdefault(t, t) for t in text.split()] for text in texts]
        del vocabulary
    gc.collect()
    start = time.perf_counter()
    if engine in ("weft", "weft-no-text"):
        options = create_options() | ({"store_text": False} if engine == "weft-no-text" else {})
        # The built-in "whitespace" analyzer (text.split(), counted in one compiled pass), as
        # tantivy's arm reads the same space-joined tokens with its whitespace tokenizer.
        index = Index.create(directory, "whitespace", **options)
        index.add_many((Document(key, text) for key, text in zip(keys, texts, strict=True)), progress=False)
        index.commit()
        index.close()
    elif engine == "bm25s":
        import bm25s

        retriever: Any = bm25s.BM25(method="lucene", k1=K1, b=B)
        retriever.index(tokens, show_progress=False)
        retriever.save(str(directory))
    elif engine == "tantivy":
        Tantivy(Workload("build", [], [], [], []), directory, rows=zip(keys, texts, strict=True))
    elif engine == "weft english":
        index = Index.create(directory, "english", **create_options())
        index.add_many((Document(key, text) for key, text in zip(keys, texts, strict=True)), progress=False)
        index.commit()
        index.close()
    elif engine == "bm25s english":
        import bm25s
        import Stemmer

        analysed = bm25s.tokenize(
            texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False
        )
        retriever = bm25s.BM25(method="lucene", k1=K1, b=B)
        retriever.index(analysed, show_progress=False)
        retriever.save(str(directory))
    elif engine == "tantivy en_stem":
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_text_field("body", stored=False, tokenizer_name="en_stem", index_option="freq")
        writer = tantivy.Index(builder.build(), path=str(directory)).writer(
            heap_size=1_000_000_000, num_threads=1
        )
        for key, text in zip(keys, texts, strict=True):
            writer.add_document(tantivy.Document(key=key, body=text))
        writer.commit()
        writer.wait_merging_threads()
    elif engine != "none":
        raise SystemExit(f"unknown engine {engine!r}")
    seconds = time.perf_counter() - start if engine != "none" else 0.0
    return {"docs": n, "seconds": seconds, "vmhwm_kib": proc_status_kib("VmHWM")}


#: Runs its arguments as a child process and prints the child's peak RSS (KiB) as its last line.
LAUNCHER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def measure_build(engine: str, corpus: Path, build: Build) -> None:
    """Run one build of ``engine`` in a fresh child process; add its figures to ``build``.

    The build child's parent is a bare launcher interpreter that waits for it alone, so
    ``RUSAGE_CHILDREN`` there is that child's peak resident set, including the descendants
    it waited for (weft-search's forked encoder); the child also reports its own
    ``VmHWM``. (A child forked from this large process would carry its resident set in
    its high-water mark up to the exec, hence the launcher.)
    """
    with tempfile.TemporaryDirectory(prefix="weft-bench-build-") as tmp:
        directory = Path(tmp) / engine
        directory.mkdir()
        out = Path(tmp) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--build-child", engine, str(corpus)]
        command += ["--build-dir", str(directory), "--build-out", str(out)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        launcher = subprocess.run(
            [sys.executable, "-S", "-c", LAUNCHER, *command], env=env, stdout=subprocess.PIPE, text=True
        )
        if launcher.returncode != 0:
            raise RuntimeError(f"build child {engine} on {corpus} failed with {launcher.returncode}")
        result = json.loads(out.read_text(encoding="utf-8"))
        build.docs = int(result["docs"])
        build.seconds.append(float(result["seconds"]))
        build.maxrss_mb.append(int(launcher.stdout.split()[-1]) / 1024)  # ru_maxrss is KiB on Linux
        build.vmhwm_mb.append(int(result.get("vmhwm_kib", 0)) / 1024)
        build.bytes_on_disk = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def index_table(workload: Workload, passes: int = 1) -> Table:
    """Indexing docs/s, peak RSS and size on disk: weft-search (with and without stored text)
    against bm25s and tantivy, ``passes`` builds of each in round-robin order.
    """
    load = loadavg()
    started = time.perf_counter()
    n_docs = len(workload.doc_keys)
    builds: dict[str, Build] = {}
    raw = workload.raw_docs is not None
    with tempfile.TemporaryDirectory(prefix="weft-bench-corpus-") as tmp:
        corpus = Path(tmp) / "corpus.tsv"
        write_tokens(workload, corpus)
        raw_corpus = Path(tmp) / "raw.tsv"
        if workload.raw_docs is not None:
            with raw_corpus.open("w", encoding="utf-8") as handle:
                for key, text in zip(workload.doc_keys, workload.raw_docs, strict=True):
                    handle.write(f"{key}\t{' '.join(text.split())}\n")  # no tab or newline inside
        baseline = Build("load only", n_docs)
        measure_build("none", corpus, baseline)
        engines: list[tuple[str, Path]] = []
        for engine, module in BUILD_ENGINES + (RAW_ENGINES if raw else ()):
            if engine == "weft-no-text" and store_text_option() is None:
                builds[engine] = Build(engine, n_docs, unavailable="no store_text option in this weft-search")
            elif not installed(module) or (module == "Stemmer" and not installed("bm25s")):
                package = "PyStemmer/bm25s" if module == "Stemmer" else module
                builds[engine] = Build(engine, n_docs, unavailable=f"{package} {NOT_INSTALLED}")
            else:
                builds[engine] = Build(engine, n_docs)
                engines.append((engine, raw_corpus if engine in dict(RAW_ENGINES) else corpus))
        for number in range(passes):  # round-robin, the order reversed every other round
            for engine, path in engines if number % 2 == 0 else reversed(engines):
                measure_build(engine, path, builds[engine])
    weft = builds["weft"]
    title = f"Indexing {workload.name}, {n_docs:,} documents: add + commit on disk, pre-analysed tokens"
    if raw:
        title += " (and raw text, each engine's English analysis)"
    table = Table(title, load, [], passes)
    lines = [
        "| engine | docs/s fastest | median | slowest | weft ÷ engine (docs/s) "
        "| peak RSS MB (above load-only) | build VmHWM MB | on disk MB | weft ÷ engine (disk) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = baseline.peak_mb
    records = []
    for build in builds.values():
        if build.unavailable:
            lines.append(f"| {build.engine} | {build.unavailable} | | | | | | | |")
            records.append(asdict(build))
            continue
        mine = builds["weft english"] if build.engine in dict(RAW_ENGINES) else weft
        speed = mine.docs_per_second / build.docs_per_second if build.docs_per_second else float("nan")
        disk = mine.bytes_on_disk / build.bytes_on_disk if build.bytes_on_disk else float("nan")
        lines.append(
            f"| {build.engine} | {build.docs_per_second:,.0f} | {build.median_docs_per_second:,.0f} "
            f"| {build.slowest_docs_per_second:,.0f} | {speed:.2f} "
            f"| {build.peak_mb:,.0f} ({build.peak_mb - base:+,.0f}) | {max(build.vmhwm_mb, default=0):,.0f} "
            f"| {build.bytes_on_disk / 1e6:,.1f} | {disk:.2f} |"
        )
        records.append(
            asdict(build)
            | {
                "docs_per_second": build.docs_per_second,
                "docs_per_second_median": build.median_docs_per_second,
                "docs_per_second_slowest": build.slowest_docs_per_second,
                "peak_mb": build.peak_mb,
                "weft_over_engine_docs_s": speed,
                "weft_over_engine_disk": disk,
            }
        )
    table.notes = [
        f"{passes} build(s) of each engine, round-robin; load-only child (token file read, modules imported, "
        f"nothing built): peak RSS {base:,.0f} MB",
        "every build child reads the corpus lines before its clock starts (the load-only child too); "
        "peak RSS: the launcher's RUSAGE_CHILDREN maxrss (the build and the processes it waited for, "
        "weft's forked encoder included); VmHWM: the build process alone",
        "raw-text rows (SciFact only): each engine's own English analysis inside the clock (weft `english`, "
        "bm25s.tokenize with English stopwords and PyStemmer, tantivy `en_stem`), their ratios against "
        "`weft english`",
        "weft's commit encoder runs at normal priority (commit_priority='normal', as `weft-search index` "
        "runs it); bm25s's on-disk size is its saved index (retriever.save); weft stores the document text "
        "(weft-no-text: store_text=False), tantivy only the key",
        f"load average after the builds: {', '.join(f'{x:.2f}' for x in loadavg())}; "
        f"wall time of this table {time.perf_counter() - started:,.0f} s",
    ]
    table.custom_markdown = "\n".join(lines)
    table.records = records
    table.targets = index_targets(workload, builds)
    return table


def index_targets(workload: Workload, builds: dict[str, Build]) -> list[Target]:
    """Issue 14's indexing targets: docs/s against bm25s and tantivy; at 1M, disk and peak RSS."""
    corpus = f"{workload.name}, indexing"
    weft = builds["weft"]
    n_docs = len(workload.doc_keys)
    targets = []
    pairs = [("weft", "bm25s", 1.0, "pre-analysed"), ("weft", "tantivy", 0.7, "pre-analysed")]
    if "weft english" in builds:
        pairs += [
            ("weft english", "bm25s english", 1.0, "raw text"),
            ("weft english", "tantivy en_stem", 0.7, "raw text"),
        ]
    for mine_name, engine, needed, kind in pairs:
        mine, other = builds[mine_name], builds[engine]
        name = f"indexing docs/s ÷ {engine.split()[0]} ({kind})"
        if mine.unavailable or other.unavailable or not other.seconds or not mine.seconds:
            reason = mine.unavailable or other.unavailable or "no build"
            targets.append(Target(name, corpus, None, needed, row=mine_name, detail=reason))
            continue
        per_round = [other_s / mine_s for mine_s, other_s in zip(mine.seconds, other.seconds, strict=False)]
        targets.append(
            Target(
                name,
                corpus,
                mine.docs_per_second / other.docs_per_second,
                needed,
                spread=(min(per_round), max(per_round)),
                row=mine_name,
            )
        )
    if workload.name != "SciFact":
        at_1m = "" if n_docs >= 1_000_000 else f" (stated for 1M documents; this corpus has {n_docs:,})"
        tantivy = builds["tantivy"]
        for engine, label in (("weft", "text stored"), ("weft-no-text", "store_text=False")):
            build = builds[engine]
            value = (
                build.bytes_on_disk / tantivy.bytes_on_disk
                if build.seconds and tantivy.seconds and tantivy.bytes_on_disk
                else None
            )
            reason = build.unavailable or tantivy.unavailable
            targets.append(
                Target(
                    f"index on disk ÷ tantivy ({label})",
                    corpus,
                    value,
                    2.0,
                    at_least=False,
                    detail="; ".join(part for part in (reason, at_1m.strip()) if part),
                )
            )
        targets.append(
            Target(
                "peak build RSS (weft, text stored)",
                corpus,
                weft.peak_mb if weft.seconds else None,
                2000.0,
                at_least=False,
                unit="MB",
                detail="2 GB read as 2,000 MiB" + (f"; {at_1m.strip()}" if at_1m else ""),
            )
        )
    return targets


# --------------------------------------------------------------------------- report


def version_of(distribution: str) -> str:
    """The installed version of ``distribution``, or "not installed"."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return NOT_INSTALLED


def git_commit() -> str:
    """The checkout's HEAD commit (with ``+dirty`` when the work tree has changes)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def header() -> dict[str, Any]:
    """Date, commit, machine, versions, load average."""
    versions = {
        name: version_of(name)
        for name in (
            "weft-search",
            "numpy",
            "bm25s",
            "numba",
            "tantivy",
            "lancedb",
            "qdrant-client",
            "pyarrow",
        )
    }
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}",
        "git_commit": git_commit(),
        "machine": f"{cpu}, {os.cpu_count()} logical cores",
        "python": platform.python_version(),
        "versions": versions,
        "loadavg": list(loadavg()),
        "search_many": has_search_many(),
    }


def render(table: Table) -> str:
    """A table's Markdown (the indexing and memory tables keep their own layout), its targets below."""
    custom = table.custom_markdown
    if not custom:
        return table.markdown()
    load = ", ".join(f"{x:.2f}" for x in table.load)
    targets = [f"- target: {t.cell()}" for t in table.targets]
    return "\n".join(
        [
            f"### {table.title}",
            "",
            f"load average {load}",
            "",
            custom,
            "",
            *(f"- {n}" for n in table.notes),
            *targets,
        ]
    )


def table_json(table: Table) -> dict[str, Any]:
    """A table's JSON (the indexing and memory tables keep their own records)."""
    if not table.custom_markdown:
        return table.as_json()
    return {
        "title": table.title,
        "loadavg": list(table.load),
        "passes": table.passes,
        "builds": table.records,
        "notes": table.notes,
        "targets": [t.as_json() for t in table.targets],
        "extra": table.extra,
    }


def targets_summary(tables: Sequence[Table]) -> str:
    """Every target checked in the run, one line each: MET / MISSED by how much / NOT MEASURED."""
    lines = [
        "## Issue 14 targets",
        "",
        f"load average now {', '.join(f'{x:.2f}' for x in loadavg())}; "
        "ratios are fastest pass ÷ fastest pass, with the same ratio computed round by round beside them",
        "",
    ]
    targets = [t for table in tables for t in table.targets]
    lines += [t.line() for t in targets] or ["- (no target is checked by the parts that ran)"]
    met = sum(t.met is True for t in targets)
    missed = sum(t.met is False for t in targets)
    lines += ["", f"{met} met, {missed} missed, {len(targets) - met - missed} not measured"]
    return "\n".join(lines)


#: What ``--quick`` runs: SciFact only, few passes (about 1-2 minutes on 2 idle cores).
QUICK = {
    "parts": "scifact,index",
    "passes": 3,
    "hybrid_passes": 2,
    "slow_queries": 10,
    "build_passes": 1,
    "rss_queries": 2000,
    "ndcg_queries": 60,
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the selected parts, printing each table as it is done; return the JSON report."""
    report = header()
    report["command"] = " ".join([Path(sys.argv[0]).name if sys.argv else "query_path.py", *args.argv])
    print(f"# weft-search query path, {report['date']}")
    print()
    print(f"command: python bench/query_path.py {' '.join(args.argv)}")
    print(f"commit {report['git_commit']}; {report['machine']}; Python {report['python']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in report['loadavg'])}")
    print()
    tables: list[Table] = []

    def emit(new: Sequence[Table]) -> None:
        for table in new:
            print(render(table))
            print(flush=True)
            tables.append(table)

    ks = args.k
    if "scifact" in args.parts or "index" in args.parts:
        scifact = load_scifact(args.data, with_vectors="scifact" in args.parts)
        if "scifact" in args.parts:
            workload = scifact
            if args.queries:
                workload = Workload(
                    workload.name,
                    workload.doc_keys,
                    workload.doc_tokens,
                    workload.query_ids[: args.queries],
                    workload.query_tokens[: args.queries],
                    workload.raw_docs,
                    None if workload.raw_queries is None else workload.raw_queries[: args.queries],
                    workload.doc_vectors,
                    None if workload.query_vectors is None else workload.query_vectors[: args.queries],
                    workload.qrels,
                )
            emit(
                bm25_tables(
                    workload,
                    ks,
                    args.passes,
                    segments=args.segments,
                    rss_queries=args.rss_queries if args.quick else 0,
                )
            )
            if workload.query_vectors is not None and workload.qrels is not None and not args.no_hybrid:
                emit(
                    hybrid_tables(
                        workload, ks, args.hybrid_passes, args.slow_queries, args.ndcg_queries or None
                    )
                )
        if "index" in args.parts:
            emit([index_table(scifact, args.build_passes)])
        del scifact
    sizes = sorted(args.sizes)
    for size in sizes if ("synthetic" in args.parts or "index-synthetic" in args.parts) else []:
        workload = synthetic(size, args.synthetic_queries)
        largest = size == sizes[-1]
        if "synthetic" in args.parts:
            emit(
                bm25_tables(
                    workload,
                    ks,
                    args.passes,
                    segments=args.segments,
                    numpy_queries=args.numpy_queries or max(50, 20_000_000 // size),
                    rss_queries=args.rss_queries if largest else 0,
                )
            )
        if "index-synthetic" in args.parts and largest:
            emit([index_table(workload, args.synthetic_build_passes)])
        del workload
        gc.collect()
    summary = targets_summary(tables)
    print(summary)
    print()
    report["tables"] = [table_json(t) for t in tables]
    report["targets"] = [t.as_json() for table in tables for t in table.targets]
    report["markdown"] = "\n\n".join([*(render(t) for t in tables), summary])
    report["loadavg_end"] = list(loadavg())
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and run (or, with ``--build-child``, be one indexing child)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="SciFact only, few passes (about 1-2 minutes): "
        + ", ".join(f"{k}={v}" for k, v in QUICK.items()),
    )
    parser.add_argument(
        "--parts", default=None, help=f"comma-separated, of {', '.join(PARTS)} (default: all of them)"
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact in BEIR layout")
    parser.add_argument(
        "--k", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100], help="top-k list"
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[100_000, 1_000_000],
        help="synthetic corpus sizes (the largest also gets the RSS and indexing parts)",
    )
    parser.add_argument("--passes", type=int, default=None, help="timed passes per row (default 5; quick 3)")
    parser.add_argument("--hybrid-passes", type=int, default=None, help="timed passes of the hybrid rows")
    parser.add_argument("--slow-queries", type=int, default=None, help="queries timed for LanceDB and Qdrant")
    parser.add_argument("--queries", type=int, default=0, help="only the first N SciFact queries")
    parser.add_argument(
        "--synthetic-queries", type=int, default=1000, help="queries of the synthetic corpora"
    )
    parser.add_argument(
        "--numpy-queries",
        type=int,
        default=None,
        help="synthetic corpora: bm25s numpy's timed queries (default 20,000,000 / documents, at least 50)",
    )
    parser.add_argument(
        "--rss-queries",
        type=int,
        default=None,
        help="distinct queries of the RSS growth part (default 10,000)",
    )
    parser.add_argument(
        "--build-passes", type=int, default=None, help="SciFact builds per engine (default 3)"
    )
    parser.add_argument(
        "--synthetic-build-passes",
        type=int,
        default=1,
        help="builds per engine of the largest synthetic corpus",
    )
    parser.add_argument("--no-hybrid", action="store_true", help="skip the hybrid arm")
    parser.add_argument(
        "--ndcg-queries", type=int, default=None, help="hybrid nDCG@10 on the first N judged queries (0: all)"
    )
    parser.add_argument(
        "--segments", type=int, default=10, help="also time Index.search on N segments (0: skip)"
    )
    parser.add_argument(
        "--json", "--out", dest="json", type=Path, default=None, help="write the report as JSON here"
    )
    parser.add_argument("--build-child", nargs=2, metavar=("ENGINE", "CORPUS"), help=argparse.SUPPRESS)
    parser.add_argument("--build-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--build-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = argv
    if args.build_child:
        engine, corpus = args.build_child
        result = build_child(engine, Path(corpus), args.build_dir)
        args.build_out.write_text(json.dumps(result), encoding="utf-8")
        return 0
    full = {
        "passes": 5,
        "hybrid_passes": 3,
        "slow_queries": 30,
        "build_passes": 3,
        "rss_queries": 10_000,
        "ndcg_queries": 0,
    }
    defaults = QUICK if args.quick else full
    for name in ("passes", "hybrid_passes", "slow_queries", "build_passes", "rss_queries", "ndcg_queries"):
        if getattr(args, name) is None:
            setattr(args, name, defaults[name])
    parts = args.parts or (str(QUICK["parts"]) if args.quick else ",".join(PARTS))
    args.parts = [p.strip() for p in parts.split(",") if p.strip()]
    unknown = [p for p in args.parts if p not in PARTS]
    counts = (
        args.passes,
        args.hybrid_passes,
        args.slow_queries,
        args.build_passes,
        args.synthetic_build_passes,
    )
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {', '.join(PARTS)}")
    if (
        min(counts) < 1
        or min(args.k) < 1
        or min(args.sizes) < 1
        or (args.numpy_queries is not None and args.numpy_queries < 1)
        or args.rss_queries < 0
    ):
        parser.error("passes, query counts, sizes and k must be >= 1")
    if {"scifact", "index"} & set(args.parts) and not (args.data / "corpus.jsonl").is_file():
        parser.error(f"no corpus.jsonl under {args.data}; pass --data DIR")
    report = run(args)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
