"""``Query.parse``: query syntax into a tree (opt-in); plain ``Query(text=...)`` keeps its meaning."""

from __future__ import annotations

import dataclasses

import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.errors import InvalidQueryError, QuerySyntaxError
from weftsearch.querylang import BoolNode, PhraseNode, TermNode

DOCS = [
    Document("a", "beta gamma"),
    Document("b", "beta delta"),
    Document("c", "gamma epsilon"),
]


def keys(index: Index, query: Query) -> list[str]:
    return list(index.search(query, 10, RRF(), BM25Scorer()).keys)


def test_parse_keeps_the_text_and_fills_the_tree() -> None:
    query = Query.parse('beta AND NOT "gamma ray"', filter="year >= 1990")
    assert query.text == 'beta AND NOT "gamma ray"'
    assert query.tree == BoolNode(must=(TermNode("beta"),), must_not=(PhraseNode(("gamma", "ray")),))
    assert query.filter is not None
    assert Query(text="beta AND NOT gamma").tree is None


def test_the_issues_example_means_what_it_says_only_when_parsed() -> None:
    # Issue 29: 'beta AND NOT gamma' was read as three words and returned the document with gamma.
    index = Index()
    index.add_many(DOCS)
    assert keys(index, Query.parse("beta AND NOT gamma")) == ["b"]
    assert set(keys(index, Query("beta AND NOT gamma"))) == {"a", "b", "c"}  # plain text: unchanged


def test_a_tree_can_be_built_in_python_and_is_checked() -> None:
    index = Index()
    index.add_many(DOCS)
    built = Query(tree=BoolNode(must=(TermNode("gamma"),), must_not=(TermNode("beta"),)))
    assert keys(index, built) == ["c"]
    with pytest.raises(InvalidQueryError, match="querylang node"):
        Query(tree="beta")  # type: ignore[arg-type]
    assert dataclasses.replace(built, filter="year > 1").tree == built.tree


def test_parse_errors_are_typed_with_the_position() -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        Query.parse("beta AND (gamma")
    assert caught.value.position == 9 and isinstance(caught.value, InvalidQueryError)
