"""Filter expressions over :attr:`Document.fields` and :attr:`Document.time`.

A filter says which documents a search may return. It is built in Python with
:class:`F`, or parsed from the string form (the command line, eval arm specs,
the server) by :func:`parse_filter`; both give the same immutable tree::

    (F("year") >= 1990) & F("source").isin(["pubmed", "arxiv"]) & ~F("retracted").exists()
    parse_filter('year >= 1990 and source in ("pubmed", "arxiv") and not exists(retracted)')

The string grammar (keywords are case-insensitive)::

    filter     := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | atom
    atom       := "(" filter ")" | comparison | membership | contains | "exists" "(" field ")"
    comparison := field op value          op: == (or =)  !=  <  <=  >  >=
    membership := field ["not"] "in" "(" value ("," value)* [","] ")"
    contains   := field "contains" value
                | field "contains" ("any" | "all") "(" value ("," value)* [","] ")"
    field      := name | `any name` | @time
    value      := "string" | 'string' | number | true | false

``name`` is letters, digits, ``_``, ``.`` and ``-`` (not starting with a digit or
``-``); any other field name is written between backquotes. ``@time`` is the
document's :attr:`~weftsearch.documents.Document.time`; its values are
any :data:`~weftsearch.times.TimeLike` (an ISO-8601 string such as
``"2009-06-01"``, or POSIX seconds).

Meaning, fixed so every scorer and shard applies the same rule:

* ``field == v`` matches documents whose field holds ``v`` (``1`` and ``1.0``
  are equal numbers; ``true`` is never the number 1).
* ``<``, ``<=``, ``>``, ``>=`` (and :meth:`F.between`) apply to number fields and
  ``@time`` only; a range on a string or boolean field is a :class:`FilterTypeError`.
* ``not`` is the complement, so ``not year >= 1990`` also matches documents
  that have no ``year``; ``field != v`` is ``not field == v`` (it matches
  documents without the field too), as ``field not in (...)`` is.
* A document without a time never matches a condition on ``@time`` (and
  matches its ``not``).
* List fields (``keyword-list``, ``number-list``: a document's field holds a
  list): ``tags contains "x"`` matches documents whose list holds ``"x"``;
  ``contains any (...)`` one of the values, ``contains all (...)`` every one.
  A comparison on a list field holds when it holds for *some* element, as
  Elasticsearch reads a condition on an array: ``tags == "x"`` is ``tags
  contains "x"``, ``tags in (...)`` is ``contains any``, ``scores > 5`` means
  some score is above 5, and ``tags != "x"`` (``not tags == "x"``) matches
  the lists without ``"x"`` (and documents without the field). An empty list
  is no value (``exists`` is false). ``contains`` on a scalar field, or on
  ``@time``, is a :class:`FilterTypeError` (use ``==`` or ``in``).

Bounds: a filter nests ``and``/``or``/``not`` at most :data:`MAX_FILTER_DEPTH`
deep, and a number must be a finite float64 (:data:`MAX_FILTER_NUMBER`; a decimal
that underflows to 0 is refused too). Integers are compared exactly with the
float64 values a number field holds, so ``n == 9007199254740993`` (2**53 + 1)
matches nothing rather than the documents holding 2**53.

Which fields exist and their types come from the index (a field's type is
fixed by the first document that has it): :func:`check_filter` refuses a filter
naming an unknown field or comparing a field with a value of another type,
naming the field and, for parsed filters, the character position.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as _dataclass_field
from typing import Literal, NoReturn, Union, cast

import numpy as np
from numpy.typing import NDArray

from weftsearch._numbers import number_text
from weftsearch.errors import FilterSyntaxError, FilterTypeError, InvalidFilterError, UnknownFieldError
from weftsearch.storage.fields import LIST_KINDS, FieldIndex, field_kind
from weftsearch.times import TimeLike, as_timestamp

__all__ = [
    "F",
    "Filter",
    "Compare",
    "IsIn",
    "Contains",
    "Exists",
    "And",
    "Or",
    "Not",
    "FieldKind",
    "TIME_FIELD",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_NUMBER",
    "FilterValue",
    "parse_filter",
    "as_filter",
    "check_filter",
    "kind_of_value",
    "SegmentFields",
    "segment_mask",
]

#: The type of a field as the index records it: ``keyword`` (str), ``number``
#: (int or float), ``boolean`` (bool), ``keyword-list`` and ``number-list`` (a list of
#: those), and ``time`` (only :data:`TIME_FIELD`).
FieldKind = Literal["keyword", "number", "boolean", "keyword-list", "number-list", "time"]
#: A value a condition compares with.
FilterValue = Union[str, int, float, bool]
#: How the string form names the document time.
TIME_FIELD = "@time"

_OPERATORS = ("==", "!=", "<", "<=", ">", ">=")
_RANGE_OPERATORS = frozenset({"<", "<=", ">", ">="})
#: Longest accepted filter text, in characters (bounds the parser's work).
MAX_FILTER_CHARS = 10_000
#: Most values one ``in (...)`` list may hold.
MAX_IN_VALUES = 10_000
#: Deepest nesting of ``and``/``or``/``not`` a filter may have (parsed or built in Python):
#: every pass over a filter recurses once per level, and no real filter nests this deep.
MAX_FILTER_DEPTH = 32
#: Largest magnitude of a number in a filter: float64's largest finite value. Number
#: fields hold float64 (integers up to 2**53, exactly), so nothing beyond it can match.
MAX_FILTER_NUMBER = sys.float_info.max


def kind_of_value(value: object) -> FieldKind | None:
    """The :data:`FieldKind` a field holding ``value`` has (``None`` for another type). O(1).

    The storage layer's rule (:func:`weftsearch.storage.fields.field_kind`), typed.
    """
    return cast("FieldKind | None", field_kind(value))


def _check_value(value: object, where: str, position: int | None) -> FilterValue:
    if kind_of_value(value) not in ("keyword", "number", "boolean"):  # a list is no filter value
        raise InvalidFilterError(
            f"{where}: a filter value is a str, int, float or bool, got {type(value).__name__}"
            + _at(position)
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidFilterError(f"{where}: a filter value must be finite, got {value!r}{_at(position)}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FILTER_NUMBER:
        raise FilterTypeError(
            f"{where}: {number_text(value)} is beyond the range of a number field (float64, at most "
            f"{MAX_FILTER_NUMBER:.4g} in magnitude){_at(position)}"
        )
    return value  # type: ignore[return-value]


def _at(position: int | None) -> str:
    return "" if position is None else f" (at character {position})"


class Filter:
    """A filter expression: combine with ``&`` (and), ``|`` (or) and ``~`` (not).

    Immutable and hashable; equal filters have equal :meth:`to_string`, and
    ``parse_filter(f.to_string()) == f``. Python's ``and``/``or``/``not`` do not
    combine filters (they would test truth), so using a filter as a truth
    value raises ``TypeError``.
    """

    __slots__ = ()

    def __and__(self, other: Filter) -> Filter:
        if not isinstance(other, Filter):
            return NotImplemented
        return And((*_flatten(self, And), *_flatten(other, And)))

    def __or__(self, other: Filter) -> Filter:
        if not isinstance(other, Filter):
            return NotImplemented
        return Or((*_flatten(self, Or), *_flatten(other, Or)))

    def __invert__(self) -> Filter:
        return Not(self)

    def __bool__(self) -> NoReturn:
        raise TypeError("a Filter has no truth value: combine filters with &, | and ~, not and/or/not")

    def to_string(self) -> str:
        """The canonical string form; :func:`parse_filter` reads it back to an equal filter."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.to_string()

    def fields(self) -> Iterator[str]:
        """The field names the filter reads (``@time`` for the document time), in order of appearance."""
        raise NotImplementedError


def _flatten(node: Filter, kind: type[And] | type[Or]) -> tuple[Filter, ...]:
    return node.parts if isinstance(node, kind) else (node,)


def _field_text(name: str) -> str:
    if name == TIME_FIELD:
        return name
    if _is_plain_name(name):
        return name
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


@functools.lru_cache(maxsize=1024)
def _is_plain_name(name: str) -> bool:
    if not name or not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
        return False
    if name.lower() in _KEYWORDS:
        return False
    return all(c.isascii() and (c.isalnum() or c in "_.-") for c in name)


_KEYWORDS = frozenset({"and", "or", "not", "in", "exists", "true", "false", "contains", "any", "all"})


def _value_text(value: FilterValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


@dataclass(frozen=True, slots=True, eq=True)
class Compare(Filter):
    """``field op value``; ``op`` one of ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``.

    Attributes:
        field: the field name, or :data:`TIME_FIELD`.
        op: the operator.
        value: what the field is compared with (for ``@time``: POSIX seconds).
        position: where the condition starts in the parsed text (``None`` if built in Python);
            not part of equality.

    """

    field: str
    op: str
    value: FilterValue
    position: int | None = _dataclass_field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        _check_field(self.field, self.position)
        if self.op not in _OPERATORS:
            raise InvalidFilterError(f"unknown operator {self.op!r}; use one of {', '.join(_OPERATORS)}")
        where = f"field {self.field!r}"
        if self.field == TIME_FIELD:
            object.__setattr__(self, "value", _time_value(self.value, self.position))
        else:
            _check_value(self.value, where, self.position)

    def to_string(self) -> str:
        """The canonical string form (see :meth:`Filter.to_string`)."""
        return f"{_field_text(self.field)} {self.op} {_value_text(self.value)}"

    def fields(self) -> Iterator[str]:
        """The field names read (see :meth:`Filter.fields`)."""
        yield self.field


@dataclass(frozen=True, slots=True, eq=True)
class IsIn(Filter):
    """``field in (v1, v2, ...)``: the field holds one of ``values`` (at least one value)."""

    field: str
    values: tuple[FilterValue, ...]
    position: int | None = _dataclass_field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        _check_field(self.field, self.position)
        values = tuple(self.values) if not isinstance(self.values, (str, bytes)) else None
        if values is None or not values:
            raise InvalidFilterError(
                f"field {self.field!r}: 'in' needs a non-empty list of values{_at(self.position)}"
            )
        if len(values) > MAX_IN_VALUES:
            raise InvalidFilterError(
                f"field {self.field!r}: 'in' takes at most {MAX_IN_VALUES} values, got {len(values)}"
            )
        if self.field == TIME_FIELD:
            values = tuple(_time_value(v, self.position) for v in values)
        else:
            values = tuple(_check_value(v, f"field {self.field!r}", self.position) for v in values)
        object.__setattr__(self, "values", values)

    def to_string(self) -> str:
        """The canonical string form (see :meth:`Filter.to_string`)."""
        return f"{_field_text(self.field)} in ({', '.join(_value_text(v) for v in self.values)})"

    def fields(self) -> Iterator[str]:
        """The field names read (see :meth:`Filter.fields`)."""
        yield self.field


@dataclass(frozen=True, slots=True, eq=True)
class Contains(Filter):
    """``field contains v``, ``field contains any (v1, ...)``, ``field contains all (v1, ...)``.

    For list fields (``keyword-list``, ``number-list``). ``mode`` is ``"any"``
    (the list holds at least one of ``values``) or ``"all"`` (every one); one
    value is always ``"any"`` (the two agree), so equal meaning is one tree.

    Attributes:
        field: the field name.
        values: the values (at least one, at most :data:`MAX_IN_VALUES`).
        mode: ``"any"`` or ``"all"``.
        position: where the condition starts in the parsed text; not part of equality.

    """

    field: str
    values: tuple[FilterValue, ...]
    mode: Literal["any", "all"] = "any"
    position: int | None = _dataclass_field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        _check_field(self.field, self.position)
        if self.field == TIME_FIELD:
            raise FilterTypeError(
                f"{TIME_FIELD} is one time, not a list: 'contains' needs a list field; use == or "
                f"in{_at(self.position)}"
            )
        if self.mode not in ("any", "all"):
            raise InvalidFilterError(f"contains takes mode 'any' or 'all', got {self.mode!r}")
        values = tuple(self.values) if not isinstance(self.values, (str, bytes)) else None
        if values is None or not values:
            raise InvalidFilterError(
                f"field {self.field!r}: 'contains' needs a non-empty list of values{_at(self.position)}"
            )
        if len(values) > MAX_IN_VALUES:
            raise InvalidFilterError(
                f"field {self.field!r}: 'contains' takes at most {MAX_IN_VALUES} values, got {len(values)}"
            )
        values = tuple(_check_value(v, f"field {self.field!r}", self.position) for v in values)
        object.__setattr__(self, "values", values)
        if len(values) == 1:
            object.__setattr__(self, "mode", "any")

    def to_string(self) -> str:
        """The canonical string form (see :meth:`Filter.to_string`)."""
        if len(self.values) == 1:
            return f"{_field_text(self.field)} contains {_value_text(self.values[0])}"
        listed = ", ".join(_value_text(v) for v in self.values)
        return f"{_field_text(self.field)} contains {self.mode} ({listed})"

    def fields(self) -> Iterator[str]:
        """The field names read (see :meth:`Filter.fields`)."""
        yield self.field


@dataclass(frozen=True, slots=True, eq=True)
class Exists(Filter):
    """``exists(field)``: the document has the field (for ``@time``: has a time)."""

    field: str
    position: int | None = _dataclass_field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        _check_field(self.field, self.position)

    def to_string(self) -> str:
        """The canonical string form (see :meth:`Filter.to_string`)."""
        return f"exists({_field_text(self.field)})"

    def fields(self) -> Iterator[str]:
        """The field names read (see :meth:`Filter.fields`)."""
        yield self.field


@dataclass(frozen=True, slots=True, eq=True)
class And(Filter):
    """Every part matches (at least two parts; ``&`` builds it)."""

    parts: tuple[Filter, ...]
    _depth: int = _dataclass_field(default=1, init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        _check_parts(self.parts, "and")
        # Nested ands flatten, so equal meaning gives an equal tree and one string form.
        object.__setattr__(self, "parts", tuple(p for part in self.parts for p in _flatten(part, And)))
        object.__setattr__(self, "_depth", _nested(self.parts, "and"))

    def to_string(self) -> str:
        """The canonical string form (see :meth:`Filter.to_string`)."""
        return " and ".join(_wrapped(part, Or) for part in self.parts)

    def fields(self) -> Iterator[str]:
        """The field names read (see :meth:`Filter.fields`)."""
        for part in self.parts:
            yield from part.fields()


@dataclass(frozen=True, slots=True, eq=True)
class Or(Filter):
    """At least one part matches (at least two parts; ``|`` builds it)."""

    parts: tuple[Filter, ...]
    _depth: int = _dataclass_field(default=1, init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        _check_parts(self.parts, "or")
        # Nested ors flatten, so equal meaning gives an equal tree and one string form.
        object.__setattr__(self, "parts", tuple(p for part in self.parts for p in _flatten(part, Or)))
        object.__setattr__(self, "_depth", _nested(self.parts, "or"))

    def to_string(self) -> str:
        """The canonical string form (see :meth:`Filter.to_string`)."""
        return " or ".join(_wrapped(part, And) for part in self.parts)

    def fields(self) -> Iterator[str]:
        """The field names read (see :meth:`Filter.fields`)."""
        for part in self.parts:
            yield from part.fields()


@dataclass(frozen=True, slots=True, eq=True)
class Not(Filter):
    """The complement of ``part`` (``~`` builds it)."""

    part: Filter
    _depth: int = _dataclass_field(default=1, init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.part, Filter):
            raise InvalidFilterError(f"'not' takes a Filter, got {type(self.part).__name__}")
        object.__setattr__(self, "_depth", _nested((self.part,), "not"))

    def to_string(self) -> str:
        """The canonical string form (see :meth:`Filter.to_string`)."""
        inner = self.part.to_string()
        if isinstance(self.part, (And, Or)):
            inner = f"({inner})"
        return f"not {inner}"

    def fields(self) -> Iterator[str]:
        """The field names read (see :meth:`Filter.fields`)."""
        yield from self.part.fields()


def _wrapped(part: Filter, needs_parentheses: type[Filter]) -> str:
    text = part.to_string()
    return f"({text})" if isinstance(part, needs_parentheses) else text


def _check_parts(parts: object, word: str) -> None:
    if not isinstance(parts, tuple) or len(parts) < 2 or not all(isinstance(p, Filter) for p in parts):
        raise InvalidFilterError(f"'{word}' takes a tuple of at least two Filters")


def _nested(parts: tuple[Filter, ...], word: str) -> int:
    """The nesting depth of an ``and``/``or``/``not`` over ``parts``; refuses one past the limit.

    Each part's depth was checked when it was built, so this is O(len(parts)) and never recurses.
    """
    depth = 1 + max(getattr(part, "_depth", 0) for part in parts)
    if depth > MAX_FILTER_DEPTH:
        raise InvalidFilterError(
            f"'{word}' nests {depth} levels deep; a filter nests and/or/not at most {MAX_FILTER_DEPTH} deep"
        )
    return depth


def _check_field(name: object, position: int | None) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidFilterError(f"a field name is a non-empty str, got {name!r}{_at(position)}")


def _time_value(value: object, position: int | None) -> float:
    if isinstance(value, bool):
        raise FilterTypeError(f"field {TIME_FIELD!r} holds times; {value!r} is a boolean{_at(position)}")
    try:
        return as_timestamp(value, f"field {TIME_FIELD!r}", FilterTypeError)  # type: ignore[arg-type]
    except FilterTypeError as exc:
        raise FilterTypeError(f"{exc}{_at(position)}") from None


class F:
    """Builds conditions on one field: ``F("year") >= 1990``, ``F("lang") == "en"``.

    ``F.time()`` is the document time (:data:`TIME_FIELD`); its values are
    :data:`~weftsearch.times.TimeLike`.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        _check_field(name, None)
        self.name = name

    @classmethod
    def time(cls) -> F:
        """The document time, :attr:`Document.time`."""
        return cls(TIME_FIELD)

    def __repr__(self) -> str:
        return f"F({self.name!r})"

    def __eq__(self, value: object) -> Compare:  # type: ignore[override]
        return Compare(self.name, "==", value)  # type: ignore[arg-type]

    def __ne__(self, value: object) -> Compare:  # type: ignore[override]
        return Compare(self.name, "!=", value)  # type: ignore[arg-type]

    def __lt__(self, value: FilterValue | TimeLike) -> Compare:
        return Compare(self.name, "<", value)  # type: ignore[arg-type]

    def __le__(self, value: FilterValue | TimeLike) -> Compare:
        return Compare(self.name, "<=", value)  # type: ignore[arg-type]

    def __gt__(self, value: FilterValue | TimeLike) -> Compare:
        return Compare(self.name, ">", value)  # type: ignore[arg-type]

    def __ge__(self, value: FilterValue | TimeLike) -> Compare:
        return Compare(self.name, ">=", value)  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]  # == builds a filter, so F is no dictionary key

    def isin(self, values: Iterable[FilterValue | TimeLike]) -> IsIn:
        """The field holds one of ``values`` (a non-empty iterable; not a str)."""
        if isinstance(values, (str, bytes)):
            raise InvalidFilterError(f"field {self.name!r}: isin takes a list of values, not a string")
        return IsIn(self.name, tuple(values))  # type: ignore[arg-type]

    def exists(self) -> Exists:
        """The document has this field."""
        return Exists(self.name)

    def contains(self, value: FilterValue) -> Contains:
        """The list field holds ``value`` (``tags contains "x"``)."""
        return Contains(self.name, (value,))

    def contains_any(self, values: Iterable[FilterValue]) -> Contains:
        """The list field holds at least one of ``values`` (a non-empty iterable; not a str)."""
        if isinstance(values, (str, bytes)):
            raise InvalidFilterError(
                f"field {self.name!r}: contains_any takes a list of values, not a string"
            )
        return Contains(self.name, tuple(values), "any")

    def contains_all(self, values: Iterable[FilterValue]) -> Contains:
        """The list field holds every one of ``values`` (a non-empty iterable; not a str)."""
        if isinstance(values, (str, bytes)):
            raise InvalidFilterError(
                f"field {self.name!r}: contains_all takes a list of values, not a string"
            )
        return Contains(self.name, tuple(values), "all")

    def between(
        self,
        low: FilterValue | TimeLike | None,
        high: FilterValue | TimeLike | None,
        *,
        closed: Literal["both", "left", "right", "neither"] = "both",
    ) -> Filter:
        """``low <= field <= high``; ``closed`` picks the ends included, ``None`` leaves an end open."""
        if closed not in ("both", "left", "right", "neither"):
            raise InvalidFilterError(f"closed must be 'both', 'left', 'right' or 'neither', got {closed!r}")
        parts: list[Filter] = []
        if low is not None:
            parts.append(Compare(self.name, ">=" if closed in ("both", "left") else ">", low))  # type: ignore[arg-type]
        if high is not None:
            parts.append(Compare(self.name, "<=" if closed in ("both", "right") else "<", high))  # type: ignore[arg-type]
        if not parts:
            raise InvalidFilterError(f"field {self.name!r}: between needs at least one end")
        return parts[0] if len(parts) == 1 else And(tuple(parts))


# --------------------------------------------------------------------------- the string form

_GRAMMAR = r"""
?start: or_
?or_: and_ (_OR and_)*
?and_: not_ (_AND not_)*
?not_: _NOT not_ -> negation
     | atom
?atom: "(" or_ ")"
     | comparison
     | membership
     | contains
     | exists
comparison: field OP value
membership: field NOTIN "(" value ("," value)* ","? ")"
          | field _IN "(" value ("," value)* ","? ")"
exists: _EXISTS "(" field ")"
contains: field _CONTAINS value
        | field _CONTAINS ANY "(" value ("," value)* ","? ")"
        | field _CONTAINS ALL "(" value ("," value)* ","? ")"
field: NAME -> plain_field
     | QUOTED_NAME -> quoted_field
     | TIME -> time_field
value: STRING -> string
     | NUMBER -> number
     | TRUE -> true
     | FALSE -> false
OP: "==" | "!=" | "<=" | ">=" | "<" | ">" | "="
NOTIN.3: /not\s+in(?![A-Za-z0-9_.\-])/i
_OR.2: /or(?![A-Za-z0-9_.\-])/i
_AND.2: /and(?![A-Za-z0-9_.\-])/i
_NOT.2: /not(?![A-Za-z0-9_.\-])/i
_IN.2: /in(?![A-Za-z0-9_.\-])/i
_EXISTS.2: /exists(?![A-Za-z0-9_.\-])/i
_CONTAINS.2: /contains(?![A-Za-z0-9_.\-])/i
ANY.2: /any(?![A-Za-z0-9_.\-])/i
ALL.2: /all(?![A-Za-z0-9_.\-])/i
TRUE.2: /true(?![A-Za-z0-9_.\-])/i
FALSE.2: /false(?![A-Za-z0-9_.\-])/i
TIME: "@time"
NAME: /[A-Za-z_][A-Za-z0-9_.\-]*/
QUOTED_NAME: /`(?:[^`\\]|\\.)+`/
STRING: /"(?:[^"\\]|\\.)*"/ | /'(?:[^'\\]|\\.)*'/
NUMBER: /[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/
%import common.WS
%ignore WS
"""


@functools.lru_cache(maxsize=1)
def _parser() -> object:
    from lark import Lark

    return Lark(_GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=False)


def _unescape(body: str) -> str:
    out = []
    escaped = False
    for char in body:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


def _position(item: object) -> int | None:
    meta = getattr(item, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return int(meta.start_pos)
    start = getattr(item, "start_pos", None)
    return None if start is None else int(start)


def _build(tree: object) -> Filter:
    from lark import Token, Tree

    def field_of(node: Tree) -> str:  # type: ignore[type-arg]
        (token,) = node.children
        assert isinstance(token, Token)
        if node.data == "quoted_field":
            return _unescape(str(token)[1:-1])
        return str(token)

    def value_of(node: Tree) -> FilterValue:  # type: ignore[type-arg]
        (token,) = node.children
        assert isinstance(token, Token)
        text = str(token)
        if node.data == "string":
            return _unescape(text[1:-1])
        if node.data == "true":
            return True
        if node.data == "false":
            return False
        return _number_value(text, token.start_pos)

    def walk(node: object, depth: int = 0) -> Filter:
        assert isinstance(node, Tree)
        position = _position(node)
        kind = node.data
        if kind in ("or_", "and_", "negation") or (kind == "membership" and len(node.children) > 1):
            # Counted as the nodes count it (Not(IsIn) for "not in" too), and refused before
            # recursing further: the walk, and every later pass, recurses once per level.
            depth += 1 if kind != "membership" or _negated(node.children[1]) else 0
            if depth > MAX_FILTER_DEPTH:
                raise FilterSyntaxError(
                    f"the filter nests and/or/not more than {MAX_FILTER_DEPTH} deep{_at(position)}"
                )
        if kind == "or_":
            return Or(tuple(walk(child, depth) for child in node.children))
        if kind == "and_":
            return And(tuple(walk(child, depth) for child in node.children))
        if kind == "negation":
            return Not(walk(node.children[0], depth))
        if kind == "comparison":
            target, op, value = node.children
            assert isinstance(target, Tree) and isinstance(value, Tree)
            operator = "==" if str(op) == "=" else str(op)
            return Compare(field_of(target), operator, value_of(value), position)
        if kind == "membership":
            target, *rest = node.children
            assert isinstance(target, Tree)
            negated = bool(rest) and _negated(rest[0])
            values = tuple(value_of(child) for child in rest if isinstance(child, Tree))
            found: Filter = IsIn(field_of(target), values, position)
            return Not(found) if negated else found
        if kind == "exists":
            (target,) = node.children
            assert isinstance(target, Tree)
            return Exists(field_of(target), position)
        if kind == "contains":
            target, *rest = node.children
            assert isinstance(target, Tree)
            every = any(getattr(item, "type", None) == "ALL" for item in rest)
            mode: Literal["any", "all"] = "all" if every else "any"
            listed = tuple(value_of(child) for child in rest if isinstance(child, Tree))
            return Contains(field_of(target), listed, mode, position)
        raise FilterSyntaxError(f"unexpected {kind}")  # pragma: no cover - the grammar has no other rule

    return walk(tree)


def _negated(item: object) -> bool:
    return getattr(item, "type", None) == "NOTIN"


def _number_value(text: str, position: int | None) -> int | float:
    """The number a NUMBER token spells, refusing what a number field cannot hold.

    An integer is kept exact (compared exactly, see :func:`segment_mask`); one beyond
    float64's range, or a decimal that overflows to infinity or underflows to zero from a
    non-zero value, is a :class:`FilterSyntaxError` (never a silent infinity or 0).
    """
    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text):,} characters)"
    if not any(c in text for c in ".eE"):
        digits = text.lstrip("+-").lstrip("0")
        # int() refuses more than 4,300 digits (ValueError); anything past float64's 309 is out
        # of range anyway, so count them first.
        if len(digits) <= 309:
            whole = int(text)
            if abs(whole) <= MAX_FILTER_NUMBER:
                return whole
        raise FilterSyntaxError(
            f"number {shown} is out of range: an integer of {len(digits):,} digits is beyond a number "
            f"field's float64 (at most {MAX_FILTER_NUMBER:.4g}){_at(position)}"
        )
    number = float(text)
    if not math.isfinite(number):
        raise FilterSyntaxError(
            f"number {shown} is out of range (beyond float64's {MAX_FILTER_NUMBER:.4g}){_at(position)}"
        )
    mantissa = text.lower().split("e")[0]
    if number == 0.0 and any(c in "123456789" for c in mantissa):
        raise FilterSyntaxError(
            f"number {shown} is too small: it underflows to 0 in float64 (the smallest is "
            f"{5e-324:.4g}){_at(position)}"
        )
    return number


#: Filter strings whose parse is kept (least recently used dropped): parsing costs about
#: 100-250 us (lark), more than a selective filtered search, and a service or a benchmark
#: sends the same few filter strings again and again. Filters are immutable, so queries
#: may share one parsed tree (and the snapshot then finds its mask by identity).
PARSED_FILTERS = 1024

#: Longer filter strings are parsed every time (the cache holds at most
#: ``PARSED_FILTERS * PARSE_CACHE_CHARS`` characters of text, and trees of that size).
PARSE_CACHE_CHARS = 1_000


def parse_filter(text: str) -> Filter:
    """Parse the string form (see the module docstring for the grammar).

    O(len(text)), or O(1) for one of the last :data:`PARSED_FILTERS` strings
    of at most :data:`PARSE_CACHE_CHARS` characters (the same immutable tree
    is returned). Raises :class:`FilterSyntaxError` naming the character
    position of a malformed expression, and the errors of the node types for
    bad values (a time that is no time, a non-finite number); errors are never cached.
    """
    if not isinstance(text, str):
        raise InvalidFilterError(f"a filter is a str or a Filter, got {type(text).__name__}")
    if len(text) > MAX_FILTER_CHARS:
        raise FilterSyntaxError(f"a filter is at most {MAX_FILTER_CHARS} characters, got {len(text)}")
    if len(text) <= PARSE_CACHE_CHARS:
        return _parse_cached(text)
    return _parse(text)


def _parse(text: str) -> Filter:
    """:func:`parse_filter` of a str of at most :data:`MAX_FILTER_CHARS` characters, uncached."""
    if not text.strip():
        raise FilterSyntaxError("the filter is empty")
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

    try:
        tree = _parser().parse(text)  # type: ignore[attr-defined]
    except UnexpectedEOF:
        raise FilterSyntaxError(f"the filter ends too early (at character {len(text)}): {text!r}") from None
    except UnexpectedCharacters as exc:
        where = int(exc.pos_in_stream or 0)
        message = f"unexpected character {text[where]!r} at character {where} in {text!r}"
        raise FilterSyntaxError(message) from None
    except UnexpectedToken as exc:
        token = exc.token
        token_at: int | None = getattr(token, "start_pos", None)
        if token.type == "$END":
            raise FilterSyntaxError(
                f"the filter ends too early (at character {len(text)}): {text!r}"
            ) from None
        raise FilterSyntaxError(f"unexpected {str(token)!r}{_at(token_at)} in {text!r}") from None
    except UnexpectedInput as exc:  # pragma: no cover - the three above are all lark raises here
        raise FilterSyntaxError(f"malformed filter {text!r}: {exc}") from None
    except RecursionError:
        raise FilterSyntaxError("the filter nests too deeply") from None
    return _build(tree)


_parse_cached = functools.lru_cache(maxsize=PARSED_FILTERS)(_parse)


def as_filter(value: Filter | str | None) -> Filter | None:
    """A :class:`Filter` from a filter, its string form, or ``None`` (no filter)."""
    if value is None or isinstance(value, Filter):
        return value
    if isinstance(value, str):
        return parse_filter(value)
    raise InvalidFilterError(f"a filter is a Filter, its string form or None, got {type(value).__name__}")


def _conditions(node: Filter) -> Iterator[Compare | IsIn | Contains | Exists]:
    if isinstance(node, (Compare, IsIn, Contains, Exists)):
        yield node
    elif isinstance(node, (And, Or)):
        for part in node.parts:
            yield from _conditions(part)
    elif isinstance(node, Not):
        yield from _conditions(node.part)


def check_filter(node: Filter, schema: Mapping[str, str]) -> None:
    """Refuse a filter that names an unknown field or mixes types; O(size of the filter).

    ``schema`` maps each field of the index to its :data:`FieldKind`
    (:data:`TIME_FIELD` is always known).

    Raises:
        UnknownFieldError: a field no document of the index has (with the
            closest known names).
        FilterTypeError: a value of another type than the field's, or a range
            (``<``, ``<=``, ``>``, ``>=``) on a keyword or boolean field.

    """
    import difflib

    for condition in _conditions(node):
        name = condition.field
        where = _at(condition.position)
        if name == TIME_FIELD:
            continue  # values were made times when the node was built
        kind = schema.get(name)
        if kind is None:
            close = difflib.get_close_matches(name, list(schema), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            known = ", ".join(sorted(schema)[:20]) or "none"
            raise UnknownFieldError(f"no document has field {name!r}{where}{hint} (fields: {known})")
        if isinstance(condition, Exists):
            continue
        if isinstance(condition, Contains) and kind not in LIST_KINDS:
            raise FilterTypeError(
                f"field {name!r} holds {kind} values, not lists: 'contains' needs a list field; use == "
                f"or in{where}"
            )
        element = LIST_KINDS.get(kind, kind)  # a condition on a list field compares its elements
        values = (condition.value,) if isinstance(condition, Compare) else condition.values
        for value in values:
            if kind_of_value(value) != element:
                raise FilterTypeError(
                    f"field {name!r} holds {kind} values; {value!r} is a {kind_of_value(value)}{where}"
                )
        if isinstance(condition, Compare) and condition.op in _RANGE_OPERATORS and element != "number":
            raise FilterTypeError(
                f"field {name!r} holds {kind} values: a range ({condition.op}) needs a number field or "
                f"{TIME_FIELD}{where}"
            )


# --------------------------------------------------------------------------- evaluation


class SegmentFields:
    """What :func:`segment_mask` reads of one segment: its field index and document times.

    A protocol in spirit: :class:`~weftsearch.storage.fields.FieldIndex` gives
    ``present``/``equal``/``between``; ``times`` is POSIX seconds per local id,
    NaN where a document has none.
    """

    __slots__ = ("index", "times")

    def __init__(self, index: FieldIndex, times: NDArray[np.float64]) -> None:
        self.index = index
        self.times = times


def _exact_range(op: str, value: int | float) -> tuple[str, float]:
    """``op value`` as an equivalent range over float64 values, exact for any integer ``value``.

    Number fields hold float64. An integer float64 cannot represent lies strictly between two
    float64s; ``nearest`` is one of them, so ``x < value`` is ``x < nearest`` when ``nearest``
    is above it and ``x <= nearest`` when below (and alike for the other operators). A float
    (or an exactly representable integer) is returned as it is.
    """
    nearest = float(value)  # finite: filter integers are at most MAX_FILTER_NUMBER
    if isinstance(value, float) or nearest == value:
        return op, nearest
    if nearest > value:
        return ("<" if op in ("<", "<=") else ">="), nearest
    return ("<=" if op in ("<", "<=") else ">"), nearest


def _canonical(value: FilterValue) -> tuple[str, object]:
    """One key per distinct value a field compares: ``1`` and ``1.0`` are one number, ``True`` is not 1."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, str):
        return ("keyword", value)
    nearest = float(value)
    return ("number", nearest if nearest == value else value)  # an inexact integer matches nothing


def segment_mask(node: Filter, fields: SegmentFields) -> NDArray[np.bool_]:
    """The documents of one segment that ``node`` matches, as a mask over its local ids.

    Vectorised: each condition costs a binary search and a slice assignment
    (O(log values + matches)); ``and``/``or``/``not`` are elementwise on
    masks (O(segment documents)); ``@time`` compares the time column.
    """
    n = fields.index.n_docs
    index = fields.index

    def equal_ids(name: str, value: FilterValue) -> NDArray[np.uint32]:
        if isinstance(value, int) and not isinstance(value, bool):
            # Exact: an integer no float64 equals (2**53 + 1) matches nothing, rather than
            # the float64 it rounds to.
            nearest = float(value)
            if nearest != value:
                return np.zeros(0, dtype=np.uint32)
            return index.equal(name, nearest)
        return index.equal(name, value)

    def ids_mask(ids: NDArray[np.uint32]) -> NDArray[np.bool_]:
        mask = np.zeros(n, dtype=np.bool_)
        mask[ids] = True
        return mask

    def time_compare(op: str, value: float) -> NDArray[np.bool_]:
        times = fields.times
        with np.errstate(invalid="ignore"):
            if op in ("==", "!="):
                found = times == value
            elif op == "<":
                found = times < value
            elif op == "<=":
                found = times <= value
            elif op == ">":
                found = times > value
            else:
                found = times >= value
        result: NDArray[np.bool_] = found
        return result  # NaN (no time) compares False everywhere

    def walk(node: Filter) -> NDArray[np.bool_]:
        if isinstance(node, And):
            mask = walk(node.parts[0])
            for part in node.parts[1:]:
                mask &= walk(part)
            return mask
        if isinstance(node, Or):
            mask = walk(node.parts[0])
            for part in node.parts[1:]:
                mask |= walk(part)
            return mask
        if isinstance(node, Not):
            return ~walk(node.part)
        if isinstance(node, Exists):
            if node.field == TIME_FIELD:
                return ~np.isnan(fields.times)
            return ids_mask(index.present(node.field))
        if isinstance(node, IsIn):
            if node.field == TIME_FIELD:
                return np.isin(fields.times, np.asarray(node.values, dtype=np.float64))
            mask = np.zeros(n, dtype=np.bool_)
            for value in node.values:
                mask[equal_ids(node.field, value)] = True
            return mask
        if isinstance(node, Contains):
            if node.mode == "any":
                mask = np.zeros(n, dtype=np.bool_)
                for value in node.values:
                    mask[equal_ids(node.field, value)] = True
                return mask
            # Every value: count, per document, the distinct values it holds (a list field's
            # document appears once under each of its values), in one bincount rather than
            # one mask per value.
            distinct = {_canonical(value): value for value in node.values}
            runs = [equal_ids(node.field, value) for value in distinct.values()]
            if any(run.shape[0] == 0 for run in runs):
                return np.zeros(n, dtype=np.bool_)
            counts = np.bincount(np.concatenate(runs).astype(np.intp), minlength=n)
            found_all: NDArray[np.bool_] = counts == len(runs)
            return found_all
        assert isinstance(node, Compare)
        if node.field == TIME_FIELD:
            found = time_compare(node.op, float(node.value))
            return ~found if node.op == "!=" else found
        if node.op in ("==", "!="):
            found = ids_mask(equal_ids(node.field, node.value))
            return ~found if node.op == "!=" else found
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            return np.zeros(n, dtype=np.bool_)  # check_filter refuses this; never a wrong match
        op, value = _exact_range(node.op, node.value)
        if op == "<":
            return ids_mask(index.between(node.field, None, True, value, False))
        if op == "<=":
            return ids_mask(index.between(node.field, None, True, value, True))
        if op == ">":
            return ids_mask(index.between(node.field, value, False, None, True))
        return ids_mask(index.between(node.field, value, True, None, True))

    return walk(node)
