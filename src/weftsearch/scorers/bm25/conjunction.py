"""Query trees through the compiled conjunction kernel (:mod:`weftsearch.native.boolean`).

A tree fits when it is a phrase, a term, or a Bool node with at least one
``must`` clause whose clauses are, each with its own boost: ``must`` terms and
phrases, ``should`` terms and ``must_not`` terms, every term analysing to
exactly one term on the default field (a word of several terms, a stopword, a
prefix, a nested Bool node or another field goes to the numpy path of
:mod:`weftsearch.scorers.bm25.tree`, which defines the semantics and is the
oracle). :func:`score` lays such a tree out for the kernel and returns the
``k`` best in canonical order, with the same ids, score bits and order as the
numpy path: each clause's weight is what the numpy path multiplies its
impacts by (a term's IDF; a phrase's terms' IDFs added to 0.0 in order), and
the kernel sums in the tree's clause order.

A phrase's terms are read from their packed positions (views of the segment
file), decoded by the kernel for the candidates only; the reader checks a
term's positions in full the first time it is used (remembered per segment,
up to :data:`POSITIONS_TERMS` terms).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

import weftsearch.scorers.bm25.lists as layout
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import PlanValue
from weftsearch.errors import CorruptIndexError
from weftsearch.native import boolean as kernel
from weftsearch.querylang import BoolNode, Node, PhraseNode, TermNode
from weftsearch.schema import DEFAULT_FIELD

__all__ = ["POSITIONS_TERMS", "Layout", "plan", "score"]

#: Terms whose positions descriptors one segment reader keeps (views of the file plus two small
#: tables: 8 bytes per 128 postings and per 128 positions); past it the oldest is dropped.
POSITIONS_TERMS = 4096


@dataclass(frozen=True, slots=True)
class Layout:
    """A tree as the kernel takes it.

    Attributes:
        slots: the analysed term of each slot (a phrase takes one slot per term, in order).
        clauses: ``(role, first slot, slots, slop)`` in the order the tree sums them.
        boosts: each clause's boost.
        root_boost: the tree's own boost (multiplied last).

    """

    slots: tuple[str, ...]
    clauses: tuple[tuple[int, int, int, int], ...]
    boosts: tuple[float, ...]
    root_boost: float


def _single(snapshot: Snapshot, node: TermNode) -> str | None:
    if node.field not in (None, DEFAULT_FIELD):
        return None
    terms = snapshot.query_terms(node.text)
    return terms[0] if len(terms) == 1 else None


def plan(snapshot: Snapshot, tree: Node) -> Layout | None:
    """The kernel's layout of ``tree``, or ``None`` when it does not fit (see the module docstring)."""
    if isinstance(tree, BoolNode):
        must, should, must_not, root_boost = tree.must, tree.should, tree.must_not, tree.boost
        if not must:
            return None
    elif isinstance(tree, (TermNode, PhraseNode)):
        must, should, must_not, root_boost = (tree,), (), (), 1.0
    else:
        return None
    slots: list[str] = []
    clauses: list[tuple[int, int, int, int]] = []
    boosts: list[float] = []
    for role, nodes in ((kernel.MUST, must), (kernel.SHOULD, should), (kernel.MUST_NOT, must_not)):
        for node in nodes:
            if isinstance(node, TermNode):
                term = _single(snapshot, node)
                if term is None:
                    return None
                clauses.append((role, len(slots), 1, 0))
                slots.append(term)
            elif isinstance(node, PhraseNode) and role == kernel.MUST:
                if node.field not in (None, DEFAULT_FIELD):
                    return None
                terms = [term for word in node.terms for term in snapshot.query_terms(word)]
                if not terms:
                    return None
                # A phrase of one term is that term (tree.py's _single: the same weight, the IDF).
                clauses.append(
                    (kernel.PHRASE if len(terms) > 1 else kernel.MUST, len(slots), len(terms), node.slop)
                )
                slots.extend(terms)
            else:
                return None
            boosts.append(node.boost)
    if len(slots) > kernel.MAX_SLOTS or len(clauses) > kernel.MAX_CLAUSES:
        return None
    if any(role == kernel.PHRASE for role, *_ in clauses) and not all(
        getattr(part.reader, "has_positions", False) for part in snapshot.parts
    ):
        return None  # the numpy path raises PhrasePositionsError
    return Layout(tuple(slots), tuple(clauses), tuple(boosts), root_boost)


class _Positions:
    """A segment reader's positions descriptors by term, at most :data:`POSITIONS_TERMS` (oldest dropped)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.terms: dict[str, tuple[tuple[int, ...], tuple[Any, ...]]] = {}


_POSITIONS: weakref.WeakKeyDictionary[Any, _Positions] = weakref.WeakKeyDictionary()
_POSITIONS_LOCK = threading.Lock()


def _positions(reader: Any, term: str) -> tuple[tuple[int, ...], tuple[Any, ...]] | None:
    """The last 7 fields of ``term``'s list descriptor in ``reader`` (its packed positions), and their arrays.

    ``None`` when the reader hands out no packed positions (the numpy path
    then runs). The first use of a term on a reader checks its positions
    (:meth:`~weftsearch.storage.segment.SegmentReader.packed_positions`: a full
    decode) and derives the kernel's tables from its tfs: O(postings +
    positions) once; after that O(1).
    """
    with _POSITIONS_LOCK:
        cache = _POSITIONS.get(reader)
        if cache is None:
            cache = _POSITIONS[reader] = _Positions()
    found = cache.terms.get(term)
    if found is not None:
        return found
    read = getattr(reader, "packed_positions", None)
    if read is None:
        return None
    try:
        packed = read(term)
    except KeyError:  # no positions section: the numpy path says so, typed
        return None
    if packed is None:
        return None
    words, widths = np.ascontiguousarray(packed[0], np.uint32), np.ascontiguousarray(packed[1], np.uint8)
    _, tfs = reader.postings(term)
    chunk_at, tf_before = kernel.positions_tables(tfs, widths)
    fallback = chunk_at.ctypes.data  # an empty run has no address of its own: any valid one will do
    fields = (
        words.ctypes.data if words.shape[0] else fallback,
        int(words.shape[0]),
        widths.ctypes.data if widths.shape[0] else fallback,
        int(widths.shape[0]),
        chunk_at.ctypes.data,
        tf_before.ctypes.data,
        0,
    )
    entry = (fields, (words, widths, chunk_at, tf_before))
    with cache.lock:
        if term not in cache.terms and len(cache.terms) >= POSITIONS_TERMS:
            del cache.terms[next(iter(cache.terms))]
        cache.terms[term] = entry
    return entry


def score(
    function: Callable[..., int],
    snapshot: Snapshot,
    layout_: Layout,
    idf: Callable[[list[str], NDArray[np.int64]], NDArray[np.float64]],
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    allowed: NDArray[np.bool_] | None,
) -> tuple[NDArray[np.int64], NDArray[np.float64], dict[str, PlanValue]] | None:
    """The ``k`` best documents of the laid-out tree, canonical order, and the search's plan.

    ``None`` when a segment hands out no packed positions for a phrase's term
    (the numpy path then runs).

    ``idf(terms, live_df)``: the numpy path's IDF of each term (the
    collection's document frequency where the snapshot carries one).
    O(lists' blocks) to open the lists, then the kernel (see
    :func:`weftsearch.native.boolean.top_k`), plus the positions of a
    phrase's terms the first time they are read on a segment (see :func:`_positions`).

    Raises:
        CorruptIndexError: a term's postings or positions do not decode (the term is named).
        MemoryError: the kernel could not allocate its working memory.

    """
    distinct = sorted(set(layout_.slots))
    index_of = {term: i for i, term in enumerate(distinct)}
    lists = layout.gather(snapshot, distinct)
    values = idf(distinct, lists.doc_freq).tolist()
    weights: list[float] = []
    for role, first, count, _ in layout_.clauses:
        if role == kernel.PHRASE:
            weight = 0.0
            for term in layout_.slots[first : first + count]:  # in phrase order, from 0.0: tree.py's sum
                weight += values[index_of[term]]
        else:
            weight = values[index_of[layout_.slots[first]]]
        weights.append(weight)
    n_slots = len(layout_.slots)
    n_parts = len(snapshot.parts)
    table = np.zeros((n_parts * n_slots, kernel.LIST_FIELDS), dtype=np.int64)
    phrase_slot = [False] * n_slots
    for role, first, count, _ in layout_.clauses:
        if role == kernel.PHRASE:
            phrase_slot[first : first + count] = [True] * count
    keep: list[Any] = [lists]
    for row in lists.table.tolist():
        term, part = distinct[row[5]], row[6]
        for slot, name in enumerate(layout_.slots):
            if name != term:
                continue
            at = part * n_slots + slot
            table[at, :5] = row[:5]
            if phrase_slot[slot]:
                found = _positions(snapshot.parts[part].reader, term)
                if found is None:
                    return None
                keep.append(found[1])
                table[at, 5:] = found[0]
    parts, _ = layout._part_table(snapshot, k1, b, avgdl)
    if allowed is not None:
        maps = layout._filtered_maps(snapshot, allowed)
        keep.append(maps)
        parts = parts.copy()
        parts[:, 1] = [mapping.ctypes.data for mapping in maps]
    clauses = np.array(layout_.clauses, dtype=np.int64).reshape(-1, kernel.CLAUSE_FIELDS)
    try:
        ids, scores, stats = kernel.top_k(
            function,
            table,
            n_slots,
            clauses,
            np.array(weights, dtype=np.float64),
            np.array(layout_.boosts, dtype=np.float64),
            float(layout_.root_boost),
            parts,
            k1,
            k,
        )
    except kernel.CorruptSlotError as error:
        part, slot = divmod(error.index, n_slots) if 0 <= error.index < table.shape[0] else (0, -1)
        where = snapshot.parts[part].reader.path if n_parts else "?"
        term = layout_.slots[slot] if slot >= 0 else "?"
        raise CorruptIndexError(f"{where}: postings or positions of term {term!r} do not decode") from None
    frequencies = lists.doc_freq.tolist()
    plan_: dict[str, PlanValue] = {
        "path": "compiled",
        "terms": len(distinct),
        "terms_matched": len(frequencies) - frequencies.count(0),
        "segments": n_parts,
        "postings": sum(frequencies),
        "postings_scored": stats.candidates,
        "postings_skipped": stats.postings - stats.candidates,
        "blocks": stats.blocks,
        "blocks_skipped": stats.blocks - stats.blocks_decoded,
        "documents_scored": stats.documents_scored,
    }
    found_ids, found_scores = layout._canonical(snapshot, ids, scores, k)
    return found_ids, found_scores, plan_
