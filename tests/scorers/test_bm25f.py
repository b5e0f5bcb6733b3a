"""BM25F across named text fields: one field at weight 1 is BM25 to the bit; several fields match
a brute-force oracle written from the formula; bad weights, fields and analyzers are typed errors."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from weftsearch import RRF, BM25Scorer, Document, Index, Query, Schema, TextField
from weftsearch.errors import InvalidParameterError
from weftsearch.scorers.bm25 import lucene_idf

WORDS = ["alpha", "beta", "gamma", "delta", "omega"]

documents_strategy = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS), max_size=8),
        st.lists(st.sampled_from(WORDS), max_size=4),
        st.booleans(),
    ),
    min_size=1,
    max_size=25,
)


def build(docs: list[tuple[list[str], list[str], bool]], deleted: bool = False) -> Index:
    index = Index(
        "simple", schema=Schema((TextField("text", analyzer="simple"), TextField("title", analyzer="simple")))
    )
    index.add_many(
        [
            Document(f"d{i:02d}", " ".join(text), text_fields={"title": " ".join(title)} if title else {})
            for i, (text, title, _) in enumerate(docs)
        ]
    )
    if deleted:
        index.delete_many([f"d{i:02d}" for i, (_, _, gone) in enumerate(docs) if gone][: len(docs) - 1])
    return index


def scores_of(index: Index, scorer: BM25Scorer, text: str) -> dict[str, float]:
    snapshot = index.snapshot()
    ids, scores = scorer.score_all(snapshot, Query(text))
    return dict(zip(snapshot.keys_of(ids), scores.tolist(), strict=True))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=documents_strategy, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), b=st.floats(0, 1)
)
def test_the_default_field_at_weight_one_is_bm25_to_the_bit(
    docs: list[tuple[list[str], list[str], bool]], query: list[str], b: float
) -> None:
    index = build(docs, deleted=True)
    text = " ".join(query)
    plain = BM25Scorer(b=b)
    fielded = BM25Scorer(fields={"text": 1.0})
    fielded_b = BM25Scorer(b=0.3, fields={"text": 1.0}, field_b={"text": b})
    expected = index.search(text, 50, RRF(), plain)
    for scorer in (fielded_b,) if b != 0.75 else (fielded, fielded_b):
        got = index.search(text, 50, RRF(), scorer)
        assert got.keys == expected.keys
        assert np.array_equal(got.score_array.view(np.uint64), expected.score_array.view(np.uint64))


def oracle(
    docs: list[tuple[list[str], list[str], bool]],
    query: list[str],
    weights: dict[str, float],
    bs: dict[str, float],
    k1: float,
) -> dict[str, float]:
    """BM25F written out per document in Python floats, from the formula in the scorer's docstring."""
    fields = {"text": [Counter(t) for t, _, _ in docs], "title": [Counter(t) for _, t, _ in docs]}
    lengths = {"text": [len(t) for t, _, _ in docs], "title": [len(t) for _, t, _ in docs]}
    n = len(docs)
    averages = {f: sum(lengths[f]) / n for f in fields}
    out: dict[str, float] = {}
    for term, qtf in Counter(query).items():
        holders = [d for d in range(n) if any(fields[f][d][term] for f in weights)]
        if not holders:
            continue
        idf = float(lucene_idf(n, np.array([len(holders)]))[0])
        for d in holders:
            # A field without the term adds nothing; skipping it also keeps an empty field at b = 1
            # (normaliser 0) from dividing zero by zero.
            pseudo = sum(
                weights[f] * fields[f][d][term] / (1 - bs[f] + bs[f] * lengths[f][d] / (averages[f] or 1.0))
                for f in weights
                if fields[f][d][term]
            )
            key = f"d{d:02d}"
            out[key] = out.get(key, 0.0) + qtf * idf * pseudo * (k1 + 1) / (pseudo + k1)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=documents_strategy,
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    w_text=st.floats(0.01, 10),
    w_title=st.floats(0.01, 10),
    b_title=st.floats(0, 1),
    k1=st.floats(0, 3),
    both=st.booleans(),
)
@example(
    docs=[(["alpha"], [], False)], query=["alpha"], w_text=1.0, w_title=1.0, b_title=1.0, k1=1.2, both=True
)
def test_several_fields_match_the_oracle(
    docs: list[tuple[list[str], list[str], bool]],
    query: list[str],
    w_text: float,
    w_title: float,
    b_title: float,
    k1: float,
    both: bool,
) -> None:
    index = build(docs)
    weights = {"text": w_text, "title": w_title} if both else {"title": w_title}
    scorer = BM25Scorer(k1=k1, fields=weights, field_b={"title": b_title})
    got = scores_of(index, scorer, " ".join(query))
    expected = oracle(docs, query, weights, {"text": 0.75, "title": b_title}, k1)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert math.isclose(got[key], value, rel_tol=1e-12), key
    # score() gives the same scores as score_all(), best first.
    ranked = index.search(" ".join(query), 100, RRF(), scorer)
    assert dict(zip(ranked.keys, ranked.score_array.tolist(), strict=True)) == got


def test_a_title_weight_moves_a_title_match_up() -> None:
    index = build([(["alpha", "beta", "gamma"], [], False), (["beta", "gamma", "delta"], ["alpha"], False)])
    light = index.search("alpha", 2, RRF(), BM25Scorer(fields={"text": 1.0, "title": 0.1})).keys
    heavy = index.search("alpha", 2, RRF(), BM25Scorer(fields={"text": 1.0, "title": 5.0})).keys
    assert light == ["d00", "d01"] and heavy == ["d01", "d00"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fields": {}}, "non-empty mapping"),
        ({"fields": ["title"]}, "non-empty mapping"),
        ({"fields": {"title": 0}}, "above 0"),
        ({"fields": {"title": -1.0}}, "above 0"),
        ({"fields": {"title": math.nan}}, "above 0"),
        ({"fields": {"title": math.inf}}, "above 0"),
        ({"fields": {"title": True}}, "above 0"),
        ({"fields": {3: 1.0}}, "string"),
        ({"fields": {"title": 1.0}, "field_b": {"title": 1.5}}, r"\[0, 1\]"),
        ({"fields": {"title": 1.0}, "field_b": {"text": 0.5}}, "does not score"),
        ({"field_b": {"text": 0.5}}, "needs fields"),
    ],
)
def test_bad_weights_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        BM25Scorer(**kwargs)  # type: ignore[arg-type]


def test_unknown_and_differently_analysed_fields_are_refused() -> None:
    index = Index(schema=Schema((TextField("tags", analyzer="simple"),)))
    index.add(Document("a", "alpha", text_fields={"tags": "alpha"}))
    with pytest.raises(InvalidParameterError, match="'body' is not a text field"):
        index.search("alpha", 1, RRF(), BM25Scorer(fields={"body": 1.0}))
    with pytest.raises(InvalidParameterError, match="'tags' is analysed by 'simple'"):
        index.search("alpha", 1, RRF(), BM25Scorer(fields={"text": 1.0, "tags": 1.0}))
