"""Only regular files are opened under an index directory (issue 26, item 5).

``tests/storage/test_corruption.py`` replaces each index file by a FIFO, a
socket, a directory or a link and checks open and scrub refuse it at once.
Here: the helper itself (including the race its ``fstat`` closes), and
``write.lock`` as a symbolic link, which a writer must never follow: the
link's target is neither created, written nor locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import pytest

from tests.storage.alarms import alarm
from weftsearch import Document, Index
from weftsearch.errors import CorruptIndexError
from weftsearch.ranking.profiles import ProfileStore
from weftsearch.storage import LOCK
from weftsearch.storage.files import read_regular

SECONDS = 5.0


class Hang(BaseException):
    """A call ran past its deadline (a regression that blocks instead of refusing)."""


def deadline(seconds: float = SECONDS) -> contextlib.AbstractContextManager[None]:
    """Raise :class:`Hang` in the block after ``seconds`` (:func:`tests.storage.alarms.alarm`)."""
    return alarm(seconds, Hang, "a call")


def make_index(path: Path) -> None:
    with Index.create(path) as index:
        index.add(Document("a", "hello world"))
        index.commit()


def test_open_regular_reads_a_regular_file(tmp_path: Path) -> None:
    target = tmp_path / "plain"
    target.write_bytes(b"abc" * 1000)
    assert read_regular(target) == b"abc" * 1000
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent")


def test_a_fifo_swapped_in_after_the_lstat_is_refused_by_fstat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check-then-open race: the lstat saw a regular file, a FIFO is what gets opened.

    ``O_NONBLOCK`` makes the open return at once and the ``fstat`` of the
    descriptor refuses it: no window in which a FIFO blocks the reader.
    """
    regular = tmp_path / "regular"
    regular.write_bytes(b"x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda path: real_lstat(regular))
    with deadline(), pytest.raises(CorruptIndexError, match=r"fifo: is a FIFO .*not a regular file"):
        read_regular(fifo)


def test_a_link_swapped_in_after_the_lstat_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    regular = tmp_path / "regular"
    regular.write_bytes(b"x")
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")
    real_lstat = os.lstat
    calls: list[object] = []

    def lstat_says_regular_once(path: object) -> os.stat_result:
        calls.append(path)
        return real_lstat(regular if len(calls) == 1 else path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat_says_regular_once)
    with deadline(), pytest.raises(CorruptIndexError, match="is a symbolic link to /dev/zero"):
        read_regular(link)


@pytest.mark.parametrize("create", [False, True], ids=["existing-target", "dangling-link"])
def test_write_lock_as_a_link_is_never_followed(tmp_path: Path, create: bool) -> None:
    """A writer refuses a ``write.lock`` link: its target is not created, written or locked."""
    path = tmp_path / "index"
    make_index(path)
    (path / LOCK).unlink(missing_ok=True)
    target = tmp_path / "elsewhere"
    if create:
        target.write_bytes(b"precious")
        before = target.stat()
    (path / LOCK).symlink_to(target)
    with deadline(), pytest.raises(CorruptIndexError, match=r"write\.lock: is a symbolic link to"):
        Index.open(path)
    with deadline(), pytest.raises(CorruptIndexError, match=r"write\.lock: is a symbolic link"):
        Index.create(path, overwrite=True)
    if not create:
        assert not target.exists() and not target.is_symlink()
        return
    assert target.read_bytes() == b"precious"
    after = target.stat()
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    fd = os.open(target, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody holds a lock on it
    finally:
        os.close(fd)
    # A reader never takes the lock: it still opens the index.
    with Index.open(path, readonly=True) as index:
        assert index.keys() == ["a"]


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_write_lock_not_a_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "index"
    make_index(path)
    (path / LOCK).unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path / LOCK)
    else:
        (path / LOCK).mkdir()
    with deadline(), pytest.raises(CorruptIndexError, match=r"write\.lock: is a"):
        Index.open(path)


def test_a_profile_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "index"
    make_index(path)
    folder = path / "profiles"
    folder.mkdir()
    os.mkfifo(folder / "mine.v000001.json")
    store = ProfileStore(path)
    with deadline(), pytest.raises(CorruptIndexError, match=r"mine\.v000001\.json: is a FIFO"):
        store.get("mine")
