"""Benchmark: what ``highlight=`` costs per hit (issue 29, "highlighting cost per hit").

Run with ``PYTHONPATH=src .venv/bin/python bench/highlight_cost.py [--scifact
../shared/datasets/scifact | --synthetic 10000] [--queries 300] [--passes 5] [--k 10]``.
A script that prints figures, not a test: nothing here asserts a speed.

One on-disk index of the corpus (text stored, ``english`` analyzer, one segment) is searched
with each query (SciFact's own queries; the synthetic corpus's drawn queries) through
``Index.search(query, k, RRF(), BM25Scorer())`` (one scorer: its stream passes through), once
without and once with ``highlight=True`` (the default options: the ``text`` field, 3
fragments of 150 characters), in alternating passes (plain, highlighted, plain, ...). A search
is timed until its hits are built (``list(results)``): a hit's highlights are computed when it
is built, so that is where their cost lands. Each query's best time over the passes is kept
per mode; the cost per hit is (sum of highlighted bests - sum of plain bests) / hits
returned. The load average is printed before and after: on a shared machine the figures are
indicative only.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_corpus import zipf_corpus  # noqa: E402

from weftsearch import RRF, BM25Scorer, Document, Index  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "datasets" / "scifact"


@dataclass(frozen=True)
class Result:
    """One run's figures (times in microseconds)."""

    queries: int
    hits: int
    #: Hits with at least one snippet (so the highlighted pass highlighted something).
    highlighted: int
    plain_us_per_query: float
    highlighted_us_per_query: float
    us_per_hit: float


def load_scifact(data: Path, n_queries: int) -> tuple[list[Document], list[str]]:
    """SciFact's documents (title, then abstract) and its first ``n_queries`` queries."""
    documents = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                text = f"{record.get('title', '')} {record.get('text', '')}"
                documents.append(Document(str(record["_id"]), text))
    queries: list[str] = []
    with (data / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and len(queries) < n_queries:
                queries.append(str(json.loads(line)["text"]))
    return documents, queries


def load_synthetic(n_docs: int, n_queries: int) -> tuple[list[Document], list[str]]:
    """The shared synthetic corpus (tokens joined by spaces) and its drawn queries."""
    corpus = zipf_corpus(n_docs, n_queries)
    documents = [
        Document(key, " ".join(tokens))
        for key, tokens in zip(corpus.doc_keys, corpus.doc_tokens, strict=True)
    ]
    return documents, [" ".join(tokens) for tokens in corpus.query_tokens]


def measure(index: Index, queries: list[str], k: int, passes: int) -> Result:
    """Each query's best time over ``passes`` alternating passes, without and with highlighting."""
    scorer, fuser = BM25Scorer(), RRF()
    plain = [float("inf")] * len(queries)
    marked = [float("inf")] * len(queries)
    hits = highlighted = 0
    for number in range(passes):
        for highlight, best in ((False, plain), (True, marked)):
            for position, query in enumerate(queries):
                start = time.perf_counter()
                built = list(index.search(query, k, fuser, scorer, highlight=highlight))
                elapsed = time.perf_counter() - start
                best[position] = min(best[position], elapsed)
                if highlight and number == 0:
                    hits += len(built)
                    highlighted += sum(
                        1
                        for hit in built
                        if hit.highlights and any(found.snippets for found in hit.highlights.values())
                    )
    n = max(len(queries), 1)
    return Result(
        queries=len(queries),
        hits=hits,
        highlighted=highlighted,
        plain_us_per_query=1e6 * sum(plain) / n,
        highlighted_us_per_query=1e6 * sum(marked) / n,
        us_per_hit=1e6 * (sum(marked) - sum(plain)) / max(hits, 1),
    )


def run(documents: list[Document], queries: list[str], k: int, passes: int, label: str) -> Result:
    """Build the index of ``documents`` (one segment, text stored), measure and print."""
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        with Index.create(Path(scratch) / "index", "english") as index:
            index.add_many(documents, progress=False)
            index.commit()
            if index.segment_count > 1:
                index.merge(force=True)
            print(f"{label}: {len(documents)} documents indexed in {time.perf_counter() - started:.1f} s")
            for query in queries:  # warm: the first read of each term checks its postings
                list(index.search(query, k, RRF(), BM25Scorer(), highlight=True))
            print(f"load average before: {os.getloadavg()}")
            result = measure(index, queries, k, passes)
            print(f"load average after: {os.getloadavg()}")
    print(
        f"{label}, top-{k}, {result.queries} queries, best of {passes} alternating passes: "
        f"{result.plain_us_per_query:.0f} µs/query plain, "
        f"{result.highlighted_us_per_query:.0f} µs/query with highlight=True; "
        f"{result.hits} hits ({result.highlighted} with a snippet): "
        f"{result.us_per_hit:.1f} µs per hit"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, build, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", type=Path, help=f"BEIR SciFact folder (default {DEFAULT_DATA})")
    parser.add_argument("--synthetic", type=int, help="documents of the synthetic corpus instead")
    parser.add_argument("--queries", type=int, default=300, help="queries (default 300)")
    parser.add_argument("--passes", type=int, default=5, help="alternating passes (default 5)")
    parser.add_argument("--k", type=int, default=10, help="hits per query (default 10)")
    args = parser.parse_args(argv)
    if args.scifact is not None and args.synthetic is not None:
        parser.error("give at most one of --scifact and --synthetic")
    if args.queries < 1 or args.passes < 1 or args.k < 1:
        parser.error("--queries, --passes and --k must be at least 1")
    if args.synthetic is not None:
        documents, queries = load_synthetic(args.synthetic, args.queries)
        label = f"synthetic {args.synthetic}"
    else:
        data = args.scifact or DEFAULT_DATA
        if not (data / "corpus.jsonl").is_file():
            parser.error(f"no SciFact corpus at {data} (give --scifact PATH or --synthetic N)")
        documents, queries = load_scifact(data, args.queries)
        label = "SciFact"
    run(documents, queries, args.k, args.passes, label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
