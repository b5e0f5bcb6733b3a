"""Persistence benchmarks: open time and memory, and search latency during a commit.

Prints figures; never asserts. Three parts, each selectable:

``open``    Open time and resident memory of a committed index: all of SciFact
            (read from ../shared/datasets/scifact) and a synthetic index of
            ``--synthetic`` documents (default 1,000,000) committed in batches.
            Each open runs in a fresh subprocess so the page cache of the writer
            and Python's own caches do not flatter it; the subprocess reports
            the seconds to ``Index.open`` and its peak RSS before and after
            opening, then after one query.
``commit``  p50/p99 latency of BM25 searches running in threads while one thread
            commits ``--commit-docs`` (default 20,000) new documents, against the
            same searches in a window of the same length just before it, on
            the same snapshot; ``--rounds`` (default 10) such commits, each
            reported, then the ratio over all of them (target <= 1.5).

Usage: ``python bench/persistence.py [--parts open,commit] [--synthetic N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from weftsearch import Document

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "datasets" / "scifact"

_OPEN_PROBE = """
import json, resource, sys, time
from weftsearch import Index, BM25Scorer, RRF
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20
before = rss()
t0 = time.perf_counter()
index = Index.open(sys.argv[1], readonly=True)
opened = time.perf_counter() - t0
after_open = rss()
t1 = time.perf_counter()
index.search(sys.argv[2], 10, RRF(), BM25Scorer())
first_query = time.perf_counter() - t1
print(json.dumps({"open_s": opened, "first_query_s": first_query, "rss_mb_before": before,
                  "rss_mb_after_open": after_open, "rss_mb_after_query": rss(),
                  "segments": index.segment_count, "documents": len(index)}))
"""


def _machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}"


def _probe_open(path: Path, query: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    out = subprocess.run(
        [sys.executable, "-c", _OPEN_PROBE, str(path), query],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def _synthetic_documents(start: int, count: int, rng: np.random.Generator, vocabulary: int) -> list[Document]:

    # Zipf-like term ids: a few very common terms, a long tail.
    lengths = rng.integers(8, 24, size=count)
    terms = rng.zipf(1.3, size=int(lengths.sum())) % vocabulary
    documents = []
    offset = 0
    for i in range(count):
        words = " ".join(f"t{t}" for t in terms[offset : offset + lengths[i]])
        offset += int(lengths[i])
        documents.append(Document(f"doc{start + i:08d}", words))
    return documents


def part_open(data: Path, synthetic: int, batch: int) -> None:
    from weftsearch import Index
    from weftsearch.corpus import load_documents

    print("== open time and resident memory (fresh subprocess per open)")
    with tempfile.TemporaryDirectory() as tmp:
        if (data / "corpus.jsonl").exists():
            path = Path(tmp) / "scifact"
            documents = load_documents(data, "beir")
            started = time.perf_counter()
            with Index.create(path) as index:
                index.add_many(documents, progress=False)
                index.commit()
            build = time.perf_counter() - started
            probe = _probe_open(path, "vitamin d bone density")
            print(
                f"scifact ({probe['documents']:.0f} docs, {probe['segments']:.0f} segment): "
                f"build {build:.2f} s; "
                f"open {probe['open_s'] * 1e3:.2f} ms; first query {probe['first_query_s'] * 1e3:.1f} ms; "
                f"RSS {probe['rss_mb_before']:.0f} MB before open, {probe['rss_mb_after_open']:.0f} MB "
                f"after, {probe['rss_mb_after_query']:.0f} MB after one query"
            )
        else:
            print(f"scifact: skipped ({data} not found)")
        if synthetic:
            path = Path(tmp) / "synthetic"
            rng = np.random.default_rng(20261202)
            started = time.perf_counter()
            with Index.create(path, analyzer="simple") as index:
                for start in range(0, synthetic, batch):
                    docs: list[Document] = _synthetic_documents(
                        start, min(batch, synthetic - start), rng, 50_000
                    )
                    index.add_many(docs, progress=False)
                    index.commit()
                    index.merge()
            build = time.perf_counter() - started
            size = sum(p.stat().st_size for p in path.iterdir())
            probe = _probe_open(path, "t1 t17 t300")
            print(
                f"synthetic ({probe['documents']:.0f} docs in {probe['segments']:.0f} segments, "
                f"{size / 2**20:.0f} MiB on disk; built in batches of {batch} in {build:.0f} s): "
                f"open {probe['open_s'] * 1e3:.2f} ms; first query {probe['first_query_s'] * 1e3:.1f} ms; "
                f"RSS {probe['rss_mb_before']:.0f} MB before open, {probe['rss_mb_after_open']:.0f} MB "
                f"after, {probe['rss_mb_after_query']:.0f} MB after one query"
            )


def part_commit(data: Path, commit_docs: int, threads: int, rounds: int) -> None:
    from weftsearch import RRF, BM25Scorer, Index
    from weftsearch.corpus import iter_queries, load_documents

    print("== search latency during a commit")
    if not (data / "corpus.jsonl").exists():
        print(f"skipped ({data} not found)")
        return
    documents = load_documents(data, "beir")
    queries = [q.query.text for q in iter_queries(data / "queries.jsonl")][:300]
    rng = np.random.default_rng(7)
    quiet: list[float] = []
    busy: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Index.create(Path(tmp) / "idx") as index:
        index.add_many(documents, progress=False)
        index.commit()
        scorer, fuser = BM25Scorer(), RRF()
        for text in queries:  # warm caches outside both windows
            index.search(text, 10, fuser, scorer)

        def measure(stop: threading.Event, out: list[float]) -> None:
            position = 0
            while not stop.is_set():
                text = queries[position % len(queries)]
                position += 1
                started = time.perf_counter()
                index.search(text, 10, fuser, scorer)
                out.append(time.perf_counter() - started)

        def window(action: object) -> tuple[list[float], float]:
            stop = threading.Event()
            samples: list[list[float]] = [[] for _ in range(threads)]
            workers = [threading.Thread(target=measure, args=(stop, s)) for s in samples]
            for worker in workers:
                worker.start()
            started = time.perf_counter()
            action()  # type: ignore[operator]
            elapsed = time.perf_counter() - started
            stop.set()
            for worker in workers:
                worker.join()
            return [x for s in samples for x in s], elapsed

        # An untimed commit of the same size first: it warms the commit path
        # and tells how long the first quiet window should be.
        index.add_many(_synthetic_documents(0, commit_docs, rng, 20_000), progress=False)
        started = time.perf_counter()
        index.commit()
        last_commit_s = time.perf_counter() - started
        for round_ in range(1, rounds + 1):
            # The documents are added (analysed) before both windows, so both
            # search the same published snapshot; the commit window holds the
            # commit itself, which seals them into a segment, writes it, and
            # publishes the manifest. The quiet window lasts as long as the
            # previous commit did and comes right before this one, so both see
            # the same machine.
            index.add_many(
                _synthetic_documents(round_ * commit_docs, commit_docs, rng, 20_000), progress=False
            )
            outside, outside_s = window(lambda s=last_commit_s: time.sleep(s))
            during, during_s = window(index.commit)
            last_commit_s = during_s
            quiet.extend(outside)
            busy.extend(during)
            print(
                f"commit {round_} of {commit_docs} documents: {during_s:.2f} s; p99 "
                f"{np.percentile(during, 99) * 1e3:.3f} ms during ({len(during)} searches) vs "
                f"{np.percentile(outside, 99) * 1e3:.3f} ms outside ({len(outside)} in {outside_s:.2f} s)"
            )
    for label, samples in (("outside a commit", quiet), ("during a commit", busy)):
        values = np.array(samples) * 1e3
        print(
            f"{label}: {values.size} searches over {threads} threads in {rounds} windows; "
            f"p50 {np.percentile(values, 50):.3f} ms, p99 {np.percentile(values, 99):.3f} ms"
        )
    q50 = np.percentile(busy, 50) / np.percentile(quiet, 50)
    q99 = np.percentile(busy, 99) / np.percentile(quiet, 99)
    print(f"ratio during/outside over all {rounds} commits: p50 {q50:.2f}, p99 {q99:.2f} (target <= 1.5)")
    print(
        "note: threads share the GIL with the committing thread; the ratio measures waiting, "
        "not CPU contention alone"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--parts", default="open,commit")
    parser.add_argument("--synthetic", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--commit-docs", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10, help="commits measured (each its own windows)")
    args = parser.parse_args()
    print(f"machine: {_machine()}; date {time.strftime('%Y-%m-%d')}")
    print(
        f"max RSS of this process so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    parts = set(args.parts.split(","))
    if "open" in parts:
        part_open(args.data, args.synthetic, args.batch)
    if "commit" in parts:
        part_commit(args.data, args.commit_docs, args.threads, args.rounds)


if __name__ == "__main__":
    main()
