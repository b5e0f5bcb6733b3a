"""Find what holds the GIL while readers wait: commit under load, and a threads:N pool, profiled.

An in-process reader waits for the GIL whenever another thread holds it: a
writer committing, a sibling search, the load driver. Python's switch
interval (5 ms) bounds how long bytecode keeps it, but a C call that does not
release it holds it for its whole length. This script finds such holders
without a sampling profiler (which needs ptrace, often not allowed here):

* a *ticker* thread wakes every millisecond and arms ``faulthandler``'s
  watchdog for ``--stall-ms``; the watchdog is a C thread that needs no GIL,
  so when the ticker cannot get the GIL back in time, it dumps every
  thread's Python stack *during* the stall, naming the frame that holds it;
* the ticker's own lateness is a histogram of GIL waits (p50, p99, max).

Modes:

* ``commit`` (default): the commit-under-load window of ``weft-search bench
  load`` (SciFact, ``--commit-docs`` documents, a commit then a forced merge)
  with ``--threads`` reader threads searching in a closed loop; prints the
  waits outside and inside the window and the stalls' stacks, grouped.
* ``threads``: aggregate q/s of ``Index.search`` on 1 and 2 threads, BM25 on
  numpy, compiled, and the engine's rule (compiled while another search
  runs), alternating (the figures behind that rule in docs/BENCHMARKS.md).
* ``search``: the readers alone (no writer): the GIL share of one search,
  as the time inside the compiled BM25 call (GIL released) over the time
  of the whole ``Index.search`` (GIL held for the rest), measured on one
  thread; with it Amdahl's bound on what N threads can add.

    python bench/gil_stalls.py --data ../shared/datasets/scifact --mode commit
    python bench/gil_stalls.py --data ../shared/datasets/scifact --mode search --arm hybrid
    python bench/gil_stalls.py --data ../shared/datasets/scifact --mode threads --seconds 3

Prints the load average before and after: a figure from a loaded machine
is not a finding.
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import os
import re
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from weftsearch.bench import workloads
from weftsearch.documents import Document
from weftsearch.engine.index import Index


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Ticker:
    """A thread measuring its own wake-up lateness; stacks dumped for stalls over ``stall_s``."""

    def __init__(self, stall_s: float, dump_path: Path) -> None:
        self.stall_s = stall_s
        self.dump = open(dump_path, "w+")  # noqa: SIM115 - faulthandler writes to its descriptor
        self.late: list[tuple[float, float]] = []  # (time, lateness s)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="gil-ticker", daemon=True)

    def run(self) -> None:
        clock = time.perf_counter
        while not self.stop.is_set():
            faulthandler.dump_traceback_later(self.stall_s, repeat=False, file=self.dump)
            before = clock()
            time.sleep(0.001)
            after = clock()
            faulthandler.cancel_dump_traceback_later()
            self.late.append((after, after - before - 0.001))

    def stacks(self) -> collections.Counter[str]:
        """Per dump, each other thread's innermost frame, and its innermost weftsearch frame, grouped.

        A thread sleeping or waiting shows as such (``sleep``, ``wait``); the holder
        of the GIL is the one in the middle of work.
        """
        self.dump.flush()
        self.dump.seek(0)
        holders: collections.Counter[str] = collections.Counter()
        for block in self.dump.read().split("\n\n"):
            frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', block)
            if not frames or (frames[0][0].endswith("gil_stalls.py") and frames[0][2] == "run"):
                continue  # the ticker itself
            inner = frames[0]
            ours = next((f for f in frames if "/weftsearch/" in f[0]), None)
            where = f"{Path(inner[0]).name}:{inner[1]} {inner[2]}"
            if ours is not None and ours is not inner:
                where += f"  <- {Path(ours[0]).name}:{ours[1]} {ours[2]}"
            holders[where] += 1
        return holders


def _percentiles(values: np.ndarray) -> str:
    if values.size == 0:
        return "-"
    p50, p99 = np.percentile(values, [50, 99]) * 1e3
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {values.max() * 1e3:.1f} ms (n={values.size:,})"


def commit_mode(args: argparse.Namespace, root: Path) -> None:
    keys, texts, workload, _ = workloads.scifact_corpus(args.data, False)
    path = root / "commit"
    workloads.build_weft_index(path, keys, texts, None)
    index = Index.open(path)
    search = workloads.weft_search_function(index, workload, "bm25", 10, 100)
    index.add_many(
        (Document(f"load-{i:07d}", texts[i % len(texts)]) for i in range(args.commit_docs)), progress=False
    )
    stop = threading.Event()
    latencies: list[tuple[float, float]] = []

    def reader(offset: int) -> None:
        item, n = offset, len(workload)
        clock = time.perf_counter
        while not stop.is_set():
            began = clock()
            search(item % n)
            latencies.append((began, clock() - began))
            item += 7
            time.sleep(args.think_ms / 1e3)  # readers are not a tight loop: room for the writer

    ticker = Ticker(args.stall_ms / 1e3, root / "stalls.txt")
    readers = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(args.threads)]
    ticker.thread.start()
    for thread in readers:
        thread.start()
    time.sleep(args.before)
    began = time.perf_counter()
    index.commit()
    committed = time.perf_counter()
    index.merge(force=True)
    ended = time.perf_counter()
    time.sleep(args.before)
    stop.set()
    ticker.stop.set()
    for thread in readers:
        thread.join()
    ticker.thread.join()
    index.close(discard=True)
    late = np.array(ticker.late)
    search_lat = np.array(latencies)
    inside_late = (late[:, 0] >= began) & (late[:, 0] <= ended)
    inside_search = (search_lat[:, 0] >= began) & (search_lat[:, 0] <= ended)
    print(f"commit {committed - began:.2f} s, merge {ended - committed:.2f} s, {args.threads} reader threads")
    print(f"GIL wait (ticker lateness) outside: {_percentiles(late[~inside_late, 1])}")
    print(f"GIL wait (ticker lateness) inside:  {_percentiles(late[inside_late, 1])}")
    print(f"search time outside: {_percentiles(search_lat[~inside_search, 1])}")
    print(f"search time inside:  {_percentiles(search_lat[inside_search, 1])}")
    print(f"stalls over {args.stall_ms:g} ms: innermost frame of the threads other than the ticker")
    for frame, count in ticker.stacks().most_common(args.top):
        print(f"  {count:5d}  {frame}")
    print(f"(full dumps: {root / 'stalls.txt'})")


def search_mode(args: argparse.Namespace, root: Path) -> None:
    from weftsearch.native import bm25 as kernel

    hybrid = args.arm == "hybrid"
    keys, texts, workload, vectors = workloads.scifact_corpus(args.data, hybrid)
    path = root / "search"
    workloads.build_weft_index(path, keys, texts, vectors)
    index = Index.open(path, readonly=True)
    search = workloads.weft_search_function(index, workload, args.arm, 10, 100)
    compiled = kernel.compiled_bm25()
    released = [0.0]
    if compiled is not None:
        # Time every compiled BM25 call: the only stretch of a BM25 search without the GIL.
        # A search goes through weft_bm25_query (one call per query); top_k is the older
        # table-per-query entry point (a library built before it).
        for name in ("query", "top_k"):
            original = getattr(compiled, name, None)
            if original is None:
                continue

            def timed(*arguments: object, original: Callable[..., object] = original) -> object:
                began = time.perf_counter()
                try:
                    return original(*arguments)
                finally:
                    released[0] += time.perf_counter() - began

            object.__setattr__(compiled, name, timed)
    for item in range(200):
        search(item % len(workload))
    released[0] = 0.0
    count, began = 0, time.perf_counter()
    while time.perf_counter() - began < args.seconds:
        search(count % len(workload))
        count += 1
    total = time.perf_counter() - began
    share = released[0] / total
    print(f"{args.arm}: {count / total:,.0f} q/s on one thread, {total / count * 1e6:.1f} us a search")
    print(f"inside the compiled BM25 call (GIL released): {share:.1%} of the time")
    print(
        f"GIL held: {1 - share:.1%}; Amdahl's bound for any number of threads: "
        f"{1 / max(1 - share, 1e-9):.2f}x one thread (before the driver and the handoff take their share)"
    )
    index.close()


def _aggregate_qps(
    search: Callable[[int], object], n: int, threads: int, seconds: float
) -> tuple[float, float]:
    """Searches a second over ``threads`` threads in closed loops, and their voluntary switches a search.

    A thread that waits for the GIL sleeps until the holder hands it over: each such wait is
    one voluntary switch (and one wake-up of a sleeping thread, on a VM an interrupt between
    virtual CPUs), so the count says how often searches handed the GIL to each other, whatever
    else the machine runs.
    """
    counts = [0] * threads
    switches = [0] * threads
    stop = time.perf_counter() + seconds

    def work(thread: int) -> None:
        item = thread
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        while time.perf_counter() < stop:
            search(item % n)
            item += threads
            counts[thread] += 1
        switches[thread] = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(counts) / seconds, sum(switches) / max(sum(counts), 1)


def threads_mode(args: argparse.Namespace, root: Path) -> None:
    """Aggregate q/s on 1 and 2 threads for BM25's three choices of path on a small snapshot.

    ``numpy`` (always), ``compiled`` (always) and ``adaptive`` (the engine's rule:
    compiled while another search runs), alternating, ``--rounds`` times.
    """
    from weftsearch.scorers import bm25

    bm25_module: Any = bm25  # its private switches, patched for the measurement and restored

    keys, texts, workload, vectors = workloads.scifact_corpus(args.data, True)
    workloads.build_weft_index(root / "threads", keys, texts, vectors)
    index = Index.open(root / "threads", readonly=True)
    arms = {arm: workloads.weft_search_function(index, workload, arm, 10, 100) for arm in ("bm25", "hybrid")}
    in_flight, from_docs = bm25_module.searches_in_flight, bm25_module._COMPILED_FROM_DOCS
    for round_ in range(args.rounds):
        for mode in ("numpy", "compiled", "adaptive"):
            bm25_module._COMPILED_FROM_DOCS = 0 if mode == "compiled" else from_docs
            bm25_module.searches_in_flight = (lambda: 0) if mode == "numpy" else in_flight
            for arm, search in arms.items():
                for threads in (1, 2):
                    _aggregate_qps(search, len(workload), threads, 0.5)  # warm
                    qps, switches = _aggregate_qps(search, len(workload), threads, args.seconds)
                    print(
                        f"round {round_} {arm} {mode} {threads} thread(s): {qps:,.0f} q/s, "
                        f"{switches:.2f} voluntary context switches a search ({_load()})",
                        flush=True,
                    )
    bm25_module._COMPILED_FROM_DOCS, bm25_module.searches_in_flight = from_docs, in_flight
    index.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="SciFact folder")
    parser.add_argument("--mode", choices=("commit", "search", "threads"), default="commit")
    parser.add_argument("--rounds", type=int, default=2, help="threads mode: alternating rounds")
    parser.add_argument("--arm", choices=("bm25", "hybrid"), default="bm25")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--commit-docs", type=int, default=20_000)
    parser.add_argument("--stall-ms", type=float, default=20.0)
    parser.add_argument("--think-ms", type=float, default=0.5)
    parser.add_argument("--before", type=float, default=2.0, help="seconds of reads before and after")
    parser.add_argument("--seconds", type=float, default=5.0, help="search/threads mode: length of a loop")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    print(f"load average before: {_load()}; Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="weft-gil-") as tmp:
        if args.mode == "commit":
            commit_mode(args, Path(tmp))
        else:
            (search_mode if args.mode == "search" else threads_mode)(args, Path(tmp))
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
