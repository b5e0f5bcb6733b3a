"""The conjunction kernel (``_boolean.c``): BM25 top-k of a tree's must/should/must_not terms and phrases.

This module binds the library and runs it over arrays: list descriptors
(:data:`LIST_FIELDS` int64 per slot and segment: packed words, block table,
counts, and for a phrase's terms their packed positions with the tables of
:func:`positions_tables`), clause descriptors
(:data:`CLAUSE_FIELDS` int64 per clause: role, first slot, slots, slop), one
weight and one boost per clause, and the part descriptors of
:mod:`weftsearch.native.bm25` (length norms, id map, base, documents). Which
trees fit and how a snapshot becomes those arrays is
:mod:`weftsearch.scorers.bm25.conjunction`'s business.

The kernel drives each segment by its rarest must list and moves the others
to each candidate by their blocks' last ids, decoding a block only when it can
hold the candidate; once it holds k results, a block of the driving list
whose clauses' block-max bounds cannot reach the k-th score is passed without
decoding it or moving the others (block-max, as ``_bm25.c`` for
disjunctions); phrases are verified on the candidates that pass the
conjunction, the tombstones, the filter and the must_not terms, and whose
bound reaches the k-th score.

:func:`query` (``weft_boolean_query``) takes each slot's cached descriptor
rows (the rows :mod:`weftsearch.scorers.bm25.lists` keeps per snapshot and
term for ``_bm25.c``) and lays them out by segment in C; :func:`top_k` takes
a table laid out by the caller. Scores are
:mod:`weftsearch.scorers.bm25.tree`'s numpy evaluation to the bit (the same
float64 operations in the same order; checked on load), every document tied
with the k-th score is returned, and the GIL is released for the whole call.

Optional like every compiled part: not built, switched off
(:data:`DISABLE_VARIABLE`) or disagreeing with the formula in its self-check,
:func:`compiled_boolean` returns ``None`` and trees are scored by numpy.
"""

from __future__ import annotations

import array
import ctypes
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import CorruptIndexError
from weftsearch.native.loader import BOOLEAN_SWITCH, Scratch, load_library
from weftsearch.storage.postings import (
    BLOCK_ROWS,
    POSTINGS_BLOCK,
    pack_positions,
    pack_postings,
    positions_chunks,
)

__all__ = [
    "CLAUSE_FIELDS",
    "DISABLE_VARIABLE",
    "LIST_FIELDS",
    "MAX_CLAUSES",
    "MAX_SLOTS",
    "MUST",
    "MUST_NOT",
    "PHRASE",
    "SHOULD",
    "QUERY_ARGS",
    "QUERY_HEAD",
    "SLOT_FIELDS",
    "BooleanStats",
    "CompiledBoolean",
    "CorruptSlotError",
    "compiled_boolean",
    "positions_tables",
    "query",
    "top_k",
]

#: Set to ``1`` to turn the compiled conjunctions off (numpy computes the same results).
DISABLE_VARIABLE = BOOLEAN_SWITCH

#: int64 fields of one list descriptor and one clause descriptor (see ``_boolean.c``).
LIST_FIELDS = 12
CLAUSE_FIELDS = 4
#: int64 fields per slot of :func:`query`: rows address, rows, positions fields address (or 0).
SLOT_FIELDS = 3
#: int64 arguments of ``weft_boolean_query`` (the first :data:`QUERY_HEAD` are a tree's own).
QUERY_ARGS = 13
QUERY_HEAD = 6
# The call's own int64 arguments after the head (parts, n_parts, k, ids, scores, capacity, stats)
# and its four reals, each written in one call: an array's item assignment parses its value
# as a format (~0.1 us each), and a query wrote eleven.
_ARGS_TAIL = struct.Struct(f"={QUERY_ARGS - QUERY_HEAD}q")
_REALS = struct.Struct("=4d")
#: Most term slots (a phrase takes one per term) and clauses in one call (``_boolean.c``'s limits).
MAX_SLOTS = 64
MAX_CLAUSES = 64

#: Clause roles: a must term, a must phrase, a should term, a must_not term.
MUST, PHRASE, SHOULD, MUST_NOT = 0, 1, 2, 3

_POINTER = ctypes.c_void_p
_INT = ctypes.c_int64
_DOUBLE = ctypes.c_double


class BooleanStats(NamedTuple):
    """What one call read (for plans and benchmarks; the scores never depend on it).

    Attributes:
        blocks: blocks of 128 postings in the query's lists.
        blocks_decoded: blocks whose ids were decoded (the others were skipped by their last ids).
        postings: postings in the query's lists.
        candidates: documents holding every must term (before tombstones, filter,
            must_not terms and phrases).
        documents_scored: documents that matched and were scored.
        windows_skipped: blocks of the driving list passed by their block-max bound.

    """

    blocks: int
    blocks_decoded: int
    postings: int
    candidates: int
    documents_scored: int
    windows_skipped: int = 0


@dataclass(frozen=True, slots=True)
class CompiledBoolean:
    """The bound library: ``weft_boolean_top_k`` (a laid-out table), ``weft_boolean_query`` (cached rows)."""

    top_k: Callable[..., int]
    query: Callable[..., int]


class CorruptSlotError(CorruptIndexError):
    """Row ``index`` of the list table does not decode (its postings, block table or positions)."""

    def __init__(self, index: int) -> None:
        super().__init__("packed postings of a query term do not decode")
        self.index = index


def positions_tables(
    tfs: NDArray[np.uint32], widths: NDArray[np.uint8]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The two tables ``_boolean.c`` finds a posting's positions with: ``(chunk_at, tf_before)``.

    ``tfs``: one term's postings' frequencies in one segment; ``widths``: its
    chunks' bit widths as stored. ``chunk_at``: each chunk's first word (one
    more entry: the words); ``tf_before``: the positions before each block of
    128 postings (one more entry: all of them). O(postings / 128 + chunks),
    vectorised; the kernel checks both against the words before reading.
    """
    tf = np.asarray(tfs, dtype=np.int64)
    tf_before = np.zeros((tf.shape[0] + POSTINGS_BLOCK - 1) // POSTINGS_BLOCK + 1, dtype=np.int64)
    if tf.shape[0]:
        np.cumsum(np.add.reduceat(tf, np.arange(0, tf.shape[0], POSTINGS_BLOCK)), out=tf_before[1:])
    total = int(tf_before[-1])
    counts = np.full(widths.shape[0], POSTINGS_BLOCK, dtype=np.int64)
    if counts.shape[0]:
        counts[-1] = total - POSTINGS_BLOCK * (counts.shape[0] - 1)
    chunk_at = np.zeros(widths.shape[0] + 1, dtype=np.int64)
    np.cumsum((counts * widths.astype(np.int64) + 31) // 32, out=chunk_at[1:])
    return chunk_at, tf_before


@cache
def compiled_boolean() -> CompiledBoolean | None:
    """The library bound and self-checked, or ``None`` (trees are scored by numpy)."""
    return load_library("_boolean", _bind, _agrees_with_formula)


def _bind(library: ctypes.CDLL) -> CompiledBoolean:
    table = library.weft_boolean_top_k
    # lists, n_slots, clauses, n_clauses, weights, boosts, root_boost, parts, n_parts, k1, b,
    # avgdl, k, ids_out, scores_out, out_capacity, stats.
    table.argtypes = [_POINTER, _INT, _POINTER, _INT, _POINTER, _POINTER, _DOUBLE, _POINTER, _INT]
    table.argtypes += [_DOUBLE, _DOUBLE, _DOUBLE, _INT, _POINTER, _POINTER, _INT, _POINTER]
    table.restype = _INT
    query_ = library.weft_boolean_query
    query_.argtypes = [_POINTER, _POINTER]  # args (13 int64), reals (4 float64): see _boolean.c
    query_.restype = _INT
    return CompiledBoolean(table, query_)


class _QueryScratch(Scratch):
    """:class:`Scratch` with six counters (the kernel's statistics) and :func:`query`'s argument arrays."""

    def __init__(self) -> None:
        super().__init__()
        self.stats = np.zeros(6, dtype=np.int64)
        self.stats_address = self.stats.ctypes.data
        self.args = array.array("q", bytes(8 * QUERY_ARGS))
        self.reals = array.array("d", bytes(8 * 4))
        self.args_address = self.args.buffer_info()[0]
        self.reals_address = self.reals.buffer_info()[0]


_scratch = _QueryScratch()


def _call(
    function: Callable[..., int],
    first: int,
    n_slots: int,
    clauses: int,
    n_clauses: int,
    weights: int,
    boosts: int,
    root_boost: float,
    parts: NDArray[np.int64],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
) -> tuple[NDArray[np.int64], NDArray[np.float64], BooleanStats]:
    """One kernel call into this thread's scratch (again with more room when the ties need it)."""
    scratch = _scratch
    while True:
        kept = function(
            first,
            n_slots,
            clauses,
            n_clauses,
            weights,
            boosts,
            root_boost,
            parts.ctypes.data,
            parts.shape[0],
            k1,
            b,
            avgdl,
            k,
            scratch.ids_address,
            scratch.scores_address,
            scratch.capacity,
            scratch.stats_address,
        )
        if kept < 0:
            _raise(kept, scratch)
        if kept <= scratch.capacity:
            break
        scratch.reserve(kept)  # more ties than room: run again (the same result, now written)
    stats = BooleanStats._make(scratch.stats.tolist())
    return scratch.ids[:kept].copy(), scratch.scores[:kept].copy(), stats


def query(
    library: CompiledBoolean,
    head: array.array[int],
    root_boost: float,
    parts: NDArray[np.int64],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
) -> tuple[NDArray[np.int64], NDArray[np.float64], BooleanStats]:
    """:func:`top_k` from each slot's cached rows (``weft_boolean_query``), in two argument arrays.

    ``head``: the tree's :data:`QUERY_HEAD` int64 arguments (addresses of
    :data:`SLOT_FIELDS` int64 per slot, its rows' address and count and its
    positions fields' address or 0; the slots; int64 ``(clauses, 4)``; the
    clauses; float64 weights and boosts per clause), whose arrays the caller
    keeps alive. ``b`` and ``avgdl`` are the norms' own (the block bounds
    recompute a block's smallest norm). Runs without the GIL.

    Raises:
        CorruptSlotError: a row's postings or positions do not decode (``index``: part * slots + slot).
        MemoryError: the library could not allocate its working memory.
        ValueError: the library refused the arguments (a bug of the caller).

    """
    scratch = _scratch
    # This thread's attributes as a plain dict: each attribute read through a threading.local
    # looks the thread's dict up again (a search reads a dozen; ~1.5 us of a SciFact query).
    mine = scratch.__dict__
    args, reals = mine["args"], mine["reals"]
    args[:QUERY_HEAD] = head
    _REALS.pack_into(reals, 0, root_boost, k1, b, avgdl)
    address, n_parts, stats = _address(parts), parts.shape[0], mine["stats_address"]
    function = library.query
    while True:
        capacity = mine["capacity"]
        _ARGS_TAIL.pack_into(
            args,
            8 * QUERY_HEAD,
            address,
            n_parts,
            k,
            mine["ids_address"],
            mine["scores_address"],
            capacity,
            stats,
        )
        kept = function(mine["args_address"], mine["reals_address"])
        if kept < 0:
            _raise(kept, scratch)
        if kept <= capacity:
            break
        scratch.reserve(kept)  # more ties than room: run again (the same result, now written)
    stats = BooleanStats._make(mine["stats"].tolist())
    return mine["ids"][:kept].copy(), mine["scores"][:kept].copy(), stats


# Part tables' addresses by id (each entry holds its table, so the id is not reused while it
# is here): ``ndarray.ctypes.data`` costs more than the rest of a call's Python. A table is
# one per snapshot and parameters, so a few dozen entries cover every live snapshot.
_ADDRESSES: dict[int, tuple[NDArray[np.int64], int]] = {}
_ADDRESSES_MAX = 64
_ADDRESSES_LOCK = threading.Lock()


def _address(table: NDArray[np.int64]) -> int:
    found = _ADDRESSES.get(id(table))
    if found is not None and found[0] is table:
        return found[1]
    address = int(table.ctypes.data)
    with _ADDRESSES_LOCK:
        while len(_ADDRESSES) >= _ADDRESSES_MAX:
            del _ADDRESSES[next(iter(_ADDRESSES))]
        _ADDRESSES[id(table)] = (table, address)
    return address


def _raise(code: int, scratch: _QueryScratch) -> None:
    if code == -1:
        raise MemoryError("the conjunction kernel could not allocate its working memory")
    if code == -3:
        raise CorruptSlotError(int(scratch.stats[0]))
    raise ValueError(f"the conjunction kernel refused its arguments (code {code})")


def top_k(
    library: CompiledBoolean,
    lists: NDArray[np.int64],
    n_slots: int,
    clauses: NDArray[np.int64],
    weights: NDArray[np.float64],
    boosts: NDArray[np.float64],
    root_boost: float,
    parts: NDArray[np.int64],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
) -> tuple[NDArray[np.int64], NDArray[np.float64], BooleanStats]:
    """Every matching document scoring at least the k-th best score, best first (score desc, internal id asc).

    ``lists``: int64 ``(parts * n_slots, LIST_FIELDS)``, row ``p * slots + s`` slot ``s``
    in part ``p`` (count 0: absent there); ``clauses``: int64 ``(clauses, 4)``
    in the tree's summing order. Ties with the k-th score are all returned.
    Runs without the GIL. O(candidates * clauses * log) plus the blocks
    decoded; blocks past which a list is moved are not decoded.

    Raises:
        CorruptSlotError: a row's postings or positions do not decode.
        MemoryError: the library could not allocate its working memory.
        ValueError: the library refused the arguments (a bug of the caller).

    """
    lists = np.ascontiguousarray(lists, dtype=np.int64)
    clauses = np.ascontiguousarray(clauses, dtype=np.int64)
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    boosts = np.ascontiguousarray(boosts, dtype=np.float64)
    parts = np.ascontiguousarray(parts, dtype=np.int64)
    return _call(
        library.top_k,
        lists.ctypes.data,
        n_slots,
        clauses.ctypes.data,
        clauses.shape[0],
        weights.ctypes.data,
        boosts.ctypes.data,
        root_boost,
        parts,
        k1,
        b,
        avgdl,
        k,
    )


# --------------------------------------------------------------------------- the self-check


def _agrees_with_formula(function: CompiledBoolean) -> bool:
    """Random texts, one tombstoned segment: every clause role against Python floats, every bit."""
    rng = np.random.default_rng(1)
    n_docs, vocabulary = 400, 5
    texts = [rng.integers(0, vocabulary, int(rng.integers(1, 12))) for _ in range(n_docs)]
    lengths = np.array([text.shape[0] for text in texts], dtype=np.uint32)
    deleted = rng.random(n_docs) < 0.1
    to_global = np.where(deleted, -1, np.cumsum(~deleted) - 1).astype(np.int64)
    k1, b = 1.2, 0.75
    avgdl = float(lengths[~deleted].sum()) / float((~deleted).sum())
    norms = np.ascontiguousarray(k1 * (1.0 - b + b * lengths.astype(np.float64) / avgdl))
    keep: list[object] = [norms, to_global]  # alive while the descriptors point into them
    rows = []
    where: list[dict[int, list[int]]] = []
    for term in range(vocabulary):
        found = {doc: np.flatnonzero(text == term).tolist() for doc, text in enumerate(texts)}
        found = {doc: at for doc, at in found.items() if at}
        where.append(found)
        ids = np.array(sorted(found), dtype=np.uint32)
        tfs = np.array([len(found[doc]) for doc in sorted(found)], dtype=np.uint32)
        pack = pack_postings(ids, tfs, np.array([0, ids.shape[0]], np.uint64), lengths)
        at = np.array([p for doc in sorted(found) for p in found[doc]], dtype=np.uint32)
        packed = pack_positions(at, tfs, np.array([0, ids.shape[0]], np.uint64))
        chunk_words, chunk_widths = positions_chunks(packed.data, at.shape[0])
        chunk_at, tf_before = positions_tables(tfs, chunk_widths)
        keep += [pack.data, pack.blocks, chunk_words, chunk_widths, chunk_at, tf_before]
        data = pack.data.ctypes.data if pack.data.shape[0] else pack.blocks.ctypes.data
        row = [
            data,
            pack.data.shape[0],
            ids.shape[0],
            pack.blocks.ctypes.data,
            pack.blocks.shape[0] // BLOCK_ROWS,
        ]
        positions = [
            chunk_words.ctypes.data if chunk_words.shape[0] else chunk_at.ctypes.data,
            chunk_words.shape[0],
            chunk_widths.ctypes.data if chunk_widths.shape[0] else chunk_at.ctypes.data,
            chunk_widths.shape[0],
            chunk_at.ctypes.data,
            tf_before.ctypes.data,
            0,
        ]
        rows.append((row, positions))
    # must 0 (boost 2.5), must phrase (1, 2) slop 1, should 3, must_not 4.
    slots = [0, 1, 2, 3, 4]
    # Only the phrase's slots (1 and 2) carry positions.
    lists = np.array(
        [rows[term][0] + (rows[term][1] if term in (1, 2) else [0] * 7) for term in slots], dtype=np.int64
    )
    clauses = np.array([(MUST, 0, 1, 0), (PHRASE, 1, 2, 1), (SHOULD, 3, 1, 0), (MUST_NOT, 4, 1, 0)], np.int64)
    weights = np.array([0.7, 1.9, 0.3, 1.0])
    boosts = np.array([2.5, 1.0, 0.5, 1.0])
    parts = np.array([(norms.ctypes.data, to_global.ctypes.data, 0, n_docs)], dtype=np.int64)
    expected: list[tuple[float, int]] = []
    for doc in range(n_docs):
        if deleted[doc] or doc not in where[0] or doc in where[4]:
            continue
        firsts, seconds = where[1].get(doc, []), set(where[2].get(doc, []))
        # slop 1 over two terms: p1 - 1 within 1 of p0
        freq = sum(1 for p in firsts if {p, p + 1, p + 2} & seconds)
        if not freq:
            continue
        score = 0.0
        for weight, boost, tf in ((0.7, 2.5, len(where[0][doc])), (1.9, 1.0, freq), (0.3, 0.5, None)):
            if tf is None:
                if doc not in where[3]:
                    continue
                tf = len(where[3][doc])
            value = float(tf)
            score = score + (weight * ((value * (k1 + 1.0)) / (value + float(norms[doc])))) * boost
        expected.append((score * 1.5, int(to_global[doc])))
    expected.sort(key=lambda item: (-item[0], item[1]))
    for k in (1, 3, 1000):
        got_ids, got_scores, _ = top_k(
            function, lists, len(slots), clauses, weights, boosts, 1.5, parts, k1, b, avgdl, k
        )
        want = expected if k >= len(expected) else [e for e in expected if e[0] >= expected[k - 1][0]]
        if [(float(s), int(i)) for s, i in zip(got_scores, got_ids, strict=True)] != want:
            return False
    return bool(expected)
