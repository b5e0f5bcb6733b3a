"""A snapshot's postings as the BM25 kernel reads them: the lists of a query, the parts, the filters.

The BM25 scorer (:mod:`weftsearch.scorers.bm25`) scores through one compiled
kernel (:mod:`weftsearch.native.bm25`, block-max MaxScore over arrays); this
module lays a snapshot out for it. Each term searched on a snapshot gets its
descriptor rows once (its packed postings and block table in every segment,
views of the segment files, with its live document frequency and IDF), kept
with the snapshot; per query, :func:`plan` looks its terms up (a few integers
of set-up, no numpy array) and :func:`run` is one kernel call
(``weft_bm25_query``, which lays the rows out by segment itself) whose results
are already in canonical order unless two tie on a several-segment snapshot.
:func:`run_batch` is the batch (its set-up done once for all its queries), on
threads inside C. :func:`gather` and :func:`search` are the older
table-per-query interface (a library built before ``weft_bm25_query``).

Block metadata (per block: last local id, largest tf, smallest document
length) is written by the segment writer (``post.block_offsets``,
``post.blocks``; docs/FORMAT.md, "Block metadata"). It does not depend on k1,
b or the snapshot, so one stored table serves every scorer. The reader checks
each term's stored blocks against its postings the first time the term is
read (:meth:`~weftsearch.storage.segment.SegmentReader.term_blocks`), so a
bound that understates, even in a crafted file with every checksum valid,
fails the query instead of pruning a document that belongs in the top k.
"""

from __future__ import annotations

import array
import collections
import itertools
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import top_k
from weftsearch.errors import CorruptIndexError
from weftsearch.native import bm25 as kernel
from weftsearch.native.bm25 import BLOCK, LIST_FIELDS, PART_FIELDS, CompiledBM25, KernelStats
from weftsearch.scorers.bm25.idf import exact_idf, lucene_idf
from weftsearch.storage.postings import BLOCK_ROWS
from weftsearch.storage.segment import SegmentReader

__all__ = [
    "BLOCK_CACHE_TERMS",
    "BatchArrays",
    "FILTER_MAPS",
    "IMPACT_CACHE_POSTINGS",
    "PREPARED_QUERIES",
    "PreparedQueries",
    "QueryLists",
    "TermQuery",
    "gather",
    "plan",
    "plan_batch",
    "run",
    "run_batch",
    "run_kept",
    "run_planned",
    "search",
    "search_many",
]

#: Terms whose lists (views of the file and their addresses) one segment reader keeps;
#: past it the oldest entry is dropped (first in, first out). One entry is about 400
#: bytes of Python objects (the arrays are views of the map), so a segment's cache stays
#: under about 26 MB.
BLOCK_CACHE_TERMS = 65_536

#: Terms whose lists (descriptors and live document counts) one snapshot remembers;
#: past it the oldest is dropped. An entry is about 300 bytes plus 64 per segment.
_SNAPSHOT_TERMS = 65_536

#: Postings whose impact tables (:func:`plan`) one snapshot keeps per (k1, b, average
#: length): at 12 bytes a posting (a local id and a float64 impact) about 48 MB at most,
#: however many distinct terms are searched; past it the least recently used terms go.
#: SciFact's 5,183 documents hold about 0.5 million postings in all.
IMPACT_CACHE_POSTINGS = 4_000_000

#: Query texts whose one-call set-up (:class:`TermQuery`) one snapshot keeps per (k1, b,
#: average length) (:class:`PreparedQueries`); past it the oldest is dropped. An entry is
#: about 1 KB of Python objects for a ten-term query, so about 4 MB at most.
PREPARED_QUERIES = 4_096

#: Query texts longer than this (characters) are not kept: the key is the text itself.
PREPARED_TEXT_CHARS = 1_024

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
    fields of ``_bm25.c``'s list descriptor. ``path``: the segment file the term lives in
    (named in errors). Not the reader itself: this entry is cached in a weak-keyed map whose
    key is the reader, and a value holding its key strongly would keep every reader (and its
    open, mapped file) alive for ever.
    """

    data: NDArray[np.uint32]
    meta: NDArray[np.uint32]
    row: tuple[int, int, int, int, int]
    path: str
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


def _term_list(reader: SegmentReader, blocks: _SegmentBlocks, term: str) -> _TermList | None:
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
            data, meta, (address, data.shape[0], count, meta.ctypes.data, n_blocks), str(reader.path), term
        )
    with blocks.lock:
        if term not in blocks.terms and len(blocks.terms) >= BLOCK_CACHE_TERMS:
            del blocks.terms[next(iter(blocks.terms))]
        blocks.terms[term] = entry
    return entry


# --------------------------------------------------------------------------- one query


@dataclass(frozen=True, slots=True)
class _Parts:
    """A snapshot's segments as the kernel reads them (built once per snapshot).

    ``rows``: per part, (address of its internal-id map or 0, base, local documents);
    ``smallest``: the fewest documents of a part (0 without parts).
    """

    rows: tuple[tuple[int, int, int], ...]
    keep: tuple[Any, ...]
    blocks: tuple[_SegmentBlocks, ...]
    smallest: int = 0


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
        smallest = min((row[2] for row in rows), default=0)
        return _Parts(tuple(rows), tuple(keep), tuple(segment_blocks), smallest)

    return snapshot.memo(("bm25 lists", "parts"), build)


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
        # Every part's norms side by side in one array, each part's a view of it (the same
        # values, elementwise the same expression).
        sizes = [int(blocks.lengths.shape[0]) for blocks in parts.blocks]
        joined = np.empty(sum(sizes), dtype=np.float64)
        starts = np.cumsum([0, *sizes]).tolist()
        norms = []
        for at, blocks in enumerate(parts.blocks):
            view = joined[starts[at] : starts[at + 1]]
            view[...] = k1 * (1.0 - b + b * blocks.lengths.astype(np.float64) / avgdl)
            norms.append(view)
        rows = [(norm.ctypes.data, *row) for norm, row in zip(norms, parts.rows, strict=True)]
        table = np.array(rows, dtype=np.int64).reshape(len(rows), PART_FIELDS)
        return table, (parts, *norms)

    return snapshot.memo(("bm25 lists", "norms", k1, b, avgdl), build)


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
    """One term across a snapshot's segments: its list rows (term column 0), live documents, owners.

    ``address`` and ``n_rows``: where ``rows`` lies and how many there are (0 when
    the term is in no segment), the pair ``_bm25.c``'s ``weft_bm25_query`` takes per
    term. ``idf``: the term's IDF over this snapshot's own live documents
    (:attr:`Snapshot.n_docs`), so a query on it needs no IDF computation.
    """

    rows: NDArray[np.int64]
    doc_freq: int
    keep: tuple[_TermList, ...]
    address: int
    n_rows: int
    idf: float


def _snapshot_term(snapshot: Snapshot, parts: _Parts, term: str) -> _SnapshotTerm:
    """The term's lists in every segment of the snapshot, and its live document count. O(segments + df)."""
    rows: list[tuple[int, ...]] = []
    keep: list[_TermList] = []
    doc_freq = 0
    for index, (part, blocks) in enumerate(zip(snapshot.parts, parts.blocks, strict=True)):
        entry = _term_list(part.reader, blocks, term)
        if entry is None:
            continue
        count = entry.row[2]
        if part.deleted is not None:
            ids, _ = part.reader.postings(term)  # decoded (checked already by term_packed)
            count -= int(np.count_nonzero(part.deleted[ids]))
        doc_freq += count
        rows.append((*entry.row, 0, index, 0))
        keep.append(entry)
    table = np.array(rows, dtype=np.int64).reshape(len(rows), LIST_FIELDS)
    table.setflags(write=False)
    address = table.ctypes.data if len(rows) else 0
    idf = exact_idf(snapshot.n_docs, doc_freq)
    return _SnapshotTerm(table, doc_freq, tuple(keep), address, len(rows), idf)


def _terms(snapshot: Snapshot, parts: _Parts, terms: Sequence[str]) -> list[_SnapshotTerm]:
    """Each of ``terms``' :class:`_SnapshotTerm` on ``snapshot``, from its cache (built on first use)."""
    cache: dict[str, _SnapshotTerm] = snapshot.memo(("bm25 lists", "terms"), dict)
    found: list[_SnapshotTerm] = []
    for term in terms:
        entry = cache.get(term)
        if entry is None:
            entry = _snapshot_term(snapshot, parts, term)
            with _READERS_LOCK:
                if term not in cache and len(cache) >= _SNAPSHOT_TERMS:
                    del cache[next(iter(cache))]
                cache[term] = entry
        found.append(entry)
    return found


def gather(snapshot: Snapshot, terms: Sequence[str]) -> QueryLists:
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
    found = _terms(snapshot, parts, terms)
    doc_freq = np.array([entry.doc_freq for entry in found], dtype=np.int64)
    if not found:
        return QueryLists(doc_freq, np.empty((0, LIST_FIELDS), np.int64), (parts,))
    table = np.concatenate([entry.rows for entry in found])  # a new array: the cached rows stay as they are
    table[:, 5] = np.repeat(np.arange(len(found), dtype=np.int64), [entry.rows.shape[0] for entry in found])
    if len(found) > 1 and len(snapshot.parts) > 1:
        # Grouped by segment; the stable sort keeps ascending terms within one (terms come sorted).
        table = table[np.argsort(table[:, 6], kind="stable")]
    return QueryLists(doc_freq, table, (parts, *found))


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
    cache = snapshot.memo(("bm25 lists", "filter maps"), collections.OrderedDict)
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
    from segment to segment inside the one kernel call
    (:func:`weftsearch.native.bm25.top_k`). Runs without the GIL.

    ``allowed`` (a filter's mask over internal ids, or ``None``): only those
    documents can enter the top k (see :func:`_filtered_maps`).

    Complexity: O(lists + windows * terms + scored postings * log k); blocks
    whose bound cannot reach the running k-th score are not read.

    Raises:
        CorruptIndexError: a query term's packed postings do not decode (the term is named).
        MemoryError: the library could not allocate its working memory.

    """
    parts, _ = _part_table(snapshot, k1, b, avgdl)
    maps: list[NDArray[np.int64]] = []
    if allowed is not None:
        # The filter as id maps: filtered-out documents are skipped like deleted ones.
        maps = _filtered_maps(snapshot, allowed)
        parts = parts.copy()
        parts[:, 1] = [mapping.ctypes.data for mapping in maps]
    try:
        ids, scores, stats = kernel.top_k(library, lists.table, parts, weights, k1, b, avgdl, k)
    except kernel.CorruptListError as error:
        raise _corrupt_list(lists, error.index) from None
    return (*_canonical(snapshot, ids, scores, k), stats)


def _canonical(
    snapshot: Snapshot, ids: NDArray[np.int64], scores: NDArray[np.float64], k: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The kernel's results (every tie with the k-th, by score then internal id) as the ``k`` best by key."""
    if snapshot.ids_follow_keys or ids.shape[0] <= 1:
        # One segment: id order is key order, so the kernel's order is already canonical.
        if ids.shape[0] <= k:
            return ids, scores  # no ties past the k-th: the arrays as they are (no views)
        return ids[:k], scores[:k]
    cut = min(k, ids.shape[0])
    ordered = snapshot._ties_by_key(ids, scores, cut)
    if ordered is not None:  # compiled, every key involved checked before
        return ordered[:cut], scores[:cut].copy()
    if ids.shape[0] <= _CANONICAL_RUNS:
        return _canonical_runs(snapshot, ids, scores, k)
    found_ids, found_scores = top_k(ids, scores, k, snapshot)
    return found_ids, found_scores.astype(np.float64, copy=False)


#: Up to this many results (a search's top-k and its ties), :func:`_canonical` reorders only
#: the runs of equal scores (:func:`_canonical_runs`) instead of sorting every result again.
_CANONICAL_RUNS = 1024


def _canonical_runs(
    snapshot: Snapshot, ids: NDArray[np.int64], scores: NDArray[np.float64], k: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`_canonical` on several segments, by runs: each run of equal scores put in key order.

    The kernel's results are sorted by score descending, then internal id;
    the canonical order differs only inside a run of equal scores (the key
    decides there), so only the runs that start before the k-th result are
    reordered, by the keys of their members (one :meth:`Snapshot.keys_of`
    for all of them), and the first ``k`` kept: what
    :func:`~weftsearch.engine.stream.top_k` returns, without sorting the
    whole list twice. O(n) plus O(m log m) for the m members of those runs.
    """
    cut = min(k, ids.shape[0])
    # Positions i whose score equals the next one's: each run's members but its last.
    joined = np.flatnonzero(scores[1:] == scores[:-1]).tolist()
    runs: list[tuple[int, int]] = []
    for position in joined:
        if runs and runs[-1][1] == position + 1:  # the run goes on (past the k-th too)
            runs[-1] = (runs[-1][0], position + 2)
        elif position < cut:
            runs.append((position, position + 2))
        else:
            break
    if not runs:
        return ids[:cut].copy(), scores[:cut].copy()
    ordered = ids[: runs[-1][1]].tolist()
    members = [doc for start, end in runs for doc in ordered[start:end]]
    key_of = dict(zip(members, snapshot.keys_of(np.array(members, dtype=np.int64)), strict=True))
    for start, end in runs:
        ordered[start:end] = sorted(ordered[start:end], key=key_of.__getitem__)
    if len(ordered) < cut:  # the last run ends before the k-th: the rest as the kernel ordered it
        ordered.extend(ids[len(ordered) : cut].tolist())
    return np.array(ordered[:cut], dtype=np.int64), scores[:cut].copy()


def _corrupt_list(lists: QueryLists, index: int) -> CorruptIndexError:
    """The error for list ``index`` of ``lists.table``, which ``_bm25.c`` found corrupt (code -3)."""
    address = int(lists.table[index, 0]) if 0 <= index < lists.table.shape[0] else -1
    for found in lists.keep:
        for entry in getattr(found, "keep", ()):
            if isinstance(entry, _TermList) and entry.row[0] == address:
                return CorruptIndexError(
                    f"{entry.path}: packed postings of term {entry.term!r} do not decode"
                    " (the block table disagrees with the data)"
                )
    return CorruptIndexError("packed postings of a query term do not decode")


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
        RuntimeError: the library has no batch function
            (see :func:`weftsearch.native.bm25.top_k_batch_available`).

    """
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
    batch = kernel.top_k_batch(
        table, list_starts, parts, weight_array, weight_starts, k1, b, avgdl, k, capacity
    )
    results: list[tuple[NDArray[np.int64], NDArray[np.float64], KernelStats]] = []
    for query, (kept, done, start) in enumerate(zip(batch.counts, batch.written, batch.starts, strict=True)):
        if not done:
            results.append(search(library, snapshot, lists[query], weights[query], k1, b, avgdl, k))
            continue
        # Slices of the batch's own arrays (nothing else holds them): no copy per query.
        query_ids, query_scores = batch.ids[start : start + kept], batch.scores[start : start + kept]
        results.append((*_canonical(snapshot, query_ids, query_scores, k), batch.stats[query]))
    return results


# --------------------------------------------------------------------------- one call per query


class TermQuery(NamedTuple):
    """A query's set-up for ``weft_bm25_query``: per term its rows' address and count, and its weight.

    A named tuple: made once per query, it costs a third of a frozen dataclass.

    Attributes:
        terms: the distinct query terms in the kernel's term order (plain text: sorted;
            a tree's disjunction: its clause order).
        entries: each term's :class:`_SnapshotTerm` (keeps its rows alive; names a corrupt term).
        refs: int64 pairs (rows address, rows) per term, an :class:`array.array`.
        weights: float64 ``qtf * idf`` per term, an :class:`array.array`.
        matched: terms held by at least one live document of the snapshot.
        postings: live postings in the terms' lists (their document frequencies summed).
        lists: the terms' lists in the snapshot's segments (0: nothing to read).
        refs_at: the address of ``refs``' buffer, taken once (neither array changes after).
        weights_at: the address of ``weights``' buffer.
        held: the impact tables ``refs`` points into (kept alive while the query runs,
            whatever the cache evicts meanwhile).

    """

    terms: Sequence[str]
    entries: list[_SnapshotTerm]
    refs: array.array[int]
    weights: array.array[float]
    matched: int
    postings: int
    lists: int
    refs_at: int
    weights_at: int
    held: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)  # identity: `None in found` never calls __eq__
class _ImpactTerm:
    """One term's rows on a snapshot with their impact tables named (``_bm25.c``'s ``impacts`` field).

    ``entry``: the term's :class:`_SnapshotTerm` (document frequency, IDF, plain
    rows); ``tables``: the tables the rows point into (``weft_bm25_impacts``);
    ``ref``: the pair ``weft_bm25_query`` takes for the term (the rows' address,
    0 for a term in no segment, and their number) as 16 bytes, so a query joins
    its terms' pairs in one call; ``postings``: postings the tables hold plus
    one (what the cache counts against :data:`IMPACT_CACHE_POSTINGS`).
    """

    entry: _SnapshotTerm
    rows: NDArray[np.int64]
    tables: tuple[NDArray[np.int64], ...]
    ref: bytes
    postings: int


class PreparedQueries:
    """A map query text -> its set-up on one snapshot (what ``BM25Scorer`` passes :func:`run`), bounded.

    A repeated query's set-up (analysis, term look-up, :func:`plan`) is then
    one dictionary read: what a search does while it holds the GIL before
    the kernel call. Values are opaque to this class (the scorer stores its
    :class:`TermQuery` and distinct-term count). A look-up takes no lock;
    insertions do (first in, first out past :data:`PREPARED_QUERIES`). The
    :class:`_ImpactCache` of the same snapshot and parameters clears it
    whenever it evicts a term, so a kept set-up never pins impact tables
    past that cache's budget for long.
    """

    __slots__ = ("_lock", "entries", "hits", "parts")

    def __init__(self) -> None:
        # Ordered for its O(1) popitem(last=False): a plain dict's next(iter(...)) scans the
        # holes its first-in deletions leave, O(entries) an insertion once it is full.
        self.entries: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._lock = threading.Lock()
        #: The unfiltered part table for these (k1, b, avgdl), its address and rows (:func:`run_kept`).
        self.parts: tuple[NDArray[np.int64], int, int] | None = None
        #: The snapshot's hit verdict table, its address and rows ((0, 0): none), and the most
        #: postings a query may hold to run without releasing the GIL (:func:`run_kept`).
        self.hits: tuple[int, int, int] | None = None

    def put(self, text: str, value: object) -> None:
        """Keep ``value`` for ``text`` (not a text over :data:`PREPARED_TEXT_CHARS`), evicting the oldest."""
        self.put_many([(text, value)])

    def put_many(self, items: Iterable[tuple[str, object]]) -> None:
        """:meth:`put` of each ``(text, value)``, in order, under one hold of the lock."""
        entries = self.entries
        with self._lock:
            for text, value in items:
                if len(text) <= PREPARED_TEXT_CHARS:
                    entries[text] = value
            while len(entries) > PREPARED_QUERIES:
                entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every kept set-up."""
        with self._lock:
            self.entries.clear()


def prepared_queries(snapshot: Snapshot, k1: float, b: float, avgdl: float) -> PreparedQueries | None:
    """The snapshot's kept query set-ups for (k1, b, avgdl); ``None`` on a view with collection statistics.

    A view scoring with a collection's statistics (a shard) plans each query
    afresh: its IDFs come from the collection, not from the snapshot's terms.
    """
    if snapshot.statistics is not None:
        return None
    return _impact_cache(snapshot, k1, b, avgdl).prepared


class _ImpactCache:
    """A map term -> :class:`_ImpactTerm`, bounded by postings held (first in, first out).

    One per snapshot and (k1, b, average length): an impact depends on the
    length norm, which the snapshot's average length sets, so a snapshot after
    a commit, a delete or a merge starts with an empty cache (segments are
    immutable, the collection's statistics are not). A look-up is one
    dictionary read, without a lock (a query's set-up must stay a few
    integers); insertions take the lock, and two threads may build the same
    term (one insertion wins; both are the same bits). First in, first out
    rather than least recently used for that reason: an evicted hot term is
    built again on its next search, O(its postings). A term holding more
    postings than the whole budget is not kept.
    """

    __slots__ = ("_budget", "_held", "_lock", "entries", "prepared")

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self.entries: dict[str, _ImpactTerm] = {}
        self._held = 0
        self._lock = threading.Lock()
        #: The query set-ups on these tables (:func:`prepared_queries`), cleared on an eviction.
        self.prepared = PreparedQueries()

    @property
    def postings(self) -> int:
        """Postings held now (at most the budget)."""
        return self._held

    def put(self, term: str, entry: _ImpactTerm) -> None:
        """Keep ``entry`` for ``term`` (unless it is over the budget alone), evicting the oldest."""
        if entry.postings > self._budget:
            return
        with self._lock:
            if term in self.entries:
                return
            self.entries[term] = entry
            self._held += entry.postings
            evicted_any = False
            while self._held > self._budget:
                evicted = self.entries.pop(next(iter(self.entries)))
                self._held -= evicted.postings
                evicted_any = True
        if evicted_any:
            self.prepared.clear()  # kept set-ups would pin the evicted tables


def _impact_cache(snapshot: Snapshot, k1: float, b: float, avgdl: float) -> _ImpactCache:
    """The snapshot's impact tables for (k1, b, avgdl) (:class:`_ImpactCache`)."""
    return snapshot.memo(("bm25 lists", "impacts", k1, b, avgdl), lambda: _ImpactCache(IMPACT_CACHE_POSTINGS))


def _impact_term(
    library: CompiledBM25, snapshot: Snapshot, entry: _SnapshotTerm, k1: float, b: float, avgdl: float
) -> _ImpactTerm:
    """``entry``'s rows with an impact table for each segment the dense pass may score. O(postings there).

    The dense pass is for segments of at most ``weft_bm25_dense_max_docs``
    documents (:attr:`CompiledBM25.dense_max_docs`); larger ones keep their
    rows as they are (block-max decodes what it reads). Each table is built
    against the norms of the part table for (k1, b, avgdl), whose address
    it records: the kernel refuses it with any other norms.

    Raises:
        CorruptIndexError: a segment's postings of the term do not decode (named).

    """
    function = library.impacts
    assert function is not None and library.dense_max_docs is not None  # the caller checks
    limit = library.dense_max_docs.value
    parts_table, _ = _part_table(snapshot, k1, b, avgdl)
    rows = entry.rows.copy()
    postings = 1 + int(rows.shape[0])  # a term without a table (or in no segment) costs a little too
    # Python ints read once (each numpy scalar read costs about a tenth of a microsecond, and a
    # term's first search on every new snapshot comes through here).
    listed = rows.tolist()
    part_rows = parts_table.tolist()
    small = [index for index, row in enumerate(listed) if part_rows[row[6]][3] <= limit]
    # The term's tables side by side in one buffer, in part order: the dense pass reads them in
    # that order, so several small segments' tables are one sequential read (as one segment's
    # table is) instead of a cache miss at the start of each.
    sizes = [kernel.impact_table_words(listed[index][2]) for index in small]
    buffer = np.empty(sum(sizes), dtype=np.int64)
    starts = [0, *itertools.accumulate(sizes)]
    # Addresses by arithmetic on the two buffers' own (one ndarray.ctypes read each).
    base, rows_at, row_bytes = buffer.ctypes.data, rows.ctypes.data, rows.strides[0]
    for at, index in enumerate(small):
        part = listed[index][6]
        address = base + 8 * starts[at]
        try:
            kernel.impact_table_at(
                function,
                rows_at + index * row_bytes,
                part_rows[part][0],
                part_rows[part][3],
                k1,
                address,
                sizes[at],
            )
        except kernel.CorruptListError:
            found = entry.keep[index]
            raise CorruptIndexError(
                f"{found.path}: packed postings of term {found.term!r} do not decode"
                " (the block table disagrees with the data)"
            ) from None
        rows[index, 7] = address
        postings += listed[index][2]
    buffer.setflags(write=False)  # before the views: each table is then read-only too
    tables = [buffer[starts[at] : starts[at + 1]] for at in range(len(small))]
    rows.setflags(write=False)
    address = rows.ctypes.data if rows.shape[0] else 0
    ref = array.array("q", (address, int(rows.shape[0]))).tobytes()
    return _ImpactTerm(entry, rows, tuple(tables), ref, postings)


def _impact_terms(
    snapshot: Snapshot, parts: _Parts, terms: Sequence[str], impacts: tuple[float, float, float]
) -> list[_ImpactTerm] | None:
    """Each term's :class:`_ImpactTerm` (its rows naming its impact tables), from the snapshot's cache.

    ``None`` when the library cannot build tables (an older build) or no
    segment is small enough for the dense pass. A term seen before on the
    snapshot with these (k1, b, avgdl) costs one dictionary read; a term in
    no segment is kept too (one unit of the budget: queries could add those
    without end, the budget bounds them).
    """
    library = kernel.compiled_bm25()
    if library is None or library.impacts is None or library.dense_max_docs is None:
        return None
    if not parts.rows or parts.smallest > library.dense_max_docs.value:
        return None
    cache = _impact_cache(snapshot, *impacts)
    get = cache.entries.get
    found = [get(term) for term in terms]
    if None in found:
        for index, term in enumerate(terms):
            if found[index] is None:
                entry = _terms(snapshot, parts, [term])[0]
                built = _impact_term(library, snapshot, entry, *impacts)
                cache.put(term, built)
                found[index] = built
    return found  # type: ignore[return-value]  # every None was filled


def plan(
    snapshot: Snapshot,
    terms: Sequence[str],
    query_tf: Sequence[float] | None,
    impacts: tuple[float, float, float] | None = None,
) -> TermQuery:
    """The set-up of one query on ``snapshot``: a cache look-up per term and a few integers.

    ``terms``: distinct, in the order a document's contributions are summed
    (plain text: sorted); ``query_tf``: how often each occurs in the query
    (``None``: once each). The rows, document frequency and IDF of a
    term are built the first time the term is searched on the snapshot and
    kept with it (:func:`gather`'s cache; the index's warming step replays
    recent searches on a new snapshot before publishing it, so they are
    built by then). The weights are the numpy path's to the bit: ``qtf *
    idf`` is one float64 product either way. No numpy array is made
    unless the snapshot scores with a collection's statistics (a shard).

    ``impacts``: the (k1, b, avgdl) the query will run with, to point its
    rows at the snapshot's impact tables for them (built on a term's first
    search, kept per snapshot, bounded by :data:`IMPACT_CACHE_POSTINGS`), so
    the dense pass reads each posting's id and impact instead of decoding
    and dividing: the same scores to the bit. ``None``, a library without
    ``weft_bm25_impacts`` or no segment small enough for the dense pass: the
    plain rows.

    Raises:
        CorruptIndexError: a term's postings do not decode (the term and segment are named).

    """
    parts = _parts(snapshot)
    found = None if impacts is None else _impact_terms(snapshot, parts, terms, impacts)
    held: tuple[_ImpactTerm, ...] = ()
    refs = array.array("q")
    if found is None:
        entries = _terms(snapshot, parts, terms)
        for entry in entries:
            refs.append(entry.address)
            refs.append(entry.n_rows)
    else:
        # A few list comprehensions over the query's terms, one join of their pairs.
        held = tuple(found)
        entries = [term.entry for term in found]
        refs.frombytes(b"".join([term.ref for term in found]))
    lists = sum([entry.n_rows for entry in entries])
    postings = sum([entry.doc_freq for entry in entries])
    matched = sum([entry.doc_freq != 0 for entry in entries])
    if snapshot.statistics is None:
        idf = [entry.idf for entry in entries]
    else:
        local = np.array([entry.doc_freq for entry in entries], dtype=np.int64)
        frequencies = snapshot.collection_doc_freq(terms, local)
        idf = lucene_idf(snapshot.collection_n_docs, frequencies).tolist()
    if query_tf is None:
        weights = array.array("d", idf)
    else:
        weights = array.array("d", [count * value for count, value in zip(query_tf, idf, strict=True)])
    refs_at, weights_at = refs.buffer_info()[0], weights.buffer_info()[0]
    return TermQuery(terms, entries, refs, weights, matched, postings, lists, refs_at, weights_at, held)


def _part_table_for(
    snapshot: Snapshot, k1: float, b: float, avgdl: float, allowed: NDArray[np.bool_] | None
) -> NDArray[np.int64]:
    """The part descriptors, with a filter's id maps in place of the deletion maps (kept per filter)."""
    parts, _ = _part_table(snapshot, k1, b, avgdl)
    if allowed is None:
        return parts
    # Keyed by the mask's identity, which the snapshot's filter cache keeps alive; the maps
    # the table points into are kept by _filtered_maps' cache, so the table is rebuilt
    # (from those maps or new ones) whenever that cache let them go.
    cache: collections.OrderedDict[tuple[int, float, float, float], tuple[Any, ...]]
    cache = snapshot.memo(("bm25 lists", "filter parts"), collections.OrderedDict)
    key = (id(allowed), k1, b, avgdl)
    with _filter_maps_lock:
        entry = cache.get(key)
        if entry is not None and entry[0]() is allowed:
            cache.move_to_end(key)
            table: NDArray[np.int64] = entry[1]
            return table
    maps = _filtered_maps(snapshot, allowed)
    table = parts.copy()
    table[:, 1] = [mapping.ctypes.data for mapping in maps]
    with _filter_maps_lock:
        cache[key] = (weakref.ref(allowed), table, maps)
        while len(cache) > FILTER_MAPS:
            cache.popitem(last=False)
    return table


def run(
    library: CompiledBM25,
    snapshot: Snapshot,
    query: TermQuery,
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    allowed: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.float64], KernelStats]:
    """The ``k`` best documents of ``query``, canonical order, in one compiled call without the GIL.

    What :func:`search` returns for the same terms and weights, to the bit:
    the kernel lays the lists out by segment itself and carries the
    threshold from segment to segment. Keys are compared (in Python) only
    when two results tie on a snapshot of several segments; otherwise the
    kernel's internal-id order is the canonical order.

    Raises:
        CorruptIndexError: a query term's packed postings do not decode (the term is named).
        MemoryError: the library could not allocate its working memory.

    """
    function = library.query
    assert function is not None  # the caller checks that the library has it
    parts = _part_table_for(snapshot, k1, b, avgdl, allowed)
    try:
        ids, scores, stats, ties = kernel.query(
            function,
            query.refs_at,
            len(query.weights),
            query.weights_at,
            parts,
            k1,
            b,
            avgdl,
            k,
        )
    except kernel.CorruptTermError as error:
        raise _corrupt_term(snapshot, query, error.term, error.part) from None
    if ties and not snapshot.ids_follow_keys:
        return (*_canonical(snapshot, ids, scores, k), stats)
    return ids[:k], scores[:k], stats


def run_kept(
    library: CompiledBM25,
    snapshot: Snapshot,
    prepared: PreparedQueries,
    query: TermQuery,
    k1: float,
    b: float,
    avgdl: float,
    k: int,
) -> tuple[NDArray[np.int64], NDArray[np.float64], list[int]]:
    """:func:`run` without a filter, on the part table (and its address) ``prepared`` keeps.

    The same call and results as :func:`run`; the statistics come back as the
    kernel's row (:func:`~weftsearch.native.bm25.query_rows`). ``prepared`` is
    :func:`prepared_queries` of the snapshot for the same (k1, b, avgdl),
    whose part table it is.

    Raises:
        CorruptIndexError: a query term's packed postings do not decode (the term is named).
        MemoryError: the library could not allocate its working memory.

    """
    function = library.query
    assert function is not None  # the caller checks that the library has it
    parts = prepared.parts
    if parts is None:
        table = _part_table_for(snapshot, k1, b, avgdl, None)
        parts = prepared.parts = (table, table.ctypes.data, int(table.shape[0]))
    hits = prepared.hits
    if hits is None:
        # Short queries keep the GIL only where every segment is scored by the dense pass
        # (about 3 ns a posting); block-max on larger segments costs more a posting and
        # its queries release it (kernel.HELD_QUERY_POSTINGS).
        dense = library.dense_max_docs.value if library.dense_max_docs is not None else 0
        every_dense = all(part.reader.n_docs <= dense for part in snapshot.parts)
        hits = prepared.hits = (*snapshot._hit_table(), kernel.HELD_QUERY_POSTINGS if every_dense else -1)
    if hits[0] and library.query_sound is not None:
        # The hits' verdicts in the same call (one GIL release a search, none for a short
        # query): the search's tail then reads their keys unchecked (Snapshot._vouch_sound).
        function = library.query_sound
        if library.query_sound_held is not None and query.postings <= hits[2]:
            function = library.query_sound_held
    else:
        hits = (0, 0, -1)
    try:
        ids, scores, counts = kernel.query_rows(
            function,
            query.refs_at,
            len(query.weights),
            query.weights_at,
            parts[1],
            parts[2],
            k1,
            b,
            avgdl,
            k,
            hits[0],
            hits[1],
        )
    except kernel.CorruptTermError as error:
        raise _corrupt_term(snapshot, query, error.term, error.part) from None
    if counts[5] and not snapshot.ids_follow_keys:
        return (*_canonical(snapshot, ids, scores, k), counts)
    if ids.shape[0] > k:
        ids, scores = ids[:k], scores[:k]  # ties past the k-th: views of the copies
    if hits[0] and counts[6] == ids.shape[0]:
        snapshot._vouch_sound(ids)
    return ids, scores, counts


def _corrupt_term(snapshot: Snapshot, query: TermQuery, term: int, part: int) -> CorruptIndexError:
    """The error naming the term and segment ``_bm25.c`` found corrupt (code -3 of ``weft_bm25_query``)."""
    if 0 <= term < len(query.terms) and 0 <= part < len(snapshot.parts):
        return CorruptIndexError(
            f"{snapshot.parts[part].reader.path}: packed postings of term {query.terms[term]!r} do not decode"
            " (the block table disagrees with the data)"
        )
    return CorruptIndexError("packed postings of a query term do not decode")


class BatchArrays(NamedTuple):
    """What :func:`run_batch` found for its queries, as arrays over the whole batch.

    Query ``q``'s results are ``ids[bounds[q]:bounds[q + 1]]`` and the same
    slice of ``scores``: its ``k`` best internal ids in canonical order (none
    when its terms have no list on the snapshot). The other arrays are its
    plan counts, one entry per query.

    Attributes:
        ids: int64, every query's results one after the other (C-contiguous).
        scores: float64, their scores.
        bounds: int64, ``queries + 1`` offsets into ``ids`` and ``scores``.
        terms: distinct terms of each query.
        matched: terms held by at least one live document of the snapshot.
        postings: live postings in the terms' lists (document frequencies summed).
        stats: int64 ``(queries, 5)``: the kernel's five statistics (blocks,
            blocks scored, postings, postings scored, documents scored); zeros
            where nothing was read.

    """

    ids: NDArray[np.int64]
    scores: NDArray[np.float64]
    bounds: NDArray[np.int64]
    terms: NDArray[np.int64]
    matched: NDArray[np.int64]
    postings: NDArray[np.int64]
    stats: NDArray[np.int64]


def plan_batch(
    snapshot: Snapshot, queries: Sequence[Sequence[str]], impacts: tuple[float, float, float]
) -> list[TermQuery]:
    """:func:`plan` of each query's terms, the set-up done once for the batch: one :class:`TermQuery` each.

    ``queries``: each query's terms as the analyzer gave them (repeats
    included; at least one each). Each query's set-up is what
    :func:`plan` gives it alone, as a single search calls it (its distinct
    terms sorted, their counts as ``query_tf``, ``None`` when there is no
    repeat): the same term rows, impact tables and weights (``qtf * idf``
    is one float64 product either way, and ``1.0 * idf`` is ``idf``), the
    same counts. What the batch does once instead of once per query: its
    terms are numbered, sorted and counted per query in one numpy pass,
    every distinct term is looked up in the snapshot's caches once (a
    shard's collection document frequencies read once for all of them), and
    the weights computed for all queries at once; per query only its
    slices are taken. O(batch terms log batch terms).

    Raises:
        CorruptIndexError: a query term's packed postings do not decode (the term is named).

    """
    count = len(queries)
    if not count:
        return []
    parts = _parts(snapshot)
    # Every term of the batch numbered in sorted order, so that sorting (query, number)
    # pairs sorts each query's distinct terms as sorted(set(terms)) does, and counting
    # equal pairs counts each term's occurrences in its query.
    every = list(itertools.chain.from_iterable(queries))
    distinct = sorted(set(every))
    number = dict(zip(distinct, range(len(distinct)), strict=True))
    width = len(distinct)
    lengths = np.fromiter(map(len, queries), dtype=np.int64, count=count)
    pairs = np.repeat(np.arange(count, dtype=np.int64) * width, lengths)
    pairs += np.fromiter(map(number.__getitem__, every), dtype=np.int64, count=len(every))
    # np.unique(pairs, return_counts=True) without its wrapper's extra passes.
    pairs.sort()
    first = np.empty(pairs.shape[0], dtype=np.bool_)
    first[0] = True  # every query has a term: pairs is not empty
    np.not_equal(pairs[1:], pairs[:-1], out=first[1:])
    heads_of_runs = np.flatnonzero(first)
    repeats = np.diff(heads_of_runs, append=pairs.shape[0])
    pairs = pairs[heads_of_runs]
    where = pairs % width
    offsets = np.searchsorted(pairs, np.arange(count + 1, dtype=np.int64) * width).astype(np.int64)
    found = _impact_terms(snapshot, parts, distinct, impacts)
    if found is None:
        entries = _terms(snapshot, parts, distinct)
        refs_by_term = np.array([(entry.address, entry.n_rows) for entry in entries], dtype=np.int64)
    else:
        entries = [term.entry for term in found]
        refs_by_term = np.frombuffer(b"".join([term.ref for term in found]), dtype=np.int64).reshape(-1, 2)
    doc_freq = np.array([entry.doc_freq for entry in entries], dtype=np.int64)
    n_rows = np.array([entry.n_rows for entry in entries], dtype=np.int64)
    if snapshot.statistics is None:
        idf = np.array([entry.idf for entry in entries], dtype=np.float64)
    else:
        # The collection's df, elementwise: each term's IDF the same bits as plan()'s per-query call.
        idf = lucene_idf(snapshot.collection_n_docs, snapshot.collection_doc_freq(distinct, doc_freq))
    # 1.0 * idf is idf exactly, and qtf * idf is plan()'s one product: the same weights.
    weights = array.array("d")
    weights.frombytes(np.ascontiguousarray(repeats.astype(np.float64) * idf[where]).tobytes())
    refs = array.array("q")
    refs.frombytes(np.ascontiguousarray(refs_by_term[where]).tobytes())
    heads = offsets[:-1]  # every query has a term, so no two heads are equal
    postings = np.add.reduceat(doc_freq[where], heads).tolist()
    matched = np.add.reduceat((doc_freq[where] != 0).astype(np.int64), heads).tolist()
    lists = np.add.reduceat(n_rows[where], heads).tolist()
    # Each query's fields are slices of the batch's (a copy each, in C): no Python loop
    # over a query's terms.
    numbers = where.tolist()
    terms = tuple([distinct[n] for n in numbers])  # tuples of str: the collector stops tracking them
    term_entries = [entries[n] for n in numbers]
    held: tuple[Any, ...] = () if found is None else tuple([found[n] for n in numbers])
    bounds = offsets.tolist()
    # tuple.__new__ builds the named tuple without its Python-level __new__.
    make = tuple.__new__
    planned: list[TermQuery] = []
    append = planned.append
    for start, stop, matched_here, postings_here, lists_here in zip(
        bounds, bounds[1:], matched, postings, lists, strict=False
    ):
        query_refs, query_weights = refs[2 * start : 2 * stop], weights[start:stop]
        append(
            make(
                TermQuery,
                (
                    terms[start:stop],
                    term_entries[start:stop],
                    query_refs,
                    query_weights,
                    matched_here,
                    postings_here,
                    lists_here,
                    query_refs.buffer_info()[0],
                    query_weights.buffer_info()[0],
                    held[start:stop],
                ),
            )
        )
    return planned


def run_planned(
    library: CompiledBM25,
    snapshot: Snapshot,
    queries: Sequence[TermQuery],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    threads: int = 1,
) -> BatchArrays:
    """:func:`run` of each planned query (:func:`plan`, :func:`plan_batch` or kept), in ONE kernel call.

    Each query's ids, score bits, order and statistics are what :func:`run`
    gives it alone. ``weft_bm25_query_batch`` runs every query, on
    ``threads`` threads inside C; the queries' rows and weights are joined
    in one pass (no numpy per query). A query whose terms have no list on
    the snapshot reads nothing (no results, zero statistics). A query with
    more tied results than its slot holds, or whose lists fail to decode,
    is run again alone through :func:`run` (which raises for the latter).
    O(batch terms) in Python.

    Raises:
        CorruptIndexError: a query term's packed postings do not decode (the term is named).
        MemoryError: the library could not allocate its working memory.

    """
    count = len(queries)
    if not count:
        none = np.zeros(0, dtype=np.int64)
        empty = np.zeros((0, 5), dtype=np.int64)
        return BatchArrays(none, np.zeros(0, np.float64), np.zeros(1, np.int64), none, none, none, empty)
    function = library.query_batch
    assert function is not None  # the caller checks that the library has it
    # The queries (and so the impact tables their rows point into) stay referenced by
    # the caller's sequence while the call runs, whatever the cache evicts meanwhile.
    refs = np.frombuffer(b"".join([query.refs for query in queries]), dtype=np.int64)
    weights = np.frombuffer(b"".join([query.weights for query in queries]), dtype=np.float64)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum([len(query.weights) for query in queries], out=offsets[1:])
    matched = np.array([query.matched for query in queries], dtype=np.int64)
    postings = np.array([query.postings for query in queries], dtype=np.int64)
    listed = np.array([query.lists for query in queries], dtype=np.int64) != 0
    table = _part_table_for(snapshot, k1, b, avgdl, None)
    slot = k + 8  # room for k results and a few ties; a query with more ties is run again alone
    batch = kernel.query_batch(
        function, refs.ctypes.data, offsets, weights.ctypes.data, table, k1, b, avgdl, k, slot, threads
    )
    kept = np.array(batch.counts, dtype=np.int64)
    stats = np.ascontiguousarray(batch.stats[:, :5])
    stats[~listed] = 0  # nothing was read
    sizes = np.where(listed, np.minimum(kept, k), 0)
    alone = np.flatnonzero(listed & ((kept < 0) | (kept > slot))).tolist()
    redone: dict[int, tuple[NDArray[np.int64], NDArray[np.float64]]] = {}
    for index in alone:
        ids, scores, found_stats = run(library, snapshot, queries[index], k1, b, avgdl, k)
        redone[index] = (ids, scores)
        sizes[index] = ids.shape[0]
        stats[index] = found_stats
    bounds = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    # Each query's results, packed: its first sizes[q] of its slot of the kernel's output.
    rows = np.repeat(np.arange(count, dtype=np.int64) * slot - bounds[:-1], sizes)
    rows += np.arange(int(bounds[-1]), dtype=np.int64)
    all_ids, all_scores = batch.ids.reshape(-1), batch.scores.reshape(-1)
    ids, scores = all_ids[rows], all_scores[rows]
    if not snapshot.ids_follow_keys:
        # Ties on several segments: the kernel's (score, id) order is put in key order.
        tied = listed & (batch.stats[:, 5] != 0) & (kept >= 0) & (kept <= slot)
        for index in np.flatnonzero(tied).tolist():
            start = index * slot
            redone[index] = _canonical(
                snapshot, all_ids[start : start + kept[index]], all_scores[start : start + kept[index]], k
            )
    for index, (found_ids, found_scores) in redone.items():
        ids[bounds[index] : bounds[index + 1]] = found_ids
        scores[bounds[index] : bounds[index + 1]] = found_scores
    return BatchArrays(ids, scores, bounds, np.diff(offsets), matched, postings, stats)


def run_batch(
    library: CompiledBM25,
    snapshot: Snapshot,
    queries: Sequence[Sequence[str]],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    threads: int = 1,
) -> BatchArrays:
    """:func:`plan` then :func:`run` of each query, the set-up done once for the batch, in ONE kernel call.

    ``queries``: each query's terms as the analyzer gave them (repeats
    included; at least one each): :func:`plan_batch` then
    :func:`run_planned`. Each query's ids, score bits, order and statistics
    are what :func:`plan` and :func:`run` give it alone.

    Raises:
        CorruptIndexError: a query term's packed postings do not decode (the term is named).
        MemoryError: the library could not allocate its working memory.

    """
    planned = plan_batch(snapshot, queries, (k1, b, avgdl))
    return run_planned(library, snapshot, planned, k1, b, avgdl, k, threads)
