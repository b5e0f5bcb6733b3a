"""What the searches inside a commit-under-load window wait on: per-request and per-stage timestamps.

The commit-under-load arm of ``weft-search bench load`` reports one p99 inside
the window; this script says which stage of the writer the slow requests
overlap. Two reader threads search SciFact at a fixed rate (each on its own
schedule: a late request starts at once, so lateness is latency), while a
writer thread commits ``--commit-docs`` added documents then
``merge(force=True)``, as bench load does. Recorded:

* each request's scheduled time, start, end and the thread CPU time it used;
* the writer's stages (wrapped engine functions: the forked child's run,
  opening and warming each new reader, publishing the manifest, replaying
  the recent searches, dropping the sealed buffer, the sweep);
* every garbage collection (``gc.callbacks``), with its generation;
* per-thread CPU time of the writer inside the window.

Prints p50/p99 per stage (requests scheduled in it) and the slowest
requests with the stages and collections they overlap.

    PYTHONPATH=src python bench/commit_window.py --data ../shared/datasets/scifact --arm bm25
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from weftsearch.bench import workloads
from weftsearch.documents import Document
from weftsearch.engine import children, warming
from weftsearch.engine import index as index_module
from weftsearch.engine.index import Index
from weftsearch.storage import directory as directory_module
from weftsearch.storage.segment import SegmentReader

Span = tuple[str, float, float]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Stages:
    """Wrapped engine functions record (name, start, end) here (writer thread only)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.gcs: list[Span] = []
        self._gc_start = 0.0
        self._restore: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, attribute: str, name: str, *, writer_only: bool = True) -> None:
        original = getattr(owner, attribute)
        spans = self.spans

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if writer_only and threading.current_thread().name != "writer":
                return original(*args, **kwargs)
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spans.append((name, began, time.perf_counter()))

        self._restore.append((owner, attribute, original))
        setattr(owner, attribute, wrapped)

    def gc_callback(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._gc_start = now
        else:
            self.gcs.append((f"gc{info['generation']}", self._gc_start, now))

    def undo(self) -> None:
        for owner, attribute, original in reversed(self._restore):
            setattr(owner, attribute, original)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/datasets/scifact")
    parser.add_argument("--arm", choices=("bm25", "hybrid"), default="bm25")
    parser.add_argument("--rate", type=float, default=2000.0, help="requests a second, both readers")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--at", type=float, default=5.0, help="seconds in: the commit starts")
    parser.add_argument("--commit-docs", type=int, default=20_000)
    parser.add_argument("--slowest", type=int, default=15)
    parser.add_argument("--dump", default=None, help="save the records as DUMP-rows.npy and DUMP-spans.txt")
    parser.add_argument("--switch-interval", type=float, default=None)
    parser.add_argument("--warm-searches", type=int, default=None, help="override WARM_SEARCHES")
    parser.add_argument("--warm-seconds", type=float, default=None, help="override WARM_SECONDS")
    args = parser.parse_args(argv)
    if args.warm_searches is not None:
        warming.WARM_SEARCHES = args.warm_searches
    if args.warm_seconds is not None:
        warming.WARM_SECONDS = args.warm_seconds
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)

    keys, texts, workload, vectors = workloads.scifact_corpus(args.data, args.arm == "hybrid")
    n = args.commit_docs
    stages = Stages()
    with tempfile.TemporaryDirectory(prefix="weft-cw-") as tmp:
        path = Path(tmp) / "index"
        workloads.build_weft_index(path, keys, texts, vectors)
        index = Index.open(path)
        search = workloads.weft_search_function(index, workload, args.arm, 10, 100)
        for item in range(len(workload)):
            search(item)
        index.add_many(
            (
                Document(f"load-{i:07d}", texts[i % len(texts)],
                         vector=None if vectors is None else vectors[i % len(texts)])
                for i in range(n)
            ),
            progress=False,
        )  # fmt: skip
        stages.wrap(children, "write_in_child", "child")
        stages.wrap(os, "fork", "fork")
        stages.wrap(index_module, "_own_reader", "open reader")
        stages.wrap(SegmentReader, "warm", "reader.warm")
        stages.wrap(warming.RecentSearches, "replay", "replay")
        stages.wrap(directory_module.IndexDirectory, "publish", "manifest")
        stages.wrap(directory_module.IndexDirectory, "sweep", "sweep")
        stages.wrap(index_module, "release_gradually", "release")
        stages.wrap(Index, "_seal", "seal")
        stages.wrap(Index, "_install_merged", "install merged")
        stages.wrap(Index, "_encode_pending_in_child", "encode pending")
        stages.wrap(Index, "_merged", "merged")
        stages.wrap(Index, "_publish", "publish")
        gc.callbacks.append(stages.gc_callback)

        per_reader = args.rate / 2
        count = int(args.seconds * per_reader)
        records: list[list[tuple[float, float, float, float, int]]] = [[], []]
        origin = time.perf_counter() + 0.5
        window: list[float] = []
        writer_cpu: list[float] = []

        thread_usage = resource.RUSAGE_THREAD

        def reader(which: int) -> None:
            rng = np.random.default_rng(which)
            gaps = rng.exponential(1.0 / per_reader, count)
            scheduled = origin + np.cumsum(gaps)
            items = rng.integers(0, len(workload), count)
            out = records[which]
            for when, item in zip(scheduled.tolist(), items.tolist(), strict=True):
                delay = when - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                start = time.perf_counter()
                cpu = time.thread_time()
                faults = resource.getrusage(thread_usage).ru_minflt
                search(item)
                out.append(
                    (
                        when,
                        start,
                        time.perf_counter(),
                        time.thread_time() - cpu,
                        resource.getrusage(thread_usage).ru_minflt - faults,
                    )
                )

        def writer() -> None:
            time.sleep(max(0.0, origin + args.at - time.perf_counter()))
            cpu = time.thread_time()
            began = time.perf_counter()
            index.commit()
            committed = time.perf_counter()
            index.merge(force=True)
            ended = time.perf_counter()
            writer_cpu.append(time.thread_time() - cpu)
            window.extend([began, committed, ended])

        threads = [threading.Thread(target=reader, args=(i,), name=f"reader-{i}") for i in range(2)]
        threads.append(threading.Thread(target=writer, name="writer"))
        print(f"load before: {_load()}", flush=True)
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(f"load after: {_load()}", flush=True)
        gc.callbacks.remove(stages.gc_callback)
        stages.undo()
        index.close(discard=True)

    began, committed, ended = window
    if args.dump:
        relative = [
            (w, r[0] - began, r[1] - began, r[2] - began, r[3], r[4])
            for w, rs in enumerate(records)
            for r in rs
        ]
        np.save(args.dump + "-rows.npy", np.array(relative))
        with open(args.dump + "-spans.txt", "w") as out:
            for name, start, end in stages.spans + stages.gcs:
                out.write(f"{name}\t{start - began}\t{end - began}\n")
    rows = np.array([r[:4] for rs in records for r in rs])
    latency = (rows[:, 2] - rows[:, 0]) * 1e3
    service = (rows[:, 2] - rows[:, 1]) * 1e3
    cpu = rows[:, 3] * 1e3
    inside = (rows[:, 0] >= began) & (rows[:, 0] <= ended)

    def show(label: str, mask: np.ndarray[Any, Any]) -> None:
        if not mask.any():
            print(f"{label:>28}: no requests")
            return
        print(
            f"{label:>28}: n={int(mask.sum()):6d}  p50 {np.percentile(latency[mask], 50):7.2f}"
            f"  p99 {np.percentile(latency[mask], 99):7.2f}  max {latency[mask].max():7.2f} ms"
            f"  (service p99 {np.percentile(service[mask], 99):6.2f},"
            f" cpu p99 {np.percentile(cpu[mask], 99):5.2f})"
        )

    print(
        f"commit {committed - began:.2f} s, merge {ended - committed:.2f} s, writer CPU {writer_cpu[0]:.2f} s"
    )
    show("before", rows[:, 0] < began)
    show("inside", inside)
    show("after", rows[:, 0] > ended)
    spans = sorted(stages.spans + stages.gcs, key=lambda s: s[1])
    print("stages (s from commit start, length ms; requests scheduled in the stage):")
    for name, start, end in spans:
        if name.startswith("gc") and end - start < 0.002:
            continue
        mask = (rows[:, 0] >= start) & (rows[:, 0] <= end) | (rows[:, 1] <= end) & (rows[:, 2] >= start)
        p99 = np.percentile(latency[mask], 99) if mask.any() else float("nan")
        length = 1e3 * (end - start)
        print(f"  {name:>15} {start - began:7.3f} {length:9.2f} ms  n={int(mask.sum()):5d} p99 {p99:7.2f}")
    print(f"collections: {len(stages.gcs)} ({sum(e - s for _, s, e in stages.gcs) * 1e3:.1f} ms)")
    print(f"slowest {args.slowest} (scheduled s from commit start: latency, service, cpu ms; overlapping):")
    longest = np.argsort(service)[::-1][: args.slowest]
    for title, order in (("by latency", np.argsort(latency)[::-1][: args.slowest]), ("by service", longest)):
        print(title)
        for position in order:
            when, start, end = rows[position, :3]
            overlapping = [
                f"{name}({start_ - began:.3f}+{1e3 * (end_ - start_):.0f})"
                for name, start_, end_ in spans
                if start_ <= end and end_ >= when and not (name == "gc0" and end_ - start_ < 0.001)
            ]
            print(
                f"  {when - began:7.3f} {start - began:7.3f}: {latency[position]:7.2f}"
                f" {service[position]:7.2f} {cpu[position]:6.2f}  " + " ".join(overlapping)
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
