"""A BM25 / BM25F score broken into its parts, per document, as Elasticsearch's ``_explain`` does.

:meth:`BM25Scorer.explain <weftsearch.scorers.BM25Scorer.explain>` calls
:func:`explain_documents`. Plain query text is explained as the unfielded
leaf it scores as (:mod:`.tree`: ``Query.parse("word")`` and ``Query("word")``
have the same bits); a parsed tree node by node, each node's value read from
the same :class:`~.tree.TreeScorer` evaluation the search uses, so a root's
value is the stream's score to the bit. Under a leaf, each query term's part:
its query count, IDF (``n`` and ``N``), its frequency in each field, the
field's length and average length, ``k1`` and ``b``; a phrase's frequency and
the sum of its terms' IDFs; a prefix's constant score. A document the query
does not match gets value 0 and the reason (a required clause that fails, an
excluding clause that holds, no term present).

On request only (never on the search path): Python loops over the
explained documents, the tree's nodes and the query's terms, O(documents x
terms) on top of one evaluation of each node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.explanation import Explanation
from weftsearch.querylang import BoolNode, Node, PhraseNode, PrefixNode, TermNode
from weftsearch.scorers.bm25.tree import (
    BM25FScope,
    BM25Scope,
    Field,
    Matches,
    Scope,
    Tally,
    TreeScorer,
    _phrase_in_field,
)

__all__ = ["explain_documents", "explain_text"]


def explain_documents(
    tree_scorer: TreeScorer, node: Node, ids: NDArray[np.int64], label: str
) -> list[Explanation]:
    """Each of ``ids``' explanation under ``node`` (its value the node's score there, 0 without a match).

    Args:
        tree_scorer: the evaluation of the query's tree on the snapshot (its scopes made by the scorer).
        node: the query (plain text as the unfielded :class:`~weftsearch.querylang.TermNode` of it).
        ids: internal ids of the snapshot, any order, repeats allowed.
        label: the scorer's name, for the root's description.

    """
    explained = _NodeExplainer(tree_scorer, ids).explain(node)
    return [
        Explanation(0.0, f"{label}: no match, the query analyses to no term") if found is None else found
        for found in explained
    ]


def explain_text(tree_scorer: TreeScorer, text: str, ids: NDArray[np.int64], label: str) -> list[Explanation]:
    """Each of ``ids``' explanation for plain query ``text``: its terms in the unfielded scope, summed.

    The root's value is the scope's score of the text there (the bits the
    bag-of-words search gives), 0 where no term of the text is present.
    """
    scope = tree_scorer.scope(None)
    terms = scope.analyse(text) if text else []
    details = _terms(scope, terms, ids, repr(text))
    if not terms:
        return [Explanation(0.0, f"{label}: no match, the query analyses to no term")] * ids.shape[0]
    values, matched = _lookup(scope.terms(terms), ids)
    return [
        Explanation(float(values[row]), detail.description, detail.details) if matched[row] else detail
        for row, detail in enumerate(details)
    ]


class _NodeExplainer:
    """Explains one tree's nodes for a fixed list of documents."""

    def __init__(self, tree_scorer: TreeScorer, ids: NDArray[np.int64]) -> None:
        self.tree = tree_scorer
        self.ids = np.asarray(ids, dtype=np.int64)

    def scores(self, node: Node) -> tuple[NDArray[np.float64], NDArray[np.bool_]] | None:
        """``node``'s score at each document and whether it matches there (``None``: dropped)."""
        found = self.tree.evaluate(node)
        if found is None:
            return None
        return _lookup(found, self.ids)

    def explain(self, node: Node) -> list[Explanation | None]:
        """Each document's explanation of ``node``; ``None`` for all when the node is dropped."""
        looked = self.scores(node)
        if looked is None:
            return [None] * self.ids.shape[0]
        values, matched = looked
        inner = self._bool(node, matched) if isinstance(node, BoolNode) else self._leaf(node, matched)
        out: list[Explanation | None] = []
        for row, detail in enumerate(inner):
            value = float(values[row])
            if not matched[row]:
                out.append(Explanation(0.0, detail.description, detail.details))
            elif node.boost != 1.0:
                boost = Explanation(node.boost, "boost")
                out.append(Explanation(value, f"{node.to_string()}, product of:", (detail, boost)))
            else:
                out.append(Explanation(value, detail.description, detail.details))
        return out

    def _bool(self, node: BoolNode, matched: NDArray[np.bool_]) -> list[Explanation]:
        must = [(clause, self.explain(clause)) for clause in node.must]
        should = [(clause, self.explain(clause)) for clause in node.should]
        must_not = [(clause, self.explain(clause)) for clause in node.must_not]
        out: list[Explanation] = []
        for row in range(self.ids.shape[0]):
            if matched[row]:
                parts = [found[row] for _, found in (*must, *should) if _holds(found[row])]
                total = 0.0
                for part in parts:
                    total += part.value  # type: ignore[union-attr]
                out.append(Explanation(total, "sum of:", tuple(p for p in parts if p is not None)))
                continue
            out.append(Explanation(0.0, _why_not(node, row, must, should, must_not)))
        return out

    def _leaf(self, node: Node, matched: NDArray[np.bool_]) -> list[Explanation]:
        scope = self.tree.scope(node.field)  # type: ignore[union-attr]
        if isinstance(node, TermNode):
            return _terms(scope, scope.analyse(node.text), self.ids, node.to_string())
        if isinstance(node, PhraseNode):
            terms = [term for word in node.terms for term in scope.analyse(word)]
            if len(terms) == 1:
                return _terms(scope, terms, self.ids, node.to_string())
            return _phrase(scope, terms, node, self.ids)
        assert isinstance(node, PrefixNode)
        return [
            Explanation(1.0, f"{node.to_string()}: constant score (a term of {scope.label} starts with it)")
            if hit
            else Explanation(0.0, f"no match: no term of {scope.label} starts with {node.prefix!r}")
            for hit in matched.tolist()
        ]


def _holds(found: Explanation | None) -> bool:
    return found is not None and (found.value != 0.0 or not found.description.startswith("no match"))


def _why_not(
    node: BoolNode,
    row: int,
    must: Sequence[tuple[Node, list[Explanation | None]]],
    should: Sequence[tuple[Node, list[Explanation | None]]],
    must_not: Sequence[tuple[Node, list[Explanation | None]]],
) -> str:
    """Why a Bool node does not match a document (Elasticsearch's reasons)."""
    for clause, found in must:
        if found[row] is not None and not _holds(found[row]):
            return f"no match: required clause {clause.to_string()} does not match"
    for clause, found in must_not:
        if _holds(found[row]):
            return f"no match: excluded by the clause -{clause.to_string()}"
    if not any(found[row] is not None for _, found in (*must, *should, *must_not)):
        return "no match: every clause analyses to no term"
    if not must and not any(found[row] is not None for _, found in should):
        return "no match: only excluding clauses (a query of NOT clauses matches nothing)"
    return f"no match: none of the optional clauses of {node.to_string()} matches"


def _lookup(found: Matches, ids: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """``found``'s score at each of ``ids`` (0 where absent) and the mask of those present."""
    at = np.searchsorted(found.ids, ids)
    present = at < found.ids.shape[0]
    present[present] = found.ids[at[present]] == ids[present]
    values = np.zeros(ids.shape[0], dtype=np.float64)
    values[present] = found.scores[at[present]]
    return values, present


def _frequencies(field: Field, term: str, ids: NDArray[np.int64]) -> tuple[NDArray[np.float64], int]:
    """The term's frequency in ``field`` at each of ``ids`` (0 where absent) and its live df there."""
    postings = field.postings([term])
    values, present = _lookup(Matches(postings.ids, postings.term_freqs.astype(np.float64)), ids)
    values[~present] = 0.0
    return values, int(postings.ids.shape[0])


def _idf_node(idf: float, n: int, total: int, what: str) -> Explanation:
    return Explanation(
        idf,
        "idf, computed as log(1 + (N - n + 0.5) / (n + 0.5)) from:",
        (
            Explanation(float(n), f"n, number of documents containing {what}"),
            Explanation(float(total), "N, total number of documents"),
        ),
    )


def _terms(scope: Scope, terms: list[str], ids: NDArray[np.int64], what: str) -> list[Explanation]:
    """Analysed ``terms`` scored as plain text in ``scope``: one child per term present, summed."""
    if not terms:
        return [Explanation(0.0, f"no match: {what} analyses to no term")] * ids.shape[0]
    distinct = sorted(set(terms))
    counts = Counter(terms)
    if isinstance(scope, BM25Scope):
        per_term = _bm25_terms(scope, distinct, counts, ids)
    else:
        assert isinstance(scope, BM25FScope)
        per_term = _bm25f_terms(scope, distinct, counts, ids)
    out = []
    for row in range(ids.shape[0]):
        parts = [found[row] for found in per_term if found[row] is not None]
        if not parts:
            out.append(
                Explanation(0.0, f"no match: no term of {what} ({', '.join(distinct)}) in {scope.label}")
            )
            continue
        total = 0.0
        for part in parts:
            total += part.value  # type: ignore[union-attr]
        out.append(
            Explanation(total, f"sum of the terms of {what}:", tuple(p for p in parts if p is not None))
        )
    return out


def _bm25_terms(
    scope: BM25Scope, distinct: list[str], counts: Counter[str], ids: NDArray[np.int64]
) -> list[list[Explanation | None]]:
    """Per term, each document's BM25 part in the scope's one field (``None`` without the term)."""
    field, k1 = scope.field, scope.k1
    norm = scope.norm()
    lengths = field.lengths()
    average = field.average()
    found = [scope.impacts(term) for term in distinct]
    idfs = scope.idf(distinct, found).tolist()
    snapshot = field.snapshot
    local = [0 if entry is None else int(entry.ids.shape[0]) for entry in found]
    dfs = field.doc_freq(distinct, np.array(local, dtype=np.int64)).tolist()
    out: list[list[Explanation | None]] = []
    for term, entry, idf, df in zip(distinct, found, idfs, dfs, strict=True):
        column: list[Explanation | None] = [None] * ids.shape[0]
        out.append(column)
        if entry is None:
            continue
        impacts, present = _lookup(entry, ids)
        tfs, _ = _frequencies(field, term, ids)
        weight = float(counts[term]) * idf
        for row in np.flatnonzero(present).tolist():
            doc = int(ids[row])
            tf = float(tfs[row])
            saturation = float(impacts[row])
            column[row] = Explanation(
                weight * saturation,
                f"weight({field.name}:{term}) [BM25], computed as "
                "qtf * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)) from:",
                (
                    Explanation(float(counts[term]), "qtf, times the term is in the query"),
                    _idf_node(idf, int(df), snapshot.collection_n_docs, f"{term!r} in {field.name}"),
                    Explanation(
                        saturation,
                        "tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)) from:",
                        (
                            Explanation(tf, f"tf, occurrences of {term!r} in {field.name}"),
                            Explanation(k1, "k1, term saturation"),
                            Explanation(field.b, "b, length normalisation"),
                            Explanation(float(lengths[doc]), f"dl, length of {field.name} (terms)"),
                            Explanation(average, f"avgdl, average length of {field.name}"),
                            Explanation(float(norm[doc]), "k1 * (1 - b + b * dl / avgdl)"),
                        ),
                    ),
                ),
            )
    return out


def _field_parts(
    scope: BM25FScope, frequencies: Sequence[NDArray[np.float64]], row: int, doc: int, what: str
) -> tuple[Explanation, ...]:
    """BM25F's ``w_f * tf_f / (1 - b_f + b_f * len_f / avglen_f)`` of each field holding ``what``."""
    parts = []
    for (field, weight), tfs in zip(scope.fields, frequencies, strict=True):
        tf = float(tfs[row])
        if tf == 0.0:
            continue
        norm = float(scope.norm(field)[doc])
        parts.append(
            Explanation(
                weight * tf / norm,
                f"{field.name}: w * tf / (1 - b + b * len / avglen) from:",
                (
                    Explanation(tf, f"tf, occurrences of {what} in {field.name}"),
                    Explanation(weight, "w, the field's weight"),
                    Explanation(field.b, "b, the field's length normalisation"),
                    Explanation(float(field.lengths()[doc]), f"len, length of {field.name} (terms)"),
                    Explanation(field.average(), f"avglen, average length of {field.name}"),
                ),
            )
        )
    return tuple(parts)


def _bm25f_terms(
    scope: BM25FScope, distinct: list[str], counts: Counter[str], ids: NDArray[np.int64]
) -> list[list[Explanation | None]]:
    """Per term, each document's BM25F part over the scope's fields (``None`` without the term)."""
    pairs, local, pseudo = scope._doc_freq(distinct)
    idfs = scope._idf(distinct, local).tolist()
    snapshot = scope.fields[0][0].snapshot
    # The df the IDF used: the collection's on a shard's view, this snapshot's otherwise.
    doc_freq = snapshot.fields_doc_freq([field.name for field, _ in scope.fields], distinct, local)
    n_docs = np.int64(snapshot.n_docs)
    k1 = scope.k1
    out: list[list[Explanation | None]] = []
    for index, term in enumerate(distinct):
        column: list[Explanation | None] = [None] * ids.shape[0]
        out.append(column)
        keys = np.int64(index) * n_docs + ids
        at = np.searchsorted(pairs, keys)
        present = at < pairs.shape[0]
        present[present] = pairs[at[present]] == keys[present]
        if not present.any():
            continue
        frequencies = [_frequencies(field, term, ids)[0] for field, _ in scope.fields]
        weight = float(counts[term]) * idfs[index]
        for row in np.flatnonzero(present).tolist():
            tilde = float(pseudo[at[row]])
            saturation = tilde * (k1 + 1.0) / (tilde + k1)
            column[row] = Explanation(
                weight * saturation,
                f"weight({scope.label}:{term}) [BM25F], computed as "
                "qtf * idf * tf~ * (k1 + 1) / (tf~ + k1) from:",
                (
                    Explanation(float(counts[term]), "qtf, times the term is in the query"),
                    _idf_node(
                        idfs[index],
                        int(doc_freq[index]),
                        snapshot.collection_n_docs,
                        f"{term!r} in any of {scope.label}",
                    ),
                    Explanation(
                        tilde,
                        "tf~, sum over fields of:",
                        _field_parts(scope, frequencies, row, int(ids[row]), repr(term)),
                    ),
                    Explanation(k1, "k1, term saturation"),
                ),
            )
    return out


def _phrase(scope: Scope, terms: list[str], node: PhraseNode, ids: NDArray[np.int64]) -> list[Explanation]:
    """A phrase scored as one term: its frequency per field and the sum of its terms' IDFs."""
    fields = [(scope.field, 1.0)] if isinstance(scope, BM25Scope) else list(scope.fields)  # type: ignore[attr-defined]
    frequencies = []
    for field, _ in fields:
        found = _phrase_in_field(field, terms, node, Tally())
        if found is None:
            frequencies.append(np.zeros(ids.shape[0], dtype=np.float64))
        else:
            values, present = _lookup(Matches(found[0], found[1].astype(np.float64)), ids)
            values[~present] = 0.0
            frequencies.append(values)
    idf_parts = _term_idfs(scope, terms)
    idf = 0.0
    for part in idf_parts:
        idf += part.value
    idf_node = Explanation(idf, "idf, sum of the phrase's terms' idfs:", tuple(idf_parts))
    out = []
    what = node.to_string()
    for row in range(ids.shape[0]):
        doc = int(ids[row])
        if not any(values[row] for values in frequencies):
            out.append(Explanation(0.0, f"no match: the phrase {what} does not occur in {scope.label}"))
            continue
        if isinstance(scope, BM25Scope):
            tf = float(frequencies[0][row])
            norm = float(scope.norm()[doc])
            saturation = tf * (scope.k1 + 1.0) / (tf + norm)
            tf_node = Explanation(tf, f"tf, occurrences of the phrase in {scope.label}")
            detail: tuple[Explanation, ...] = (
                idf_node,
                Explanation(
                    saturation,
                    "tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)) from:",
                    (
                        tf_node,
                        Explanation(scope.k1, "k1, term saturation"),
                        Explanation(norm, "k1 * (1 - b + b * dl / avgdl)"),
                    ),
                ),
            )
        else:
            assert isinstance(scope, BM25FScope)
            parts = _field_parts(scope, frequencies, row, doc, "the phrase")
            tilde = 0.0
            for part in parts:
                tilde += part.value
            saturation = tilde * (scope.k1 + 1.0) / (tilde + scope.k1)
            detail = (
                idf_node,
                Explanation(tilde, "tf~, sum over fields of:", parts),
                Explanation(scope.k1, "k1, term saturation"),
            )
        out.append(
            Explanation(
                idf * saturation, f"weight({what} in {scope.label}) [phrase as one term], from:", detail
            )
        )
    return out


def _term_idfs(scope: Scope, terms: list[str]) -> list[Explanation]:
    """Each phrase term's IDF node, in phrase order (repeats included), as the scope computes them."""
    distinct = sorted(set(terms))
    if isinstance(scope, BM25Scope):
        found = [scope.impacts(term) for term in distinct]
        values = scope.idf(distinct, found).tolist()
        local = np.array([0 if entry is None else int(entry.ids.shape[0]) for entry in found], dtype=np.int64)
        dfs = scope.field.doc_freq(distinct, local).tolist()
        total = scope.field.snapshot.collection_n_docs
    else:
        assert isinstance(scope, BM25FScope)
        _, local_df, _ = scope._doc_freq(distinct)
        values = scope._idf(distinct, local_df).tolist()
        snapshot = scope.fields[0][0].snapshot
        dfs = snapshot.fields_doc_freq([field.name for field, _ in scope.fields], distinct, local_df).tolist()
        total = snapshot.collection_n_docs
    by_term = {term: (value, df) for term, value, df in zip(distinct, values, dfs, strict=True)}
    return [_idf_node(by_term[term][0], int(by_term[term][1]), total, repr(term)) for term in terms]
