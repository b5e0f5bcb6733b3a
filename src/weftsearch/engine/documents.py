"""The document value callers hand to the engine, and its validators.

It is a frozen, slotted dataclasses validated at construction, so nothing
past this boundary has to re-check them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

from weftsearch.engine.times import TimeLike, as_timestamp
from weftsearch.errors import InvalidDocumentError, InvalidVectorError

__all__ = ["Document", "FieldValue", "TimeLike", "as_vector", "as_timestamp", "as_key_tuple"]

#: A value allowed in :attr:`Document.fields`: small scalar metadata.
FieldValue = Union[str, int, float, bool]


def as_vector(value: ArrayLike, what: str) -> NDArray[np.float32]:
    """Return ``value`` as a read-only, one-dimensional, finite float32 array.

    Raises:
        InvalidVectorError: not numeric, not 1-D, empty, or holding NaN/inf.

    """
    try:
        array = np.array(value, dtype=np.float32, copy=True)
    except (TypeError, ValueError) as exc:
        raise InvalidVectorError(f"{what}: cannot read as float32 vector ({exc})") from None
    if array.ndim != 1 or array.size == 0:
        raise InvalidVectorError(f"{what}: vector must be 1-D and non-empty, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise InvalidVectorError(f"{what}: vector has a non-finite value {array[bad]} at position {bad}")
    array.setflags(write=False)
    return array


def as_key_tuple(values: Iterable[str] | str, what: str, error: type[ValueError]) -> tuple[str, ...]:
    """Return ``values`` as a tuple of non-empty strings, or raise ``error``."""
    if isinstance(values, str):
        raise error(f"{what} must be a sequence of keys, not a single string {values!r}")
    try:
        keys = tuple(values)
    except TypeError:
        raise error(f"{what} must be a sequence of keys, got {values!r}") from None
    for key in keys:
        if not isinstance(key, str) or not key:
            raise error(f"{what} must hold non-empty strings, got {key!r}")
    return keys


@dataclass(frozen=True, slots=True)
class Document:
    """One document to index.

    Attributes:
        key: the caller's unique, non-empty identifier. Results are returned by key.
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
        fields: small scalar metadata (title, author, year, ...), kept and
            returned with hits, never scored.

    """

    key: str
    text: str = ""
    vector: NDArray[np.float32] | None = None
    links: tuple[str, ...] = ()
    time: TimeLike | None = None
    fields: Mapping[str, FieldValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise InvalidDocumentError(f"document key must be a non-empty string, got {self.key!r}")
        if "\x00" in self.key:
            raise InvalidDocumentError(f"document key must not contain NUL: {self.key!r}")
        if not isinstance(self.text, str):
            raise InvalidDocumentError(
                f"document {self.key!r}: text must be str, got {type(self.text).__name__}"
            )
        if self.vector is not None:
            try:
                vector = as_vector(self.vector, f"document {self.key!r}")
            except InvalidVectorError:
                raise
            object.__setattr__(self, "vector", vector)
        object.__setattr__(
            self, "links", as_key_tuple(self.links, f"document {self.key!r}: links", InvalidDocumentError)
        )
        if self.time is not None:
            object.__setattr__(self, "time", as_timestamp(self.time, f"document {self.key!r}"))
        if not isinstance(self.fields, Mapping):
            raise InvalidDocumentError(f"document {self.key!r}: fields must be a mapping")
        fields: dict[str, FieldValue] = {}
        for name, value in self.fields.items():
            if not isinstance(name, str) or not name:
                raise InvalidDocumentError(f"document {self.key!r}: field names must be non-empty str")
            if not isinstance(value, (str, int, float, bool)):
                raise InvalidDocumentError(
                    f"document {self.key!r}: field {name!r} must be str/int/float/bool, "
                    f"got {type(value).__name__}"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidDocumentError(f"document {self.key!r}: field {name!r} is not finite")
            fields[name] = value
        object.__setattr__(self, "fields", MappingProxyType(fields))

    @property
    def timestamp(self) -> float | None:
        """``time`` as POSIX seconds, or ``None``."""
        return None if self.time is None else as_timestamp(self.time, f"document {self.key!r}")
