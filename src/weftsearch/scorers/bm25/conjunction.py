"""Query trees through the compiled conjunction kernel (:mod:`weftsearch.native.boolean`).

A tree fits when it is a phrase, a term, or a Bool node with at least one
``must`` clause whose clauses are, each with its own boost: ``must`` terms and
phrases, ``should`` terms and ``must_not`` terms, every term analysing to
exactly one term on the default field (a word of several terms, a stopword, a
prefix, a nested Bool node or another field goes to the numpy path of
:mod:`weftsearch.scorers.bm25.tree`, which defines the semantics and is the
oracle). A should-only tree of plain terms goes instead to the disjunctions'
one-call kernel, as plain query text (:func:`disjunction_terms` says when
that has the same bits; :func:`disjunction` lays it out). :func:`prepare`
lays a tree out for the kernel (remembered per snapshot) and :func:`run`
returns the ``k`` best in canonical order, with the same ids, score bits and
order as the numpy path: each clause's weight is what the numpy path
multiplies its impacts by (a term's IDF; a phrase's terms' IDFs added to 0.0
in order), and the kernel sums in the tree's clause order.

A phrase's terms are read from their packed positions (views of the segment
file), decoded by the kernel for the candidates only; the reader checks a
term's positions in full the first time it is used (remembered per segment,
up to :data:`POSITIONS_TERMS` terms).
"""

from __future__ import annotations

import array
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

import weftsearch.scorers.bm25.lists as layout
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import PlanValue
from weftsearch.errors import CorruptIndexError
from weftsearch.native import boolean as kernel
from weftsearch.querylang import BoolNode, Node, PhraseNode, TermNode
from weftsearch.schema import DEFAULT_FIELD
from weftsearch.scorers.bm25.idf import lucene_idf

__all__ = [
    "POSITIONS_TERMS",
    "PREPARED_TREES",
    "Layout",
    "Prepared",
    "disjunction_terms",
    "plan",
    "prepare",
    "run",
]

T = TypeVar("T")

#: Trees whose kernel set-up (:class:`Prepared`, a disjunction's, or that none fits) one
#: snapshot remembers; past it the oldest is dropped. An entry is about 1 KB of Python objects.
PREPARED_TREES = 4096

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
    if any(role == kernel.PHRASE for role, *_ in clauses) and not _has_positions(snapshot):
        return None  # the numpy path raises PhrasePositionsError
    return Layout(tuple(slots), tuple(clauses), tuple(boosts), root_boost)


def disjunction_terms(snapshot: Snapshot, tree: Node) -> list[str] | None:
    """The terms, in clause order, of a tree plain query text scores to the same bits, or ``None``.

    Such a tree is a ``should``-only Bool node (no boost) of distinct term
    clauses (no boost), each one word analysing to exactly one term of the
    default field. tree.py sums their scores from 0.0 in clause order;
    ``_bm25.c`` sums a document's contributions from 0.0 in the order of the
    terms it is given (every path: exact scores and dense sums), each
    contribution the same product, so given the terms in clause order it
    returns the same bits. Any other tree: ``None``.
    """
    if not isinstance(tree, BoolNode) or tree.must or tree.must_not or not tree.should or tree.boost != 1.0:
        return None
    terms: list[str] = []
    for node in tree.should:
        if not isinstance(node, TermNode) or node.boost != 1.0:
            return None
        term = _single(snapshot, node)
        if term is None:
            return None
        terms.append(term)
    return terms if len(set(terms)) == len(terms) else None


def may_be_disjunction(tree: Node | None) -> bool:
    """Whether ``tree`` has the shape :func:`disjunction` accepts (a Bool node of should clauses only)."""
    return isinstance(tree, BoolNode) and not tree.must and bool(tree.should)


def disjunction(snapshot: Snapshot, tree: Node) -> layout.TermQuery | None:
    """The one-call set-up (:func:`weftsearch.scorers.bm25.lists.plan`) of :func:`disjunction_terms`' tree.

    ``None`` when the tree is not such a disjunction. Remembered per snapshot
    and tree as :func:`prepare` is (not on a shard's view).
    """
    if not may_be_disjunction(tree):
        return None  # cheap refusals first: a conjunction's trees never reach the cache

    def build() -> layout.TermQuery | None:
        terms = disjunction_terms(snapshot, tree)
        return None if terms is None else layout.plan(snapshot, terms, None)

    return _remembered(snapshot, ("bm25 conjunction", "disjunctions"), tree, build)


def _remembered(snapshot: Snapshot, key: tuple[str, str], tree: Node, build: Callable[[], T]) -> T:
    """``build()``, remembered in ``snapshot``'s dictionary ``key`` by tree (:data:`PREPARED_TREES`, FIFO)."""
    if snapshot.statistics is not None:
        return build()  # a shard's view: its IDFs come from the collection's statistics
    cache: dict[Node, T] = snapshot.memo(key, dict)
    try:
        return cache[tree]
    except KeyError:
        pass
    found = build()
    with _POSITIONS_LOCK:
        if tree not in cache and len(cache) >= PREPARED_TREES:
            del cache[next(iter(cache))]
        cache[tree] = found
    return found


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


def _slot_positions(snapshot: Snapshot, term: str, rows: NDArray[np.int64]) -> tuple[int, Any] | None:
    """The address of ``term``'s positions fields aligned with its descriptor ``rows`` (7 int64 a row), kept.

    Built once per snapshot and term (at most :data:`POSITIONS_TERMS`, oldest
    dropped) from each segment's :func:`_positions`; ``None`` when a segment
    hands out no packed positions (the numpy path then runs).
    """
    cache: dict[str, tuple[int, Any] | None] = snapshot.memo(("bm25 conjunction", "positions"), dict)
    try:
        return cache[term]
    except KeyError:
        pass
    table = np.zeros((rows.shape[0], 7), dtype=np.int64)
    keep: list[Any] = [table]
    entry: tuple[int, Any] | None = None
    for at, part in enumerate(rows[:, 6].tolist()):
        found = _positions(snapshot.parts[part].reader, term)
        if found is None:
            break
        table[at] = found[0]
        keep.append(found[1])
    else:
        entry = (table.ctypes.data if rows.shape[0] else 0, tuple(keep))
    with _POSITIONS_LOCK:
        if term not in cache and len(cache) >= POSITIONS_TERMS:
            del cache[next(iter(cache))]
        cache[term] = entry
    return entry


def _has_positions(snapshot: Snapshot) -> bool:
    """Whether every segment of ``snapshot`` keeps positions (remembered with the snapshot)."""
    found: bool = snapshot.memo(
        ("bm25 conjunction", "has positions"),
        lambda: all(getattr(part.reader, "has_positions", False) for part in snapshot.parts),
    )
    return found


@dataclass(frozen=True, slots=True)
class Prepared:
    """A tree's arguments for ``weft_boolean_query`` on one snapshot, ready for :func:`run`.

    Attributes:
        slots: the analysed term of each slot (names a corrupt one).
        refs: :data:`~weftsearch.native.boolean.SLOT_FIELDS` int64 per slot (rows, count, positions).
        clauses: int64 ``(role, first slot, slots, slop)`` per clause, flat.
        weights: float64 per clause: the numpy path's factor of its impacts.
        boosts: float64 per clause.
        root_boost: the tree's own boost.
        head: the kernel's first :data:`~weftsearch.native.boolean.QUERY_HEAD` arguments
            (the addresses and counts of the above).
        keep: what the addresses point into (kept alive with them).
        terms, matched, postings: the plan's counts (distinct terms, those held, their live postings).
        avgdl: the snapshot's :attr:`~weftsearch.engine.snapshot.Snapshot.collection_avgdl`.
        segments: the snapshot's segments.
        ids_follow_keys: the snapshot's (one segment: the kernel's order is canonical).
        last_parts: one entry, the part table (and its address) :func:`run` last used with
            ``(k1, b, avgdl)`` and no filter, or ``None``: a repeated search skips the
            per-snapshot cache's keyed look-up (a tuple of floats hashed per query).

    """

    slots: tuple[str, ...]
    refs: array.array[int]
    clauses: array.array[int]
    weights: array.array[float]
    boosts: array.array[float]
    root_boost: float
    head: array.array[int]
    keep: tuple[Any, ...]
    terms: int
    matched: int
    postings: int
    avgdl: float
    segments: int
    ids_follow_keys: bool
    last_parts: list[tuple[float, float, float, NDArray[np.int64]] | None]


def prepare(snapshot: Snapshot, tree: Node) -> Prepared | None:
    """``tree``'s set-up for :func:`run` on ``snapshot``, or ``None`` (the numpy path then runs).

    ``None`` when the tree does not fit (:func:`plan`) or a segment hands out
    no packed positions for a phrase's term. Remembered per snapshot and tree
    (up to :data:`PREPARED_TREES`; not on a shard's view, whose IDFs come from
    the collection): a tree searched again costs a dictionary look-up here.
    The first time: :func:`plan` (each word's cached analysis), each slot's
    term in the snapshot's per-term cache of descriptor rows and IDFs
    (:mod:`weftsearch.scorers.bm25.lists`, the one the disjunctions use), a
    phrase's terms in a per-snapshot cache of their positions fields.
    """
    return _remembered(snapshot, ("bm25 conjunction", "prepared"), tree, lambda: _prepare(snapshot, tree))


def _prepare(snapshot: Snapshot, tree: Node) -> Prepared | None:
    laid = plan(snapshot, tree)
    if laid is None:
        return None
    slots = laid.slots
    entries = layout._terms(snapshot, layout._parts(snapshot), slots)
    if snapshot.statistics is None:
        idf = [entry.idf for entry in entries]
    else:
        local = np.array([entry.doc_freq for entry in entries], dtype=np.int64)
        frequencies = snapshot.collection_doc_freq(list(slots), local)
        idf = lucene_idf(snapshot.collection_n_docs, frequencies).tolist()
    weights = array.array("d")
    refs = array.array("q", [0] * (kernel.SLOT_FIELDS * len(slots)))
    keep: list[Any] = [entries]
    for role, first, count, _ in laid.clauses:
        if role == kernel.PHRASE:
            weight = 0.0
            for value in idf[first : first + count]:  # in phrase order, from 0.0: tree.py's sum
                weight += value
            for slot in range(first, first + count):
                found = _slot_positions(snapshot, slots[slot], entries[slot].rows)
                if found is None:
                    return None
                keep.append(found)
                refs[kernel.SLOT_FIELDS * slot + 2] = found[0]
        else:
            weight = idf[first]
        weights.append(weight)
    for slot, entry in enumerate(entries):
        refs[kernel.SLOT_FIELDS * slot] = entry.address
        refs[kernel.SLOT_FIELDS * slot + 1] = entry.n_rows
    frequencies_by_term = {term: entry.doc_freq for term, entry in zip(slots, entries, strict=True)}
    clauses = array.array("q", [field for clause in laid.clauses for field in clause])
    boosts = array.array("d", laid.boosts)
    head = array.array(
        "q",
        [
            refs.buffer_info()[0],
            len(slots),
            clauses.buffer_info()[0],
            len(laid.clauses),
            weights.buffer_info()[0],
            boosts.buffer_info()[0],
        ],
    )
    return Prepared(
        slots=slots,
        refs=refs,
        clauses=clauses,
        weights=weights,
        boosts=boosts,
        root_boost=float(laid.root_boost),
        head=head,
        keep=tuple(keep),
        terms=len(frequencies_by_term),
        matched=sum(1 for value in frequencies_by_term.values() if value),
        postings=sum(frequencies_by_term.values()),
        avgdl=snapshot.collection_avgdl,
        segments=len(snapshot.parts),
        ids_follow_keys=snapshot.ids_follow_keys,
        last_parts=[None],
    )


def run(
    library: kernel.CompiledBoolean,
    snapshot: Snapshot,
    prepared: Prepared,
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    allowed: NDArray[np.bool_] | None,
) -> tuple[NDArray[np.int64], NDArray[np.float64], dict[str, PlanValue]]:
    """The ``k`` best documents of the prepared tree, canonical order, and the search's plan.

    One kernel call (``weft_boolean_query``: it lays each slot's rows out by
    segment; see :func:`weftsearch.native.boolean.top_k` for the traversal),
    with the part table of the norms for ``(k1, b, avgdl)`` and the filter's
    id maps (both kept per snapshot). Same ids, score bits and order as the
    numpy path.

    Raises:
        CorruptIndexError: a term's postings or positions do not decode (the term is named).
        MemoryError: the kernel could not allocate its working memory.

    """
    last = prepared.last_parts[0] if allowed is None else None
    if last is not None and last[0] == k1 and last[1] == b and last[2] == avgdl:
        parts = last[3]
    else:
        parts = layout._part_table_for(snapshot, k1, b, avgdl, allowed)
        if allowed is None:
            prepared.last_parts[0] = (k1, b, avgdl, parts)  # one store: threads see old or new
    n_slots = len(prepared.slots)
    try:
        ids, scores, stats = kernel.query(library, prepared.head, prepared.root_boost, parts, k1, b, avgdl, k)
    except kernel.CorruptSlotError as error:
        n_parts = len(snapshot.parts)
        part, slot = divmod(error.index, n_slots) if 0 <= error.index < n_parts * n_slots else (0, -1)
        where = snapshot.parts[part].reader.path if n_parts else "?"
        term = prepared.slots[slot] if slot >= 0 else "?"
        raise CorruptIndexError(f"{where}: postings or positions of term {term!r} do not decode") from None
    plan_: dict[str, PlanValue] = {
        "path": "compiled",
        "terms": prepared.terms,
        "terms_matched": prepared.matched,
        "segments": prepared.segments,
        "postings": prepared.postings,
        "postings_scored": stats.candidates,
        "postings_skipped": stats.postings - stats.candidates,
        "blocks": stats.blocks,
        "blocks_skipped": stats.blocks - stats.blocks_decoded,
        "documents_scored": stats.documents_scored,
    }
    if prepared.ids_follow_keys and ids.shape[0] <= k:
        return ids, scores, plan_  # one segment, no tie past the k-th: already canonical
    found_ids, found_scores = layout._canonical(snapshot, ids, scores, k)
    return found_ids, found_scores, plan_
