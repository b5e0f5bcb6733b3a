"""Concurrency: searches see one whole generation, never wait on a commit, and keep their snapshot.

The documents encode the round that wrote them. Round ``g`` of the writer
replaces the whole live set by the key set ``K(g)`` (always holding
``ANCHOR``): first it deletes the live keys outside ``K(g)``, then it upserts
every key of ``K(g)`` with text ``common gen<g> ...`` (exactly ``length(g)``
analysed terms) and field ``gen = g``, in one ``add_many``. Each write is
atomic for readers, so every state a reader may observe is all of one round
``t``: either the full set ``K(t)`` or, between the two writes of round
``t + 1``, the set ``K(t) & K(t + 1)``. A snapshot that shows round ``t`` must
therefore have exactly one of those key sets, ``N`` equal to its size, avgdl
exactly ``length(t)``, and document frequencies of ``common`` and ``gen<t>``
equal to ``N`` (and 0 for the neighbouring rounds' tokens). Commits happen only
after a round's upsert, so a reader in another process sees ``K(t)`` only.

Visibility is near-real-time (``Index.snapshot``): threads other than the
writer see the newest *published* snapshot, which the writer publishes when it
calls ``snapshot``/``search``, ``refresh``, ``commit`` or ``merge``. The writer
here sometimes publishes between the two writes of a round (``refresh``), so
readers see the intermediate key sets too.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

import weftsearch
from weftsearch import RRF, BM25Scorer, Document, Index, Query, SearchResults, Snapshot, Stream
from weftsearch.engine.merge_policy import MergePolicy
from weftsearch.engine.search import search_snapshot
from weftsearch.storage.directory import IndexDirectory

REPO = Path(__file__).resolve().parents[2]
SRC = Path(weftsearch.__file__).resolve().parents[1]

SEED = 20240611
UNIVERSE = [f"k{i:03d}" for i in range(60)]
ANCHOR = UNIVERSE[0]
COMMON = "common"
#: Seconds the writer runs in the bounded tests.
WRITER_SECONDS = 2.0
#: Rounds the writer must complete while readers search, however long they take: on a
#: machine whose cores are busy with other work two seconds may hold one round (CI saw it).
WRITER_ROUNDS = 5
#: Seconds within which the writer must manage them: starvation (a commit waiting for the
#: GIL behind searching threads took 83 s once) fails the test, a busy machine does not.
WRITER_LIMIT_SECONDS = 90.0
READERS = 3
#: More than the largest key set, so a search returns every live document.
K = 100


def length(round_: int) -> int:
    """The analysed length of every document of ``round_``."""
    return 4 + round_ % 7


def keys_of(round_: int) -> frozenset[str]:
    """``K(round_)``: the live key set after round ``round_`` (deterministic)."""
    rng = random.Random(f"concurrency/{SEED}/{round_}")
    return frozenset([ANCHOR, *rng.sample(UNIVERSE[1:], rng.randint(15, 40))])


def text_of(key: str, round_: int) -> str:
    filler = [f"w{(int(key[1:]) * 7 + round_ + i) % 50}" for i in range(length(round_) - 2)]
    return " ".join([COMMON, f"gen{round_}", *filler])


def documents_of(round_: int) -> list[Document]:
    return [Document(key, text_of(key, round_), fields={"gen": round_}) for key in sorted(keys_of(round_))]


def allowed(round_: int, committed_only: bool) -> tuple[frozenset[str], ...]:
    """The key sets a reader may see for ``round_``."""
    full = keys_of(round_)
    return (full,) if committed_only else (full, full & keys_of(round_ + 1))


def write_round(index: Index, round_: int, publish_between: bool = False) -> None:
    """Replace the live set of ``round_ - 1`` by that of ``round_`` (two atomic writes).

    ``publish_between``: make the state between the two writes visible to other threads.
    """
    index.delete_many(sorted(set(index.keys()) - keys_of(round_)))
    if publish_between:
        index.refresh()
    index.add_many(documents_of(round_), progress=False)


def check_snapshot(snapshot: Snapshot, committed_only: bool = False) -> int:
    """Assert ``snapshot`` shows one whole round; return that round."""
    n = snapshot.n_docs
    assert n > 0, "the anchor key is always live"
    keys = snapshot.keys()
    documents = [snapshot.document(position) for position in range(n)]
    rounds = {cast(int, document.fields["gen"]) for document in documents}
    assert len(rounds) == 1, f"one snapshot mixes rounds {sorted(rounds)}"
    (round_,) = rounds
    for document in documents:
        assert document.text == text_of(document.key, round_), f"{document.key} does not hold round {round_}"
    assert frozenset(keys) in allowed(round_, committed_only), f"round {round_} never had keys {sorted(keys)}"
    assert len(keys) == n
    assert snapshot.avgdl == float(length(round_))
    assert snapshot.doc_freq(COMMON) == n
    assert snapshot.doc_freq(f"gen{round_}") == n
    assert snapshot.doc_freq(f"gen{round_ - 1}") == 0
    assert snapshot.doc_freq(f"gen{round_ + 1}") == 0
    return round_


def check_search(index: Index, committed_only: bool = False) -> int:
    """Search the current snapshot; the hits must be one whole round. Return it."""
    results = index.search(COMMON, K, RRF(), BM25Scorer())
    rounds = {cast(int, hit.fields["gen"]) for hit in results}
    assert len(rounds) == 1, f"one search mixes rounds {sorted(rounds)}"
    (round_,) = rounds
    assert frozenset(results.keys) in allowed(round_, committed_only)
    # Every document of a round has the same length and term frequencies: one BM25 score.
    assert len({hit.signals[0].score for hit in results}) == 1
    return round_


def new_index(path: Path) -> Index:
    index = Index.create(path, "english", merge_policy=MergePolicy(factor=3))
    index.add_many(documents_of(0), progress=False)
    index.commit()
    return index


# ---------------------------------------------------------------- threads in one process


@dataclass
class Reader:
    """One searching thread's tally."""

    checks: int = 0
    rounds: set[int] | None = None
    intermediate: int = 0  # snapshots that showed K(t) & K(t + 1), between a round's two writes
    error: str | None = None


def test_readers_see_whole_generations_while_a_writer_commits(tmp_path: Path) -> None:
    index = new_index(tmp_path / "index")
    stop = threading.Event()
    readers = [Reader(rounds=set()) for _ in range(READERS)]

    def read(tally: Reader, searching: bool) -> None:
        try:
            while not stop.is_set():
                if searching:
                    round_ = check_search(index)
                else:
                    snapshot = index.snapshot()
                    round_ = check_snapshot(snapshot)
                    tally.intermediate += frozenset(snapshot.keys()) != keys_of(round_)
                assert tally.rounds is not None
                tally.rounds.add(round_)
                tally.checks += 1
        except BaseException:
            tally.error = traceback.format_exc()

    threads = [
        threading.Thread(target=read, args=(tally, position % 2 == 0), daemon=True)
        for position, tally in enumerate(readers)
    ]
    for thread in threads:
        thread.start()
    rounds_written = 0
    try:
        started = time.monotonic()
        while not any(t.error for t in readers):
            elapsed = time.monotonic() - started
            if elapsed >= WRITER_LIMIT_SECONDS or (
                elapsed >= WRITER_SECONDS and rounds_written >= WRITER_ROUNDS
            ):
                break
            rounds_written += 1
            write_round(index, rounds_written, publish_between=rounds_written % 2 == 1)
            index.commit()
            if rounds_written % 4 == 0:
                index.merge(force=True)
            elif rounds_written % 2 == 0:
                index.merge()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    for tally in readers:
        assert tally.error is None, tally.error
    assert rounds_written >= WRITER_ROUNDS, (
        f"the writer managed only {rounds_written} rounds in {WRITER_LIMIT_SECONDS:g} s"
    )
    for tally in readers:
        assert tally.checks >= 5, f"a reader managed only {tally.checks} checks"
    seen = set().union(*(tally.rounds or set() for tally in readers))
    assert len(seen) >= 3, f"readers saw only rounds {sorted(seen)}: the test proved little"
    assert sum(tally.intermediate for tally in readers), "no reader saw a state between two writes"
    # Once commit returned, every thread sees what it committed; so does a reopen.
    final: list[int] = []
    other = threading.Thread(target=lambda: final.append(check_snapshot(index.snapshot())))
    other.start()
    other.join(timeout=30)
    assert final == [rounds_written]
    reopened = Index.open(tmp_path / "index", readonly=True)
    assert check_snapshot(reopened.snapshot(), committed_only=True) == rounds_written
    index.close()


class GateScorer:
    """BM25 that signals when it has its snapshot and waits to be released."""

    name = "gate"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.entered.set()
        assert self.release.wait(30), "never released"
        return BM25Scorer().score(snapshot, query, k)


def segment_files(path: Path) -> set[str]:
    return {entry.name for entry in IndexDirectory(path).read_manifest().segments}


def test_a_search_started_before_a_commit_keeps_its_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "index"
    new_index(path).close()
    index = Index.open(path)  # segments read from their files, not from memory
    before = index.snapshot()
    old_files = segment_files(path)
    gate = GateScorer()
    results: list[SearchResults] = []
    searcher = threading.Thread(
        target=lambda: results.append(index.search(COMMON, K, RRF(), gate)), daemon=True
    )
    searcher.start()
    assert gate.entered.wait(30)
    for round_ in (1, 2, 3):
        write_round(index, round_)
        index.commit()
    index.merge(force=True)
    # The files the early snapshot reads are gone from the directory now.
    assert not old_files & segment_files(path)
    assert not old_files & set(os.listdir(path))
    gate.release.set()
    searcher.join(timeout=30)
    assert results, "the search did not finish"
    (early,) = results
    assert {hit.fields["gen"] for hit in early} == {0}
    assert frozenset(early.keys) == keys_of(0)
    assert early.generation == before.generation
    # The snapshot taken before still reads round 0 in full, from the unlinked files.
    assert check_snapshot(before, committed_only=True) == 0
    again = search_snapshot(before, "gen0", K, RRF(), [BM25Scorer()])
    assert frozenset(again.keys) == keys_of(0)
    assert not search_snapshot(before, "gen3", K, RRF(), [BM25Scorer()]).keys
    # While the index itself has moved on.
    assert check_snapshot(index.snapshot(), committed_only=True) == 3
    assert check_search(index, committed_only=True) == 3
    index.close()


def _hold(monkeypatch: pytest.MonkeyPatch, method: str) -> tuple[threading.Event, threading.Event]:
    """Make ``IndexDirectory.<method>`` wait for ``release`` once ``entered`` is set."""
    entered, release = threading.Event(), threading.Event()
    original: Callable[..., Any] = getattr(IndexDirectory, method)

    def held(self: IndexDirectory, *args: Any) -> Any:
        entered.set()
        assert release.wait(30), "the commit was never released"
        return original(self, *args)

    monkeypatch.setattr(IndexDirectory, method, held)
    return entered, release


@pytest.mark.parametrize(
    ("operation", "method"),
    [("commit", "write_stamped"), ("commit", "publish"), ("merge", "write_streamed"), ("merge", "publish")],
)
def test_snapshots_and_searches_never_wait_on_a_commit(
    operation: str, method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "index"
    index = new_index(path)
    write_round(index, 1)
    index.commit()
    write_round(index, 2)  # uncommitted: the commit below writes it
    generation = index.generation
    if operation == "merge":
        # A merge works on committed segments only: commit round 2 as two segments (half
        # of it upserted again, unchanged), then leave an uncommitted upsert (a tombstone
        # in a committed segment) that the merge must carry over without publishing it.
        index.commit()
        index.add_many(documents_of(2)[1::2], progress=False)
        index.commit()
        index.add(Document(ANCHOR, text_of(ANCHOR, 2), fields={"gen": 2}))
        generation = index.generation + 1  # the merge publishes the next number
    entered, release = _hold(monkeypatch, method)
    outcome: list[int] = []
    failure: list[str] = []

    def run() -> None:
        try:
            outcome.append(index.commit() if operation == "commit" else index.merge(force=True))
        except BaseException:
            failure.append(traceback.format_exc())

    committer = threading.Thread(target=run, daemon=True)
    committer.start()
    try:
        assert entered.wait(30), f"the {operation} never reached {method}"
        seen: list[int] = []
        late: list[Snapshot] = []

        def read_and_write() -> None:
            seen.append(check_snapshot(index.snapshot()))
            seen.append(check_search(index))
            # A write during the commit, then a snapshot that has to seal it.
            index.add(Document("late", f"{COMMON} late arrival", fields={"gen": -1}))
            late.append(index.snapshot())

        reader = threading.Thread(target=read_and_write, daemon=True)
        reader.start()
        reader.join(timeout=10)
        assert not reader.is_alive(), f"a search or snapshot waited on the {operation}"
        assert committer.is_alive(), f"the {operation} should still be held in {method}"
        # Other threads see a whole published round: 1 (the last commit) or 2 (if the
        # operation published its sealed state before writing, as merge does).
        assert seen[0] == seen[1] and seen[0] in (1, 2), seen
        # The writing thread sees its own write at once, on top of round 2.
        assert "late" in late[0] and late[0].n_docs == len(keys_of(2)) + 1
    finally:
        release.set()
        committer.join(timeout=30)
    assert not failure, failure[0] if failure else ""
    assert outcome
    # The commit published the state it started from: round 2, without the late write.
    on_disk = Index.open(path, readonly=True)
    assert on_disk.generation == generation
    assert check_snapshot(on_disk.snapshot(), committed_only=True) == 2
    assert "late" not in on_disk
    # The late write is still in memory and the next commit makes it durable.
    assert "late" in index
    monkeypatch.undo()
    index.commit()
    assert on_disk.refresh()
    assert "late" in on_disk
    assert set(on_disk.keys()) == keys_of(2) | {"late"}
    index.close()


# ---------------------------------------------------------------- readers in other processes


def reader_main(argv: list[str]) -> int:
    """Run in a subprocess: poll a read-only index until ``stop`` exists; report what it saw.

    Prints ``ready``, then one JSON line per round seen (``{"round": t, "n": N}``),
    then ``{"checks": c}``; on a violation ``{"error": ...}`` and exit status 1.
    """
    path, stop = Path(argv[0]), Path(argv[1])
    index = Index.open(path, readonly=True)
    print("ready", flush=True)
    checks = 0
    last = -1
    try:
        while True:
            finished = stop.exists()  # checked before the refresh: the last poll sees the final commit
            index.refresh()
            snapshot = index.snapshot()
            round_ = check_snapshot(snapshot, committed_only=True)
            assert check_search(index, committed_only=True) == round_
            assert round_ >= last, f"went back from round {last} to {round_}"
            if round_ != last:
                print(json.dumps({"round": round_, "n": snapshot.n_docs}), flush=True)
                last = round_
            checks += 1
            if finished:
                break
    except AssertionError as exc:
        print(json.dumps({"error": f"{exc}\n{traceback.format_exc()}"}), flush=True)
        return 1
    print(json.dumps({"checks": checks}), flush=True)
    return 0


@pytest.fixture
def reader_process() -> Iterator[Callable[[Path, Path], subprocess.Popen[str]]]:
    """Start ``reader_main`` in a subprocess; kill what is still running at teardown."""
    started: list[subprocess.Popen[str]] = []

    def start(path: Path, stop: Path) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(REPO)])
        code = (
            "import sys; from tests.storage.test_concurrency import reader_main; "
            "sys.exit(reader_main(sys.argv[1:]))"
        )
        process = subprocess.Popen(
            [sys.executable, "-c", code, str(path), str(stop)],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def test_reader_processes_see_whole_generations_only(
    tmp_path: Path, reader_process: Callable[[Path, Path], subprocess.Popen[str]]
) -> None:
    path, stop = tmp_path / "index", tmp_path / "stop"
    index = new_index(path)
    children = [reader_process(path, stop) for _ in range(2)]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    rounds_written = 0
    started = time.monotonic()
    while time.monotonic() - started < WRITER_LIMIT_SECONDS and (
        time.monotonic() - started < WRITER_SECONDS or rounds_written < WRITER_ROUNDS
    ):
        rounds_written += 1
        write_round(index, rounds_written)
        index.commit()
        if rounds_written % 3 == 0:
            index.merge(force=True)  # sweeps files a reader may be about to open
    stop.touch()
    for child in children:
        output, _ = child.communicate(timeout=60)
        # Lines that are not JSON are a traceback: the exit status check shows the whole output.
        reports = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
        errors = [report["error"] for report in reports if "error" in report]
        assert not errors, errors[0]
        assert child.returncode == 0, output
        rounds = [report["round"] for report in reports if "round" in report]
        assert rounds == sorted(rounds)
        assert len(rounds) >= 3, f"a reader process saw only rounds {rounds}"
        assert rounds[-1] == rounds_written, "the last poll (after the last commit) shows it"
        for report in reports:
            if "round" in report:
                assert report["n"] == len(keys_of(report["round"]))
    index.close()
