"""An index's text fields: which named texts a document has and how each is analysed and kept.

A :class:`Schema` is fixed when the index is created (``Index.create(...,
schema=...)``) and recorded in its manifest. Every schema has the *default*
field, named ``"text"``: it is :attr:`Document.text <weftsearch.documents.Document.text>`,
so an index created without a schema is an index of that one field and every
earlier example and number holds. Other fields (``title``, ``body``, ``tags``)
are given per document in :attr:`Document.text_fields
<weftsearch.documents.Document.text_fields>`; each has its own analyzer
(a registered name), its own postings and lengths in every segment, and a
declared weight and ``b``. Scoring does not read those two: a scorer says its
own (:class:`~weftsearch.scorers.BM25Scorer`'s ``fields=`` and ``field_b=``,
else its ``b`` and weight 1), as Lucene's ``combined_fields`` takes its weights
per query, so they change without reindexing; the schema records what the
index's author meant, for tools and profiles to read.

A value type only: it imports nothing of storage or the engine.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weftsearch.errors import InvalidParameterError

__all__ = ["DEFAULT_FIELD", "MAX_TEXT_FIELDS", "Schema", "TextField"]

#: The name of the default field, :attr:`Document.text`.
DEFAULT_FIELD = "text"

#: Most text fields a schema holds (the default one included). A segment names a
#: field's sections by its number in the schema (``tf.N.``, docs/FORMAT.md), and a
#: section name has 24 bytes: ``tf.63.post.block_offsets`` is the longest.
MAX_TEXT_FIELDS = 64

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True, slots=True)
class TextField:
    """One named text field of a :class:`Schema`.

    Attributes:
        name: ``[A-Za-z_][A-Za-z0-9_]*``, at most 64 characters; ``"text"`` is
            the default field (:attr:`Document.text`).
        analyzer: the registered name of the analyzer that makes its terms.
        stored: whether the field's text is kept (and given back by
            ``Index.get`` and hits); its terms are indexed either way.
        positions: whether each term's positions (its index in the analyzer's
            output) are kept, for phrase queries and highlighting.
        weight: its declared BM25F weight (finite, above 0; recorded, not read by scorers).
        b: its declared BM25F length normalisation (0 to 1; recorded, not read by scorers).

    Raises:
        InvalidParameterError: any attribute out of its range (named, with the value).

    """

    name: str
    analyzer: str = "english"
    stored: bool = True
    positions: bool = True
    weight: float = 1.0
    b: float = 0.75

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise InvalidParameterError(
                f"a text field name matches [A-Za-z_][A-Za-z0-9_]* (64 characters at most), got {self.name!r}"
            )
        if not isinstance(self.analyzer, str) or not self.analyzer:
            raise InvalidParameterError(
                f"text field {self.name!r}: analyzer must name a registered analyzer, got {self.analyzer!r}"
            )
        for flag in ("stored", "positions"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidParameterError(
                    f"text field {self.name!r}: {flag} must be True or False, got {getattr(self, flag)!r}"
                )
        weight = _number(self.weight, f"text field {self.name!r}: weight")
        if not (math.isfinite(weight) and weight > 0):
            raise InvalidParameterError(
                f"text field {self.name!r}: weight must be finite and above 0, got {self.weight!r}"
            )
        b = _number(self.b, f"text field {self.name!r}: b")
        if not 0.0 <= b <= 1.0:
            raise InvalidParameterError(f"text field {self.name!r}: b must be in [0, 1], got {self.b!r}")
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "b", b)

    def to_dict(self) -> dict[str, Any]:
        """The field as the manifest records it (JSON-ready)."""
        return {
            "name": self.name,
            "analyzer": self.analyzer,
            "stored": self.stored,
            "positions": self.positions,
            "weight": self.weight,
            "b": self.b,
        }


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidParameterError(f"{what} must be a number, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Schema:
    """The text fields of an index, in order; the default field ``"text"`` is always one of them.

    ``Schema((TextField("title"), TextField("text")))``. A schema without a
    field named ``"text"`` gets one (with the defaults, first); names are
    unique. The order is the order of the fields' sections in a segment.

    Raises:
        InvalidParameterError: not a sequence of :class:`TextField`, a name
            repeated, or more than :data:`MAX_TEXT_FIELDS` fields.

    """

    fields: tuple[TextField, ...]

    def __post_init__(self) -> None:
        if isinstance(self.fields, (str, bytes, Mapping)):
            raise InvalidParameterError(f"Schema takes a sequence of TextField, got {self.fields!r}")
        try:
            fields = tuple(self.fields)
        except TypeError:
            raise InvalidParameterError(
                f"Schema takes a sequence of TextField, got {self.fields!r}"
            ) from None
        for field in fields:
            if not isinstance(field, TextField):
                raise InvalidParameterError(f"Schema takes TextField values, got {field!r}")
        names = [field.name for field in fields]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise InvalidParameterError(f"Schema names the text field {repeated[0]!r} more than once")
        if DEFAULT_FIELD not in names:
            fields = (TextField(DEFAULT_FIELD), *fields)
        if len(fields) > MAX_TEXT_FIELDS:
            raise InvalidParameterError(f"Schema holds {len(fields)} text fields; at most {MAX_TEXT_FIELDS}")
        object.__setattr__(self, "fields", fields)

    @classmethod
    def default(cls, analyzer: str = "english", store_text: bool = True) -> Schema:
        """The schema of an index created without one: the default field only."""
        return cls((TextField(DEFAULT_FIELD, analyzer=analyzer, stored=store_text, positions=False),))

    @property
    def names(self) -> tuple[str, ...]:
        """The fields' names, in order."""
        return tuple(field.name for field in self.fields)

    @property
    def default_field(self) -> TextField:
        """The field named ``"text"`` (:attr:`Document.text`)."""
        return self.field(DEFAULT_FIELD)

    @property
    def named_fields(self) -> tuple[TextField, ...]:
        """Every field but the default one, in order (each has ``tf.N.`` sections in a segment)."""
        return tuple(field for field in self.fields if field.name != DEFAULT_FIELD)

    def field(self, name: str) -> TextField:
        """The field called ``name``.

        Raises:
            InvalidParameterError: no such field (the known ones are named).

        """
        for field in self.fields:
            if field.name == name:
                return field
        raise InvalidParameterError(f"unknown text field {name!r}; the schema has {', '.join(self.names)}")

    def to_dict(self) -> dict[str, Any]:
        """The schema as the manifest records it (``extra.schema``)."""
        return {"fields": [field.to_dict() for field in self.fields]}

    @classmethod
    def from_dict(cls, data: object) -> Schema:
        """The schema :meth:`to_dict` wrote (also the CLI's ``--schema`` file).

        Raises:
            InvalidParameterError: not such an object (the offending part named).

        """
        if not isinstance(data, Mapping) or set(data) != {"fields"} or not isinstance(data["fields"], list):
            raise InvalidParameterError(f'a schema is {{"fields": [...]}}, got {data!r}')
        fields = []
        allowed = {"name", "analyzer", "stored", "positions", "weight", "b"}
        for entry in data["fields"]:
            if not isinstance(entry, Mapping) or "name" not in entry or not set(entry) <= allowed:
                raise InvalidParameterError(
                    f"a schema field is an object: a name, any of {sorted(allowed - {'name'})}; got {entry!r}"
                )
            fields.append(TextField(**dict(entry)))
        return cls(tuple(fields))
