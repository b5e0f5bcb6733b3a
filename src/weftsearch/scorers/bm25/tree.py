"""Scoring a parsed query tree (:mod:`weftsearch.querylang`) with BM25, as Lucene's ``BooleanQuery`` does.

Each node of the tree evaluates to the documents it matches, ascending
internal ids, and their scores, float64:

* :class:`~weftsearch.querylang.TermNode`: the word's analysed terms scored
  exactly as plain query text of that word is (BM25 with Lucene's IDF, summed
  over its distinct terms in sorted order, each weighted by how often the
  analysis repeats it), so ``Query.parse("word")`` has the same bits as
  ``Query("word")``; a document matches when it holds any of them.
* :class:`~weftsearch.querylang.PhraseNode`: the words' analysed terms in a
  row (a stopword takes no position); a document matches where the phrase
  occurs (within ``slop``), and is scored as one BM25 term whose frequency is
  the phrase's (:func:`phrase_frequencies`) and whose IDF is the sum of its
  terms' IDFs (Lucene). Needs term positions; an index without them raises
  :class:`~weftsearch.errors.PhrasePositionsError`. A phrase of one term is
  that term.
* :class:`~weftsearch.querylang.PrefixNode`: the lower-cased prefix (not
  stemmed: ``Retriev*`` matches the indexed stem ``retriev``) expands to the
  dictionary terms that start with it, at most :data:`MAX_PREFIX_TERMS`
  over the snapshot's segments (more is an
  :class:`~weftsearch.errors.InvalidQueryError` naming the limit); every
  document holding one scores ``boost`` (Lucene's constant-score rewrite).
* :class:`~weftsearch.querylang.BoolNode`: the intersection of the ``must``
  clauses (or, without any, the union of the ``should`` clauses), less the
  documents of any ``must_not`` clause; the score is the sum, starting from
  0.0, of the must clauses' scores in order, then the matched should
  clauses' in order. A node of must_not clauses only matches nothing.

Every node's score is then multiplied by its ``boost`` when that is not 1.
A leaf that analyses to no term (a stopword) is dropped from its parent, as
Lucene's query parser drops it, and a node left with no clause is dropped in
turn; a tree with nothing left matches nothing. This order of operations is
the definition: the exhaustive oracle in ``tests/scorers/test_bm25_tree.py``
follows it and gets the same bits.

Everything is vectorised over postings (``np.searchsorted`` membership,
``np.unique``); Python loops run over the tree's nodes, a prefix's
terms and a phrase's terms, never over postings or documents.

Trees of must terms and phrases with should and must_not terms are scored
compiled instead (:mod:`weftsearch.scorers.bm25.conjunction`); this module is
that path's oracle, to the bit (``tests/scorers/test_bm25_conjunction.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import InvalidQueryError, PhrasePositionsError
from weftsearch.querylang import BoolNode, Node, PhraseNode, PrefixNode, TermNode

__all__ = ["DEFAULT_FIELD", "MAX_PREFIX_TERMS", "Matches", "TreeScorer", "phrase_frequencies"]

#: Most dictionary terms one prefix may expand to (over all segments of a snapshot).
MAX_PREFIX_TERMS = 64
# A Bool node is evaluated over arrays of all N documents on snapshots this small, or when its
# clauses hold this share of N in matches (as the bag-of-words numpy path accumulates densely):
# O(N + matches) then beats binary searches and sorts of the union. Both ways: the same bits.
_DENSE_BELOW_DOCS = 20_000
_DENSE_RATIO = 0.05

#: The only text field this scorer reads: ``Document.text``.
DEFAULT_FIELD = "text"


class Matches(NamedTuple):
    """What a node matches: internal ids (ascending, unique) and their scores (float64)."""

    ids: NDArray[np.int64]
    scores: NDArray[np.float64]


def phrase_frequencies(
    terms: Sequence[tuple[NDArray[np.integer[Any]], NDArray[np.integer[Any]]]], slop: int
) -> NDArray[np.int64]:
    """How often a phrase occurs in each of a list of documents, from its terms' positions there.

    Args:
        terms: for each term of the phrase in order, ``(starts, positions)``
            over the same ``n`` documents: the term's positions in document
            ``j`` are ``positions[starts[j]:starts[j + 1]]``, ascending
            (``starts`` has ``n + 1`` entries).
        slop: the phrase's slop, >= 0.

    Returns:
        int64, one count per document: the number of positions ``p_0`` of the
        first term for which every other term ``i`` has a position ``p_i``
        with ``max(p_i - i) - min(p_i - i) <= slop`` (``p_0`` included); for
        slop 0, the number of exact occurrences. (A term repeated in a sloppy
        phrase may match one occurrence twice.)

    Vectorised: positions become sorted keys ``document * stride + p - i``,
    and an occurrence is found by a fixpoint over all first-term positions at
    once: the window ``[low, low + slop]`` starts at ``p_0 - slop`` and moves
    to the furthest of each term's next position at or after ``low``, minus
    ``slop``, until it holds one position of every term (a match) or passes
    ``p_0`` (none). Each round is a few ``searchsorted`` calls; the window
    only moves right, to a term's position, so the rounds are bounded by the
    positions within ``slop`` of a first-term position (one round for slop 0).

    """
    if not terms:
        raise InvalidQueryError("a phrase needs at least one term")
    n = int(terms[0][0].shape[0]) - 1
    if n <= 0:
        return np.zeros(max(n, 0), np.int64)
    length = len(terms)
    top = max((int(positions.max()) if positions.shape[0] else 0) for _, positions in terms)
    # Wide enough that no window of one document reaches another's keys.
    stride = top + 2 * (slop + length) + 2
    keys: list[NDArray[np.int64]] = []
    for offset, (starts, positions) in enumerate(terms):
        bounds = starts.astype(np.int64)
        counts = bounds[1:] - bounds[:-1]
        doc = np.repeat(np.arange(n, dtype=np.int64), counts)
        # + length keeps p - offset - slop >= 0 inside the document's stride.
        keys.append(doc * stride + positions.astype(np.int64) - offset + length + slop)
    anchors = keys[0]
    doc_of_anchor = anchors // stride
    low = anchors - slop
    found = np.zeros(anchors.shape[0], dtype=np.bool_)
    open_ = np.arange(anchors.shape[0])
    while open_.shape[0]:
        window = low[open_]
        furthest = anchors[open_].copy()  # the first term's own position is in every window tried
        alive = np.ones(open_.shape[0], dtype=np.bool_)
        for other in keys[1:]:
            at = np.searchsorted(other, window, side="left")
            past = at >= other.shape[0]
            nxt = other[np.minimum(at, other.shape[0] - 1)] if other.shape[0] else np.zeros_like(window)
            # Another document's key (or none): no occurrence of this term from here on.
            alive &= ~past & (nxt // stride == doc_of_anchor[open_])
            np.maximum(furthest, nxt, out=furthest)
        moved = furthest - slop
        done = alive & (moved <= window)
        found[open_[done]] = True
        # Still possible: the window moves right and still holds the first term's position.
        again = alive & ~done & (moved <= anchors[open_])
        low[open_[again]] = moved[again]
        open_ = open_[again]
    return np.bincount(doc_of_anchor[found], minlength=n).astype(np.int64)


def _gather_rows(
    starts: NDArray[np.int64], positions: NDArray[np.uint32], rows: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.uint32]]:
    """The CSR ``(starts, positions)`` of ``rows`` of another CSR, in that order (vectorised)."""
    first = starts[rows]
    counts = starts[rows + 1] - first
    new_starts = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=new_starts[1:])
    index = np.repeat(first - new_starts[:-1], counts) + np.arange(int(new_starts[-1]), dtype=np.int64)
    return new_starts, positions[index]


class TreeScorer:
    """One tree's evaluation on one snapshot (see the module docstring for the semantics).

    Args:
        snapshot: the snapshot searched.
        word: scores of a word's analysed terms, as plain text of it scores:
            ``(ids, scores)`` or ``None`` when no term of it is in the snapshot.
        impacts: an analysed term's ids and BM25 tf part
            ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))``, or ``None`` when absent.
        idf: Lucene IDF of analysed terms (the collection's).
        length_norm: ``k1 * (1 - b + b * |d| / avgdl)`` of every document.
        k1: BM25 ``k1``.

    """

    def __init__(
        self,
        snapshot: Snapshot,
        word: Callable[[str], Matches | None],
        impacts: Callable[[str], Matches | None],
        idf: Callable[[list[str]], NDArray[np.float64]],
        length_norm: Callable[[], NDArray[np.float64]],
        k1: float,
    ) -> None:
        self.snapshot = snapshot
        self.word = word
        self.impacts = impacts
        self.idf = idf
        self.length_norm = length_norm
        self.k1 = k1
        self.postings = 0
        self.terms: set[str] = set()

    def evaluate(self, node: Node) -> Matches | None:
        """What ``node`` matches with its scores; ``None`` when it analyses to nothing (dropped)."""
        if isinstance(node, BoolNode):
            found = self._bool(node)
        else:
            self._check_field(node)
            if isinstance(node, TermNode):
                found = self._term(node)
            elif isinstance(node, PhraseNode):
                found = self._phrase(node)
            else:
                found = self._prefix(node)
        if found is None or node.boost == 1.0:
            return found
        return Matches(found.ids, found.scores * node.boost)

    @staticmethod
    def _check_field(node: TermNode | PhraseNode | PrefixNode) -> None:
        if node.field is not None and node.field != DEFAULT_FIELD:
            raise InvalidQueryError(
                f"unknown text field {node.field!r} in {node.to_string()!r}; this index has one: "
                f"{DEFAULT_FIELD!r}"
            )

    def _term(self, node: TermNode) -> Matches | None:
        terms = self.snapshot.query_terms(node.text)
        if not terms:
            return None
        self.terms.update(terms)
        found = self.word(node.text)
        if found is None:
            return _empty()
        self.postings += int(found.ids.shape[0])
        return found

    def _prefix(self, node: PrefixNode) -> Matches:
        prefix = node.prefix.lower()
        expanded: set[str] = set()
        for part in self.snapshot.parts:
            expanded.update(part.reader.terms_with_prefix(prefix, MAX_PREFIX_TERMS))
            if len(expanded) > MAX_PREFIX_TERMS:
                raise InvalidQueryError(
                    f"the prefix {node.prefix + '*'!r} matches more than MAX_PREFIX_TERMS "
                    f"({MAX_PREFIX_TERMS}) terms of the index; make it longer"
                )
        if not expanded:
            return _empty()
        postings = self.snapshot.postings(sorted(expanded))
        self.postings += int(postings.ids.shape[0])
        ids = np.unique(postings.ids)
        return Matches(ids, np.ones(ids.shape[0], dtype=np.float64))

    def _phrase(self, node: PhraseNode) -> Matches | None:
        terms = [term for word in node.terms for term in self.snapshot.query_terms(word)]
        if not terms:
            return None
        if len(terms) == 1:
            return self._single(terms[0])
        self.terms.update(terms)
        lists = [self._positions(term, node) for term in terms]
        candidates = min((ids for ids, _, _ in lists), key=lambda ids: ids.shape[0])
        for ids, _, _ in lists:
            candidates = candidates[_member(candidates, ids)]
        if not candidates.shape[0]:
            return _empty()
        rows = [
            _gather_rows(starts, positions, np.searchsorted(ids, candidates))
            for ids, starts, positions in lists
        ]
        frequency = phrase_frequencies(rows, node.slop)
        hit = frequency > 0
        ids = candidates[hit]
        tf = frequency[hit].astype(np.float64)
        idf = 0.0
        for value in self.idf(terms).tolist():  # in phrase order, one add at a time: the oracle's order
            idf += value
        norm = self.length_norm()
        impacts = tf * (self.k1 + 1.0) / (tf + norm[ids])
        return Matches(ids, idf * impacts)

    def _single(self, term: str) -> Matches:
        """A phrase of one analysed term: that term's BM25 (the term as is: it is not analysed again)."""
        self.terms.add(term)
        found = self.impacts(term)
        if found is None:
            return _empty()
        self.postings += int(found.ids.shape[0])
        return Matches(found.ids, float(self.idf([term])[0]) * found.scores)

    def _positions(
        self, term: str, node: PhraseNode
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.uint32]]:
        """A term's live ids (ascending), and its positions per id as CSR, over the snapshot's segments."""
        id_runs: list[NDArray[np.int64]] = []
        start_runs: list[NDArray[np.int64]] = []
        position_runs: list[NDArray[np.uint32]] = []
        base = 0
        for part in self.snapshot.parts:
            reader: Any = part.reader
            read = getattr(reader, "positions", None)
            if read is None or not getattr(reader, "has_positions", True):
                raise PhrasePositionsError(
                    f"this index keeps no positions, so the phrase {node.to_string()!r} cannot be "
                    "matched; rebuild it with positions, or search the words without quotes"
                )
            local, _, starts, positions = read(term)
            if not local.shape[0]:
                continue
            ids = part.to_global(local)
            starts = starts.astype(np.int64)
            rows = np.flatnonzero(ids >= 0)
            starts, positions = _gather_rows(starts, positions, rows)
            id_runs.append(ids[rows])
            start_runs.append(starts[:-1] + base)
            position_runs.append(positions)
            base += int(starts[-1])
        if not id_runs:
            return np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.uint32)
        self.postings += sum(int(run.shape[0]) for run in id_runs)
        all_starts = np.concatenate([*start_runs, np.array([base], dtype=np.int64)])
        return np.concatenate(id_runs), all_starts, np.concatenate(position_runs)

    def _bool(self, node: BoolNode) -> Matches | None:
        must = [m for m in (self.evaluate(c) for c in node.must) if m is not None]
        should = [m for m in (self.evaluate(c) for c in node.should) if m is not None]
        must_not = [m for m in (self.evaluate(c) for c in node.must_not) if m is not None]
        if not (must or should or must_not):
            return None
        n_docs = self.snapshot.n_docs
        held = sum(int(clause.ids.shape[0]) for clause in (*must, *should, *must_not))
        if n_docs <= _DENSE_BELOW_DOCS or held >= _DENSE_RATIO * n_docs:
            return _dense_bool(n_docs, must, should, must_not)
        if must:
            # Shortest list first: each step keeps a subset of it (O(n log m) per step).
            ordered = sorted(must, key=lambda clause: clause.ids.shape[0])
            ids = ordered[0].ids
            for clause in ordered[1:]:
                ids = ids[_member(ids, clause.ids)]
        elif should:
            ids = np.unique(np.concatenate([clause.ids for clause in should]))
        else:
            return _empty()  # must_not clauses only: nothing (Lucene)
        for clause in must_not:
            if ids.shape[0] and clause.ids.shape[0]:
                ids = ids[~_member(ids, clause.ids)]
        # The sum in clause order (must, then should), the order the definition fixes.
        scores = np.zeros(ids.shape[0], dtype=np.float64)
        for clause in (*must, *should):
            at = np.searchsorted(clause.ids, ids)
            present = at < clause.ids.shape[0]
            present[present] = clause.ids[at[present]] == ids[present]
            scores[present] += clause.scores[at[present]]
        return Matches(ids, scores)


def _dense_bool(n_docs: int, must: list[Matches], should: list[Matches], must_not: list[Matches]) -> Matches:
    """:meth:`TreeScorer._bool` over arrays of all ``n_docs`` documents: the same ids and score bits.

    Each document's score is added to 0.0 clause by clause in the same order
    (must, then should), so the sums are the sparse path's; O(N + postings).
    """
    scores = np.zeros(n_docs, dtype=np.float64)
    for clause in (*must, *should):
        scores[clause.ids] += clause.scores  # a clause's ids are unique: one add per document
    if must:
        count = np.zeros(n_docs, dtype=np.int32)
        for clause in must:
            count[clause.ids] += 1
        matched = count == len(must)
    elif should:
        matched = np.zeros(n_docs, dtype=np.bool_)
        for clause in should:
            matched[clause.ids] = True
    else:
        return _empty()  # must_not clauses only: nothing (Lucene)
    for clause in must_not:
        matched[clause.ids] = False
    ids = np.flatnonzero(matched).astype(np.int64, copy=False)
    return Matches(ids, scores[ids])


def _member(ids: NDArray[np.int64], sorted_ids: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which of ``ids`` are in the ascending ``sorted_ids``: one binary search each, no sort."""
    if not sorted_ids.shape[0]:
        return np.zeros(ids.shape[0], dtype=np.bool_)
    at = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.shape[0] - 1)
    found: NDArray[np.bool_] = sorted_ids[at] == ids
    return found


def _empty() -> Matches:
    return Matches(np.empty(0, np.int64), np.empty(0, np.float64))
