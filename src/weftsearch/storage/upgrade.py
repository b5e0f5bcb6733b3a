"""Upgrading an index written by an older format version in place.

Format version 2 (docs/FORMAT.md, "Identity") added the index id, the stamp in
every file's header and each file's size and checksum in the manifest; version
3 compressed the postings (docs/FORMAT.md, "Compressed postings"). An older
reader would misread newer files, and this code refuses older ones.
:func:`upgrade_index` rewrites a version-1 or version-2 index as version 3:

1. take the writer lock and read the old manifest;
2. read every listed segment in full through the old-version-tolerant path
   (the only code that accepts versions 1 and 2), checking every checksum and
   structure rule (a version-2 file also its stamp, size and checksum against
   the manifest), and its tombstones;
3. write each segment's live documents (stored records, vectors, links,
   times, postings; :func:`~weftsearch.storage.segment.merge_columns`) as a new
   version-3 segment, stamped with the index id (a version-1 index gets a
   fresh one, a version-2 index keeps its own), under a segment number the old
   manifest does not use;
4. publish the version-3 manifest with one atomic rename (as a commit does),
   then sweep the old files.

A crash before step 4 leaves the old index as it was (the new files are
unnamed and swept by the next upgrade or writer); after it, the version-3
index. Deleted documents are dropped, so no tombstone files are carried over.
Whatever the manifest's ``extra`` records (``vector_dtype``, ``store_text``)
is kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from weftsearch.errors import CorruptIndexError, IndexStorageError
from weftsearch.storage.codec import FileStamp
from weftsearch.storage.directory import (
    INDEX_VERSION,
    MANIFEST,
    IndexDirectory,
    Manifest,
    SegmentEntry,
    WriterLock,
    check_file,
    new_index_id,
    read_tombstones,
)
from weftsearch.storage.files import read_regular
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import encode_columns

__all__ = ["UpgradeReport", "upgrade_index"]

#: The versions this module can upgrade from.
UPGRADABLE = (1, 2)


@dataclass(frozen=True, slots=True)
class UpgradeReport:
    """What :func:`upgrade_index` did.

    Attributes:
        from_version: the index format version found.
        to_version: the version now on disk.
        segments: segments written.
        documents: live documents carried over.

    """

    from_version: int
    to_version: int
    segments: int
    documents: int

    @property
    def changed(self) -> bool:
        """Whether anything was rewritten (False: the index was current already)."""
        return self.from_version != self.to_version


def upgrade_index(path: Path, *, index_id: str | None = None) -> UpgradeReport:
    """Rewrite the version-1 or version-2 index at ``path`` as version 3, in place and crash-safely.

    An index that is current already is left untouched. ``index_id``: the
    upgraded index's id (default: a version-2 index keeps its own, a version-1
    index gets fresh random bits; give one only for reproducible builds).
    O(size of the index): every segment is read and re-encoded.

    Raises:
        IndexNotFoundError: no index at ``path``.
        IndexLockedError: a writer holds the index.
        FormatVersionError: a version this code can neither read nor upgrade.
        CorruptIndexError: an old file fails its checks (nothing is changed).

    """
    directory = IndexDirectory(Path(path))
    directory.check_exists()
    lock = WriterLock(directory.path)
    directory.lock = lock  # every file written and the manifest published check it is still held
    try:
        where = directory.path / MANIFEST
        try:
            data = read_regular(where)
        except CorruptIndexError:
            raise
        except OSError as exc:
            raise IndexStorageError(f"{where}: cannot read ({exc})") from None
        old = Manifest.from_bytes(data, where, versions=(*UPGRADABLE, INDEX_VERSION))
        version = _manifest_version(data)
        if version == INDEX_VERSION:
            return UpgradeReport(INDEX_VERSION, INDEX_VERSION, 0, 0)
        identity = index_id if index_id is not None else old.index_id or new_index_id()
        legacy = (version,)
        entries: list[SegmentEntry] = []
        number = old.next_segment
        documents = 0
        for entry in old.segments:
            segment_path = directory.path / entry.name
            try:
                reader = SegmentReader(segment_path, versions=legacy)
            except FileNotFoundError:
                raise CorruptIndexError(f"{segment_path}: listed in the manifest, missing") from None
            if old.index_id:  # version 2: the file must be the one the manifest names
                check_file(
                    reader.section_file, FileStamp(old.index_id, entry.number), entry.size, entry.checksum
                )
            problems = reader.verify()
            if problems:
                raise CorruptIndexError(f"cannot upgrade: {problems[0]}")
            if reader.n_docs != entry.documents:
                raise CorruptIndexError(
                    f"{segment_path}: holds {reader.n_docs} documents, manifest says {entry.documents}"
                )
            if reader.vector_dim is not None and reader.vector_dim != old.vector_dim:
                raise CorruptIndexError(
                    f"{segment_path}: vectors are {reader.vector_dim} wide, the index's are {old.vector_dim}"
                )
            if entry.deletes is None:
                live = np.ones(entry.documents, dtype=bool)
            else:
                try:
                    live = ~read_tombstones(
                        directory.path / entry.deletes,
                        entry.documents,
                        entry.deleted,
                        entry=entry if old.index_id else None,
                        index_id=old.index_id or None,
                        versions=legacy,
                    )
                except FileNotFoundError:
                    raise CorruptIndexError(f"{directory.path / entry.deletes}: listed, missing") from None
            if not live.any():
                continue
            encoded = encode_columns(merge_columns([(reader, live)]))
            name = f"seg-{number:06d}.wseg"
            size, crc = directory.write_stamped(name, encoded, FileStamp(identity, number))
            kept = int(live.sum())
            entries.append(SegmentEntry(name, kept, None, 0, size, crc))
            documents += kept
            number += 1
        new = Manifest(
            generation=old.generation + 1,
            analyzer=old.analyzer,
            vector_dim=old.vector_dim,
            segments=tuple(entries),
            next_segment=number,
            extra=old.extra,
            index_id=identity,
        )
        directory.publish(new)
        directory.sweep(new)
        return UpgradeReport(version, INDEX_VERSION, len(entries), documents)
    finally:
        lock.release()


def _manifest_version(data: bytes) -> int:
    """The ``version`` of a manifest :meth:`Manifest.from_bytes` has accepted."""
    return int(json.loads(data)["body"]["version"])
