"""The index directory: a manifest naming the live segments, a writer lock, and the files.

Layout (docs/FORMAT.md)::

    MANIFEST              JSON: generation, analyzer, vector width, live segments
    write.lock            held (flock) by the one writer
    seg-000001.wseg       a segment (section file)
    seg-000001.del-000004 tombstones of segment 1 as of generation 4 (section file)

A commit writes new segment and tombstone files under their final names
(via a temporary name, fsync, rename), then writes ``MANIFEST.tmp``, fsyncs
it, renames it over ``MANIFEST`` and fsyncs the directory. Until that rename
nothing new is visible; after it, everything is. Files no manifest names are
swept by the writer. Readers read the manifest, then open what it names; if a
sweep removed a file in between, they read the (newer) manifest again.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import (
    CorruptIndexError,
    FormatVersionError,
    IndexLockedError,
    IndexNotFoundError,
    IndexStorageError,
)
from weftsearch.storage.codec import (
    FORMAT_VERSION,
    FileStamp,
    SectionFile,
    checksum,
    encode_sections,
    file_identity,
    stamped_header,
)

__all__ = [
    "MANIFEST",
    "LOCK",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "SegmentEntry",
    "Manifest",
    "WriterLock",
    "IndexDirectory",
    "encode_tombstones",
    "read_tombstones",
    "new_index_id",
    "segment_number",
    "deletes_generation",
    "check_file",
]

MANIFEST = "MANIFEST"
LOCK = "write.lock"
INDEX_FORMAT = "weft-search-index"
#: Version of the manifest and directory layout. Version 2 added the index id,
#: each file's size and checksum, and the stamp in every file's header.
INDEX_VERSION = 2
#: An index id: 128 random bits as 32 lowercase hex digits.
_INDEX_ID = re.compile(r"^[0-9a-f]{32}$")
_SEGMENT_NAME = re.compile(r"^seg-\d{6}\.wseg$")
_DELETES_NAME = re.compile(r"^seg-\d{6}\.del-\d{6}$")
# Files the writer may sweep: its own names and their temporaries, nothing else.
_OWNED = re.compile(r"^(seg-\d{6}\.(wseg|del-\d{6})(\.tmp-\d+)?|MANIFEST\.tmp)$")


@dataclass(frozen=True, slots=True)
class SegmentEntry:
    """One live segment as the manifest lists it.

    Attributes:
        name: the segment file's name (``seg-000001.wseg``).
        documents: documents stored in it, deleted ones included.
        deletes: name of its tombstone file, or ``None`` when nothing is deleted.
        deleted: number of its documents deleted (the tombstone file's popcount).
        size: the segment file's length in bytes.
        checksum: CRC32C of the segment file's header and section table (its content identity).
        deletes_size: the tombstone file's length in bytes (0 without one).
        deletes_checksum: CRC32C of the tombstone file's header and table (0 without one).

    """

    name: str
    documents: int
    deletes: str | None = None
    deleted: int = 0
    size: int = 0
    checksum: int = 0
    deletes_size: int = 0
    deletes_checksum: int = 0

    @property
    def number(self) -> int:
        """The segment number its name carries."""
        return segment_number(self.name)


def segment_number(name: str) -> int:
    """The number in a segment or tombstone file name (``seg-000007.wseg`` -> 7)."""
    return int(name[4:10])


def deletes_generation(name: str) -> int:
    """The generation in a tombstone file name (``seg-000007.del-000012`` -> 12)."""
    return int(name[15:])


def new_index_id() -> str:
    """A fresh index id: 128 random bits, as 32 lowercase hex digits."""
    return os.urandom(16).hex()


@dataclass(frozen=True, slots=True)
class Manifest:
    """What one committed generation consists of."""

    generation: int
    analyzer: str
    vector_dim: int | None
    segments: tuple[SegmentEntry, ...] = ()
    next_segment: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    index_id: str = ""

    def to_bytes(self) -> bytes:
        """Canonical JSON with a CRC32C of the body, so a damaged manifest is detected."""
        body = {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            "index_id": self.index_id,
            "generation": self.generation,
            "analyzer": self.analyzer,
            "vector_dim": self.vector_dim,
            "next_segment": self.next_segment,
            "segments": [
                {
                    "name": s.name,
                    "documents": s.documents,
                    "size": s.size,
                    "checksum": s.checksum,
                    "deletes": s.deletes,
                    "deleted": s.deleted,
                    "deletes_size": s.deletes_size,
                    "deletes_checksum": s.deletes_checksum,
                }
                for s in self.segments
            ],
            "extra": self.extra,
        }
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
        return json.dumps({"body": body, "crc32c": checksum(canonical)}, sort_keys=True, indent=1).encode()

    @classmethod
    def from_bytes(
        cls, data: bytes, where: Path, *, versions: tuple[int, ...] = (INDEX_VERSION,)
    ) -> Manifest:
        """Decode and check a manifest.

        Besides the checksum and types: the index id is well-formed, no two
        entries name the same segment (or segment number), ``next_segment``
        is above every listed number (so the next commit cannot overwrite a
        live file), and no tombstone file is newer than the generation.
        ``versions``: the versions accepted (the upgrade path adds 1, whose
        manifests have no index id and no file identities).

        Raises:
            CorruptIndexError: not JSON, checksum mismatch, or impossible content.
            FormatVersionError: a manifest version this code does not read.

        """
        try:
            outer = json.loads(data)
            body = outer["body"]
            canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
            if checksum(canonical) != outer["crc32c"]:
                raise CorruptIndexError(f"{where}: manifest checksum mismatch")
            if body.get("format") != INDEX_FORMAT:
                raise CorruptIndexError(f"{where}: not a weft-search manifest")
            version = body.get("version")
            if version not in versions:
                older = type(version) is int and 0 < version < INDEX_VERSION
                raise FormatVersionError(
                    f"{where}: index format version {version!r}; this code reads version {INDEX_VERSION}"
                    + (f" (upgrade it in place: weft-search upgrade {where.parent})" if older else "")
                )
            legacy = version == 1
            segments = tuple(
                SegmentEntry(
                    name=str(s["name"]),
                    documents=int(s["documents"]),
                    deletes=None if s["deletes"] is None else str(s["deletes"]),
                    deleted=int(s["deleted"]),
                    size=0 if legacy else int(s["size"]),
                    checksum=0 if legacy else int(s["checksum"]),
                    deletes_size=0 if legacy else int(s["deletes_size"]),
                    deletes_checksum=0 if legacy else int(s["deletes_checksum"]),
                )
                for s in body["segments"]
            )
            index_id = "" if legacy else body["index_id"]
            if not legacy and not (isinstance(index_id, str) and _INDEX_ID.match(index_id)):
                raise CorruptIndexError(f"{where}: index id {index_id!r} is not 32 lowercase hex digits")
            manifest = cls(
                generation=int(body["generation"]),
                analyzer=str(body["analyzer"]),
                vector_dim=None if body["vector_dim"] is None else int(body["vector_dim"]),
                segments=segments,
                next_segment=int(body["next_segment"]),
                extra=dict(body.get("extra", {})),
                index_id=index_id,
            )
        except (CorruptIndexError, FormatVersionError):
            raise
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
            raise CorruptIndexError(f"{where}: manifest does not decode ({exc})") from None
        for entry in manifest.segments:
            if not _SEGMENT_NAME.match(entry.name) or (
                entry.deletes is not None
                and not (_DELETES_NAME.match(entry.deletes) and entry.deletes.startswith(entry.name[:10]))
            ):
                raise CorruptIndexError(f"{where}: manifest names an impossible file {entry.name!r}")
            if not 0 <= entry.deleted <= entry.documents or (entry.deletes is None) != (entry.deleted == 0):
                raise CorruptIndexError(f"{where}: segment {entry.name} has impossible counts")
            if entry.deletes is not None and deletes_generation(entry.deletes) > manifest.generation:
                raise CorruptIndexError(
                    f"{where}: {entry.deletes} is newer than the manifest's generation {manifest.generation}"
                )
            if not legacy and (
                not 0 < entry.size < 1 << 62
                or not 0 <= entry.checksum < 1 << 32
                or not 0 <= entry.deletes_checksum < 1 << 32
                or (entry.deletes is None) != (entry.deletes_size == 0)
                or not 0 <= entry.deletes_size < 1 << 62
            ):
                raise CorruptIndexError(f"{where}: segment {entry.name} has an impossible size or checksum")
        # Duplicates would serve documents twice and make a merge write duplicate keys;
        # refusing them also bounds every later pass by the number of distinct files.
        numbers = [entry.number for entry in manifest.segments]
        if len(set(numbers)) != len(numbers):
            duplicate = next(n for n, times in Counter(numbers).items() if times > 1)  # O(entries)
            raise CorruptIndexError(f"{where}: segment number {duplicate} is listed more than once")
        if numbers and manifest.next_segment <= max(numbers):
            raise CorruptIndexError(
                f"{where}: next_segment {manifest.next_segment} is not above the listed segment "
                f"{max(numbers)} (the next commit would overwrite a live file)"
            )
        if not 0 < manifest.next_segment <= 999_999 or manifest.generation < 0:
            raise CorruptIndexError(f"{where}: impossible next_segment or generation")
        return manifest


def encode_tombstones(deleted: NDArray[np.bool_], stamp: FileStamp | None = None) -> bytes:
    """A tombstone file: one bit per document of a segment, set when deleted, stamped with ``stamp``."""
    data = encode_sections(
        {
            "bits": np.packbits(deleted.astype(np.uint8), bitorder="little"),
            "count": np.array([deleted.shape[0], int(deleted.sum())], dtype=np.uint64),
        }
    )
    return data if stamp is None else stamped_header(data, stamp) + data[64:]


def check_file(
    section_file: SectionFile, stamp: FileStamp, size: int | None = None, crc: int | None = None
) -> None:
    """Check that ``section_file`` is the file the manifest means: its stamp, size and checksum.

    O(1): the stamp is in the header and the identity was computed at open.

    Raises:
        CorruptIndexError: naming the file and what disagrees.

    """
    path, found = section_file.path, section_file.stamp
    if found.index_id != stamp.index_id:
        raise CorruptIndexError(
            f"{path}: belongs to index {found.index_id or '(unstamped)'}, not to this index {stamp.index_id}"
        )
    if found.number != stamp.number:
        raise CorruptIndexError(
            f"{path}: is segment number {found.number}, the manifest expects {stamp.number}"
        )
    if found.generation != stamp.generation:
        raise CorruptIndexError(
            f"{path}: is of generation {found.generation}, the manifest expects {stamp.generation}"
        )
    if size is not None and section_file.length != size:
        raise CorruptIndexError(f"{path}: is {section_file.length} bytes, the manifest says {size}")
    if crc is not None and section_file.identity != crc:
        raise CorruptIndexError(
            f"{path}: header and table checksum {section_file.identity:08x}, the manifest says {crc:08x} "
            "(another file of the same name and size)"
        )


def read_tombstones(
    path: Path,
    documents: int,
    deleted: int,
    *,
    entry: SegmentEntry | None = None,
    index_id: str | None = None,
    versions: tuple[int, ...] = (FORMAT_VERSION,),
) -> NDArray[np.bool_]:
    """Read a tombstone file and check it against the manifest's counts.

    With ``entry`` and ``index_id``, the file's stamp (index, segment number,
    generation), size and checksum must be what the manifest records too.

    Raises:
        CorruptIndexError: damaged, or disagreeing with the manifest.

    """
    section_file = SectionFile(path, versions=versions)  # FileNotFoundError propagates: the caller may retry
    if entry is not None and index_id is not None and entry.deletes is not None:
        check_file(
            section_file,
            FileStamp(index_id, entry.number, deletes_generation(entry.deletes)),
            entry.deletes_size,
            entry.deletes_checksum,
        )
    counts = section_file.array("count")
    bits = section_file.array("bits")
    problems = section_file.verify()  # a few bytes: check the padding as well
    if problems:
        raise CorruptIndexError(problems[0])
    if counts.dtype.str != "<u8" or bits.dtype.str != "|u1":
        raise CorruptIndexError(f"{path}: tombstone sections have the wrong element types")
    if counts.shape[0] != 2 or int(counts[0]) != documents or bits.shape[0] != (documents + 7) // 8:
        raise CorruptIndexError(f"{path}: tombstones do not match their segment")
    mask = np.unpackbits(np.asarray(bits, dtype=np.uint8), count=documents, bitorder="little").astype(bool)
    if int(mask.sum()) != deleted or int(counts[1]) != deleted:
        raise CorruptIndexError(f"{path}: tombstone count disagrees with the manifest")
    mask.setflags(write=False)
    return mask


class WriterLock:
    """An exclusive ``flock`` on ``write.lock``: one writer per directory, across processes.

    ``flock`` locks belong to an open file description, so a second ``Index``
    in the same process is refused too.
    """

    def __init__(self, path: Path) -> None:
        self.path = path / LOCK
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise IndexStorageError(f"{path}: cannot create the writer lock ({exc})") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise IndexLockedError(
                f"{path}: another writer holds the index (open it with readonly=True to search it)"
            ) from None

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.release()


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class IndexDirectory:
    """File operations on one index directory. Knows files and bytes, never scoring."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def check_exists(self) -> None:
        """Raise unless ``path`` is a directory holding a manifest."""
        if not self.path.exists():
            raise IndexNotFoundError(f"no index at {self.path}: the directory does not exist")
        if not self.path.is_dir():
            raise IndexStorageError(f"{self.path} is a file, not an index directory")
        if not (self.path / MANIFEST).exists():
            raise IndexNotFoundError(f"no index at {self.path}: {MANIFEST} is missing")

    def prepare_new(self, overwrite: bool) -> None:
        """Create the directory for a new index, refusing to clobber one unless asked."""
        if self.path.exists() and not self.path.is_dir():
            raise IndexStorageError(f"{self.path} is a file, not a directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexStorageError(f"cannot create {self.path}: {exc}") from None
        leftovers = [p.name for p in self.path.iterdir() if p.name != LOCK]
        if leftovers and not overwrite:
            raise IndexStorageError(f"{self.path} is not empty; pass overwrite=True to replace it")
        if not os.access(self.path, os.W_OK):
            raise IndexStorageError(f"{self.path} is not writable")

    def read_manifest(self) -> Manifest:
        """The current manifest.

        Raises:
            IndexNotFoundError, CorruptIndexError, FormatVersionError.

        """
        self.check_exists()
        where = self.path / MANIFEST
        try:
            data = where.read_bytes()
        except OSError as exc:
            raise IndexStorageError(f"{where}: cannot read ({exc})") from None
        return Manifest.from_bytes(data, where)

    def write_file(self, name: str, data: bytes) -> None:
        """Write ``name`` durably: temporary name, fsync, rename (the directory is fsynced at commit)."""
        temporary = self.path / f"{name}.tmp-{os.getpid()}"
        try:
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path / name)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise IndexStorageError(f"cannot write {self.path / name}: {exc}") from exc

    def write_stamped(self, name: str, data: bytes, stamp: FileStamp) -> tuple[int, int]:
        """Write encoded section file ``data`` as ``name`` with ``stamp`` in its header.

        Returns ``(bytes, identity)`` for the manifest. The stamp is written
        into a new 64-byte header; the rest of ``data`` is written as it is
        (no copy). Durable as :meth:`write_file`.
        """
        header = stamped_header(data, stamp)
        temporary = self.path / f"{name}.tmp-{os.getpid()}"
        body = memoryview(data)[64:]
        try:
            with open(temporary, "wb") as handle:
                handle.write(header)
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path / name)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise IndexStorageError(f"cannot write {self.path / name}: {exc}") from exc
        return len(data), file_identity(header, data)

    def publish(self, manifest: Manifest) -> None:
        """Make ``manifest`` the current generation, atomically and durably."""
        temporary = self.path / f"{MANIFEST}.tmp"
        try:
            _fsync_directory(self.path)  # new segment files are durable before they are named
            with open(temporary, "wb") as handle:
                handle.write(manifest.to_bytes())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path / MANIFEST)
            _fsync_directory(self.path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise IndexStorageError(f"cannot commit {self.path}: {exc}") from exc

    def sweep(self, manifest: Manifest) -> list[str]:
        """Delete the files this directory owns that ``manifest`` does not name; return them."""
        keep = {MANIFEST, LOCK}
        for entry in manifest.segments:
            keep.add(entry.name)
            if entry.deletes:
                keep.add(entry.deletes)
        removed = []
        for child in self.path.iterdir():
            if child.name not in keep and _OWNED.match(child.name):
                try:
                    child.unlink()
                    removed.append(child.name)
                except OSError:
                    pass  # a later sweep retries; an unnamed file is invisible anyway
        return sorted(removed)
