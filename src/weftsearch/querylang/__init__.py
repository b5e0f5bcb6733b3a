"""A query language as Lucene's classic query parser reads it, and the typed tree it parses to.

``parse('+sparse "dense retrieval"~2 -title:survey retriev*^0.5')`` returns a
tree of :class:`TermNode`, :class:`PhraseNode`, :class:`PrefixNode` and
:class:`BoolNode`; the same trees can be built in Python, and each node's
``to_string()`` parses back to it. :meth:`weftsearch.Query.parse` puts a tree
in a query; the BM25 scorer scores it (Lucene's ``BooleanQuery`` semantics).
The grammar, the operators' meaning and the limits: :mod:`weftsearch.querylang.parser`.
"""

from __future__ import annotations

from weftsearch.errors import QuerySyntaxError
from weftsearch.querylang.nodes import (
    MAX_CLAUSES,
    MAX_DEPTH,
    MAX_PREFIX_TERMS,
    MAX_SLOP,
    BoolNode,
    Node,
    PhraseNode,
    PrefixNode,
    TermNode,
    tree_texts,
)
from weftsearch.querylang.parser import MAX_QUERY_LENGTH, parse

__all__ = [
    "MAX_CLAUSES",
    "MAX_DEPTH",
    "MAX_PREFIX_TERMS",
    "MAX_QUERY_LENGTH",
    "MAX_SLOP",
    "BoolNode",
    "Node",
    "PhraseNode",
    "PrefixNode",
    "QuerySyntaxError",
    "TermNode",
    "parse",
    "tree_texts",
]
