"""An index's life: closing, uncommitted writes, merges that publish only commits, overwrite.

Issue 12 items 1-2 and issue 13 items 2-4, 14:

* a closed index refuses every call with :class:`IndexClosedError` naming its path,
  and nothing it does afterwards writes a file, whoever owns the directory now;
  no manifest is published by a writer that does not hold the lock at that moment;
* uncommitted writes are never dropped unasked (commit on a clean ``with`` exit,
  discard with a warning on an exception, ``close`` refuses unless ``discard=True``);
* a merge publishes committed segments only, as a new generation;
* ``create(..., overwrite=True)`` and ``weft-search index --overwrite`` leave the old
  index serving until the new one is committed;
* a lock that cannot be created leaves no ``__del__`` noise, and no stray ``write.lock``.
"""

from __future__ import annotations

import errno
import gc
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import weftsearch
from tests.storage.test_crash import _descriptors_on
from weftsearch import RRF, BM25Scorer, Document, Index
from weftsearch.engine.merge_policy import MergePolicy
from weftsearch.errors import (
    CorruptIndexError,
    DiscardedWritesWarning,
    IndexClosedError,
    IndexLockedError,
    IndexStorageError,
    UncommittedWritesError,
)
from weftsearch.storage import LOCK, MANIFEST
from weftsearch.storage.directory import IndexDirectory, WriterLock

REPO = Path(__file__).resolve().parents[2]
SRC = Path(weftsearch.__file__).resolve().parents[1]


def doc(i: int, version: int = 0) -> Document:
    return Document(f"d{i:03d}", f"common word{i % 7} version{version} number{i}")


def listing(path: Path) -> dict[str, bytes]:
    return {child.name: child.read_bytes() for child in sorted(path.iterdir())}


def keys_on_disk(path: Path) -> list[str]:
    with Index.open(path, readonly=True) as reader:
        return reader.keys()


def disk_generation(path: Path) -> int:
    return IndexDirectory(path).read_manifest().generation


def ranking(index: Index, query: str = "common word3 number12") -> list[tuple[str, float]]:
    return [(hit.key, hit.score) for hit in index.search(query, 100, RRF(), BM25Scorer())]


# ---------------------------------------------------------------- a closed index


CALLS: dict[str, Callable[[Index], object]] = {
    "add": lambda index: index.add(doc(900)),
    "add_many": lambda index: index.add_many([doc(901)]),
    "delete": lambda index: index.delete("d001"),
    "delete_many": lambda index: index.delete_many(["d001"]),
    "commit": lambda index: index.commit(),
    "merge": lambda index: index.merge(force=True),
    "search": lambda index: index.search("common", 5, RRF(), BM25Scorer()),
    "snapshot": lambda index: index.snapshot(),
    "get": lambda index: index.get("d001"),
    "keys": lambda index: index.keys(),
    "len": len,
    "contains": lambda index: "d001" in index,
    "refresh": lambda index: index.refresh(),
    "scrub": lambda index: index.scrub(),
    "generation": lambda index: index.generation,
    "segment_count": lambda index: index.segment_count,
    "wait_for_merges": lambda index: index.wait_for_merges(),
    "enter": lambda index: index.__enter__(),
}


def opened(kind: str, path: Path) -> Index:
    if kind == "memory":
        index = Index()
        index.add_many([doc(i) for i in range(5)])
        return index
    with Index.create(path) as writer:
        writer.add_many([doc(i) for i in range(5)])
    return Index.open(path, readonly=kind == "readonly")


@pytest.mark.parametrize("kind", ["memory", "writer", "readonly"])
def test_a_closed_index_refuses_every_call(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = opened(kind, path)
    before = index.snapshot()
    index.close()
    index.close()  # idempotent
    for name, call in CALLS.items():
        with pytest.raises(IndexClosedError, match="closed") as caught:
            call(index)
        assert isinstance(caught.value, IndexStorageError), name
        if kind != "memory":
            assert str(path) in str(caught.value), name
    # What describes it stays readable.
    assert index.closed
    assert index.path == (None if kind == "memory" else path)
    assert index.readonly is (kind == "readonly")
    assert index.analyzer.name == "english"
    assert index.vector_dim is None
    # A snapshot taken before the close stays valid.
    assert before.n_docs == 5
    with Index() as other:  # leaving a with block whose index was closed inside is quiet
        other.close()
    if kind != "memory":
        assert keys_on_disk(path) == [f"d{i:03d}" for i in range(5)]


def test_a_closed_writer_never_writes_after_another_writer_took_over(tmp_path: Path) -> None:
    """Issue 13 item 2: close, another writer opens and commits; the old object writes nothing."""
    path = tmp_path / "index"
    first = Index.create(path)
    first.add_many([doc(i) for i in range(10)])
    first.commit()
    first.close()
    second = Index.open(path)
    second.add_many([doc(i, version=1) for i in range(10, 20)])
    second.commit()
    files = listing(path)
    for name in ("add", "delete", "commit", "merge"):
        with pytest.raises(IndexClosedError):
            CALLS[name](first)
    # Below the closed check, the directory refuses a writer that lost its lock.
    directory = first._directory
    assert directory is not None
    manifest = directory.read_manifest()
    with pytest.raises(IndexLockedError):
        directory.publish(manifest)
    with pytest.raises(IndexLockedError):
        directory.write_file("seg-000099.wseg", b"x")
    with pytest.raises(IndexLockedError):
        directory.sweep(manifest)
    assert listing(path) == files
    second.close()
    with Index.open(path, readonly=True) as reader:
        assert reader.keys() == [f"d{i:03d}" for i in range(20)]
        assert reader.get("d015").text == doc(15, version=1).text
        assert reader.scrub().ok


def test_a_writer_whose_lock_file_was_replaced_publishes_nothing(tmp_path: Path) -> None:
    """The lock is checked at publish: descriptor open and still the file at DIR/write.lock."""
    path = tmp_path / "index"
    writer = Index.create(path)
    writer.add_many([doc(i) for i in range(3)])
    writer.commit()
    # Someone deletes the lock file and another writer takes a new one.
    (path / LOCK).unlink()
    other = Index.open(path)
    writer.add(doc(3))
    files = listing(path)
    with pytest.raises(IndexLockedError, match="replaced"):
        writer.commit()
    assert listing(path) == files
    assert keys_on_disk(path) == ["d000", "d001", "d002"]
    other.close()
    writer.close(discard=True)


# ---------------------------------------------------------------- uncommitted writes


def test_a_clean_with_exit_commits(tmp_path: Path) -> None:
    path = tmp_path / "index"
    with Index.create(path) as index:
        index.add_many([doc(i) for i in range(4)])
    assert keys_on_disk(path) == ["d000", "d001", "d002", "d003"]
    with Index.open(path) as index:
        index.delete("d001")
    assert keys_on_disk(path) == ["d000", "d002", "d003"]
    with Index.open(path) as index:  # nothing pending: no commit, nothing written
        files = listing(path)
        index.keys()
    assert listing(path) == files


def test_an_exception_in_a_with_block_discards_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "index"
    with Index.create(path) as index:
        index.add_many([doc(i) for i in range(4)])
    with (
        pytest.warns(DiscardedWritesWarning, match=r"2 documents added or replaced, 1 document deleted"),
        pytest.raises(RuntimeError, match="boom"),
        Index.open(path) as index,
    ):
        index.add_many([doc(10), doc(11)])
        index.delete("d000")
        raise RuntimeError("boom")
    assert index.closed
    assert keys_on_disk(path) == ["d000", "d001", "d002", "d003"]
    with Index.open(path) as again:  # the lock was released
        assert len(again) == 4
    # Nothing pending: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError), Index.open(path):
            raise RuntimeError("nothing to lose")


@pytest.mark.parametrize("pending", ["buffered", "sealed", "deleted", "overwrite"])
def test_close_refuses_uncommitted_writes(pending: str, tmp_path: Path) -> None:
    path = tmp_path / "index"
    with Index.create(path) as index:
        index.add_many([doc(i) for i in range(4)])
    if pending == "overwrite":
        index = Index.create(path, overwrite=True)
        expected = "replacement"
    else:
        index = Index.open(path)
        if pending == "deleted":
            index.delete("d002")
            expected = "1 document deleted"
        else:
            index.add(doc(7))
            expected = "1 document added or replaced"
            if pending == "sealed":
                index.snapshot()  # sealed into an in-memory segment, still uncommitted
    with pytest.raises(UncommittedWritesError, match=expected) as caught:
        index.close()
    assert str(path) in str(caught.value)
    # Still open and intact.
    assert not index.closed
    assert ("d007" in index) is (pending in ("buffered", "sealed"))
    with pytest.raises(IndexLockedError):
        Index.open(path)
    index.commit()
    index.close()
    expected_keys = {
        "buffered": ["d000", "d001", "d002", "d003", "d007"],
        "sealed": ["d000", "d001", "d002", "d003", "d007"],
        "deleted": ["d000", "d001", "d003"],
        "overwrite": [],
    }[pending]
    assert keys_on_disk(path) == expected_keys


def test_close_discard_drops_uncommitted_writes(tmp_path: Path) -> None:
    path = tmp_path / "index"
    with Index.create(path) as index:
        index.add_many([doc(i) for i in range(4)])
    index = Index.open(path)
    index.add(doc(9))
    index.delete("d000")
    index.close(discard=True)
    assert index.closed
    assert keys_on_disk(path) == ["d000", "d001", "d002", "d003"]


def test_memory_and_readonly_indexes_just_close(tmp_path: Path) -> None:
    memory = Index()
    memory.add(doc(1))
    memory.close()
    with Index() as other:
        other.add(doc(2))
    assert other.closed
    path = tmp_path / "index"
    with Index.create(path) as writer:
        writer.add(doc(1))
    reader = Index.open(path, readonly=True)
    reader.close()
    assert reader.closed


# ---------------------------------------------------------------- merges publish commits only


def test_a_merge_publishes_committed_segments_only(tmp_path: Path) -> None:
    path = tmp_path / "index"
    writer = Index.create(path)
    writer.add_many([doc(i) for i in range(0, 10)])
    writer.commit()
    writer.add_many([doc(i) for i in range(10, 20)])
    writer.delete("d003")  # committed delete: the merged copy drops it
    committed_generation = writer.commit()
    committed = keys_on_disk(path)
    reader = Index.open(path, readonly=True)
    # Uncommitted: a sealed segment, a buffered document, a delete and an upsert.
    writer.add_many([doc(i) for i in range(20, 25)])
    writer.snapshot()
    writer.add(doc(25))
    writer.delete("d004")
    writer.add(doc(5, version=2))
    mine = writer.keys()
    before = ranking(writer)
    assert writer.merge(force=True) == 2
    merge_generation = disk_generation(path)
    assert merge_generation > committed_generation
    # Another process sees the committed documents only, merged into one segment.
    assert keys_on_disk(path) == committed
    with Index.open(path, readonly=True) as fresh:
        assert fresh.segment_count == 1
        assert fresh.get("d005").text == doc(5).text
        assert fresh.scrub().ok
    assert reader.refresh() is True
    assert reader.keys() == committed
    assert "d004" in reader and "d025" not in reader
    # The writer still sees (and ranks, to the bit) its own uncommitted state.
    assert writer.keys() == mine
    assert writer.get("d005").text == doc(5, version=2).text
    assert ranking(writer) == before
    # Its next commit publishes them, carried over the merge (the delete as a tombstone).
    final_generation = writer.commit()
    assert committed_generation < merge_generation < final_generation == disk_generation(path)
    assert reader.refresh() is True
    assert reader.keys() == mine
    assert reader.get("d005").text == doc(5, version=2).text
    assert ranking(reader) == before
    assert reader.scrub().ok
    writer.close()
    reader.close()


def test_generations_never_repeat_or_go_backwards(tmp_path: Path) -> None:
    path = tmp_path / "index"
    writer = Index.create(path, merge_policy=MergePolicy(factor=2))
    seen = [disk_generation(path)]
    manifests = {seen[0]: (path / MANIFEST).read_bytes()}
    for round_ in range(4):
        writer.add_many([doc(10 * round_ + i, version=round_) for i in range(5)])
        writer.commit()
        writer.add(doc(99, version=round_))  # uncommitted while the merge runs
        for step in (writer.merge, writer.commit):
            step()
            generation = disk_generation(path)
            data = (path / MANIFEST).read_bytes()
            assert generation >= seen[-1]
            assert manifests.setdefault(generation, data) == data, "two manifests share a generation"
            seen.append(generation)
    assert len(set(seen)) >= 9
    writer.close()
    with Index.open(path) as again:
        assert again.generation == seen[-1]


def test_a_background_merge_never_publishes_the_buffer(tmp_path: Path) -> None:
    path = tmp_path / "index"
    writer = Index.create(path, merge_policy=MergePolicy(factor=2), background_merge=True)
    committed: list[str] = []
    for round_ in range(6):
        batch = [doc(10 * round_ + i) for i in range(5)]
        writer.add_many(batch)
        writer.commit()
        committed += [d.key for d in batch]
        writer.add(Document(f"uncommitted{round_}", "common pending"))
        writer.wait_for_merges()
        assert keys_on_disk(path) == sorted(committed)
        writer.delete(f"uncommitted{round_}")
    writer.close()


def test_an_in_memory_merge_merges_everything() -> None:
    index = Index()
    for start in (0, 5, 10):
        index.add_many([doc(i) for i in range(start, start + 5)])
        index.snapshot()
    index.add(doc(20))
    before = ranking(index)
    generation = index.generation
    assert index.merge(force=True) == 4
    assert index.segment_count == 1
    assert index.generation > generation
    assert ranking(index) == before


# ---------------------------------------------------------------- overwrite


def corpus(path: Path, count: int, word: str, bad_line: int | None = None) -> Path:
    lines = []
    for i in range(count):
        text = f"common {word} number{i}"
        if i == bad_line:
            text += " \\ud800"  # a lone surrogate: accepted by json, not by UTF-8
        lines.append(f'{{"key": "{word}{i:05d}", "text": "{text}"}}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cli(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(REPO)])
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from weftsearch.cli import main; sys.exit(main())", *args],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_failed_overwrite_leaves_the_old_index(tmp_path: Path) -> None:
    """Issue 13 item 3: a bad corpus line with --overwrite emptied the old index."""
    index_dir = tmp_path / "index"
    old = corpus(tmp_path / "old.jsonl", 50, "old")
    assert cli("index", str(old), "--index", str(index_dir)).wait(timeout=120) == 0
    files = listing(index_dir)
    bad = corpus(tmp_path / "bad.jsonl", 80, "new", bad_line=60)
    run = cli("index", str(bad), "--index", str(index_dir), "--overwrite")
    _, stderr = run.communicate(timeout=120)
    assert run.returncode != 0, stderr
    assert "Exception ignored" not in stderr
    assert listing(index_dir) == files
    with Index.open(index_dir, readonly=True) as reader:
        assert len(reader) == 50 and reader.scrub().ok


def test_create_overwrite_replaces_at_the_first_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "index"
    with Index.create(path) as old:
        old.add_many([doc(i) for i in range(50)])
    old_generation = disk_generation(path)
    replacement = Index.create(path, analyzer="simple", overwrite=True)
    replacement.add_many([doc(i, version=1) for i in range(100, 110)])
    # Until the commit, readers (and a crash) get the old index; other writers are refused.
    assert len(Index.open(path, readonly=True)) == 50
    with pytest.raises(IndexLockedError):
        Index.open(path)

    def full(self: IndexDirectory, manifest: Any) -> None:
        raise IndexStorageError(f"cannot commit {self.path}: {os.strerror(errno.ENOSPC)}")

    monkeypatch.setattr(IndexDirectory, "publish", full)
    with pytest.raises(IndexStorageError, match=os.strerror(errno.ENOSPC)):
        replacement.commit()
    monkeypatch.undo()
    assert len(Index.open(path, readonly=True)) == 50
    generation = replacement.commit()
    assert generation > old_generation
    with Index.open(path, readonly=True) as reader:
        assert reader.keys() == [f"d{i:03d}" for i in range(100, 110)]
        assert reader.analyzer.name == "simple"
        assert reader.scrub().ok
    replacement.close()
    # The old files are gone: only what the manifest names is left.
    manifest = IndexDirectory(path).read_manifest()
    assert set(os.listdir(path)) == {MANIFEST, LOCK, *(entry.name for entry in manifest.segments)}


def test_an_abandoned_overwrite_is_swept_by_the_next_writer(tmp_path: Path) -> None:
    path = tmp_path / "index"
    with Index.create(path) as old:
        old.add_many([doc(i) for i in range(30)])
    files = listing(path)
    replacement = Index.create(path, overwrite=True)
    replacement._fork_encode_min = None
    replacement.add_many([doc(i, version=1) for i in range(200, 260)])
    replacement._seal()
    # Write the new segment file as a commit would, then "crash" before the manifest.
    segment = replacement._segments[-1]
    assert segment.data is not None
    IndexDirectory(path).write_file(f"seg-{replacement._next_segment:06d}.wseg", segment.data)
    replacement._writer_lock.release()  # type: ignore[union-attr]
    with Index.open(path) as writer:
        assert len(writer) == 30
    assert listing(path) == files


OVERWRITE_TRIALS = 20
#: What each trial of the slow overwrite test found at DIR ("old" or "new").
OVERWRITE_OUTCOMES: list[str] = []


def _overwrite_until_exit(old: Path, new: Path, index_dir: Path) -> tuple[subprocess.Popen[str], float]:
    """Index ``old`` at ``index_dir``, start ``--overwrite`` with ``new``; return it once it holds the lock.

    The second value is the monotonic time at which the lock was seen held: the replacement
    (add, encode, commit) runs from then on, not the start-up (imports, reading the corpus).
    """
    assert cli("index", str(old), "--index", str(index_dir)).wait(timeout=120) == 0
    run = cli("index", str(new), "--index", str(index_dir), "--overwrite")
    while run.poll() is None and not _descriptors_on(run.pid, index_dir / LOCK):
        time.sleep(0.001)
    return run, time.monotonic()


@pytest.fixture(scope="module")
def overwrite_window(tmp_path_factory: pytest.TempPathFactory) -> float:
    """Seconds an uninterrupted ``--overwrite`` of the trials' corpus runs once it holds the lock.

    Kill delays are drawn relative to it, so that kills land before the commit's manifest
    rename and after it whatever the speed of the machine (a fixed range of delays stopped
    reaching the commit once indexing got faster).
    """
    folder = tmp_path_factory.mktemp("overwrite-window")
    old = corpus(folder / "old.jsonl", 300, "old")
    new = corpus(folder / "new.jsonl", 3000, "new")
    run, held = _overwrite_until_exit(old, new, folder / "index")
    assert run.wait(timeout=120) == 0
    return max(time.monotonic() - held, 0.01)


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(OVERWRITE_TRIALS))
def test_overwrite_killed_at_random_moments(trial: int, tmp_path: Path, overwrite_window: float) -> None:
    """SIGKILL ``weft-search index --overwrite`` anywhere: DIR opens as the old or the new index."""
    index_dir = tmp_path / "index"
    old = corpus(tmp_path / "old.jsonl", 300, "old")
    new = corpus(tmp_path / "new.jsonl", 3000, "new")
    # From the moment the lock is held to half as long again as a whole replacement takes:
    # about two thirds of the kills land before the manifest rename, the rest after.
    delay = random.Random(f"overwrite-kill/{trial}").uniform(0.0, 1.5 * overwrite_window)
    run, _ = _overwrite_until_exit(old, new, index_dir)
    old_keys = [f"old{i:05d}" for i in range(300)]
    time.sleep(delay)
    if run.poll() is None:
        os.kill(run.pid, signal.SIGKILL)
    run.communicate(timeout=120)
    with Index.open(index_dir, readonly=True) as reader:
        keys = reader.keys()
        assert reader.scrub().ok
    assert keys == old_keys or (len(keys) == 3000 and keys[0] == "new00000"), len(keys)
    OVERWRITE_OUTCOMES.append("old" if keys == old_keys else "new")
    # The next writer sweeps what the kill left, and the next overwrite succeeds.
    with Index.open(index_dir) as writer:
        manifest = IndexDirectory(index_dir).read_manifest()
        names = {
            MANIFEST,
            LOCK,
            *(e.name for e in manifest.segments),
            *(e.deletes for e in manifest.segments),
        }
        assert set(os.listdir(index_dir)) <= names
        assert len(writer) == len(keys)
    assert cli("index", str(new), "--index", str(index_dir), "--overwrite").wait(timeout=120) == 0
    assert len(keys_on_disk(index_dir)) == 3000


@pytest.mark.slow
def test_overwrite_kills_landed_before_and_after_the_commit() -> None:
    """After the trials above (this test comes after them in the file): both outcomes occurred."""
    if len(OVERWRITE_OUTCOMES) < OVERWRITE_TRIALS:
        pytest.skip("needs every trial of test_overwrite_killed_at_random_moments first")
    assert set(OVERWRITE_OUTCOMES) == {"old", "new"}, OVERWRITE_OUTCOMES


# ---------------------------------------------------------------- no noise, no stray lock files


def test_a_lock_that_cannot_be_created_is_a_typed_error_without_noise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(IndexStorageError, match="cannot create the writer lock"):
        WriterLock(tmp_path / "missing")
    gc.collect()
    assert unraisable == []
    assert not (tmp_path / "missing").exists()


def test_open_on_a_directory_that_is_not_an_index_leaves_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "not-an-index"
    path.mkdir()
    (path / MANIFEST).write_text("my own notes, not a weft-search manifest\n")
    before = listing(path)
    with pytest.raises(CorruptIndexError):
        Index.open(path)
    assert listing(path) == before


def test_a_failed_create_in_an_existing_directory_leaves_it_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "empty"
    path.mkdir()

    def full(self: IndexDirectory, manifest: Any) -> None:
        raise IndexStorageError(f"cannot commit {self.path}: {os.strerror(errno.ENOSPC)}")

    monkeypatch.setattr(IndexDirectory, "publish", full)
    with pytest.raises(IndexStorageError):
        Index.create(path)
    assert os.listdir(path) == []
    monkeypatch.undo()
    with Index.create(path) as index:
        index.add(doc(1))
    assert keys_on_disk(path) == ["d001"]


def test_a_lock_file_replaced_while_it_is_taken_is_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the open and the flock, another process deletes and recreates write.lock.

    Locking the old (now unlinked) file would guard nothing: a second writer would lock the
    new file. Taking the lock must notice (device and inode differ) and lock the new file.
    """
    import fcntl  # the module storage.directory locks with: patching it patches that

    path = tmp_path / "index"
    with Index.create(path) as index:
        index.add(doc(1))
    real_flock = fcntl.flock
    replaced: list[int] = []

    def replace_then_flock(fd: int, operation: int) -> None:
        if not replaced:
            replaced.append(fd)
            (path / LOCK).unlink()
            (path / LOCK).touch()
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", replace_then_flock)
    lock = WriterLock(path)
    monkeypatch.undo()
    assert replaced
    with pytest.raises(IndexLockedError):
        WriterLock(path)  # the file at DIR/write.lock is the one held
    assert lock.held
    lock.release()
    WriterLock(path).release()
