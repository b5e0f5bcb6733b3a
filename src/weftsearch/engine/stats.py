"""What an index holds: the figures :meth:`Index.stats` returns.

The values are plain data (counts, names, byte sizes), so the command line,
a server or a monitoring job can format them as they like; :meth:`IndexStats.to_dict`
gives a JSON-ready form.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weftsearch.errors import IndexStorageError
from weftsearch.storage.directory import MANIFEST

__all__ = ["IndexStats", "SegmentStats", "file_bytes", "manifest_bytes"]


@dataclass(frozen=True, slots=True)
class SegmentStats:
    """One segment of an index.

    Attributes:
        name: the segment's file name; ``None`` for a segment sealed in memory
            and not yet committed.
        documents: live documents (stored and not deleted).
        deleted: documents marked deleted (they leave the file at the next merge).
        bytes: bytes on disk: the segment file and its tombstone file; for a
            segment not yet committed, its encoded size in memory.

    """

    name: str | None
    documents: int
    deleted: int
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this segment."""
        return {"name": self.name, "documents": self.documents, "deleted": self.deleted, "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What an index holds, as :meth:`Index.stats` saw it.

    Attributes:
        path: the index directory, or ``None`` for an index in memory.
        documents: live documents, including writes not yet committed.
        pending: documents added but not yet sealed into a segment (part of
            ``documents``).
        generation: the write counter (the committed one for a read-only index).
        analyzer: the analyzer's name.
        vector_dim: the width of stored vectors, ``None`` when there are none.
        vector_dtype: how vectors are stored (``"float32"`` or ``"float16"``).
        segments: every segment the index holds, in search order.
        bytes_on_disk: the manifest and every file it names (segments and
            tombstone files); 0 for an index in memory. Uncommitted writes
            are not counted.

    """

    path: str | None
    documents: int
    pending: int
    generation: int
    analyzer: str
    vector_dim: int | None
    vector_dtype: str
    segments: tuple[SegmentStats, ...]
    bytes_on_disk: int

    @property
    def live_segments(self) -> int:
        """Segments holding at least one live document (what ``Index.segment_count`` counts)."""
        return sum(1 for segment in self.segments if segment.documents)

    @property
    def deleted(self) -> int:
        """Documents marked deleted across all segments."""
        return sum(segment.deleted for segment in self.segments)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole record (``segments`` as a list of dicts)."""
        return {
            "path": self.path,
            "documents": self.documents,
            "pending": self.pending,
            "deleted": self.deleted,
            "generation": self.generation,
            "analyzer": self.analyzer,
            "vector_dim": self.vector_dim,
            "vector_dtype": self.vector_dtype,
            "segment_count": len(self.segments),
            "live_segments": self.live_segments,
            "bytes_on_disk": self.bytes_on_disk,
            "segments": [segment.to_dict() for segment in self.segments],
        }


def file_bytes(directory: Path, names: Sequence[str | None]) -> int:
    """Total size in bytes of the named files of ``directory`` (``None`` names are skipped).

    Raises:
        IndexStorageError: a file is gone: a newer commit of another process
            replaced the state this index loaded (refresh it and ask again).

    """
    total = 0
    for name in names:
        if name is None:
            continue
        try:
            total += os.stat(directory / name).st_size
        except FileNotFoundError:
            raise IndexStorageError(
                f"{directory / name} is gone: a newer commit replaced the state this index loaded; "
                "refresh() it and ask again"
            ) from None
    return total


def manifest_bytes(directory: Path) -> int:
    """Size in bytes of the manifest of the index at ``directory``.

    Raises:
        IndexStorageError: the manifest is gone (the directory was removed).

    """
    return file_bytes(directory, [MANIFEST])
