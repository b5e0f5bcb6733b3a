"""Benchmark: weft-search BM25 against bm25s (numpy and numba backends) and tantivy.

Run with ``.venv/bin/python bench/bm25_vs_bm25s.py``: it made the first tables of
docs/BENCHMARKS.md (kept there as history). Its successor, ``bench/query_path.py``, is the
one benchmark command (``make bench``); this script stays for its ranking-agreement analysis.
This is a script that prints figures, not a test: nothing here asserts a speed.

What is measured, and how the comparison is kept fair:

* **Same tokens everywhere.** Documents (``title + " " + text``) and queries are
  analysed once with weft-search's ``english`` analyzer. Every engine gets those
  tokens: bm25s as lists of token lists (it builds its vocabulary from them),
  tantivy as space-joined tokens in a field with its ``whitespace`` tokenizer
  (no further analysis) queried with a disjunction of term queries, and
  weft-search as space-joined tokens in an index whose analyzer only splits on
  whitespace. So no engine pays for stemming at query time, and the figures
  compare scoring and top-k selection, not tokenisers.
* **One thread.** ``OMP/OPENBLAS/MKL/NUMBA_NUM_THREADS`` are set to 1 before numpy
  is imported. bm25s's numba backend runs with ``n_threads=1`` (its serial
  compiled loop); its numpy backend is shown both with ``n_threads=0`` (queries
  mapped on the calling thread, its fastest single-thread mode, used for the
  ratios) and ``n_threads=1`` (a pool of one worker thread). tantivy searches a
  single segment on the calling thread.
* **Same scoring function.** bm25s runs ``method="lucene", k1=1.2, b=0.75``.
  Its Lucene variant drops BM25's constant ``(k1 + 1)`` factor (as Lucene 8+
  does) and stores scores as float32, so weft-search's scores are divided by
  ``k1 + 1`` before comparing them. tantivy's BM25 keeps ``(k1 + 1)`` but stores
  document lengths in one lossy byte, so its scores are close, not equal.
* **Warm timings.** Each engine answers every query once before timing (this
  includes numba's JIT compilation); the figure is the best of ``--repeat``
  full passes over the queries, with the median also shown.

The script also checks that weft-search and bm25s return the same top-10 lists
and explains any difference (exact ties broken differently, or float32 rounding).
"""

from __future__ import annotations

import os

# Pin every numeric library to one thread. This must happen before numpy (or
# anything importing it) is first imported, which is why the imports below
# come after it.
for _variable in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from numpy.typing import NDArray  # noqa: E402

import weftsearch  # noqa: E402
from weftsearch import RRF, BM25Scorer, Document, Index, Query, Snapshot  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared generator beside this file
from synthetic_corpus import SEED, zipf_corpus  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "datasets" / "scifact"
K = 10
K1 = 1.2
B = 0.75


# --------------------------------------------------------------------------- data


class PreTokenizedAnalyzer:
    """An analyzer for text that is already analysed: it only splits on whitespace.

    The english analyzer never emits a token containing whitespace, so joining
    its tokens with spaces and splitting them again gives the same tokens back.
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
    """A corpus and its queries, both already analysed into tokens."""

    name: str
    doc_keys: list[str]
    doc_tokens: list[list[str]]
    query_tokens: list[list[str]]
    #: The raw query texts, when there are any (for the end-to-end figure that
    #: includes the english analyzer), with the raw document texts.
    raw_docs: list[str] | None = None
    raw_queries: list[str] | None = None


def load_beir(data: Path, n_queries: int | None) -> Workload:
    """SciFact (BEIR layout): ``corpus.jsonl`` and ``queries.jsonl``, analysed once."""
    analyzer = weftsearch.get_analyzer("english")
    keys: list[str] = []
    texts: list[str] = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                keys.append(str(record["_id"]))
                texts.append(f"{record.get('title', '')} {record.get('text', '')}")
    queries: list[str] = []
    with (data / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                queries.append(str(json.loads(line)["text"]))
    if n_queries is not None:
        queries = queries[:n_queries]
    return Workload(
        name=f"{data.name} (BEIR layout, title + text)",
        doc_keys=keys,
        doc_tokens=[analyzer.analyze(text) for text in texts],
        query_tokens=[analyzer.analyze(query) for query in queries],
        raw_docs=texts,
        raw_queries=queries,
    )


def synthetic(n_docs: int, n_queries: int, seed: int = SEED) -> Workload:
    """The shared synthetic corpus (``bench/synthetic_corpus.py``, the one ``make bench`` uses).

    Until 2026-12-03 this script drew its own (lengths around 120 tokens, seed
    20240601); the tables of docs/BENCHMARKS.md made with it say so.
    """
    corpus = zipf_corpus(n_docs, n_queries, seed)
    return Workload(
        name=corpus.name,
        doc_keys=corpus.doc_keys,
        doc_tokens=corpus.doc_tokens,
        query_tokens=corpus.query_tokens,
    )


# --------------------------------------------------------------------------- timing


@dataclass
class Timing:
    """Queries per second of one engine: best and median of the timed passes."""

    label: str
    n_queries: int
    seconds: list[float] = field(default_factory=list)

    @property
    def best_qps(self) -> float:
        """Queries per second of the fastest pass."""
        return self.n_queries / min(self.seconds)

    @property
    def median_qps(self) -> float:
        """Queries per second of the median pass."""
        return self.n_queries / statistics.median(self.seconds)


def measure(runs: Sequence[tuple[str, Callable[[], object]]], n_queries: int, repeat: int) -> list[Timing]:
    """Time each ``(label, run_all)``, where ``run_all`` is one pass over every query.

    Every engine first runs one untimed warm-up pass (caches, numba's JIT,
    first-touch page faults). Then the timed passes go round-robin, one pass of
    each engine per round, so a slow spell of the machine hits all engines
    alike instead of whichever happened to run then.
    """
    for _, run_all in runs:
        run_all()
    timings = [Timing(label, n_queries) for label, _ in runs]
    for _ in range(repeat):
        for timing, (_, run_all) in zip(timings, runs, strict=True):
            gc.collect()
            start = time.perf_counter()
            run_all()
            timing.seconds.append(time.perf_counter() - start)
    return timings


# --------------------------------------------------------------------------- engines


@dataclass
class Ranking:
    """One engine's top-k for one query: document keys and scores, best first."""

    keys: list[str]
    scores: list[float]


class WeftEngine:
    """weft-search through its public API: Index, snapshot, BM25Scorer."""

    def __init__(self, workload: Workload) -> None:
        self.index = Index(PreTokenizedAnalyzer())
        self.index.add_many(
            (
                Document(key, " ".join(tokens))
                for key, tokens in zip(workload.doc_keys, workload.doc_tokens, strict=True)
            ),
            progress=False,
        )
        self.snapshot: Snapshot = self.index.snapshot()
        self.scorer = BM25Scorer(k1=K1, b=B)
        self.fuser = RRF()
        # Query values are built once, like the token lists the other engines get.
        self.queries = [Query(text=" ".join(tokens)) for tokens in workload.query_tokens]

    def run_scorer(self) -> None:
        """Every query through ``BM25Scorer.score`` (the scorer alone)."""
        scorer, snapshot = self.scorer, self.snapshot
        for query in self.queries:
            scorer.score(snapshot, query, K)

    def run_search(self) -> None:
        """Every query through ``index.search`` with RRF over the one BM25 stream."""
        index, fuser, scorer = self.index, self.fuser, self.scorer
        for query in self.queries:
            index.search(query, K, fuser, scorer)

    def rankings(self) -> list[Ranking]:
        """The scorer's top-k per query, by key."""
        out = []
        for query in self.queries:
            stream = self.scorer.score(self.snapshot, query, K)
            out.append(Ranking(self.snapshot.keys_of(stream.ids), stream.scores.tolist()))
        return out

    def all_scores(self, query_number: int) -> dict[str, float]:
        """Every matching document's score for one query, by key."""
        ids, scores = self.scorer.score_all(self.snapshot, self.queries[query_number])
        return dict(zip(self.snapshot.keys_of(ids), scores.tolist(), strict=True))


class WeftRawEngine:
    """weft-search on raw text with the english analyzer: end to end, analysis included."""

    def __init__(self, workload: Workload) -> None:
        assert workload.raw_docs is not None and workload.raw_queries is not None
        self.index = Index("english")
        self.index.add_many(
            (Document(key, text) for key, text in zip(workload.doc_keys, workload.raw_docs, strict=True)),
            progress=False,
        )
        self.index.snapshot()
        self.scorer = BM25Scorer(k1=K1, b=B)
        self.fuser = RRF()
        self.queries = [Query(text=text) for text in workload.raw_queries]

    def run_search(self) -> None:
        """Every raw query through ``index.search`` (english analysis included)."""
        index, fuser, scorer = self.index, self.fuser, self.scorer
        for query in self.queries:
            index.search(query, K, fuser, scorer)


class Bm25sEngine:
    """bm25s with the Lucene variant, on one backend."""

    def __init__(self, workload: Workload, backend: str, dtype: str = "float32") -> None:
        import bm25s

        self.backend = backend
        self.retriever: Any = bm25s.BM25(method="lucene", k1=K1, b=B, backend=backend, dtype=dtype)
        self.retriever.index(workload.doc_tokens, show_progress=False)
        self.queries = workload.query_tokens
        self.doc_keys = workload.doc_keys
        self.k = min(K, len(workload.doc_keys))

    def retrieve(
        self, queries: list[list[str]], n_threads: int | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Top-k document numbers and scores of ``queries``, in one ``retrieve`` call.

        ``n_threads`` defaults to this backend's fastest single-thread mode:
        0 for numpy (bm25s then maps over the queries on the calling thread;
        1 would hand them to a pool of one worker thread, which is slower) and
        1 for numba (its serial compiled loop; 0 means the same there).
        """
        if n_threads is None:
            n_threads = 0 if self.backend == "numpy" else 1
        documents, scores = self.retriever.retrieve(
            queries,
            k=self.k,
            show_progress=False,
            n_threads=n_threads,
            backend_selection=self.backend,
        )
        return np.asarray(documents), np.asarray(scores)

    def run_batch(self) -> None:
        """All queries in one ``retrieve`` call (bm25s's intended use)."""
        self.retrieve(self.queries)

    def run_batch_pool(self) -> None:
        """All queries in one call with ``n_threads=1`` (a pool of one worker thread)."""
        self.retrieve(self.queries, n_threads=1)

    def run_each(self) -> None:
        """One ``retrieve`` call per query (the way weft-search is called)."""
        for query in self.queries:
            self.retrieve([query])

    def rankings(self) -> list[Ranking]:
        """Top-k per query by key; documents scored 0 (no query term) are dropped."""
        documents, scores = self.retrieve(self.queries)
        out = []
        for row_documents, row_scores in zip(documents, scores, strict=True):
            keep = row_scores > 0
            out.append(
                Ranking(
                    [self.doc_keys[int(i)] for i in row_documents[keep]],
                    [float(s) for s in row_scores[keep]],
                )
            )
        return out


class TantivyEngine:
    """tantivy (tantivy-py): whitespace tokenizer, BM25, a disjunction of term queries."""

    def __init__(self, workload: Workload, directory: Path) -> None:
        import tantivy

        self.tantivy: Any = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(directory))
        writer = self.index.writer(heap_size=1_000_000_000, num_threads=1)
        for key, tokens in zip(workload.doc_keys, workload.doc_tokens, strict=True):
            writer.add_document(tantivy.Document(key=key, body=" ".join(tokens)))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.segments = int(self.searcher.num_segments)
        self.queries = workload.query_tokens

    def query(self, tokens: Sequence[str]) -> Any:
        """The disjunction of ``tokens`` (a repeated token counts twice, as in BM25's qtf)."""
        query_type = self.tantivy.Query
        if not tokens:
            return query_type.empty_query()
        terms = [query_type.term_query(self.schema, "body", token, index_option="freq") for token in tokens]
        if len(terms) == 1:
            return terms[0]
        should = self.tantivy.Occur.Should
        return query_type.boolean_query([(should, term) for term in terms])

    def run(self) -> None:
        """Every query: build the term disjunction, search for the top k."""
        searcher = self.searcher
        for tokens in self.queries:
            searcher.search(self.query(tokens), K, count=False)

    def rankings(self) -> list[Ranking]:
        """Top-k per query by key."""
        out = []
        for tokens in self.queries:
            hits = self.searcher.search(self.query(tokens), K, count=False).hits
            keys = [str(self.searcher.doc(address)["key"][0]) for _, address in hits]
            out.append(Ranking(keys, [float(score) for score, _ in hits]))
        return out


# --------------------------------------------------------------------------- agreement


@dataclass
class Agreement:
    """How closely another engine's top-k lists match weft-search's."""

    label: str
    n_queries: int
    same_set: int = 0
    same_order: int = 0
    max_abs_diff: float = 0.0
    #: Queries whose lists differ, by cause.
    exact_ties: int = 0
    near_ties: int = 0
    other: int = 0
    examples: list[str] = field(default_factory=list)


def compare(
    label: str,
    weft: WeftEngine,
    weft_rankings: list[Ranking],
    other: list[Ranking],
    scale: float,
    near_tie: float,
) -> Agreement:
    """Compare ``other``'s top-k with weft-search's, query by query.

    ``scale`` maps a weft-search score to the other engine's scale (bm25s's
    Lucene variant divides by ``k1 + 1``). A list that differs is put down to:

    * exact ties: position by position, weft-search scores the other engine's
      documents exactly as its own top-k; only the tie-break (weft-search: by
      key) differs;
    * near ties: position by position, those scores differ by at most
      ``near_tie`` (relative), within the other engine's rounding (float32);
    * other: anything else.
    """
    result = Agreement(label, len(weft_rankings))
    for number, (mine, theirs) in enumerate(zip(weft_rankings, other, strict=True)):
        if set(mine.keys) == set(theirs.keys):
            result.same_set += 1
        if mine.keys == theirs.keys:
            result.same_order += 1
            diffs = [abs(a * scale - b) for a, b in zip(mine.scores, theirs.scores, strict=True)]
            result.max_abs_diff = max([result.max_abs_diff, *diffs])
            continue
        everything = weft.all_scores(number)
        # weft-search's own scores of the other list, in the other engine's order:
        # equal to weft-search's top-k scores position by position only if every
        # swap is between documents weft-search scores the same.
        theirs_under_weft = [everything.get(key, 0.0) for key in theirs.keys]
        common = [key for key in mine.keys if key in set(theirs.keys)]
        for key in common:
            position = theirs.keys.index(key)
            diff = abs(everything[key] * scale - theirs.scores[position])
            result.max_abs_diff = max(result.max_abs_diff, diff)
        if theirs_under_weft == mine.scores:
            result.exact_ties += 1
        elif len(theirs_under_weft) == len(mine.scores) and all(
            abs(a - b) <= near_tie * max(abs(a), abs(b))
            for a, b in zip(theirs_under_weft, mine.scores, strict=True)
        ):
            result.near_ties += 1
        else:
            result.other += 1
            if len(result.examples) < 3:
                result.examples.append(
                    f"query #{number}: weft {list(zip(mine.keys, mine.scores, strict=True))[:4]} ... "
                    f"vs {list(zip(theirs.keys, theirs.scores, strict=True))[:4]} ..."
                )
    return result


def one_byte_length(length: int) -> int:
    """A document length as tantivy (like Lucene's ``SmallFloat.intToByte4``) stores it.

    Lengths below 24 are exact; above, the length minus 24 keeps its 4 most
    significant bits and is truncated, so a stored length is up to ~12% short.
    """
    free = 24
    if length < free:
        return length
    rest = length - free
    shift = max(rest.bit_length() - 4, 0)
    return free + ((rest >> shift) << shift)


def check_tantivy_scores(workload: Workload, rankings: list[Ranking]) -> float:
    """Largest relative difference between tantivy's scores and BM25 on 1-byte lengths.

    Recomputes each returned document's score from the tokens with exactly the
    formula weft-search uses, except that the document length is first
    rounded the way tantivy stores it. A difference at float32 rounding level
    shows that the stored lengths account for all of tantivy's disagreement.
    """
    n_docs = len(workload.doc_tokens)
    avgdl = sum(len(tokens) for tokens in workload.doc_tokens) / n_docs
    doc_freq: Counter[str] = Counter()
    for tokens in workload.doc_tokens:
        doc_freq.update(set(tokens))
    row = {key: i for i, key in enumerate(workload.doc_keys)}
    worst = 0.0
    for tokens, ranking in zip(workload.query_tokens, rankings, strict=True):
        query = Counter(tokens)
        for key, score in zip(ranking.keys, ranking.scores, strict=True):
            document = workload.doc_tokens[row[key]]
            counts = Counter(document)
            norm = K1 * (1.0 - B + B * one_byte_length(len(document)) / avgdl)
            expected = 0.0
            for term, qtf in query.items():
                tf = counts.get(term, 0)
                if tf:
                    idf = math.log1p((n_docs - doc_freq[term] + 0.5) / (doc_freq[term] + 0.5))
                    expected += qtf * idf * tf * (K1 + 1.0) / (tf + norm)
            worst = max(worst, abs(score - expected) / expected)
    return worst


def print_agreement(agreement: Agreement) -> None:
    """Print one agreement summary."""
    n = agreement.n_queries
    print(
        f"  {agreement.label:<34} identical top-{K} sets {agreement.same_set}/{n} "
        f"({agreement.same_set / n:.1%}), identical order {agreement.same_order}/{n} "
        f"({agreement.same_order / n:.1%}), max |score diff| {agreement.max_abs_diff:.3g}"
    )
    differing = n - agreement.same_order
    if differing:
        print(
            f"  {'':<34} of the {differing} differing lists: {agreement.exact_ties} exact ties broken "
            f"differently, {agreement.near_ties} near ties within float32 rounding, "
            f"{agreement.other} other"
        )
    for example in agreement.examples:
        print(f"  {'':<34} {example}")


# --------------------------------------------------------------------------- report


def version_of(distribution: str) -> str:
    """The installed version of ``distribution``, or ``"not installed"``."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def print_header() -> None:
    """Machine, versions and date."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    print(f"date:     {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(
        f"machine:  {cpu_model()}, {os.cpu_count()} logical cores ({usable} usable); all engines on 1 thread"
    )
    print(f"platform: {platform.platform()}, Python {platform.python_version()}")
    versions = ", ".join(
        f"{name} {version_of(name)}"
        for name in ("weft-search", "numpy", "scipy", "bm25s", "numba", "tantivy")
    )
    print(f"versions: {versions}")


def run_workload(workload: Workload, repeat: int, skip_tantivy: bool) -> None:
    """Build every engine on ``workload``, time it, compare rankings, print it all."""
    n = len(workload.query_tokens)
    print()
    print(f"== {workload.name}: {len(workload.doc_keys):,} documents, {n:,} queries, top {K}")
    postings = sum(len(set(tokens)) for tokens in workload.doc_tokens)
    print(
        f"   {postings:,} postings, {sum(len(q) for q in workload.query_tokens) / max(n, 1):.1f} "
        f"tokens per query; best of {repeat} timed passes (round-robin) after one warm-up pass"
    )
    print("   Every engine starts from the same pre-analysed query tokens (english analyzer run once,")
    print("   beforehand), so no figure but the one marked (*) includes tokenisation. weft BM25Scorer.score")
    print("   is Index + snapshot + BM25Scorer.score(snapshot, Query(text), k=10), text = the tokens joined")
    print("   by spaces, analysed by a whitespace split; index.search adds RRF fusion and explanations.")

    weft = WeftEngine(workload)
    numpy_engine = Bm25sEngine(workload, "numpy")
    numba_engine = Bm25sEngine(workload, "numba")
    scorer_label = "weft BM25Scorer.score"
    numpy_label = "bm25s numpy, batch (n_threads=0)"
    numba_label = "bm25s numba, batch (n_threads=1)"
    tantivy_label = "tantivy, 1 thread"
    runs: list[tuple[str, Callable[[], object]]] = [
        (scorer_label, weft.run_scorer),
        ("weft index.search (RRF over 1 stream)", weft.run_search),
    ]
    if workload.raw_queries is not None:
        runs.append(("weft index.search, raw text (*)", WeftRawEngine(workload).run_search))
    runs += [
        (numpy_label, numpy_engine.run_batch),
        ("bm25s numpy, batch (n_threads=1)", numpy_engine.run_batch_pool),
        ("bm25s numpy, one call per query", numpy_engine.run_each),
        (numba_label, numba_engine.run_batch),
        ("bm25s numba, one call per query", numba_engine.run_each),
    ]
    with tempfile.TemporaryDirectory(prefix="weft-bench-tantivy-") as directory:
        tantivy_engine = None if skip_tantivy else TantivyEngine(workload, Path(directory))
        if tantivy_engine is not None:
            tantivy_label = f"tantivy, 1 thread ({tantivy_engine.segments} segment)"
            runs.append((tantivy_label, tantivy_engine.run))
        timings = measure(runs, n, repeat)

        print()
        print(f"   {'engine':<42} {'q/s best':>11} {'q/s median':>11} {'us/query':>10}")
        for timing in timings:
            print(
                f"   {timing.label:<42} {timing.best_qps:>11,.0f} {timing.median_qps:>11,.0f} "
                f"{1e6 / timing.best_qps:>10.1f}"
            )
        if workload.raw_queries is not None:
            print("   (*) raw query text, so this one includes the english analyzer; the others do not.")

        by_label = {timing.label: timing.best_qps for timing in timings}
        mine = by_label[scorer_label]
        print()
        print(f"   ratios: {scorer_label} q/s / other q/s (>= 1.0: weft-search is faster)")
        compared = [
            numpy_label,
            numba_label,
            "bm25s numpy, one call per query",
            "bm25s numba, one call per query",
        ]
        if tantivy_engine is not None:
            compared.append(tantivy_label)
        for label in compared:
            print(f"     weft / {label:<44} {mine / by_label[label]:6.2f}")

        print()
        print(
            f"   top-{K} agreement with weft BM25Scorer (scores compared on bm25s's scale, weft / (k1 + 1)):"
        )
        weft_rankings = weft.rankings()
        scale = 1 / (K1 + 1)
        for engine in (numpy_engine, numba_engine):
            label = f"bm25s {engine.backend} (float32)"
            print_agreement(compare(label, weft, weft_rankings, engine.rankings(), scale, 1e-6))
        # The same in float64: what is left once float32 rounding is out of the way.
        exact = Bm25sEngine(workload, "numpy", dtype="float64")
        label = "bm25s numpy (float64 index)"
        print_agreement(compare(label, weft, weft_rankings, exact.rankings(), scale, 1e-12))
        if tantivy_engine is not None:
            label = "tantivy (lossy 1-byte doc lengths)"
            tantivy_rankings = tantivy_engine.rankings()
            print_agreement(compare(label, weft, weft_rankings, tantivy_rankings, 1.0, 0.0))
            print(
                f"  {'':<34} tantivy's scores vs the same BM25 on its 1-byte lengths: max relative "
                f"difference {check_tantivy_scores(workload, tantivy_rankings):.2g} (float32 rounding)"
            )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, print the machine, run SciFact and (optionally) a synthetic corpus."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="BEIR-layout folder (default: ../shared/datasets/scifact)",
    )
    parser.add_argument(
        "--queries", type=int, default=None, help="use only the first N SciFact queries (default: all)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed passes per engine; the best is reported")
    parser.add_argument(
        "--synthetic",
        type=int,
        default=0,
        metavar="N",
        help="also run a synthetic Zipfian corpus of N documents (e.g. 50000), fixed seed",
    )
    parser.add_argument(
        "--synthetic-queries", type=int, default=1000, metavar="M", help="queries for the synthetic run"
    )
    parser.add_argument("--no-tantivy", action="store_true", help="skip tantivy")
    parser.add_argument("--no-scifact", action="store_true", help="skip SciFact (only the synthetic run)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.synthetic_queries < 1 or (args.queries is not None and args.queries < 1):
        parser.error("--repeat, --queries and --synthetic-queries must be positive")

    print_header()
    if not args.no_scifact:
        if not (args.data / "corpus.jsonl").is_file():
            print(f"no corpus.jsonl under {args.data}; pass --data DIR", file=sys.stderr)
            return 2
        run_workload(load_beir(args.data, args.queries), args.repeat, args.no_tantivy)
    if args.synthetic > 0:
        run_workload(synthetic(args.synthetic, args.synthetic_queries), args.repeat, args.no_tantivy)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
