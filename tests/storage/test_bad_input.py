"""Bad input and failing storage: clear errors, the previous generation intact, nothing lost.

Faults are injected rather than provoked: the tests run as root, so ``chmod``
would not stop a write, and a real full disk is impractical. The file writes
of ``IndexDirectory.write_file`` (segments, tombstones) and
``IndexDirectory.publish`` (the manifest) go through ``open`` looked up in
``weftsearch.storage.directory``; the tests shadow it there with an ``open``
that refuses to create the file (``PermissionError``) or whose ``write``
stores half the bytes and then fails with ``ENOSPC``, for the files of one
kind only. ``os.fsync`` failing with ``EIO`` is a third fault.
"""

from __future__ import annotations

import builtins
import errno
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pytest

import weftsearch
import weftsearch.storage.directory as directory_module
from weftsearch import RRF, BM25Scorer, Document, Index, Query, VectorScorer
from weftsearch.errors import (
    IndexLockedError,
    IndexNotFoundError,
    IndexStorageError,
    WeftError,
)
from weftsearch.storage import LOCK, MANIFEST
from weftsearch.storage.directory import IndexDirectory

REPO = Path(__file__).resolve().parents[2]
SRC = Path(weftsearch.__file__).resolve().parents[1]

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
QUERIES = [
    Query("alpha beta"),
    Query("gamma"),
    Query("delta epsilon zeta"),
    Query("nothingmatchesthis"),
    Query("theta", vector=np.array([1.0, 0.5, -0.25, 0.0], dtype=np.float32)),
]

#: File kinds a fault can target, by the temporary name the file is written under.
KINDS = {
    "segment": re.compile(r"^seg-\d{6}\.wseg\.tmp-\d+$"),
    "tombstones": re.compile(r"^seg-\d{6}\.del-\d{6}\.tmp-\d+$"),
    "manifest": re.compile(r"^MANIFEST\.tmp$"),
}


def document(i: int, version: int = 0) -> Document:
    rng = np.random.default_rng(1000 * version + i)
    words = [WORDS[int(w)] for w in rng.integers(0, len(WORDS), size=int(rng.integers(1, 9)))]
    return Document(
        f"d{i:03d}",
        " ".join(words),
        vector=rng.standard_normal(4).astype(np.float32),
        fields={"version": version},
    )


Ranking = list[tuple[str, float | None, float | None]]


def rankings(index: Index) -> list[Ranking]:
    """Keys and raw BM25 and vector scores of every query, best first."""
    out = []
    for query in QUERIES:
        results = index.search(query, 60, RRF(), BM25Scorer(), VectorScorer())
        out.append([(hit.key, hit.signals[0].score, hit.signals[1].score) for hit in results])
    return out


def texts(index: Index) -> dict[str, str]:
    keys = index.keys()
    return {key: index.get(key).text for key in keys}


def named_files(path: Path) -> set[str]:
    manifest = IndexDirectory(path).read_manifest()
    names = {MANIFEST, LOCK}
    for entry in manifest.segments:
        names.add(entry.name)
        if entry.deletes is not None:
            names.add(entry.deletes)
    return names


def temporary_files(path: Path) -> list[str]:
    return sorted(name for name in os.listdir(path) if ".tmp" in name)


# ---------------------------------------------------------------- fault injection


class _FailingWrite:
    """A file whose ``write`` stores half of the bytes, then fails like a full disk."""

    def __init__(self, handle: Any, error: OSError) -> None:
        self._handle = handle
        self._error = error

    def write(self, data: bytes) -> int:
        self._handle.write(bytes(data[: len(data) // 2]))
        self._handle.flush()
        raise self._error

    def flush(self) -> None:
        self._handle.flush()

    def fileno(self) -> int:
        return int(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> _FailingWrite:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class Faults:
    """Fail the writes of one kind of file in ``weftsearch.storage.directory``.

    The directory writes files two ways: ``open()`` (the lock file) and plain
    ``os.open``/``os.writev`` (segments, tombstones, the manifest: fewer system
    calls, so fewer GIL hand-offs during a commit). Both are intercepted, and a
    failing write stores half of its bytes first, like a disk that fills up.
    """

    def __init__(self, kind: str, error: OSError, at_open: bool) -> None:
        self.pattern = KINDS[kind]
        self.error = error
        self.at_open = at_open
        self.hits: list[str] = []
        self.failing: set[int] = set()

    def open(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        name = Path(file).name
        if "w" in mode and self.pattern.match(name):
            self.hits.append(name)
            if self.at_open:
                raise self.error
            return _FailingWrite(builtins.open(file, mode, *args, **kwargs), self.error)
        return builtins.open(file, mode, *args, **kwargs)

    def os_open(self, file: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        name = Path(file).name
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR))
        if writing and self.pattern.match(name):
            self.hits.append(name)
            if self.at_open:
                raise self.error
            fd = REAL_OS_OPEN(file, flags, *args, **kwargs)
            self.failing.add(fd)
            return fd
        return REAL_OS_OPEN(file, flags, *args, **kwargs)

    def os_writev(self, fd: int, buffers: Any) -> int:
        if fd in self.failing:
            data = b"".join(bytes(buffer) for buffer in buffers)
            os.write(fd, data[: len(data) // 2])
            raise self.error
        return REAL_OS_WRITEV(fd, buffers)

    def os_close(self, fd: int) -> None:
        self.failing.discard(fd)
        REAL_OS_CLOSE(fd)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(directory_module, "open", self.open, raising=False)
        monkeypatch.setattr(os, "open", self.os_open)
        monkeypatch.setattr(os, "writev", self.os_writev)
        monkeypatch.setattr(os, "close", self.os_close)


REAL_OS_OPEN = os.open
REAL_OS_WRITEV = os.writev
REAL_OS_CLOSE = os.close


def disk_full(name: str) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)


def no_permission(name: str) -> PermissionError:
    return PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)


def install_fault(monkeypatch: pytest.MonkeyPatch, fault: str) -> Callable[[], bool]:
    """Install ``fault``; return a function telling whether it fired."""
    if fault == "fsync-eio":
        fired: list[int] = []
        real_fsync = os.fsync

        def failing_fsync(fd: int) -> None:
            fired.append(fd)
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(os, "fsync", failing_fsync)
        assert real_fsync is not failing_fsync
        return lambda: bool(fired)
    kind, _, reason = fault.partition("-")
    error = disk_full(kind) if reason == "enospc" else no_permission(kind)
    faults = Faults(kind, error, at_open=reason == "eacces")
    faults.install(monkeypatch)
    return lambda: bool(faults.hits)


MESSAGES = {
    "enospc": os.strerror(errno.ENOSPC),
    "eacces": os.strerror(errno.EACCES),
    "eio": os.strerror(errno.EIO),
}


# ---------------------------------------------------------------- paths that are not index directories


def test_create_on_a_file_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "plain.txt"
    path.write_bytes(b"not an index")
    for overwrite in (False, True):
        with pytest.raises(IndexStorageError, match=re.escape(str(path))) as caught:
            Index.create(path, overwrite=overwrite)
        assert "file" in str(caught.value)
    assert path.read_bytes() == b"not an index"
    with pytest.raises(IndexStorageError):
        Index.create(path / "inside")  # a directory below a file


def test_open_on_a_file_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "plain.txt"
    path.write_bytes(b"not an index")
    for readonly in (False, True):
        with pytest.raises(IndexStorageError, match=re.escape(str(path))) as caught:
            Index.open(path, readonly=readonly)
        assert "file" in str(caught.value)
        assert isinstance(caught.value, (WeftError, OSError))
    assert path.read_bytes() == b"not an index"
    assert sorted(os.listdir(tmp_path)) == ["plain.txt"]  # no lock file, nothing created


def test_open_where_there_is_no_index(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match="does not exist"):
        Index.open(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexNotFoundError, match=MANIFEST):
        Index.open(tmp_path / "empty", readonly=True)
    with pytest.raises(IndexNotFoundError):
        Index.open(tmp_path / "plain" / "below")


def test_create_on_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(IndexStorageError, match="not empty"):
        Index.create(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


# ---------------------------------------------------------------- failing writes during commit and merge


@pytest.fixture
def committed(tmp_path: Path) -> Iterator[tuple[Path, Index]]:
    """An index with two committed segments (one with tombstones), then uncommitted writes."""
    path = tmp_path / "index"
    index = Index.create(path)
    index.add_many([document(i) for i in range(30)])
    index.commit()
    index.add_many([document(i) for i in range(30, 40)])
    index.delete("d005")
    index.add(document(10, version=1))
    index.commit()
    yield path, index
    index.close()


def uncommitted_writes(index: Index) -> None:
    index.add_many([document(i) for i in range(40, 45)])
    index.delete_many(["d003", "d031"])
    index.add(document(12, version=2))


def reference(index_texts: dict[str, str]) -> list[Ranking]:
    """Rankings of an in-memory index over the same documents, built from scratch."""
    memory = Index()
    for key in sorted(index_texts):
        version = 2 if key == "d012" else 1 if key == "d010" else 0
        memory.add(document(int(key[1:]), version=version))
    assert texts(memory) == index_texts
    return rankings(memory)


FAULTS = [
    "segment-enospc",
    "tombstones-enospc",
    "manifest-enospc",
    "segment-eacces",
    "manifest-eacces",
    "fsync-eio",
]


@pytest.mark.parametrize(
    ("fault", "operation"),
    # A forced merge leaves no tombstones to write, so that fault has nothing to hit there.
    [(f, o) for f in FAULTS for o in ("commit", "merge") if (f, o) != ("tombstones-enospc", "merge")],
)
def test_a_failed_commit_leaves_the_previous_generation(
    fault: str, operation: str, committed: tuple[Path, Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, index = committed
    before = Index.open(path, readonly=True)
    generation, before_texts, before_rankings = before.generation, texts(before), rankings(before)
    before_files = set(os.listdir(path))
    uncommitted_writes(index)
    wanted_texts = texts(index)
    wanted_rankings = rankings(index)
    assert wanted_rankings == reference(wanted_texts)

    fired = install_fault(monkeypatch, fault)
    with pytest.raises(IndexStorageError) as caught:
        if operation == "commit":
            index.commit()
        else:
            index.merge(force=True)
    assert fired(), f"the {fault} fault never fired"
    message = str(caught.value)
    assert str(path) in message
    assert MESSAGES[fault.rpartition("-")[2]] in message, message
    assert type(caught.value) is IndexStorageError  # not a corruption or lock error
    monkeypatch.undo()

    # On disk: the previous generation, whole; no temporary file left behind.
    assert temporary_files(path) == []
    reopened = Index.open(path, readonly=True)
    assert reopened.generation == generation
    assert texts(reopened) == before_texts
    assert rankings(reopened) == before_rankings
    assert reopened.scrub().ok
    assert named_files(path) == before_files
    # In memory: every uncommitted write is still there, and searches find them.
    assert texts(index) == wanted_texts
    assert rankings(index) == wanted_rankings

    # With the fault gone, the next commit succeeds and the stray files are swept.
    committed_generation = index.commit()
    assert reopened.refresh()
    assert reopened.generation == committed_generation
    assert texts(reopened) == wanted_texts
    assert rankings(reopened) == wanted_rankings
    assert reopened.scrub().ok
    assert set(os.listdir(path)) == named_files(path)
    index.close()
    with Index.open(path) as writer:
        assert texts(writer) == wanted_texts


def test_a_fault_after_the_manifest_rename(
    committed: tuple[Path, Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory fsync after the rename fails: an error, then either whole generation on disk."""
    path, index = committed
    before = texts(Index.open(path, readonly=True))
    uncommitted_writes(index)
    wanted = texts(index)
    real = directory_module._fsync_directory
    calls: list[Path] = []

    def second_fails(where: Path) -> None:
        calls.append(where)
        if len(calls) == 2:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(where)

    monkeypatch.setattr(directory_module, "_fsync_directory", second_fails)
    with pytest.raises(IndexStorageError, match=os.strerror(errno.EIO)):
        index.commit()
    monkeypatch.undo()
    assert texts(Index.open(path, readonly=True)) in (before, wanted)
    assert texts(index) == wanted
    index.commit()
    reopened = Index.open(path, readonly=True)
    assert texts(reopened) == wanted
    assert reopened.scrub().ok
    assert set(os.listdir(path)) == named_files(path)


@pytest.mark.parametrize("fault", ["manifest-enospc", "manifest-eacces"])
def test_a_failed_create_is_a_storage_error_and_can_be_retried(
    fault: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "index"
    fired = install_fault(monkeypatch, fault)
    with pytest.raises(IndexStorageError, match=MESSAGES[fault.rpartition("-")[2]]) as caught:
        Index.create(path)
    assert fired()
    assert type(caught.value) is IndexStorageError
    monkeypatch.undo()
    # The failed create took away what it made: the directory, so no stray lock file either.
    assert not path.exists()
    with pytest.raises(IndexNotFoundError):
        Index.open(path, readonly=True)  # nothing was committed
    # The failed create must not keep the writer lock (``caught`` still holds its traceback).
    with Index.create(path) as index:
        index.add(document(1))
        index.commit()
    assert Index.open(path, readonly=True).keys() == ["d001"]


# ---------------------------------------------------------------- one writer


def test_a_second_writer_in_the_same_process_is_refused(committed: tuple[Path, Index]) -> None:
    path, index = committed
    keys, generation = Index.open(path, readonly=True).keys(), index.generation
    with pytest.raises(IndexLockedError, match=re.escape(str(path))):
        Index.open(path)
    with pytest.raises(IndexLockedError):
        Index.create(path, overwrite=True)
    # Refusing the second writer touched nothing.
    reopened = Index.open(path, readonly=True)
    assert reopened.keys() == keys and reopened.generation == generation
    assert isinstance(IndexLockedError("x"), IndexStorageError)
    # Readers are welcome meanwhile.
    assert Index.open(path, readonly=True).keys() == keys
    index.close()
    index.close()  # idempotent
    with Index.open(path) as second:
        assert second.keys() == keys
        with pytest.raises(IndexLockedError):
            Index.open(path)
    with Index.open(path) as third:  # the context manager released it
        third.add(document(99))
        third.commit()
    assert "d099" in Index.open(path, readonly=True)


def _python(code: str, *args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(REPO)])
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=env,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


HOLD_LOCK = """
import sys
from weftsearch import Index
index = Index.open(sys.argv[1])
print("locked", flush=True)
sys.stdin.readline()
"""

TRY_LOCK = """
import sys
from weftsearch import Index
try:
    Index.open(sys.argv[1]).close()
    print("opened")
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_a_writer_in_another_process_is_refused(committed: tuple[Path, Index]) -> None:
    path, index = committed
    index.close()
    holder = _python(HOLD_LOCK, str(path), stdin=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(IndexLockedError, match="another writer"):
            Index.open(path)
        with pytest.raises(IndexLockedError):
            Index.create(path, overwrite=True)
        assert len(Index.open(path, readonly=True)) == 39
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=60)
    # The process exited without closing: the kernel released its lock.
    with Index.open(path) as writer:
        # And while this process holds it, another process is refused.
        output, _ = _python(TRY_LOCK, str(path)).communicate(timeout=60)
        assert output.startswith("IndexLockedError"), output
        writer.add(document(77))
        writer.commit()
    output, _ = _python(TRY_LOCK, str(path)).communicate(timeout=60)
    assert output.strip() == "opened", output


# ---------------------------------------------------------------- read-only indexes


def test_writes_on_a_readonly_index_are_storage_errors(committed: tuple[Path, Index]) -> None:
    path, index = committed
    files = {name: (path / name).read_bytes() for name in os.listdir(path)}
    reader = Index.open(path, readonly=True)
    assert reader.readonly
    keys = reader.keys()
    attempts: list[Callable[[], object]] = [
        lambda: reader.add(document(50)),
        lambda: reader.add_many([document(51), document(52)]),
        lambda: reader.delete("d001"),
        lambda: reader.delete_many(["d001", "d002"]),
        reader.commit,
        reader.merge,
        lambda: reader.merge(force=True),
    ]
    for attempt in attempts:
        with pytest.raises(IndexStorageError, match="read-only"):
            attempt()
    assert reader.keys() == keys
    assert {name: (path / name).read_bytes() for name in os.listdir(path)} == files
    # Reading works, and so does adopting the writer's next commit.
    assert reader.scrub().ok
    index.add(document(60))
    index.commit()
    assert reader.refresh()
    assert "d060" in reader


# ------------------------------------------------------------- hostile documents (issue 13 items 5, 11, 14)

HOSTILE_DOCUMENTS: dict[str, dict[str, Any]] = {
    "surrogate key": {"key": "d\ud800"},
    "surrogate text": {"key": "h1", "text": "alpha \udfff"},
    "surrogate link": {"key": "h1", "links": ("d001\ud800",)},
    "surrogate field name": {"key": "h1", "fields": {"\ud800": "x"}},
    "surrogate field value": {"key": "h1", "fields": {"f": "\ud800"}},
    "NUL key": {"key": "d001\x00"},
    "NUL link": {"key": "h1", "links": ("d001\x00",)},
    "newline key": {"key": "h\n1"},
    "whitespace key": {"key": "  "},
    "huge time": {"key": "h1", "time": 10**400},
    "nan time": {"key": "h1", "time": float("nan")},
    "inf field": {"key": "h1", "fields": {"f": float("inf")}},
}


@pytest.mark.parametrize("case", sorted(HOSTILE_DOCUMENTS))
def test_a_hostile_document_is_refused_and_the_index_commits_on(
    committed: tuple[Path, Index], case: str
) -> None:
    # Before: a surrogate was accepted and every later commit failed with UnicodeEncodeError; a
    # NUL link pointed at d001; a huge time raised OverflowError. Now: a typed error at
    # construction, and the index never sees the document.
    path, index = committed
    before = rankings(index)
    with pytest.raises(WeftError) as caught:
        index.add(Document(**HOSTILE_DOCUMENTS[case]))
    assert not isinstance(caught.value, UnicodeError)
    uncommitted_writes(index)
    index.commit()
    with Index.open(path, readonly=True) as reopened:
        assert rankings(reopened) == rankings(index)
        assert "d001" in reopened and "d001\x00" not in reopened
    assert before != rankings(index)  # the uncommitted writes did land
