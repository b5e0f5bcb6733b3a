"""The writer's work inside a commit-under-load window: what the committing thread holds and frees.

Searches share the interpreter with a committing writer (docs/BENCHMARKS.md,
"The commit window at stop 38"); these tests pin what keeps the writer's
GIL-held stretches short, without timing anything.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from weftsearch import Document, Index
from weftsearch.engine import index as index_module
from weftsearch.storage.segment_writer import SegmentDocument


def _documents(count: int) -> list[Document]:
    return [Document(f"doc-{i:04d}", f"alpha beta{i % 7} gamma{i % 13} delta{i}") for i in range(count)]


def _release_spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record, at each release of a sealed or child-encoded batch, the most references any document has."""
    real = index_module.release_gradually
    seen: list[int] = []

    def spy(entries: dict[str, SegmentDocument], pause: Any) -> None:
        # A document only the batch holds has three references here: the
        # batch's, the loop variable's and getrefcount's argument's.
        seen.append(max((sys.getrefcount(entry) for entry in entries.values()), default=0))
        real(entries, pause)

    monkeypatch.setattr(index_module, "release_gradually", spy)
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
