"""The query tree: small frozen value types that :func:`~weftsearch.querylang.parse` builds.

Users can build the same trees in Python::

    BoolNode(must=(TermNode("sparse"),), should=(PhraseNode(("dense", "retrieval")),))

Every node validates itself when built (a typed
:class:`~weftsearch.errors.InvalidQueryError` naming the bad value), and
:meth:`to_string` prints query syntax that parses back to an equal tree.
Texts are the words as typed: the scorer analyses them with the index's
analyzer, as plain query text is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Union

from weftsearch.documents import check_string
from weftsearch.errors import InvalidQueryError

__all__ = [
    "MAX_CLAUSES",
    "MAX_DEPTH",
    "MAX_PREFIX_TERMS",
    "MAX_SLOP",
    "BoolNode",
    "Node",
    "PhraseNode",
    "PrefixNode",
    "TermNode",
    "FIELD_NAME_LIMIT",
    "tree_texts",
]

#: Deepest nesting of :class:`BoolNode` s a tree may have (a parenthesised group is one level).
MAX_DEPTH = 32
#: Most leaves (terms, phrases, prefixes) one tree may hold; Lucene's default ``maxClauseCount``.
MAX_CLAUSES = 1024
#: Largest slop of a phrase (``"a b"~N``).
MAX_SLOP = 10_000
#: Most dictionary terms one prefix may expand to (over a whole index, every shard of a sharded
#: one); beyond, a search refuses it (``InvalidQueryError``).
MAX_PREFIX_TERMS = 64
#: Longest field name.
FIELD_NAME_LIMIT = 64

#: Characters escaped with a backslash in a term or prefix; whitespace too (by ``str.isspace``).
SPECIAL = frozenset('\\+-!():^[]"{}~*?/&|')
#: Characters escaped inside a phrase's quotes; whitespace too.
PHRASE_SPECIAL = frozenset('\\"')
#: Words that are operators when typed bare.
KEYWORDS = frozenset({"AND", "OR", "NOT"})


def _escape(text: str, special: frozenset[str]) -> str:
    return "".join("\\" + ch if ch in special or ch.isspace() else ch for ch in text)


def escape_term(text: str) -> str:
    """``text`` with every character the parser reads as syntax escaped (and a bare keyword)."""
    escaped = _escape(text, SPECIAL)
    return "\\" + escaped if text in KEYWORDS else escaped


def _boost_suffix(boost: float) -> str:
    return "" if boost == 1.0 else f"^{boost!r}"


def _field_prefix(name: str | None) -> str:
    return "" if name is None else f"{name}:"


def _check_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidQueryError(f"{what} must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidQueryError(f"{what} must not be empty")
    return check_string(value, what, InvalidQueryError)


def _check_field(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not is_field_name(value):
        raise InvalidQueryError(
            f"a field name is [A-Za-z_][A-Za-z0-9_]* of at most {FIELD_NAME_LIMIT} characters, got {value!r}"
        )
    return value


def is_field_name(name: str) -> bool:
    """Whether ``name`` is a valid field name (``[A-Za-z_][A-Za-z0-9_]*``, at most 64 characters)."""
    return (
        0 < len(name) <= FIELD_NAME_LIMIT
        and name.isascii()
        and (name[0].isalpha() or name[0] == "_")
        and all(ch.isalnum() or ch == "_" for ch in name)
    )


def _check_boost(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value > 0)
    ):
        raise InvalidQueryError(f"a boost must be a finite number > 0, got {value!r}")
    return float(value)


class _Leaf:
    """What every leaf node is: no nesting, one leaf (a mixin without state)."""

    __slots__ = ()

    @property
    def depth(self) -> int:
        """Nesting depth: 0 for a leaf."""
        return 0

    @property
    def leaves(self) -> int:
        """Leaves in the tree: 1."""
        return 1


@dataclass(frozen=True, slots=True)
class TermNode(_Leaf):
    """One word, matched as the analyzer reads it (a word may analyse to several terms, or none).

    Attributes:
        text: the word as typed (``"Running"``; analysed to ``"run"`` by the english analyzer).
        field: the text field to search; ``None``: the default field.
        boost: multiplies the clause's score (> 0).

    """

    text: str
    field: str | None = None
    boost: float = 1.0

    def __post_init__(self) -> None:
        _check_text(self.text, "a term's text")
        _check_field(self.field)
        object.__setattr__(self, "boost", _check_boost(self.boost))

    def to_string(self) -> str:
        """Query syntax that parses back to this node."""
        return f"{_field_prefix(self.field)}{escape_term(self.text)}{_boost_suffix(self.boost)}"


@dataclass(frozen=True, slots=True)
class PhraseNode(_Leaf):
    """Words that must occur in order, next to each other (or within ``slop`` moves).

    Attributes:
        terms: the words as typed, in order (each analysed; a stopword takes no position,
            so the phrase matches across it).
        field: the text field to search; ``None``: the default field.
        slop: how far the words may be moved apart or reordered: the phrase
            matches where ``max(p_i - i) - min(p_i - i) <= slop`` for the
            positions ``p_i`` of its terms (0: exactly adjacent, in order).
        boost: multiplies the clause's score (> 0).

    """

    terms: tuple[str, ...]
    field: str | None = None
    slop: int = 0
    boost: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.terms, str) or not isinstance(self.terms, (tuple, list)):
            raise InvalidQueryError(f"a phrase's terms must be a tuple of str, got {self.terms!r}")
        terms = tuple(self.terms)
        if not terms:
            raise InvalidQueryError("a phrase needs at least one word")
        for word in terms:
            _check_text(word, "a phrase's word")
        object.__setattr__(self, "terms", terms)
        _check_field(self.field)
        if isinstance(self.slop, bool) or not isinstance(self.slop, int) or not 0 <= self.slop <= MAX_SLOP:
            raise InvalidQueryError(f"a phrase's slop must be an int in [0, {MAX_SLOP}], got {self.slop!r}")
        object.__setattr__(self, "boost", _check_boost(self.boost))

    def to_string(self) -> str:
        """Query syntax that parses back to this node."""
        words = " ".join(_escape(word, PHRASE_SPECIAL) for word in self.terms)
        slop = f"~{self.slop}" if self.slop else ""
        return f'{_field_prefix(self.field)}"{words}"{slop}{_boost_suffix(self.boost)}'


@dataclass(frozen=True, slots=True)
class PrefixNode(_Leaf):
    """Every term of the field's dictionary that starts with ``prefix`` (``retriev*``).

    Scored as a constant ``boost`` per matching document (Lucene's
    constant-score rewrite). The prefix is lower-cased (``str.lower``), not
    stemmed: ``Retriev*`` matches the indexed terms ``retriev...``.

    Attributes:
        prefix: the characters before the ``*``.
        field: the text field to search; ``None``: the default field.
        boost: the score of a matching document (> 0).

    """

    prefix: str
    field: str | None = None
    boost: float = 1.0

    def __post_init__(self) -> None:
        _check_text(self.prefix, "a prefix")
        _check_field(self.field)
        object.__setattr__(self, "boost", _check_boost(self.boost))

    def to_string(self) -> str:
        """Query syntax that parses back to this node."""
        return f"{_field_prefix(self.field)}{_escape(self.prefix, SPECIAL)}*{_boost_suffix(self.boost)}"


#: What a pickled :class:`BoolNode` holds, in the order the dataclass's own state had (old pickles load).
_BOOL_STATE = ("must", "should", "must_not", "boost", "_depth", "_leaves")


@dataclass(frozen=True, slots=True)
class BoolNode:
    """Clauses combined as Lucene's ``BooleanQuery``.

    A document matches when it matches every ``must`` clause, none of the
    ``must_not`` clauses and, when there is no ``must`` clause, at least one
    ``should`` clause; its score is the sum of the scores of the ``must`` and
    ``should`` clauses it matches, times ``boost``. A node of ``must_not``
    clauses only matches nothing (as in Lucene).

    Attributes:
        must: clauses every match holds (``+a``, ``a AND b``).
        should: clauses that add to the score (``a b``, ``a OR b``).
        must_not: clauses no match holds (``-a``, ``NOT a``).
        boost: multiplies the node's score (> 0).

    """

    must: tuple[Node, ...] = ()
    should: tuple[Node, ...] = ()
    must_not: tuple[Node, ...] = ()
    boost: float = 1.0
    _depth: int = field(default=0, init=False, repr=False, compare=False)
    _leaves: int = field(default=0, init=False, repr=False, compare=False)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        depth = 0
        leaves = 0
        for name in ("must", "should", "must_not"):
            clauses = getattr(self, name)
            if isinstance(clauses, (str, bytes)) or not isinstance(clauses, (tuple, list)):
                raise InvalidQueryError(f"BoolNode.{name} must be a tuple of nodes, got {clauses!r}")
            clauses = tuple(clauses)
            for clause in clauses:
                if not isinstance(clause, (TermNode, PhraseNode, PrefixNode, BoolNode)):
                    raise InvalidQueryError(f"BoolNode.{name} holds a non-node: {clause!r}")
                depth = max(depth, clause.depth)
                leaves += clause.leaves
            object.__setattr__(self, name, clauses)
        if not (self.must or self.should or self.must_not):
            raise InvalidQueryError("a BoolNode needs at least one clause")
        if depth + 1 > MAX_DEPTH:
            raise InvalidQueryError(f"a query tree may nest at most {MAX_DEPTH} deep (MAX_DEPTH)")
        if leaves > MAX_CLAUSES:
            raise InvalidQueryError(
                f"a query tree may hold at most {MAX_CLAUSES} terms, phrases and prefixes (MAX_CLAUSES), "
                f"got {leaves}"
            )
        object.__setattr__(self, "_depth", depth + 1)
        object.__setattr__(self, "_leaves", leaves)
        object.__setattr__(self, "boost", _check_boost(self.boost))
        object.__setattr__(self, "_hash", self._fields_hash())

    def _fields_hash(self) -> int:
        # What the frozen dataclass's own __hash__ computes (the compared fields, in order), so
        # equal nodes hash equal; computed once, since scorers look a tree up per search and the
        # dataclass's hash walks the whole tree each time.
        return hash((self.must, self.should, self.must_not, self.boost))

    def __hash__(self) -> int:
        return self._hash

    def __getstate__(self) -> list[object]:
        # The hash is not pickled: str hashes differ between processes (PYTHONHASHSEED).
        return [self.must, self.should, self.must_not, self.boost, self._depth, self._leaves]

    def __setstate__(self, state: list[object]) -> None:
        for name, value in zip(_BOOL_STATE, state, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_hash", self._fields_hash())

    @property
    def depth(self) -> int:
        """Nesting depth: 1 + the deepest clause's."""
        return self._depth

    @property
    def leaves(self) -> int:
        """Terms, phrases and prefixes in the tree."""
        return self._leaves

    def to_string(self) -> str:
        """Query syntax that parses back to this node: ``(+must should -must_not)^boost``."""
        parts = [f"+{c.to_string()}" for c in self.must]
        parts += [c.to_string() for c in self.should]
        parts += [f"-{c.to_string()}" for c in self.must_not]
        return f"({' '.join(parts)}){_boost_suffix(self.boost)}"


#: Any node of a query tree.
Node = Union[TermNode, PhraseNode, PrefixNode, BoolNode]


def tree_texts(node: Node) -> list[str]:
    """Every text of ``node`` that is analysed into scored terms (words and phrase words, not prefixes).

    What a sharded index gathers collection statistics for.
    """
    if isinstance(node, TermNode):
        return [node.text]
    if isinstance(node, PhraseNode):
        return list(node.terms)
    if isinstance(node, PrefixNode):
        return []
    return [text for clause in (*node.must, *node.should, *node.must_not) for text in tree_texts(clause)]
