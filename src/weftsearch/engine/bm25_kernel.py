"""BM25 top-k in one compiled call per query, with block-max early termination (``_bm25.c``).

The BM25 scorer's numpy path (:mod:`weftsearch.scorers.bm25`) reads every
posting of every query term. This path walks the same postings straight from
the segments (no copy, no per-term cache) in a C library loaded with ctypes,
skips the blocks of 128 postings that cannot reach the current k-th score
(block-max MaxScore, see ``_bm25.c``), and releases the GIL while it runs, so
searches in threads overlap. Scores are the numpy path's to the bit (same
float64 operations in the same order; :func:`compiled_bm25` checks it on
load) and every document tied with the k-th score is returned, so the caller
applies the key tie rule exactly as before.

Block metadata (per block: last local id, largest tf, smallest document
length) is written by the segment writer (``post.block_offsets``,
``post.blocks``; docs/FORMAT.md, "Block metadata") and read here as a view of
the segment file: no per-term arrays are derived or held. It does not depend
on k1, b or the snapshot, so one stored table serves every scorer. The reader
checks each term's stored blocks against its postings the first time the term
is read (:meth:`~weftsearch.storage.segment.SegmentReader.term_blocks`), so a
bound that understates, even in a crafted file with every checksum valid,
fails the query instead of pruning a document that belongs in the top k. The
C derivation (``weft_bm25_blocks``) stays as the oracle of the self-check and
the tests.

The compiled path is optional: where the library was not built, where
:data:`DISABLE_VARIABLE` is set, or where its self-check disagrees with numpy
in any bit, :func:`compiled_bm25` returns ``None`` and the scorer uses numpy.
"""

from __future__ import annotations

import collections
import ctypes
import importlib.machinery
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import top_k
from weftsearch.errors import CorruptIndexError
from weftsearch.storage.postings import BLOCK_ROWS, pack_postings
from weftsearch.storage.segment import POSTINGS_BLOCK, SegmentReader

__all__ = [
    "BLOCK",
    "CompiledBM25",
    "BLOCK_CACHE_TERMS",
    "DISABLE_VARIABLE",
    "KernelStats",
    "QueryLists",
    "compiled_bm25",
    "compiled_bm25_available",
    "derive_blocks",
    "gather",
    "search",
]

#: Set to ``1`` to turn the compiled BM25 off (the numpy path computes the same results).
DISABLE_VARIABLE = "WEFTSEARCH_NO_COMPILED_BM25"

#: Postings per block (fixed in ``_bm25.c`` as WEFT_BLOCK, and in the segment format as
#: :data:`~weftsearch.storage.segment.POSTINGS_BLOCK`). 128 is what Lucene and PISA
#: use: small enough that a block's bound is tight (one long or high-tf document
#: loosens the bound of only 127 neighbours), large enough that the metadata is under
#: 0.1 byte per posting and a window's bookkeeping is amortised over many postings.
BLOCK = POSTINGS_BLOCK

#: Terms whose lists (views of the file and their addresses) one segment reader keeps;
#: past it the oldest entry is dropped (first in, first out). One entry is about 400
#: bytes of Python objects (the arrays are views of the map), so a segment's cache stays
#: under about 26 MB.
BLOCK_CACHE_TERMS = 65_536

#: Terms whose lists (descriptors and live document counts) one snapshot remembers;
#: past it the oldest is dropped. An entry is about 300 bytes plus 64 per segment.
_SNAPSHOT_TERMS = 65_536

#: Multiplies every block bound: 1.0. Tests set it below 1 to break the bound on
#: purpose and check that the equivalence tests notice; nothing else may change it.
_BOUND_SCALE = 1.0

_POINTER = ctypes.c_void_p
_INT = ctypes.c_int64
_DOUBLE = ctypes.c_double

#: int64 fields of one list descriptor and one part descriptor (see ``_bm25.c``).
_LIST_FIELDS = 8
_PART_FIELDS = 4


@dataclass(frozen=True, slots=True)
class KernelStats:
    """What one compiled query read (for benchmarks; the scores never depend on it).

    Attributes:
        blocks: blocks of 128 postings in the query terms' lists.
        blocks_scored: blocks in which at least one posting was scored (the
            others were skipped whole or only had ids compared).
        postings: postings in the query terms' lists (deleted documents included).
        postings_scored: postings whose contribution was computed.
        documents_scored: documents whose full score was computed.

    """

    blocks: int
    blocks_scored: int
    postings: int
    postings_scored: int
    documents_scored: int


# --------------------------------------------------------------------------- the library


def _library_path() -> Path | None:
    here = Path(__file__).resolve().parents[1]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = here / f"_bm25{suffix}"
        if candidate.is_file():
            return candidate
    return None


@dataclass(frozen=True, slots=True)
class CompiledBM25:
    """The loaded library's two functions (see ``_bm25.c``): ``weft_bm25_top_k`` and ``weft_bm25_blocks``."""

    top_k: Callable[..., int]
    blocks: Callable[..., int]


@cache
def compiled_bm25() -> CompiledBM25 | None:
    """The compiled BM25 functions, or ``None`` (the numpy path is used).

    ``None`` when turned off (:data:`DISABLE_VARIABLE`), when the library was
    not built (no C compiler at install time), or when a self-check on random
    postings (ties, deletions, two segments, k1 = 0 and b = 0 and 1) finds any
    result or score bit that differs from the numpy formula: the two paths
    must agree exactly, so a mismatch turns the fast one off rather than
    letting results depend on which ran.
    """
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return None
    path = _library_path()
    if path is None:
        return None
    try:
        library = ctypes.CDLL(str(path))
        top = library.weft_bm25_top_k
        blocks = library.weft_bm25_blocks
    except (OSError, AttributeError):
        return None
    # lists, n_lists, parts, n_parts, weights, m, k1, b, avgdl, k, bound_scale,
    # ids_out, scores_out, out_capacity, stats.
    top.argtypes = [_POINTER, _INT, _POINTER, _INT, _POINTER, _INT, _DOUBLE, _DOUBLE, _DOUBLE, _INT, _DOUBLE]
    top.argtypes += [_POINTER, _POINTER, _INT, _POINTER]
    top.restype = _INT
    blocks.argtypes = [_POINTER, _POINTER, _INT, _POINTER, _INT, _POINTER]
    blocks.restype = _INT
    bound = CompiledBM25(top, blocks)
    return bound if _agrees_with_numpy(bound) else None


def compiled_bm25_available() -> bool:
    """Whether BM25 top-k runs compiled (``False``: the numpy path, same results)."""
    return compiled_bm25() is not None


# --------------------------------------------------------------------------- block metadata


class _SegmentBlocks:
    """One segment reader's per-term lists for the kernel, bounded by :data:`BLOCK_CACHE_TERMS`."""

    __slots__ = ("lengths", "lock", "terms")

    def __init__(self, reader: SegmentReader) -> None:
        self.lengths: NDArray[np.uint32] = np.ascontiguousarray(reader.doc_lengths(), dtype=np.uint32)
        self.lock = threading.Lock()
        # term -> its packed words, block table and descriptor row, or None if absent
        self.terms: dict[str, _TermList | None] = {}


@dataclass(frozen=True, slots=True)
class _TermList:
    """One term in one segment: packed words and block table (views of the file), and the descriptor row.

    ``row``: (words address, words, postings, table address, blocks), the first five
    fields of ``_bm25.c``'s list descriptor. ``reader``: where the term lives (named in errors).
    """

    data: NDArray[np.uint32]
    meta: NDArray[np.uint32]
    row: tuple[int, int, int, int, int]
    reader: SegmentReader
    term: str


_READERS: weakref.WeakKeyDictionary[SegmentReader, _SegmentBlocks] = weakref.WeakKeyDictionary()
_READERS_LOCK = threading.Lock()


def _segment_blocks(reader: SegmentReader) -> _SegmentBlocks:
    found = _READERS.get(reader)
    if found is None:
        with _READERS_LOCK:
            found = _READERS.get(reader)
            if found is None:
                found = _SegmentBlocks(reader)
                _READERS[reader] = found
    return found


def _term_list(
    library: CompiledBM25, reader: SegmentReader, blocks: _SegmentBlocks, term: str
) -> _TermList | None:
    """The term's packed postings in this segment with their stored block table; None if absent.

    Both are views of the segment file, checked by the reader the first time
    the term is read (checksum, a full decode with every range check, and the
    table against a derivation from the decoded postings: O(df) once per
    segment and term). The kernel decodes a block only when it scores it.
    """
    try:
        return blocks.terms[term]
    except KeyError:
        pass
    packed = reader.term_packed(term)
    entry: _TermList | None = None
    if packed is not None and packed[2]:
        words, stored, count = packed
        data = np.ascontiguousarray(words, dtype=np.uint32)  # '<u4' views of the map: no copy
        meta = np.ascontiguousarray(stored, dtype=np.uint32)
        n_blocks = (count + BLOCK - 1) // BLOCK
        if (
            meta.shape[0] != BLOCK_ROWS * n_blocks
        ):  # the reader checks it; the kernel would read past the table
            raise CorruptIndexError(f"{reader.path}: block metadata of term {term!r} has the wrong size")
        # An empty run has no address of its own: any valid one will do (nothing is read).
        address = data.ctypes.data if data.shape[0] else meta.ctypes.data
        entry = _TermList(
            data, meta, (address, data.shape[0], count, meta.ctypes.data, n_blocks), reader, term
        )
    with blocks.lock:
        if term not in blocks.terms and len(blocks.terms) >= BLOCK_CACHE_TERMS:
            del blocks.terms[next(iter(blocks.terms))]
        blocks.terms[term] = entry
    return entry


def derive_blocks(
    library: CompiledBM25, ids: NDArray[np.uint32], tfs: NDArray[np.uint32], lengths: NDArray[np.uint32]
) -> NDArray[np.uint32]:
    """One list's block metadata derived by ``_bm25.c`` (``weft_bm25_blocks``), the stored one's oracle.

    ``ids`` (< ``len(lengths)``) and ``tfs`` are one term's postings in one
    segment; returns ``3 * ceil(len(ids) / 128)`` uint32 laid out as
    ``post.blocks`` lays a term out (version 3: four rows, widths last). O(len(ids)).

    Raises:
        ValueError: an id is past ``lengths``.

    """
    ids = np.ascontiguousarray(ids, dtype=np.uint32)
    tfs = np.ascontiguousarray(tfs, dtype=np.uint32)
    lengths = np.ascontiguousarray(lengths, dtype=np.uint32)
    meta = np.empty(BLOCK_ROWS * ((ids.shape[0] + BLOCK - 1) // BLOCK), dtype=np.uint32)
    if ids.shape[0]:
        code = library.blocks(
            ids.ctypes.data,
            tfs.ctypes.data,
            ids.shape[0],
            lengths.ctypes.data,
            lengths.shape[0],
            meta.ctypes.data,
        )
        if code != 0:
            raise ValueError("a posting names a document past the lengths, ids do not increase or a tf is 0")
    return meta


# --------------------------------------------------------------------------- one query


@dataclass(frozen=True, slots=True)
class _Parts:
    """A snapshot's segments as the kernel reads them (built once per snapshot).

    ``rows``: per part, (address of its internal-id map or 0, base, local documents).
    """

    rows: tuple[tuple[int, int, int], ...]
    keep: tuple[Any, ...]
    blocks: tuple[_SegmentBlocks, ...]


def _parts(snapshot: Snapshot) -> _Parts:
    def build() -> _Parts:
        rows: list[tuple[int, int, int]] = []
        keep: list[Any] = []
        segment_blocks: list[_SegmentBlocks] = []
        for part in snapshot.parts:
            blocks = _segment_blocks(part.reader)
            n_docs = int(part.reader.n_docs)
            if blocks.lengths.shape[0] != n_docs:
                from weftsearch.errors import CorruptIndexError

                raise CorruptIndexError(
                    f"{part.reader.path}: document lengths disagree with the document count"
                )
            to_global = 0
            if part.deleted is not None:
                mapping = np.ascontiguousarray(
                    part.to_global(np.arange(n_docs, dtype=np.int64)), dtype=np.int64
                )
                keep.append(mapping)
                to_global = mapping.ctypes.data
            rows.append((to_global, part.base, n_docs))
            segment_blocks.append(blocks)
        return _Parts(tuple(rows), tuple(keep), tuple(segment_blocks))

    return snapshot.memo(("bm25_kernel", "parts"), build)


def _part_table(
    snapshot: Snapshot, k1: float, b: float, avgdl: float
) -> tuple[NDArray[np.int64], tuple[Any, ...]]:
    """The part descriptors for ``_bm25.c`` with each segment's length norms for (k1, b).

    A norm is ``k1 * (1 - b + b * len / avgdl)``, the numpy path's expression
    elementwise (so the same bits), over every local document of the segment:
    8 bytes per document per (k1, b) used on the snapshot, computed once, O(N).
    """

    def build() -> tuple[NDArray[np.int64], tuple[Any, ...]]:
        parts = _parts(snapshot)
        norms = [
            np.ascontiguousarray(k1 * (1.0 - b + b * blocks.lengths.astype(np.float64) / avgdl))
            for blocks in parts.blocks
        ]
        rows = [(norm.ctypes.data, *row) for norm, row in zip(norms, parts.rows, strict=True)]
        table = np.array(rows, dtype=np.int64).reshape(len(rows), _PART_FIELDS)
        return table, (parts, *norms)

    return snapshot.memo(("bm25_kernel", "norms", k1, b, avgdl), build)


@dataclass(frozen=True, slots=True)
class QueryLists:
    """A query's postings lists on one snapshot, ready for :func:`search`.

    Attributes:
        doc_freq: int64 live documents holding each term (in the order given
            to :func:`gather`), tombstones excluded.
        table: int64 ``(lists, 8)`` list descriptors for ``_bm25.c``, part by
            part, ascending term within a part.
        keep: the arrays the descriptors point into (kept alive with them).

    """

    doc_freq: NDArray[np.int64]
    table: NDArray[np.int64]
    keep: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _SnapshotTerm:
    """One term across a snapshot's segments: its list rows (term column 0), live documents, owners."""

    rows: NDArray[np.int64]
    doc_freq: int
    keep: tuple[_TermList, ...]


def _snapshot_term(library: CompiledBM25, snapshot: Snapshot, parts: _Parts, term: str) -> _SnapshotTerm:
    """The term's lists in every segment of the snapshot, and its live document count. O(segments + df)."""
    rows: list[tuple[int, ...]] = []
    keep: list[_TermList] = []
    doc_freq = 0
    for index, (part, blocks) in enumerate(zip(snapshot.parts, parts.blocks, strict=True)):
        entry = _term_list(library, part.reader, blocks, term)
        if entry is None:
            continue
        count = entry.row[2]
        if part.deleted is not None:
            ids, _ = part.reader.postings(term)  # decoded (checked already by term_packed)
            count -= int(np.count_nonzero(part.deleted[ids]))
        doc_freq += count
        rows.append((*entry.row, 0, index, 0))
        keep.append(entry)
    table = np.array(rows, dtype=np.int64).reshape(len(rows), _LIST_FIELDS)
    table.setflags(write=False)
    return _SnapshotTerm(table, doc_freq, tuple(keep))


def gather(library: CompiledBM25, snapshot: Snapshot, terms: Sequence[str]) -> QueryLists:
    """The postings lists of ``terms`` (distinct, sorted) in every segment of ``snapshot``.

    O(terms) dictionary lookups plus O(lists) numpy work for terms seen
    before on this snapshot (remembered for up to :data:`_SNAPSHOT_TERMS`
    terms, first in, first out; each entry holds its lists' descriptors, so a
    many-segment snapshot costs no more Python per term than a one-segment
    one). The first use of a term reads and checks its postings and their
    stored block metadata in each segment and counts its live documents:
    O(segments + df).
    """
    parts = _parts(snapshot)
    cache: dict[str, _SnapshotTerm] = snapshot.memo(("bm25_kernel", "terms"), dict)
    found: list[_SnapshotTerm] = []
    for term in terms:
        entry = cache.get(term)
        if entry is None:
            entry = _snapshot_term(library, snapshot, parts, term)
            with _READERS_LOCK:
                if term not in cache and len(cache) >= _SNAPSHOT_TERMS:
                    del cache[next(iter(cache))]
                cache[term] = entry
        found.append(entry)
    doc_freq = np.array([entry.doc_freq for entry in found], dtype=np.int64)
    if not found:
        return QueryLists(doc_freq, np.empty((0, _LIST_FIELDS), np.int64), (parts,))
    table = np.concatenate([entry.rows for entry in found])  # a new array: the cached rows stay as they are
    table[:, 5] = np.repeat(np.arange(len(found), dtype=np.int64), [entry.rows.shape[0] for entry in found])
    if len(found) > 1 and len(snapshot.parts) > 1:
        # Grouped by segment; the stable sort keeps ascending terms within one (terms come sorted).
        table = table[np.argsort(table[:, 6], kind="stable")]
    return QueryLists(doc_freq, table, (parts, *found))


class _Scratch(threading.local):
    """Each thread's result buffers, grown on demand, with their addresses."""

    def __init__(self) -> None:
        self.capacity = 0
        self.ids = np.empty(0, dtype=np.int64)
        self.scores = np.empty(0, dtype=np.float64)
        self.stats = np.zeros(5, dtype=np.int64)
        self.stats_address = self.stats.ctypes.data
        self.reserve(256)

    def reserve(self, results: int) -> None:
        if results > self.capacity:
            self.capacity = max(results, 2 * self.capacity)
            self.ids = np.empty(self.capacity, dtype=np.int64)
            self.scores = np.empty(self.capacity, dtype=np.float64)
            self.ids_address = self.ids.ctypes.data
            self.scores_address = self.scores.ctypes.data


_scratch = _Scratch()


#: Filter masks whose per-segment id maps a snapshot keeps for the kernel (least recently
#: used dropped first); each map is 8 bytes per document of its segment.
FILTER_MAPS = 8

_filter_maps_lock = threading.Lock()


def _filtered_maps(snapshot: Snapshot, allowed: NDArray[np.bool_]) -> list[NDArray[np.int64]]:
    """Per segment, the internal id of each local document, ``-1`` where it is deleted or filtered out.

    The kernel skips a document whose map entry is negative exactly as it
    skips a deleted one, so a filter costs nothing in the traversal itself:
    the bounds stay upper bounds and only allowed documents reach the top k.
    O(N) to build, once per snapshot and filter mask (a small LRU keyed by the
    mask, which the snapshot's own filter cache keeps alive).
    """
    cache: collections.OrderedDict[int, tuple[weakref.ref[NDArray[np.bool_]], list[NDArray[np.int64]]]]
    cache = snapshot.memo(("bm25_kernel", "filter maps"), collections.OrderedDict)
    key = id(allowed)
    with _filter_maps_lock:
        entry = cache.get(key)
        if entry is not None and entry[0]() is allowed:
            cache.move_to_end(key)
            return entry[1]
    maps = []
    for part in snapshot.parts:
        n_docs = int(part.reader.n_docs)
        internal = part.to_global(np.arange(n_docs, dtype=np.int64))
        live = internal >= 0
        keep = np.zeros(n_docs, dtype=np.bool_)
        keep[live] = allowed[internal[live]]
        maps.append(np.ascontiguousarray(np.where(keep, internal, -1), dtype=np.int64))
    with _filter_maps_lock:
        cache[key] = (weakref.ref(allowed), maps)
        while len(cache) > FILTER_MAPS:
            cache.popitem(last=False)
    return maps


def search(
    library: CompiledBM25,
    snapshot: Snapshot,
    lists: QueryLists,
    weights: NDArray[np.float64],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    allowed: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.float64], KernelStats]:
    """The ``k`` best documents of the query, canonical order (score descending, key ascending).

    ``weights``: float64 ``qtf * idf`` of each term, in :func:`gather`'s term
    order; ``avgdl`` > 0 as the numpy path uses it. The threshold carries
    from segment to segment inside the one call. Runs without the GIL.

    ``allowed`` (a filter's mask over internal ids, or ``None``): only those
    documents can enter the top k (see :func:`_filtered_maps`).

    Complexity: O(lists + windows * terms + scored postings * log k); blocks
    whose bound cannot reach the running k-th score are not read.

    Raises:
        MemoryError: the library could not allocate its working memory.

    """
    table = lists.table
    parts, _ = _part_table(snapshot, k1, b, avgdl)
    maps: list[NDArray[np.int64]] = []
    if allowed is not None:
        # The filter as id maps: filtered-out documents are skipped like deleted ones.
        maps = _filtered_maps(snapshot, allowed)
        parts = parts.copy()
        parts[:, 1] = [mapping.ctypes.data for mapping in maps]
    if not (weights.dtype == np.float64 and weights.flags.c_contiguous):
        weights = np.ascontiguousarray(weights, dtype=np.float64)
    scratch = _scratch
    while True:
        kept = library.top_k(
            table.ctypes.data,
            table.shape[0],
            parts.ctypes.data,
            parts.shape[0],
            weights.ctypes.data,
            weights.shape[0],
            k1,
            b,
            avgdl,
            k,
            _BOUND_SCALE,
            scratch.ids_address,
            scratch.scores_address,
            scratch.capacity,
            scratch.stats_address,
        )
        if kept == -1:
            raise MemoryError("the BM25 kernel could not allocate its working memory")
        if kept == -3:
            raise _corrupt_list(lists, int(scratch.stats[0]))
        if kept < 0:
            raise ValueError(f"the BM25 kernel refused its arguments (code {kept})")  # a bug on this side
        if kept <= scratch.capacity:
            break
        scratch.reserve(kept)  # more ties than room: run again (the same result, now written)
    stats = KernelStats(*scratch.stats.tolist())
    ids = scratch.ids[:kept].copy()
    scores = scratch.scores[:kept].copy()
    if snapshot.ids_follow_keys or kept <= 1:
        # One segment: id order is key order, so the kernel's order is already canonical.
        return ids[:k], scores[:k], stats
    found_ids, found_scores = top_k(ids, scores, k, snapshot)
    return found_ids, found_scores.astype(np.float64, copy=False), stats


def _corrupt_list(lists: QueryLists, index: int) -> CorruptIndexError:
    """The error for list ``index`` of ``lists.table``, which ``_bm25.c`` found corrupt (code -3)."""
    address = int(lists.table[index, 0]) if 0 <= index < lists.table.shape[0] else -1
    for found in lists.keep:
        for entry in getattr(found, "keep", ()):
            if isinstance(entry, _TermList) and entry.row[0] == address:
                return CorruptIndexError(
                    f"{entry.reader.path}: packed postings of term {entry.term!r} do not decode"
                    " (the block table disagrees with the data)"
                )
    return CorruptIndexError("packed postings of a query term do not decode")


# --------------------------------------------------------------------------- the self-check


def _agrees_with_numpy(library: CompiledBM25) -> bool:
    """Random two-segment postings with ties and deletions: the kernel against the formula, every bit."""
    rng = np.random.default_rng(0)
    for k1, b in ((1.2, 0.75), (0.0, 1.0), (2.0, 0.0), (0.5, 0.3)):
        n_docs = (700, 300)
        deleted = rng.random(n_docs[0]) < 0.1
        lengths = [rng.integers(1, 5, n).astype(np.uint32) * 10 for n in n_docs]  # few lengths: many ties
        to_global = np.full(n_docs[0], -1, dtype=np.int64)
        to_global[~deleted] = np.arange(int((~deleted).sum()), dtype=np.int64)
        live0 = int((~deleted).sum())
        total_docs = live0 + n_docs[1]
        all_lengths = np.concatenate([lengths[0][~deleted], lengths[1]]).astype(np.float64)
        avgdl = float(all_lengths.sum() / total_docs)
        local_norms = [k1 * (1.0 - b + b * lengths[part].astype(np.float64) / avgdl) for part in range(2)]
        terms = 4
        postings: list[list[tuple[NDArray[np.uint32], NDArray[np.uint32]]]] = []
        for part in range(2):
            per_term = []
            for term in range(terms):
                ids = np.flatnonzero(rng.random(n_docs[part]) < (0.6, 0.3, 0.05, 0.002)[term]).astype(
                    np.uint32
                )
                tfs = rng.integers(1, 4, ids.shape[0]).astype(np.uint32)
                if term == 0 and ids.shape[0]:
                    tfs[::7] = rng.integers(1, 1 << 20, tfs[::7].shape[0])  # wide tf runs too
                per_term.append((ids, tfs))
            postings.append(per_term)
        packed = []
        for part in range(2):
            per_term_packed = []
            for ids, tfs in postings[part]:
                offsets = np.array([0, ids.shape[0]], dtype=np.uint64)
                pack = pack_postings(ids, tfs, offsets, lengths[part])
                meta = pack.blocks
                if ids.shape[0]:
                    oracle = np.empty_like(meta)
                    library.blocks(
                        ids.ctypes.data,
                        tfs.ctypes.data,
                        ids.shape[0],
                        lengths[part].ctypes.data,
                        n_docs[part],
                        oracle.ctypes.data,
                    )
                    if oracle.tobytes() != meta.tobytes():
                        return False
                per_term_packed.append((ids.shape[0], pack.data, meta))
            packed.append(per_term_packed)
        weights = rng.integers(1, 3, terms).astype(np.float64) * 1.5
        # The numpy formula, term by term in term order.
        norm = k1 * (1.0 - b + b * all_lengths / avgdl)
        total = np.zeros(total_docs, dtype=np.float64)
        matched = np.zeros(total_docs, dtype=bool)
        for term in range(terms):
            for part in range(2):
                ids, tfs = postings[part][term]
                glob = to_global[ids] if part == 0 else ids.astype(np.int64) + live0
                alive = glob >= 0
                glob, tf = glob[alive], tfs[alive].astype(np.float64)
                np.add.at(total, glob, tf * (k1 + 1.0) / (tf + norm[glob]) * weights[term])
                matched[glob] = True
        want_ids = np.flatnonzero(matched)
        want_scores = total[want_ids]
        order = np.lexsort((want_ids, -want_scores))
        want_ids, want_scores = want_ids[order], want_scores[order]
        rows = [
            (
                data.ctypes.data if data.shape[0] else meta.ctypes.data,
                data.shape[0],
                count,
                meta.ctypes.data,
                meta.shape[0] // BLOCK_ROWS,
                term,
                part,
                0,
            )
            for part in range(2)
            for term, (count, data, meta) in enumerate(packed[part])
            if count
        ]
        table = np.array(rows, dtype=np.int64)
        parts = np.array(
            [
                (local_norms[0].ctypes.data, to_global.ctypes.data, 0, n_docs[0]),
                (local_norms[1].ctypes.data, 0, live0, n_docs[1]),
            ],
            dtype=np.int64,
        )
        capacity = total_docs
        out_ids = np.empty(capacity, dtype=np.int64)
        out_scores = np.empty(capacity, dtype=np.float64)
        stats = np.zeros(5, dtype=np.int64)
        for k in (1, 5, 40, capacity):
            inputs = (table.ctypes.data, table.shape[0], parts.ctypes.data, 2, weights.ctypes.data, terms)
            outputs = (out_ids.ctypes.data, out_scores.ctypes.data, capacity, stats.ctypes.data)
            kept = library.top_k(*inputs, k1, b, avgdl, k, 1.0, *outputs)
            if kept < min(k, want_ids.shape[0]):
                return False
            kth = want_scores[min(k, want_scores.shape[0]) - 1]
            expected = int(np.count_nonzero(want_scores >= kth))
            if kept != expected:
                return False
            if out_ids[:kept].tobytes() != want_ids[:kept].tobytes():
                return False
            if out_scores[:kept].tobytes() != want_scores[:kept].tobytes():
                return False
    return True


# --------------------------------------------------------------------------- many queries


@cache
def _top_k_many() -> Callable[..., int] | None:
    """``weft_bm25_top_k_batch`` of the loaded library, or ``None`` (no compiled BM25, or an older build).

    An older build's ``weft_bm25_top_k_many`` summed its statistics over the batch; it is
    not used (each query of a batch then goes through :func:`search`, same results), so
    a query's statistics are always its own.
    """
    if compiled_bm25() is None:
        return None
    path = _library_path()
    if path is None:
        return None
    try:
        function = ctypes.CDLL(str(path)).weft_bm25_top_k_batch
    except (OSError, AttributeError):
        return None
    # lists, list_starts, parts, n_parts, weights, weight_starts, n_queries, k1, b, avgdl, k,
    # bound_scale, ids_out, scores_out, out_capacity, counts_out, written, stats.
    function.argtypes = [_POINTER, _POINTER, _POINTER, _INT, _POINTER, _POINTER, _INT]
    function.argtypes += [_DOUBLE, _DOUBLE, _DOUBLE, _INT, _DOUBLE, _POINTER, _POINTER, _INT]
    function.argtypes += [_POINTER, _POINTER, _POINTER]
    function.restype = _INT
    return function


def search_many_available() -> bool:
    """Whether :func:`search_many` can run (the compiled library has its batch function)."""
    return _top_k_many() is not None


def search_many(
    library: CompiledBM25,
    snapshot: Snapshot,
    lists: Sequence[QueryLists],
    weights: Sequence[NDArray[np.float64]],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
) -> list[tuple[NDArray[np.int64], NDArray[np.float64], KernelStats]]:
    """:func:`search` for many queries in ONE compiled call (the GIL released for the whole batch).

    ``lists[i]`` and ``weights[i]`` are query ``i``'s, as :func:`search` takes
    them; each must have at least one list. Returns what :func:`search`
    returns for each query (ids, scores and that query's own statistics), to
    the bit: the C side calls the same routine per query. A query with more
    tied results than the batch left room for is run again alone through
    :func:`search`.

    Raises:
        MemoryError: the library could not allocate its working memory.
        RuntimeError: the library has no batch function (see :func:`search_many_available`).

    """
    function = _top_k_many()
    if function is None:
        raise RuntimeError("the compiled BM25 library has no weft_bm25_top_k_batch")
    count = len(lists)
    if count == 0:
        return []
    parts, _ = _part_table(snapshot, k1, b, avgdl)
    table = np.concatenate([query.table for query in lists])
    list_starts = np.zeros(count + 1, dtype=np.int64)
    np.cumsum([query.table.shape[0] for query in lists], out=list_starts[1:])
    weight_array = np.concatenate(weights).astype(np.float64, copy=False)
    weight_starts = np.zeros(count + 1, dtype=np.int64)
    np.cumsum([weight.shape[0] for weight in weights], out=weight_starts[1:])
    capacity = count * (k + 8)  # room for k results and a few ties each; more ties are run again
    ids = np.empty(capacity, dtype=np.int64)
    scores = np.empty(capacity, dtype=np.float64)
    counts = np.empty(count, dtype=np.int64)
    written = np.empty(count, dtype=np.int64)
    stats = np.zeros((count, 5), dtype=np.int64)  # one row per query
    code = function(
        table.ctypes.data,
        list_starts.ctypes.data,
        parts.ctypes.data,
        parts.shape[0],
        weight_array.ctypes.data,
        weight_starts.ctypes.data,
        count,
        k1,
        b,
        avgdl,
        k,
        _BOUND_SCALE,
        ids.ctypes.data,
        scores.ctypes.data,
        capacity,
        counts.ctypes.data,
        written.ctypes.data,
        stats.ctypes.data,
    )
    if code == -1:
        raise MemoryError("the BM25 kernel could not allocate its working memory")
    if code < 0:
        raise ValueError(f"the BM25 kernel refused its arguments (code {code})")  # a bug on this side
    canonical = snapshot.ids_follow_keys
    results: list[tuple[NDArray[np.int64], NDArray[np.float64], KernelStats]] = []
    start = 0
    rows = stats.tolist()
    for query, (kept, done) in enumerate(zip(counts.tolist(), written.tolist(), strict=True)):
        if not done:
            results.append(search(library, snapshot, lists[query], weights[query], k1, b, avgdl, k))
            continue
        query_stats = KernelStats(*rows[query])
        stop = start + kept
        # Slices of the batch's own arrays (nothing else holds them): no copy per query.
        query_ids, query_scores = ids[start:stop], scores[start:stop]
        start = stop
        if canonical or kept <= 1:
            results.append((query_ids[:k], query_scores[:k], query_stats))
        else:
            found_ids, found_scores = top_k(query_ids, query_scores, k, snapshot)
            results.append((found_ids, found_scores.astype(np.float64, copy=False), query_stats))
    return results
