"""Benchmark: indexing throughput (add + commit, on disk) against bm25s and tantivy.

Builds the same corpus (SciFact by default: ``corpus.jsonl`` of a BEIR folder)
with each engine in turn, in alternating passes, and prints documents per
second (median and spread over the passes) and the load average, since the
machine may be shared (figures are indicative, not tests).

- weft-search: ``Index.create(dir)``, ``add_many`` (analysis with the
  ``english`` analyzer: NFKC, Unicode words, Lucene stopwords, Snowball
  stems; stored records), ``commit`` (seal, encode, write; the encoder runs in
  a forked child from 2,000 buffered documents). One arm per ``--workers``
  value (``auto`` is the library's default).
- bm25s: ``bm25s.tokenize`` (English stopwords, the same PyStemmer stemmer) and
  ``BM25.index``, in memory (bm25s has no on-disk build step).
- tantivy: ``add_document`` of key and text (stored, ``en_stem`` tokenizer),
  ``commit``, on disk; one writer thread and tantivy's default thread count.

Loading the JSONL file is timed once, apart: every arm indexes the same texts.
``--pre-analysed`` indexes each text's ``english`` terms joined by spaces instead (made
before any clock starts, as docs/BENCHMARKS.md's pre-analysed tables do): weft-search
with its built-in ``whitespace`` analyzer (where the code measured has one; else a Python
analyzer returning ``text.split()``), bm25s the token lists (no stopwords, no stemmer),
tantivy its ``whitespace`` tokenizer.
``--synthetic N`` indexes N generated documents instead (Zipfian vocabulary of
50,000 words, lengths log-normal around 100 words, fixed seed; the corpus the
issue-14 figures use). ``--memory`` also builds once per arm in a forked child
and reports its peak resident set (``VmHWM``, which includes the corpus the
caller holds, as in real use) and that of its own children (workers, encoder).
A breakdown pass times the parts of weft-search's ``add_many`` in one process:
analysis, term counting, stored records, and ``encode_segment`` in this
process (the commit forks a child to run it).

Usage::

    python bench/ingest.py [--corpus PATH | --synthetic N] [--repeat 5] [--workers 1,auto] [--memory]
                           [--pre-analysed]
"""

from __future__ import annotations

import argparse
import inspect
import os
import pickle
import resource
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from weftsearch.analysis import EnglishAnalyzer, analyzer_names
from weftsearch.corpus import load_documents
from weftsearch.documents import Document
from weftsearch.engine.index import Index
from weftsearch.storage.segment_writer import SegmentDocument, encode_segment, stored_record

SEED = 20240601

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact" / "corpus.jsonl"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, formatted."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def synthetic_documents(n: int, seed: int = SEED) -> list[Document]:
    """``n`` documents drawn from a Zipfian vocabulary (fixed seed: the same corpus every run).

    50,000 words ``w0 .. w49999``, rank r drawn with probability proportional
    to ``1 / r**1.07``; lengths log-normal with median 100 words (sigma 0.4,
    clipped to 5..1000). Drawn 100,000 documents at a time (bounded memory).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    size = 50_000
    weights = 1.0 / np.arange(1, size + 1, dtype=np.float64) ** 1.07
    weights /= weights.sum()
    words = np.array([f"w{rank}" for rank in range(size)], dtype=object)
    lengths = np.clip(rng.lognormal(np.log(100.0), 0.4, n), 5, 1000).astype(np.int64)
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    width = len(str(n - 1))
    documents = []
    for start in range(0, n, 100_000):
        stop = min(start + 100_000, n)
        draws = rng.choice(size, size=int(bounds[stop] - bounds[start]), p=weights)
        cuts = bounds[start : stop + 1] - bounds[start]
        for i in range(stop - start):
            text = " ".join(words[draws[cuts[i] : cuts[i + 1]]].tolist())
            documents.append(Document(key=f"d{start + i:0{width}d}", text=text))
    return documents


def peak_memory(run: Callable[[], float]) -> tuple[float, float, float]:
    """Run ``run`` once in a forked child: (seconds, its peak RSS in MB, its children's peak RSS in MB)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, exit
        os.close(read_fd)
        code = 1
        try:
            seconds = run()
            with open("/proc/self/status", encoding="ascii") as status:
                hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024
            children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            with os.fdopen(write_fd, "wb") as pipe:
                pickle.dump((seconds, hwm, children), pipe)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        result: tuple[float, float, float] = pickle.load(pipe)
    os.waitpid(pid, 0)
    return result


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its reaped children (workers, encoder)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class PreAnalysed:
    """The analyzer of pre-analysed text: its terms are the whitespace-separated tokens."""

    @property
    def name(self) -> str:
        """Registry name: ``"pre-analysed"``."""
        return "pre-analysed"

    def analyze(self, text: str) -> list[str]:
        """Split ``text`` on whitespace."""
        return text.split()


def weft_arm(
    documents: list[Document], workers: str, priority: str = "idle", pre_analysed: bool = False
) -> Callable[[], float]:
    """A pass of weft-search: create, add_many, commit, close; returns seconds."""
    takes_workers = "workers" in inspect.signature(Index.add_many).parameters

    def run() -> float:
        with tempfile.TemporaryDirectory(prefix="weft-bench-ingest-") as directory:
            started = time.perf_counter()
            analyzer: Any = "english"
            if pre_analysed:
                analyzer = "whitespace" if "whitespace" in analyzer_names() else PreAnalysed()
            index = Index.create(Path(directory) / "index", analyzer, commit_priority=priority)
            kwargs: dict[str, Any] = {"progress": False}
            if takes_workers:
                kwargs["workers"] = None if workers == "auto" else int(workers)
            index.add_many(documents, **kwargs)
            index.commit()
            index.close()
            return time.perf_counter() - started

    return run


def bm25s_arm(texts: list[str], pre_analysed: bool = False) -> Callable[[], float]:
    """A pass of bm25s: tokenize (English stopwords, Snowball stems) and index; returns seconds.

    Pre-analysed: the token lists (split before the clock, as bm25s's API takes them) indexed.
    """
    import bm25s
    import Stemmer

    split = [text.split() for text in texts] if pre_analysed else []

    def run() -> float:
        started = time.perf_counter()
        if pre_analysed:
            retriever = bm25s.BM25()
            retriever.index(split, show_progress=False)
            return time.perf_counter() - started
        stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        return time.perf_counter() - started

    return run


def tantivy_arm(
    keys: list[str], texts: list[str], threads: int, pre_analysed: bool = False
) -> Callable[[], float]:
    """A pass of tantivy: add_document of key and stored text, commit, on disk; returns seconds.

    Pre-analysed: the ``whitespace`` tokenizer instead of ``en_stem``.
    """
    import tantivy

    def run() -> float:
        with tempfile.TemporaryDirectory(prefix="weft-bench-tantivy-") as directory:
            started = time.perf_counter()
            builder = tantivy.SchemaBuilder()
            builder.add_text_field("key", stored=True, tokenizer_name="raw")
            tokenizer = "whitespace" if pre_analysed else "en_stem"
            builder.add_text_field("body", stored=True, tokenizer_name=tokenizer)
            schema = builder.build()
            index = tantivy.Index(schema, path=directory)
            writer = index.writer(heap_size=500_000_000, num_threads=threads)
            for key, text in zip(keys, texts, strict=True):
                writer.add_document(tantivy.Document(key=key, body=text))
            writer.commit()
            writer.wait_merging_threads()
            return time.perf_counter() - started

    return run


def breakdown(documents: list[Document]) -> None:
    """Time the parts of add_many and of the commit's encoding, in this process."""
    analyzer = EnglishAnalyzer()
    parts: dict[str, float] = {}
    clock = time.process_time  # CPU time of this process: steadier than wall time on a shared machine
    started = clock()
    analysed = [analyzer.analyze(document.text) for document in documents]
    parts["analyze, cold analyzer (terms as lists)"] = clock() - started
    started = clock()
    analysed = [analyzer.analyze(document.text) for document in documents]
    parts["analyze, warm analyzer (same texts again)"] = clock() - started
    started = clock()
    counts = [Counter(terms) for terms in analysed]
    parts["Counter of each analyze list"] = clock() - started
    if hasattr(analyzer, "term_counts"):  # what add_many uses: words counted in one pass
        fresh = EnglishAnalyzer()
        started = clock()
        [fresh.term_counts(document.text) for document in documents]
        parts["term_counts, cold analyzer (add_many's path)"] = clock() - started
        started = clock()
        [fresh.term_counts(document.text) for document in documents]
        parts["term_counts, warm analyzer"] = clock() - started
    started = clock()
    records = [stored_record(document) for document in documents]
    parts["stored records (stored_record)"] = clock() - started
    entries = [
        SegmentDocument(document, count, len(terms), record)
        for document, count, terms, record in zip(documents, counts, analysed, records, strict=True)
    ]
    started = clock()
    encode_segment(entries, None)
    parts["encode_segment (in this process)"] = clock() - started
    for name, seconds in parts.items():
        print(f"  {name:<52} {seconds:7.3f} CPU s  {len(documents) / seconds:10,.0f} docs/CPU s")


def main() -> None:
    """Run the passes and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="a JSONL corpus or BEIR folder")
    parser.add_argument("--repeat", type=int, default=5, help="passes per arm (alternating)")
    parser.add_argument("--workers", default="1,auto", help="weft add_many worker counts, comma-separated")
    parser.add_argument("--no-peers", action="store_true", help="time weft-search only")
    parser.add_argument(
        "--synthetic", type=int, default=0, help="index N synthetic Zipfian documents instead"
    )
    parser.add_argument("--memory", action="store_true", help="peak RSS of one build per arm (forked child)")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the one-process breakdown")
    parser.add_argument(
        "--pre-analysed", action="store_true", help="index the english terms joined by spaces (see above)"
    )
    args = parser.parse_args()

    print(f"load average before: {load_average()}; cpus: {os.cpu_count()}")
    started = time.perf_counter()
    if args.synthetic:
        documents = synthetic_documents(args.synthetic)
        source = f"synthetic Zipfian, seed {SEED}"
    else:
        documents = load_documents(args.corpus, progress=False)
        source = str(args.corpus)
    load_seconds = time.perf_counter() - started
    n = len(documents)
    rate = n / load_seconds
    print(f"corpus: {source}, {n:,} documents; loaded in {load_seconds:.3f} s ({rate:,.0f} docs/s)")
    if not args.no_breakdown:
        print("breakdown of weft-search's work, one process:")
        breakdown(documents)
    if args.pre_analysed:
        analyzer = EnglishAnalyzer()
        documents = [Document(d.key, " ".join(analyzer.analyze(d.text))) for d in documents]
        print("pre-analysed: every arm indexes the english terms joined by spaces")
    pre = args.pre_analysed

    texts = [document.text for document in documents]
    keys = [document.key for document in documents]
    arms: list[tuple[str, Callable[[], float]]] = [
        (f"weft-search add_many+commit, workers={w}", weft_arm(documents, w, pre_analysed=pre))
        for w in args.workers.split(",")
    ]
    if "commit_priority" in inspect.signature(Index.create).parameters:
        # As `weft-search index` runs it: no searches to yield to, so the encoder child runs at
        # normal priority (the library's default, "idle", waits behind other processes).
        arms.append(
            ("weft-search, workers=auto, priority normal", weft_arm(documents, "auto", "normal", pre))
        )
    if not args.no_peers:
        arms.append(("bm25s tokenize+index (in memory)", bm25s_arm(texts, pre)))
        arms.append(("tantivy add+commit, 1 thread", tantivy_arm(keys, texts, 1, pre)))
        arms.append(("tantivy add+commit, default threads", tantivy_arm(keys, texts, 0, pre)))
    if args.memory:
        print(f"\npeak memory, one build per arm in a forked child (load average {load_average()}):")
        for name, run in arms:
            seconds_once, hwm, children = peak_memory(run)
            print(
                f"  {name:<44} {n / seconds_once:10,.0f} docs/s  peak RSS {hwm:8,.0f} MB"
                f"  children {children:8,.0f} MB"
            )
        if args.repeat <= 0:
            return
    for _, run in arms:  # warm-up pass (imports, first-touch allocations)
        run()
    seconds: dict[str, list[float]] = {name: [] for name, _ in arms}
    cpu: dict[str, list[float]] = {name: [] for name, _ in arms}
    for _ in range(args.repeat):
        for name, run in arms:
            before = cpu_seconds()
            seconds[name].append(run())
            cpu[name].append(cpu_seconds() - before)
    print(f"\n{args.repeat} alternating passes; load average after: {load_average()}")
    reference = {name: n / statistics.median(values) for name, values in seconds.items()}
    bm25s_rate = reference.get("bm25s tokenize+index (in memory)")
    tantivy_rate = reference.get("tantivy add+commit, 1 thread")
    print(
        f"  {'arm':<44} {'docs/s median':>13} {'(min - max)':>20} {'x bm25s':>8} {'x tantivy1':>10}"
        f" {'CPU s':>6} {'docs/CPU s':>10}"
    )
    for name, values in seconds.items():
        rates = sorted(n / value for value in values)
        ratio_b = f"{reference[name] / bm25s_rate:.2f}" if bm25s_rate else "-"
        ratio_t = f"{reference[name] / tantivy_rate:.2f}" if tantivy_rate else "-"
        spread = f"({rates[0]:,.0f} - {rates[-1]:,.0f})"
        busy = statistics.median(cpu[name])
        print(
            f"  {name:<44} {reference[name]:13,.0f} {spread:>20} {ratio_b:>8} {ratio_t:>10}"
            f" {busy:6.2f} {n / busy:10,.0f}"
        )
    print("  (CPU s: median CPU seconds a pass, this process and its reaped children, all threads)")


if __name__ == "__main__":
    main()
