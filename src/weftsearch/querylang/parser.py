r"""The query language's parser: text in, a :mod:`~weftsearch.querylang.nodes` tree out.

Hand-written recursive descent rather than a parser generator: the grammar is
a dozen productions, every error must carry the character position where it
was found (with a caret under it), and the input's size and nesting are
bounded as the parser goes, so no input costs more than one pass over at most
:data:`MAX_QUERY_LENGTH` characters with a recursion at most
:data:`~weftsearch.querylang.nodes.MAX_DEPTH` deep. A generated parser would
add a dependency and make both harder.

Grammar (Lucene's classic query parser, default operator OR)::

    query   := clause ((AND | OR | && | ||)? clause)*
    clause  := (+ | - | NOT | !)? (field ":")? primary
    primary := "(" query ")" boost? | '"' words '"' ("~" digits)? boost? | word "*"? boost?
    boost   := "^" number

``AND``, ``OR`` and ``NOT`` are operators only in capitals and unescaped.
They map onto must/should/must_not clauses as Lucene's classic parser maps
them, clause by clause from the left: ``a AND b`` makes both ``a`` and ``b``
must clauses (the clause before ``AND`` becomes must unless it is a must_not);
``OR`` changes nothing (should is the default); ``NOT a`` is ``-a``. There is
no operator precedence: ``a AND b OR c`` is ``+a +b c`` (``a`` and ``b`` must
match, ``c`` adds to the score), and ``a OR b AND c`` is ``a +b +c``. Use
parentheses to say what you mean: ``(a AND b) OR c``.

A parenthesised group is always a :class:`~weftsearch.querylang.nodes.BoolNode`;
a query of one clause without a modifier is that clause's node. ``field:(a b)``
gives the field to every word, phrase and prefix of the group that has none.
A backslash escapes any character (``\:``, ``\*``, ``\AND``, ``\ ``); inside a
phrase it escapes ``"`` and ``\``. Reserved, and a syntax error unless escaped:
``{ } [ ] ? /`` (ranges, wildcards and regular expressions are not supported),
a ``*`` not at the end of a word, and ``word~`` (fuzzy terms).
"""

from __future__ import annotations

import dataclasses
import re

from weftsearch.documents import check_string
from weftsearch.errors import InvalidQueryError, QuerySyntaxError
from weftsearch.querylang.nodes import (
    KEYWORDS,
    MAX_CLAUSES,
    MAX_DEPTH,
    MAX_SLOP,
    BoolNode,
    Node,
    PhraseNode,
    PrefixNode,
    TermNode,
    is_field_name,
)

__all__ = ["MAX_QUERY_LENGTH", "parse"]

#: Longest query text :func:`parse` reads, in characters.
MAX_QUERY_LENGTH = 16_384

_MUST, _SHOULD, _MUST_NOT = 0, 1, 2
#: Characters that end a word (besides whitespace); ``:`` ``*`` ``^`` ``~`` then say what follows.
_WORD_END = frozenset('()"^~:*')
_RESERVED = frozenset("{}[]?/")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_DIGITS = re.compile(r"[0-9]+")


def parse(text: str) -> Node:
    """Parse ``text`` in the query language (see the module docstring) into a tree. O(len(text)).

    Raises:
        QuerySyntaxError: malformed (unbalanced quotes or parentheses, a
            dangling operator, a reserved character, ...), longer than
            :data:`MAX_QUERY_LENGTH`, nested deeper than ``MAX_DEPTH`` or
            holding more than ``MAX_CLAUSES`` leaves; the message names the
            problem and shows the position with a caret.
        InvalidQueryError: ``text`` is not a str, or UTF-8 cannot encode it.

    """
    if not isinstance(text, str):
        raise InvalidQueryError(f"query text must be str, got {type(text).__name__}")
    check_string(text, "query text", InvalidQueryError)
    if len(text) > MAX_QUERY_LENGTH:
        raise QuerySyntaxError(
            f"query is {len(text)} characters, longer than MAX_QUERY_LENGTH ({MAX_QUERY_LENGTH})",
            MAX_QUERY_LENGTH,
            text,
        )
    parser = _Parser(text)
    try:
        return parser.parse()
    except QuerySyntaxError:
        raise
    except InvalidQueryError as error:  # a node's own limit (the implicit top-level group's depth)
        raise QuerySyntaxError(str(error), min(parser.at, len(text)), text) from None


def _with_field(node: Node, name: str) -> Node:
    """``node`` with ``name`` as the field of every leaf that has none (``field:(...)``)."""
    if isinstance(node, BoolNode):
        return dataclasses.replace(
            node,
            must=tuple(_with_field(c, name) for c in node.must),
            should=tuple(_with_field(c, name) for c in node.should),
            must_not=tuple(_with_field(c, name) for c in node.must_not),
        )
    return node if node.field is not None else dataclasses.replace(node, field=name)


@dataclasses.dataclass(slots=True)
class _Clause:
    """A clause being collected: how it occurs (must, should, must_not), its node, and whether it is plain.

    Plain: no modifier and no operator touched it, so a query of this one
    clause is its node (Lucene returns the clause's own query then).
    """

    occur: int
    node: Node
    plain: bool


class _Parser:
    """One parse: the text and the position reached."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.leaves = 0

    # ------------------------------------------------------------------ helpers

    def error(self, message: str, position: int | None = None) -> QuerySyntaxError:
        return QuerySyntaxError(message, self.at if position is None else position, self.text)

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def skip_space(self) -> None:
        text, at = self.text, self.at
        while at < len(text) and text[at].isspace():
            at += 1
        self.at = at

    def at_end_of_token(self, position: int) -> bool:
        return position >= len(self.text) or self.text[position].isspace() or self.text[position] in '()"'

    def keyword(self) -> str | None:
        """The operator at the current position (``AND``, ``OR``, ``NOT``, ``&&``, ``||``), or None."""
        text, at = self.text, self.at
        if text.startswith("&&", at):
            return "&&"
        if text.startswith("||", at):
            return "||"
        for word in KEYWORDS:
            if text.startswith(word, at) and self.at_end_of_token(at + len(word)):
                return word
        return None

    # ------------------------------------------------------------------ grammar

    def parse(self) -> Node:
        clauses = self.clauses(0)
        if self.at < len(self.text):  # only a ')' stops the top level early
            raise self.error("unbalanced ')': no '(' before it")
        if not clauses:
            raise self.error("empty query: no term, phrase or group", 0)
        if len(clauses) == 1 and clauses[0].plain:
            return clauses[0].node
        return self.bool_node(clauses)

    @staticmethod
    def bool_node(clauses: list[_Clause]) -> BoolNode:
        kinds: tuple[list[Node], list[Node], list[Node]] = ([], [], [])
        for clause in clauses:
            kinds[clause.occur].append(clause.node)
        return BoolNode(must=tuple(kinds[0]), should=tuple(kinds[1]), must_not=tuple(kinds[2]))

    def clauses(self, depth: int) -> list[_Clause]:
        """The clauses up to the end of the text or a ``)``."""
        clauses: list[_Clause] = []
        while True:
            self.skip_space()
            if self.at >= len(self.text) or self.peek() == ")":
                return clauses
            conjunction = None
            word = self.keyword()
            if word in ("AND", "OR", "&&", "||"):
                if not clauses:
                    raise self.error(f"{word!r} needs a clause before it")
                conjunction = "AND" if word in ("AND", "&&") else "OR"
                operator_at = self.at
                self.at += len(word)
                self.skip_space()
                if self.at >= len(self.text) or self.peek() == ")":
                    raise self.error(f"{word!r} needs a clause after it", operator_at)
                word = self.keyword()
                if word in ("AND", "OR", "&&", "||"):
                    raise self.error(f"{word!r} cannot follow {conjunction!r}")
            modifier = None
            modifier_at = self.at
            if word == "NOT":
                modifier = "-"
                self.at += 3
                self.skip_space()
                if self.at >= len(self.text) or self.peek() == ")":
                    raise self.error("'NOT' needs a clause after it", modifier_at)
            elif self.peek() in ("+", "-", "!"):
                modifier = "+" if self.peek() == "+" else "-"
                self.at += 1
                if self.at >= len(self.text) or self.text[self.at].isspace() or self.peek() == ")":
                    raise self.error(f"{self.text[modifier_at]!r} needs a clause right after it", modifier_at)
            if self.keyword() is not None or (modifier is not None and self.peek() in ("+", "-", "!")):
                raise self.error("expected a term, phrase or group")
            node = self.clause(depth, None)
            if self.peek() in _WORD_END and self.peek() not in '()"':
                raise self.error(f"unexpected {self.peek()!r}")
            self.add(clauses, conjunction, modifier, node)

    @staticmethod
    def add(clauses: list[_Clause], conjunction: str | None, modifier: str | None, node: Node) -> None:
        """Lucene's ``QueryParserBase.addClause`` with the default operator OR."""
        if conjunction == "AND" and clauses and clauses[-1].occur != _MUST_NOT:
            clauses[-1].occur = _MUST
            clauses[-1].plain = False
        prohibited = modifier == "-"
        required = modifier == "+" or (conjunction == "AND" and not prohibited)
        occur = _MUST if required else _MUST_NOT if prohibited else _SHOULD
        clauses.append(_Clause(occur, node, conjunction is None and modifier is None))

    def clause(self, depth: int, field: str | None) -> Node:
        start = self.at
        char = self.peek()
        if char == "(":
            if depth + 1 > MAX_DEPTH:
                raise self.error(f"parentheses nested deeper than MAX_DEPTH ({MAX_DEPTH})")
            self.at += 1
            clauses = self.clauses(depth + 1)
            if self.at >= len(self.text):
                raise self.error("unbalanced '(': no ')' closes it", start)
            if not clauses:
                raise self.error("empty group '()'", start)
            self.at += 1
            group: Node = self.bool_node(clauses)
            if field is not None:
                group = _with_field(group, field)
            return self.boosted(group)
        if char == '"':
            return self.phrase(field)
        if char == ")" or char == "":
            raise self.error("expected a term, phrase or group")
        if char == "*":
            raise self.error("a '*' needs a prefix before it (prefix*); escape it (\\*) for the character")
        if self.text.startswith(("&&", "||"), self.at):
            raise self.error("expected a term, phrase or group")
        word, escaped = self.word()
        stop = self.peek()
        if stop == ":":
            if field is not None:
                raise self.error(f"field {field!r} is followed by another field {word!r}", start)
            if escaped or not is_field_name(word):
                raise self.error(
                    f"invalid field name {word!r} (a field is [A-Za-z_][A-Za-z0-9_]*, at most 64 characters;"
                    " escape ':' for the character)",
                    start,
                )
            self.at += 1
            if self.at >= len(self.text) or self.text[self.at].isspace() or self.peek() in "):^~*":
                raise self.error(f"expected a term, phrase or group right after '{word}:'")
            return self.clause(depth, word)
        if stop == "~":
            raise self.error("fuzzy terms (word~) are not supported; escape '~' (\\~) for the character")
        if stop == "*":
            self.at += 1
            if not (self.at_end_of_token(self.at) or self.peek() == "^"):
                raise self.error("'*' is supported only at the end of a word (a prefix)", self.at - 1)
            self.count_leaf(start)
            return self.boosted(PrefixNode(word, field))
        if not escaped and word in KEYWORDS:
            raise self.error(f"{word!r} is an operator here; escape it (\\{word}) to search the word", start)
        self.count_leaf(start)
        return self.boosted(TermNode(word, field))

    def count_leaf(self, start: int) -> None:
        self.leaves += 1
        if self.leaves > MAX_CLAUSES:
            raise self.error(f"more than MAX_CLAUSES ({MAX_CLAUSES}) terms, phrases and prefixes", start)

    def word(self) -> tuple[str, bool]:
        """The word at the position, escapes resolved, and whether it held an escape."""
        text, at = self.text, self.at
        chars: list[str] = []
        escaped = False
        while at < len(text):
            char = text[at]
            if char == "\\":
                if at + 1 >= len(text):
                    raise self.error("a backslash at the end escapes nothing", at)
                chars.append(text[at + 1])
                escaped = True
                at += 2
                continue
            if char.isspace() or char in _WORD_END:
                break
            if char in _RESERVED:
                raise self.error(
                    f"{char!r} is reserved (ranges, wildcards and regular expressions are not supported); "
                    f"escape it (\\{char}) for the character",
                    at,
                )
            chars.append(char)
            at += 1
        self.at = at
        if not chars:
            raise self.error("expected a term, phrase or group")
        return "".join(chars), escaped

    def phrase(self, field: str | None) -> Node:
        text, start = self.text, self.at
        at = start + 1
        words: list[str] = []
        current: list[str] = []
        while True:
            if at >= len(text):
                raise self.error("unbalanced '\"': no '\"' closes the phrase", start)
            char = text[at]
            if char == "\\":
                if at + 1 >= len(text):
                    raise self.error("a backslash at the end escapes nothing", at)
                current.append(text[at + 1])
                at += 2
                continue
            if char == '"':
                at += 1
                break
            if char.isspace():
                if current:
                    words.append("".join(current))
                    current = []
            else:
                current.append(char)
            at += 1
        if current:
            words.append("".join(current))
        self.at = at
        if not words:
            raise self.error('empty phrase ""', start)
        self.count_leaf(start)
        slop = 0
        if self.peek() == "~":
            self.at += 1
            match = _DIGITS.match(text, self.at)
            if match is None:
                raise self.error("expected a whole number (the slop) after '~'")
            digits = match.group()
            if len(digits) > len(str(MAX_SLOP)) or int(digits) > MAX_SLOP:
                raise self.error(f"slop {digits} is above MAX_SLOP ({MAX_SLOP})")
            slop = int(digits)
            self.at = match.end()
        return self.boosted(PhraseNode(tuple(words), field, slop))

    def boosted(self, node: Node) -> Node:
        """``node`` with the ``^boost`` that follows it, if any."""
        if self.peek() != "^":
            return node
        self.at += 1
        match = _NUMBER.match(self.text, self.at)
        if match is None:
            raise self.error("expected a number (the boost) after '^'")
        boost = float(match.group())
        if not 0.0 < boost < float("inf"):
            raise self.error(f"a boost must be a finite number > 0, got {match.group()}")
        self.at = match.end()
        return dataclasses.replace(node, boost=boost)
