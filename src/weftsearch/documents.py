"""The document value callers hand to the engine, and its validators.

It is a frozen, slotted dataclasses validated at construction, so nothing
past this boundary has to re-check them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

from weftsearch._numbers import number_text
from weftsearch.errors import FieldTypeError, InvalidDocumentError, InvalidVectorError
from weftsearch.times import TimeLike, as_timestamp

__all__ = [
    "Document",
    "FieldValue",
    "MAX_FIELD_INTEGER",
    "MAX_LIST_VALUES",
    "TimeLike",
    "as_vector",
    "as_timestamp",
    "as_key_tuple",
    "check_key",
    "check_string",
    "key_problem",
    "stored_document",
]

#: A value allowed in :attr:`Document.fields`: small scalar metadata, or a list of strings
#: or of numbers (given as any list or tuple, kept as a tuple; see :class:`Document`).
FieldValue = Union[str, int, float, bool, Sequence[str], Sequence[Union[int, float]]]

#: Most values one list field of a document may hold: a list is small metadata (tags,
#: authors), and the bound keeps a stored record, its field index entries and a facet small.
MAX_LIST_VALUES = 1_000

#: Largest magnitude of an integer field value: number fields are stored as float64
#: (docs/FORMAT.md), which holds every integer up to 2**53 exactly and no larger range of them.
MAX_FIELD_INTEGER = 2**53


def as_vector(value: ArrayLike, what: str) -> NDArray[np.float32]:
    """Return ``value`` as a read-only, one-dimensional, finite float32 array.

    Every vector that enters the engine (a document's, a query's, the
    LangChain embedder's) passes here. Its values must be real numbers (a
    float or integer dtype): a complex value would lose its imaginary part,
    and booleans, strings and objects are no embedding, so each is refused
    rather than converted.

    Raises:
        InvalidVectorError: not real numbers (naming the dtype), not 1-D,
            empty, or holding NaN/inf.

    """
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InvalidVectorError(f"{what}: cannot read as float32 vector ({exc})") from None
    if raw.dtype.kind not in "fiu":
        raise InvalidVectorError(
            f"{what}: a vector holds real numbers (a float or integer dtype), got dtype {raw.dtype}"
        )
    try:
        with np.errstate(over="ignore"):  # a value past float32 becomes inf, refused just below
            array = np.array(raw, dtype=np.float32, copy=True)
    except (TypeError, ValueError) as exc:  # pragma: no cover - a real dtype always converts
        raise InvalidVectorError(f"{what}: cannot read as float32 vector ({exc})") from None
    if array.ndim != 1 or array.size == 0:
        raise InvalidVectorError(f"{what}: vector must be 1-D and non-empty, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise InvalidVectorError(f"{what}: vector has a non-finite value {array[bad]} at position {bad}")
    array.setflags(write=False)
    return array


#: Characters no key may hold: controls (Unicode category Cc: NUL, tab, newline, carriage
#: return, DEL, the C1 block), the line and paragraph separators (Zl, Zp) and surrogates (Cs,
#: which UTF-8 cannot encode). Each breaks a file a key is written to (one id a line, TREC
#: runs) or, for NUL, a lookup (numpy's ``str_`` drops trailing NULs, so ``"b\x00"`` would
#: find ``"b"``).
_KEY_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: A named text field's name (the rule of :class:`weftsearch.schema.TextField`).
_TEXT_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
#: Lone surrogates: the only ``str`` values UTF-8 cannot encode.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def key_problem(key: object) -> str | None:
    """Why ``key`` cannot be a document key, or ``None`` when it can (see :func:`check_key`). O(len)."""
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    bad = _KEY_FORBIDDEN.search(key)
    if bad is not None:
        return f"must not contain {bad.group()!r} (no control characters, line separators or surrogates)"
    if key[0].isspace() or key[-1].isspace():
        return "must not begin or end with whitespace"
    return None


def check_key(key: object, what: str, error: type[ValueError] = InvalidDocumentError) -> str:
    """Return ``key`` if it may be a document key, else raise ``error`` naming ``what`` and the key.

    The rule (every document key, link target and seed follows it): a
    non-empty ``str`` that holds no control character (NUL, tab, newline,
    carriage return, ...: Unicode category Cc), no line or paragraph
    separator (U+2028, U+2029), no lone surrogate, and neither begins nor
    ends with whitespace (so a key of only whitespace is refused). Why: a
    key is written one a line to ids files and read back by stripping the
    line, and NUL is lost by numpy's string arrays, so such a key would come
    back as another key. Spaces inside a key are allowed; the writers of
    whitespace-separated formats (TREC runs) refuse such keys with a typed
    error instead. O(len(key)).
    """
    problem = key_problem(key)
    if problem is not None:
        raise error(f"{what} {problem}, got {key!r}")
    return key  # type: ignore[return-value]  # key_problem checked it is a str


def check_string(value: str, what: str, error: type[ValueError] = InvalidDocumentError) -> str:
    r"""Return ``value`` if UTF-8 can encode it (no lone surrogate), else raise ``error``.

    Every string of a document is stored as UTF-8 and every query text is
    analysed into terms that are, so a surrogate (``"\ud800"``) would fail
    every later commit or search; it is refused where it enters. O(len) (a
    fast ASCII check first).
    """
    if not value.isascii():
        bad = _SURROGATE.search(value)
        if bad is not None:
            raise error(
                f"{what} holds the lone surrogate {bad.group()!r} at position {bad.start()}, "
                "which UTF-8 cannot encode"
            )
    return value


def as_key_tuple(values: Iterable[str] | str, what: str, error: type[ValueError]) -> tuple[str, ...]:
    """Return ``values`` as a tuple of keys that follow :func:`check_key`'s rule, or raise ``error``."""
    if isinstance(values, str):
        raise error(f"{what} must be a sequence of keys, not a single string {values!r}")
    try:
        keys = tuple(values)
    except TypeError:
        raise error(f"{what} must be a sequence of keys, got {values!r}") from None
    stored = _READING_STORED.get()
    for key in keys:
        if stored:  # written under an older rule: only what every version required
            if not isinstance(key, str) or not key:
                raise error(f"{what} must hold non-empty strings, got {key!r}")
        else:
            check_key(key, f"{what}: each key", error)
    return keys


#: True while :func:`stored_document` builds a document read back from an index.
_READING_STORED: ContextVar[bool] = ContextVar("weftsearch_reading_stored", default=False)


def stored_document(
    key: str,
    text: str,
    vector: NDArray[np.float32] | None,
    links: tuple[str, ...],
    time: TimeLike | None,
    fields: Mapping[str, FieldValue],
    text_fields: Mapping[str, str] | None = None,
) -> Document:
    """A :class:`Document` read back from an index (the storage layer's constructor).

    Every check of :class:`Document` applies except the key rule
    (:func:`check_key`) on ``key`` and ``links``: an index written before the
    rule may hold keys it now refuses (a tab, edge whitespace), and such a
    document must still be readable, and deletable, rather than reported
    damaged. Keys of new documents always follow the rule. Thread- and
    task-safe (a context variable).

    Raises:
        InvalidDocumentError: the stored values are not a document (the caller
            reports the record as damaged).

    """
    token = _READING_STORED.set(True)
    try:
        return Document(
            key=key,
            text=text,
            vector=vector,
            links=links,
            time=time,
            fields=fields,
            text_fields=text_fields or {},
        )
    finally:
        _READING_STORED.reset(token)


def _check_number(key: str, name: str, value: object) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidDocumentError(f"document {key!r}: field {name!r} is not finite")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FIELD_INTEGER:
        raise FieldTypeError(
            f"document {key!r}: field {name!r} holds {number_text(value)}, beyond the "
            f"integers a number field holds exactly (-2**53 to 2**53, as float64)"
        )


def _list_value(key: str, name: str, value: list[object] | tuple[object, ...]) -> FieldValue:
    """A list field's value checked and made a tuple (see :attr:`Document.fields`). O(len)."""
    where = f"document {key!r}: list field {name!r}"
    if len(value) > MAX_LIST_VALUES:
        raise InvalidDocumentError(
            f"{where} holds {len(value):,} values; a list field holds at most {MAX_LIST_VALUES:,}"
        )
    first: object = None
    for position, item in enumerate(value):
        if isinstance(item, bool):
            raise FieldTypeError(
                f"{where} holds the boolean {item!r} at position {position}; a list holds strings or "
                "numbers (a yes/no is a bool field)"
            )
        if isinstance(item, str):
            check_string(item, f"{where}: value {position}")
        elif isinstance(item, (int, float)):
            _check_number(key, f"{name}[{position}]", item)
        else:
            raise InvalidDocumentError(
                f"{where} holds a {type(item).__name__} at position {position}; a list holds str, "
                "int or float values"
            )
        if position == 0:
            first = item
        elif isinstance(item, str) != isinstance(first, str):
            raise FieldTypeError(
                f"{where} mixes {type(first).__name__} {first!r} (position 0) and "
                f"{type(item).__name__} {item!r} (position {position}): a list holds strings or numbers"
            )
    return tuple(value)  # type: ignore[return-value]  # checked homogeneous just above


#: The ``fields`` and ``text_fields`` of a document without any: read-only views of empty
#: dicts nothing else holds, so every such document can share them.
_NO_VALUES: Mapping[str, FieldValue] = MappingProxyType({})
_NO_TEXTS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Document:
    """One document to index.

    Every string is checked at construction: UTF-8 must be able to encode it
    (a lone surrogate is refused), and ``key`` and each link follow the key
    rule of :func:`check_key`. :class:`~weftsearch.errors.InvalidDocumentError`
    names the document (its key, escaped) and the part at fault.

    Attributes:
        key: the caller's unique identifier. Results are returned by key. A
            non-empty string without control characters (NUL, tab, newline,
            carriage return, ...), line or paragraph separators or lone
            surrogates, and without whitespace at either end; inner spaces
            are allowed (but cannot be written to a TREC run).
        text: the text the analyzer indexes (put a title in here too if it
            should be searchable; ``fields`` is for display and filtering).
        vector: an embedding, stored as float32; every vector in one index
            has the same width. ``None`` means the document has no vector and
            is absent from vector streams.
        links: keys of documents this one links to (citations, hyperlinks).
            A link to a key not in the index is ignored until such a document
            arrives; duplicates count once.
        time: when the document was published, for recency: a ``datetime``
            (naive means UTC), a ``date`` (midnight UTC), an ISO-8601 string
            (``"2009-06-01"``; no offset means UTC) or POSIX seconds (a bare
            number is seconds since 1970-01-01 UTC, never a year). Stored as
            POSIX seconds (float) at construction, so ``time`` reads back as
            a float. ``None`` means the document is absent from recency streams.
        fields: small metadata (title, author, year, tags, ...), kept and
            returned with hits, never scored. Values are ``str``, ``bool``,
            finite ``float`` or ``int`` from ``-2**53`` to ``2**53``
            (:data:`MAX_FIELD_INTEGER`: number fields are float64), or a list
            (or tuple) of at most :data:`MAX_LIST_VALUES` such strings, or of
            such numbers (ints and floats may mix; strings and numbers may not;
            booleans are refused in a list: a yes/no is a ``bool`` field).
            A list is kept as a tuple; an empty one holds no value (filters
            and facets see the document as without the field). A field is a
            list field or a scalar one for the whole index.
        text_fields: named text fields besides ``text`` (``{"title": "..."}``),
            each analysed into its own postings as the index's schema says
            (:class:`~weftsearch.schema.Schema`); a name the schema lacks is
            refused when the document is added. Names follow the schema's rule
            (``[A-Za-z_][A-Za-z0-9_]*``, not ``"text"``), values are ``str``.

    """

    key: str
    text: str = ""
    vector: NDArray[np.float32] | None = None
    links: tuple[str, ...] = ()
    time: TimeLike | None = None
    fields: Mapping[str, FieldValue] = field(default_factory=dict)
    text_fields: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _READING_STORED.get():
            check_key(self.key, "document key")
        elif not isinstance(self.key, str) or not self.key:  # stored before the key rule: see stored_document
            raise InvalidDocumentError(f"document key must be a non-empty string, got {self.key!r}")
        if not isinstance(self.text, str):
            raise InvalidDocumentError(
                f"document {self.key!r}: text must be str, got {type(self.text).__name__}"
            )
        # The common shapes (ASCII text, no links, no fields) skip building the messages and
        # containers that only an error or a non-empty value needs: a bulk load makes
        # millions of documents (about 1 of 3.5 us a document, measured).
        if not self.text.isascii():
            check_string(self.text, f"document {self.key!r}: text")
        if self.vector is not None:
            try:
                vector = as_vector(self.vector, f"document {self.key!r}")
            except InvalidVectorError:
                raise
            object.__setattr__(self, "vector", vector)
        if self.links.__class__ is not tuple or self.links:
            object.__setattr__(
                self, "links", as_key_tuple(self.links, f"document {self.key!r}: links", InvalidDocumentError)
            )
        if self.time is not None:
            object.__setattr__(self, "time", as_timestamp(self.time, f"document {self.key!r}"))
        if self.fields.__class__ is dict and not self.fields and self.text_fields.__class__ is dict:
            object.__setattr__(self, "fields", _NO_VALUES)
            if not self.text_fields:
                object.__setattr__(self, "text_fields", _NO_TEXTS)
                return
        self._check_fields()

    def _check_fields(self) -> None:
        """``fields`` and ``text_fields`` checked and frozen (read-only views of sorted copies)."""
        if not isinstance(self.fields, Mapping):
            raise InvalidDocumentError(f"document {self.key!r}: fields must be a mapping")
        fields: dict[str, FieldValue] = {}
        for name, value in self.fields.items():
            if not isinstance(name, str) or not name:
                raise InvalidDocumentError(f"document {self.key!r}: field names must be non-empty str")
            check_string(name, f"document {self.key!r}: field name {name!r}")
            if isinstance(value, (list, tuple)):
                fields[name] = _list_value(self.key, name, value)
                continue
            if isinstance(value, str):
                check_string(value, f"document {self.key!r}: field {name!r}")
            if not isinstance(value, (str, int, float, bool)):
                raise InvalidDocumentError(
                    f"document {self.key!r}: field {name!r} must be str/int/float/bool or a list, "
                    f"got {type(value).__name__}"
                )
            _check_number(self.key, name, value)
            fields[name] = value
        object.__setattr__(self, "fields", MappingProxyType(fields))
        if not isinstance(self.text_fields, Mapping):
            raise InvalidDocumentError(f"document {self.key!r}: text_fields must be a mapping")
        texts: dict[str, str] = {}
        for name, value in self.text_fields.items():
            if not isinstance(name, str) or not _TEXT_FIELD_NAME.fullmatch(name) or name == "text":
                raise InvalidDocumentError(
                    f"document {self.key!r}: a text field name matches [A-Za-z_][A-Za-z0-9_]* "
                    f"(at most 64 characters) and is not 'text' (that is Document.text), got {name!r}"
                )
            if not isinstance(value, str):
                raise InvalidDocumentError(
                    f"document {self.key!r}: text field {name!r} must be str, got {type(value).__name__}"
                )
            texts[name] = check_string(value, f"document {self.key!r}: text field {name!r}")
        object.__setattr__(self, "text_fields", MappingProxyType(dict(sorted(texts.items()))))

    @property
    def timestamp(self) -> float | None:
        """``time`` as POSIX seconds, or ``None``."""
        return None if self.time is None else as_timestamp(self.time, f"document {self.key!r}")
