"""The BM25 top-k kernel (``_bm25.c``): block-max MaxScore over packed postings, in one compiled call.

This module binds the library and runs it over arrays: list descriptors (one
int64 row of :data:`LIST_FIELDS` per term and segment: packed words, block
table, counts), part descriptors (one row of :data:`PART_FIELDS` per segment:
length norms, id map, base) and the query's weights. Which lists a query
reads, and how a snapshot's segments become those arrays, is the BM25
scorer's business (:mod:`weftsearch.scorers.bm25.lists`).

The kernel skips the blocks of 128 postings that cannot reach the current
k-th score and releases the GIL while it runs, so searches in threads
overlap. Scores are the numpy path's to the bit (same float64 operations in
the same order; :func:`compiled_bm25` checks it on load) and every document
tied with the k-th score is returned, so the caller applies the key tie rule
exactly as before.

The compiled path is optional: where the library was not built, where
:data:`DISABLE_VARIABLE` is set, or where its self-check disagrees with numpy
in any bit, :func:`compiled_bm25` returns ``None`` and the scorer uses numpy.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import CorruptIndexError
from weftsearch.native.loader import BM25_SWITCH, Scratch, load_library
from weftsearch.storage.postings import BLOCK_ROWS, POSTINGS_BLOCK, pack_postings

__all__ = [
    "BLOCK",
    "BatchResults",
    "DISABLE_VARIABLE",
    "HIT_PART_FIELDS",
    "LIST_FIELDS",
    "PART_FIELDS",
    "CompiledBM25",
    "CorruptListError",
    "CorruptTermError",
    "QueryBatch",
    "KernelStats",
    "compiled_blocks",
    "compiled_bm25",
    "compiled_bm25_available",
    "hits_sound",
    "impact_table",
    "impact_table_words",
    "query",
    "query_batch",
    "ties_by_key",
    "top_k",
    "top_k_batch",
    "top_k_batch_available",
]

#: Set to ``1`` to turn the compiled BM25 off (the numpy path computes the same results).
DISABLE_VARIABLE = BM25_SWITCH

#: Postings per block (fixed in ``_bm25.c`` as WEFT_BLOCK, and in the segment format as
#: :data:`~weftsearch.storage.postings.POSTINGS_BLOCK`). 128 is what Lucene and PISA
#: use: small enough that a block's bound is tight (one long or high-tf document
#: loosens the bound of only 127 neighbours), large enough that the metadata is under
#: 0.1 byte per posting and a window's bookkeeping is amortised over many postings.
BLOCK = POSTINGS_BLOCK

#: int64 fields of one list descriptor and one part descriptor (see ``_bm25.c``).
LIST_FIELDS = 8
PART_FIELDS = 4

#: Multiplies every block bound: 1.0. Tests set it below 1 to break the bound on
#: purpose and check that the equivalence tests notice; nothing else may change it.
_BOUND_SCALE = 1.0

_POINTER = ctypes.c_void_p
_INT = ctypes.c_int64
_DOUBLE = ctypes.c_double


class KernelStats(NamedTuple):
    """What one compiled query read (for benchmarks; the scores never depend on it).

    A named tuple: one is made per query, and a frozen dataclass's ``__init__`` costs more.

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


class CorruptListError(CorruptIndexError):
    """The kernel found list ``index`` of its table corrupt (its packed postings do not decode).

    The caller, which knows which term and segment the row came from, names them.
    """

    def __init__(self, index: int) -> None:
        super().__init__("packed postings of a query term do not decode")
        self.index = index


@dataclass(frozen=True, slots=True)
class CompiledBM25:
    """The loaded library's functions (see ``_bm25.c``).

    ``top_k``: ``weft_bm25_top_k``; ``blocks``: ``weft_bm25_blocks``; ``query`` and
    ``query_batch``: ``weft_bm25_query`` and ``weft_bm25_query_batch`` (a query from
    per-term descriptor rows, see :func:`query`; ``None`` in a library built before them).
    ``dense_max_docs``: the library's ``weft_bm25_dense_max_docs`` (parts up to this many
    documents with long lists are scored densely; the tests set it to 0 to run block-max
    everywhere; nothing else may change it), or ``None`` in an older build.
    ``impacts``: ``weft_bm25_impacts`` (a list's impact table for the dense pass, see
    :func:`impact_table`), or ``None`` in an older build.
    ``hits_sound``: ``weft_hits_sound`` (whether a search's hits are known sound, see
    :func:`hits_sound`) and ``ties_by_key``: ``weft_ties_by_key`` (runs of equal scores
    put in key order, see :func:`ties_by_key`), or ``None`` in an older build.
    ``hits_sound_held`` and ``ties_by_key_held``: the same two functions bound to keep
    the GIL across the call (:data:`HELD_MAX`), or ``None`` with them.
    ``query_sound``: ``weft_bm25_query_sound`` (``query`` and ``hits_sound`` of its
    results in one call, see :func:`query_rows`), or ``None`` in an older build;
    ``query_sound_held``: the same bound to keep the GIL, for a query of at most
    :data:`HELD_QUERY_POSTINGS` postings.
    """

    top_k: Callable[..., int]
    blocks: Callable[..., int]
    query: Callable[..., int] | None = None
    query_batch: Callable[..., int] | None = None
    dense_max_docs: ctypes.c_int64 | None = None
    impacts: Callable[..., int] | None = None
    hits_sound: Callable[..., int] | None = None
    ties_by_key: Callable[..., int] | None = None
    hits_sound_held: Callable[..., int] | None = None
    ties_by_key_held: Callable[..., int] | None = None
    query_sound: Callable[..., int] | None = None
    query_sound_held: Callable[..., int] | None = None


@cache
def compiled_bm25() -> CompiledBM25 | None:
    """The compiled BM25 functions, or ``None`` (the numpy path is used).

    ``None`` when turned off (:data:`DISABLE_VARIABLE`), when the library was
    not built (no C compiler at install time), or when a self-check on random
    postings (ties, deletions, two segments, k1 = 0 and b = 0 and 1) finds any
    result or score bit that differs from the numpy formula (see
    :func:`~weftsearch.native.loader.load_library`).
    """
    return load_library("_bm25", _bind, _agrees_with_numpy)


def _bind(library: ctypes.CDLL) -> CompiledBM25:
    top = library.weft_bm25_top_k
    blocks = library.weft_bm25_blocks
    # lists, n_lists, parts, n_parts, weights, m, k1, b, avgdl, k, bound_scale,
    # ids_out, scores_out, out_capacity, stats.
    top.argtypes = [_POINTER, _INT, _POINTER, _INT, _POINTER, _INT, _DOUBLE, _DOUBLE, _DOUBLE, _INT, _DOUBLE]
    top.argtypes += [_POINTER, _POINTER, _INT, _POINTER]
    top.restype = _INT
    blocks.argtypes = [_POINTER, _POINTER, _INT, _POINTER, _INT, _POINTER]
    blocks.restype = _INT
    query = getattr(library, "weft_bm25_query", None)
    batch = getattr(library, "weft_bm25_query_batch", None)
    if query is None or batch is None:
        return CompiledBM25(top, blocks)
    # terms, m, weights, parts, n_parts, k1, b, avgdl, k, bound_scale, ids_out, scores_out,
    # out_capacity, stats.
    query.argtypes = [_POINTER, _INT, _POINTER, _POINTER, _INT, _DOUBLE, _DOUBLE, _DOUBLE, _INT, _DOUBLE]
    query.argtypes += [_POINTER, _POINTER, _INT, _POINTER]
    query.restype = _INT
    # terms, term_starts, weights, n_queries, parts, n_parts, k1, b, avgdl, k, bound_scale, slot,
    # threads, ids_out, scores_out, counts_out, stats.
    batch.argtypes = [_POINTER, _POINTER, _POINTER, _INT, _POINTER, _INT, _DOUBLE, _DOUBLE, _DOUBLE, _INT]
    batch.argtypes += [_DOUBLE, _INT, _INT, _POINTER, _POINTER, _POINTER, _POINTER]
    batch.restype = _INT
    dense = ctypes.c_int64.in_dll(library, "weft_bm25_dense_max_docs")
    impacts = getattr(library, "weft_bm25_impacts", None)
    if impacts is not None:
        # row, norms, n_docs, k1, table, table_words.
        impacts.argtypes = [_POINTER, _POINTER, _INT, _DOUBLE, _POINTER, _INT]
        impacts.restype = _INT
    # The hit verdicts and key order of a search's few hits take a microsecond or two: they are
    # bound a second time through PyDLL, whose calls keep the GIL (HELD_MAX says when).
    held = ctypes.PyDLL(library._name)
    hits = getattr(library, "weft_hits_sound", None)
    hits_held = getattr(held, "weft_hits_sound", None)
    for function in (hits, hits_held):
        if function is not None:
            # ids, n, parts, n_parts.
            function.argtypes = [_POINTER, _INT, _POINTER, _INT]
            function.restype = _INT
    ties = getattr(library, "weft_ties_by_key", None)
    ties_held = getattr(held, "weft_ties_by_key", None)
    for function in (ties, ties_held):
        if function is not None:
            # ids, scores, n, cut, parts, n_parts.
            function.argtypes = [_POINTER, _POINTER, _INT, _INT, _POINTER, _INT]
            function.restype = _INT
    query_sound = getattr(library, "weft_bm25_query_sound", None)
    query_sound_held = getattr(held, "weft_bm25_query_sound", None)
    for function in (query_sound, query_sound_held):
        if function is not None:
            # weft_bm25_query's arguments, then hit_parts, n_hit_parts.
            function.argtypes = [*query.argtypes, _POINTER, _INT]
            function.restype = _INT
    return CompiledBM25(
        top,
        blocks,
        query,
        batch,
        dense,
        impacts,
        hits,
        ties,
        hits_sound_held=hits_held,
        ties_by_key_held=ties_held,
        query_sound=query_sound,
        query_sound_held=query_sound_held,
    )


def compiled_bm25_available() -> bool:
    """Whether BM25 top-k runs compiled (``False``: the numpy path, same results)."""
    return compiled_bm25() is not None


def compiled_blocks(
    library: CompiledBM25, ids: NDArray[np.uint32], tfs: NDArray[np.uint32], lengths: NDArray[np.uint32]
) -> NDArray[np.uint32]:
    """One list's block table derived by ``_bm25.c`` (``weft_bm25_blocks``): the stored tables' oracle.

    The writer's own derivation is :func:`weftsearch.storage.postings.derive_blocks`
    (numpy, every term of a segment at once); this one is the C kernel's view
    of the same table for one term, which the self-check and the tests compare
    it with. ``ids`` (< ``len(lengths)``) and ``tfs`` are one term's postings
    in one segment; returns ``4 * ceil(len(ids) / 128)`` uint32 laid out as
    ``post.blocks`` lays a term out (four rows, widths last). O(len(ids)).

    Raises:
        ValueError: an id is past ``lengths``, ids do not increase or a tf is 0.

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


_scratch = Scratch()


def top_k(
    library: CompiledBM25,
    table: NDArray[np.int64],
    parts: NDArray[np.int64],
    weights: NDArray[np.float64],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
) -> tuple[NDArray[np.int64], NDArray[np.float64], KernelStats]:
    """Every document scoring at least the k-th best score, best first (score desc, internal id asc).

    ``table``: int64 ``(lists, 8)`` list descriptors, grouped by part,
    ascending term within a part; ``parts``: int64 ``(parts, 4)`` part
    descriptors; ``weights``: ``qtf * idf`` per term (``_bm25.c`` documents
    the layouts). Ties with the k-th score are all returned, so there may be
    more than ``k``. Runs without the GIL. O(lists + windows * terms + scored
    postings * log k); blocks whose bound cannot reach the running k-th score
    are not read.

    Raises:
        CorruptListError: a list's packed postings do not decode (its row in ``table``).
        MemoryError: the library could not allocate its working memory.
        ValueError: the library refused the arguments (a bug of the caller).

    """
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
            raise CorruptListError(int(scratch.stats[0]))
        if kept < 0:
            raise ValueError(f"the BM25 kernel refused its arguments (code {kept})")  # a bug on this side
        if kept <= scratch.capacity:
            break
        scratch.reserve(kept)  # more ties than room: run again (the same result, now written)
    stats = KernelStats(*scratch.stats.tolist())
    return scratch.ids[:kept].copy(), scratch.scores[:kept].copy(), stats


# --------------------------------------------------------------------------- impact tables

#: int64 words before an impact table's impacts (``WEFT_IMPACT_HEADER`` in ``_bm25.c``).
_IMPACT_HEADER = 4


def impact_table_words(count: int) -> int:
    """int64 words of the impact table of a list of ``count`` postings (header, float64s, uint32s)."""
    return _IMPACT_HEADER + count + (count + 1) // 2


def impact_table(
    function: Callable[..., int],
    row: NDArray[np.int64],
    norms: int,
    n_docs: int,
    k1: float,
    into: NDArray[np.int64] | None = None,
) -> NDArray[np.int64]:
    """One list's impact table (``weft_bm25_impacts``, no GIL held), which the dense pass reads.

    ``row``: the list's descriptor (:data:`LIST_FIELDS` int64); ``norms``: the
    address of its part's ``n_docs`` length norms as the part table holds them
    (the table records it, and the kernel refuses the table with other norms or
    another ``k1``). The table holds each posting's local id and impact
    ``tf * (k1 + 1) / (tf + norm)``, computed by the kernel's own routine, so
    ``impact * weight`` is the contribution to the bit and a query reading the
    table neither decodes the list nor divides. 12 bytes a posting. O(postings).
    ``function`` is :attr:`CompiledBM25.impacts`. ``into``: the table is
    written there (a C-contiguous int64 array of exactly
    :func:`impact_table_words` words, e.g. a slice of one buffer holding a
    term's tables of every segment side by side) and returned; ``None``: a
    new array.

    Raises:
        CorruptListError: the postings or their block table do not decode (index 0).
        MemoryError: the library could not allocate its working memory.
        ValueError: ``into`` is not room of that shape, or the library refused the arguments
            (a bug of the caller).

    """
    row = np.ascontiguousarray(row, dtype=np.int64)
    words = impact_table_words(int(row[2]))
    if into is None:
        table = np.empty(words, dtype=np.int64)
    elif into.dtype != np.int64 or into.shape != (words,) or not into.flags.c_contiguous:
        raise ValueError(f"an impact table of {words} int64 words needs room of that shape, got {into.shape}")
    else:
        table = into
    impact_table_at(function, row.ctypes.data, norms, n_docs, k1, table.ctypes.data, words)
    table.setflags(write=False)
    return table


def impact_table_at(
    function: Callable[..., int], row: int, norms: int, n_docs: int, k1: float, table: int, words: int
) -> None:
    """:func:`impact_table` written at address ``table`` (``words`` int64, :func:`impact_table_words`).

    ``row``: the address of the list's descriptor. For a caller that builds
    many tables into one buffer and knows the addresses (reading
    ``ndarray.ctypes`` costs about a microsecond); it keeps the memory alive
    and read-only after. O(postings).

    Raises:
        CorruptListError: the postings or their block table do not decode (index 0).
        MemoryError: the library could not allocate its working memory.
        ValueError: the library refused the arguments (a bug of the caller).

    """
    code = function(row, norms, n_docs, k1, table, words)
    if code == -1:
        raise MemoryError("the BM25 kernel could not allocate its working memory")
    if code == -3:
        raise CorruptListError(0)
    if code != 0:
        raise ValueError(f"the BM25 kernel refused its arguments (code {code})")  # a bug on this side


# --------------------------------------------------------------------------- a search's hits


#: int64 fields of one part row of :func:`hits_sound` and :func:`ties_by_key` (see ``weft_hits_sound``).
HIT_PART_FIELDS = 7


#: Hits :func:`hits_sound` copies into its thread's buffer (more are read where they are).
_HITS_SCRATCH = 1024

#: Up to this many ids, :func:`hits_sound` and :func:`ties_by_key` call the binding that keeps
#: the GIL (``held=``; a few microseconds of work at most). Releasing the GIL costs more than
#: such a call when another thread waits for it: the waiter is woken (a futex wake, on a VM an
#: inter-processor interrupt) and this thread then waits to get it back, so each release is up
#: to two hand-offs between threads. A search made three of them (the kernel, the verdicts and,
#: on ties, the key order); now the kernel's is the only one (docs/BENCHMARKS.md, "One GIL
#: hand-off a search"). Longer calls release it, as the kernels do.
HELD_MAX = 1024

#: A kept query whose lists hold at most this many postings, on a snapshot whose every segment
#: the dense pass scores (``dense_max_docs`` documents or fewer), runs its kernel call without
#: releasing the GIL (:attr:`CompiledBM25.query_sound_held`); any other releases it. The same
#: trade as :data:`HELD_MAX`, one size up: a release hands the GIL to a waiting thread and back,
#: and on a 2-vCPU VM each hand-off wakes a sleeping thread (tens of microseconds; on an idle
#: virtual CPU an interrupt between them), more than such a query's kernel time (about 3 ns a
#: posting in the dense pass: SciFact's queries hold 4,000 postings at the median and 15,000 at
#: most). Two threads searching SciFact went from 0.6-0.7x one thread to 0.9-1.0x; on larger
#: segments (block-max, where a posting costs more) every query keeps running beside other
#: threads (docs/BENCHMARKS.md, "One GIL hand-off a search").
HELD_QUERY_POSTINGS = 16384


class _HitsScratch(Scratch):
    """:class:`Scratch` with room for :data:`_HITS_SCRATCH` ids per thread (``__init__`` runs in each)."""

    def __init__(self) -> None:
        super().__init__()
        self.reserve(_HITS_SCRATCH)


_hits_scratch = _HitsScratch()


def hits_sound(
    function: Callable[..., int],
    ids: NDArray[np.int64],
    parts: int,
    n_parts: int,
    held: Callable[..., int] | None = None,
) -> int:
    """The position of the first of ``ids`` whose record or key is not known sound (``len(ids)``: none).

    ``parts``: the address of ``n_parts`` rows of :data:`HIT_PART_FIELDS`
    int64, one per segment by ascending base: base, live documents, the
    address of the live-to-local map (0: none deleted), of the record
    verdicts (uint8, 1 sound), of the key verdicts (a byte a document,
    nonzero checked; 0: every key sound), of the key table's offsets
    (uint64) and of its bytes. The caller keeps those arrays alive. One
    compiled call, no Python per hit; ``function`` is
    :attr:`CompiledBM25.hits_sound`, ``held`` (optional) the same function
    bound to keep the GIL (:attr:`CompiledBM25.hits_sound_held`), called for
    up to :data:`HELD_MAX` ids. O(len(ids)).

    Raises:
        ValueError: an id is outside every part (a bug of the caller).

    """
    count = ids.shape[0]
    if count <= _HITS_SCRATCH:
        # Into this thread's buffer, whose address is known: reading ``ndarray.ctypes``
        # costs about a microsecond, copying a search's few hits a tenth of that.
        scratch = _hits_scratch
        scratch.ids[:count] = ids
        address = scratch.ids_address
    else:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        address = ids.ctypes.data
    if held is not None and count <= HELD_MAX:
        function = held
    found = function(address, count, parts, n_parts)
    if found < 0:
        raise ValueError(f"weft_hits_sound refused its arguments (code {found})")  # a bug on this side
    return int(found)


def ties_by_key(
    function: Callable[..., int],
    ids: NDArray[np.int64],
    scores: NDArray[np.float64],
    cut: int,
    parts: int,
    n_parts: int,
    held: Callable[..., int] | None = None,
) -> NDArray[np.int64] | None:
    """``ids`` with each run of equal ``scores`` that starts before ``cut`` sorted by key, or ``None``.

    ``ids``/``scores``: a query's results sorted by score descending then
    internal id (as :func:`query` returns them); ``parts``: :func:`hits_sound`'s
    rows. Keys compare as their UTF-8 bytes (the strings' order). ``None``
    when a run member's key was not checked yet (the caller checks and orders
    them itself). One compiled call; ``function`` is
    :attr:`CompiledBM25.ties_by_key`, ``held`` (optional) the same bound to
    keep the GIL, called for up to :data:`HELD_MAX` ids. O(n + m log m) for
    the m members of those runs.

    Raises:
        MemoryError: the library could not allocate its working memory.
        ValueError: the library refused the arguments (a bug of the caller).

    """
    ordered = np.array(ids, dtype=np.int64)  # a copy, C-contiguous: the function sorts it in place
    if scores.dtype != np.float64 or not scores.flags.c_contiguous:
        scores = np.ascontiguousarray(scores, dtype=np.float64)
    if held is not None and ordered.shape[0] <= HELD_MAX:
        function = held
    code = function(ordered.ctypes.data, scores.ctypes.data, ordered.shape[0], cut, parts, n_parts)
    if code == 1:
        return None
    if code == -1:
        raise MemoryError("weft_ties_by_key could not allocate its working memory")
    if code != 0:
        raise ValueError(f"weft_ties_by_key refused its arguments (code {code})")  # a bug on this side
    return ordered


# --------------------------------------------------------------------------- one query, by term


class _QueryScratch(Scratch):
    """:class:`Scratch` with six statistics (``weft_bm25_query``'s: the kernel's five and the tie flag).

    ``sound_stats``: the seven of ``weft_bm25_query_sound`` (the six, then its
    hits' verdict), apart, so that neither call leaves a stale seventh to the other.
    """

    def __init__(self) -> None:
        super().__init__()
        self.stats = np.zeros(6, dtype=np.int64)
        self.stats_address = self.stats.ctypes.data
        self.sound_stats = np.zeros(7, dtype=np.int64)
        self.sound_stats_address = self.sound_stats.ctypes.data


_query_scratch = _QueryScratch()


class CorruptTermError(CorruptIndexError):
    """Query term ``term`` (its index) is corrupt in part ``part`` (code -3 of ``weft_bm25_query``)."""

    def __init__(self, term: int, part: int) -> None:
        super().__init__("packed postings of a query term do not decode")
        self.term = term
        self.part = part


def query(
    function: Callable[..., int],
    terms: int,
    m: int,
    weights: int,
    parts: NDArray[np.int64],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
) -> tuple[NDArray[np.int64], NDArray[np.float64], KernelStats, bool]:
    """One query from per-term descriptor rows in one compiled call (``weft_bm25_query``, no GIL held).

    ``terms``: the address of ``2 * m`` int64, per query term in sorted term
    order the address of its rows (``(rows, 8)`` int64 list descriptors of
    its lists, ascending part; built once per snapshot and term) and their
    number (0: the term is absent); ``weights``: the address of ``m`` float64
    (``qtf * idf``); ``parts``: the part descriptors. Returns what
    :func:`top_k` returns for the same lists, and whether two results tie
    (without ties, internal-id order is key order on any snapshot).
    ``function`` is :attr:`CompiledBM25.query`.

    Raises:
        CorruptTermError: a term's packed postings do not decode (its index and the part's).
        MemoryError: the library could not allocate its working memory.
        ValueError: the library refused the arguments (a bug of the caller).

    """
    ids, scores, counts = query_rows(
        function, terms, m, weights, parts.ctypes.data, parts.shape[0], k1, b, avgdl, k
    )
    stats = KernelStats(counts[0], counts[1], counts[2], counts[3], counts[4])
    return ids, scores, stats, bool(counts[5])


def query_rows(
    function: Callable[..., int],
    terms: int,
    m: int,
    weights: int,
    parts: int,
    n_parts: int,
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    hit_parts: int = 0,
    n_hit_parts: int = 0,
) -> tuple[NDArray[np.int64], NDArray[np.float64], list[int]]:
    """:func:`query` with the part table given by its address and rows, its statistics as the kernel's row.

    For a caller that keeps the part table's address (reading ``ndarray.ctypes``
    costs about a microsecond a call): the same call, the same results, and
    the kernel's six statistics as a list (the five of :class:`KernelStats`,
    then the tie flag), without a tuple made for them.

    With ``hit_parts`` (the address of :func:`hits_sound`'s ``n_hit_parts``
    rows) ``function`` is :attr:`CompiledBM25.query_sound`: the same call
    also finds the first of the first ``min(len(ids), k)`` results whose record
    or key is not known sound, as :func:`hits_sound` would, and the list has a
    seventh entry, that position. One GIL release for both.

    Raises:
        CorruptTermError: a term's packed postings do not decode (its index and the part's).
        MemoryError: the library could not allocate its working memory.
        ValueError: the library refused the arguments (a bug of the caller).

    """
    scratch = _query_scratch
    while True:
        if hit_parts:
            stats, address = scratch.sound_stats, scratch.sound_stats_address
        else:
            stats, address = scratch.stats, scratch.stats_address
        arguments = (
            *(terms, m, weights, parts, n_parts, k1, b, avgdl, k, _BOUND_SCALE),
            *(scratch.ids_address, scratch.scores_address, scratch.capacity, address),
        )
        kept = function(*arguments, hit_parts, n_hit_parts) if hit_parts else function(*arguments)
        if kept == -1:
            raise MemoryError("the BM25 kernel could not allocate its working memory")
        if kept == -3:
            raise CorruptTermError(int(stats[0]), int(stats[5]))
        if kept < 0:
            raise ValueError(f"the BM25 kernel refused its arguments (code {kept})")  # a bug on this side
        if kept <= scratch.capacity:
            break
        scratch.reserve(kept)  # more ties than room: run again (the same result, now written)
    return scratch.ids[:kept].copy(), scratch.scores[:kept].copy(), stats.tolist()


@dataclass(frozen=True, slots=True)
class QueryBatch:
    """What :func:`query_batch` found: query ``q``'s results are ``ids[q, :counts[q]]`` when written.

    Attributes:
        ids: int64 ``(queries, slot)``.
        scores: float64 ``(queries, slot)``.
        counts: per query, its number of results; more than the slot: not
            written (run it alone); negative: its error code (run it alone to raise it).
        stats: int64 ``(queries, 6)``: the kernel's five statistics and the tie flag.

    """

    ids: NDArray[np.int64]
    scores: NDArray[np.float64]
    counts: list[int]
    stats: NDArray[np.int64]


def query_batch(
    function: Callable[..., int],
    terms: int,
    term_starts: NDArray[np.int64],
    weights: int,
    parts: NDArray[np.int64],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    slot: int,
    threads: int,
) -> QueryBatch:
    """:func:`query` for many queries in ONE compiled call, on ``threads`` threads inside C (no GIL held).

    Query ``q``'s term pairs are ``terms[2 * term_starts[q] : 2 * term_starts[q + 1]]``
    and its weights the same slice of ``weights`` (both addresses of the
    caller's buffers). Each query's results are what :func:`query` returns
    for it, to the bit, whichever thread ran it (each query is one
    independent call of the same routine); ``slot`` results of room each.
    ``function`` is :attr:`CompiledBM25.query_batch`.

    Raises:
        ValueError: the library refused the arguments (a bug of the caller).

    """
    count = int(term_starts.shape[0]) - 1
    ids = np.empty((count, slot), dtype=np.int64)
    scores = np.empty((count, slot), dtype=np.float64)
    counts = np.empty(count, dtype=np.int64)
    stats = np.zeros((count, 6), dtype=np.int64)
    code = function(
        terms,
        term_starts.ctypes.data,
        weights,
        count,
        parts.ctypes.data,
        parts.shape[0],
        k1,
        b,
        avgdl,
        k,
        _BOUND_SCALE,
        slot,
        threads,
        ids.ctypes.data,
        scores.ctypes.data,
        counts.ctypes.data,
        stats.ctypes.data,
    )
    if code < 0:
        raise ValueError(f"the BM25 kernel refused its arguments (code {code})")  # a bug on this side
    return QueryBatch(ids, scores, counts.tolist(), stats)


# --------------------------------------------------------------------------- many queries


@cache
def _top_k_batch() -> Callable[..., int] | None:
    """``weft_bm25_top_k_batch`` of the loaded library, or ``None`` (no compiled BM25, or an older build).

    An older build's ``weft_bm25_top_k_many`` summed its statistics over the batch; it is
    not used (each query of a batch then goes through :func:`top_k`, same results), so
    a query's statistics are always its own.
    """
    if compiled_bm25() is None:
        return None
    return load_library("_bm25", _bind_batch, lambda _: True)  # the same routine per query: checked above


def _bind_batch(library: ctypes.CDLL) -> Callable[..., int]:
    function = library.weft_bm25_top_k_batch
    # lists, list_starts, parts, n_parts, weights, weight_starts, n_queries, k1, b, avgdl, k,
    # bound_scale, ids_out, scores_out, out_capacity, counts_out, written, stats.
    function.argtypes = [_POINTER, _POINTER, _POINTER, _INT, _POINTER, _POINTER, _INT]
    function.argtypes += [_DOUBLE, _DOUBLE, _DOUBLE, _INT, _DOUBLE, _POINTER, _POINTER, _INT]
    function.argtypes += [_POINTER, _POINTER, _POINTER]
    function.restype = _INT
    return function


def top_k_batch_available() -> bool:
    """Whether :func:`top_k_batch` can run (the compiled library has its batch function)."""
    return _top_k_batch() is not None


@dataclass(frozen=True, slots=True)
class BatchResults:
    """What :func:`top_k_batch` found: query ``q``'s results are ``ids``/``scores`` from ``starts[q]``.

    Attributes:
        ids: int64, every written query's results, one query after another.
        scores: float64, the same layout.
        counts: int64 per query: its number of results.
        written: per query: whether its results were written (else there was no
            room: run it again alone with :func:`top_k`).
        starts: int64 per query: where its results start (meaningful when written).
        stats: one :class:`KernelStats` per query.

    """

    ids: NDArray[np.int64]
    scores: NDArray[np.float64]
    counts: list[int]
    written: list[bool]
    starts: list[int]
    stats: list[KernelStats]


def top_k_batch(
    table: NDArray[np.int64],
    list_starts: NDArray[np.int64],
    parts: NDArray[np.int64],
    weights: NDArray[np.float64],
    weight_starts: NDArray[np.int64],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    capacity: int,
) -> BatchResults:
    """:func:`top_k` for many queries in ONE compiled call (the GIL released for the whole batch).

    Query ``q``'s lists are ``table[list_starts[q]:list_starts[q + 1]]`` and its
    weights ``weights[weight_starts[q]:weight_starts[q + 1]]``; every query reads
    the same ``parts``. Each query's results are what :func:`top_k` returns
    for it, to the bit (the C side calls the same routine per query), as long
    as the ``capacity`` results room left holds them (see :class:`BatchResults`).

    Raises:
        MemoryError: the library could not allocate its working memory.
        RuntimeError: the library has no batch function (see :func:`top_k_batch_available`).
        ValueError: the library refused the arguments (a bug of the caller).

    """
    function = _top_k_batch()
    if function is None:
        raise RuntimeError("the compiled BM25 library has no weft_bm25_top_k_batch")
    count = int(list_starts.shape[0]) - 1
    table = np.ascontiguousarray(table, dtype=np.int64)
    weights = np.ascontiguousarray(weights, dtype=np.float64)
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
        weights.ctypes.data,
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
    starts: list[int] = []
    start = 0
    done = [bool(flag) for flag in written.tolist()]
    kept_counts = counts.tolist()
    for kept, was_written in zip(kept_counts, done, strict=True):
        starts.append(start)
        if was_written:
            start += kept
    return BatchResults(ids, scores, kept_counts, done, starts, [KernelStats(*row) for row in stats.tolist()])


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
        # The same lists as per-term rows (ascending part), for weft_bm25_query.
        term_rows = [np.ascontiguousarray(table[table[:, 5] == term]) for term in range(terms)]
        term_refs = np.array(
            [(rows.ctypes.data if rows.shape[0] else 0, rows.shape[0]) for rows in term_rows], dtype=np.int64
        )
        stats6 = np.zeros(6, dtype=np.int64)
        # The same rows again, each naming its impact table (the dense pass reads those instead).
        tables: list[NDArray[np.int64]] = []
        impact_rows = [term_table.copy() for term_table in term_rows]
        if library.impacts is not None:
            for term_table in impact_rows:
                for row in term_table:
                    part = int(row[6])
                    norms_address = local_norms[part].ctypes.data
                    try:
                        tables.append(impact_table(library.impacts, row, norms_address, n_docs[part], k1))
                    except (ValueError, CorruptListError):
                        return False
                    row[7] = tables[-1].ctypes.data
        impact_refs = np.array(
            [(table.ctypes.data if table.shape[0] else 0, table.shape[0]) for table in impact_rows],
            dtype=np.int64,
        )
        modes = ("table", "by term", "impacts")
        for k, mode in ((k, mode) for k in (1, 5, 40, capacity) for mode in modes):
            by_term = mode != "table"
            outputs = (out_ids.ctypes.data, out_scores.ctypes.data, capacity, stats.ctypes.data)
            if by_term:
                if library.query is None or (mode == "impacts" and library.impacts is None):
                    continue
                refs = impact_refs if mode == "impacts" else term_refs
                by_term_inputs = (refs.ctypes.data, terms, weights.ctypes.data, parts.ctypes.data, 2)
                by_term_outputs = (*outputs[:3], stats6.ctypes.data)
                kept = library.query(*by_term_inputs, k1, b, avgdl, k, 1.0, *by_term_outputs)
            else:
                inputs = (table.ctypes.data, table.shape[0], parts.ctypes.data, 2, weights.ctypes.data, terms)
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
            if by_term and bool(stats6[5]) != bool(np.any(want_scores[1:kept] == want_scores[: kept - 1])):
                return False
    return True
