"""The query language's parser: Lucene's semantics, typed errors with positions, bounds, round trips."""

from __future__ import annotations

import pickle
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.querylang.strategies import leaves, trees
from weftsearch.errors import InvalidQueryError, QuerySyntaxError
from weftsearch.querylang import (
    MAX_CLAUSES,
    MAX_DEPTH,
    MAX_QUERY_LENGTH,
    MAX_SLOP,
    BoolNode,
    Node,
    PhraseNode,
    PrefixNode,
    TermNode,
    parse,
)

a, b, c = TermNode("a"), TermNode("b"), TermNode("c")


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a", a),
        ("a b", BoolNode(should=(a, b))),
        ("a OR b", BoolNode(should=(a, b))),
        ("a || b", BoolNode(should=(a, b))),
        ("a AND b", BoolNode(must=(a, b))),
        ("a && b", BoolNode(must=(a, b))),
        # Lucene's classic parser: no precedence, AND makes its left and right clauses must.
        ("a AND b OR c", BoolNode(must=(a, b), should=(c,))),
        ("a OR b AND c", BoolNode(must=(b, c), should=(a,))),
        ("(a AND b) OR c", BoolNode(should=(BoolNode(must=(a, b)), c))),
        ("a AND NOT b", BoolNode(must=(a,), must_not=(b,))),
        ("-a AND b", BoolNode(must=(b,), must_not=(a,))),
        ("NOT a", BoolNode(must_not=(a,))),
        ("!a b", BoolNode(should=(b,), must_not=(a,))),
        ("+a b -c", BoolNode(must=(a,), should=(b,), must_not=(c,))),
        ("+a", BoolNode(must=(a,))),
        ("(a)", BoolNode(should=(a,))),
        ('"dense retrieval"', PhraseNode(("dense", "retrieval"))),
        ('"dense  retrieval"~3^2', PhraseNode(("dense", "retrieval"), slop=3, boost=2.0)),
        ('title:"a b"', PhraseNode(("a", "b"), field="title")),
        ("title:a", TermNode("a", field="title")),
        ("a^2.5", TermNode("a", boost=2.5)),
        ("a^1e-3", TermNode("a", boost=0.001)),
        ("retriev*", PrefixNode("retriev")),
        ("Retriev*^0.5", PrefixNode("Retriev", boost=0.5)),
        (
            "title:(a -b)^2",
            BoolNode(should=(TermNode("a", "title"),), must_not=(TermNode("b", "title"),), boost=2.0),
        ),
        ("title:(a body:b)", BoolNode(should=(TermNode("a", "title"), TermNode("b", "body")))),
        ("\\AND", TermNode("AND")),
        ("and", TermNode("and")),
        ("a\\:b", TermNode("a:b")),
        ("a\\*", TermNode("a*")),
        ("a\\ b", TermNode("a b")),
        ("foo-bar", TermNode("foo-bar")),
        ('"say \\"hi\\""', PhraseNode(("say", '"hi"'))),
        ("  a  ", a),
    ],
)
def test_parses_as_lucene_classic(text: str, tree: Node) -> None:
    assert parse(text) == tree


@pytest.mark.parametrize(
    ("text", "position", "says"),
    [
        ("", 0, "empty query"),
        ("   ", 0, "empty query"),
        ("(a b", 0, "unbalanced '('"),
        ("a b)", 3, "unbalanced ')'"),
        ('a "b c', 2, "unbalanced '\"'"),
        ("a AND", 2, "needs a clause after"),
        ("AND a", 0, "needs a clause before"),
        ("a OR AND b", 5, "cannot follow"),
        ("NOT", 0, "'NOT' needs a clause"),
        ("a +", 2, "'+' needs a clause"),
        ("a - b", 2, "'-' needs a clause"),
        ("+-a", 1, "expected a term"),
        ("a*b", 1, "only at the end of a word"),
        ("*a", 0, "needs a prefix"),
        ("a~", 1, "fuzzy"),
        ("a~2", 1, "fuzzy"),
        ("[a TO b]", 0, "reserved"),
        ("a?", 1, "reserved"),
        ("/re/", 0, "reserved"),
        ("a^", 2, "expected a number"),
        ("a^x", 2, "expected a number"),
        ("a^0", 2, "finite number > 0"),
        ("a^1e999", 2, "finite number > 0"),
        ("a^2^3", 3, "unexpected '^'"),
        ('"a b"~', 6, "slop"),
        ('"a b"~99999999999999999999', 6, "MAX_SLOP"),
        ('""', 0, "empty phrase"),
        ('"  "', 0, "empty phrase"),
        ("()", 0, "empty group"),
        ("a\\", 1, "escapes nothing"),
        ("foo-bar:x", 0, "invalid field name"),
        ("t\\itle:x", 0, "invalid field name"),
        ("title: x", 6, "right after 'title:'"),
        ("title:", 6, "right after 'title:'"),
        ("a:b:c", 2, "followed by another field"),
        ("+AND", 1, "expected a term"),
        ("a (b AND) c", 5, "needs a clause after"),
    ],
)
def test_errors_name_the_position_with_a_caret(text: str, position: int, says: str) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse(text)
    error = caught.value
    assert isinstance(error, InvalidQueryError) and isinstance(error, ValueError)
    assert error.position == position, str(error)
    message = str(error)
    assert says in message
    assert f"at position {position}" in message
    shown, caret = message.splitlines()[-2:]
    assert caret.index("^") - 2 == position  # two spaces of indent on both lines
    assert shown[2:] == "".join(" " if ch.isspace() else ch for ch in text)


def test_caret_of_a_long_query_shows_a_window() -> None:
    text = "a " * 200 + "(" + " b" * 200
    with pytest.raises(QuerySyntaxError) as caught:
        parse(text)
    shown, caret = str(caught.value).splitlines()[-2:]
    assert len(shown) < 140
    assert shown[caret.index("^")] == "("


def test_bounds_are_typed_errors_naming_the_limit() -> None:
    deep = "(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1)
    with pytest.raises(QuerySyntaxError, match="MAX_DEPTH"):
        parse(deep)
    assert parse("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH).depth == MAX_DEPTH
    # The implicit top-level group counts: one more clause beside the deepest group is too deep.
    with pytest.raises(QuerySyntaxError, match="MAX_DEPTH"):
        parse("x " + "(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH)
    with pytest.raises(QuerySyntaxError, match="MAX_CLAUSES") as caught:
        parse(" ".join(["w"] * (MAX_CLAUSES + 1)))
    assert caught.value.position == 2 * MAX_CLAUSES
    assert parse(" ".join(["w"] * MAX_CLAUSES)).leaves == MAX_CLAUSES
    with pytest.raises(QuerySyntaxError, match="MAX_QUERY_LENGTH"):
        parse("a" * (MAX_QUERY_LENGTH + 1))
    with pytest.raises(QuerySyntaxError, match="MAX_SLOP"):
        parse(f'"a b"~{MAX_SLOP + 1}')


@pytest.mark.parametrize(
    "text",
    ["(" * 10_000, ")" * 10_000, '"' * 10_001, "a " * 8000, "\\" * 10_001, "(a " * 5000, "NOT " * 4000 + "a"],
)
def test_hostile_inputs_fail_fast(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(QuerySyntaxError):
        parse(text)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: TermNode(""), "must not be empty"),
        (lambda: TermNode(3), "must be a str"),  # type: ignore[arg-type]
        (lambda: TermNode("a", boost=0.0), "boost"),
        (lambda: TermNode("a", boost=float("nan")), "boost"),
        (lambda: TermNode("a", boost=True), "boost"),
        (lambda: TermNode("a", field="no-dash"), "field name"),
        (lambda: PrefixNode("a", field=""), "field name"),
        (lambda: PhraseNode(()), "at least one word"),
        (lambda: PhraseNode("ab"), "tuple of str"),  # type: ignore[arg-type]
        (lambda: PhraseNode(("a", "")), "must not be empty"),
        (lambda: PhraseNode(("a",), slop=-1), "slop"),
        (lambda: PhraseNode(("a",), slop=MAX_SLOP + 1), "slop"),
        (lambda: BoolNode(), "at least one clause"),
        (lambda: BoolNode(should=("a",)), "non-node"),  # type: ignore[arg-type]
        (lambda: TermNode("\ud800"), "surrogate"),
    ],
)
def test_nodes_validate_themselves(build: object, says: str) -> None:
    with pytest.raises(InvalidQueryError, match=says):
        build()  # type: ignore[operator]


def test_nodes_built_in_python_are_bounded_too() -> None:
    node: Node = a
    for _ in range(MAX_DEPTH):
        node = BoolNode(should=(node,))
    with pytest.raises(InvalidQueryError, match="MAX_DEPTH"):
        BoolNode(should=(node,))
    with pytest.raises(InvalidQueryError, match="MAX_CLAUSES"):
        BoolNode(should=tuple([a] * (MAX_CLAUSES + 1)))


# The strategy's repr is long (every special string is in it); hypothesis warns about that only.
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(leaves()))
@example(BoolNode(should=(a,)))
@example(BoolNode(must_not=(TermNode("NOT"),), boost=3.0))
@example(PhraseNode(("a b", "c\\d", '"'), slop=2))
def test_to_string_parses_back_to_the_same_tree(tree: Node) -> None:
    assert parse(tree.to_string()) == tree


def feed(data: bytes) -> None:
    """The fuzz entry point shared with ``fuzz/atheris_querylang.py``: parse ``data`` as UTF-8 text.

    Only :class:`QuerySyntaxError` may escape (or :class:`InvalidQueryError`
    for a lone surrogate, refused before parsing); a tree that parses must
    print back to itself. Anything else is a crash.
    """
    text = data.decode("utf-8", "surrogateescape")
    try:
        tree = parse(text)
    except QuerySyntaxError as error:
        assert 0 <= error.position <= len(text), error
    except InvalidQueryError as error:
        assert "surrogate" in str(error), error
    else:
        assert parse(tree.to_string()) == tree


_SYNTAX = st.sampled_from([*'()"+-!^~*:\\ ', "AND", "OR", "NOT", "&&", "||", "a", "b", "title", "2", "1.5"])


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(_SYNTAX, max_size=30).map("".join)))
@example("\udcff")
def test_any_string_parses_or_raises_a_syntax_error_quickly(text: str) -> None:
    start = time.perf_counter()
    feed(text.encode("utf-8", "surrogateescape"))
    assert time.perf_counter() - start < 0.5


def test_trees_and_errors_pickle() -> None:
    # Trees and syntax errors cross process boundaries (Ray shards, server workers).
    tree = parse('+a (b "c d"~2)^2 -e*')
    again = pickle.loads(pickle.dumps(tree))
    assert again == tree and (again.depth, again.leaves) == (tree.depth, tree.leaves)
    with pytest.raises(QuerySyntaxError) as caught:
        parse("a (")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (copy.position, str(copy), copy.query) == (2, str(caught.value), "a (")
