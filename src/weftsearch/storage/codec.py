"""Section files: named, aligned, checksummed arrays in one file, read through mmap.

Every file of the segment format is a section file (docs/FORMAT.md gives the
byte layout). A writer hands :func:`encode_sections` a mapping of section
names to numpy arrays and gets the file's bytes; a reader opens the file with
:class:`SectionFile`, which checks the header and the section table at once
(cheap: a few hundred bytes) and each section's CRC32C on first touch, then
hands out read-only numpy views straight over the memory map.

The decoder trusts nothing: every offset and length is bounds-checked against
the file before use, even when the checksums verify, so a damaged file ends in
:class:`~weftsearch.errors.CorruptIndexError` (or
:class:`~weftsearch.errors.FormatVersionError`), never in an exception from
deep inside numpy or a read past the end.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import crc32c
import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import CorruptIndexError, FormatVersionError, IndexStorageError
from weftsearch.storage.files import open_regular
from weftsearch.storage.pausing import Pause, copy_in_slices, no_pause

__all__ = [
    "MAGIC",
    "FORMAT_VERSION",
    "ALIGNMENT",
    "SECTION_DTYPES",
    "encode_sections",
    "SectionFile",
    "checksum",
    "FileStamp",
    "STAMP_OFFSET",
    "stamped_header",
    "read_stamp",
    "file_identity",
]

MAGIC = b"WEFTSEC\x00"
#: Version of the section-file layout and of every section this code writes.
#: Only this version is read: versions 1 and 2 were pre-release layouts, refused with
#: :class:`~weftsearch.errors.FormatVersionError` (rebuild the index from its documents).
FORMAT_VERSION = 4
#: Every section starts at a multiple of this many bytes (cache line; lets any dtype map).
ALIGNMENT = 64

#: What a refusal of an older version says it is.
_PRE_RELEASE = "; versions 1 to 3 were earlier layouts, no longer read"

# magic, version, section count, file length, table CRC32C, header CRC32C (of the bytes before it)
_HEADER = struct.Struct("<8sIIQII")
_HEADER_SIZE = 64
# name, dtype code, offset, byte length, element count, CRC32C of the section bytes
_ENTRY = struct.Struct("<24s8sQQQI")
_ENTRY_SIZE = 64
#: Where the file stamp starts in the header: index id (16 bytes), number (u64), generation (u64).
STAMP_OFFSET = 32
_STAMP = struct.Struct("<16sQQ")

#: The element types a section may hold, by their little-endian numpy codes.
SECTION_DTYPES = frozenset({"|u1", "<u4", "<i4", "<u8", "<i8", "<f4", "<f8", "<f2"})


def checksum(data: bytes | bytearray | memoryview) -> int:
    """CRC32C (Castagnoli) of a buffer, hardware-accelerated by the ``crc32c`` package."""
    return int(crc32c.crc32c(data))


@dataclass(frozen=True, slots=True)
class FileStamp:
    """Which index a section file belongs to, and which of its files it is.

    Kept in header bytes 32..63 (covered by the header CRC32C, outside the
    table and sections), so a file can be stamped after it was encoded
    without touching its content: the bytes from offset 64 on depend only on
    the documents (docs/FORMAT.md, "Identity").

    Attributes:
        index_id: the index's id, 32 lowercase hex digits (128 random bits).
        number: the segment number (a segment, or the segment a tombstone file belongs to).
        generation: a tombstone file's generation; 0 in a segment.

    """

    index_id: str
    number: int
    generation: int = 0

    def pack(self) -> bytes:
        """The 32 header bytes of this stamp."""
        return _STAMP.pack(bytes.fromhex(self.index_id), self.number, self.generation)


def read_stamp(header: bytes | memoryview) -> FileStamp:
    """The stamp in a header's bytes 32..63 (an all-zero id reads as ``""``: unstamped)."""
    raw_id, number, generation = _STAMP.unpack_from(header, STAMP_OFFSET)
    return FileStamp("" if not any(raw_id) else bytes(raw_id).hex(), int(number), int(generation))


def stamped_header(data: bytes | memoryview, stamp: FileStamp) -> bytes:
    """The 64-byte header of encoded file ``data`` with ``stamp`` written in and the header CRC resealed.

    O(1): the table and sections are untouched, so a writer writes this
    header followed by ``data[64:]``.
    """
    head = bytes(data[: _HEADER.size - 4])
    tail = stamp.pack()
    if len(head) != _HEADER.size - 4 or head[:8] != MAGIC:
        raise ValueError("not an encoded section file")
    return head + struct.pack("<I", checksum(head + tail)) + tail


def file_identity(header: bytes, data: bytes | memoryview) -> int:
    """CRC32C of ``header`` and encoded file ``data``'s table: what :attr:`SectionFile.identity` reads.

    O(sections). ``header`` is the file's (stamped) 64-byte header; the table
    of ``data`` (bytes 64 up to the first section) is the same in every stamp.
    """
    count = _HEADER.unpack_from(data, 0)[2]
    table_end = _HEADER_SIZE + _ENTRY_SIZE * count
    return int(crc32c.crc32c(data[_HEADER_SIZE : table_end + _pad(table_end)], crc32c.crc32c(header)))


def _pad(length: int) -> int:
    return (-length) % ALIGNMENT


def encode_sections(sections: Mapping[str, NDArray[np.generic]], *, pause: Pause = no_pause) -> bytes:
    """Lay out ``sections`` (name -> 1-D array) as one section file's bytes.

    Sections are written in sorted name order, each aligned to
    :data:`ALIGNMENT` and zero-padded, so the same arrays always give the same
    bytes. The payload is assembled a megabyte at a time with ``pause``
    between copies (see :mod:`~weftsearch.storage.pausing`); turning that into
    ``bytes`` is the one copy that runs as a single call (memory bandwidth:
    about a millisecond per 10 MB). O(total bytes).
    """
    names = sorted(sections)
    table = bytearray()
    data_start = _HEADER_SIZE + _ENTRY_SIZE * len(names)
    data_start += _pad(data_start)
    payloads: list[tuple[int, memoryview]] = []
    offset = data_start
    for name in names:
        array = np.ascontiguousarray(sections[name])
        code = array.dtype.newbyteorder("<").str if array.dtype.itemsize > 1 else array.dtype.str
        if code not in SECTION_DTYPES or array.ndim != 1:
            raise ValueError(f"section {name!r}: unsupported array {array.dtype} ndim={array.ndim}")
        raw = memoryview(np.ascontiguousarray(array.astype(code, copy=False)).view(np.uint8))  # type: ignore[arg-type]
        encoded_name = name.encode("ascii")
        if len(encoded_name) > 24:
            raise ValueError(f"section name too long: {name!r}")
        crc = checksum(raw)  # crc32c releases the GIL on large buffers
        table += _ENTRY.pack(encoded_name, code.encode("ascii"), offset, len(raw), array.shape[0], crc)
        table += b"\x00" * (_ENTRY_SIZE - _ENTRY.size)
        payloads.append((offset, raw))
        offset += len(raw) + _pad(len(raw))
        pause()
    file_length = offset
    # The table checksum covers the zero gap up to the first section too, and
    # the header checksum its zero tail, so no byte outside a section goes unchecked.
    table += b"\x00" * (data_start - _HEADER_SIZE - len(table))
    head = struct.pack("<8sIIQI", MAGIC, FORMAT_VERSION, len(names), file_length, checksum(bytes(table)))
    tail = b"\x00" * (_HEADER_SIZE - _HEADER.size)
    header = head + struct.pack("<I", checksum(head + tail)) + tail
    out = bytearray(file_length)  # zero-filled: the padding
    out[: len(header)] = header
    out[len(header) : len(header) + len(table)] = table
    target = memoryview(out)
    for start, raw in payloads:
        copy_in_slices(target, start, raw, pause)
    target.release()
    return bytes(out)


class _Entry:
    __slots__ = ("count", "crc", "dtype", "length", "name", "offset")

    def __init__(self, name: str, dtype: str, offset: int, length: int, count: int, crc: int) -> None:
        self.name, self.dtype, self.offset, self.length, self.count, self.crc = (
            name,
            dtype,
            offset,
            length,
            count,
            crc,
        )


class SectionFile:
    """A section file opened read-only through mmap; sections decode lazily.

    Opening reads and checks the header and the section table only: O(number
    of sections), independent of the file's size. :meth:`array` verifies a
    section's CRC32C the first time it is asked for, then returns a read-only
    view over the map (no copy). Thread-safe.

    Args:
        path: the file (also the name used in error messages).
        data: the file's bytes, for a file that exists only in memory.

    Raises:
        IndexStorageError: the file cannot be opened.
        CorruptIndexError: the header or table is damaged or inconsistent.
        FormatVersionError: written by a format version not in ``versions``.

    ``versions``: the format versions accepted. ``stamp`` is the header's :class:`FileStamp`, ``identity``
    the CRC32C of the header and table (which hold every section's CRC32C:
    a cheap content identity, docs/FORMAT.md) and ``length`` the file's size.

    """

    def __init__(
        self, path: Path, data: bytes | None = None, *, versions: tuple[int, ...] = (FORMAT_VERSION,)
    ) -> None:
        self.path = path
        self._versions = versions
        if data is not None:
            # An in-memory file (a segment not yet committed): same checks, no map.
            buffer = memoryview(data)
        else:
            try:
                fd = open_regular(path)  # a FIFO, device, socket or link is refused unopened
                try:
                    size = os.fstat(fd).st_size
                    if size < _HEADER_SIZE:
                        raise CorruptIndexError(f"{path}: {size} bytes is too short for a section file")
                    buffer = memoryview(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
                finally:
                    os.close(fd)
            except (CorruptIndexError, FileNotFoundError):
                raise
            except OSError as exc:
                raise IndexStorageError(f"{path}: cannot open ({exc})") from None
        if len(buffer) < _HEADER_SIZE:
            raise CorruptIndexError(f"{path}: {len(buffer)} bytes is too short for a section file")
        self._buffer = buffer
        self.length = len(buffer)
        self._entries = self._read_table(len(buffer))
        self.version: int = _HEADER.unpack_from(buffer, 0)[1]
        self.stamp = read_stamp(buffer[:_HEADER_SIZE]) if self.version >= 2 else FileStamp("", 0)
        self.identity = checksum(buffer[: self._data_start])
        self._verified: dict[str, NDArray[np.generic]] = {}
        self._lock = threading.Lock()

    def _corrupt(self, what: str) -> CorruptIndexError:
        return CorruptIndexError(f"{self.path}: {what}")

    def _read_table(self, size: int) -> dict[str, _Entry]:
        magic, version, count, file_length, table_crc, header_crc = _HEADER.unpack_from(self._buffer, 0)
        if magic != MAGIC:
            raise self._corrupt("not a weft-search section file (bad magic)")
        header_bytes = bytes(self._buffer[: _HEADER.size - 4]) + bytes(
            self._buffer[_HEADER.size : _HEADER_SIZE]
        )
        if checksum(header_bytes) != header_crc:
            raise self._corrupt("header checksum mismatch")
        if version not in self._versions:
            older = 0 < version < FORMAT_VERSION
            raise FormatVersionError(
                f"{self.path}: section format version {version}; this code reads version {FORMAT_VERSION}"
                + (f"{_PRE_RELEASE} (rebuild the index from its documents)" if older else "")
            )
        if file_length != size:
            raise self._corrupt(f"file is {size} bytes, header says {file_length} (truncated or extended)")
        table_end = _HEADER_SIZE + _ENTRY_SIZE * count
        data_start = table_end + _pad(table_end)
        if count > 4096 or data_start > size:
            raise self._corrupt(f"section table of {count} entries does not fit in the file")
        self._data_start = data_start
        if checksum(self._buffer[_HEADER_SIZE:data_start]) != table_crc:
            raise self._corrupt("section table checksum mismatch")
        entries: dict[str, _Entry] = {}
        previous_end = data_start
        for position in range(count):
            raw_name, raw_dtype, offset, length, elements, crc = _ENTRY.unpack_from(
                self._buffer, _HEADER_SIZE + _ENTRY_SIZE * position
            )
            try:
                name = raw_name.rstrip(b"\x00").decode("ascii")
                dtype = raw_dtype.rstrip(b"\x00").decode("ascii")
            except UnicodeDecodeError:
                raise self._corrupt(f"section {position} has an undecodable name") from None
            if dtype not in SECTION_DTYPES:
                raise self._corrupt(f"section {name!r} has unknown element type {dtype!r}")
            itemsize = np.dtype(dtype).itemsize
            if (
                offset % ALIGNMENT
                or offset < previous_end
                or offset + length > size
                or length != elements * itemsize
                or name in entries
            ):
                raise self._corrupt(f"section {name!r} has an impossible extent ({offset}, {length})")
            previous_end = offset + length
            entries[name] = _Entry(name, dtype, offset, length, elements, crc)
        return entries

    def count(self, name: str) -> int:
        """Element count of section ``name`` as the (checked) table says, without reading it."""
        return self._entry(name).count

    def dtype(self, name: str) -> str:
        """Element type code of section ``name`` as the table says."""
        return self._entry(name).dtype

    @property
    def names(self) -> list[str]:
        """Names of the sections, in file order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def size(self, name: str) -> int:
        """Byte length of section ``name``."""
        return self._entry(name).length

    def _entry(self, name: str) -> _Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise self._corrupt(f"section {name!r} is missing") from None

    def raw(self, name: str) -> memoryview:
        """The unverified bytes of section ``name`` (for block-level checks)."""
        entry = self._entry(name)
        return self._buffer[entry.offset : entry.offset + entry.length]

    def array(self, name: str) -> NDArray[np.generic]:
        """Section ``name`` as a read-only 1-D array, its checksum verified once.

        Raises:
            CorruptIndexError: the section is missing or fails its checksum.

        """
        cached = self._verified.get(name)
        if cached is not None:
            return cached
        with self._lock:
            cached = self._verified.get(name)
            if cached is not None:
                return cached
            entry = self._entry(name)
            data = self.raw(name)
            if checksum(data) != entry.crc:
                raise self._corrupt(f"section {name!r} checksum mismatch")
            array: NDArray[np.generic] = np.frombuffer(data, dtype=np.dtype(entry.dtype), count=entry.count)
            self._verified[name] = array
            return array

    def verify(self) -> list[str]:
        """Check every section's checksum; return one message per damaged section."""
        problems = []
        count = _HEADER.unpack_from(self._buffer, 0)[2]
        table_end = _HEADER_SIZE + _ENTRY_SIZE * count
        previous_end, previous = table_end + _pad(table_end), "the section table"
        for name, entry in self._entries.items():
            if checksum(self.raw(name)) != entry.crc:
                problems.append(f"{self.path}: section {name!r} checksum mismatch")
            if any(self._buffer[previous_end : entry.offset]):
                problems.append(f"{self.path}: padding after {previous} is not zero")
            previous_end, previous = entry.offset + entry.length, f"section {name!r}"
        if any(self._buffer[previous_end:]):
            problems.append(f"{self.path}: padding after {previous} is not zero")
        return problems
