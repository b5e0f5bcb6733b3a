"""Benchmark: "text in, hybrid out" (issue 30's Measured section).

Four parts, each printing its figures with the load average (the machine may
be shared: the figures are indicative, not tests):

- ``ingest``: documents per second for SciFact text (title and text), the
  embedding included (all-MiniLM-L6-v2 int8, offline), and the peak resident
  set of each run (``wait4``'s ``ru_maxrss``, children included), in
  alternating passes of three arms, each a fresh process:
  ``weft-search index --embed minilm-l6-int8`` (embedding at the index);
  ``weft-search embed --texts`` then ``weft-search index --vectors`` (the two
  commands of before, timed together); and LanceDB's embedding registry with
  the same model (the weft encoder registered as a LanceDB
  ``TextEmbeddingFunction``: LanceDB's registry has no built-in function that
  loads this ONNX model offline, its ``sentence-transformers`` and
  ``huggingface`` ones need torch), ``create_table`` + ``add``.
- ``query``: latency of a hybrid search (BM25 + vector, RRF) of query text,
  the embedding included, p50/p99 over SciFact's queries: in Python
  (``Index.search``) and through ``weft-search serve`` on 127.0.0.1
  (``POST /v1/search`` with text only, one client, sequential).
- ``facets``: ms per ``Index.facets`` call on N synthetic documents with three
  list fields, filters matching about 1%, 10% and 100% of the documents.
- ``pages``: ms of page 1 and page 10 (k = 10) of a BM25 search of SciFact,
  page 10 by ``offset=90`` and by following nine cursors.

Usage::

    python bench/text_in.py ingest [--docs 1000] [--repeat 2]
    python bench/text_in.py query [--docs 1000] [--queries 300]
    python bench/text_in.py facets [--docs 200000] [--repeat 5]
    python bench/text_in.py pages [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets" / "scifact"
WEFT = [sys.executable, "-c", "from weftsearch.cli import main; raise SystemExit(main())"]


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def _texts(docs: int) -> list[dict[str, str]]:
    """The first ``docs`` SciFact documents as ``{"id", "text"}``, title and text joined."""
    out = []
    with open(DATA / "corpus.jsonl", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            out.append({"id": str(row["_id"]), "text": f"{row.get('title', '')} {row['text']}".strip()})
            if len(out) == docs:
                break
    return out


def _run(argv: Sequence[str]) -> tuple[float, int]:
    """Run ``argv`` to the end; its wall seconds and peak resident set in MiB (children included)."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{argv[:4]} failed: {child.stderr.read().decode() if child.stderr else ''}")
    return elapsed, usage.ru_maxrss // 1024


_LANCE_CHILD = r"""
import sys, json
import lancedb
from lancedb.embeddings import TextEmbeddingFunction, get_registry, register
from lancedb.pydantic import LanceModel, Vector
from weftsearch.embed import Encoder

_ENCODER = []

@register("weft-minilm-int8")
class WeftMiniLM(TextEmbeddingFunction):
    def ndims(self):
        return 384

    def generate_embeddings(self, texts):
        if not _ENCODER:
            _ENCODER.append(Encoder())
        return list(_ENCODER[0].encode([str(t) for t in texts], progress=False))

func = get_registry().get("weft-minilm-int8").create()

class Doc(LanceModel):
    id: str
    text: str = func.SourceField()
    vector: Vector(384) = func.VectorField()

rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
table = lancedb.connect(sys.argv[2]).create_table("docs", schema=Doc)
table.add(rows)
assert table.count_rows() == len(rows)
"""


def ingest(docs: int, repeat: int) -> None:
    """Docs/s and peak RSS of the three ingest arms, in alternating passes."""
    rows = _texts(docs)
    work = Path(tempfile.mkdtemp(prefix="weft-text-in-"))
    try:
        corpus = work / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        arms: dict[str, Callable[[Path], tuple[float, int]]] = {}

        def at_index(out: Path) -> tuple[float, int]:
            return _run([*WEFT, "index", str(corpus), "--index", str(out), "--embed", "minilm-l6-int8"])

        def separately(out: Path) -> tuple[float, int]:
            vectors = out.with_suffix(".vectors")
            embed_s, embed_rss = _run(
                [*WEFT, "embed", "--texts", str(corpus), "--out", str(vectors), "--no-progress"]
            )
            index_s, index_rss = _run(
                [*WEFT, "index", str(corpus), "--index", str(out), "--vectors", str(vectors / "corpus.npy")]
            )
            return embed_s + index_s, max(embed_rss, index_rss)

        def lance(out: Path) -> tuple[float, int]:
            return _run([sys.executable, "-c", _LANCE_CHILD, str(corpus), str(out)])

        arms["weft index --embed"] = at_index
        arms["weft embed + index"] = separately
        try:
            import lancedb  # noqa: F401

            arms["lancedb registry"] = lance
        except ImportError:
            print("lancedb is not installed: its arm is skipped")
        results: dict[str, list[tuple[float, int]]] = {name: [] for name in arms}
        print(f"ingest: {docs} SciFact documents, {repeat} alternating passes; {_load()}")
        for number in range(repeat):
            for name, arm in arms.items():
                out = work / f"{name.replace(' ', '_')}-{number}"
                results[name].append(arm(out))
                print(f"  pass {number + 1} {name}: {docs / results[name][-1][0]:.1f} docs/s", flush=True)
        for name, runs in results.items():
            rates = [docs / seconds for seconds, _ in runs]
            rss = max(peak for _, peak in runs)
            print(
                f"{name:<22} {statistics.median(rates):7.1f} docs/s (passes {min(rates):.1f} .. "
                f"{max(rates):.1f}), peak RSS {rss} MiB"
            )
        print(_load())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _queries(count: int) -> list[str]:
    """The texts of the first ``count`` SciFact queries."""
    with open(DATA / "queries.jsonl", encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines][:count]


def _percentiles(samples: Sequence[float]) -> str:
    ms = np.array(samples) * 1000
    return f"p50 {np.percentile(ms, 50):.2f} ms, p99 {np.percentile(ms, 99):.2f} ms (n={len(ms)})"


def query(docs: int, queries: int) -> None:
    """Hybrid search latency with query embedding, in Python and through the server."""
    import httpx

    from weftsearch import RRF, BM25Scorer, Index, VectorScorer
    from weftsearch.server.launch import ServerProcess

    texts = _queries(queries)
    work = Path(tempfile.mkdtemp(prefix="weft-text-in-"))
    try:
        corpus = work / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(row) + "\n" for row in _texts(docs)), encoding="utf-8")
        _run([*WEFT, "index", str(corpus), "--index", str(work / "idx"), "--embed", "minilm-l6-int8"])
        print(f"query: {len(texts)} SciFact queries over {docs} documents, rrf(bm25, vector); {_load()}")
        with Index.open(work / "idx", readonly=True) as index:
            index.search(texts[0], 10, RRF(), BM25Scorer(), VectorScorer())  # loads the model
            took = []
            for text in texts:
                started = time.perf_counter()
                index.search(text, 10, RRF(), BM25Scorer(), VectorScorer())
                took.append(time.perf_counter() - started)
        print(f"  Python Index.search, embedding included: {_percentiles(took)}")
        with (
            ServerProcess(["--index", str(work / "idx"), "--readonly"]) as server,
            httpx.Client(base_url=server.base_url, timeout=60) as client,
        ):
            body = {"text": texts[0], "spec": "rrf(bm25, vector)", "k": 10}
            assert client.post("/v1/search", json=body).status_code == 200
            took = []
            for text in texts:
                started = time.perf_counter()
                answer = client.post("/v1/search", json={**body, "text": text})
                took.append(time.perf_counter() - started)
                assert answer.status_code == 200 and answer.json()["query_vector"]["source"] == "server"
        print(f"  server POST /v1/search (127.0.0.1), embedding included: {_percentiles(took)}")
        print(_load())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def facets(docs: int, repeat: int) -> None:
    """ms per Index.facets over three list fields, at about 1%, 10% and 100% of documents matching."""
    from weftsearch import Document, Index

    rng = np.random.default_rng(7)
    tags = [f"t{i}" for i in range(200)]
    authors = [f"a{i}" for i in range(5_000)]
    work = Path(tempfile.mkdtemp(prefix="weft-text-in-"))
    try:
        started = time.perf_counter()
        with Index.create(work / "idx") as index:
            for start in range(0, docs, 50_000):
                batch = []
                for i in range(start, min(docs, start + 50_000)):
                    picked = rng.integers(0, 200, 3)
                    batch.append(
                        Document(
                            f"d{i}",
                            "",
                            fields={
                                "tags": [tags[j] for j in sorted(set(picked.tolist()))],
                                "authors": [authors[j] for j in rng.integers(0, 5_000, 2).tolist()],
                                "years": [int(y) for y in rng.integers(1990, 2025, 2).tolist()],
                                "bucket": int(i % 100),
                            },
                        )
                    )
                index.add_many(batch, progress=False)
                index.commit()
            index.merge(force=True)
            index.commit()
        built = time.perf_counter() - started
        print(f"facets: {docs} documents, 3 list fields, built in {built:.0f} s; {_load()}")
        with Index.open(work / "idx", readonly=True) as index:
            for share, where in (("1%", "bucket = 0"), ("10%", "bucket < 10"), ("100%", None)):
                took = []
                for _ in range(repeat):
                    begun = time.perf_counter()
                    counted = index.facets(where, ["tags", "authors", "years"], k=10)
                    took.append(time.perf_counter() - begun)
                ms = sorted(t * 1000 for t in took)
                print(
                    f"  {share:>4} matching: median {statistics.median(ms):.1f} ms "
                    f"(min {ms[0]:.1f}, max {ms[-1]:.1f}; {repeat} calls); top tag {counted['tags'][0]}"
                )
        print(_load())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def pages(repeat: int) -> None:
    """ms of page 1 and page 10 (offset and cursor) of a BM25 search of SciFact."""
    from weftsearch import RRF, BM25Scorer, Index

    texts = _queries(repeat)
    work = Path(tempfile.mkdtemp(prefix="weft-text-in-"))
    try:
        corpus = work / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(row) + "\n" for row in _texts(10**9)), encoding="utf-8")
        _run([*WEFT, "index", str(corpus), "--index", str(work / "idx")])
        print(f"pages: BM25 over SciFact, k=10, {len(texts)} queries; {_load()}")
        with Index.open(work / "idx", readonly=True) as index:
            fuser, scorer = RRF(), BM25Scorer()
            timed: dict[str, list[float]] = {
                "page 1": [],
                "page 10 by offset=90": [],
                "page 10 by 9 cursors": [],
            }
            for text in texts:
                # Untimed first: the query's first search builds its per-snapshot caches (term
                # lookups, postings), which every page after it finds built.
                index.search(text, 100, fuser, scorer)
                begun = time.perf_counter()
                first = index.search(text, 10, fuser, scorer)
                timed["page 1"].append(time.perf_counter() - begun)
                begun = time.perf_counter()
                index.search(text, 10, fuser, scorer, offset=90)
                timed["page 10 by offset=90"].append(time.perf_counter() - begun)
                page: Any = first
                begun = time.perf_counter()
                for _ in range(9):
                    if page.next_cursor is None:
                        break
                    page = index.search(text, 10, fuser, scorer, after=page.next_cursor)
                timed["page 10 by 9 cursors"].append(time.perf_counter() - begun)
            for name, took in timed.items():
                print(f"  {name:<22} {_percentiles(took)}")
        print(_load())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    """Parse the arguments and run one part."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parts = parser.add_subparsers(dest="part", required=True)
    one = parts.add_parser("ingest")
    one.add_argument("--docs", type=int, default=1000)
    one.add_argument("--repeat", type=int, default=2)
    two = parts.add_parser("query")
    two.add_argument("--docs", type=int, default=1000)
    two.add_argument("--queries", type=int, default=300)
    three = parts.add_parser("facets")
    three.add_argument("--docs", type=int, default=200_000)
    three.add_argument("--repeat", type=int, default=5)
    four = parts.add_parser("pages")
    four.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    if args.part == "ingest":
        ingest(args.docs, args.repeat)
    elif args.part == "query":
        query(args.docs, args.queries)
    elif args.part == "facets":
        facets(args.docs, args.repeat)
    else:
        pages(args.repeat)


if __name__ == "__main__":
    main()
