"""First search after a commit against the steady state (issue 31, item 5).

Indexes SciFact (title + text) into an on-disk index and commits; then, ``--commits`` times:
runs a query once (so the segments that were already there have seen its terms), adds
``--batch`` new documents, commits, and times the same query right after the commit
(``first``) and then ``--repeat`` times more (``steady``, the median of those). The query
changes every round (SciFact's queries in order). Prints the median and p90 of ``first``,
the median of ``steady`` and their ratio, for BM25 top-10 through ``Index.search``, and the
load average. ``--profile`` prints the cProfile of the first searches instead. Run::

    PYTHONPATH=src python bench/first_search.py --scifact ../shared/datasets/scifact

Background merges are off (``background_merge=False``) so every round publishes the same
kind of snapshot (one new small segment); ``--merge`` merges after each commit instead, so
the first search meets a freshly merged segment.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from index_size import documents_scifact

from weftsearch import RRF, BM25Scorer, Document, Index


def queries_scifact(path: Path) -> list[str]:
    """SciFact's query texts, in file order."""
    with (path / "queries.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle if line.strip()]


def main() -> int:
    """Build, commit, time, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", type=Path, required=True, help="BEIR SciFact folder")
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--batch", type=int, default=20, help="documents added per commit")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--merge", action="store_true", help="force a merge after each commit")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    documents = documents_scifact(args.scifact)
    queries = queries_scifact(args.scifact)
    scorer, fuser = BM25Scorer(), RRF()
    firsts: list[float] = []
    steadies: list[float] = []
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "index"
        with Index.create(path, "english", background_merge=False) as index:
            index.add_many(documents, progress=False)
            index.commit()
            for round_ in range(args.commits):
                query = queries[round_ % len(queries)]
                index.search(query, 10, fuser, scorer)
                extra = documents[(round_ * args.batch) % len(documents) :][: args.batch]
                index.add_many(
                    [Document(f"new-{round_}-{d.key}", d.text) for d in extra], progress=False
                )
                index.commit()
                if args.merge:
                    index.merge(force=True)
                if args.profile:
                    profile.enable()
                began = time.perf_counter()
                index.search(query, 10, fuser, scorer)
                firsts.append(time.perf_counter() - began)
                if args.profile:
                    profile.disable()
                times = []
                for _ in range(args.repeat):
                    began = time.perf_counter()
                    index.search(query, 10, fuser, scorer)
                    times.append(time.perf_counter() - began)
                steadies.append(statistics.median(times))
    if args.profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    first = statistics.median(firsts) * 1e3
    p90 = statistics.quantiles(firsts, n=10)[-1] * 1e3
    steady = statistics.median(steadies) * 1e3
    print(
        f"scifact + {args.batch} documents a commit, {args.commits} commits"
        f"{', merged each time' if args.merge else ''}, BM25 top-10, load average {os.getloadavg()[0]:.2f}"
    )
    print(f"  first search after commit: median {first:.3f} ms, p90 {p90:.3f} ms")
    print(f"  steady state (same query): median {steady:.3f} ms")
    print(f"  first / steady: {first / steady:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
