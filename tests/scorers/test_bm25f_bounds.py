"""BM25F block bounds (weftsearch.scorers.bm25.bounds): for random fields, weights, b, k1, lengths
and term frequencies, and any cut of a term's documents into blocks, the bound from per-field block
maxima is at least every document's float64 score from the scorer itself."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weftsearch import BM25Scorer, Document, Index, Query, Schema, TextField
from weftsearch.scorers.bm25 import lucene_idf
from weftsearch.scorers.bm25.bounds import BOUND_MARGIN, bm25f_bound

FIELDS = ("a", "b", "text")  # name order: the scorer sums fields in this order
WORDS = ["t", "u", "v"]

field_text = st.lists(st.sampled_from(WORDS), max_size=30)
documents = st.lists(st.tuples(field_text, field_text, field_text), min_size=1, max_size=30)
weights = st.floats(1e-4, 1e4, allow_nan=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=documents,
    field_weights=st.tuples(weights, weights, weights),
    field_b=st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
    k1=st.one_of(st.just(0.0), st.floats(0, 5)),
    qtf=st.integers(1, 3),
    use=st.sets(st.sampled_from(FIELDS), min_size=1),
    cuts=st.lists(st.integers(0, 29), max_size=8),
)
def test_the_block_bound_is_at_least_every_documents_score(
    docs: list[tuple[list[str], list[str], list[str]]],
    field_weights: tuple[float, float, float],
    field_b: tuple[float, float, float],
    k1: float,
    qtf: int,
    use: set[str],
    cuts: list[int],
) -> None:
    schema = Schema(tuple(TextField(name, analyzer="simple", positions=False) for name in FIELDS))
    index = Index("simple", schema=schema)
    index.add_many(
        [
            Document(f"d{i:02d}", " ".join(c), text_fields={"a": " ".join(a), "b": " ".join(b)})
            for i, (a, b, c) in enumerate(docs)
        ]
    )
    snapshot = index.snapshot()
    scored = sorted(use)
    weight_of = dict(zip(FIELDS, field_weights, strict=True))
    b_of = dict(zip(FIELDS, field_b, strict=True))
    scorer = BM25Scorer(k1=k1, fields={f: weight_of[f] for f in scored}, field_b={f: b_of[f] for f in scored})
    ids, scores = scorer.score_all(snapshot, Query(" ".join(["t"] * qtf)))
    if not ids.shape[0]:
        return
    # What a block-max layout stores: per field and block, the largest tf and smallest length.
    n = snapshot.n_docs
    edges = sorted({0, n, *(c for c in cuts if c < n)})
    blocks = len(edges) - 1
    block_of = np.searchsorted(edges, np.arange(n), side="right") - 1
    max_tf = np.zeros((len(scored), blocks))
    min_length = np.zeros((len(scored), blocks))
    holders = np.zeros(n, dtype=bool)
    averages = []
    for row, field in enumerate(scored):
        postings = snapshot.postings(["t"], field)
        lengths = snapshot.field_lengths(field)
        holders[postings.ids] = True
        for doc, tf in zip(postings.ids.tolist(), postings.term_freqs.tolist(), strict=True):
            block = block_of[doc]
            if max_tf[row, block] == 0 or lengths[doc] < min_length[row, block]:
                min_length[row, block] = lengths[doc]
            max_tf[row, block] = max(max_tf[row, block], tf)
        average = snapshot.field_avglen(field)
        averages.append(average if average > 0 else 1.0)
    idf = float(lucene_idf(snapshot.collection_n_docs, np.array([int(holders.sum())]))[0])
    bounds = bm25f_bound(
        qtf * idf, k1, [weight_of[f] for f in scored], [b_of[f] for f in scored], averages, max_tf, min_length
    )
    assert bounds.shape == (blocks,)
    for doc, score in zip(ids.tolist(), scores.tolist(), strict=True):
        assert score <= bounds[block_of[doc]], (doc, score, bounds[block_of[doc]])
    # Not vacuous: the margin is a few units of rounding, so each block holding the term is tight
    # to the best document in it when that document holds the block's maxima.
    best = np.zeros(blocks)
    np.maximum.at(best, block_of[ids], scores)
    held = best > 0
    assert np.all(bounds[~held] == 0)
    holders_per_block = np.bincount(block_of[ids], minlength=blocks)
    for block in np.flatnonzero(holders_per_block == 1).tolist():
        # One document holds the term in the block: the maxima are its own, so the bound is its
        # score up to rounding and the margin.
        assert bounds[block] <= best[block] * (1 + 4 * BOUND_MARGIN)
    one = bm25f_bound(
        qtf * idf,
        k1,
        [weight_of[f] for f in scored],
        [b_of[f] for f in scored],
        averages,
        max_tf[:, 0],
        min_length[:, 0],
    )
    assert one.shape == () and one == bounds[0]


def test_one_field_one_document_is_tight_within_the_margin() -> None:
    index = Index(
        "simple", schema=Schema((TextField("text", analyzer="simple"), TextField("title", analyzer="simple")))
    )
    index.add_many(
        [Document("x", "t t u", text_fields={"title": "t"}), Document("y", "u v", text_fields={"title": "v"})]
    )
    snapshot = index.snapshot()
    scorer = BM25Scorer(k1=1.2, fields={"text": 1.0, "title": 3.0}, field_b={"title": 0.4})
    _, scores = scorer.score_all(snapshot, Query("t"))
    idf = float(lucene_idf(2, np.array([1]))[0])
    averages = [snapshot.field_avglen("text"), snapshot.field_avglen("title")]
    bound = float(bm25f_bound(idf, 1.2, [1.0, 3.0], [0.75, 0.4], averages, [2, 1], [3, 1]))
    assert scores[0] <= bound <= scores[0] * (1 + 4 * BOUND_MARGIN)


def test_a_block_without_the_term_is_zero_and_k1_zero_is_the_query_weight() -> None:
    assert float(bm25f_bound(2.0, 1.2, [1.0], [0.75], [3.0], [0], [0])) == 0.0
    zero_k1 = float(bm25f_bound(2.0, 0.0, [1.0, 2.0], [0.5, 1.0], [3.0, 1.0], [1, 4], [2, 9]))
    assert 2.0 <= zero_k1 <= 2.0 * (1 + 4 * BOUND_MARGIN)
