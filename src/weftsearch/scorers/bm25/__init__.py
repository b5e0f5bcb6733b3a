"""BM25 over the snapshot's inverted index.

Score of document d for query q (Robertson & Zaragoza 2009, "The Probabilistic
Relevance Framework: BM25 and Beyond", eq. 3.15, with Lucene's IDF)::

    sum over distinct terms t of q:
        qtf(t) * idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

``qtf`` is how often t occurs in the analysed query, so a repeated query term
counts once per occurrence, as in rank_bm25 and Lucene. This IDF is Lucene's
non-negative form: it stays above 0 even for a term in every document, so a
document holding any query term always scores above 0, and a document holding
none is absent from the stream. N, avgdl and df come from one snapshot (a
shard's view carries the whole collection's: ``Snapshot.with_statistics``).

**The IDF is the same bits on every machine.** It is the exact
``ln((2N + 2) / (2 df + 1))`` (the same number, without the float quotient),
evaluated in :mod:`decimal` at 40 digits and rounded once to float64. numpy's
``log1p`` is not: on a CPU with AVX-512 numpy dispatches it to a SIMD kernel
that differs from the scalar one in the last bit for about 7% of CACM's
document frequencies, and seed-weighted PageRank (``restart="score"``)
carries those bits into which documents tie after fusion (docs/EVAL.md,
Experiment 4, printed 3,738 tie-break slots on one x86-64 machine and 3,736
on another). The C library's ``log1p`` has per-CPU variants too.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from weftsearch.analysis import get_analyzer
from weftsearch.engine.explanation import Explanation
from weftsearch.engine.inflight import searches_in_flight
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import QueryTerms, Snapshot
from weftsearch.engine.stream import (
    PlanValue,
    Stream,
    _vouched_batch,
    _vouched_kernel_stream,
    _vouched_stream,
    check_k,
    top_k,
)
from weftsearch.errors import InvalidParameterError, UnknownTextFieldError
from weftsearch.native import bm25 as kernel
from weftsearch.native import boolean as boolean_kernel
from weftsearch.schema import DEFAULT_FIELD, Schema
from weftsearch.scorers.bm25 import conjunction, explain
from weftsearch.scorers.bm25 import lists as layout
from weftsearch.scorers.bm25.idf import lucene_idf
from weftsearch.scorers.bm25.tree import BM25FScope, BM25Scope, Field, Matches, Scope, Tally, TreeScorer

__all__ = ["PLAN_KEYS", "TERM_CACHE_POSTINGS", "BM25Scorer", "lucene_idf"]

# How a query's postings are summed per document. Both ways add the same
# numbers in the same order (np.bincount adds its weights in input order, and
# the input runs term by term), so the choice never changes a score, only its
# cost. Dense: np.bincount into an array of N scores, O(N + P) for P postings.
# Sparse: a stable sort of the P ids, O(P log P). Where each wins is measured in
# docs/BENCHMARKS.md, "BM25 path thresholds".
_DENSE_BELOW_DOCS = 20_000
_DENSE_RATIO = 0.05

# score() and score_many() run the compiled kernel (weftsearch.native.bm25) on snapshots
# of at least this many documents: 0, every size, since a query became one call from the
# snapshot's per-term descriptor rows (issue 31; before, numpy won below 20,000 documents
# on a search alone, and held the GIL there). The numpy path stays as the oracle (tests set
# this high to run it) and as the fallback where the library is missing. Both give the same
# results to the bit. Figures: docs/BENCHMARKS.md, "One compiled call per query".
_COMPILED_FROM_DOCS = 0

#: The snapshot memo key (with k1 and b) of :meth:`BM25Scorer._kept_setup`.
_KEPT_SETUP = "bm25 kept set-up"

#: Threads :meth:`BM25Scorer.score_many` accepts at most (as ``search_many``); the C side
#: starts at most 64 of them.
MAX_BATCH_THREADS = 256

# score_many() runs the compiled batch below _COMPILED_FROM_DOCS too when k is at most
# this: one call for the batch saves the per-query call overhead, which is what the numpy
# path's lead at small k is made of, and the batch runs without the GIL (figures:
# docs/BENCHMARKS.md, "BM25 path thresholds").
_BATCH_COMPILED_MAX_K = 10

# score() seeds its top-k threshold with one term's documents (see there); a
# term needs at least this many postings to be preferred as the seed, so that
# its k-th best document is a useful floor.
_MIN_SEED = 64

#: The keys of :attr:`Stream.plan <weftsearch.engine.stream.Stream.plan>` this scorer fills, in
#: order; every path fills every key (``None``: a count that path does not take):
#:
#: - ``path``: ``"compiled"`` (``_bm25.c``, block-max) or ``"numpy"`` (every posting).
#: - ``terms``: distinct terms of the analysed query.
#: - ``terms_matched``: of those, the terms held by at least one live document here.
#: - ``segments``: segments of the snapshot searched.
#: - ``postings``: live postings in the matched terms' lists (the sum of their document
#:   frequencies on this snapshot; a shard: on this shard).
#: - ``postings_scored``: postings whose contribution was computed (numpy: all of ``postings``;
#:   compiled: a deleted or filtered-out document's too where the kernel read its list through
#:   before checking the document).
#: - ``postings_skipped``: postings in the lists, deleted documents' included, that block-max
#:   never scored (compiled; numpy: 0, it scores every one).
#: - ``blocks``: blocks of 128 postings in the lists, deleted documents' included (compiled;
#:   numpy: ``None``, it reads no blocks).
#: - ``blocks_skipped``: blocks of which no posting was scored (compiled; numpy: ``None``).
#: - ``documents_scored``: documents whose full score was computed (compiled; numpy: ``None``:
#:   it scores every document holding a term, and counting them would cost a pass over N).
#:
#: The counts come from the kernel's own counters or from array sizes, never from a pass
#: over postings, so a plan costs a few integers per search.
PLAN_KEYS = (
    "path",
    "terms",
    "terms_matched",
    "segments",
    "postings",
    "postings_scored",
    "postings_skipped",
    "blocks",
    "blocks_skipped",
    "documents_scored",
)


def _numpy_plan(terms: int, matched: int, segments: int, postings: int) -> dict[str, PlanValue]:
    """The plan of a numpy search (see :data:`PLAN_KEYS`): every live posting of the query scored."""
    return {
        "path": "numpy",
        "terms": terms,
        "terms_matched": matched,
        "segments": segments,
        "postings": postings,
        "postings_scored": postings,
        "postings_skipped": 0,
        "blocks": None,
        "blocks_skipped": None,
        "documents_scored": None,
    }


def _compiled_plan(
    terms: int, matched: int, segments: int, postings: int, stats: kernel.KernelStats | Sequence[int] | None
) -> dict[str, PlanValue]:
    """The plan of a compiled search (see :data:`PLAN_KEYS`); ``stats`` ``None``: no list to read.

    ``stats``: a :class:`~weftsearch.native.bm25.KernelStats`, or the kernel's
    statistics row in its field order (a batch's, read without a tuple per query).
    """
    if stats is None:
        blocks = blocks_scored = stored = scored = documents = 0
    else:
        blocks, blocks_scored, stored, scored, documents = stats[0], stats[1], stats[2], stats[3], stats[4]
    return {
        "path": "compiled",
        "terms": terms,
        "terms_matched": matched,
        "segments": segments,
        "postings": postings,
        "postings_scored": scored,
        "postings_skipped": stored - scored,
        "blocks": blocks,
        "blocks_skipped": blocks - blocks_scored,
        "documents_scored": documents,
    }


class _BatchPlans:
    """The plans of a batch's queries (:func:`_compiled_plan`), each made when first asked for."""

    __slots__ = ("_matched", "_postings", "_segments", "_stats", "_terms")

    def __init__(
        self,
        segments: int,
        terms: NDArray[np.int64],
        matched: NDArray[np.int64],
        postings: NDArray[np.int64],
        stats: NDArray[np.int64],
    ) -> None:
        self._segments = segments
        self._terms, self._matched, self._postings, self._stats = terms, matched, postings, stats

    def plan(self, position: int) -> dict[str, PlanValue]:
        """Query ``position``'s plan, a new dict of Python ints. O(1)."""
        return _compiled_plan(
            int(self._terms[position]),
            int(self._matched[position]),
            self._segments,
            int(self._postings[position]),
            self._stats[position].tolist(),
        )


class _Found(NamedTuple):
    """A query's lists for the kernel, its per-term counts (``None``: each term once), and plan counts.

    ``lists`` is ``None`` when nothing matches. ``terms``, ``matched`` and
    ``postings``: the plan's ``terms``, ``terms_matched`` and ``postings``.
    A named tuple: made once per query, it costs a third of a frozen dataclass.
    """

    lists: layout.QueryLists | None
    query_tf: NDArray[np.float64] | None
    terms: int
    matched: int
    postings: int


@dataclass(frozen=True, slots=True)
class _TermPostings:
    """One term's postings on one snapshot, as cached per (k1, b).

    Attributes:
        ids: internal ids holding the term, ascending (read-only).
        impacts: float64 ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))``
            of each posting (read-only).

    """

    ids: NDArray[np.int64]
    impacts: NDArray[np.float64]


#: Postings the per-term impact cache of one snapshot and (k1, b) holds at most. Each
#: posting costs 16 bytes (an int64 id, a float64 impact), so the bound is 64 MiB per
#: snapshot and parameter pair, whatever the number of distinct queries; beyond it the
#: least recently used terms are evicted. Before the bound, 1,000 queries grew a process
#: by 275 MB at 100k documents and 748 MB at 1M (issue 14).
TERM_CACHE_POSTINGS = 4_000_000


class _TermCache:
    """A least-recently-used map term -> :class:`_TermPostings`, bounded by postings held.

    Thread-safe (one lock around each lookup and insertion, never around the
    computation of an entry: two threads may compute the same term, and one
    insertion wins; both are the same arrays to the bit). A term holding more
    postings than the whole budget is never kept. O(1) per lookup.
    """

    __slots__ = ("_budget", "_entries", "_held", "_lock")

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._entries: OrderedDict[str, _TermPostings] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    @property
    def postings(self) -> int:
        """Postings held now (at most the budget)."""
        return self._held

    def get(self, term: str) -> _TermPostings | None:
        with self._lock:
            entry = self._entries.get(term)
            if entry is not None:
                self._entries.move_to_end(term)
            return entry

    def put(self, term: str, entry: _TermPostings) -> None:
        size = int(entry.ids.shape[0])
        if size > self._budget:
            return
        with self._lock:
            if term in self._entries:
                return
            self._entries[term] = entry
            self._held += size
            while self._held > self._budget:
                _, evicted = self._entries.popitem(last=False)
                self._held -= int(evicted.ids.shape[0])


@dataclass(frozen=True, slots=True)
class _QueryPostings:
    """One query's postings, term by term in sorted term order, and their contributions.

    Attributes:
        ids: internal ids, ascending within each term (read-only and the
            term's own array when ``single``).
        contributions: float64 ``qtf * idf * impact`` of each posting.
        single: one term only, so ``ids`` are unique and ``contributions`` are
            the scores.
        seed_ids: the ids of the term whose documents seed score()'s
            threshold (``None`` when ``single``).

    """

    ids: NDArray[np.int64]
    contributions: NDArray[np.float64]
    single: bool
    seed_ids: NDArray[np.int64] | None = None


def _field_terms(schema: Schema, name: str) -> QueryTerms:
    """The cached query analysis of text field ``name`` (its own analyzer, from the schema)."""
    return QueryTerms(get_analyzer(schema.field(name).analyzer))


def _field_weights(
    fields: Mapping[str, float] | None, field_b: Mapping[str, float] | None
) -> tuple[dict[str, float] | None, dict[str, float]]:
    """``fields`` and ``field_b`` checked and copied (BM25F's weights and per-field ``b``).

    Raises:
        InvalidParameterError: not a mapping of names to numbers, a weight not
            finite and above 0, a ``b`` outside [0, 1], ``field_b`` naming a
            field ``fields`` lacks, or ``field_b`` without ``fields``.

    """
    if fields is None:
        if field_b:
            raise InvalidParameterError("BM25 field_b needs fields (the fields to score)")
        return None, {}
    if not isinstance(fields, Mapping) or not fields:
        raise InvalidParameterError(
            f"BM25 fields must be a non-empty mapping of field name to weight, got {fields!r}"
        )
    weights: dict[str, float] = {}
    for field, weight in fields.items():
        if not isinstance(field, str):
            raise InvalidParameterError(f"BM25 fields: a field name is a string, got {field!r}")
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise InvalidParameterError(
                f"BM25 field {field!r}: weight must be finite and above 0, got {weight!r}"
            )
        weights[field] = float(weight)
    per_field: dict[str, float] = {}
    if field_b is not None:
        if not isinstance(field_b, Mapping):
            raise InvalidParameterError(f"BM25 field_b must be a mapping of field name to b, got {field_b!r}")
        for field, b in field_b.items():
            if field not in weights:
                raise InvalidParameterError(f"BM25 field_b names {field!r}, which fields does not score")
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0.0 <= b <= 1.0:
                raise InvalidParameterError(f"BM25 field {field!r}: b must be in [0, 1], got {b!r}")
            per_field[field] = float(b)
    return weights, per_field


class BM25Scorer:
    """Okapi BM25 with Lucene's IDF; parameters are per scorer, not per index.

    :meth:`score_many` takes ``threads=`` (threads inside C), which
    :func:`~weftsearch.engine.search.search_snapshot_many` passes on
    (:attr:`score_many_threads`).

    Args:
        k1: term-frequency saturation, >= 0 (1.2 by default).
        b: length normalisation, in [0, 1] (0.75 by default).
        name: label in explanations.
        fields: BM25F (Robertson, Zaragoza & Taylor 2004, as Lucene's
            ``combined_fields``): text field name -> weight (``{"title": 2.0,
            "text": 1.0}``), fields of the index's schema analysed by the
            index's analyzer. ``None`` (default): BM25 over ``text``.
        field_b: per-field length normalisation for ``fields`` (the others use ``b``).

    BM25F scores ``sum_t qtf * idf(t) * tf~ * (k1 + 1) / (tf~ + k1)`` with
    ``tf~ = sum_f w_f * tf_f / (1 - b_f + b_f * len_f / avglen_f)`` and
    ``idf`` from the documents holding ``t`` in any scored field. With
    ``fields={"text": 1.0}`` it is BM25 to the bit (the same code). Several
    fields (or a weighted one) are scored exactly through numpy, never the
    compiled block-max kernel, and not on a sharded index.

    Complexity per query: O(P) for P postings of the query terms, plus
    O(N + P) or O(P log P), whichever is cheaper, to sum them per document;
    vectorised throughout (a Python loop runs over the query's distinct terms,
    never over postings). The first query to use a term on a snapshot also
    reads the term's postings and computes their ``tf``-part of the score for
    this (k1, b), O(df), cached with the snapshot: 8 bytes per posting of the
    terms queried so far, plus a few hundred bytes per such term.

    """

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        *,
        name: str = "bm25",
        fields: Mapping[str, float] | None = None,
        field_b: Mapping[str, float] | None = None,
    ) -> None:
        if isinstance(k1, bool) or not isinstance(k1, (int, float)) or not math.isfinite(k1) or k1 < 0:
            raise InvalidParameterError(f"BM25 k1 must be a finite number >= 0, got {k1!r}")
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0.0 <= b <= 1.0:
            raise InvalidParameterError(f"BM25 b must be in [0, 1], got {b!r}")
        self.k1 = float(k1)
        self.b = float(b)
        self._name = name
        self.fields, self.field_b = _field_weights(fields, field_b)
        # BM25F only where it differs from BM25: the default field alone at weight 1 is BM25
        # with that field's b, through the same code, so the same score bits (tested).
        self._bm25f = self.fields is not None and (
            set(self.fields) != {DEFAULT_FIELD} or self.fields[DEFAULT_FIELD] != 1.0
        )
        if self.fields is not None and not self._bm25f:
            self.b = self.field_b.get(DEFAULT_FIELD, self.b)

    @property
    def name(self) -> str:
        """Label in explanations (``"bm25"`` by default)."""
        return self._name

    def __repr__(self) -> str:
        if self.fields is None:
            return f"BM25Scorer(k1={self.k1}, b={self.b})"
        return f"BM25Scorer(k1={self.k1}, b={self.b}, fields={self.fields}, field_b={self.field_b})"

    def _field_postings(
        self, snapshot: Snapshot, distinct: list[str]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """BM25F's pseudo-frequency per (term, document): ``sum_f w_f tf_f / (1 - b_f + b_f len_f / avg_f)``.

        Returns the pairs as keys ``term * N + id`` (ascending, unique) and
        their pseudo-frequencies, each summed over the fields in name order.
        Vectorised: a Python loop over fields and terms, never over postings.
        """
        assert self.fields is not None
        n_docs = snapshot.n_docs
        keys: list[NDArray[np.int64]] = []
        values: list[NDArray[np.float64]] = []
        for field in sorted(self.fields):
            postings = snapshot.postings(distinct, field)
            if not postings.ids.shape[0]:
                continue
            b = self.field_b.get(field, self.b)
            average = snapshot.field_avglen(field)
            lengths = snapshot.field_lengths(field)[postings.ids].astype(np.float64)
            norm = 1.0 - b + b * lengths / (average if average > 0 else 1.0)
            keys.append(postings.term_index * np.int64(n_docs) + postings.ids)
            values.append(self.fields[field] * postings.term_freqs / norm)
        if not keys:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        pairs, slot = np.unique(np.concatenate(keys), return_inverse=True)
        # bincount adds in input order: field by field in name order, for every pair.
        pseudo = np.bincount(slot, weights=np.concatenate(values), minlength=pairs.shape[0])
        return pairs, pseudo.astype(np.float64, copy=False)

    def _bm25f_scores(
        self, snapshot: Snapshot, query: Query
    ) -> tuple[NDArray[np.float64] | None, dict[str, PlanValue]]:
        """Every document's BM25F score (dense, 0 without a match; ``None``: nothing matches), and the plan.

        ``idf`` uses the number of documents holding the term in any scored
        field (Lucene's ``combined_fields``); the saturation keeps BM25's
        ``(k1 + 1)`` factor, so one field at weight 1 is this scorer's BM25 (mathematically).

        Raises:
            InvalidParameterError: a field the index lacks, or a field analysed
                by another analyzer than the query.

        """
        assert self.fields is not None
        self._check_bm25f_fields(snapshot, list(self.fields))
        terms = snapshot.query_terms(query.text) if query.text else []
        distinct = sorted(set(terms))
        if not terms or snapshot.n_docs == 0:
            return None, _numpy_plan(len(distinct), 0, len(snapshot.parts), 0)
        counts = Counter(terms)
        query_tf = np.array([counts[term] for term in distinct], dtype=np.float64)
        pairs, pseudo = self._field_postings(snapshot, distinct)
        n_docs = snapshot.n_docs
        term_of = pairs // np.int64(n_docs)
        doc_freq = np.bincount(term_of, minlength=len(distinct)).astype(np.int64)
        plan = _numpy_plan(
            len(distinct), int(np.count_nonzero(doc_freq)), len(snapshot.parts), int(pairs.shape[0])
        )
        if not pairs.shape[0]:
            return None, plan
        # Any scored field's df: a shard's view reads the collection's (Snapshot.fields_doc_freq).
        doc_freq = snapshot.fields_doc_freq(list(self.fields), distinct, doc_freq)
        weights = query_tf * lucene_idf(snapshot.collection_n_docs, doc_freq)
        impacts = pseudo * (self.k1 + 1.0) / (pseudo + self.k1)
        dense = np.bincount(
            pairs - term_of * np.int64(n_docs), weights=weights[term_of] * impacts, minlength=n_docs
        )
        return dense.astype(np.float64, copy=False), plan

    def _score_bm25f(
        self, snapshot: Snapshot, query: Query, k: int, allowed: NDArray[np.bool_] | None
    ) -> Stream:
        """:meth:`score` for several fields (or one weighted one): numpy, exact, every posting."""
        dense, plan = self._bm25f_scores(snapshot, query)
        if dense is None:
            return Stream.empty(plan=plan)
        hit = dense > 0.0
        if allowed is not None:
            hit &= allowed
        ids = np.flatnonzero(hit)
        return _vouched_stream(*top_k(ids, dense[ids], k, snapshot), snapshot, plan=plan)

    def _length_norm(self, snapshot: Snapshot) -> NDArray[np.float64]:
        """``k1 * (1 - b + b * |d| / avgdl)`` for every document of the snapshot."""
        lengths = snapshot.doc_lengths.astype(np.float64)
        avgdl = self._avgdl(snapshot)
        norm = self.k1 * (1.0 - self.b + self.b * lengths / avgdl)
        norm.setflags(write=False)
        return norm

    def _term(self, snapshot: Snapshot, term: str) -> _TermPostings | None:
        """One term's ids and impacts ``tf * (k1 + 1) / (tf + norm(d))``; None if absent.

        The impact is everything in the term's contribution except the query's
        weight ``qtf * idf``, and it depends only on the snapshot and (k1, b),
        so it is computed once per term and snapshot instead of once per query.
        The expression is the per-query one, elementwise, so every value has
        the same bits. Only the public snapshot API is used, so any snapshot
        implementation gets the same cache.
        """
        postings = snapshot.postings([term])
        if postings.ids.shape[0] == 0:
            return None
        norm = snapshot.memo(
            ("bm25.length_norm", self.k1, self.b, self._avgdl(snapshot)), lambda: self._length_norm(snapshot)
        )
        tf = postings.term_freqs
        impacts = tf * (self.k1 + 1.0) / (tf + norm[postings.ids])
        impacts.setflags(write=False)
        return _TermPostings(postings.ids, impacts)

    def _cached_terms(self, snapshot: Snapshot, terms: Sequence[str]) -> list[_TermPostings | None]:
        """Each of ``terms``' ids and impacts (``None``: absent), from the snapshot's per-term cache."""
        cache = snapshot.memo(
            ("bm25.terms", self.k1, self.b, self._avgdl(snapshot)), lambda: _TermCache(TERM_CACHE_POSTINGS)
        )
        found: list[_TermPostings | None] = []
        for term in terms:
            entry = cache.get(term)
            if entry is None:
                entry = self._term(snapshot, term)
                if entry is not None:
                    cache.put(term, entry)
            found.append(entry)
        return found

    def _contributions(
        self, snapshot: Snapshot, query: Query
    ) -> tuple[_QueryPostings | None, dict[str, PlanValue]]:
        """The query's postings with their contributions (``None`` if none match), and the numpy plan.

        A term's contribution to a document is ``qtf * idf`` times the term's
        cached impact there, so a query looks its terms up, multiplies, and
        concatenates: nothing per posting is recomputed.
        """
        return self._term_contributions(snapshot, snapshot.query_terms(query.text) if query.text else [])

    def _term_contributions(
        self, snapshot: Snapshot, terms: list[str]
    ) -> tuple[_QueryPostings | None, dict[str, PlanValue]]:
        """:meth:`_contributions` of analysed ``terms`` (repeats kept: each counts in its qtf)."""
        if not terms or snapshot.n_docs == 0:
            return None, _numpy_plan(len(set(terms)), 0, len(snapshot.parts), 0)
        # Distinct terms in sorted order: each document's score is summed over
        # them in this order, the reference order every path below keeps.
        distinct = sorted(set(terms))
        if len(distinct) == len(terms):
            query_tf = np.ones(len(distinct), dtype=np.float64)  # no repeats: skip counting
        else:
            counts = Counter(terms)
            query_tf = np.array([counts[term] for term in distinct], dtype=np.float64)
        # The per-term cache of this snapshot and (k1, b), bounded by
        # TERM_CACHE_POSTINGS (least recently used terms go first). Terms the
        # snapshot lacks are not cached (queries could add those without end).
        # Keyed by the average length too: a shard's view with the collection's statistics
        # (Snapshot.with_statistics) shares this memo, and its impacts differ.
        found = self._cached_terms(snapshot, distinct)
        frequencies = [0 if entry is None else entry.ids.shape[0] for entry in found]
        doc_freq = np.array(frequencies, dtype=np.int64)
        # The plan's counts, from the list sizes already at hand (a few integers).
        plan = _numpy_plan(
            len(distinct), len(frequencies) - frequencies.count(0), len(snapshot.parts), sum(frequencies)
        )
        # N and df of the collection (a shard's view scores with the whole collection's).
        weights = query_tf * lucene_idf(
            snapshot.collection_n_docs, snapshot.collection_doc_freq(distinct, doc_freq)
        )
        # One pass over the query's few terms (never over postings): keep the
        # present ones, and pick the seed term for score()'s threshold, the
        # heaviest term among those with at least _MIN_SEED postings (its
        # documents are likely to score high).
        present: list[_TermPostings] = []
        seed_key: tuple[bool, float] = (False, 0.0)
        seed_ids: NDArray[np.int64] | None = None
        single_weight = 0.0
        for entry, weight in zip(found, weights.tolist(), strict=True):
            if entry is not None:
                present.append(entry)
                single_weight = weight
                key = (entry.ids.shape[0] >= _MIN_SEED, weight)
                if key > seed_key:
                    seed_key, seed_ids = key, entry.ids
        if not present:
            return None, plan
        if len(present) == 1:
            # One term: its ids are already ascending and unique, and each score
            # is that one contribution (a sum would add it to 0.0, which changes
            # nothing): no copy of the ids, no accumulation.
            return _QueryPostings(present[0].ids, single_weight * present[0].impacts, single=True), plan
        ids = np.concatenate([entry.ids for entry in present])
        contributions = np.concatenate([entry.impacts for entry in present])
        # np.repeat with a zero count drops the absent terms' weights.
        contributions *= np.repeat(weights, doc_freq)
        return _QueryPostings(ids, contributions, single=False, seed_ids=seed_ids), plan

    def _dense(self, snapshot: Snapshot, postings: _QueryPostings) -> NDArray[np.float64] | None:
        """Scores of all N documents (0 where no term matches) if dense accumulation pays, else None."""
        n_docs = snapshot.n_docs
        if n_docs <= _DENSE_BELOW_DOCS or postings.ids.shape[0] >= _DENSE_RATIO * n_docs:
            dense = np.bincount(postings.ids, weights=postings.contributions, minlength=n_docs)
            return dense.astype(np.float64, copy=False)  # already float64: no copy, only the type
        return None

    @staticmethod
    def _sparse(postings: _QueryPostings) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Distinct ids (ascending) and summed scores, through a stable sort of the ids."""
        ids = postings.ids
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        first = np.empty(sorted_ids.shape[0], dtype=np.bool_)
        first[0] = True
        np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=first[1:])
        # slot[i]: the rank of posting i's document among the distinct ids, so
        # np.bincount sums each document's contributions in posting (term) order.
        slot = np.empty(ids.shape[0], dtype=np.int64)
        slot[order] = np.cumsum(first) - 1
        summed = np.bincount(slot, weights=postings.contributions).astype(np.float64, copy=False)
        return sorted_ids[first], summed

    def score_all(self, snapshot: Snapshot, query: Query) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Every document holding a query term and its score, ids ascending (for a tree: every match)."""
        if query.tree is not None:
            return self._tree(snapshot, query)[0]
        if self._bm25f:
            dense, _ = self._bm25f_scores(snapshot, query)
            if dense is None:
                return np.empty(0, np.int64), np.empty(0, np.float64)
            hit = np.flatnonzero(dense > 0.0)
            return hit, dense[hit]
        postings, _ = self._contributions(snapshot, query)
        if postings is None:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        if postings.single:
            # The cached term's own (read-only) ids: callers get a copy of their own.
            return postings.ids.copy(), postings.contributions
        dense = self._dense(snapshot, postings)
        if dense is None:
            return self._sparse(postings)
        hit = np.flatnonzero(dense > 0.0)
        return hit, dense[hit]

    def _lists(self, snapshot: Snapshot, query: Query) -> _Found:
        """The query's lists and per-term counts for the kernel, with the plan's counts (:class:`_Found`).

        Its ``lists`` are ``None`` when nothing matches. The numpy path's
        terms: the snapshot's cached analysis of the text, distinct, sorted.
        O(terms) for terms seen before on the snapshot.
        """
        terms = snapshot.query_terms(query.text) if query.text else []
        if not terms or snapshot.n_docs == 0:
            return _Found(None, None, len(set(terms)), 0, 0)
        distinct = sorted(set(terms))
        query_tf: NDArray[np.float64] | None = None
        if len(distinct) != len(terms):
            counts = Counter(terms)
            query_tf = np.array([counts[term] for term in distinct], dtype=np.float64)
        lists = layout.gather(snapshot, distinct)
        # The plan's counts from this snapshot's live df (before the collection's replaces it).
        frequencies = lists.doc_freq.tolist()
        matched, postings = len(frequencies) - frequencies.count(0), sum(frequencies)
        if not lists.table.shape[0]:
            return _Found(None, None, len(distinct), matched, postings)
        if snapshot.statistics is not None:
            # The collection's df for the IDF (the kernel reads doc_freq for nothing else).
            lists = dataclasses.replace(
                lists, doc_freq=snapshot.collection_doc_freq(distinct, lists.doc_freq)
            )
        return _Found(lists, query_tf, len(distinct), matched, postings)

    def _term_query(self, snapshot: Snapshot, query: Query) -> tuple[layout.TermQuery | None, int]:
        """The query's one-call set-up (``None``: no term, or an empty snapshot) and its distinct terms.

        The numpy path's terms: the snapshot's cached analysis of the text,
        distinct, sorted, with their counts. O(terms) for terms seen before on
        the snapshot (:func:`~weftsearch.scorers.bm25.lists.plan`, which also
        points the rows at the snapshot's impact tables for this scorer's
        (k1, b) and the snapshot's average length). A text searched before on
        the snapshot with the same (k1, b) is one dictionary read
        (:func:`~weftsearch.scorers.bm25.lists.prepared_queries`).
        """
        text = query.text
        impacts = (self.k1, self.b, self._avgdl(snapshot))
        prepared = layout.prepared_queries(snapshot, *impacts) if text else None
        if prepared is not None:
            found: tuple[layout.TermQuery | None, int] | None = prepared.entries.get(text)
            if found is not None:
                return found
        found = self._plan_terms(snapshot, snapshot.query_terms(text) if text else [], impacts)
        if prepared is not None:
            prepared.put(text, found)  # the same set-up, on the same immutable snapshot, next time
        return found

    @staticmethod
    def _plan_terms(
        snapshot: Snapshot, terms: list[str], impacts: tuple[float, float, float]
    ) -> tuple[layout.TermQuery | None, int]:
        """:meth:`_term_query` for the query's analysed ``terms`` (not kept)."""
        if not terms or snapshot.n_docs == 0:
            return None, len(set(terms))
        if len(terms) == 1:
            return layout.plan(snapshot, terms, None, impacts), 1
        distinct = sorted(set(terms))
        query_tf: list[float] | None = None
        if len(distinct) != len(terms):
            counts = Counter(terms)
            query_tf = [float(counts[term]) for term in distinct]
        return layout.plan(snapshot, distinct, query_tf, impacts), len(distinct)

    @staticmethod
    def _weights(query_tf: NDArray[np.float64] | None, idf: NDArray[np.float64]) -> NDArray[np.float64]:
        """``qtf * idf``, the numpy path's weights (every qtf 1: ``idf`` itself, as 1.0 * x is x exactly)."""
        return idf if query_tf is None else query_tf * idf

    @staticmethod
    def _avgdl(snapshot: Snapshot) -> float:
        # The collection's average (a shard's view: the whole collection's), computed once per snapshot.
        avgdl = snapshot.collection_avgdl
        return avgdl if avgdl > 0 else 1.0

    def _score_compiled(
        self,
        library: kernel.CompiledBM25,
        snapshot: Snapshot,
        query: Query,
        k: int,
        allowed: NDArray[np.bool_] | None = None,
    ) -> Stream:
        """:meth:`score` through the compiled kernel (:mod:`weftsearch.native.bm25`).

        The kernel reads the lists :mod:`weftsearch.scorers.bm25.lists` lays out.

        Same terms, weights and formula as the numpy path, so the same
        documents, scores to the bit and order; it reads the postings straight
        from the segments (no per-term cache) and skips blocks of postings that
        cannot reach the k-th score. O(lists + scored postings * log k).

        Where the library has ``weft_bm25_query``, a query is one call from the
        snapshot's per-term descriptor rows (:func:`~weftsearch.scorers.bm25.lists.plan`,
        :func:`~weftsearch.scorers.bm25.lists.run`): a term look-up and a few
        integers of set-up in Python, everything else in C without the GIL.
        """
        segments = len(snapshot.parts)
        if library.query is not None:
            planned, terms = self._term_query(snapshot, query)
            if planned is None or not planned.lists:
                matched = 0 if planned is None else planned.matched
                postings = 0 if planned is None else planned.postings
                return Stream.empty(plan=_compiled_plan(terms, matched, segments, postings, None))
            ids, scores, stats = layout.run(
                library, snapshot, planned, self.k1, self.b, self._avgdl(snapshot), k, allowed
            )
            plan = _compiled_plan(terms, planned.matched, segments, planned.postings, stats)
            return _vouched_stream(ids, scores, snapshot, plan=plan)
        found = self._lists(snapshot, query)
        lists = found.lists
        if lists is None:
            return Stream.empty(
                plan=_compiled_plan(found.terms, found.matched, segments, found.postings, None)
            )
        # The numpy path's weights (the same numpy expressions, so the same bits).
        weights = self._weights(found.query_tf, lucene_idf(snapshot.collection_n_docs, lists.doc_freq))
        avgdl = self._avgdl(snapshot)
        ids, scores, stats = layout.search(
            library, snapshot, lists, weights, self.k1, self.b, avgdl, k, allowed
        )
        plan = _compiled_plan(found.terms, found.matched, segments, found.postings, stats)
        return _vouched_stream(ids, scores, snapshot, plan=plan)

    def _kept_setup(self, snapshot: Snapshot) -> tuple[float, layout.PreparedQueries | None]:
        """``snapshot``'s average length for scoring and its kept set-ups for (k1, b) and that length."""
        avgdl = self._avgdl(snapshot)
        return avgdl, layout.prepared_queries(snapshot, self.k1, self.b, avgdl)

    def _kept_stream(self, snapshot: Snapshot, text: str, k: int) -> Stream | None:
        """:meth:`score` of plain ``text`` without a filter from its kept set-up; ``None``: take the long way.

        What :meth:`_score_compiled` returns (the same call with the same
        rows, weights and part table), for a text searched before on the
        snapshot with these (k1, b): one dictionary read and the kernel call,
        none of the path's other look-ups, so a search holds the GIL for
        less while it is set up. ``None`` when the text is not kept (its
        first search keeps it), matches nothing, or numpy is the path.
        """
        if snapshot.n_docs < _COMPILED_FROM_DOCS and searches_in_flight() <= 1:
            return None
        library = kernel.compiled_bm25()
        if library is None or library.query is None:
            return None
        if snapshot.statistics is not None:
            return None  # a shard's view plans each query with the collection's statistics
        k1, b = self.k1, self.b
        # The average length and the kept set-ups of (k1, b, that length) in one look-up a
        # search: both are fixed for the snapshot's own statistics (a view with a collection's,
        # which shares the memo, never gets here), so they are found once.
        avgdl, prepared = snapshot.memo((_KEPT_SETUP, k1, b), lambda: self._kept_setup(snapshot))
        if prepared is None:
            return None
        found: tuple[layout.TermQuery | None, int] | None = prepared.entries.get(text)
        if found is None:
            return None
        planned, terms = found
        if planned is None or not planned.lists:
            return None
        ids, scores, stats = layout.run_kept(library, snapshot, prepared, planned, k1, b, avgdl, k)
        plan = _compiled_plan(terms, planned.matched, len(snapshot.parts), planned.postings, stats)
        if snapshot.ids_follow_keys:
            # One segment: the kernel's copied results or their leading slices, in a stream's layout.
            return _vouched_kernel_stream(ids, scores, snapshot, plan)
        return _vouched_stream(ids, scores, snapshot, plan=plan)

    @property
    def score_many_threads(self) -> bool:
        """Whether :meth:`score_many` runs its batch on ``threads=`` threads in C (not for BM25F)."""
        return not self._bm25f

    def score_many(
        self, snapshot: Snapshot, queries: Sequence[Query], k: int, threads: int = 1
    ) -> Sequence[Stream]:
        """:meth:`score` of each of ``queries``, in order, in one compiled call where it can.

        The optional batch method of the scorer protocol (see
        :func:`~weftsearch.engine.search.search_snapshot_many`). Where the
        compiled kernel and its batch entry point are loaded, every query
        with a matching term (and no filter or query tree) is scored in one
        call to ``_bm25.c`` that holds no GIL for the whole batch
        (:func:`~weftsearch.scorers.bm25.lists.run_batch`), its queries shared
        out among ``threads`` threads inside C (1 to :data:`MAX_BATCH_THREADS`;
        C starts at most 64); elsewhere each query goes through :meth:`score`.
        Each stream is what :meth:`score` returns for that query, whatever
        ``threads`` is: the same documents, scores to the bit and order (the
        kernel and numpy agree to the bit, checked when the kernel loads),
        with its own plan (:data:`PLAN_KEYS`; the kernel counts each query of
        a batch apart). A sequence of streams, one per query: a batch scored in
        one call without a filter or a query tree holds its streams in shared
        arrays and makes each (and its plan) when it is read.

        Raises:
            InvalidParameterError: ``k`` is not a positive integer, or
                ``threads`` is not an integer from 1 to :data:`MAX_BATCH_THREADS`.

        """
        k = check_k(k)
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_BATCH_THREADS:
            raise InvalidParameterError(
                f"threads must be an integer from 1 to {MAX_BATCH_THREADS}, got {threads!r}"
            )
        library = kernel.compiled_bm25()
        if (
            library is not None
            and library.query_batch is not None
            and not self._bm25f
            and snapshot.n_docs >= _COMPILED_FROM_DOCS
        ):
            return self._score_batch(library, snapshot, queries, k, threads)
        small = snapshot.n_docs < _COMPILED_FROM_DOCS and k > _BATCH_COMPILED_MAX_K
        if library is None or small or self._bm25f or not kernel.top_k_batch_available():
            return [self.score(snapshot, query, k) for query in queries]
        segments = len(snapshot.parts)
        streams: dict[int, Stream] = {}  # by position in queries
        positions: list[int] = []
        lists: list[layout.QueryLists] = []
        counts: list[NDArray[np.float64] | None] = []
        batched: list[_Found] = []
        for position, query in enumerate(queries):
            if query.filter is not None or query.tree is not None:  # score()'s filtered or tree path
                streams[position] = self.score(snapshot, query, k)
                continue
            found = self._lists(snapshot, query)
            if found.lists is None:
                plan = _compiled_plan(found.terms, found.matched, segments, found.postings, None)
                streams[position] = Stream.empty(plan=plan)
            else:
                positions.append(position)
                lists.append(found.lists)
                counts.append(found.query_tf)
                batched.append(found)
        if positions:
            # Every query's IDFs in one numpy call (instead of one per query): each is
            # the same elementwise expression of its own df, whatever else is in the
            # array, so the same bits as score()'s per-query call.
            idf = lucene_idf(snapshot.collection_n_docs, np.concatenate([entry.doc_freq for entry in lists]))
            weights: list[NDArray[np.float64]] = []
            start = 0
            for entry, query_tf in zip(lists, counts, strict=True):
                stop = start + int(entry.doc_freq.shape[0])
                weights.append(self._weights(query_tf, idf[start:stop]))
                start = stop
            results = layout.search_many(
                library, snapshot, lists, weights, self.k1, self.b, self._avgdl(snapshot), k
            )
            for position, found, (ids, scores, stats) in zip(positions, batched, results, strict=True):
                plan = _compiled_plan(found.terms, found.matched, segments, found.postings, stats)
                streams[position] = _vouched_stream(ids, scores, snapshot, plan=plan)
        return [streams[position] for position in range(len(queries))]  # each position is filled above

    def _score_batch(
        self,
        library: kernel.CompiledBM25,
        snapshot: Snapshot,
        queries: Sequence[Query],
        k: int,
        threads: int,
    ) -> Sequence[Stream]:
        """:meth:`score_many` through ``weft_bm25_query_batch``: one call, ``threads`` threads in C.

        A text searched before on the snapshot with these (k1, b) (by
        :meth:`score` or a batch) takes its kept set-up
        (:func:`~weftsearch.scorers.bm25.lists.prepared_queries`): one
        dictionary read, no analysis. The other texts are analysed in one
        call (the snapshot's cache), and their terms sorted, counted and
        looked up at once (:func:`~weftsearch.scorers.bm25.lists.plan_batch`),
        then kept as :meth:`score` keeps them. Every query then goes to one
        kernel call (:func:`~weftsearch.scorers.bm25.lists.run_planned`). Without a filter
        or a query tree in the batch, the streams come back as one batch over
        the kernel's packed arrays (each stream, and its plan, made when read;
        a search reads the arrays); otherwise as a list.
        """
        segments = len(snapshot.parts)
        count = len(queries)
        k1, b, avgdl = self.k1, self.b, self._avgdl(snapshot)
        prepared = layout.prepared_queries(snapshot, k1, b, avgdl)
        kept: dict[str, tuple[layout.TermQuery | None, int]] = {} if prepared is None else prepared.entries
        alone: dict[int, Stream] = {}
        # Each query's set-up: a text searched before on the snapshot with these (k1, b) is
        # one dictionary read (what Index.search keeps, _term_query); the others are
        # analysed in one call, planned at once (lists.plan_batch) and kept the same way.
        setups: list[tuple[layout.TermQuery | None, int] | None] = [None] * count
        fresh: list[int] = []
        for position, query in enumerate(queries):
            if query.filter is not None or query.tree is not None:  # score()'s filtered or tree path
                alone[position] = self.score(snapshot, query, k)
                continue
            text = query.text
            if not text:
                setups[position] = (None, 0)
                continue
            known = kept.get(text)
            if known is None:
                fresh.append(position)
            else:
                setups[position] = known
        if fresh:
            texts = [queries[position].text for position in fresh]
            analysed = snapshot.query_terms_many(texts)
            some = [index for index, terms in enumerate(analysed) if terms]
            planned = (
                layout.plan_batch(snapshot, [analysed[index] for index in some], (k1, b, avgdl))
                if snapshot.n_docs
                else []
            )
            made = iter(planned)
            for position, terms in zip(fresh, analysed, strict=True):
                if terms and planned:  # planned holds one set-up per query with terms, on documents
                    term_query = next(made)
                    setups[position] = (term_query, len(term_query.terms))
                else:
                    setups[position] = (None, len(set(terms)))
            if prepared is not None:
                # The same set-ups, on the same immutable snapshot, next time.
                prepared.put_many(zip(texts, [setups[position] for position in fresh], strict=True))
        positions: list[int] = []
        batched: list[layout.TermQuery] = []
        distinct = [0] * count  # the plan's term count of a query not in the kernel's batch
        for position, entry in enumerate(setups):
            if entry is None:
                continue  # scored alone above
            if entry[0] is None:
                distinct[position] = entry[1]
            else:
                positions.append(position)
                batched.append(entry[0])
        found = layout.run_planned(library, snapshot, batched, k1, b, avgdl, k, threads)
        if len(positions) == count:
            plans = (found.terms, found.matched, found.postings, found.stats)
            ids, scores, bounds = found.ids, found.scores, found.bounds
        else:
            # Queries left out of the kernel's batch hold no candidates here: zero-length slices.
            sizes = np.zeros(count, dtype=np.int64)
            where = np.array(positions, dtype=np.intp)
            sizes[where] = np.diff(found.bounds)
            bounds = np.zeros(count + 1, dtype=np.int64)
            np.cumsum(sizes, out=bounds[1:])
            term_counts = np.array(distinct, dtype=np.int64)
            term_counts[where] = found.terms
            matched, postings = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64)
            matched[where], postings[where] = found.matched, found.postings
            stats = np.zeros((count, 5), dtype=np.int64)
            stats[where] = found.stats
            plans = (term_counts, matched, postings, stats)
            ids, scores = found.ids, found.scores
        batch = _vouched_batch(ids, scores, bounds, snapshot, _BatchPlans(segments, *plans).plan)
        if not alone:
            return batch
        return [alone[position] if position in alone else batch[position] for position in range(count)]

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """The ``k`` best documents for ``query.text``; empty without text.

        A query with a :attr:`~weftsearch.engine.query.Query.tree` (``Query.parse``)
        is scored as that tree instead (:mod:`weftsearch.scorers.bm25.tree`:
        Lucene's boolean semantics): through the compiled conjunction kernel
        (:mod:`weftsearch.scorers.bm25.conjunction`, ``_boolean.c``) when the tree
        fits it (must terms and phrases, should and must_not terms), as plain
        query text through the block-max disjunction when it is a should-only
        tree of plain terms (:func:`~weftsearch.scorers.bm25.conjunction.disjunction_terms`),
        else numpy; the same ids, score bits and order either way.

        Runs compiled, with block-max early termination and without the GIL,
        on every snapshot size where the kernel is available
        (:func:`~weftsearch.native.bm25.compiled_bm25`; set
        ``WEFTSEARCH_NO_COMPILED_BM25=1`` to force numpy, the exhaustive
        oracle). Both give the same documents, scores to the bit and order. A
        repeated plain text's set-up (analysis, term look-up, plan) is kept per
        snapshot (:func:`~weftsearch.scorers.bm25.lists.prepared_queries`).

        The stream carries its plan (:data:`PLAN_KEYS`, the same keys on every
        path: which path ran, terms matched, segments, postings in the query's
        lists, postings and blocks block-max skipped, documents scored), which
        :attr:`SearchResults.plans <weftsearch.engine.search.SearchResults.plans>`
        and explain show. O(1) on top of the search: a few integers.
        """
        k = check_k(k)
        if query.filter is None and query.tree is None and not self._bm25f and query.text:
            kept = self._kept_stream(snapshot, query.text, k)
            if kept is not None:
                return kept
        # A filter (Query.filter) applies before the top k on both paths, never
        # after: only allowed documents compete, so a search returns min(k,
        # matching documents with a query term). Same scores to the bit.
        allowed = snapshot.allowed(query)
        if query.tree is not None:
            compiled = self._tree_disjunction(snapshot, query, k, allowed)
            if compiled is not None:
                return compiled
            compiled = self._tree_compiled(snapshot, query, k, allowed)
            if compiled is not None:
                return compiled
            (ids, scores), plan = self._tree(snapshot, query)
            if allowed is not None:
                keep = allowed[ids]
                ids, scores = ids[keep], scores[keep]
            return _vouched_stream(*top_k(ids, scores, k, snapshot), snapshot, plan=plan)
        if self._bm25f:
            # Several fields are scored exactly on the numpy path: the kernel has no per-field
            # block bounds (docs/FORMAT.md, "Text fields").
            return self._score_bm25f(snapshot, query, k, allowed)
        if snapshot.n_docs >= _COMPILED_FROM_DOCS or searches_in_flight() > 1:
            library = kernel.compiled_bm25()
            if library is not None:
                return self._score_compiled(library, snapshot, query, k, allowed)
        return self._score_numpy(snapshot, query, k, allowed)

    def explain(self, snapshot: Snapshot, query: Query, ids: NDArray[np.int64]) -> list[Explanation]:
        """Each of ``ids``' score broken into its query terms, as Elasticsearch's ``_explain`` (on request).

        For plain text, one part per query term the document holds: the
        term's query count, IDF (``n``, ``N``), frequency, the field's length
        and average length, ``k1`` and ``b`` (BM25F: the pseudo-frequency
        ``tf~`` with each field's weighted, normalised frequency); for a
        parsed tree, one node per clause (a phrase's frequency and summed
        IDF, a prefix's constant score, boosts). Each root's value is this
        scorer's score of the document to the bit (the same evaluation as
        :meth:`score`), 0 with the reason where it does not match (a filter
        that excludes it, a required clause that fails, no query term).
        See :mod:`weftsearch.scorers.bm25.explain`.

        Args:
            snapshot: the snapshot searched.
            query: the query (its filter applies).
            ids: internal ids of ``snapshot``.

        Raises:
            InvalidParameterError: BM25F's refusals (a field the index lacks, ...).

        O(documents x terms) in Python on top of one evaluation of the query's tree.

        """
        ids = np.asarray(ids, dtype=np.int64)
        tally = Tally()
        tree_scorer = TreeScorer(snapshot, lambda field: self._scope(snapshot, field, tally), tally)
        if query.tree is not None:
            found = explain.explain_documents(tree_scorer, query.tree, ids, self.name)
        else:
            found = explain.explain_text(tree_scorer, query.text or "", ids, self.name)
        allowed = snapshot.allowed(query)
        if allowed is None:
            return found
        return [
            item if allowed[doc] else Explanation(0.0, "no match: the query's filter excludes it")
            for doc, item in zip(ids.tolist(), found, strict=True)
        ]

    def _check_bm25f_fields(self, snapshot: Snapshot, fields: Sequence[str]) -> None:
        """Refuse BM25F over ``fields`` where it cannot be exact.

        Raises:
            InvalidParameterError: a field the index lacks, or a field analysed
                by another analyzer than the query.

        """
        schema = snapshot.schema
        for field in fields:
            found = schema.field(field) if field in schema.names else None
            if found is None:
                raise InvalidParameterError(
                    f"BM25F field {field!r} is not a text field of the index ({', '.join(schema.names)})"
                )
            if found.analyzer != snapshot.analyzer.name:
                # As Lucene's combined_fields: one analysis of the query must serve every field.
                raise InvalidParameterError(
                    f"BM25F field {field!r} is analysed by {found.analyzer!r}, the query by "
                    f"{snapshot.analyzer.name!r}; BM25F scores fields that share the query's analyzer"
                )

    def _scope(self, snapshot: Snapshot, field: str | None, tally: Tally) -> Scope:
        """Where a leaf of ``field`` (``None``: unfielded) is scored (:mod:`.tree`, "scope").

        Raises:
            UnknownTextFieldError: ``field`` is not a text field of the index.
            InvalidParameterError: BM25F's refusals (:meth:`_check_bm25f_fields`).

        """
        schema = snapshot.schema
        if field is not None and field not in schema.names:
            raise UnknownTextFieldError(
                f"unknown text field {field!r} in the query; the index's text fields are "
                f"{', '.join(schema.names)}"
            )

        def make(name: str) -> Field:
            if name == DEFAULT_FIELD:
                return Field(snapshot, name, self.field_b.get(name, self.b), snapshot.query_terms)
            terms = snapshot.memo(("tree.field_terms", name), lambda: _field_terms(snapshot.schema, name))
            return Field(snapshot, name, self.field_b.get(name, self.b), terms)

        if self._bm25f:
            assert self.fields is not None
            if field is None:
                self._check_bm25f_fields(snapshot, list(self.fields))
                return BM25FScope([(make(name), w) for name, w in self.fields.items()], self.k1, tally)
            return BM25FScope([(make(field), self.fields.get(field, 1.0))], self.k1, tally)
        name = DEFAULT_FIELD if field is None else field
        if name != DEFAULT_FIELD:
            return BM25Scope(make(name), self.k1, tally)

        def impacts(term: str) -> Matches | None:
            entry = self._cached_terms(snapshot, [term])[0]
            return None if entry is None else Matches(entry.ids, entry.impacts)

        return BM25Scope(make(name), self.k1, tally, impacts, self._cached_norm(snapshot))

    def _cached_norm(self, snapshot: Snapshot) -> NDArray[np.float64]:
        """:meth:`_length_norm`, memoised on the snapshot (the key its per-term cache uses)."""
        key = ("bm25.length_norm", self.k1, self.b, self._avgdl(snapshot))
        norm: NDArray[np.float64] = snapshot.memo(key, lambda: self._length_norm(snapshot))
        return norm

    def _tree_disjunction(
        self, snapshot: Snapshot, query: Query, k: int, allowed: NDArray[np.bool_] | None
    ) -> Stream | None:
        """:meth:`score` of a should-only tree of plain terms as plain query text (``weft_bm25_query``).

        ``None`` when the tree is not one (:func:`.conjunction.disjunction_terms`
        says which are: those whose sum the one-call kernel takes in the tree's
        order), the scorer is BM25F, the snapshot empty or the library lacks
        the one-call entry. Same ids, score bits and order as the tree path.
        """
        tree = query.tree
        if not conjunction.may_be_disjunction(tree) or snapshot.n_docs == 0 or self._bm25f:
            return None  # the structural refusal first: it is what turns conjunctions away
        library = kernel.compiled_bm25()
        if library is None or library.query is None:
            return None
        assert tree is not None  # may_be_disjunction
        planned = conjunction.disjunction(snapshot, tree)
        if planned is None:
            return None
        segments, terms = len(snapshot.parts), len(planned.terms)
        if not planned.lists:
            return Stream.empty(plan=_compiled_plan(terms, planned.matched, segments, planned.postings, None))
        ids, scores, stats = layout.run(
            library, snapshot, planned, self.k1, self.b, self._avgdl(snapshot), k, allowed
        )
        plan = _compiled_plan(terms, planned.matched, segments, planned.postings, stats)
        return _vouched_stream(ids, scores, snapshot, plan=plan)

    def _tree_compiled(
        self, snapshot: Snapshot, query: Query, k: int, allowed: NDArray[np.bool_] | None
    ) -> Stream | None:
        """:meth:`score` of a tree through ``_boolean.c`` (:mod:`.conjunction`), or ``None`` (numpy then).

        ``None`` when the kernel is not loaded, the snapshot is empty or the
        tree does not fit (:func:`.conjunction.plan`). Same ids, score bits and
        order as the numpy path (:meth:`_tree`), which is its oracle.
        """
        tree = query.tree
        if tree is None or snapshot.n_docs == 0 or self._bm25f:
            return None  # the kernel scores plain BM25 over the default field
        library = boolean_kernel.compiled_boolean()
        if library is None:
            return None
        prepared = conjunction.prepare(snapshot, tree)
        if prepared is None:
            return None
        # self._avgdl(snapshot), read from the prepared tree (made from this snapshot).
        avgdl = prepared.avgdl if prepared.avgdl > 0 else 1.0
        ids, scores, plan = conjunction.run(library, snapshot, prepared, self.k1, self.b, avgdl, k, allowed)
        return _vouched_stream(ids, scores, snapshot, plan=plan)

    def _tree(self, snapshot: Snapshot, query: Query) -> tuple[Matches, dict[str, PlanValue]]:
        """Every document ``query.tree`` matches, with its score (:mod:`.tree`), and the search's plan.

        Through numpy (the oracle of :meth:`_tree_compiled`, which :meth:`score`
        tries first). O(postings of the tree's terms) plus, per phrase,
        O(positions of its terms in the documents holding them all).
        """
        tree = query.tree
        assert tree is not None
        tally = Tally()
        scorer = TreeScorer(snapshot, lambda field: self._scope(snapshot, field, tally), tally)
        found = scorer.evaluate(tree) if snapshot.n_docs else None
        if found is None:
            found = Matches(np.empty(0, np.int64), np.empty(0, np.float64))
        plan = _numpy_plan(len(tally.terms), len(tally.matched), len(snapshot.parts), tally.postings)
        return found, plan

    def _score_numpy(
        self, snapshot: Snapshot, query: Query, k: int, allowed: NDArray[np.bool_] | None = None
    ) -> Stream:
        """:meth:`score` through numpy: every posting of the query terms, accumulated (the oracle)."""
        postings, plan = self._contributions(snapshot, query)
        if postings is None:
            return Stream.empty(plan=plan)
        if allowed is not None:
            if postings.single:
                ids, scores = postings.ids, postings.contributions
            else:
                dense = self._dense(snapshot, postings)
                if dense is None:
                    ids, scores = self._sparse(postings)
                else:
                    ids = np.flatnonzero((dense > 0.0) & allowed)
                    return _vouched_stream(*top_k(ids, dense[ids], k, snapshot), snapshot, plan=plan)
            keep = allowed[ids]
            return _vouched_stream(*top_k(ids[keep], scores[keep], k, snapshot), snapshot, plan=plan)
        if postings.single:
            return _vouched_stream(
                *top_k(postings.ids, postings.contributions, k, snapshot), snapshot, plan=plan
            )
        dense = self._dense(snapshot, postings)
        if dense is None:
            return _vouched_stream(*top_k(*self._sparse(postings), k, snapshot), snapshot, plan=plan)
        seed_ids = postings.seed_ids
        if seed_ids is not None and seed_ids.shape[0] >= k:
            # Threshold seeding: the seed term's documents are >= k distinct
            # documents with their full scores, so the k-th best of them is a
            # floor under the k-th best overall. Only documents at or above the
            # floor can make the top k (and the floor is > 0, so documents with
            # no query term are out). top_k over those survivors returns exactly
            # what it would over every matching document, but the survivors are
            # found with one comparison over N instead of listing every match
            # and partitioning them all.
            seed_scores = dense[seed_ids]
            floor = np.partition(seed_scores, seed_scores.shape[0] - k)[seed_scores.shape[0] - k]
            survivors = np.flatnonzero(dense >= floor)
        else:
            survivors = np.flatnonzero(dense > 0.0)
        return _vouched_stream(*top_k(survivors, dense[survivors], k, snapshot), snapshot, plan=plan)
