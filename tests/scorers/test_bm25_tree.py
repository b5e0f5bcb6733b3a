"""The BM25 scorer on query trees against an exhaustive oracle: same ids, same score bits, same order.

The oracle re-analyses every document's text (a term's position is its index
in ``analyze()``'s output, as :class:`weftsearch.analysis.Token` defines it)
and evaluates the tree document by document in plain Python floats, in the
order :mod:`weftsearch.scorers.bm25.tree` defines (a word as plain text of it:
its distinct terms in sorted order; a Bool's must then should clauses, each
added to 0.0 in order; the boost multiplied last). With the same operations
in the same order, IEEE arithmetic gives the same bits, so the comparison is
exact (``==`` on floats): no tolerance.

Phrases read the segments' real positions (an index whose schema keeps
them), over two segments and deleted documents. The second half checks the
same way an index with named text fields (``text``, ``title`` and a keyword
``tags``), fielded clauses and the BM25F scorer (:class:`FieldOracle`).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Sequence
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from tests.querylang.strategies import trees
from weftsearch import BM25Scorer, Document, Index, Query
from weftsearch.analysis import EnglishAnalyzer, get_analyzer
from weftsearch.errors import InvalidQueryError, PhrasePositionsError, UnknownTextFieldError
from weftsearch.querylang import BoolNode, Node, PhraseNode, PrefixNode, TermNode
from weftsearch.schema import Schema, TextField
from weftsearch.scorers.bm25 import lucene_idf
from weftsearch.scorers.bm25 import tree as tree_module
from weftsearch.scorers.bm25.tree import MAX_PREFIX_TERMS, phrase_frequencies

ANALYZER = EnglishAnalyzer()
#: Words that stem, a stopword, a hyphenated word (two terms), capitals.
VOCABULARY = ["alpha", "beta", "gamma", "delta", "running", "runs", "the", "Gamma", "alpha-beta", "epsilon"]
PREFIXES = ["al", "b", "ru", "g", "x", "ALP", "d", "Al", "Be"]
K1, B = 1.2, 0.75


# ---------------------------------------------------------------------- the oracle


def phrase_count(positions: Sequence[Sequence[int]], slop: int) -> int:
    """Occurrences of a phrase by brute force: first-term positions with some choice of the others in slop."""
    count = 0
    for first in positions[0]:
        for rest in itertools.product(*positions[1:]):
            shifted = [first, *(p - i for i, p in enumerate(rest, start=1))]
            if max(shifted) - min(shifted) <= slop:
                count += 1
                break
    return count


class Oracle:
    """BM25 of a query tree over documents' re-analysed texts, one document at a time."""

    def __init__(self, docs: dict[str, str]) -> None:
        self.terms = {key: ANALYZER.analyze(text) for key, text in docs.items()}
        self.n = len(docs)
        lengths = [len(terms) for terms in self.terms.values()]
        self.avgdl = sum(lengths) / self.n if self.n and sum(lengths) else 1.0
        self.df = Counter(term for terms in self.terms.values() for term in set(terms))
        self.dictionary = sorted(self.df)

    def idf(self, term: str) -> float:
        return float(lucene_idf(self.n, np.array([self.df[term]], np.int64))[0])

    def impact(self, tf: float, key: str) -> float:
        norm = K1 * (1.0 - B + B * float(len(self.terms[key])) / self.avgdl)
        return tf * (K1 + 1.0) / (tf + norm)

    def dropped(self, node: Node) -> bool:
        if isinstance(node, TermNode):
            return not ANALYZER.analyze(node.text)
        if isinstance(node, PhraseNode):
            return not [t for w in node.terms for t in ANALYZER.analyze(w)]
        if isinstance(node, PrefixNode):
            return False
        return all(self.dropped(c) for c in (*node.must, *node.should, *node.must_not))

    def score(self, node: Node, key: str) -> float | None:
        """The node's score for document ``key``, or ``None`` when it does not match."""
        terms = self.terms[key]
        found: float | None
        if isinstance(node, TermNode):
            found = self.word(ANALYZER.analyze(node.text), key)
        elif isinstance(node, PrefixNode):
            expanded = [t for t in self.dictionary if t.startswith(node.prefix.lower())]
            if len(expanded) > MAX_PREFIX_TERMS:
                raise InvalidQueryError("too many")
            found = 1.0 if any(t in expanded for t in terms) else None
        elif isinstance(node, PhraseNode):
            phrase = [t for w in node.terms for t in ANALYZER.analyze(w)]
            if len(phrase) == 1:
                tf = terms.count(phrase[0])
                found = self.idf(phrase[0]) * self.impact(float(tf), key) if tf else None
            else:
                positions = [[p for p, t in enumerate(terms) if t == term] for term in phrase]
                count = phrase_count(positions, node.slop)
                idf = 0.0
                for term in phrase:
                    idf += self.idf(term)
                found = idf * self.impact(float(count), key) if count else None
        else:
            found = self.boolean(node, key)
        if found is None or node.boost == 1.0:
            return found
        return found * node.boost

    def word(self, analysed: list[str], key: str) -> float | None:
        counts = Counter(analysed)
        tfs = Counter(self.terms[key])
        if not any(tfs[t] for t in counts):
            return None
        total = 0.0
        for term in sorted(counts):
            if tfs[term]:
                total += (float(counts[term]) * self.idf(term)) * self.impact(float(tfs[term]), key)
        return total

    def boolean(self, node: BoolNode, key: str) -> float | None:
        must = [self.score(c, key) for c in node.must if not self.dropped(c)]
        should = [self.score(c, key) for c in node.should if not self.dropped(c)]
        must_not = [self.score(c, key) for c in node.must_not if not self.dropped(c)]
        if must:
            if any(s is None for s in must):
                return None
        elif not should or all(s is None for s in should):
            return None
        if any(s is not None for s in must_not):
            return None
        total = 0.0
        for s in (*must, *should):
            if s is not None:
                total += s
        return total

    def search(self, tree: Node, k: int, allowed: set[str] | None = None) -> list[tuple[str, float]]:
        if self.dropped(tree):
            return []
        hits = [(key, self.score(tree, key)) for key in self.terms if allowed is None or key in allowed]
        found = [(key, s) for key, s in hits if s is not None]
        return sorted(found, key=lambda hit: (-hit[1], hit[0]))[:k]


# ---------------------------------------------------------------------- the index under test


def build(docs: dict[str, str], extra: int, positions: bool = True) -> Index:
    """An index of ``docs`` in two segments, plus ``extra`` documents added and deleted (tombstones)."""
    index = Index(schema=Schema((TextField("text", positions=positions),)))
    items = list(docs.items())
    half = len(items) // 2
    index.add_many([Document(key, text, fields={"n": i}) for i, (key, text) in enumerate(items[:half])])
    index.snapshot()  # a segment of its own
    index.add_many(
        [Document(f"zz{i}", "alpha gamma running") for i in range(extra)]
        + [Document(key, text, fields={"n": half + i}) for i, (key, text) in enumerate(items[half:])]
    )
    index.snapshot()
    for i in range(extra):
        index.delete(f"zz{i}")
    parts = index.snapshot().parts
    assert len(parts) == (2 if half else 1)
    assert (parts[-1].deleted is not None) == (extra > 0)
    return index


def engine_search(index: Index, query: Query, k: int) -> list[tuple[str, float]]:
    snapshot = index.snapshot()
    stream = BM25Scorer(K1, B).score(snapshot, query, k)
    return list(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))


DOCS = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3),
    st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=8).map(" ".join),
    min_size=1,
    max_size=12,
)
LEAF_TEXTS = st.sampled_from(VOCABULARY)
BOOSTS = st.sampled_from([1.0, 2.5, 0.5, 3.0])


def term_leaves(phrases: bool) -> st.SearchStrategy[Node]:
    options = [
        st.builds(TermNode, LEAF_TEXTS, st.none(), BOOSTS),
        st.builds(PrefixNode, st.sampled_from(PREFIXES), st.none(), BOOSTS),
    ]
    if phrases:
        words = st.lists(LEAF_TEXTS, min_size=1, max_size=3).map(tuple)
        options.append(st.builds(PhraseNode, words, st.none(), st.integers(0, 3), BOOSTS))
    return st.one_of(*options)


def compare(docs: dict[str, str], tree: Node, k: int, extra: int, dense: bool = True) -> None:
    """The engine against the oracle; ``dense``: boolean nodes over arrays of all N (else the sparse way)."""
    oracle = Oracle(docs)
    index = build(docs, extra)
    query = Query(tree=tree)
    with (
        mock.patch.object(tree_module, "_DENSE_BELOW_DOCS", 20_000 if dense else 0),
        mock.patch.object(tree_module, "_DENSE_RATIO", 0.05 if dense else math.inf),
    ):
        try:
            expected = oracle.search(tree, k)
        except InvalidQueryError:
            with pytest.raises(InvalidQueryError, match="MAX_PREFIX_TERMS"):
                engine_search(index, query, k)
            return
        assert engine_search(index, query, k) == expected


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    DOCS,
    trees(term_leaves(phrases=False), max_leaves=8),
    st.integers(1, 15),
    st.integers(0, 2),
    st.booleans(),
)
@example(
    {"a": "alpha beta", "b": "beta"},
    BoolNode(must=(TermNode("beta"),), must_not=(TermNode("alpha"),)),
    5,
    0,
    False,
)
@example({"a": "the"}, BoolNode(must=(TermNode("the"),), should=(TermNode("alpha"),)), 5, 0, True)
@example({"a": "alpha", "b": "beta"}, BoolNode(must_not=(TermNode("alpha"),)), 5, 1, False)
def test_trees_without_phrases_match_the_oracle_to_the_bit(
    docs: dict[str, str], tree: Node, k: int, extra: int, dense: bool
) -> None:
    compare(docs, tree, k, extra, dense)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    DOCS, trees(term_leaves(phrases=True), max_leaves=6), st.integers(1, 15), st.integers(0, 2), st.booleans()
)
@example(
    {"a": "alpha beta gamma", "b": "gamma beta alpha"}, PhraseNode(("alpha", "gamma"), slop=1), 5, 1, True
)
@example({"a": "alpha the beta", "b": "beta alpha"}, PhraseNode(("alpha", "the", "beta")), 5, 0, False)
@example({"a": "alpha-beta gamma"}, PhraseNode(("alpha", "beta", "gamma"), boost=2.5), 5, 0, True)
def test_trees_with_phrases_match_the_oracle_on_real_positions(
    docs: dict[str, str], tree: Node, k: int, extra: int, dense: bool
) -> None:
    compare(docs, tree, k, extra, dense)


def test_filters_and_k_apply_to_trees() -> None:
    docs = {f"d{i}": " ".join(["alpha"] * (i % 3 + 1) + ["beta"] * (i % 2)) for i in range(10)}
    index = build(docs, 0)
    tree = BoolNode(should=(TermNode("alpha"), TermNode("beta", boost=2.0)))
    oracle = Oracle(docs)
    snapshot = index.snapshot()
    even = {key for key in docs if str(snapshot.document(snapshot.id_of(key)).fields["n"]) in "02468"}
    for k in (1, 3, 20):
        got = engine_search(index, Query(tree=tree, filter="n in (0, 2, 4, 6, 8)"), k)
        assert got == oracle.search(tree, k, even)
        assert engine_search(index, Query(tree=tree), k) == oracle.search(tree, k)


def test_a_word_scores_as_plain_text_of_it_to_the_bit() -> None:
    docs = {
        f"d{i}": text for i, text in enumerate(["alpha-beta alpha", "beta beta running", "runs", "gamma"])
    }
    index = build(docs, 1)
    for text in ("alpha-beta", "Running", "beta"):
        assert engine_search(index, Query.parse(text), 10) == engine_search(index, Query(text), 10)


def test_phrases_need_positions() -> None:
    index = build({"a": "alpha beta"}, 0, positions=False)
    with pytest.raises(PhrasePositionsError, match="'text' keeps no positions") as caught:
        engine_search(index, Query.parse('"alpha beta"'), 10)
    assert isinstance(caught.value, InvalidQueryError) and '"alpha beta"' in str(caught.value)
    # The message says how to keep them, in a spelling that runs.
    assert "Index.create(path, schema=Schema((TextField('text', positions=True), ...)))" in str(caught.value)
    assert TextField("text", positions=True).positions
    # A phrase of one term (after analysis) is that term: no positions needed.
    assert engine_search(index, Query.parse('"the alpha"'), 10) == engine_search(index, Query("alpha"), 10)


def test_a_prefix_is_lower_cased_not_stemmed_and_bounded() -> None:
    index = build({"a": "retrieval", "b": "retrieving", "c": "other"}, 0)
    # Both analyse to the stem "retriev"; "Retrieva*" is not a prefix of the stem.
    assert [key for key, _ in engine_search(index, Query.parse("RETRIEV*"), 10)] == ["a", "b"]
    assert engine_search(index, Query.parse("retrieva*"), 10) == []
    many = build({f"d{i}": f"w{i:03d}" for i in range(MAX_PREFIX_TERMS + 1)}, 0)
    with pytest.raises(InvalidQueryError, match="MAX_PREFIX_TERMS"):
        engine_search(many, Query.parse("w*"), 10)
    exact = build({f"d{i}": f"w{i:03d}" for i in range(MAX_PREFIX_TERMS)}, 0)
    assert len(engine_search(exact, Query.parse("w*"), 100)) == MAX_PREFIX_TERMS


def test_unknown_fields_are_typed_errors() -> None:
    index = build({"a": "alpha"}, 0)
    with pytest.raises(UnknownTextFieldError, match=r"unknown text field 'title'.* are text$"):
        engine_search(index, Query.parse("title:alpha"), 10)
    assert engine_search(index, Query.parse("text:alpha"), 10) == engine_search(index, Query("alpha"), 10)


# ---------------------------------------------------------------------- phrase_frequencies on arrays


def csr(runs: list[list[int]]) -> tuple[NDArray[np.uint64], NDArray[np.uint32]]:
    starts = np.zeros(len(runs) + 1, np.uint64)
    np.cumsum([len(r) for r in runs], out=starts[1:])
    return starts, np.array([p for r in runs for p in r], np.uint32)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abc"), max_size=14), min_size=1, max_size=6),
    st.lists(st.sampled_from("abc"), min_size=1, max_size=4),
    st.integers(0, 4),
)
@example([["a", "b", "a", "b"]], ["a", "b"], 0)
@example([["b", "a"], ["a", "c", "b"]], ["a", "b"], 1)
def test_phrase_frequencies_match_a_brute_force_scan(
    docs: list[list[str]], phrase: list[str], slop: int
) -> None:
    per_term = [[[p for p, t in enumerate(doc) if t == term] for doc in docs] for term in phrase]
    got = phrase_frequencies([csr(runs) for runs in per_term], slop)
    expected = [phrase_count([per_term[i][d] for i in range(len(phrase))], slop) for d in range(len(docs))]
    assert got.tolist() == expected


def test_phrase_frequencies_exact_and_sloppy_by_hand() -> None:
    # Document 0: "a b c a b"; document 1: "b a"; document 2: "a x x b".
    a = csr([[0, 3], [1], [0]])
    b = csr([[1, 4], [0], [3]])
    assert phrase_frequencies([a, b], 0).tolist() == [2, 0, 0]
    assert phrase_frequencies([a, b], 1).tolist() == [2, 0, 0]
    assert phrase_frequencies([a, b], 2).tolist() == [2, 1, 1]  # "b a" reordered: p_b - 1 = -1, p_a = 1
    assert phrase_frequencies([b, a], 0).tolist() == [0, 1, 0]  # "b a" occurs in document 1 only


def test_phrase_frequencies_are_vectorised_over_long_lists() -> None:
    rng = np.random.default_rng(7)
    docs = 2_000
    runs = [[sorted(rng.choice(500, size=40, replace=False).tolist()) for _ in range(docs)] for _ in range(3)]
    start = time.perf_counter()
    got = phrase_frequencies([csr(r) for r in runs], 2)
    elapsed = time.perf_counter() - start
    assert got.shape == (docs,) and elapsed < 2.0, elapsed
    sample = range(0, docs, 97)
    assert [int(got[d]) for d in sample] == [phrase_count([r[d] for r in runs], 2) for d in sample]
    assert math.isfinite(float(got.sum()))


# ---------------------------------------------------------------------- named fields, BM25F, real positions

FIELD_SCHEMA = Schema(
    (
        TextField("text", positions=True),
        TextField("title", positions=True),
        TextField("tags", analyzer="keyword", positions=True),
    )
)
ANALYZERS = {"text": ANALYZER, "title": ANALYZER, "tags": get_analyzer("keyword")}
#: The BM25F scorer's fields and b per field (``tags`` is only ever searched fielded).
BM25F_WEIGHTS = {"text": 1.0, "title": 2.5}
BM25F_B = {"title": 0.3}
TAGS = ["alpha", "Beta", "x y", "gamma"]


class FieldOracle:
    """A tree over named fields, document by document in Python floats, as :mod:`.tree` defines it.

    ``bm25f``: the scorer is ``BM25Scorer(K1, B, fields=BM25F_WEIGHTS, field_b=BM25F_B)``, so an
    unfielded leaf is BM25F over ``text`` and ``title`` and a fielded one BM25F of that field alone
    (at its weight there, else 1.0); otherwise plain BM25, an unfielded leaf in ``text``.
    """

    def __init__(self, docs: dict[str, dict[str, str]], bm25f: bool) -> None:
        self.keys = list(docs)
        self.n = len(docs)
        self.bm25f = bm25f
        self.terms = {
            name: {key: analyzer.analyze(docs[key].get(name, "")) for key in docs}
            for name, analyzer in ANALYZERS.items()
        }
        self.avg: dict[str, float] = {}
        for name, per_doc in self.terms.items():
            total = sum(len(terms) for terms in per_doc.values())
            self.avg[name] = total / self.n if total else 1.0

    def scope(self, field: str | None) -> list[tuple[str, float]]:
        if field is None:
            return sorted(BM25F_WEIGHTS.items()) if self.bm25f else [("text", 1.0)]
        return [(field, BM25F_WEIGHTS.get(field, 1.0))]

    def b(self, field: str) -> float:
        return BM25F_B.get(field, B) if self.bm25f else B

    def idf(self, term: str, fields: list[tuple[str, float]]) -> float:
        df = sum(any(term in self.terms[f][key] for f, _ in fields) for key in self.keys)
        return float(lucene_idf(self.n, np.array([df], np.int64))[0])

    def analyse(self, field: str | None, text: str) -> list[str]:
        return ANALYZERS[self.scope(field)[0][0]].analyze(text)

    def dropped(self, node: Node) -> bool:
        if isinstance(node, TermNode):
            return not self.analyse(node.field, node.text)
        if isinstance(node, PhraseNode):
            return not [t for w in node.terms for t in self.analyse(node.field, w)]
        if isinstance(node, PrefixNode):
            return False
        return all(self.dropped(c) for c in (*node.must, *node.should, *node.must_not))

    def saturate(self, freqs: dict[str, float], key: str, fields: list[tuple[str, float]]) -> float | None:
        """The tf part of a term (or phrase) of frequency ``freqs[f]`` in each field; None: nowhere."""
        if not any(freqs.values()):
            return None
        if not self.bm25f:
            (field, _), tf = fields[0], freqs[fields[0][0]]
            b = self.b(field)
            norm = K1 * (1.0 - b + b * float(len(self.terms[field][key])) / self.avg[field])
            return tf * (K1 + 1.0) / (tf + norm)
        pseudo = 0.0
        for field, weight in fields:  # name order
            if freqs[field]:
                b = self.b(field)
                norm = 1.0 - b + b * float(len(self.terms[field][key])) / self.avg[field]
                pseudo += weight * freqs[field] / norm
        return pseudo * (K1 + 1.0) / (pseudo + K1)

    def score(self, node: Node, key: str) -> float | None:
        found: float | None
        if isinstance(node, BoolNode):
            found = self.boolean(node, key)
        else:
            fields = self.scope(node.field)
            if isinstance(node, TermNode):
                found = self.word(self.analyse(node.field, node.text), key, fields)
            elif isinstance(node, PrefixNode):
                # A keyword field keeps case, so its prefix is as typed (Field.fold).
                prefix = node.prefix if fields[0][0] == "tags" else node.prefix.lower()
                expanded = {
                    t
                    for f, _ in fields
                    for terms in self.terms[f].values()
                    for t in terms
                    if t.startswith(prefix)
                }
                hit = any(t in expanded for f, _ in fields for t in self.terms[f][key])
                found = 1.0 if hit else None
            else:
                phrase = [t for w in node.terms for t in self.analyse(node.field, w)]
                if len(phrase) == 1:
                    found = self.word(phrase, key, fields)
                else:
                    freqs = {}
                    for f, _ in fields:
                        where = [
                            [p for p, t in enumerate(self.terms[f][key]) if t == term] for term in phrase
                        ]
                        freqs[f] = float(phrase_count(where, node.slop))
                    part = self.saturate(freqs, key, fields)
                    idf = 0.0
                    for term in phrase:
                        idf += self.idf(term, fields)
                    found = None if part is None else idf * part
        if found is None or node.boost == 1.0:
            return found
        return found * node.boost

    def word(self, analysed: list[str], key: str, fields: list[tuple[str, float]]) -> float | None:
        counts = Counter(analysed)
        total = 0.0
        matched = False
        for term in sorted(counts):
            part = self.saturate({f: float(self.terms[f][key].count(term)) for f, _ in fields}, key, fields)
            if part is not None:
                matched = True
                total += (float(counts[term]) * self.idf(term, fields)) * part
        return total if matched else None

    def boolean(self, node: BoolNode, key: str) -> float | None:
        must = [self.score(c, key) for c in node.must if not self.dropped(c)]
        should = [self.score(c, key) for c in node.should if not self.dropped(c)]
        must_not = [self.score(c, key) for c in node.must_not if not self.dropped(c)]
        if must:
            if any(s is None for s in must):
                return None
        elif not should or all(s is None for s in should):
            return None
        if any(s is not None for s in must_not):
            return None
        total = 0.0
        for s in (*must, *should):
            if s is not None:
                total += s
        return total

    def search(self, tree: Node, k: int) -> list[tuple[str, float]]:
        if self.dropped(tree):
            return []
        hits = [(key, self.score(tree, key)) for key in self.keys]
        found = [(key, s) for key, s in hits if s is not None]
        return sorted(found, key=lambda hit: (-hit[1], hit[0]))[:k]


def build_fields(docs: dict[str, dict[str, str]], extra: int) -> Index:
    """An index of ``docs``' three fields in two segments, with ``extra`` deleted documents in the second."""
    index = Index(schema=FIELD_SCHEMA)
    items = list(docs.items())
    half = len(items) // 2

    def document(key: str, fields: dict[str, str]) -> Document:
        return Document(
            key, fields.get("text", ""), text_fields={k: v for k, v in fields.items() if k != "text"}
        )

    index.add_many([document(key, fields) for key, fields in items[:half]])
    index.snapshot()
    ghost = {"text": "alpha gamma running", "title": "beta alpha", "tags": "alpha"}
    index.add_many(
        [document(f"zz{i}", ghost) for i in range(extra)]
        + [document(key, fields) for key, fields in items[half:]]
    )
    for i in range(extra):
        index.delete(f"zz{i}")
    assert len(index.snapshot().parts) == (2 if half else 1)
    return index


FIELD_TEXTS = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=7).map(" ".join)
FIELD_DOCS = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3),
    st.fixed_dictionaries(
        {},
        optional={"text": FIELD_TEXTS, "title": FIELD_TEXTS, "tags": st.sampled_from(TAGS)},
    ),
    min_size=2,
    max_size=10,
)
LEAF_FIELDS = st.sampled_from([None, None, "text", "title", "tags"])


def field_leaves() -> st.SearchStrategy[Node]:
    texts = st.one_of(LEAF_TEXTS, st.sampled_from(TAGS))
    return st.one_of(
        st.builds(TermNode, texts, LEAF_FIELDS, BOOSTS),
        st.builds(PrefixNode, st.sampled_from(PREFIXES), LEAF_FIELDS, BOOSTS),
        st.builds(
            PhraseNode,
            st.lists(LEAF_TEXTS, min_size=1, max_size=3).map(tuple),
            LEAF_FIELDS,
            st.integers(0, 3),
            BOOSTS,
        ),
    )


def field_search(index: Index, tree: Node, k: int, bm25f: bool) -> list[tuple[str, float]]:
    snapshot = index.snapshot()
    scorer = BM25Scorer(K1, B, fields=BM25F_WEIGHTS, field_b=BM25F_B) if bm25f else BM25Scorer(K1, B)
    stream = scorer.score(snapshot, Query(tree=tree), k)
    return list(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FIELD_DOCS, trees(field_leaves(), max_leaves=5), st.integers(1, 12), st.integers(0, 2), st.booleans())
@example(
    {"a": {"text": "alpha beta", "title": "beta alpha"}, "b": {"title": "alpha beta gamma"}},
    PhraseNode(("alpha", "beta")),
    5,
    1,
    True,
)
@example({"a": {"tags": "x y"}, "b": {"text": "x y"}}, TermNode("x y", field="tags"), 5, 0, False)
@example(
    {"a": {"text": "gamma", "title": "running"}, "b": {"title": "gamma"}},
    BoolNode(must=(TermNode("gamma"),), must_not=(PhraseNode(("run",), field="title"),)),
    5,
    1,
    True,
)
def test_trees_over_named_fields_match_the_oracle_to_the_bit(
    docs: dict[str, dict[str, str]], tree: Node, k: int, extra: int, bm25f: bool
) -> None:
    index = build_fields(docs, extra)
    expected = FieldOracle(docs, bm25f).search(tree, k)
    assert field_search(index, tree, k, bm25f) == expected


#: Leaves and disjunctions of them: most match something, so scores are compared on many documents.
FLAT_TREES = st.one_of(
    field_leaves(), st.lists(field_leaves(), min_size=1, max_size=4).map(lambda c: BoolNode(should=tuple(c)))
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FIELD_DOCS, FLAT_TREES, st.integers(1, 12), st.integers(0, 2), st.booleans())
def test_leaves_over_named_fields_match_the_oracle_to_the_bit(
    docs: dict[str, dict[str, str]], tree: Node, k: int, extra: int, bm25f: bool
) -> None:
    index = build_fields(docs, extra)
    assert field_search(index, tree, k, bm25f) == FieldOracle(docs, bm25f).search(tree, k)


@pytest.mark.parametrize("bm25f", [False, True])
def test_a_word_with_fields_scores_as_plain_text_of_it_to_the_bit(bm25f: bool) -> None:
    docs = {
        "a": {"text": "alpha-beta alpha", "title": "beta"},
        "b": {"text": "beta beta running", "title": "alpha alpha"},
        "c": {"text": "runs"},
    }
    index = build_fields(docs, 1)
    snapshot = index.snapshot()
    scorer = BM25Scorer(K1, B, fields=BM25F_WEIGHTS, field_b=BM25F_B) if bm25f else BM25Scorer(K1, B)
    for text in ("alpha-beta", "Running", "beta", "alpha beta"):
        tree = scorer.score(snapshot, Query.parse(text), 10)
        plain = scorer.score(snapshot, Query(text), 10)
        assert (tree.ids.tolist(), tree.scores.tolist()) == (plain.ids.tolist(), plain.scores.tolist())


def test_fielded_clauses_read_only_their_field() -> None:
    docs = {"a": {"text": "alpha", "title": "beta"}, "b": {"text": "beta", "title": "alpha beta"}}
    index = build_fields(docs, 0)
    assert [key for key, _ in field_search(index, TermNode("alpha", field="title"), 5, False)] == ["b"]
    assert [key for key, _ in field_search(index, PhraseNode(("alpha", "beta"), field="title"), 5, True)] == [
        "b"
    ]
    assert [key for key, _ in field_search(index, PhraseNode(("alpha", "beta"), field="text"), 5, True)] == []
    # A prefix is folded as its field's analyzer folds: a keyword field keeps case.
    tagged = build_fields({"a": {"tags": "Alpha"}, "b": {"title": "alpha"}}, 0)
    assert [key for key, _ in field_search(tagged, Query.parse("tags:Al*").tree, 5, False)] == ["a"]  # type: ignore[arg-type]
    assert field_search(tagged, Query.parse("tags:al*").tree, 5, False) == []  # type: ignore[arg-type]
    assert [key for key, _ in field_search(tagged, Query.parse("title:AL*").tree, 5, False)] == ["b"]  # type: ignore[arg-type]
    with pytest.raises(UnknownTextFieldError, match=r"'body'.*text, title, tags"):
        field_search(index, TermNode("alpha", field="body"), 5, True)


def test_a_field_without_positions_names_itself_in_a_phrase_error() -> None:
    index = Index(schema=Schema((TextField("text", positions=True), TextField("title", positions=False))))
    index.add(Document("a", "alpha beta", text_fields={"title": "alpha beta"}))
    snapshot = index.snapshot()
    assert BM25Scorer().score(snapshot, Query.parse('text:"alpha beta"'), 5).ids.tolist() == [0]
    for scorer in (BM25Scorer(), BM25Scorer(fields={"text": 1.0, "title": 2.0})):
        query = Query.parse('title:"alpha beta"') if scorer.fields is None else Query.parse('"alpha beta"')
        with pytest.raises(
            PhrasePositionsError, match=r"'title' keeps no positions.*TextField\('title', positions=True\)"
        ):
            scorer.score(snapshot, query, 5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FIELD_DOCS, FLAT_TREES, st.integers(1, 2), st.booleans())
def test_a_merge_keeps_fielded_phrase_results_to_the_bit(
    docs: dict[str, dict[str, str]], tree: Node, extra: int, bm25f: bool
) -> None:
    index = build_fields(docs, extra)
    before = field_search(index, tree, 20, bm25f)
    index.merge(force=True)
    parts = index.snapshot().parts
    assert len(parts) == 1 and parts[0].deleted is None  # the deleted documents were dropped
    assert field_search(index, tree, 20, bm25f) == before == FieldOracle(docs, bm25f).search(tree, 20)
