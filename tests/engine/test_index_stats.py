"""Tests of Index.stats: the counts and sizes the CLI's ``stats`` command (and a server) shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from weftsearch import Document, Index
from weftsearch.engine.stats import IndexStats, SegmentStats
from weftsearch.errors import IndexStorageError


def docs(keys: str, dim: int | None = None) -> list[Document]:
    return [
        Document(key, f"text of {key}", vector=None if dim is None else np.full(dim, 1.0 + n))
        for n, key in enumerate(keys)
    ]


def test_stats_of_a_committed_index(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with Index.create(path, "simple", vector_dtype="float16") as index:
        index.add_many(docs("abc", dim=3))
        index.commit()
        index.add_many(docs("de", dim=3))
        index.delete("a")
        generation = index.commit()
        stats = index.stats()
    assert isinstance(stats, IndexStats)
    assert stats.path == str(path)
    assert (stats.documents, stats.pending, stats.deleted) == (4, 0, 1)
    assert stats.generation == generation
    assert (stats.analyzer, stats.vector_dim, stats.vector_dtype) == ("simple", 3, "float16")
    first, second = stats.segments
    assert (first.documents, first.deleted, second.documents, second.deleted) == (2, 1, 2, 0)
    assert first.name is not None and second.name is not None
    tombstones = [name for name in os.listdir(path) if ".del-" in name]
    assert len(tombstones) == 1
    assert first.bytes == (path / first.name).stat().st_size + (path / tombstones[0]).stat().st_size
    assert second.bytes == (path / second.name).stat().st_size
    # Every file of the directory but the writer lock: the manifest, two segments, one tombstone file.
    on_disk = sum(p.stat().st_size for p in path.iterdir() if p.name != "LOCK")
    assert stats.bytes_on_disk == on_disk
    assert stats.live_segments == 2
    record = json.loads(json.dumps(stats.to_dict()))
    assert record["documents"] == 4 and record["segment_count"] == 2 and record["vector_dim"] == 3
    assert record["segments"][0] == {"name": first.name, "documents": 2, "deleted": 1, "bytes": first.bytes}
    with pytest.raises(AttributeError):
        stats.documents = 0  # type: ignore[misc]


def test_stats_count_uncommitted_writes_but_not_on_disk(tmp_path: Path) -> None:
    with Index.create(tmp_path / "idx") as index:
        empty = index.stats().bytes_on_disk
        index.add_many(docs("xyz"))
        pending = index.stats()
        assert (pending.documents, pending.pending, pending.segments) == (3, 3, ())
        assert pending.bytes_on_disk == empty
        index.snapshot()  # seals the buffered documents into a segment in memory
        sealed = index.stats()
        [segment] = sealed.segments
        assert segment.name is None and segment.documents == 3 and segment.bytes > 0
        assert sealed.bytes_on_disk == empty
        index.commit()
        assert index.stats().bytes_on_disk > empty


def test_stats_of_an_index_in_memory() -> None:
    index = Index()
    index.add_many(docs("ab"))
    index.snapshot()
    stats = index.stats()
    assert stats.path is None and stats.bytes_on_disk == 0 and stats.vector_dim is None
    assert stats.segments == (SegmentStats(None, 2, 0, stats.segments[0].bytes),)


def test_stats_of_a_reader_whose_files_were_swept(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with Index.create(path) as writer:
        writer.add_many(docs("ab"))
        writer.commit()
        reader = Index.open(path, readonly=True)
        writer.add_many(docs("c"))
        writer.commit()
        writer.merge(force=True)  # the reader's segment file is swept
        with pytest.raises(IndexStorageError, match="refresh"):
            reader.stats()
        reader.refresh()
        assert reader.stats().documents == 3


def test_a_writers_stats_never_names_a_file_a_merge_just_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge finishing while stats measured its files swept one of them: stats said "is gone"
    (seen as a server's /v1/stats answering 500 under concurrent writes and merges)."""
    import threading

    import weftsearch.engine.index as index_module

    index = Index.create(tmp_path / "idx")
    for n in range(3):
        index.add_many([Document(f"k{n}-{i}", f"word{i} common") for i in range(5)], progress=False)
        index.commit()
    assert index.segment_count == 3
    from collections.abc import Callable

    # The name engine.index calls (imported from engine.stats), patched there below.
    measure: Callable[[Path, list[str | None]], int] = getattr(index_module, "file_bytes")  # noqa: B009
    merged = threading.Event()

    def merge_meanwhile(directory: Path, names: list[str | None]) -> int:
        if not merged.is_set():
            merged.set()
            worker = threading.Thread(target=lambda: index.merge(force=True))
            worker.start()
            worker.join(timeout=1.0)  # it waits on the lock stats holds: the files stay
        return measure(directory, names)

    monkeypatch.setattr(index_module, "file_bytes", merge_meanwhile)
    stats = index.stats()
    assert stats.documents == 15 and len(stats.segments) == 3
    monkeypatch.setattr(index_module, "file_bytes", measure)
    for _ in range(100):
        if index.segment_count == 1:
            break
        threading.Event().wait(0.05)
    assert index.stats().documents == 15
    index.close()
