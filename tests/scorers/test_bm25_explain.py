"""``BM25Scorer.explain``: every document's breakdown adds up to its score, to the bit at the root.

Random corpora over three named fields in two segments with deletes, random parsed trees (every
operator, boosts, phrases, prefixes, fields) and plain text, plain BM25 and BM25F: the root of each
document's explanation is the scorer's score there (``score_all``) to the bit, 0 with a "no match"
reason where it does not match; every "sum of" node's children add up to it and every "product of"
node's multiply to it (to rounding); each term's part is its formula over its own leaves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.querylang.strategies import trees
from tests.scorers.test_bm25_tree import (
    BM25F_B,
    BM25F_WEIGHTS,
    FIELD_DOCS,
    FIELD_TEXTS,
    K1,
    B,
    build_fields,
    field_leaves,
)
from weftsearch import BM25Scorer, Document, Explanation, F, Index, Query
from weftsearch.querylang import Node, TermNode
from weftsearch.scorers.bm25 import lucene_idf


def scorer_of(bm25f: bool) -> BM25Scorer:
    return BM25Scorer(K1, B, fields=BM25F_WEIGHTS, field_b=BM25F_B) if bm25f else BM25Scorer(K1, B)


def check_sums(node: Explanation) -> None:
    """Every "sum of" node's children add up to it; every "product of" node's multiply to it."""
    values = [child.value for child in node.details]
    if node.description.endswith("sum of:") or node.description.startswith("sum of"):
        assert math.isclose(sum(values), node.value, rel_tol=1e-12, abs_tol=1e-300), node
    if node.description.endswith("product of:"):
        assert math.isclose(math.prod(values), node.value, rel_tol=1e-12), node
    if node.description.startswith("weight(") and "[BM25" in node.description:
        qtf, idf, saturation = values[0], values[1], values[2]
        assert node.details[1].value == float(
            lucene_idf(
                int(node.details[1].details[1].value), np.array([int(node.details[1].details[0].value)])
            )[0]
        )
        if "[BM25]" in node.description:
            tf, k1, b, dl, avgdl, norm = (child.value for child in node.details[2].details)
            assert math.isclose(norm, k1 * (1 - b + b * dl / avgdl), rel_tol=1e-12)
            assert math.isclose(saturation, tf * (k1 + 1) / (tf + norm), rel_tol=1e-12)
            assert math.isclose(node.value, qtf * idf * saturation, rel_tol=1e-12)
        else:
            k1 = node.details[3].value
            assert math.isclose(
                node.value, qtf * idf * saturation * (k1 + 1) / (saturation + k1), rel_tol=1e-12
            )
    for child in node.details:
        check_sums(child)


def check_all(index: Index, query: Query, bm25f: bool) -> None:
    snapshot = index.snapshot()
    scorer = scorer_of(bm25f)
    ids, scores = scorer.score_all(snapshot, query)
    expected = dict(zip(ids.tolist(), scores.tolist(), strict=True))
    every = np.arange(snapshot.n_docs, dtype=np.int64)
    explained = scorer.explain(snapshot, query, every)
    assert len(explained) == snapshot.n_docs
    for doc, found in zip(every.tolist(), explained, strict=True):
        if doc in expected:
            assert found.value == expected[doc], (doc, str(found))
            assert not found.description.startswith("no match")
        else:
            assert found.value == 0.0, str(found)
            assert "no match" in found.description, str(found)
        check_sums(found)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FIELD_DOCS, trees(field_leaves(), max_leaves=5), st.integers(0, 2), st.booleans())
@example(
    {"a": {"text": "alpha beta", "title": "alpha"}, "b": {"text": "beta gamma"}},
    TermNode("alpha", None, 2.0),
    1,
    True,
)
def test_every_document_of_a_tree_is_explained_to_its_score(
    docs: dict[str, dict[str, str]], tree: Node, extra: int, bm25f: bool
) -> None:
    check_all(build_fields(docs, extra), Query(tree=tree), bm25f)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FIELD_DOCS, FIELD_TEXTS, st.integers(0, 2), st.booleans())
def test_every_document_of_plain_text_is_explained_to_its_score(
    docs: dict[str, dict[str, str]], text: str, extra: int, bm25f: bool
) -> None:
    check_all(build_fields(docs, extra), Query(text), bm25f)


def small() -> Index:
    index = Index()
    index.add_many(
        [
            Document("a", "graph retrieval with fusion", fields={"year": 2020}),
            Document("b", "retrieval of text retrieval", fields={"year": 1990}),
            Document("c", "cooking recipes"),
        ]
    )
    return index


def test_a_term_part_names_its_statistics() -> None:
    index = small()
    snapshot = index.snapshot()
    (found,) = BM25Scorer().explain(snapshot, Query("retrieval"), snapshot.ids_of(["b"]))
    (term,) = found.details
    assert term.description.startswith("weight(text:retriev) [BM25]")
    qtf, idf, saturation = term.details
    assert qtf.value == 1.0
    assert [child.value for child in idf.details] == [2.0, 3.0]  # n, N
    tf = saturation.details[0]
    assert tf.value == 2.0 and "occurrences of 'retriev' in text" in tf.description
    assert str(found).splitlines()[0].endswith("sum of the terms of 'retrieval':")


def test_the_filter_and_a_missing_term_say_why() -> None:
    index = small()
    snapshot = index.snapshot()
    filtered = Query("retrieval", filter=F("year") > 2000)
    a, b = BM25Scorer().explain(snapshot, filtered, snapshot.ids_of(["a", "b"]))
    assert a.value > 0
    assert b.value == 0.0 and b.description == "no match: the query's filter excludes it"
    (c,) = BM25Scorer().explain(snapshot, Query("retrieval"), snapshot.ids_of(["c"]))
    assert c.value == 0.0 and c.description.startswith("no match: no term of 'retrieval'")
    (stop,) = BM25Scorer().explain(snapshot, Query("the of"), snapshot.ids_of(["a"]))
    assert stop.value == 0.0 and "analyses to no term" in stop.description


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("+graph +cooking", "required clause cooking does not match"),
        ("retrieval -text", "excluded by the clause -text"),
    ],
)
def test_a_tree_names_the_clause_that_rules_a_document_out(text: str, reason: str) -> None:
    index = small()
    snapshot = index.snapshot()
    key = "a" if "graph" in text else "b"
    (found,) = BM25Scorer().explain(snapshot, Query.parse(text), snapshot.ids_of([key]))
    assert found.value == 0.0
    assert reason in found.description


def test_to_dict_is_elasticsearchs_shape() -> None:
    index = small()
    snapshot = index.snapshot()
    (found,) = BM25Scorer().explain(snapshot, Query("graph retrieval"), snapshot.ids_of(["a"]))
    as_dict = found.to_dict()
    assert set(as_dict) == {"value", "description", "details"}
    assert as_dict["value"] == found.value
    assert [d["value"] for d in as_dict["details"]] == [d.value for d in found.details]
    assert Explanation(float("nan"), "x").to_dict()["value"] is None
