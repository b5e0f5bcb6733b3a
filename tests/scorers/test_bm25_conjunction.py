"""Query trees through the compiled conjunction kernel (``_boolean.c``) against the numpy path, every bit.

The numpy evaluation of :mod:`weftsearch.scorers.bm25.tree` is the oracle
(itself checked against a brute force in ``test_bm25_tree.py``): for random
corpora with positions over several segments, tombstones and filters, and
random trees of the shapes the kernel takes (must terms and phrases with
slop, should terms, must_not terms, boosts), the compiled stream has the same
keys, the same score bits and the same order, ties included.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from weftsearch import BM25Scorer, Document, Index, Query, Schema, TextField
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import CorruptIndexError
from weftsearch.native import bm25 as native_bm25
from weftsearch.native import boolean, loader
from weftsearch.querylang import BoolNode, Node, PhraseNode, TermNode
from weftsearch.scorers.bm25 import conjunction
from weftsearch.scorers.bm25 import lists as layout_module

# Skipped only where the library was not built: a built one that fails its self-check fails here.
pytestmark = pytest.mark.skipif(loader.library_path("_boolean") is None, reason="_boolean.c is not built")

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "the"]
# Skewed: alpha and beta in most documents (many blocks of 128), zeta and eta rare.
WEIGHTS = np.array([0.3, 0.2, 0.15, 0.12, 0.1, 0.06, 0.03, 0.04])


def corpus(seed: int, n_docs: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 14, n_docs)
    return [" ".join(rng.choice(WORDS, int(n), p=WEIGHTS / WEIGHTS.sum())) for n in lengths]


def build(texts: list[str], segments: int, deleted: float, seed: int) -> Index:
    index = Index(schema=Schema((TextField("text"),)))
    rng = np.random.default_rng(seed + 1)
    cuts = np.linspace(0, len(texts), segments + 1).astype(int)
    for start, stop in itertools.pairwise(cuts.tolist()):
        index.add_many([Document(f"k{i:05d}", texts[i], fields={"n": i}) for i in range(start, stop)])
        index.snapshot()
    for i in np.flatnonzero(rng.random(len(texts)) < deleted).tolist()[1:]:  # one document stays
        index.delete(f"k{i:05d}")
    return index


def both(index: Index, query: Query, k: int) -> Iterator[tuple[list[str], list[float], object]]:
    snapshot = index.snapshot()
    scorer = BM25Scorer(1.2, 0.75)
    stream = scorer.score(snapshot, query, k)
    yield snapshot.keys_of(stream.ids), stream.scores.tolist(), (stream.plan or {})["path"]
    with (
        mock.patch.object(boolean, "compiled_boolean", lambda: None),
        mock.patch.object(native_bm25, "compiled_bm25", lambda: None),
    ):
        stream = scorer.score(snapshot, query, k)
    yield snapshot.keys_of(stream.ids), stream.scores.tolist(), (stream.plan or {})["path"]


BOOSTS = st.sampled_from([1.0, 2.5, 0.5, 3.0])
TERMS = st.builds(TermNode, st.sampled_from(WORDS[:-1]), st.none(), BOOSTS)
PHRASES = st.builds(
    PhraseNode,
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=3).map(tuple),
    st.none(),
    st.integers(0, 3),
    BOOSTS,
)
TREES = st.one_of(
    PHRASES,
    st.builds(
        BoolNode,
        st.lists(st.one_of(TERMS, PHRASES), min_size=1, max_size=4).map(tuple),
        st.lists(TERMS, max_size=3).map(tuple),
        st.lists(TERMS, max_size=2).map(tuple),
        BOOSTS,
    ),
)


# Should-only trees of plain terms: plain query text's one-call disjunction (when the sums agree).
DISJUNCTIONS = st.builds(
    BoolNode,
    st.just(()),
    st.lists(
        st.builds(TermNode, st.sampled_from(WORDS[:-1])), min_size=1, max_size=4, unique_by=lambda n: n.text
    ).map(tuple),
)
TREES = st.one_of(TREES, DISJUNCTIONS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10_000),
    st.integers(1, 700),
    TREES,
    st.sampled_from([1, 3, 10, 100, 1000]),
    st.integers(1, 3),
    st.sampled_from([0.0, 0.1, 0.5]),
    st.booleans(),
)
def test_the_kernel_matches_the_numpy_path_to_the_bit(
    seed: int, n_docs: int, tree: Node, k: int, segments: int, deleted: float, filtered: bool
) -> None:
    index = build(corpus(seed, n_docs), segments, deleted, seed)
    query = Query(tree=tree, filter="n < 400" if filtered else None)
    (keys, scores, path), (want_keys, want_scores, want_path) = both(index, query, k)
    assert want_path == "numpy"
    snapshot = index.snapshot()
    if conjunction.plan(snapshot, tree) is not None or conjunction.disjunction_terms(snapshot, tree):
        assert path == "compiled"
    assert keys == want_keys
    assert [s.hex() for s in scores] == [s.hex() for s in want_scores]


# Many blocks of 128 in every list, small k: the block-max bound prunes whole blocks of the
# driving list (and, for phrases, candidates before their positions are read).
BIG_TREES = st.one_of(
    PHRASES,
    st.builds(
        BoolNode,
        st.lists(st.one_of(TERMS, PHRASES), min_size=1, max_size=3).map(tuple),
        st.lists(TERMS, max_size=2).map(tuple),
        st.lists(st.builds(TermNode, st.sampled_from(WORDS[4:7])), max_size=1).map(tuple),
        BOOSTS,
    ),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10_000),
    st.integers(1_000, 4_000),
    BIG_TREES,
    st.sampled_from([1, 2, 5, 10]),
    st.integers(1, 3),
    st.sampled_from([0.0, 0.05, 0.3]),
    st.booleans(),
)
def test_block_max_skipping_keeps_every_bit(
    seed: int, n_docs: int, tree: Node, k: int, segments: int, deleted: float, filtered: bool
) -> None:
    index = build(corpus(seed, n_docs), segments, deleted, seed)
    query = Query(tree=tree, filter="n < 2500" if filtered else None)
    (keys, scores, path), (want_keys, want_scores, want_path) = both(index, query, k)
    assert want_path == "numpy"
    if conjunction.plan(index.snapshot(), tree) is not None:
        assert path == "compiled"
    assert keys == want_keys
    assert [s.hex() for s in scores] == [s.hex() for s in want_scores]


def test_blocks_of_the_driving_list_that_cannot_reach_the_kth_score_are_not_decoded() -> None:
    # Two terms in every document: with k = 1 the first block's best sets a threshold that most
    # other blocks' bounds (their largest tf, smallest length) cannot reach.
    rng = np.random.default_rng(5)
    texts = ["alpha beta " + " ".join(["gamma"] * int(n)) for n in rng.integers(0, 30, 5000)]
    texts[77] = "alpha alpha alpha beta beta beta"
    index = build(texts, 1, 0.0, 0)
    tree = BoolNode(must=(TermNode("alpha"), TermNode("beta")))
    stream = BM25Scorer(1.2, 0.75).score(index.snapshot(), Query(tree=tree), 1)
    plan = stream.plan or {}
    assert plan["path"] == "compiled"
    assert index.snapshot().keys_of(stream.ids) == ["k00077"]
    skipped, blocks = plan["blocks_skipped"], plan["blocks"]
    assert isinstance(skipped, int) and isinstance(blocks, int)
    assert skipped >= blocks // 2
    (keys, scores, _), (want_keys, want_scores, _) = both(index, Query(tree=tree), 3)
    assert keys == want_keys and scores == want_scores


def test_a_should_only_tree_of_plain_terms_runs_as_plain_text() -> None:
    index = build(corpus(11, 600), 2, 0.1, 11)
    snapshot = index.snapshot()
    scorer = BM25Scorer(1.2, 0.75)
    for text in ("alpha OR zeta", "zeta alpha", "beta OR delta OR epsilon", "alpha"):
        query = Query.parse(text)
        stream = scorer.score(snapshot, query, 10)
        assert (stream.plan or {})["path"] == "compiled"
        plain = scorer.score(snapshot, Query(text.replace(" OR ", " ")), 10)
        assert stream.ids.tolist() == plain.ids.tolist()
        assert stream.scores.tolist() == plain.scores.tolist()
    # Unsorted: summed in clause order, as the tree defines (plain text sums in sorted order).
    tree = BoolNode(should=(TermNode("zeta"), TermNode("beta"), TermNode("alpha"), TermNode("delta")))
    assert conjunction.disjunction_terms(snapshot, tree) == ["zeta", "beta", "alpha", "delta"]
    for k in (1, 10, 1000):
        (keys, scores, path), (want_keys, want_scores, _) = both(index, Query(tree=tree), k)
        assert path == "compiled" and keys == want_keys
        assert [s.hex() for s in scores] == [s.hex() for s in want_scores]
    for tree in (
        BoolNode(should=(TermNode("alpha", boost=2.0), TermNode("beta"))),
        BoolNode(should=(TermNode("alpha"), TermNode("beta")), boost=2.0),
        BoolNode(should=(TermNode("alpha"), TermNode("alpha"))),
        BoolNode(should=(TermNode("alpha"), TermNode("the"))),  # a stopword
        BoolNode(should=(TermNode("alpha"), PhraseNode(("beta", "gamma")))),
    ):
        assert conjunction.disjunction_terms(snapshot, tree) is None


def test_ties_are_broken_by_key_across_segments() -> None:
    # Identical documents in three segments: every score ties; the k best are the smallest keys.
    texts = ["alpha beta gamma"] * 300
    index = build(texts, 3, 0.1, 0)
    tree = BoolNode(must=(TermNode("alpha"), PhraseNode(("beta", "gamma"))))
    for k in (1, 7, 128, 1000):
        (keys, scores, path), (want_keys, want_scores, _) = both(index, Query(tree=tree), k)
        assert path == "compiled"
        assert keys == want_keys and scores == want_scores
        assert keys == sorted(keys)


def test_trees_that_do_not_fit_go_to_numpy() -> None:
    index = build(corpus(3, 50), 1, 0.0, 3)
    snapshot = index.snapshot()
    assert conjunction.plan(snapshot, BoolNode(should=(TermNode("alpha"),))) is None  # no must clause
    assert conjunction.plan(snapshot, BoolNode(must=(TermNode("the"),))) is None  # a stopword
    assert conjunction.plan(snapshot, BoolNode(must=(BoolNode(must=(TermNode("alpha"),)),))) is None
    assert conjunction.plan(snapshot, BoolNode(must=(TermNode("alpha", field="title"),))) is None
    laid = conjunction.plan(snapshot, BoolNode(must=(PhraseNode(("the", "alpha")), TermNode("beta"))))
    assert laid is not None and laid.clauses == ((boolean.MUST, 0, 1, 0), (boolean.MUST, 1, 1, 0))


def test_a_corrupt_block_is_a_typed_error_naming_the_term() -> None:
    index = build(["alpha beta"] * 300, 1, 0.0, 0)
    snapshot = index.snapshot()
    packed = snapshot.parts[0].reader.term_packed("alpha")
    assert packed is not None
    meta = np.array(packed[1], dtype=np.uint32)
    meta[0] += 1  # the first block's last id is no longer what its gaps decode to
    real = layout_module._terms

    def damaged(snap: Snapshot, parts: Any, terms: Sequence[str]) -> list[Any]:
        found = []
        for term, entry in zip(terms, real(snap, parts, terms), strict=True):
            if term == "alpha":  # its one row (one segment) points at the damaged table
                rows = entry.rows.copy()
                rows[0, 3] = meta.ctypes.data
                entry = dataclasses.replace(entry, rows=rows, address=rows.ctypes.data)
            found.append(entry)
        return found

    tree = BoolNode(must=(TermNode("alpha"), TermNode("beta")))
    with (
        mock.patch.object(layout_module, "_terms", damaged),
        pytest.raises(CorruptIndexError, match="term 'alpha' do not decode"),
    ):
        BM25Scorer(1.2, 0.75).score(snapshot, Query(tree=tree), 5)


@pytest.mark.parametrize("damage", ["tf_before", "chunk_at"])
def test_positions_tables_that_disagree_with_the_words_are_a_typed_error(damage: str) -> None:
    # The kernel checks the tables it reads positions through before any read: never a crash.
    index = build(["alpha beta gamma"] * 300, 1, 0.0, 0)
    snapshot = index.snapshot()
    real = boolean.positions_tables
    # Loaded (and self-checked) before the damage: the check builds its own positions tables
    # through the same function, and run alone this test once damaged those instead.
    assert boolean.compiled_boolean() is not None

    def damaged(tfs: NDArray[np.uint32], widths: NDArray[np.uint8]) -> tuple[NDArray[np.int64], ...]:
        chunk_at, tf_before = real(tfs, widths)
        if damage == "tf_before":
            tf_before[-1] += 1000  # more positions than the chunks hold
        else:
            chunk_at[-1] += 1  # a run past the words
        return chunk_at, tf_before

    conjunction._POSITIONS.clear()
    try:
        with (
            mock.patch.object(boolean, "positions_tables", damaged),
            pytest.raises(CorruptIndexError, match="term 'alpha' do not decode"),
        ):
            BM25Scorer(1.2, 0.75).score(snapshot, Query.parse('"alpha beta"'), 5)
    finally:
        conjunction._POSITIONS.clear()


def test_a_positions_table_entry_near_the_int64_limit_is_a_typed_error_not_a_crash() -> None:
    # tf_before[1] + a block's postings once wrapped past INT64_MAX, passed the table check, and
    # the phrase then read positions at a negative offset (a segfault).
    index = build(["alpha beta gamma"] * 300, 1, 0.0, 0)
    snapshot = index.snapshot()
    real = boolean.positions_tables

    def damaged(tfs: NDArray[np.uint32], widths: NDArray[np.uint8]) -> tuple[NDArray[np.int64], ...]:
        chunk_at, tf_before = real(tfs, widths)
        tf_before[1] = np.iinfo(np.int64).max
        return chunk_at, tf_before

    assert boolean.compiled_boolean() is not None  # self-checked before the damage (see above)

    conjunction._POSITIONS.clear()
    try:
        with (
            mock.patch.object(boolean, "positions_tables", damaged),
            pytest.raises(CorruptIndexError, match="do not decode"),
        ):
            BM25Scorer(1.2, 0.75).score(snapshot, Query.parse('"alpha beta"'), 5)
    finally:
        conjunction._POSITIONS.clear()


@pytest.mark.parametrize("segments", [1, 3])
def test_a_prepared_tree_serves_scorers_of_other_parameters_and_filters_exactly(segments: int) -> None:
    # The prepared tree remembers the part table it last ran with (issue 29, item 5): scorers
    # of other (k1, b) and a filter in between must each get their own norms, every bit.
    index = build(corpus(5, 700), segments, 0.05, 5)
    snapshot = index.snapshot()
    tree = BoolNode(must=(TermNode("alpha"), TermNode("beta")), should=(TermNode("zeta"),))
    plain, filtered = Query(tree=tree), Query(tree=tree, filter="n < 300")
    scorers = [BM25Scorer(1.2, 0.75), BM25Scorer(0.6, 0.2), BM25Scorer(1.2, 0.75), BM25Scorer(2.0, 1.0)]
    for query in (plain, filtered, plain, filtered, plain):
        for scorer in scorers:
            for k in (1, 10, 1000):
                got = scorer.score(snapshot, query, k)
                assert (got.plan or {})["path"] == "compiled"
                with (
                    mock.patch.object(boolean, "compiled_boolean", lambda: None),
                    mock.patch.object(native_bm25, "compiled_bm25", lambda: None),
                ):
                    want = scorer.score(snapshot, query, k)
                assert snapshot.keys_of(got.ids) == snapshot.keys_of(want.ids)
                assert got.scores.tobytes() == want.scores.tobytes()
                assert not got.ids.flags.writeable and not got.scores.flags.writeable


def _blocks_that_bound_loosely(n_docs: int) -> list[str]:
    """alpha and beta in every document; each block of 128 holds an alpha-heavy document, a
    beta-heavy one and a two-word one, so every block's bound (largest tf, shortest document)
    reaches the best document's score although almost no document comes near it."""
    rng = np.random.default_rng(3)
    texts = []
    for i in range(n_docs):
        gammas = " ".join(["gamma"] * int(rng.integers(3, 25)))
        if i % 128 == 5:
            texts.append(f"alpha alpha alpha beta {gammas} gamma gamma gamma")
        elif i % 128 == 9:
            texts.append(f"alpha beta beta beta {gammas} gamma gamma gamma")
        elif i % 128 == 11:
            texts.append("alpha beta")
        else:
            texts.append(f"alpha beta {gammas}")
    return texts


def test_documents_that_cannot_enter_by_the_driving_term_alone_are_not_scored() -> None:
    # Block bounds are loose here (no block is passed whole), but a document whose own alpha
    # contribution plus beta's block bound stays below the k-th score is passed before beta's
    # list is moved to it: far fewer documents are scored than match, with the same results.
    texts = _blocks_that_bound_loosely(5000)
    texts[77] = texts[78] = "alpha alpha alpha beta beta beta"
    index = build(texts, 1, 0.0, 0)
    tree = BoolNode(must=(TermNode("alpha"), TermNode("beta")))
    for k in (1, 2):
        stream = BM25Scorer(1.2, 0.75).score(index.snapshot(), Query(tree=tree), k)
        plan = stream.plan or {}
        assert plan["path"] == "compiled"
        scored = plan["documents_scored"]
        assert isinstance(scored, int) and scored < 500, scored  # of 5,000 matching documents
        (keys, scores, _), (want_keys, want_scores, _) = both(index, Query(tree=tree), k)
        assert keys == want_keys
        assert [s.hex() for s in scores] == [s.hex() for s in want_scores]


@pytest.mark.parametrize("k", [1, 3, 10])
def test_a_driving_term_that_rarely_rules_documents_out_keeps_every_bit(k: int) -> None:
    # First, many strong alpha documents without beta: the driver's check rarely passes, so the
    # kernel stops making it for a stretch (WB_PRUNE_PAUSE); then documents it would pass, and
    # strong matches inside and after that stretch. Same keys and bits as the numpy path.
    rng = np.random.default_rng(9)
    texts = []
    for i in range(6000):
        if i < 1500:
            texts.append("alpha alpha alpha gamma" if i % 7 else "alpha beta beta alpha")
        elif i % 211 == 0:
            texts.append("alpha alpha beta beta " + "delta " * int(rng.integers(0, 3)))
        else:
            texts.append("alpha beta " + " ".join(["gamma"] * int(rng.integers(1, 20))))
    for segments in (1, 3):
        index = build(texts, segments, 0.05, 4)
        for tree in (
            BoolNode(must=(TermNode("beta"), TermNode("alpha"))),
            BoolNode(must=(TermNode("alpha"), TermNode("beta")), should=(TermNode("delta"),)),
            BoolNode(must=(TermNode("beta", boost=2.5), TermNode("alpha")), must_not=(TermNode("zeta"),)),
        ):
            (keys, scores, path), (want_keys, want_scores, _) = both(index, Query(tree=tree), k)
            assert path == "compiled"
            assert keys == want_keys
            assert [s.hex() for s in scores] == [s.hex() for s in want_scores]
