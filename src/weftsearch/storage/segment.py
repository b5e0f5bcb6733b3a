"""Segments: one immutable section file holding a batch of documents and their postings.

A segment holds, for documents numbered ``0 .. n-1`` in key order: the keys,
document lengths, times, stored documents (text and fields), vectors, links
(by target key), and an inverted index (sorted terms, per-term postings of
local ids and term frequencies, a CRC32C per term's postings). Its layout is
in docs/FORMAT.md. Storage knows documents, terms and counts; it never scores.

This module reads one: :class:`SegmentReader` decodes lazily over a memory
map and validates every offset before following it. The writer
(:func:`~weftsearch.storage.segment_writer.encode_segment`, deterministic: the
same documents give the same bytes) is in :mod:`weftsearch.storage.segment_writer`,
the merge of several segments in :mod:`weftsearch.storage.segment_merge`.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import mmap
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from weftsearch.documents import Document, stored_document
from weftsearch.errors import CorruptIndexError, FieldTypeError, WeftError
from weftsearch.storage.codec import FileStamp, SectionFile, checksum
from weftsearch.storage.docstore import (
    BLOCK_COLUMNS,
    METHOD_RAW,
    METHOD_ZSTD,
    STORED_MAX_RATIO,
    BlockCache,
    decompress_block,
)
from weftsearch.storage.fields import FieldIndex, first_type_only, is_field_value
from weftsearch.storage.postings import (
    BLOCK_ROWS,
    POSTINGS_BLOCK,
    PostingsDecodeError,
    derive_blocks,
    join_offsets,
    positions_chunks,
    unpack_checked,
    unpack_positions,
    unpack_postings,
)

__all__ = [
    "POSTINGS_BLOCK",
    "VECTOR_DTYPES",
    "SegmentReader",
    "TextFieldReader",
    "derive_blocks",
    "use_term_search",
]

#: Sections each text field has its own copy of (a named field's under its ``tf.N.`` prefix).
_FIELD_SECTIONS = ("terms.", "post.", "doc.lengths", "pos.")


#: The term table's compiled binary search, ``(blob, offsets, needle) -> first index not below``,
#: or ``None`` for the Python bisection (:func:`use_term_search`).
TermSearch = Callable[[NDArray[np.uint8], NDArray[np.uint64], bytes], int]
_term_search: TermSearch | None = None


def use_term_search(search: TermSearch | None) -> None:
    """Find terms with ``search`` first (``None``: the Python bisection).

    :mod:`weftsearch.native.inversion` gives its compiled one when it is
    imported (storage does not import native, as for
    :func:`~weftsearch.storage.postings.use_packing`). Whatever it is, it must
    give the bisection's index for every table and needle.
    """
    global _term_search
    _term_search = search


#: Term lookups a segment reader remembers (a bound on its memory, about 100 bytes each).
TERM_CACHE_SIZE = 1 << 17

#: Decoded postings one segment reader keeps (8 bytes each, so 32 MiB),
#: first in, first out; a longer list is decoded on every read and not kept.
DECODED_CACHE_POSTINGS = 1 << 22

#: Rows whose norms are computed together (bounds the float32 temporaries of half-precision rows).
_NORM_CHUNK = 65_536

#: How a segment may store its vectors (``vec.matrix`` as ``<f4`` or ``<f2``).
VECTOR_DTYPES = ("float32", "float16")

#: From this many keys on, :meth:`SegmentReader.keys_at` gathers their bytes in one numpy
#: step and decodes once; below it, decoding key by key is cheaper (measured: equal near 30
#: keys, the gather 1.3x faster at 100, key by key 2-3x faster at 10).
_GATHER_KEYS_FROM = 32


#: A text field's positions tables: each term's first word, each term's CRC32C.
_PositionsTables = tuple[NDArray[np.uint64], NDArray[np.uint32]]


def _positions_record_ok(record: object) -> bool:
    """A ``meta`` positions record: ``{"words": W}``, an integer below 2^40."""
    return (
        isinstance(record, dict)
        and set(record) == {"words"}
        and type(record["words"]) is int
        and 0 <= record["words"] < 2**40
    )


def _check_offsets(offsets: NDArray[np.uint64], count: int, limit: int, what: str, path: Path) -> None:
    """Offsets must be ``count + 1`` long, start at 0, never decrease and end at ``limit``."""
    if (
        offsets.shape[0] != count + 1
        or int(offsets[0]) != 0
        or int(offsets[-1]) != limit
        or bool(np.any(offsets[1:] < offsets[:-1]))
    ):
        raise CorruptIndexError(f"{path}: {what} offsets are inconsistent")


def _bisect_terms(blob: NDArray[np.uint8], offsets: NDArray[np.uint64], count: int, needle: bytes) -> int:
    """The first of ``count`` terms (``blob[offsets[i]:offsets[i + 1]]``) not below ``needle``, by bisection.

    The term search without the compiled library (and its tests' oracle). O(log count) slices.
    """
    low, high = 0, count
    while low < high:
        middle = (low + high) // 2
        if blob[offsets[middle] : offsets[middle + 1]].tobytes() < needle:
            low = middle + 1
        else:
            high = middle
    return low


class SegmentReader:
    """Lazy, validating reader of one segment file.

    Opening costs O(number of sections); every array is a read-only view over
    the memory map, verified by checksum when first touched. Local ids are
    ``0 .. n_docs - 1`` in key order. Pass ``data`` to read a segment that
    exists only in memory (not yet committed) through the same code.
    """

    def __init__(self, path: Path, data: bytes | None = None) -> None:
        self.path = path
        self._file = SectionFile(path, data)
        self._lock = threading.RLock()  # memo builders may call other memos
        self._cache: dict[str, Any] = {}
        self._verified_postings: dict[int, tuple[NDArray[np.uint32], NDArray[np.uint32]]] = {}
        # Term position -> its block metadata, checked against its postings (at most V entries of views).
        self._verified_blocks: dict[int, NDArray[np.uint32]] = {}
        # trust_own_tables(): block tables consistent by construction (this process wrote them).
        self._tables_trusted = False
        # Version 3: decoded postings of recently read terms, first in first out, at most
        # DECODED_CACHE_POSTINGS postings (8 bytes each) in all; the verdict of the first-use
        # check lives in _verified_blocks and outlives an evicted decoding.
        self._decoded: dict[int, tuple[NDArray[np.uint32], NDArray[np.uint32]]] = {}
        self._decoded_postings = 0
        self._term_cache: dict[str, int] = {}
        # Decompressed stored blocks, least recently used out, at most STORED_CACHE_BYTES.
        self._blocks_cache = BlockCache()
        meta = self._meta()
        self._meta_cache = meta
        self.n_docs: int = meta["documents"]
        self.n_terms: int = meta["terms"]
        self.vector_dim: int | None = meta["vector_dim"]
        self.n_vectors: int = meta["vectors"]
        self._check_counts(meta)

    @property
    def stamp(self) -> FileStamp:
        """The file's stamp: index id and segment number (unstamped while in memory)."""
        return self._file.stamp

    @property
    def section_file(self) -> SectionFile:
        """The underlying section file (header, stamp, table)."""
        return self._file

    @property
    def vector_dtype(self) -> str:
        """How ``vec.matrix`` stores the vectors: ``"float32"`` or ``"float16"``."""
        return str(self._meta_cache.get("vector_dtype", "float32"))

    @property
    def identity(self) -> tuple[int, int]:
        """``(bytes, CRC32C of header and table)``: what the manifest records of this file."""
        return self._file.length, self._file.identity

    def _check_counts(self, meta: dict[str, Any]) -> None:
        """Every count ``meta`` claims against the section table, before anything is sized by it.

        The table's element counts are already bounded by the file's length
        (codec), so after this check no count read from the file can make a
        reader allocate more than a small multiple of the file's size. O(sections).
        """
        n, terms, postings, links = meta["documents"], meta["terms"], meta["postings"], meta["links"]
        dim = meta["vector_dim"] or 0
        expected = {
            "keys.offsets": n + 1,
            "doc.lengths": n,
            "doc.times": n,
            "stored.offsets": n + 1,
            "stored.crc": n,
            "links.doc": n + 1,
            "vec.rows": n,
            "terms.offsets": terms + 1,
            "post.offsets": terms + 1,
            "post.crc": terms,
            "links.offsets": links + 1,
            "vec.matrix": meta["vectors"] * dim,
        }
        expected["post.block_offsets"] = terms + 1
        expected["post.blocks"] = BLOCK_ROWS * meta["blocks"]
        expected["post.data_offsets"] = terms + 1
        expected["post.data"] = meta["words"]
        numbered = enumerate(meta.get("text_fields", []), start=1)
        for prefix, entry in [("", meta), *((f"tf.{number}.", named) for number, named in numbered)]:
            if "positions" in entry:
                expected[prefix + "pos.data_offsets"] = entry["terms"] + 1
                expected[prefix + "pos.data_wraps"] = entry["positions"]["words"] >> 32
                expected[prefix + "pos.crc"] = entry["terms"]
                expected[prefix + "pos.data"] = entry["positions"]["words"]
        for number, entry in enumerate(meta.get("text_fields", []), start=1):
            prefix = f"tf.{number}."
            expected[prefix + "doc.lengths"] = n
            expected[prefix + "terms.offsets"] = entry["terms"] + 1
            expected[prefix + "post.offsets"] = entry["terms"] + 1
            expected[prefix + "post.crc"] = entry["terms"]
            expected[prefix + "post.block_offsets"] = entry["terms"] + 1
            expected[prefix + "post.blocks"] = BLOCK_ROWS * entry["blocks"]
            expected[prefix + "post.data_offsets"] = entry["terms"] + 1
            expected[prefix + "post.data"] = entry["words"]
            if not entry["blocks"] <= entry["postings"] <= POSTINGS_BLOCK * entry["blocks"]:
                raise self._corrupt(
                    f"meta claims {entry['postings']} postings in {entry['blocks']} blocks "
                    f"for text field {entry['name']!r}"
                )
        if meta["vectors"] and not dim:
            raise self._corrupt(f"meta claims {meta['vectors']} vectors of no width")
        # The ivf.* sections size nothing (they are read as views, and nlist is
        # bounded by the vectors); vector_lists() checks them when first read.
        for name, count in expected.items():
            if name not in self._file:
                raise self._corrupt(f"section {name!r} is missing")
            actual = self._file.count(name)
            if actual != count:
                raise self._corrupt(
                    f"section {name!r} holds {actual} elements; meta's counts "
                    f"({n} documents, {terms} terms, {postings} postings, {links} links, "
                    f"{meta['vectors']} vectors of width {dim}) need {count}"
                )
        table_count = self._file.count("stored.blocks") if "stored.blocks" in self._file else -1
        stored_blocks, rest = divmod(table_count, BLOCK_COLUMNS)
        if rest or not 0 <= stored_blocks <= n or self._file.count("stored.block_crc") != stored_blocks:
            raise self._corrupt(f"the stored block table does not fit {n} documents")
        if meta["blocks"] > postings:  # every block holds at least one posting
            raise self._corrupt(f"meta claims {meta['blocks']} blocks of {postings} postings")
        if postings > POSTINGS_BLOCK * meta["blocks"]:
            # No section holds one element per posting any more: the block table bounds them (at
            # open; opening reads meta only). The exact count is post.offsets' last entry,
            # checked when the term table is first read (_term_tables).
            raise self._corrupt(
                f"meta claims {postings} postings in {meta['blocks']} blocks "
                f"(section 'post.blocks' holds {self._file.count('post.blocks')} elements)"
            )

    def _corrupt(self, what: str) -> CorruptIndexError:
        return CorruptIndexError(f"{self.path}: {what}")

    def _meta(self) -> dict[str, Any]:
        try:
            meta = json.loads(bytes(self._file.array("meta")))
            fields = ("documents", "terms", "postings", "links", "vectors", "blocks", "words")
            if not isinstance(meta, dict) or not all(
                type(meta.get(f)) is int and 0 <= meta[f] < 2**40 for f in fields
            ):
                raise ValueError("missing counts")
            if "vector_dim" not in meta:
                raise ValueError("missing vector_dim")
            dim = meta["vector_dim"]
            if dim is not None and (type(dim) is not int or not 0 < dim <= 1 << 20):
                raise ValueError("bad vector_dim")
            if meta.get("vector_dtype", "float32") not in VECTOR_DTYPES:
                raise ValueError("bad vector_dtype")
            ivf = meta.get("ivf")
            if ivf is not None and (
                not isinstance(ivf, dict)
                or type(ivf.get("nlist")) is not int
                or not 0 < ivf["nlist"] <= max(1, meta["vectors"])
                or dim is None
            ):
                raise ValueError("bad ivf record")
            named = meta.get("text_fields", [])
            counts = ("terms", "postings", "blocks", "words")
            if (
                not isinstance(named, list)
                or not all(
                    isinstance(entry, dict)
                    and set(entry) - {"positions"} == {"name", *counts}
                    and _positions_record_ok(entry.get("positions", {"words": 0}))
                    and isinstance(entry["name"], str)
                    and all(type(entry[c]) is int and 0 <= entry[c] < 2**40 for c in counts)
                    for entry in named
                )
                or len({entry["name"] for entry in named}) != len(named)
                or len(named) > 63
            ):
                raise ValueError("bad text_fields record")
            if not _positions_record_ok(meta.get("positions", {"words": 0})):
                raise ValueError("bad positions record")
            return meta
        except WeftError:
            raise
        except (ValueError, RecursionError) as exc:
            raise self._corrupt(f"segment metadata does not decode ({exc})") from None

    def _memo(self, name: str, build: Any) -> Any:
        if name not in self._cache:
            with self._lock:
                if name not in self._cache:
                    self._cache[name] = build()
        return self._cache[name]

    def _array(self, name: str, dtype: str, count: int) -> NDArray[Any]:
        array = self._file.array(name)
        if array.dtype.str != dtype or array.shape[0] != count:
            raise self._corrupt(
                f"section {name!r} has {array.shape[0]} x {array.dtype}, expected {count} x {dtype}"
            )
        return array

    def _strings(self, prefix: str, count: int) -> tuple[NDArray[np.uint8], NDArray[np.uint64]]:
        blob = self._file.array(f"{prefix}.blob")
        offsets = self._array(f"{prefix}.offsets", "<u8", count + 1)
        _check_offsets(offsets, count, int(blob.shape[0]), prefix, self.path)
        return blob, offsets  # type: ignore[return-value]

    def release_pages(self) -> None:
        """Unmap the pages of the file this process has read; they stay in the page cache.

        A merge reads every source segment from end to end; the pages it
        touched would stay mapped (counted in this process's resident set)
        until the reader is closed. ``MADV_DONTNEED`` on a read-only file
        mapping only drops them from this process's page tables: a later read
        maps them again from the page cache (or the file), with the same bytes.
        No-op for an in-memory segment or where ``madvise`` is unavailable.
        """
        owner = getattr(self._file._buffer, "obj", None)  # the mmap behind the file's buffer
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if isinstance(owner, mmap.mmap) and advice is not None and hasattr(owner, "madvise"):
            owner.madvise(advice)

    def warm(self) -> None:
        """Check and map now what the first search of this segment reads.

        The term, block and packed-postings tables, the lengths, the key table
        and the stored-record block table (with its record offsets and CRCs):
        the index calls this on a segment before it publishes a snapshot that
        reads it, so no search of the new snapshot pays for the checksums and
        shape checks of those sections, or for the page faults of reading them
        (each is read whole, so its pages are mapped). O(n + V + B) (checksums
        in C, B blocks); no term is decoded (see :meth:`term_position`), no
        stored block decompressed. Best effort: a damaged table is left for the
        read that needs it to report, as it would be without warming.
        """
        for step in (
            self._term_tables,
            self.doc_lengths,
            self._packed_tables,  # O(B) checksum and shape checks, B = postings / 128 or fewer
            self._key_table,
            self._stored_table,
        ):
            with contextlib.suppress(CorruptIndexError):
                step()

    # ------------------------------------------------------------------ per-document arrays

    def keys(self) -> NDArray[np.str_]:
        """All keys, in local-id (key) order, decoded once."""

        def build() -> NDArray[np.str_]:
            blob, offsets = self._strings("keys", self.n_docs)
            raw = bytes(blob)
            bounds = offsets.tolist()
            try:
                keys = [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
            except UnicodeDecodeError:
                raise self._corrupt("a key is not valid UTF-8") from None
            if b"\x00" in raw:  # no key holds NUL, and numpy's str_ would drop a trailing one
                raise self._corrupt("a key holds NUL")
            array = np.array(keys, dtype=np.str_)
            if self.n_docs > 1 and not bool(np.all(array[:-1] < array[1:])):
                raise self._corrupt("keys are not strictly increasing")
            # Every key passed the rule check_keys_at checks: its verdicts say so, for views
            # (key_views) taken before this decode, which read them and not this array.
            self._memo("keys.checked", lambda: np.zeros(self.n_docs, dtype=bool))[:] = True
            return array

        result: NDArray[np.str_] = self._memo("keys", build)
        return result

    def _key_table(self) -> tuple[NDArray[np.uint8], NDArray[np.uint64]]:
        """The key blob and its offsets, the offsets checked once per reader.

        The offsets check (``n + 1`` entries, from 0 to the blob's end, never
        decreasing) is O(n); doing it on every :meth:`keys_at` call made a
        query's key lookup cost grow with the segment (172 us at 1M documents,
        issue 14). The file is immutable, so one check per reader holds for
        its life; :meth:`verify` (scrub) checks the table afresh through
        :meth:`keys`. The memo holds two views of the memory map, no copy.
        """
        table: tuple[NDArray[np.uint8], NDArray[np.uint64]] = self._memo(
            "keys.table", lambda: self._strings("keys", self.n_docs)
        )
        return table

    def key_views(self) -> tuple[memoryview, memoryview, memoryview, memoryview, NDArray[np.str_] | None]:
        """What resolving a search hit's key one document at a time reads, as memoryviews (no copy).

        ``(state, checked, offsets, blob, decoded)``: the stored-record verdicts
        :meth:`records_ok` keeps (0 unknown, 1 sound, 2 damaged) and the key
        verdicts :meth:`keys_at` keeps (the same arrays, so a verdict either
        records is seen here), the key table's offsets and bytes, and the keys
        decoded by :meth:`keys` when that ran (else ``None``). A key is ready
        to be read from the table when both verdicts say sound. O(1) after the
        first call (the key table is checked then, once per reader).
        """

        def build() -> tuple[memoryview, memoryview, memoryview, memoryview]:
            state = self._memo("stored.state", lambda: np.zeros(self.n_docs, dtype=np.uint8))
            checked = self._memo("keys.checked", lambda: np.zeros(self.n_docs, dtype=bool))
            blob, offsets = self._key_table()
            return memoryview(state), memoryview(checked), memoryview(offsets), memoryview(blob)  # type: ignore[arg-type]

        views: tuple[memoryview, memoryview, memoryview, memoryview] = self._memo("keys.views", build)
        decoded: NDArray[np.str_] | None = self._cache.get("keys")
        return (*views, decoded)

    def keys_at(self, local: NDArray[np.int64]) -> list[str]:
        """Keys of some documents, decoded one by one (no full key-table decode). O(len(local)).

        Each key is checked the first time it is asked for
        (:meth:`check_keys_at`) and the verdict kept (one byte per document,
        like :meth:`records_ok`), so a later lookup only slices and decodes.
        """
        if "keys" in self._cache:
            return [str(key) for key in self._cache["keys"][local]]
        self.check_keys_at(local)
        blob, offsets = self._key_table()
        positions = np.asarray(local, dtype=np.int64)
        if positions.shape[0] < _GATHER_KEYS_FROM:
            view = memoryview(blob)  # type: ignore[arg-type]
            bounds = offsets[positions].tolist(), offsets[positions + 1].tolist()
            return [str(view[start:end], "utf-8") for start, end in zip(*bounds, strict=True)]
        # One vectorised gather and one decode for all the keys: their bytes are
        # copied side by side with a NUL after each (no key holds NUL: checked
        # above), decoded once, and split at the NULs.
        starts = offsets[positions].astype(np.int64)
        lengths = offsets[positions + 1].astype(np.int64) - starts
        sizes = lengths + 1
        first = np.cumsum(sizes) - sizes
        source = np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(starts - first, sizes)
        np.minimum(source, max(blob.shape[0] - 1, 0), out=source)  # a separator may point past the end
        gathered = blob[source] if blob.shape[0] else np.zeros(source.shape[0], dtype=np.uint8)
        gathered[first + lengths] = 0
        return gathered.tobytes().decode("utf-8").split("\x00")[:-1]

    def hit_verdicts(self, local: NDArray[np.int64]) -> NDArray[np.bool_] | None:
        """Check what a search reports of some documents: their records and keys, not decoding them.

        Returns ``None`` when every record of ``local`` is sound (the common
        case), else :meth:`records_ok`'s mask; the keys of the sound ones are
        checked as :meth:`check_keys_at` checks them. Both read and keep the
        verdicts :meth:`records_ok` and :meth:`keys_at` keep, so documents
        seen before cost a few numpy calls and nothing per document in Python.
        O(len(local)).

        Raises:
            CorruptIndexError: a sound record's key breaks the key table's rule.

        """
        state: NDArray[np.uint8] = self._memo("stored.state", lambda: np.zeros(self.n_docs, dtype=np.uint8))
        if bool((state[local] == 1).all()):
            checked: NDArray[np.bool_] = self._memo("keys.checked", lambda: np.zeros(self.n_docs, dtype=bool))
            if "keys" in self._cache or bool(checked[local].all()):
                return None
        ok = self.records_ok(local)
        if bool(ok.all()):
            self.check_keys_at(local)
            return None
        self.check_keys_at(local[ok])
        return ok

    def check_keys_at(self, local: NDArray[np.int64]) -> None:
        """Check the keys of some documents as :meth:`keys_at` does, without decoding them.

        Each key is checked the first time it is asked for and the verdict
        kept, so a later :meth:`keys_at` of these only slices and decodes (a
        search checks its hits' keys at once and decodes them when read).
        O(len(local)), O(1) numpy calls once every key was checked.

        Raises:
            CorruptIndexError: a key breaks the key table's rule.

        """
        if "keys" in self._cache:
            return  # the whole table was decoded, which checked it
        checked: NDArray[np.bool_] = self._memo("keys.checked", lambda: np.zeros(self.n_docs, dtype=bool))
        positions = np.asarray(local, dtype=np.int64)
        seen = checked[positions]
        if not seen.all():
            blob, offsets = self._key_table()
            unchecked = positions[~seen]
            self._check_keys_at(blob, offsets, unchecked)
            checked[unchecked] = True  # only after every one passed

    def _check_keys_at(
        self, blob: NDArray[np.uint8], offsets: NDArray[np.uint64], positions: NDArray[np.int64]
    ) -> None:
        """The rule :meth:`keys` checks on the whole table, checked around each of ``positions``.

        Every key is strictly between its neighbours (UTF-8 bytes order as the
        strings do), so a repeated key is refused here too; no key holds NUL;
        every key is valid UTF-8. O(len(positions)).

        Raises:
            CorruptIndexError: a key breaks the rule.

        """
        last = self.n_docs - 1
        # Offsets of the key before, the key itself and the key after (clipped at the ends).
        cuts = offsets[np.clip(positions[:, None] + np.arange(-1, 3), 0, self.n_docs)].tolist()
        for position, (start_before, start, end, end_after) in zip(positions.tolist(), cuts, strict=True):
            key = bytes(blob[start:end])
            if b"\x00" in key:
                raise self._corrupt("a key holds NUL")
            before = bytes(blob[start_before:start]) if position > 0 else None
            after = bytes(blob[end:end_after]) if position < last else None
            if (before is not None and not before < key) or (after is not None and not key < after):
                raise self._corrupt("keys are not strictly increasing")
            try:
                key.decode("utf-8")
            except UnicodeDecodeError:
                raise self._corrupt("a key is not valid UTF-8") from None

    def doc_lengths(self) -> NDArray[np.uint32]:
        """Analysed length of each document."""
        return self._array("doc.lengths", "<u4", self.n_docs)

    def times(self) -> NDArray[np.float64]:
        """POSIX seconds of each document; NaN where none."""
        return self._array("doc.times", "<f8", self.n_docs)

    def _stored_table(self) -> tuple[NDArray[np.uint64], list[int], NDArray[np.uint64], NDArray[np.uint32]]:
        """The block table (K x 5), its first record ids, the raw record offsets and the record CRCs.

        Checked once per reader, O(n + K), before any block is read: the table
        covers records ``0 .. n-1`` in order and the compressed blob end to end
        with no gap; each block's raw length is what ``stored.offsets`` gives
        its records and, for a zstd block, at most :data:`STORED_MAX_RATIO`
        times its compressed length (so no block can make a reader allocate
        more than that multiple of bytes the file holds); a stored block's raw
        length is its length. The sections' own checksums are checked as they
        are read.

        Raises:
            CorruptIndexError: a section fails its checksum or the table breaks a rule.

        """

        def build() -> tuple[NDArray[np.uint64], list[int], NDArray[np.uint64], NDArray[np.uint32]]:
            n = self.n_docs
            offsets = self._array("stored.offsets", "<u8", n + 1)
            crcs = self._array("stored.crc", "<u4", n)
            flat = self._file.array("stored.blocks")
            if flat.dtype.str != "<u8" or flat.shape[0] % BLOCK_COLUMNS:
                raise self._corrupt(f"section 'stored.blocks' has {flat.shape[0]} x {flat.dtype}")
            table = flat.reshape(-1, BLOCK_COLUMNS)
            count = table.shape[0]
            block_crcs = self._array("stored.block_crc", "<u4", count)
            del block_crcs  # checksum-verified here; read per block
            blob_length = self._file.size("stored.blob")
            if not 0 <= int(offsets[-1]) <= STORED_MAX_RATIO * blob_length or (count == 0) != (n == 0):
                raise self._corrupt(f"stored records claim {int(offsets[-1])} bytes in {blob_length}")
            _check_offsets(offsets, n, int(offsets[-1]), "stored record", self.path)
            if count > n:
                raise self._corrupt(f"{count} stored blocks for {n} records")
            if count:
                first, at, packed, raw, method = (table[:, c].astype(np.int64) for c in range(5))
                ends = np.append(first[1:], n)
                if (
                    int(table[:, 0].max()) >= n
                    or int(first[0]) != 0
                    or bool(np.any(ends <= first))
                    or int(table[:, 1].max()) > blob_length
                    or int(table[:, 2].max()) > blob_length
                    or int(table[:, 3].max()) > STORED_MAX_RATIO * blob_length
                    or int(at[0]) != 0
                    or not np.array_equal(at[1:], (at + packed)[:-1])
                    or int(at[-1] + packed[-1]) != blob_length
                ):
                    raise self._corrupt("stored block table does not cover the records and blob in order")
                if bool(np.any((method != METHOD_RAW) & (method != METHOD_ZSTD))):
                    raise self._corrupt("a stored block has an unknown method")
                if bool(np.any((method == METHOD_RAW) & (raw != packed))) or bool(
                    np.any((method == METHOD_ZSTD) & ((packed == 0) | (raw > STORED_MAX_RATIO * packed)))
                ):
                    # Checked before anything is decompressed: a length no file backs never sizes a buffer.
                    worst = int(np.argmax(raw - STORED_MAX_RATIO * packed))
                    raise self._corrupt(
                        f"stored block {worst} claims {int(raw[worst])} raw bytes "
                        f"from {int(packed[worst])} compressed"
                    )
                record_at = offsets.astype(np.int64)
                if not np.array_equal(raw, record_at[ends] - record_at[first]):
                    raise self._corrupt("stored block raw lengths disagree with the record offsets")
            return table, table[:, 0].tolist(), offsets, crcs  # type: ignore[return-value]

        result: tuple[NDArray[np.uint64], list[int], NDArray[np.uint64], NDArray[np.uint32]] = self._memo(
            "stored.table", build
        )
        return result

    def _stored_block(self, block: int) -> bytes | None:
        """Block ``block``'s raw bytes (cached); ``None`` if they fail their CRC32C or do not decompress."""
        found = self._blocks_cache.get(block)
        if found is not None:
            return found
        table = self._stored_table()[0]
        _, at, packed_length, raw_length, method = (int(v) for v in table[block])
        packed = self._file.raw("stored.blob")[at : at + packed_length]
        if checksum(packed) != int(self._file.array("stored.block_crc")[block]):
            return None
        raw = decompress_block(packed, raw_length, method)
        if raw is not None:
            self._blocks_cache.put(block, raw)
        return raw

    def whole_stored_block(self, first: int, end: int) -> tuple[bytes, int, int] | None:
        """The stored block holding exactly records ``first ..< end``, as compressed, or ``None``.

        ``(compressed bytes, raw length, method)`` if there is such a block and
        its bytes pass their CRC32C. A merge copies such a block as it is (no decompression); on ``None`` it
        reads the records one by one, which reports damage as usual.

        Raises:
            CorruptIndexError: the stored sections' tables are damaged.

        """
        table, firsts, _, _ = self._stored_table()
        block = bisect.bisect_left(firsts, first)
        if block >= len(firsts) or firsts[block] != first:
            return None
        if (firsts[block + 1] if block + 1 < len(firsts) else self.n_docs) != end:
            return None
        _, at, packed_length, raw_length, method = (int(v) for v in table[block])
        packed = bytes(self._file.raw("stored.blob")[at : at + packed_length])
        if checksum(packed) != int(self._file.array("stored.block_crc")[block]):
            return None
        return packed, raw_length, method

    def record_lengths_and_crcs(self) -> tuple[NDArray[np.int64], NDArray[np.uint32]]:
        """Every stored record's length in bytes and CRC32C, from the checked tables (nothing decompressed).

        Raises:
            CorruptIndexError: the stored sections' tables are damaged.

        """
        _, _, offsets, crcs = self._stored_table()
        lengths: NDArray[np.int64] = np.diff(offsets).astype(np.int64)
        return lengths, crcs

    def _checked_record(self, local: int) -> bytes | None:
        """Document ``local``'s stored record if its block and its CRC32C are sound, else ``None``.

        Raises:
            CorruptIndexError: the stored sections' tables are damaged (every record is then unknown).

        """
        _, firsts, offsets, crcs = self._stored_table()
        block = bisect.bisect_right(firsts, local) - 1
        raw = self._stored_block(block)
        if raw is None:
            return None
        base = int(offsets[firsts[block]])
        record = raw[int(offsets[local]) - base : int(offsets[local + 1]) - base]
        return record if checksum(record) == int(crcs[local]) else None

    def stored_block_problems(self) -> list[str]:
        """Every stored block that fails its CRC32C or does not decompress (scrub). O(stored bytes)."""
        problems = []
        table, firsts, _, _ = self._stored_table()
        for block in range(table.shape[0]):
            found = self._blocks_cache.get(block)
            if found is None and self._stored_block(block) is None:
                last = firsts[block + 1] - 1 if block + 1 < len(firsts) else self.n_docs - 1
                where = f"documents {firsts[block]}..{last}"
                problems.append(f"{self.path}: stored block {block} ({where}) is damaged")
        return problems

    def document(self, local: int) -> Document | None:
        """The stored document ``local``, or ``None`` if its record is damaged."""
        raw = self._checked_record(local)
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            return stored_document(
                key=str(self.keys()[local]),
                text=record["text"],
                vector=self.vector(local),
                links=self.links(local),
                time=record["time"],
                fields=record["fields"],
                text_fields=record.get("text_fields"),
            )
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError, AttributeError):
            return None

    def record_ok(self, local: int) -> bool:
        """Whether document ``local``'s stored record passes its own checksum."""
        return self._checked_record(local) is not None

    def records_ok(self, local: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each record of ``local`` passes its checksum; each record is checked once.

        Searches call this for every hit, so the verdicts are remembered (one
        byte per document: unknown, sound, damaged). The file is immutable, so
        a verdict stays true unless the bytes rot while the process runs; a
        record read later is checked again anyway (:meth:`document`,
        :meth:`fields`), and :meth:`verify` reads everything afresh.
        O(len(local)) after the first check of each record.
        """
        state: NDArray[np.uint8] = self._memo("stored.state", lambda: np.zeros(self.n_docs, dtype=np.uint8))
        seen = state[local]
        unknown = np.flatnonzero(seen == 0)
        if unknown.shape[0]:
            # A block is decompressed once for all its records' verdicts: the hits of later
            # searches in the same block then cost nothing, and the bounded block cache is not
            # asked to keep every block a search touched.
            firsts = self._memo("stored.firsts", lambda: np.asarray(self._stored_table()[1], dtype=np.int64))
            blocks = np.searchsorted(firsts, np.asarray(local)[unknown], side="right") - 1
            for block in np.unique(blocks).tolist():
                self._block_verdicts(block, state)
            seen = state[local]
        result: NDArray[np.bool_] = seen == 1
        return result

    def _block_verdicts(self, block: int, state: NDArray[np.uint8]) -> None:
        """Every record of stored block ``block`` into ``state``: 1 sound, 2 damaged (as read alone)."""
        _, firsts, offsets, crcs = self._stored_table()
        first = firsts[block]
        end = firsts[block + 1] if block + 1 < len(firsts) else self.n_docs
        raw = self._stored_block(block)
        if raw is None:
            state[first:end] = 2
            return
        cuts = (offsets[first : end + 1].astype(np.int64) - int(offsets[first])).tolist()
        wanted = crcs[first:end].tolist()
        state[first:end] = [
            1 if checksum(raw[start:stop]) == crc else 2
            for start, stop, crc in zip(cuts[:-1], cuts[1:], wanted, strict=True)
        ]

    def fields(self, local: int) -> dict[str, Any] | None:
        """The stored fields of document ``local`` (no links; lists as tuples), or ``None`` if damaged."""
        raw = self._checked_record(local)
        if raw is None:
            return None
        try:
            fields = json.loads(raw)["fields"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        if not isinstance(fields, dict):
            return None
        # A list field reads back as the tuple Document.fields holds, so hits and get() agree.
        return {name: tuple(v) if isinstance(v, list) else v for name, v in fields.items()}

    def record(self, local: int) -> bytes:
        """The raw stored record of document ``local``, checked against its CRC32C.

        Raises:
            CorruptIndexError: the record is damaged.

        """
        raw = self._checked_record(local)
        if not raw:  # a sound record is never empty: it is a JSON object
            raise self._corrupt(f"stored document {local} is damaged")
        return raw

    def links(self, local: int) -> tuple[str, ...]:
        """Target keys of document ``local``'s links."""
        offsets = self._array("links.doc", "<u8", self.n_docs + 1)
        first, last = int(offsets[local]), int(offsets[local + 1])
        total = int(offsets[-1])
        if not 0 <= first <= last <= total:
            raise self._corrupt("link offsets out of range")
        blob, targets = self._strings("links", total) if total else (None, None)
        if blob is None or targets is None:
            return ()
        raw = bytes(blob[int(targets[first]) : int(targets[last])])
        cuts = (targets[first : last + 1] - targets[first]).tolist()
        try:
            return tuple(raw[a:b].decode("utf-8") for a, b in itertools.pairwise(cuts))
        except UnicodeDecodeError:
            raise self._corrupt("a link target is not valid UTF-8") from None

    def all_links(self) -> tuple[NDArray[np.int64], list[str]]:
        """Links of every document: how many each has, and all targets in document order."""

        def build() -> tuple[NDArray[np.int64], list[str]]:
            per_doc = self._array("links.doc", "<u8", self.n_docs + 1)
            total = int(per_doc[-1]) if per_doc.size else 0
            _check_offsets(per_doc, self.n_docs, total, "links.doc", self.path)
            if not total:
                return np.zeros(self.n_docs, np.int64), []
            blob, offsets = self._strings("links", total)
            raw = bytes(blob)
            try:
                targets = [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets.tolist())]
            except UnicodeDecodeError:
                raise self._corrupt("a link target is not valid UTF-8") from None
            return np.diff(per_doc).astype(np.int64), targets

        result: tuple[NDArray[np.int64], list[str]] = self._memo("all_links", build)
        return result

    # ------------------------------------------------------------------ vectors

    def vector_rows(self) -> NDArray[np.int32]:
        """Row of each document in :meth:`vector_matrix`, -1 when it has no vector."""
        rows = self._array("vec.rows", "<i4", self.n_docs)
        count = self.vector_matrix().shape[0]
        if rows.size and (int(rows.max()) >= count or int(rows.min()) < -1):
            raise self._corrupt("vector row index out of range")
        return rows

    def vector_matrix(self) -> NDArray[np.float32]:
        """All stored vectors as one ``(m, dim)`` matrix: float32, or float16 in a half-precision segment."""
        dim = self.vector_dim or 0
        flat = self._file.array("vec.matrix")
        wanted = "<f2" if self._meta_cache.get("vector_dtype") == "float16" else "<f4"
        if flat.dtype.str != wanted or (dim == 0 and flat.shape[0]) or (dim and flat.shape[0] % dim):
            raise self._corrupt("vector matrix has an impossible shape")
        return flat.reshape(-1, dim) if dim else flat.reshape(0, 0)  # type: ignore[return-value]

    def vector_norms(self) -> NDArray[np.float32]:
        """Euclidean norm of each row of :meth:`vector_matrix`, float32, computed once per segment.

        Row by row (``einsum``; float16 rows are summed in float32), so a
        vector's norm does not depend on the segment it sits in. Read-only.
        O(m * dim) on first use, then free for every later snapshot.
        """

        def build() -> NDArray[np.float32]:
            matrix = self.vector_matrix()
            norms = np.empty(matrix.shape[0], dtype=np.float32)
            for start in range(0, matrix.shape[0], _NORM_CHUNK):
                part = matrix[start : start + _NORM_CHUNK]
                squares = np.einsum("ij,ij->i", part, part, dtype=np.float32)
                np.sqrt(squares, out=norms[start : start + _NORM_CHUNK])
            norms.setflags(write=False)
            return norms

        result: NDArray[np.float32] = self._memo("vector_norms", build)
        return result

    def vector_lists(self) -> tuple[NDArray[np.float32], NDArray[np.uint64]] | None:
        """The IVF partitions: centroids ``(nlist, dim)`` and row offsets ``(nlist + 1)``, or ``None``.

        List ``l`` holds the rows ``offsets[l] ..< offsets[l + 1]`` of
        :meth:`vector_matrix`. ``None`` when the segment is below the size
        floor (scan it exactly).
        """

        def build() -> tuple[NDArray[np.float32], NDArray[np.uint64]] | None:
            ivf = self._meta_cache.get("ivf")
            if ivf is None:
                return None
            nlist, dim = int(ivf["nlist"]), int(self.vector_dim or 0)
            centroids = self._array("ivf.centroids", "<f4", nlist * dim).reshape(nlist, dim)
            offsets = self._array("ivf.offsets", "<u8", nlist + 1)
            _check_offsets(offsets, nlist, self.vector_matrix().shape[0], "ivf list", self.path)
            return centroids, offsets

        result: tuple[NDArray[np.float32], NDArray[np.uint64]] | None = self._memo("ivf", build)
        return result

    def vector(self, local: int) -> NDArray[np.float32] | None:
        """The vector of document ``local``, or ``None``."""
        row = int(self.vector_rows()[local])
        return None if row < 0 else np.array(self.vector_matrix()[row], dtype=np.float32)

    # ------------------------------------------------------------------ text fields

    @property
    def field_name(self) -> str:
        """The text field whose postings this reader's postings methods read (``"text"``: the default)."""
        return "text"

    @property
    def text_field_names(self) -> tuple[str, ...]:
        """Every text field of the segment: ``"text"``, then the named ones in schema order."""
        return ("text", *(entry["name"] for entry in self._meta_cache.get("text_fields", [])))

    def text_field(self, name: str) -> TextFieldReader:
        """The reader of text field ``name``'s terms, postings and lengths (``"text"``: this reader).

        A named field's reader shares this one's file and reads the field's
        ``tf.N.`` sections with every check the default field's get (each
        term's CRC32C, a decode and its block table at first use). Made once
        per field and reader.

        Raises:
            KeyError: the segment has no such text field.

        """
        if name == "text":
            return self
        fields: dict[str, TextFieldReader] = self._memo("text_fields", dict)
        found = fields.get(name)
        if found is None:
            with self._lock:
                found = fields.get(name)
                if found is None:
                    for number, entry in enumerate(self._meta_cache.get("text_fields", []), start=1):
                        if entry["name"] == name:
                            found = fields[name] = _FieldView(self, entry, f"tf.{number}.")
                            break
                    else:
                        known = ", ".join(self.text_field_names)
                        raise KeyError(f"{self.path}: no text field {name!r} (it has {known})")
        return found

    @property
    def has_positions(self) -> bool:
        """Whether this text field keeps its terms' positions (docs/FORMAT.md, "Positions")."""
        return "positions" in self._meta_cache

    def _positions_tables(self) -> _PositionsTables:
        """Each term's first word in ``pos.data`` (checked once) and ``pos.crc``.

        The first words are ``pos.data_offsets`` (low 32 bits) joined with ``pos.data_wraps``.
        """

        def build() -> tuple[Any, ...]:
            words = int(self._meta_cache["positions"]["words"])
            try:
                data_offsets = join_offsets(
                    self._array("pos.data_offsets", "<u4", self.n_terms + 1),
                    self._array("pos.data_wraps", "<u8", words >> 32),
                )
            except PostingsDecodeError as exc:
                raise self._corrupt(str(exc)) from None
            _check_offsets(data_offsets, self.n_terms, words, "positions data", self.path)
            crcs = self._array("pos.crc", "<u4", self.n_terms)
            return data_offsets, crcs

        result: _PositionsTables = self._memo("positions", build)
        return result

    def _positions_data(self) -> NDArray[np.uint32]:
        """``pos.data`` as ``<u4`` words, *not* verified as a whole section (each term has its CRC32C)."""

        def build() -> NDArray[np.uint32]:
            raw = self._file.raw("pos.data")
            if len(raw) != 4 * int(self._meta_cache["positions"]["words"]):
                raise self._corrupt("section 'pos.data' has the wrong size")
            return np.frombuffer(raw, dtype="<u4")

        result: NDArray[np.uint32] = self._memo("pos.data", build)
        return result

    def positions(
        self, term: str
    ) -> tuple[NDArray[np.uint32], NDArray[np.uint32], NDArray[np.uint64], NDArray[np.uint32]]:
        """``term``'s postings with their positions: ``(ids, tfs, starts, positions)``; all empty if absent.

        Posting j's positions (indexes in the analyzer's output, ascending)
        are ``positions[starts[j]:starts[j+1]]``; ``starts`` has ``df + 1``
        entries. The term's words are checked against their CRC32C, then
        decoded (vectorised) with every size and range check (each position
        below its document's length). O(positions of the term).

        Raises:
            CorruptIndexError: the positions (or the postings) are damaged.
            KeyError: this field keeps no positions.

        """
        if not self.has_positions:
            raise KeyError(f"{self.path}: text field {self.field_name!r} keeps no positions")
        ids, tfs = self.postings(term)
        if not ids.size:
            return ids, tfs, np.zeros(1, np.uint64), np.empty(0, np.uint32)
        position = self.term_position(term)
        data_offsets, crcs = self._positions_tables()
        words = self._positions_data()[int(data_offsets[position]) : int(data_offsets[position + 1])]
        if checksum(words.tobytes()) != int(crcs[position]):
            raise self._corrupt(f"positions of term {term!r} fail their checksum")
        try:
            starts, found = unpack_positions(words, tfs, self.doc_lengths()[ids])
        except PostingsDecodeError as exc:
            raise self._corrupt(f"positions of term {term!r} do not decode ({exc})") from None
        return ids, tfs, starts, found

    def packed_positions(self, term: str) -> tuple[NDArray[np.uint32], NDArray[np.uint8]] | None:
        """``term``'s positions as stored: its words and its chunks' bit widths (views); ``None``: absent.

        For a reader that decodes positions per posting itself (the compiled
        phrase check): chunks of 128 codes (docs/FORMAT.md, "Positions"), each
        at its width, runs starting on a new word (the words up to the last
        chunk's last value; the widths are the term's last bytes, a view of
        them). Checked before they are
        handed out: the CRC32C and a full decode with every range check
        (:meth:`positions`), once per term and reader (remembered). O(positions)
        the first time, O(1) after.

        Raises:
            CorruptIndexError: the positions (or the postings) are damaged.
            KeyError: this field keeps no positions.

        """
        if not self.has_positions:
            raise KeyError(f"{self.path}: text field {self.field_name!r} keeps no positions")
        position = self.term_position(term)
        if position < 0:
            return None
        checked: set[str] = self._memo("pos.checked terms", set)
        if term not in checked:
            self.positions(term)  # the CRC and every range check, once
            checked.add(term)
        data_offsets, _ = self._positions_tables()
        words = self._positions_data()[int(data_offsets[position]) : int(data_offsets[position + 1])]
        _, tfs = self.postings(term)
        return positions_chunks(words, int(tfs.sum(dtype=np.int64)))

    # ------------------------------------------------------------------ postings

    def _term_tables(
        self,
    ) -> tuple[NDArray[np.uint8], NDArray[np.uint64], NDArray[np.uint64], NDArray[np.uint32]]:
        def build() -> tuple[Any, ...]:
            blob, offsets = self._strings("terms", self.n_terms)
            # The size, not the array: reading the array would verify the whole
            # section, and postings are verified term by term.
            total = int(self._meta_cache["postings"])
            postings = self._array("post.offsets", "<u8", self.n_terms + 1)
            _check_offsets(postings, self.n_terms, total, "postings", self.path)
            crcs = self._array("post.crc", "<u4", self.n_terms)
            return blob, offsets, postings, crcs

        result: tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]] = self._memo("terms", build)
        return result

    def term_position(self, term: str) -> int:
        """Index of ``term`` in the sorted term table, or -1.

        A binary search over the UTF-8 term table as stored (UTF-8 byte order
        is code-point order), O(log V) byte comparisons; the answer is then
        remembered for this reader (up to :data:`TERM_CACHE_SIZE` terms), so a
        term queried again costs one dict lookup. Nothing is decoded up front:
        opening, committing or merging never pays O(V) in Python for the first
        query. A found term is checked to equal the query term, so a table out
        of order (which :meth:`verify` reports) can miss a term, never answer
        with another one.
        """
        cache = self._term_cache
        position = cache.get(term)
        if position is None:
            position = self._find_term(term)
            if len(cache) < TERM_CACHE_SIZE:
                cache[term] = position
        return position

    def _find_term(self, term: str) -> int:
        blob, offsets, _, _ = self._term_tables()
        try:
            needle = term.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no stored term can equal it
            return -1
        low = self._lower_bound(needle)
        if low < self.n_terms and blob[offsets[low] : offsets[low + 1]].tobytes() == needle:
            return low
        return -1

    def _lower_bound(self, needle: bytes) -> int:
        """The first term (0 ..= n_terms) whose UTF-8 bytes are not below ``needle``. O(log V).

        One compiled call where it was given (:func:`use_term_search`), else a
        bisection over slices of the map.
        """
        blob, offsets, _, _ = self._term_tables()
        if _term_search is not None:
            return _term_search(blob, offsets, needle)
        return _bisect_terms(blob, offsets, self.n_terms, needle)

    def postings(self, term: str) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
        """Local ids (ascending) and term frequencies of ``term``; empty if absent.

        The term's postings are checked against their own CRC32C before use,
        so reading one term never needs the whole postings section verified.
        Version 3 (compressed): the first read of a term also decodes it with
        every size and range check and compares its whole block table with a
        derivation from the decoded postings (:meth:`term_blocks`); decoded
        lists are kept for reuse up to :data:`DECODED_CACHE_POSTINGS` postings
        per reader (first in, first out), later reads decode again (O(df),
        vectorised). The arrays are read-only.

        Raises:
            CorruptIndexError: the postings (or their block table) are damaged.

        """
        position = self.term_position(term)
        if position < 0:
            return np.empty(0, np.uint32), np.empty(0, np.uint32)
        return self._packed_postings(position, term)

    def _term_extent(self, position: int) -> tuple[int, int, int, int, int, int]:
        """Term ``position``'s postings, blocks and words: (first, end) of each, bounds checked."""
        _, _, offsets, _ = self._term_tables()
        block_offsets, _, data_offsets = self._packed_tables()
        return (
            int(offsets[position]),
            int(offsets[position + 1]),
            int(block_offsets[position]),
            int(block_offsets[position + 1]),
            int(data_offsets[position]),
            int(data_offsets[position + 1]),
        )

    def trust_own_tables(self) -> None:
        """Skip the first-use derivation of each term's block table: this process wrote the segment.

        For a segment the index (or its forked child) has just written from
        postings it derived the table from, so the two agree by construction.
        A term's first use then checks its packed words against their CRC32C
        only (the table's section has its own checksum, checked when the
        reader warms), not a full decode and a derivation of its table
        (O(df) numpy work, about 0.3 ms a term on SciFact): that made every
        search after a commit or a merge pay for the terms it touched first,
        five times a warm search's cost for the next second. Accidental damage
        is still caught by the checksums; a file *substituted* after it was
        written is outside what this guards (as it is for every map once
        checked).
        """
        self._tables_trusted = True
        for view in self._cache.get("text_fields", {}).values():
            if view is not self:
                view.trust_own_tables()

    def _check_words(self, position: int, term: str) -> None:
        """A trusted term's first use: its packed words against their CRC32C, then trusted whole."""
        _, _, block_first, block_end, word_first, word_end = self._term_extent(position)
        self._check_checksum(position, term, self._packed_data()[word_first:word_end])
        _, table, _ = self._packed_tables()
        self._verified_blocks[position] = table[BLOCK_ROWS * block_first : BLOCK_ROWS * block_end]

    def _check_checksum(self, position: int, term: str, words: NDArray[np.uint32]) -> None:
        """Term ``position``'s packed ``words`` against the CRC32C its term table records."""
        if checksum(words.tobytes()) != int(self._term_tables()[3][position]):
            raise self._corrupt(f"postings of term {term!r} fail their checksum")

    def _packed_postings(self, position: int, term: str) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
        """Term ``position``'s decoded postings (checked at first use, then cached, bounded)."""
        cached = self._decoded.get(position)
        if cached is not None:
            return cached
        first, end, block_first, block_end, word_first, word_end = self._term_extent(position)
        _, table, _ = self._packed_tables()
        data = self._packed_data()
        words = data[word_first:word_end]
        verified = position in self._verified_blocks
        if not verified:
            self._check_checksum(position, term, words)
        stored = table[BLOCK_ROWS * block_first : BLOCK_ROWS * block_end]
        cuts = (
            np.array([first, end], dtype=np.int64),
            np.array([block_first, block_end], dtype=np.int64),
            stored,
            np.array([word_first, word_end], dtype=np.int64),
        )
        try:
            if verified or self._tables_trusted:
                ids, tfs = unpack_postings(words, *cuts, self.n_docs)
                agrees = True
            else:
                ids, tfs, agrees = unpack_checked(words, *cuts, self.n_docs, self.doc_lengths())
        except PostingsDecodeError as exc:
            raise self._corrupt(f"postings of term {term!r} do not decode ({exc})") from None
        if not verified:
            if not agrees:
                raise self._corrupt(f"block metadata of term {term!r} disagrees with its postings")
            self._verified_blocks[position] = stored
        ids.setflags(write=False)
        tfs.setflags(write=False)
        size = ids.shape[0]
        if size <= DECODED_CACHE_POSTINGS:
            with self._lock:
                while self._decoded and self._decoded_postings + size > DECODED_CACHE_POSTINGS:
                    evicted = self._decoded.pop(next(iter(self._decoded)))
                    self._decoded_postings -= evicted[0].shape[0]
                self._decoded[position] = (ids, tfs)
                self._decoded_postings += size
        return ids, tfs

    def _packed_data(self) -> NDArray[np.uint32]:
        """``post.data`` as ``<u4`` words, *not* verified as a whole section (each term has its CRC32C)."""

        def build() -> NDArray[np.uint32]:
            raw = self._file.raw("post.data")
            words = int(self._meta_cache["words"])
            if len(raw) != 4 * words:
                raise self._corrupt("section 'post.data' has the wrong size")
            return np.frombuffer(raw, dtype="<u4")

        result: NDArray[np.uint32] = self._memo("post.data", build)
        return result

    def _packed_tables(self) -> tuple[NDArray[np.uint64], NDArray[np.uint32], NDArray[np.uint64]]:
        """Version 3: ``post.block_offsets``, ``post.blocks`` and ``post.data_offsets``, shape-checked."""

        def build() -> tuple[NDArray[np.uint64], NDArray[np.uint32], NDArray[np.uint64]]:
            block_offsets, table = self._block_tables()
            data_offsets = self._array("post.data_offsets", "<u8", self.n_terms + 1)
            _check_offsets(
                data_offsets, self.n_terms, int(self._meta_cache["words"]), "postings data", self.path
            )
            return block_offsets, table, data_offsets

        result: tuple[NDArray[np.uint64], NDArray[np.uint32], NDArray[np.uint64]] = self._memo(
            "packed", build
        )
        return result

    def _block_tables(self) -> tuple[NDArray[np.uint64], NDArray[np.uint32]]:
        """``post.block_offsets`` and ``post.blocks``, checksum-verified, shaped as ``post.offsets`` needs."""

        def build() -> tuple[NDArray[np.uint64], NDArray[np.uint32]]:
            _, _, postings, _ = self._term_tables()
            blocks = int(self._meta_cache["blocks"])
            block_offsets = self._array("post.block_offsets", "<u8", self.n_terms + 1)
            _check_offsets(block_offsets, self.n_terms, blocks, "block", self.path)
            # Term t has exactly ceil(df_t / 128) blocks: a list the kernel walks block by block
            # never reads past its postings or its metadata.
            wanted = (np.diff(postings.astype(np.int64)) + (POSTINGS_BLOCK - 1)) // POSTINGS_BLOCK
            if not np.array_equal(np.diff(block_offsets.astype(np.int64)), wanted):
                raise self._corrupt("block offsets disagree with the postings counts")
            table = self._array("post.blocks", "<u4", BLOCK_ROWS * blocks)
            return block_offsets, table

        result: tuple[NDArray[np.uint64], NDArray[np.uint32]] = self._memo("blocks", build)
        return result

    def term_blocks(self, term: str) -> tuple[NDArray[np.uint32], NDArray[np.uint32], NDArray[np.uint32]]:
        """``term``'s postings (as :meth:`postings`) and their block metadata; all empty if absent.

        The metadata is ``post.blocks``' slice of the term, a read-only view of
        the file: ``ceil(df / 128)`` last local ids, then as many largest tfs,
        then as many smallest document lengths, then as many
        widths (docs/FORMAT.md, "Block metadata"). Its section is
        checksum-verified when first read, and the first time each term is
        asked for, its blocks are compared with a derivation from its postings
        and ``doc.lengths`` (:func:`derive_blocks`, O(df), the same order of
        cost as the postings' own CRC and range checks that :meth:`postings`
        runs then): a bound that disagrees by one bit, even in a file whose
        checksums were all recomputed, raises here and is never used to skip
        a block.

        Raises:
            CorruptIndexError: the postings or the block metadata are damaged or disagree.

        """
        ids, tfs = self.postings(term)
        if not ids.size:
            return ids, tfs, np.empty(0, np.uint32)
        # postings() checked the term's blocks at its first use and kept the verdict.
        return ids, tfs, self._verified_blocks[self.term_position(term)]

    def term_packed(self, term: str) -> tuple[NDArray[np.uint32], NDArray[np.uint32], int] | None:
        """``term``'s packed words, block table (views of the file) and count; None if absent.

        What the compiled BM25 reads: it decodes a block only when it scores
        it. Checked first exactly as :meth:`term_blocks` checks (CRC32C, a full
        decode, the table against a derivation), once per reader and term; in
        a segment this process wrote (:meth:`trust_own_tables`), the CRC32C only.

        Raises:
            CorruptIndexError: the postings or the block table are damaged or disagree.

        """
        position = self.term_position(term)
        if position < 0:
            return None
        if position not in self._verified_blocks:
            if self._tables_trusted:
                self._check_words(position, term)
            else:
                self._packed_postings(position, term)
        first, end, block_first, block_end, word_first, word_end = self._term_extent(position)
        _, table, _ = self._packed_tables()
        stored = table[BLOCK_ROWS * block_first : BLOCK_ROWS * block_end]
        return self._packed_data()[word_first:word_end], stored, end - first

    def _decode_all(self) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
        """Every posting decoded (merges, scrub). O(P), vectorised.

        Raises:
            CorruptIndexError: the postings do not decode.

        """
        _, _, postings, _ = self._term_tables()
        block_offsets, table, data_offsets = self._packed_tables()
        data = self._array("post.data", "<u4", int(self._meta_cache["words"]))
        try:
            return unpack_postings(data, postings, block_offsets, table, data_offsets, self.n_docs)
        except PostingsDecodeError as exc:
            raise self._corrupt(f"postings do not decode ({exc})") from None

    def _block_problems(self) -> list[str]:
        """Every term whose stored block metadata differs from a fresh derivation (scrub). O(P + V)."""
        block_offsets, table = self._block_tables()
        _, _, postings, _ = self._term_tables()
        ids, tfs = self._decode_all()
        rows = BLOCK_ROWS
        _, derived = derive_blocks(ids, tfs, postings, self.doc_lengths())
        if np.array_equal(table, derived):
            return []
        wrong = (
            np.flatnonzero(table != derived) // rows
        )  # a position of rows * block_offsets[t] .. maps to term t
        terms = np.unique(np.searchsorted(block_offsets.astype(np.int64), wrong, side="right") - 1)
        shown = ", ".join(str(t) for t in terms[:10].tolist())
        more = f" and {terms.shape[0] - 10} more" if terms.shape[0] > 10 else ""
        return [f"{self.path}: block metadata of term {shown}{more} disagrees with its postings"]

    def terms(self) -> list[str]:
        """All terms of the segment, ascending, decoded once."""

        def build() -> list[str]:
            blob, offsets, _, _ = self._term_tables()
            raw = bytes(blob)
            try:
                return [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets.tolist())]
            except UnicodeDecodeError:
                raise self._corrupt("a term is not valid UTF-8") from None

        result: list[str] = self._memo("all_terms", build)
        return result

    def terms_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """The segment's terms that start with ``prefix``, ascending, at most ``limit + 1`` of them.

        A binary search for the first term at or after ``prefix`` in the
        stored (UTF-8, code-point ordered) term table, then a scan while terms
        start with it: O(log V + limit), nothing decoded up front. One term
        more than ``limit`` is returned when there are more, so a caller can
        tell "exactly limit" from "too many".

        Raises:
            CorruptIndexError: a term is not valid UTF-8.

        """
        blob, offsets, _, _ = self._term_tables()
        try:
            needle = prefix.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no stored term starts with it
            return []
        low = self._lower_bound(needle)
        found: list[str] = []
        while low < self.n_terms and len(found) <= limit:
            raw = blob[offsets[low] : offsets[low + 1]].tobytes()
            if not raw.startswith(needle):
                break
            try:
                found.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise self._corrupt("a term is not valid UTF-8") from None
            low += 1
        return found

    def all_postings(self) -> tuple[list[str], NDArray[np.int64], NDArray[np.int64], NDArray[np.uint32]]:
        """Every posting as columns: (terms, term index, local id, frequency). For merges."""
        _, _, offsets, _ = self._term_tables()
        ids, tfs = self._decode_all()
        if ids.size and int(ids.max()) >= self.n_docs:
            raise self._corrupt("a posting names a document past the end")
        term_of = np.repeat(np.arange(self.n_terms, dtype=np.int64), np.diff(offsets).astype(np.int64))
        return self.terms(), term_of, ids.astype(np.int64), tfs.astype(np.uint32)

    def find(self, key: str) -> int:
        """Local id of ``key``, or -1. O(log n) after the keys are decoded once."""
        keys = self.keys()
        position = int(np.searchsorted(keys, key))
        return position if position < keys.shape[0] and keys[position] == key else -1

    def field_index(self) -> FieldIndex:
        """The field indexes of this segment (:mod:`weftsearch.storage.fields`), once per reader.

        Read from the ``fld.*`` sections when the file has them (checked
        structurally before use); a file written before they existed has its
        index derived from the stored records once, on first use (O(documents),
        then memoised for the reader's life); there a damaged record makes the
        segment's filters refuse (its fields are unknown), and scrub names it.

        Raises:
            CorruptIndexError: the ``fld.*`` sections are damaged.

        """

        def build() -> FieldIndex:
            if "fld.names" in self._file:
                return FieldIndex.from_sections(self._file.array, self.n_docs, str(self.path))
            fields: list[Mapping[str, Any]] = []
            for local in range(self.n_docs):
                raw = self._checked_record(local)
                if raw is None:
                    # Its fields are unknown: any mask built without them could be
                    # wrong for it, so filters on this segment are refused instead.
                    raise self._corrupt(
                        f"stored document {local} is damaged; its fields cannot be filtered on"
                    )
                try:
                    record = json.loads(raw)
                except (ValueError, RecursionError):
                    raise self._corrupt(f"stored document {local} is not valid JSON") from None
                found = record.get("fields") if isinstance(record, dict) else None
                if not isinstance(found, dict) or not all(is_field_value(v) for v in found.values()):
                    raise self._corrupt(f"stored document {local} has no valid fields")
                fields.append(found)
            try:
                return FieldIndex.build(fields)
            except FieldTypeError:
                # Older writers let a field change type between documents; such
                # a segment filters on the first type seen and skips the others.
                return FieldIndex.build(first_type_only(fields))

        result: FieldIndex = self._memo("fields", build)
        return result

    def _field_problems(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        """The ``fld.*`` sections checked against ``records`` (every document's stored fields).

        Like the block metadata, the field index is derived data: scrub builds
        it again from the stored records, as the writer did, and names the file
        when the two differ, which no checksum can notice in a re-checksummed
        edit (structural checks first, afresh: :meth:`field_index` trusts its
        once-per-reader check).
        """
        stored = FieldIndex.from_sections(self._file.array, self.n_docs, str(self.path))
        try:
            derived = FieldIndex.build(records)
        except FieldTypeError:  # as an older writer indexed a field that changed type
            derived = FieldIndex.build(first_type_only(records))
        return [
            f"{self.path}: field index disagrees with the stored records: {what}"
            for what in stored.disagreements(derived)
        ]

    def _postings_problems(self) -> list[str]:
        """The postings of this reader's text field: every checksum, decode, block table and term order."""
        problems: list[str] = []
        try:
            _, _, _, crcs = self._term_tables()
            _, _, data_offsets = self._packed_tables()
            words = self._file.array("post.data")
            for position in range(self.n_terms):
                start, end = int(data_offsets[position]), int(data_offsets[position + 1])
                if checksum(words[start:end].tobytes()) != int(crcs[position]):
                    problems.append(f"{self.path}: postings of term {position} fail their checksum")
            self.all_postings()
            try:  # re-derived from the postings and lengths: a bound that understates is named here
                problems.extend(self._block_problems())
            except CorruptIndexError as exc:
                problems.append(str(exc))
            terms = self.terms()
            if any(earlier >= later for earlier, later in itertools.pairwise(terms)):
                # Lookups binary-search the table: out of order, they could miss a term.
                problems.append(f"{self.path}: terms are not in strictly increasing order")
            for term in terms:
                try:
                    self.postings(term)  # checksum and ranges, as a query reads them
                    if self.has_positions:
                        self.positions(term)
                except CorruptIndexError as exc:
                    problems.append(str(exc))
        except WeftError as exc:
            problems.append(str(exc))
        return problems

    def verify(self) -> list[str]:
        """Every checksum and structural rule of the segment; one message per problem."""
        problems = self._file.verify()
        if problems:
            return problems
        try:
            self._strings("keys", self.n_docs)  # afresh: keys_at trusts its once-per-reader check
            self.keys()
            self.doc_lengths()
            self.times()
            self.vector_rows()
            self.vector_lists()
            problems.extend(self._postings_problems())
            for name in self.text_field_names[1:]:
                view = self.text_field(name)
                assert isinstance(view, SegmentReader)
                problems.extend(view._postings_problems())
            self.all_links()
            problems.extend(self.stored_block_problems())
            records: list[Mapping[str, Any]] | None = []
            for local in range(self.n_docs):
                document = self.document(local)
                if document is None:
                    problems.append(f"{self.path}: stored document {local} is damaged")
                    records = None  # already named; the field index cannot be re-derived
                elif records is not None:
                    records.append(document.fields)
            if records is not None and "fld.names" in self._file:
                problems.extend(self._field_problems(records))
        except WeftError as exc:
            problems.append(str(exc))
        return problems


@runtime_checkable
class TextFieldReader(Protocol):
    """One text field of a segment: its terms, postings and lengths (docs/FORMAT.md, "Text fields").

    :meth:`SegmentReader.text_field` gives one; the segment reader itself is
    the default field's (``"text"``).
    """

    @property
    def field_name(self) -> str:
        """The field's name."""
        ...

    @property
    def n_docs(self) -> int:
        """Documents of the segment (every field has a length for each, 0 where absent)."""
        ...

    def postings(self, term: str) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
        """Local ids (ascending) and term frequencies of ``term`` in this field; empty if absent."""
        ...

    def terms(self) -> list[str]:
        """The field's terms, ascending."""
        ...

    def terms_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """The field's terms starting with ``prefix``, ascending, at most ``limit + 1``."""
        ...

    def doc_lengths(self) -> NDArray[np.uint32]:
        """Each document's analysed length in this field."""
        ...

    @property
    def has_positions(self) -> bool:
        """Whether the field keeps its terms' positions."""
        ...

    def positions(
        self, term: str
    ) -> tuple[NDArray[np.uint32], NDArray[np.uint32], NDArray[np.uint64], NDArray[np.uint32]]:
        """``(ids, tfs, starts, positions)`` of ``term`` (posting j: ``positions[starts[j]:starts[j+1]]``)."""
        ...


class _PrefixedFile:
    """A segment's section file seen by one named text field: its sections under ``tf.N.``, the rest as is."""

    __slots__ = ("_file", "_prefix")

    def __init__(self, file: SectionFile, prefix: str) -> None:
        self._file = file
        self._prefix = prefix

    def _name(self, name: str) -> str:
        return self._prefix + name if name.startswith(_FIELD_SECTIONS) else name

    def array(self, name: str) -> NDArray[np.generic]:
        return self._file.array(self._name(name))

    def raw(self, name: str) -> memoryview:
        return self._file.raw(self._name(name))

    def count(self, name: str) -> int:
        return self._file.count(self._name(name))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._name(name) in self._file

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


class _FieldView(SegmentReader):
    """A named text field of a segment, read with the default field's code over its ``tf.N.`` sections.

    Shares the segment's file (no second map); its caches (term lookups,
    decoded postings, verdicts of the first-use checks) are its own. The
    segment's reader checked the sections' element counts at open.
    """

    def __init__(self, segment: SegmentReader, entry: Mapping[str, Any], prefix: str) -> None:
        self.path = segment.path
        self._file = _PrefixedFile(segment.section_file, prefix)  # type: ignore[assignment]
        self._lock = threading.RLock()
        self._cache = {}
        self._verified_postings = {}
        self._verified_blocks = {}
        self._tables_trusted = segment._tables_trusted
        self._decoded = {}
        self._decoded_postings = 0
        self._term_cache = {}
        meta = dict(segment._meta_cache)
        meta.update({key: entry[key] for key in ("terms", "postings", "blocks", "words")})
        meta.pop("text_fields", None)
        meta.pop("positions", None)
        if "positions" in entry:
            meta["positions"] = entry["positions"]
        self._meta_cache = meta
        self._name = str(entry["name"])
        self.n_docs = segment.n_docs
        self.n_terms = int(entry["terms"])
        self.vector_dim = segment.vector_dim
        self.n_vectors = segment.n_vectors

    def _corrupt(self, what: str) -> CorruptIndexError:
        return CorruptIndexError(f"{self.path}: text field {self._name!r}: {what}")

    @property
    def field_name(self) -> str:
        """The field's name."""
        return self._name

    @property
    def text_field_names(self) -> tuple[str, ...]:
        """Only the field's own name (a view has no fields of its own)."""
        return (self._name,)

    def text_field(self, name: str) -> TextFieldReader:
        """The view itself, for its own name.

        Raises:
            KeyError: any other name.

        """
        if name != self._name:
            raise KeyError(f"{self.path}: a text field view reads {self._name!r} only, not {name!r}")
        return self
