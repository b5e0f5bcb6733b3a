"""A parsed query tree (:mod:`weftsearch.querylang`) scored with BM25 or BM25F, as Lucene's ``BooleanQuery``.

Each node of the tree evaluates to the documents it matches, ascending
internal ids, and their scores, float64. A leaf is scored in its *scope*:

* a fielded leaf (``title:word``) in that text field alone, with the field's
  analyzer, its document frequencies and lengths, and the scorer's ``b`` for
  it (``field_b``, else ``b``): BM25 when the scorer is plain BM25, BM25F of
  that one field at the scorer's weight for it (``fields``, else 1.0) when
  the scorer is BM25F;
* an unfielded leaf in the default field ``text`` with a plain BM25 scorer,
  and over the scorer's fields with a BM25F one (:class:`BM25FScope`).

In its scope:

* :class:`~weftsearch.querylang.TermNode`: the word's analysed terms scored
  exactly as plain query text of that word is (summed over its distinct terms
  in sorted order, each weighted by how often the analysis repeats it), so
  ``Query.parse("word")`` has the same bits as ``Query("word")`` with the same
  scorer; a document matches when it holds any of them.
* :class:`~weftsearch.querylang.PhraseNode`: the words' analysed terms in a
  row (a stopword takes no position); a document matches where the phrase
  occurs (within ``slop``), and is scored as one term whose frequency is the
  phrase's (:func:`phrase_frequencies`; under BM25F its frequency in each
  field, folded as a term's ``tf_f``) and whose IDF is the sum of its terms'
  IDFs (Lucene). Reads the segments' positions; a field without them raises
  :class:`~weftsearch.errors.PhrasePositionsError` naming the field and how to
  keep them. A phrase of one term is that term.
* :class:`~weftsearch.querylang.PrefixNode`: the lower-cased prefix (not
  stemmed: ``Retriev*`` matches the indexed stem ``retriev``; as typed in a
  field whose analyzer keeps case, such as ``keyword``) expands to the
  scope's dictionary terms that start with it, at most :data:`MAX_PREFIX_TERMS`
  over the snapshot's segments and fields (more is an
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
``np.unique``); Python loops run over the tree's nodes, fields, a prefix's
terms and a phrase's terms, never over postings or documents.

Trees of must terms and phrases with should and must_not terms are scored
compiled instead (:mod:`weftsearch.scorers.bm25.conjunction`); this module is
that path's oracle, to the bit (``tests/scorers/test_bm25_conjunction.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import InvalidQueryError, PhrasePositionsError
from weftsearch.querylang import MAX_PREFIX_TERMS, BoolNode, Node, PhraseNode, PrefixNode, TermNode
from weftsearch.schema import DEFAULT_FIELD
from weftsearch.scorers.bm25.idf import lucene_idf

__all__ = [
    "DEFAULT_FIELD",
    "MAX_PREFIX_TERMS",
    "BM25FScope",
    "BM25Scope",
    "Field",
    "Matches",
    "Scope",
    "Tally",
    "TreeScorer",
    "phrase_frequencies",
]

# A Bool node is evaluated over arrays of all N documents on snapshots this small, or when its
# clauses hold this share of N in matches (as the bag-of-words numpy path accumulates densely):
# O(N + matches) then beats binary searches and sorts of the union. Both ways: the same bits.
_DENSE_BELOW_DOCS = 20_000
_DENSE_RATIO = 0.05


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


class Field:
    """One text field's inputs on a snapshot: its analysis, postings, statistics and positions.

    Args:
        snapshot: the snapshot searched.
        name: the field (``"text"`` is ``Document.text``).
        b: its length normalisation.
        analyse: its analyzer's terms of a query text (cached by the caller).

    Its statistics are the collection's on a shard's view (the whole
    collection's, :meth:`Snapshot.with_statistics`), its snapshot's otherwise.

    """

    def __init__(self, snapshot: Snapshot, name: str, b: float, analyse: Callable[[str], list[str]]) -> None:
        self.snapshot = snapshot
        self.name = name
        self.b = b
        self.analyse = analyse
        self._keeps_case: bool | None = None

    def postings(self, terms: Sequence[str]) -> Any:
        """The live postings of ``terms`` in this field (:meth:`Snapshot.postings`)."""
        return self.snapshot.postings(terms, self.name)

    def doc_freq(self, terms: Sequence[str], local: NDArray[np.int64]) -> NDArray[np.int64]:
        """Document frequencies in this field for the IDF: the collection's (``local`` is the snapshot's)."""
        return self.snapshot.fields_doc_freq([self.name], terms, local)

    def average(self) -> float:
        """The field's mean length over the collection (1.0 when 0, as BM25's ``avgdl``)."""
        average = self.snapshot.field_avglen(self.name)
        return average if average > 0 else 1.0

    def lengths(self) -> NDArray[np.float64]:
        """Every document's length in this field, float64."""
        lengths: NDArray[np.float64] = self.snapshot.field_lengths(self.name).astype(np.float64)
        return lengths

    def positions(
        self, term: str, node: PhraseNode
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.uint32], int]:
        """A term's live ids (ascending), its positions per id as CSR, and the postings read.

        Raises:
            PhrasePositionsError: the field keeps no positions (how to keep them is named).

        """
        id_runs: list[NDArray[np.int64]] = []
        start_runs: list[NDArray[np.int64]] = []
        position_runs: list[NDArray[np.uint32]] = []
        base = 0
        for part in self.snapshot.parts:
            reader: Any = part.reader.text_field(self.name)
            if not getattr(reader, "has_positions", False):
                raise PhrasePositionsError(
                    f"the text field {self.name!r} keeps no positions, so the phrase {node.to_string()!r} "
                    "cannot be matched; positions are chosen when an index is created: "
                    f"Index.create(path, schema=Schema((TextField({self.name!r}, positions=True), ...))) "
                    '(CLI: weft-search index --schema FILE, the field with "positions": true), '
                    "then add the documents again; or search the words without quotes"
                )
            local, _, starts, positions = reader.positions(term)
            if not local.shape[0]:
                continue
            ids = part.to_global(local)
            rows = np.flatnonzero(ids >= 0)
            starts, positions = _gather_rows(starts.astype(np.int64), positions, rows)
            id_runs.append(ids[rows])
            start_runs.append(starts[:-1] + base)
            position_runs.append(positions)
            base += int(starts[-1])
        if not id_runs:
            return np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.uint32), 0
        all_starts = np.concatenate([*start_runs, np.array([base], dtype=np.int64)])
        read = sum(int(run.shape[0]) for run in id_runs)
        return np.concatenate(id_runs), all_starts, np.concatenate(position_runs), read

    def fold(self, prefix: str) -> str:
        """``prefix`` lower-cased, unless the field's analyzer keeps case (``keyword``: as typed).

        Probed once per field: an analyzer that gives ``"Q"`` back as ``["Q"]``
        indexes terms in their case, so a lower-cased prefix would miss them.
        """
        if self._keeps_case is None:
            self._keeps_case = self.analyse("Q") == ["Q"]
        return prefix if self._keeps_case else prefix.lower()

    def prefix_terms(self, prefix: str, node: PrefixNode) -> set[str]:
        """The field's dictionary terms starting with ``prefix`` (bounded by :data:`MAX_PREFIX_TERMS`)."""
        prefix = self.fold(prefix)
        expanded: set[str] = set()
        for part in self.snapshot.parts:
            expanded.update(part.reader.text_field(self.name).terms_with_prefix(prefix, MAX_PREFIX_TERMS))
            _check_prefix(expanded, node)
        _check_prefix(expanded, node, self.snapshot.collection_prefix_terms([self.name], node.prefix))
        return expanded


def _check_prefix(expanded: set[str], node: PrefixNode, collection: int | None = None) -> None:
    """Refuse a prefix expanding to more than :data:`MAX_PREFIX_TERMS` terms here or in the collection.

    ``collection``: how many it expands to over the whole collection (a
    shard's view: every shard's terms, :meth:`Snapshot.collection_prefix_terms`).
    """
    if len(expanded) > MAX_PREFIX_TERMS or (collection is not None and collection > MAX_PREFIX_TERMS):
        raise InvalidQueryError(
            f"the prefix {node.prefix + '*'!r} matches more than MAX_PREFIX_TERMS "
            f"({MAX_PREFIX_TERMS}) terms of the index; make it longer"
        )


class Tally:
    """The plan's counts of one tree: distinct (field, term) pairs read, those matched, postings read."""

    def __init__(self) -> None:
        self.terms: set[tuple[str, str]] = set()
        self.matched: set[tuple[str, str]] = set()
        self.postings = 0

    def note(self, field: str, terms: Sequence[str], doc_freq: Sequence[int]) -> None:
        """As :meth:`Scope.note`."""
        for term, df in zip(terms, doc_freq, strict=True):
            self.terms.add((field, term))
            if df:
                self.matched.add((field, term))


class Scope:
    """Where a leaf is scored: one field (BM25) or several (BM25F); see the module docstring."""

    #: The fields' names, for messages.
    label: str

    def analyse(self, text: str) -> list[str]:
        """The analysed terms of a word or of a phrase's words."""
        raise NotImplementedError

    def terms(self, terms: list[str]) -> Matches:
        """Analysed ``terms`` scored as plain query text of them (repeats weighed by their count)."""
        raise NotImplementedError

    def phrase(self, terms: list[str], node: PhraseNode) -> Matches:
        """A phrase of two or more analysed terms, with ``node``'s slop (needs positions)."""
        raise NotImplementedError

    def prefix(self, node: PrefixNode) -> Matches:
        """Every document holding a term that starts with the prefix (:meth:`Field.fold`), at score 1."""
        raise NotImplementedError


class BM25Scope(Scope):
    """One field scored with BM25: ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))``.

    Args:
        field: the field.
        k1: BM25 ``k1``.
        tally: the plan's counts.
        impacts: the scorer's cached ``(ids, tf part)`` of a term (the default
            field's per-term cache), or ``None`` to read the postings here.
        norm: the scorer's cached :meth:`norm`, or ``None`` to compute it here.

    """

    def __init__(
        self,
        field: Field,
        k1: float,
        tally: Tally,
        impacts: Callable[[str], Matches | None] | None = None,
        norm: NDArray[np.float64] | None = None,
    ) -> None:
        self.field = field
        self.label = field.name
        self.k1 = k1
        self.tally = tally
        self._impacts = impacts
        self._norm = norm

    def analyse(self, text: str) -> list[str]:
        """As :meth:`Scope.analyse`."""
        return self.field.analyse(text)

    def norm(self) -> NDArray[np.float64]:
        """``k1 * (1 - b + b * len / avglen)`` of every document (the BM25 scorer's expression)."""
        if self._norm is None:
            field, k1 = self.field, self.k1

            def build() -> NDArray[np.float64]:
                norm = k1 * (1.0 - field.b + field.b * field.lengths() / field.average())
                norm.setflags(write=False)
                return norm

            # Once per snapshot, field and parameters: O(N) otherwise on every query.
            key = ("bm25.tree.norm", field.name, k1, field.b, field.average())
            self._norm = field.snapshot.memo(key, build)
        return self._norm

    def impacts(self, term: str) -> Matches | None:
        """A term's ids and ``tf * (k1 + 1) / (tf + norm)``; ``None`` when no live document holds it."""
        if self._impacts is not None:
            return self._impacts(term)
        postings = self.field.postings([term])
        if not postings.ids.shape[0]:
            return None
        tf = postings.term_freqs
        return Matches(postings.ids, tf * (self.k1 + 1.0) / (tf + self.norm()[postings.ids]))

    def idf(self, terms: list[str], found: Sequence[Matches | None]) -> NDArray[np.float64]:
        """Lucene IDF of ``terms`` (``found``: their :meth:`impacts`)."""
        local = np.array([0 if entry is None else entry.ids.shape[0] for entry in found], np.int64)
        return lucene_idf(self.field.snapshot.collection_n_docs, self.field.doc_freq(terms, local))

    def terms(self, terms: list[str]) -> Matches:
        """As :meth:`Scope.terms`."""
        # The BM25 scorer's own steps (BM25Scorer._term_contributions), so the same bits.
        distinct = sorted(set(terms))
        counts = Counter(terms)
        query_tf = np.array([counts[term] for term in distinct], dtype=np.float64)
        found = [self.impacts(term) for term in distinct]
        frequencies = [0 if entry is None else int(entry.ids.shape[0]) for entry in found]
        self.tally.note(self.label, distinct, frequencies)
        self.tally.postings += sum(frequencies)
        weights = query_tf * self.idf(distinct, found)
        present = [(entry, weight) for entry, weight in zip(found, weights.tolist(), strict=True) if entry]
        if not present:
            return _empty()
        if len(present) == 1:
            entry, weight = present[0]
            return Matches(entry.ids, weight * entry.scores)
        ids = np.concatenate([entry.ids for entry, _ in present])
        contributions = np.concatenate([entry.scores for entry, _ in present])
        contributions *= np.repeat(weights, np.array(frequencies, dtype=np.int64))
        return _sum_by_id(ids, contributions)

    def phrase(self, terms: list[str], node: PhraseNode) -> Matches:
        """As :meth:`Scope.phrase`."""
        found = _phrase_in_field(self.field, terms, node, self.tally)
        if found is None:
            return _empty()
        ids, frequency = found
        tf = frequency.astype(np.float64)
        idf = 0.0
        idfs = self.idf(terms, [self.impacts(term) for term in terms])
        for value in idfs.tolist():  # in phrase order, one add at a time: the oracle's order
            idf += value
        impacts = tf * (self.k1 + 1.0) / (tf + self.norm()[ids])
        return Matches(ids, idf * impacts)

    def prefix(self, node: PrefixNode) -> Matches:
        """As :meth:`Scope.prefix`."""
        expanded = self.field.prefix_terms(node.prefix, node)
        if not expanded:
            return _empty()
        postings = self.field.postings(sorted(expanded))
        self.tally.postings += int(postings.ids.shape[0])
        ids = np.unique(postings.ids)
        return Matches(ids, np.ones(ids.shape[0], dtype=np.float64))


class BM25FScope(Scope):
    """Several fields (or one weighted) scored with BM25F (design29.md; Lucene's ``combined_fields``).

    ``score = sum_t qtf * idf(t) * tf~ * (k1 + 1) / (tf~ + k1)``, ``tf~ = sum_f
    w_f * tf_f / (1 - b_f + b_f * len_f / avglen_f)`` summed over the fields in
    name order, ``idf`` from the documents holding ``t`` in any of them: the
    steps of ``BM25Scorer``'s BM25F path, so ``Query.parse("word")`` has the
    bits of ``Query("word")``. A phrase's ``tf_f`` is its frequency in field
    ``f`` (:func:`phrase_frequencies`), folded into ``tf~`` the same way, and
    its IDF is the sum of its terms' (each from any field).

    Args:
        fields: the fields, sorted by name, with their weights.
        k1: BM25 ``k1``.
        tally: the plan's counts.

    """

    def __init__(self, fields: Sequence[tuple[Field, float]], k1: float, tally: Tally) -> None:
        self.fields = sorted(fields, key=lambda entry: entry[0].name)
        self.label = "+".join(field.name for field, _ in self.fields)
        self.k1 = k1
        self.tally = tally
        self._norms: dict[str, NDArray[np.float64]] = {}

    def analyse(self, text: str) -> list[str]:
        """As :meth:`Scope.analyse`."""
        return self.fields[0][0].analyse(text)  # the scorer checked every field shares this analysis

    def norm(self, field: Field) -> NDArray[np.float64]:
        """``1 - b_f + b_f * len_f / avglen_f`` of every document."""
        norm = self._norms.get(field.name)
        if norm is None:

            def build() -> NDArray[np.float64]:
                built = 1.0 - field.b + field.b * field.lengths() / field.average()
                built.setflags(write=False)
                return built

            key = ("bm25f.tree.norm", field.name, field.b, field.average())
            norm = self._norms[field.name] = field.snapshot.memo(key, build)
        return norm

    def _doc_freq(
        self, distinct: list[str]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """``(pairs, doc_freq, pseudo)``: keys ``term * N + id`` (ascending), df per term, and ``tf~``."""
        n_docs = self.fields[0][0].snapshot.n_docs
        keys: list[NDArray[np.int64]] = []
        values: list[NDArray[np.float64]] = []
        for field, weight in self.fields:
            postings = field.postings(distinct)
            self.tally.note(field.name, distinct, postings.doc_freq.tolist())
            self.tally.postings += int(postings.ids.shape[0])
            if not postings.ids.shape[0]:
                continue
            keys.append(postings.term_index * np.int64(n_docs) + postings.ids)
            values.append(weight * postings.term_freqs / self.norm(field)[postings.ids])
        if not keys:
            return np.empty(0, np.int64), np.zeros(len(distinct), np.int64), np.empty(0, np.float64)
        pairs, slot = np.unique(np.concatenate(keys), return_inverse=True)
        # bincount adds in input order: field by field in name order, for every pair.
        pseudo = np.bincount(slot, weights=np.concatenate(values), minlength=pairs.shape[0])
        doc_freq = np.bincount(pairs // np.int64(n_docs), minlength=len(distinct)).astype(np.int64)
        return pairs, doc_freq, pseudo.astype(np.float64, copy=False)

    def _idf(self, distinct: list[str], doc_freq: NDArray[np.int64]) -> NDArray[np.float64]:
        """The IDF of ``distinct`` from their df in any field of the scope (the collection's on a shard)."""
        snapshot = self.fields[0][0].snapshot
        names = [field.name for field, _ in self.fields]
        return lucene_idf(snapshot.collection_n_docs, snapshot.fields_doc_freq(names, distinct, doc_freq))

    def terms(self, terms: list[str]) -> Matches:
        """As :meth:`Scope.terms`."""
        distinct = sorted(set(terms))
        counts = Counter(terms)
        query_tf = np.array([counts[term] for term in distinct], dtype=np.float64)
        pairs, doc_freq, pseudo = self._doc_freq(distinct)
        if not pairs.shape[0]:
            return _empty()
        n_docs = np.int64(self.fields[0][0].snapshot.n_docs)
        term_of = pairs // n_docs
        weights = query_tf * self._idf(distinct, doc_freq)
        impacts = pseudo * (self.k1 + 1.0) / (pseudo + self.k1)
        # Summed per document in term order (pairs are term-major): the dense path's order.
        return _sum_by_id(pairs - term_of * n_docs, weights[term_of] * impacts)

    def phrase(self, terms: list[str], node: PhraseNode) -> Matches:
        """As :meth:`Scope.phrase`."""
        id_runs: list[NDArray[np.int64]] = []
        value_runs: list[NDArray[np.float64]] = []
        for field, weight in self.fields:
            found = _phrase_in_field(field, terms, node, self.tally)
            if found is not None:
                ids, frequency = found
                id_runs.append(ids)
                value_runs.append(weight * frequency.astype(np.float64) / self.norm(field)[ids])
        distinct = sorted(set(terms))
        _, doc_freq, _ = self._doc_freq(distinct)
        if not id_runs:
            return _empty()
        ids, slot = np.unique(np.concatenate(id_runs), return_inverse=True)
        pseudo = np.bincount(slot, weights=np.concatenate(value_runs), minlength=ids.shape[0])
        by_term = dict(zip(distinct, self._idf(distinct, doc_freq).tolist(), strict=True))
        idf = 0.0
        for term in terms:  # in phrase order, one add at a time
            idf += by_term[term]
        return Matches(ids, idf * (pseudo * (self.k1 + 1.0) / (pseudo + self.k1)))

    def prefix(self, node: PrefixNode) -> Matches:
        """As :meth:`Scope.prefix`."""
        expanded: set[str] = set()
        for field, _ in self.fields:
            expanded |= field.prefix_terms(node.prefix, node)
            _check_prefix(expanded, node)
        snapshot = self.fields[0][0].snapshot
        names = [field.name for field, _ in self.fields]
        _check_prefix(expanded, node, snapshot.collection_prefix_terms(names, node.prefix))
        if not expanded:
            return _empty()
        runs = []
        for field, _ in self.fields:
            postings = field.postings(sorted(expanded))
            self.tally.postings += int(postings.ids.shape[0])
            runs.append(postings.ids)
        ids = np.unique(np.concatenate(runs))
        return Matches(ids, np.ones(ids.shape[0], dtype=np.float64))


def _phrase_in_field(
    field: Field, terms: list[str], node: PhraseNode, tally: Tally
) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """The documents where the phrase occurs in ``field`` and its frequency there; ``None``: nowhere."""
    lists = []
    for term in terms:
        ids, starts, positions, read = field.positions(term, node)
        tally.note(field.name, [term], [read])
        tally.postings += read
        lists.append((ids, starts, positions))
    candidates = min((ids for ids, _, _ in lists), key=lambda ids: ids.shape[0])
    for ids, _, _ in lists:
        candidates = candidates[_member(candidates, ids)]
    if not candidates.shape[0]:
        return None
    rows = [
        _gather_rows(starts, positions, np.searchsorted(ids, candidates)) for ids, starts, positions in lists
    ]
    frequency = phrase_frequencies(rows, node.slop)
    hit = frequency > 0
    if not hit.any():
        return None
    return candidates[hit], frequency[hit]


def _sum_by_id(ids: NDArray[np.int64], contributions: NDArray[np.float64]) -> Matches:
    """Distinct ids (ascending) and their contributions summed in input order (a stable sort)."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    first = np.empty(sorted_ids.shape[0], dtype=np.bool_)
    first[0] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=first[1:])
    slot = np.empty(ids.shape[0], dtype=np.int64)
    slot[order] = np.cumsum(first) - 1
    summed = np.bincount(slot, weights=contributions).astype(np.float64, copy=False)
    return Matches(sorted_ids[first], summed)


class TreeScorer:
    """One tree's evaluation on one snapshot (see the module docstring for the semantics).

    Args:
        snapshot: the snapshot searched.
        scope: the :class:`Scope` of a leaf's field (``None``: unfielded),
            made once per field and tree; it raises a typed error for a field
            the index lacks.
        tally: the plan's counts, which the scopes fill.

    """

    def __init__(self, snapshot: Snapshot, scope: Callable[[str | None], Scope], tally: Tally) -> None:
        self.snapshot = snapshot
        self._make_scope = scope
        self._scopes: dict[str | None, Scope] = {}
        self.tally = tally

    def scope(self, field: str | None) -> Scope:
        """The scope of ``field`` (made on first use)."""
        found = self._scopes.get(field)
        if found is None:
            found = self._scopes[field] = self._make_scope(field)
        return found

    def evaluate(self, node: Node) -> Matches | None:
        """What ``node`` matches with its scores; ``None`` when it analyses to nothing (dropped)."""
        if isinstance(node, BoolNode):
            found = self._bool(node)
        else:
            scope = self.scope(node.field)
            if isinstance(node, TermNode):
                terms = scope.analyse(node.text)
                found = scope.terms(terms) if terms else None
            elif isinstance(node, PhraseNode):
                terms = [term for word in node.terms for term in scope.analyse(word)]
                if not terms:
                    found = None
                elif len(terms) == 1:
                    found = scope.terms(terms)  # a phrase of one term is that term
                else:
                    found = scope.phrase(terms, node)
            else:
                found = scope.prefix(node)
        if found is None or node.boost == 1.0:
            return found
        return Matches(found.ids, found.scores * node.boost)

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
