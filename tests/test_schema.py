"""The schema value types: validation of every attribute, the default field, the manifest form."""

from __future__ import annotations

import math

import pytest

from weftsearch.errors import InvalidParameterError
from weftsearch.schema import DEFAULT_FIELD, MAX_TEXT_FIELDS, Schema, TextField


def test_defaults_and_round_trip() -> None:
    schema = Schema((TextField("title", weight=2.0, b=0.5), TextField("text")))
    assert schema.names == ("title", "text")
    assert schema.default_field.name == DEFAULT_FIELD
    assert [f.name for f in schema.named_fields] == ["title"]
    assert Schema.from_dict(schema.to_dict()) == schema
    assert schema.field("title").weight == 2.0


def test_the_default_field_is_added_when_missing() -> None:
    schema = Schema((TextField("title"),))
    assert schema.names == ("text", "title")
    assert Schema.default("simple", False).fields == (
        TextField("text", analyzer="simple", stored=False, positions=False),
    )


@pytest.mark.parametrize("name", ["", "1abc", "a-b", "a b", "é", "x" * 65, 3, None])
def test_bad_names_are_refused(name: object) -> None:
    with pytest.raises(InvalidParameterError, match="text field name"):
        TextField(name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"weight": 0.0}, "weight"),
        ({"weight": -1.0}, "weight"),
        ({"weight": math.inf}, "weight"),
        ({"weight": math.nan}, "weight"),
        ({"weight": True}, "weight"),
        ({"weight": "2"}, "weight"),
        ({"b": -0.1}, "b"),
        ({"b": 1.5}, "b"),
        ({"b": math.nan}, "b"),
        ({"stored": 1}, "stored"),
        ({"positions": "yes"}, "positions"),
        ({"analyzer": ""}, "analyzer"),
    ],
)
def test_bad_attributes_are_refused_naming_them(kwargs: dict[str, object], what: str) -> None:
    with pytest.raises(InvalidParameterError, match=what):
        TextField("title", **kwargs)  # type: ignore[arg-type]


def test_repeated_and_too_many_fields() -> None:
    with pytest.raises(InvalidParameterError, match="'title' more than once"):
        Schema((TextField("title"), TextField("title")))
    with pytest.raises(InvalidParameterError, match="at most"):
        Schema(tuple(TextField(f"f{i}") for i in range(MAX_TEXT_FIELDS)))
    with pytest.raises(InvalidParameterError, match="TextField"):
        Schema(("title",))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="sequence"):
        Schema("title")  # type: ignore[arg-type]


def test_unknown_field_names_the_known_ones() -> None:
    with pytest.raises(InvalidParameterError, match=r"'body'.*text, title"):
        Schema((TextField("title"),)).field("body")


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"fields": {}},
        {"fields": [], "x": 1},
        {"fields": [{"analyzer": "english"}]},
        {"fields": [{"name": "t", "z": 1}]},
    ],
)
def test_from_dict_refuses_what_to_dict_never_writes(data: object) -> None:
    with pytest.raises(InvalidParameterError):
        Schema.from_dict(data)
