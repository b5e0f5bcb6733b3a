"""Hypothesis strategies for query trees (shared by the parser and scorer tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from weftsearch.querylang import BoolNode, Node, PhraseNode, PrefixNode, TermNode

#: Any text a node may hold: every special character, whitespace, keywords, non-ASCII.
_CHARS = st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")
TEXTS = st.one_of(
    st.text(_CHARS, min_size=1, max_size=8),
    st.sampled_from(["AND", "OR", "NOT", "&&", "||", "a:b", "x*", "-", "+a", "\\", '"', "(", "1^2", "a~"]),
)
FIELDS = st.one_of(st.none(), st.sampled_from(["text", "title", "_f1"]))
BOOSTS = st.one_of(st.just(1.0), st.floats(min_value=1e-6, max_value=1e6, allow_nan=False))


def leaves(
    texts: st.SearchStrategy[str] = TEXTS, fields: st.SearchStrategy[str | None] = FIELDS
) -> st.SearchStrategy[Node]:
    """Terms, phrases and prefixes over ``texts``."""
    return st.one_of(
        st.builds(TermNode, texts, fields, BOOSTS),
        st.builds(
            PhraseNode,
            st.lists(texts, min_size=1, max_size=4).map(tuple),
            fields,
            st.integers(0, 5),
            BOOSTS,
        ),
        st.builds(PrefixNode, texts, fields, BOOSTS),
    )


def trees(leaf: st.SearchStrategy[Node], max_leaves: int = 12) -> st.SearchStrategy[Node]:
    """Trees of :class:`BoolNode` over ``leaf``."""

    def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        clauses = st.lists(children, max_size=3).map(tuple)
        parts = st.tuples(clauses, clauses, clauses, BOOSTS).filter(lambda p: bool(p[0] or p[1] or p[2]))
        return parts.map(lambda p: BoolNode(p[0], p[1], p[2], p[3]))

    return st.recursive(leaf, extend, max_leaves=max_leaves)
