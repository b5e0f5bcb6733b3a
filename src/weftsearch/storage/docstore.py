"""The compressed document store: stored records in zstd-compressed blocks (docs/FORMAT.md, "Stored text").

The writer (:func:`stored_sections`) cuts the records, in local-id order, into
blocks of whole records, at most :data:`STORED_BLOCK_BYTES` raw bytes or
:data:`STORED_BLOCK_RECORDS` records (a longer record sits alone in its own
block), and compresses each block on its own with zstd at
:data:`STORED_LEVEL`. The reader decompresses a block only when one of its
records is read, through a bounded per-reader LRU (:class:`BlockCache`), and
never lets a block size an allocation the file cannot back
(:func:`decompress_block`).

Storage knows bytes here, never documents: a record is whatever
:func:`~weftsearch.storage.segment_writer.stored_record` made.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import numpy as np
import zstandard
from numpy.typing import NDArray

from weftsearch.storage.codec import checksum
from weftsearch.storage.pausing import Pause, no_pause
from weftsearch.storage.sectionwriter import ByteChunks, Section

__all__ = [
    "BLOCK_COLUMNS",
    "METHOD_RAW",
    "METHOD_ZSTD",
    "STORED_BLOCK_BYTES",
    "STORED_BLOCK_RECORDS",
    "STORED_CACHE_BYTES",
    "STORED_LEVEL",
    "STORED_MAX_RATIO",
    "BlockCache",
    "WholeBlocks",
    "block_starts",
    "decompress_block",
    "stored_sections",
]

#: Raw bytes of records a block holds at most (unless one record alone is longer). A hit
#: decompresses its whole block, so the block is the unit of read cost; 16 KiB is tantivy's
#: doc-store block too. Measured on SciFact (docs/FORMAT.md, "Stored text"): zstd's ratio at
#: 16 KiB is 2.42, 10% below 64 KiB's 2.69 and 13% above 4 KiB's, at a quarter of 64 KiB's cold read.
STORED_BLOCK_BYTES = 16 * 1024

#: Records a block holds at most: bounds the records one damaged block makes absent.
STORED_BLOCK_RECORDS = 128

#: zstd level the writer uses (fixed: the same records give the same bytes, given one zstd).
#: Level 1 against 3 (docs/FORMAT.md, "Stored text"): a quarter less compression CPU (a build
#: compresses every record twice at 1M: in its runs and in the commit's merge), decompression
#: a fifth faster, the size within 1% on SciFact and 3% smaller on the synthetic corpus.
STORED_LEVEL = 1

#: The largest raw ÷ compressed ratio a zstd block may claim; a block that compresses better
#: is stored uncompressed (method 0). With it, a block's raw length (what decompression
#: allocates) is at most 64 times bytes the file really holds, checked before any allocation.
STORED_MAX_RATIO = 64

#: Decompressed bytes of blocks one reader keeps (least recently used first out): 4 MiB,
#: 256 full blocks. A block longer than that (one huge record) is decompressed on each read.
STORED_CACHE_BYTES = 4 << 20

#: ``stored.blocks`` holds five ``<u8`` a block: first record id, offset and length in
#: ``stored.blob``, raw length, method.
BLOCK_COLUMNS = 5

#: Block methods: stored as is, or one zstd frame.
METHOD_RAW, METHOD_ZSTD = 0, 1

# zstd (de)compression contexts are not safe to share between threads: one per thread.
_contexts = threading.local()


def _compressor() -> Any:
    found = getattr(_contexts, "compressor", None)
    # Keyed by the level, so a test that sets another STORED_LEVEL gets a compressor of that level.
    if found is None or found[0] != STORED_LEVEL:
        found = (
            STORED_LEVEL,
            zstandard.ZstdCompressor(
                level=STORED_LEVEL, write_checksum=False, write_content_size=True, write_dict_id=False
            ),
        )
        _contexts.compressor = found
    return found[1]


def _decompressor() -> Any:
    found = getattr(_contexts, "decompressor", None)
    if found is None:
        found = zstandard.ZstdDecompressor()
        _contexts.decompressor = found
    return found


#: Compressed bytes kept in memory while a segment is written; past them they wait in an
#: unlinked file in the spill folder (a merge's, beside the index), read back when written.
_SPILL_AFTER = 32 << 20

#: Bytes read back from a spill file at a time.
_SPILL_READ = 8 << 20


class _Blocks:
    """The blocks being written: each closed block compressed, its table row and CRC32C kept.

    The compressed bytes stay in memory up to :data:`_SPILL_AFTER`, then (with
    a ``spill`` folder) go on to an unlinked temporary file there, closed when
    the sections are collected: a merge of millions of records never holds
    their compressed text.
    """

    def __init__(self, spill: Path | None) -> None:
        self.compressed: list[bytes] = []
        self.table: list[int] = []
        self.crcs: list[int] = []
        self.size = 0
        self._kept = 0
        self._folder = spill
        self._file: IO[bytes] | None = None
        self._compressor = _compressor()

    def _keep(self, packed: bytes) -> None:
        if self._file is None and self._folder is not None and self._kept + len(packed) > _SPILL_AFTER:
            # Unlinked at once: nothing is left behind, even by a crash.
            self._file = tempfile.TemporaryFile(dir=self._folder)  # noqa: SIM115
            for kept in self.compressed:
                self._file.write(kept)
            self.compressed = []
        if self._file is not None:
            self._file.write(packed)
        else:
            self.compressed.append(packed)
            self._kept += len(packed)

    def chunks(self) -> Callable[[], Iterator[bytes]]:
        """The compressed blocks back to back, a few megabytes at a time."""
        blocks, spilled = self.compressed, self._file

        def produce() -> Iterator[bytes]:
            if spilled is None:
                for start in range(0, len(blocks), 256):
                    yield b"".join(blocks[start : start + 256])
                return
            spilled.flush()
            fd, position = spilled.fileno(), 0
            while chunk := os.pread(fd, _SPILL_READ, position):
                yield chunk
                position += len(chunk)

        return produce

    def copy(self, first: int, packed: bytes, raw_length: int, method: int) -> None:
        """Keep a block compressed before (another segment's), as it is."""
        self._keep(packed)
        self.table.extend((first, self.size, len(packed), raw_length, method))
        self.crcs.append(checksum(packed))
        self.size += len(packed)

    def close(self, first: int, records: list[bytes]) -> None:
        raw = b"".join(records)
        packed = self._compressor.compress(raw)
        if len(packed) < len(raw) and len(raw) <= STORED_MAX_RATIO * len(packed):
            method = METHOD_ZSTD
        else:  # incompressible, or too compressible to be told from a crafted claim
            packed, method = raw, METHOD_RAW
        self._keep(packed)
        self.table.extend((first, self.size, len(packed), len(raw), method))
        self.crcs.append(checksum(packed))
        self.size += len(packed)


@runtime_checkable
class WholeBlocks(Protocol):
    """Records that can hand over whole compressed blocks: a merge's, read from its sources.

    :func:`stored_sections` then takes the records' lengths and CRC32Cs from the
    sources' tables and, for each block it cuts, copies the source's compressed
    block when the block holds exactly that block's records, decompressing
    nothing; any other block is read record by record (``records[a:b]``,
    each checked) and compressed as usual.
    """

    def __len__(self) -> int:
        """The number of records."""

    def __getitem__(self, item: slice) -> list[bytes]:
        """Records ``item`` (a slice), each checked against its CRC32C."""

    def record_lengths_and_crcs(self) -> tuple[NDArray[np.int64], NDArray[np.uint32]]:
        """Every record's length in bytes and its CRC32C, in order."""

    def whole_block(self, start: int, end: int) -> tuple[bytes, int, int] | None:
        """The block of records ``start ..< end`` as compressed before, or ``None``.

        ``(compressed bytes, raw length, method)`` if those records are one
        whole block of one source whose bytes pass their CRC32C.
        """


def block_starts(lengths: Sequence[int]) -> list[int]:
    """The first record of each block the store cuts records of ``lengths`` into (see module docstring).

    A block is closed before a record that would take it past
    :data:`STORED_BLOCK_BYTES`, or at :data:`STORED_BLOCK_RECORDS` records. O(n).
    """
    starts: list[int] = []
    size = count = 0
    limit, most = STORED_BLOCK_BYTES, STORED_BLOCK_RECORDS
    for position, length in enumerate(lengths):
        if not count or size + length > limit or count == most:
            starts.append(position)
            size = count = 0
        size += length
        count += 1
    return starts


def _copied_sections(records: WholeBlocks, pause: Pause, spill: Path | None) -> dict[str, Section]:
    """:func:`stored_sections` of records that can hand over whole blocks (same bytes, given one zstd)."""
    n = len(records)
    lengths, crcs = records.record_lengths_and_crcs()
    offsets = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    blocks = _Blocks(spill)
    starts = block_starts(lengths.tolist())
    for first, end in itertools.pairwise([*starts, n] if starts else []):
        found = records.whole_block(first, end)
        if found is None:
            blocks.close(first, records[first:end])
        else:
            blocks.copy(first, *found)
        pause()
    return {
        "stored.blob": ByteChunks(blocks.size, blocks.chunks()),
        "stored.offsets": offsets,
        "stored.crc": np.ascontiguousarray(crcs, dtype=np.uint32),
        "stored.blocks": np.array(blocks.table, dtype=np.uint64),
        "stored.block_crc": np.array(blocks.crcs, dtype=np.uint32),
    }


def stored_sections(
    records: Sequence[bytes] | WholeBlocks, pause: Pause = no_pause, *, spill: Path | None = None
) -> dict[str, Section]:
    """The ``stored.*`` sections of ``records`` (local-id order). Deterministic.

    ``stored.offsets`` and ``stored.crc`` are those of the records back to back
    (raw), as before compression; ``stored.blob`` the compressed blocks back to
    back; ``stored.blocks`` the block table (:data:`BLOCK_COLUMNS` a block);
    ``stored.block_crc`` each block's compressed bytes' CRC32C. A block is
    closed before a record that would take it past :data:`STORED_BLOCK_BYTES`,
    or at :data:`STORED_BLOCK_RECORDS` records. Reads ``records`` a slice at a
    time (it may be lazy, as a merge's is) and keeps the compressed blocks,
    not the raw records (past 32 MiB of them, in an unlinked file in
    ``spill`` when given). Records that can hand over whole blocks
    (:class:`WholeBlocks`, a merge's) give the same sections, copying each
    block a source already holds as it is. O(raw bytes).
    """
    if isinstance(records, WholeBlocks):
        return _copied_sections(records, pause, spill)
    n = len(records)
    offsets = np.zeros(n + 1, dtype=np.uint64)
    crcs = np.empty(n, dtype=np.uint32)
    blocks = _Blocks(spill)
    pending: list[bytes] = []
    first = size = 0
    for start in range(0, n, _READ_SLICE):
        part = records[start : min(start + _READ_SLICE, n)]
        lengths = [len(record) for record in part]
        offsets[start + 1 : start + 1 + len(part)] = lengths
        crcs[start : start + len(part)] = [checksum(record) for record in part]
        for position, (record, length) in enumerate(zip(part, lengths, strict=True), start):
            if pending and (size + length > STORED_BLOCK_BYTES or len(pending) == STORED_BLOCK_RECORDS):
                blocks.close(first, pending)
                pending, first, size = [], position, 0
                pause()  # a block's compression is the unit of work between two pauses
            pending.append(record)
            size += length
        pause()
    if pending:
        blocks.close(first, pending)
    np.cumsum(offsets, out=offsets)
    return {
        "stored.blob": ByteChunks(blocks.size, blocks.chunks()),
        "stored.offsets": offsets,
        "stored.crc": crcs,
        "stored.blocks": np.array(blocks.table, dtype=np.uint64),
        "stored.block_crc": np.array(blocks.crcs, dtype=np.uint32),
    }


#: Records read from the (possibly lazy) sequence at a time.
_READ_SLICE = 4096


def decompress_block(packed: bytes | memoryview, raw_length: int, method: int) -> bytes | None:
    """Block bytes ``packed`` decompressed to exactly ``raw_length`` bytes, or ``None`` if they do not.

    The caller has checked ``raw_length`` against what the file holds
    (:data:`STORED_MAX_RATIO`); it is checked again here, and against the
    frame's own content size, before zstd allocates anything: at most
    ``raw_length`` bytes are ever allocated. ``None`` for bytes that are not
    one frame of that size (damage the block's CRC32C did not catch).
    """
    if method == METHOD_RAW:
        return bytes(packed) if len(packed) == raw_length else None
    if method != METHOD_ZSTD or raw_length > STORED_MAX_RATIO * len(packed):
        return None
    try:
        if zstandard.frame_content_size(packed) != raw_length:
            return None
        out: bytes = _decompressor().decompress(packed, max_output_size=raw_length)
    except zstandard.ZstdError:
        return None
    return out if len(out) == raw_length else None


class BlockCache:
    """Decompressed blocks of one reader, least recently used evicted first, at most ``limit`` bytes.

    Thread-safe (one lock around the dictionary; decompression happens
    outside it, so two threads may decompress the same block once each). A
    block longer than ``limit`` is never kept.
    """

    __slots__ = ("_blocks", "_limit", "_lock", "_size")

    def __init__(self, limit: int = STORED_CACHE_BYTES) -> None:
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()
        self._size = 0

    def get(self, block: int) -> bytes | None:
        """Block ``block``'s bytes if kept (and mark it most recently used), else ``None``."""
        with self._lock:
            found = self._blocks.get(block)
            if found is not None:
                self._blocks.move_to_end(block)
            return found

    def put(self, block: int, data: bytes) -> None:
        """Keep ``data`` as block ``block``'s bytes, evicting the least recently used past the limit."""
        if len(data) > self._limit:
            return
        with self._lock:
            old = self._blocks.pop(block, None)
            if old is not None:
                self._size -= len(old)
            while self._blocks and self._size + len(data) > self._limit:
                self._size -= len(self._blocks.popitem(last=False)[1])
            self._blocks[block] = data
            self._size += len(data)

    @property
    def size(self) -> int:
        """Bytes kept now (at most the limit)."""
        return self._size

    def __len__(self) -> int:
        return len(self._blocks)
