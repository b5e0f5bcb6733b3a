"""The writer's work inside a commit-under-load window: what the committing thread holds and frees.

Searches share the interpreter with a committing writer (docs/BENCHMARKS.md,
"The commit window at stop 38"); these tests pin what keeps the writer's
GIL-held stretches short, without timing anything.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from weftsearch import Document, Index
from weftsearch.engine import children
from weftsearch.engine.children import ChildFile
from weftsearch.engine.pacing import release_gradually
from weftsearch.storage.codec import FileStamp
from weftsearch.storage.directory import IndexDirectory
from weftsearch.storage.segment_writer import SegmentDocument


def _documents(count: int) -> list[Document]:
    return [Document(f"doc-{i:04d}", f"alpha beta{i % 7} gamma{i % 13} delta{i}") for i in range(count)]


def _release_spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record, at each release of a sealed or child-encoded batch, the most references any document has."""
    real = release_gradually
    seen: list[int] = []

    def spy(entries: dict[str, SegmentDocument], pause: Any) -> None:
        # A document only the batch holds has three references here: the
        # batch's, the loop variable's and getrefcount's argument's.
        seen.append(max((sys.getrefcount(entry) for entry in entries.values()), default=0))
        real(entries, pause)

    monkeypatch.setattr("weftsearch.engine.index.release_gradually", spy)
    return seen


@pytest.mark.parametrize("priority", ["idle", "normal"])
def test_a_child_encoded_batch_is_freed_by_its_gradual_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, priority: str
) -> None:
    """No list of the batch outlives the release, so the release frees it a slice at a time.

    Before: the list handed to the child kept every document alive until the
    commit's helper returned, which then freed the whole batch in one
    GIL-held call (120-260 ms for 20,000 SciFact documents).
    """
    seen = _release_spy(monkeypatch)
    index = Index.create(tmp_path / "index", commit_priority=priority)
    index._fork_encode_min = 10
    index.add_many(_documents(40))
    index.commit()
    assert seen == [3]
    assert len(index) == 40
    index.close()
    assert len(Index.open(tmp_path / "index", readonly=True)) == 40


def test_an_in_thread_seal_is_freed_by_its_gradual_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a buffer sealed in the writer's thread (below the child's threshold)."""
    seen = _release_spy(monkeypatch)
    index = Index.create(tmp_path / "index")
    index._fork_encode_min = None
    index.add_many(_documents(40))
    index.commit()
    assert seen == [3]
    index.close()


def _child_target(tmp_path: Path) -> ChildFile:
    return ChildFile(IndexDirectory(tmp_path), "seg-000001.wseg", FileStamp("0" * 32, 1), "idle", None)


def _write(path: Path) -> None:
    path.write_bytes(b"written by the child")


def _full_collections_off() -> bool:
    """Whether the oldest generation's threshold is the one a living child sets."""
    return gc.get_threshold()[2] == children._NO_FULL_COLLECTION


def test_no_full_collection_while_a_child_lives_and_thresholds_restored_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent makes no automatic full collection while it waits for the child, and only then."""
    real_waitpid = os.waitpid
    while_waiting: list[bool] = []

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        while_waiting.append(_full_collections_off())
        return real_waitpid(pid, options)

    monkeypatch.setattr(os, "waitpid", waitpid)
    before = gc.get_threshold()
    assert children.write_in_child(_write, _child_target(tmp_path))
    assert while_waiting == [True]
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0  # nothing frozen: the collector's counters stay true
    assert (tmp_path / "seg-000001.wseg").read_bytes() == b"written by the child"


def test_thresholds_restored_when_waiting_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception while the parent waits (a KeyboardInterrupt, say) still restores the thresholds."""
    real_waitpid = os.waitpid

    def interrupted(pid: int, options: int) -> tuple[int, int]:
        real_waitpid(pid, options)  # reap the child, then fail as an interrupt would
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "waitpid", interrupted)
    before = gc.get_threshold()
    with pytest.raises(KeyboardInterrupt):
        children.write_in_child(_write, _child_target(tmp_path))
    assert gc.get_threshold() == before


def test_thresholds_restored_when_no_child_can_be_forked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed fork (no process to spare) returns False with the collector as it was."""

    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    before = gc.get_threshold()
    assert not children.write_in_child(_write, _child_target(tmp_path))
    assert gc.get_threshold() == before


def test_an_applications_own_thresholds_win(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thresholds the application sets while a child lives are kept, not overwritten by the old ones."""
    before = gc.get_threshold()
    try:
        with children.full_collections_deferred():
            gc.set_threshold(500, 7, 9)
        assert gc.get_threshold() == (500, 7, 9)
    finally:
        gc.set_threshold(*before)


def test_collection_switched_off_is_left_off() -> None:
    """With the collector's thresholds at 0 (collection off), nothing is changed or restored."""
    before = gc.get_threshold()
    try:
        gc.set_threshold(0)
        off = gc.get_threshold()
        with children.full_collections_deferred():
            assert gc.get_threshold() == off
        assert gc.get_threshold() == off
    finally:
        gc.set_threshold(*before)


def test_nested_children_share_one_change() -> None:
    """Two children alive at once (two indexes committing): full collections resume when the last ends."""
    before = gc.get_threshold()
    with children.full_collections_deferred():
        assert _full_collections_off()
        with children.full_collections_deferred():
            assert _full_collections_off()
        assert _full_collections_off()
    assert gc.get_threshold() == before
