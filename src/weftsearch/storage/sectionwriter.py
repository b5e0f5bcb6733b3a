"""Writing a section file straight to disk, section by section, never holding the whole file.

:func:`~weftsearch.storage.codec.encode_sections` returns the file's bytes: it
holds every section array, then the assembled file, then its ``bytes`` copy
(three times the file at its peak). A segment of a million documents is over
a gigabyte, so building or merging one that way costs several gigabytes.
:func:`write_section_file` writes the same bytes (the layout is the codec's,
byte for byte: the tests compare the two) to a file as it goes: a section may
be a numpy array or :class:`ByteChunks`, bytes produced a chunk at a time (a
merge's stored records, gathered from the source segments' memory maps), so
its whole content never exists in memory at once. The header and section
table are written last, once every section's checksum is known.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import crc32c
import numpy as np
from numpy.typing import NDArray

from weftsearch.storage.codec import (
    _ENTRY,
    _ENTRY_SIZE,
    _HEADER,
    _HEADER_SIZE,
    FORMAT_VERSION,
    MAGIC,
    SECTION_DTYPES,
    FileStamp,
    _pad,
    checksum,
)
from weftsearch.storage.pausing import Pause, no_pause

__all__ = ["ByteChunks", "Section", "write_section_file", "materialize"]

#: Bytes handed to one ``os.writev`` call at most (bounds the list of buffers it is given).
_WRITE_BATCH = 8 << 20


@dataclass(frozen=True, slots=True)
class ByteChunks:
    """A section given as the chunks of bytes ``produce()`` yields, ``length`` bytes in all.

    ``produce`` is called once by :func:`write_section_file` or
    :func:`materialize`; the chunks must total exactly ``length`` bytes
    (checked). ``dtype`` is the section's element type (a code of
    :data:`~weftsearch.storage.codec.SECTION_DTYPES`; the bytes are already
    little-endian), ``length`` a multiple of its size.
    """

    length: int
    produce: Callable[[], Iterable[bytes | memoryview]]
    dtype: str = "|u1"


#: What a section may be: an array (any supported dtype, 1-D) or bytes in chunks.
Section = NDArray[np.generic] | ByteChunks


def materialize(section: Section) -> NDArray[np.generic]:
    """``section`` as one array (for :func:`~weftsearch.storage.codec.encode_sections`)."""
    if not isinstance(section, ByteChunks):
        return section
    out = np.empty(section.length, dtype=np.uint8)
    position = 0
    for chunk in section.produce():
        view = np.frombuffer(chunk, dtype=np.uint8)
        out[position : position + view.shape[0]] = view
        position += view.shape[0]
    if position != section.length:
        raise ValueError(f"chunks total {position} bytes, not {section.length}")
    return out.view(np.dtype(section.dtype))


def _raw(name: str, array: NDArray[np.generic]) -> tuple[str, memoryview, int]:
    """``array``'s little-endian bytes, dtype code and element count, as the codec lays them out."""
    array = np.ascontiguousarray(array)
    code = array.dtype.newbyteorder("<").str if array.dtype.itemsize > 1 else array.dtype.str
    if code not in SECTION_DTYPES or array.ndim != 1:
        raise ValueError(f"section {name!r}: unsupported array {array.dtype} ndim={array.ndim}")
    raw = memoryview(np.ascontiguousarray(array.astype(code, copy=False)).view(np.uint8))  # type: ignore[arg-type]
    return code, raw, int(array.shape[0])


class _Writer:
    """Sequential writes of byte buffers to ``fd``, batched into ``writev`` calls."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending: list[memoryview] = []
        self.size = 0

    def add(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        if len(view):
            self.pending.append(view)
            self.size += len(view)
        if self.size >= _WRITE_BATCH or len(self.pending) >= 512:
            self.flush()

    def flush(self) -> None:
        pending = self.pending
        while pending:
            written = os.writev(self.fd, pending)
            while pending and written >= len(pending[0]):
                written -= len(pending[0])
                pending.pop(0)
            if pending and written:
                pending[0] = pending[0][written:]
        self.size = 0


def write_section_file(
    path: Path, sections: Mapping[str, Section], stamp: FileStamp | None, *, pause: Pause = no_pause
) -> tuple[int, int]:
    """Write ``sections`` as a section file at ``path`` (created or truncated), fsynced.

    The bytes are exactly those of ``encode_sections`` (with the materialised
    sections), with ``stamp`` written into the header as
    :func:`~weftsearch.storage.codec.stamped_header` writes it (``None``:
    unstamped). Returns ``(bytes, identity)`` as
    :meth:`~weftsearch.storage.directory.IndexDirectory.write_stamped` does.

    Memory: the arrays given, plus at most one chunk of a :class:`ByteChunks`
    section and an 8 MiB write batch. O(total bytes).

    Raises:
        OSError: as the system calls raise it (the caller names the file).
        ValueError: an unsupported array, or chunks that do not total their length.

    """
    names = sorted(sections)
    data_start = _HEADER_SIZE + _ENTRY_SIZE * len(names)
    data_start += _pad(data_start)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        writer = _Writer(fd)
        writer.add(bytes(data_start))  # header and table, rewritten at the end
        table = bytearray()
        offset = data_start
        for name in names:
            section = sections[name]
            encoded_name = name.encode("ascii")
            if len(encoded_name) > 24:
                raise ValueError(f"section name too long: {name!r}")
            if isinstance(section, ByteChunks):
                code, crc, length = section.dtype, 0, 0
                size = np.dtype(code).itemsize
                if code not in SECTION_DTYPES or section.length % size:
                    raise ValueError(f"section {name!r}: {section.length} bytes of {code}")
                count = section.length // size
                for chunk in section.produce():
                    crc = crc32c.crc32c(chunk, crc)
                    length += len(chunk)
                    writer.add(chunk)
                    pause()
                if length != section.length:
                    raise ValueError(f"section {name!r}: chunks total {length} bytes, not {section.length}")
            else:
                code, raw, count = _raw(name, section)
                crc = checksum(raw)
                length = len(raw)
                writer.add(raw)
                pause()
            table += _ENTRY.pack(encoded_name, code.encode("ascii"), offset, length, count, int(crc))
            table += b"\x00" * (_ENTRY_SIZE - _ENTRY.size)
            writer.add(bytes(_pad(length)))
            offset += length + _pad(length)
        writer.flush()
        file_length = offset
        table += b"\x00" * (data_start - _HEADER_SIZE - len(table))
        head = struct.pack("<8sIIQI", MAGIC, FORMAT_VERSION, len(names), file_length, checksum(bytes(table)))
        tail = stamp.pack() if stamp is not None else b"\x00" * (_HEADER_SIZE - _HEADER.size)
        header = head + struct.pack("<I", checksum(head + tail)) + tail
        os.pwrite(fd, header + bytes(table), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    identity = int(crc32c.crc32c(bytes(table), crc32c.crc32c(header)))
    return file_length, identity
