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

import contextlib
import fcntl
import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import (
    CorruptIndexError,
    FormatVersionError,
    IndexExistsError,
    IndexLockedError,
    IndexNotFoundError,
    IndexStorageError,
    InvalidParameterError,
)
from weftsearch.schema import Schema
from weftsearch.storage.codec import (
    FORMAT_VERSION,
    FileStamp,
    SectionFile,
    checksum,
    encode_sections,
    file_identity,
    stamped_header,
)
from weftsearch.storage.fields import FIELD_KINDS
from weftsearch.storage.files import open_regular, read_regular

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
    "is_index_id",
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
INDEX_VERSION = 4
#: An index id: 128 random bits as 32 lowercase hex digits.
_INDEX_ID = re.compile(r"[0-9a-f]{32}")
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


def is_index_id(value: object) -> bool:
    """Whether ``value`` is an index id as :func:`new_index_id` makes them: 32 lowercase hex digits."""
    return isinstance(value, str) and _INDEX_ID.fullmatch(value) is not None


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
                    + (
                        "; older versions are no longer read "
                        f"(rebuild the index {where.parent} from its documents)"
                        if older
                        else ""
                    )
                )
            legacy = version == 1
            required = _BODY_KEYS - {"index_id"} if legacy else _BODY_KEYS
            _check_keys(body, required, _BODY_OPTIONAL_KEYS | {"index_id"}, where, "")
            if not isinstance(body["segments"], list):
                raise CorruptIndexError(
                    f"{where}: manifest 'segments' is {_json_type(body['segments'])}, not a list"
                )
            segments = tuple(
                _segment_entry(s, position, legacy, where) for position, s in enumerate(body["segments"])
            )
            index_id = "" if legacy else body["index_id"]
            if not legacy and not is_index_id(index_id):
                raise CorruptIndexError(f"{where}: index id {index_id!r} is not 32 lowercase hex digits")
            analyzer = body["analyzer"]
            if not isinstance(analyzer, str) or not analyzer:
                raise CorruptIndexError(f"{where}: manifest 'analyzer' is {analyzer!r}, not an analyzer name")
            vector_dim = body["vector_dim"]
            manifest = cls(
                generation=_integer(body["generation"], "generation", where),
                analyzer=analyzer,
                vector_dim=None if vector_dim is None else _integer(vector_dim, "vector_dim", where, low=1),
                segments=segments,
                next_segment=_integer(body["next_segment"], "next_segment", where),
                extra=_extra(body.get("extra", {}), where),
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


#: The keys of a manifest body, of one segment entry, and of ``extra`` (docs/FORMAT.md).
_BODY_KEYS = frozenset(
    {"format", "version", "index_id", "generation", "analyzer", "vector_dim", "next_segment", "segments"}
)
_BODY_OPTIONAL_KEYS = frozenset({"extra"})
_ENTRY_KEYS = frozenset({"name", "documents", "deletes", "deleted"})
_ENTRY_IDENTITY_KEYS = frozenset({"size", "checksum", "deletes_size", "deletes_checksum"})
_EXTRA_KEYS = frozenset({"vector_dtype", "store_text", "fields", "embedder", "schema"})
#: The keys of ``extra["embedder"]`` (an index made with an embedder; docs/FORMAT.md).
_EMBEDDER_KEYS = frozenset({"name", "dim", "model"})
#: What ``extra["vector_dtype"]`` may be (as ``storage.segment.VECTOR_DTYPES``).
_VECTOR_DTYPES = ("float32", "float16")
#: Every integer of a manifest is below this (sizes, counts, checksums, generations).
_INTEGER_LIMIT = 1 << 62


def _json_type(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _check_keys(
    record: object, required: frozenset[str], optional: frozenset[str] | set[str], where: Path, what: str
) -> None:
    """Refuse a record that is not an object, lacks a required key or has one nobody wrote."""
    label = f"manifest {what}".rstrip()
    if not isinstance(record, dict):
        raise CorruptIndexError(f"{where}: {label} is {_json_type(record)}, not an object")
    missing = sorted(required - record.keys())
    if missing:
        raise CorruptIndexError(f"{where}: {label} lacks {', '.join(repr(k) for k in missing)}")
    unknown = sorted(record.keys() - required - optional)
    if unknown:
        raise CorruptIndexError(f"{where}: {label} has unknown key(s) {', '.join(repr(k) for k in unknown)}")


def _integer(value: object, what: str, where: Path, *, low: int = 0, high: int = _INTEGER_LIMIT) -> int:
    """``value`` if it is a JSON integer in ``[low, high)``: never a float, string or boolean coerced."""
    if type(value) is not int:
        raise CorruptIndexError(f"{where}: manifest {what} is {value!r}, not an integer")
    if not low <= value < high:
        raise CorruptIndexError(f"{where}: manifest {what} {value} is out of range [{low}, {high})")
    return value


def _segment_entry(record: object, position: int, legacy: bool, where: Path) -> SegmentEntry:
    """One entry of the manifest's segment list, every key present, typed and in range."""
    label = f"segment entry {position}"
    required = _ENTRY_KEYS if legacy else _ENTRY_KEYS | _ENTRY_IDENTITY_KEYS
    _check_keys(record, required, _ENTRY_IDENTITY_KEYS if legacy else set(), where, label)
    assert isinstance(record, dict)
    name, deletes = record["name"], record["deletes"]
    if not isinstance(name, str) or not (deletes is None or isinstance(deletes, str)):
        raise CorruptIndexError(f"{where}: manifest {label} names a file that is not a string")

    def number(key: str) -> int:
        return 0 if legacy else _integer(record[key], f"{label} {key}", where)

    return SegmentEntry(
        name=name,
        documents=_integer(record["documents"], f"{label} documents", where),
        deletes=deletes,
        deleted=_integer(record["deleted"], f"{label} deleted", where),
        size=number("size"),
        checksum=number("checksum"),
        deletes_size=number("deletes_size"),
        deletes_checksum=number("deletes_checksum"),
    )


def _extra(extra: object, where: Path) -> dict[str, Any]:
    """The manifest's ``extra`` record: known keys only, each of its type (field kinds known)."""
    _check_keys(extra, frozenset(), _EXTRA_KEYS, where, "'extra'")
    assert isinstance(extra, dict)
    dtype = extra.get("vector_dtype", "float32")
    if dtype not in _VECTOR_DTYPES:
        raise CorruptIndexError(
            f"{where}: manifest vector_dtype {dtype!r} is not one of {', '.join(_VECTOR_DTYPES)}"
        )
    if type(extra.get("store_text", True)) is not bool:
        raise CorruptIndexError(f"{where}: manifest store_text is {extra['store_text']!r}, not a boolean")
    fields = extra.get("fields", {})
    if not isinstance(fields, dict):
        raise CorruptIndexError(f"{where}: manifest 'fields' is {_json_type(fields)}, not an object")
    for name, kind in fields.items():
        if not name or kind not in FIELD_KINDS:
            raise CorruptIndexError(
                f"{where}: manifest field {name!r} has unknown kind {kind!r} "
                f"(known: {', '.join(FIELD_KINDS)})"
            )
    if "embedder" in extra:
        _embedder_record(extra["embedder"], where)
    if "schema" in extra:
        try:
            Schema.from_dict(extra["schema"])
        except InvalidParameterError as exc:
            raise CorruptIndexError(f"{where}: manifest schema is not a schema ({exc})") from None
    return dict(extra)


def _embedder_record(record: object, where: Path) -> None:
    """``extra["embedder"]``: a non-empty name, a width of at least 1, and the model record (an object)."""
    _check_keys(record, _EMBEDDER_KEYS, frozenset(), where, "'embedder'")
    assert isinstance(record, dict)
    if not isinstance(record["name"], str) or not record["name"]:
        raise CorruptIndexError(f"{where}: manifest embedder name is {record['name']!r}, not a name")
    _integer(record["dim"], "embedder dim", where, low=1)
    if not isinstance(record["model"], dict):
        raise CorruptIndexError(
            f"{where}: manifest embedder model is {_json_type(record['model'])}, not an object"
        )


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
    in the same process is refused too. A forked child that closes its copy of
    the descriptor leaves the lock with the parent (the description stays open
    in the parent).

    The lock is held only while the descriptor is open *and* still refers to
    the file at ``DIR/write.lock``: a lock file that was deleted (and perhaps
    created again by someone else) guards nothing, so :meth:`check_held`
    compares the device and inode of the two, and taking the lock retries when
    the file was replaced between the ``open`` and the ``flock``.

    Attributes:
        path: the lock file, ``DIR/write.lock``.
        created: whether taking this lock created the file (so a failed
            create or open can remove it again and leave no stray file).

    """

    _fd: int | None = None  # set before anything can fail, so __del__ always works

    def __init__(self, path: Path) -> None:
        self.path = path / LOCK
        self.created = False
        for _ in range(8):  # each retry means another process replaced the file meanwhile
            fd, created = self._open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise IndexLockedError(
                    f"{path}: another writer holds the index (open it with readonly=True to search it)"
                ) from None
            if self._same_file(fd):
                self._fd = fd
                self.created = created
                return
            os.close(fd)  # we locked a file that is no longer DIR/write.lock: try the new one
        raise IndexLockedError(f"{path}: the writer lock file keeps being replaced by another process")

    def _open(self, directory: Path) -> tuple[int, bool]:
        """Open (creating if needed) the lock file; return the descriptor and whether we created it."""
        # open_regular: a write.lock that is a symbolic link is never followed (the writer
        # must not create, truncate or lock a file elsewhere), nor a FIFO or device opened.
        # O_EXCL never follows a link either: an existing link fails as "exists", then the
        # plain open refuses it.
        try:
            try:
                return open_regular(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL), True
            except FileExistsError:
                return open_regular(self.path, os.O_RDWR), False
        except CorruptIndexError:
            raise
        except OSError as exc:
            raise IndexStorageError(f"{directory}: cannot create the writer lock ({exc.strerror})") from None

    def _same_file(self, fd: int) -> bool:
        try:
            mine, there = os.fstat(fd), os.lstat(self.path)  # a link put there is not our file
        except OSError:
            return False
        return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)

    @property
    def held(self) -> bool:
        """True while the descriptor is open and still refers to ``DIR/write.lock``."""
        return self._fd is not None and self._same_file(self._fd)

    def fileno(self) -> int | None:
        """The lock's descriptor (``None`` once released); a forked child closes its copy."""
        return self._fd

    def check_held(self) -> None:
        """Raise unless this object holds the lock now (see the class docstring).

        Raises:
            IndexLockedError: released, or the lock file was deleted or replaced.

        """
        if self._fd is None:
            raise IndexLockedError(f"{self.path.parent}: this writer released the lock; nothing is written")
        if not self._same_file(self._fd):
            raise IndexLockedError(
                f"{self.path.parent}: {LOCK} was deleted or replaced, so this writer no longer holds "
                "the writer lock; nothing is written"
            )

    def release(self, *, remove: bool = False) -> None:
        """Release the lock (idempotent); ``remove`` also deletes the lock file if it is still ours."""
        if self._fd is not None:
            if remove and self._same_file(self._fd):
                with contextlib.suppress(OSError):
                    self.path.unlink()  # while still locked: nobody can be relying on it
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.release()


def _write_durably(path: Path, *parts: bytes | memoryview) -> None:
    """Create ``path`` holding ``parts`` one after another, and fsync it.

    Plain ``os`` calls, not ``open()``: a buffered file adds an ``fstat``, an
    ``ioctl`` and an ``lseek`` per file, and every system call hands the GIL
    over and must win it back. A commit that searching threads compete with
    pays for each hand-off (CPython's convoy effect), so the commit makes as
    few as it can: open, write (looping only on a short write), fsync, close.

    Raises:
        OSError: as the system calls raise it (the caller names the file).

    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        pending = [memoryview(part).cast("B") for part in parts if len(part)]
        while pending:
            written = os.writev(fd, pending)
            while pending and written >= len(pending[0]):
                written -= len(pending[0])
                pending.pop(0)
            if pending and written:
                pending[0] = pending[0][written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class IndexDirectory:
    """File operations on one index directory. Knows files and bytes, never scoring.

    Attributes:
        path: the directory.
        lock: the :class:`WriterLock` a writer holds, or ``None``. When set,
            every operation that creates, replaces or removes a file
            (:meth:`write_file`, :meth:`install`, :meth:`publish`,
            :meth:`sweep`) first checks that the lock is held at that moment
            (:meth:`WriterLock.check_held`), so a closed writer, or one whose
            lock file was replaced, cannot touch a directory another writer
            now owns.

    """

    def __init__(self, path: Path, lock: WriterLock | None = None) -> None:
        self.path = path
        self.lock = lock

    def _check_lock(self) -> None:
        if self.lock is not None:
            self.lock.check_held()

    def check_exists(self) -> None:
        """Raise unless ``path`` is a directory holding a manifest."""
        if not self.path.exists():
            raise IndexNotFoundError(f"no index at {self.path}: the directory does not exist")
        if not self.path.is_dir():
            raise IndexStorageError(f"{self.path} is a file, not an index directory")
        if not (self.path / MANIFEST).exists():
            raise IndexNotFoundError(f"no index at {self.path}: {MANIFEST} is missing")

    def prepare_new(self, overwrite: bool) -> list[Path]:
        """Check that a new index may go at ``path``, creating the directory if needed.

        Nothing that exists is removed or changed here: an index already at
        ``path`` (``overwrite=True``) keeps serving until the new index's first
        commit publishes a manifest over it (see :meth:`replacement_start`).

        Returns:
            The directories this call created, deepest first, for
            :meth:`remove_created` to take away again if the create fails.

        Raises:
            IndexStorageError: ``path`` is a file, a non-empty directory
                (unless ``overwrite``), or cannot be created or written.

        """
        if self.path.exists() and not self.path.is_dir():
            raise IndexStorageError(f"{self.path} is a file, not a directory")
        made = []
        missing = self.path
        while not missing.exists() and missing.parent != missing:
            made.append(missing)
            missing = missing.parent
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.remove_created(made)
            raise IndexStorageError(f"cannot create {self.path}: {exc}") from None
        leftovers = [p.name for p in self.path.iterdir() if p.name != LOCK]
        if leftovers and not overwrite:
            raise IndexExistsError(f"{self.path} is not empty; pass overwrite=True to replace it")
        if not os.access(self.path, os.W_OK):
            self.remove_created(made)
            raise IndexStorageError(f"{self.path} is not writable")
        return made

    def remove_created(self, made: list[Path]) -> None:
        """Remove the (empty) directories :meth:`prepare_new` created; best effort."""
        for directory in made:
            try:
                directory.rmdir()
            except OSError:
                break  # not empty, or already gone: leave it and its parents alone

    def replacement_start(self) -> tuple[int, int] | None:
        """Where an index replacing the one at ``path`` starts; ``None`` when there is none.

        Call it holding the writer lock. The replacement commits as the next
        generation of this directory and names its segments from the first
        number no file here uses, so none of its files can overwrite a file
        of the index it replaces: until its first commit renames a manifest
        over ``MANIFEST`` the old index is whole and is what ``open`` reads; a
        crash before that leaves the old index (its next writer sweeps the
        unfinished files), one after it leaves the new one.

        Returns:
            ``(generation, first segment number)``, or ``None`` when ``path``
            holds no manifest (a new index there is published at once).

        """
        if not (self.path / MANIFEST).exists():
            return None
        generation, next_segment = 1, 1
        try:
            manifest = self.read_manifest()
            generation, next_segment = manifest.generation + 1, manifest.next_segment
        except IndexStorageError:
            pass  # a damaged or foreign manifest: nothing of it to keep but the file names
        for child in self.path.iterdir():
            if _OWNED.match(child.name) and child.name.startswith("seg-"):
                next_segment = max(next_segment, int(child.name[4:10]) + 1)
        return generation, next_segment

    def read_manifest(self) -> Manifest:
        """The current manifest.

        Raises:
            IndexNotFoundError, CorruptIndexError, FormatVersionError.

        """
        self.check_exists()
        where = self.path / MANIFEST
        try:
            data = read_regular(where)
        except CorruptIndexError:
            raise
        except OSError as exc:
            raise IndexStorageError(f"{where}: cannot read ({exc})") from None
        return Manifest.from_bytes(data, where)

    def write_file(self, name: str, data: bytes) -> None:
        """Write ``name`` durably: temporary name, fsync, rename (the directory is fsynced at commit)."""
        self._check_lock()
        self.install(self.write_temporary(name, data, os.getpid()), name)

    def write_temporary(self, name: str, data: bytes, owner: int) -> Path:
        """Write ``data`` to ``name.tmp-<owner>`` and fsync it; return its path.

        Makes nothing visible: a temporary file is swept by the next writer.
        This is all a forked encoder does (it holds no lock and must never
        rename into a directory its parent may no longer own).
        """
        temporary = self.path / f"{name}.tmp-{owner}"
        try:
            _write_durably(temporary, data)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise IndexStorageError(f"cannot write {self.path / name}: {exc}") from exc
        return temporary

    def install(self, temporary: Path, name: str) -> None:
        """Rename a file :meth:`write_temporary` wrote to its final ``name`` (checks the lock)."""
        try:
            self._check_lock()
            os.replace(temporary, self.path / name)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            if isinstance(exc, IndexStorageError):
                raise
            raise IndexStorageError(f"cannot write {self.path / name}: {exc}") from exc

    def write_stamped(self, name: str, data: bytes, stamp: FileStamp) -> tuple[int, int]:
        """Write encoded section file ``data`` as ``name`` with ``stamp`` in its header.

        Returns ``(bytes, identity)`` for the manifest. The stamp is written
        into a new 64-byte header; the rest of ``data`` is written as it is
        (no copy). Durable as :meth:`write_file`, and like it checks the lock.
        """
        self._check_lock()
        temporary, identity = self.write_stamped_temporary(name, data, stamp, os.getpid())
        self.install(temporary, name)
        return identity

    def write_streamed(self, name: str, write: Callable[[Path], tuple[int, int]]) -> tuple[int, int]:
        """Write file ``name`` by ``write(temporary_path)`` (returns ``(bytes, identity)``) and install it.

        For a segment written section by section (never whole in memory,
        :func:`~weftsearch.storage.segment.write_columns`). Durable and
        lock-checked as :meth:`write_stamped`; on any failure the temporary
        file is removed (an ``OSError`` becomes :class:`IndexStorageError`).
        """
        self._check_lock()
        temporary = self.path / f"{name}.tmp-{os.getpid()}"
        try:
            identity = write(temporary)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise IndexStorageError(f"cannot write {self.path / name}: {exc}") from exc
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        self.install(temporary, name)
        return identity

    def write_stamped_temporary(
        self, name: str, data: bytes, stamp: FileStamp, owner: int
    ) -> tuple[Path, tuple[int, int]]:
        """:meth:`write_temporary` for a stamped section file; return its path and ``(bytes, identity)``.

        Makes nothing visible (a forked encoder's whole part; see :meth:`write_temporary`).
        """
        header = stamped_header(data, stamp)
        temporary = self.path / f"{name}.tmp-{owner}"
        body = memoryview(data)[64:]
        try:
            _write_durably(temporary, header, body)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise IndexStorageError(f"cannot write {self.path / name}: {exc}") from exc
        return temporary, (len(data), file_identity(header, data))

    def publish(self, manifest: Manifest) -> None:
        """Make ``manifest`` the current generation, atomically and durably.

        Raises:
            IndexLockedError: :attr:`lock` is set and not held (checked just
                before the temporary manifest is written and again just before
                the rename), so a writer that lost the lock publishes nothing.
            IndexStorageError: a write failed.

        """
        self._check_lock()
        temporary = self.path / f"{MANIFEST}.tmp"
        try:
            _fsync_directory(self.path)  # new segment files are durable before they are named
            _write_durably(temporary, manifest.to_bytes())
            self._check_lock()
            os.replace(temporary, self.path / MANIFEST)
            _fsync_directory(self.path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            if isinstance(exc, IndexStorageError):
                raise
            raise IndexStorageError(f"cannot commit {self.path}: {exc}") from exc

    def sweep(self, manifest: Manifest) -> list[str]:
        """Delete the files this directory owns that ``manifest`` does not name; return them."""
        self._check_lock()
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
