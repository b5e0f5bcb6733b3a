"""Document and query validation at the boundary: field integers the field store holds, and
vectors of real numbers only (issue 26 items 9b and 9d)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.documents import MAX_FIELD_INTEGER, as_vector
from weftsearch.errors import FieldTypeError, InvalidDocumentError, InvalidVectorError

HUGE = {"2**53+1": 2**53 + 1, "-2**53-1": -(2**53) - 1, "2**63": 2**63, "1e400": 10**400, "1e5000": 10**5000}


@pytest.mark.parametrize("value", list(HUGE.values()), ids=list(HUGE))
def test_an_integer_field_beyond_the_field_store_is_refused_by_size(value: int, tmp_path: Path) -> None:
    # 10**5000 was an untyped ValueError (it cannot be printed); 10**400 an OverflowError at commit.
    with pytest.raises(InvalidDocumentError, match=r"beyond the integers a number field holds") as caught:
        Document("k", "text", fields={"n": value})
    message = str(caught.value)
    assert "'n'" in message and len(message) < 300, message
    with Index.create(tmp_path / "idx") as index:
        with pytest.raises(InvalidDocumentError):
            index.add(Document("k", "text", fields={"n": value}))
        assert index.stats().documents == 0


def test_the_largest_integers_are_kept_exactly(tmp_path: Path) -> None:
    with Index.create(tmp_path / "idx") as index:
        index.add_many(
            [
                Document("a", "w", fields={"n": MAX_FIELD_INTEGER}),
                Document("b", "w", fields={"n": -MAX_FIELD_INTEGER}),
            ],
            progress=False,
        )
        index.commit()
        assert index.get("a").fields["n"] == 2**53
        hits = index.search(Query(text="w", filter=f"n == {2**53}"), 5, RRF(), BM25Scorer())
        assert [hit.key for hit in hits] == ["a"]


NOT_REAL: dict[str, Any] = {
    "complex list": [1 + 2j, 3.0],
    "complex array": np.array([1 + 2j, 3.0]),
    "complex64 zero imaginary": np.array([1.0, 2.0], dtype=np.complex64),
    "bool list": [True, False],
    "bool array": np.array([True, False]),
    "str list": ["1.5", "2"],
    "bytes array": np.array([b"1", b"2"]),
    "object array": np.array([1.0, 2.0], dtype=object),
    "None inside": [1.0, None],
    "datetime array": np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]"),
}


@pytest.mark.parametrize("value", list(NOT_REAL.values()), ids=list(NOT_REAL))
def test_a_vector_of_anything_but_real_numbers_is_refused_naming_the_dtype(value: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's ComplexWarning was the only sign the imaginary part went
        for build in (lambda: Document("k", vector=value), lambda: Query(vector=value)):
            with pytest.raises(InvalidVectorError, match=r"real numbers .* got dtype \S+"):
                build()


def test_real_vectors_of_any_real_dtype_are_kept() -> None:
    for value in (
        [1, 2],
        [1.5, 2],
        np.array([1, 2], np.int8),
        np.array([1, 2], np.uint64),
        np.array([1, 2], np.float16),
    ):
        vector = as_vector(value, "v")
        assert vector.dtype == np.float32 and vector.tolist() == [float(v) for v in np.asarray(value)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # past float32 is refused as non-finite, without numpy's warning
        with pytest.raises(InvalidVectorError, match="non-finite"):
            as_vector([1e40, 1.0], "v")


# ---------------------------------------------------------------- list-valued fields (issue 30)


def test_a_list_field_is_kept_as_a_tuple() -> None:
    from weftsearch.documents import MAX_LIST_VALUES

    doc = Document("k", "t", fields={"tags": ["a", "b"], "n": (1, 2.5), "none": []})
    assert doc.fields == {"tags": ("a", "b"), "n": (1, 2.5), "none": ()}
    assert Document("k", fields={"n": [0] * MAX_LIST_VALUES}).fields["n"] == (0,) * MAX_LIST_VALUES


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (["a", 1], FieldTypeError, r"'tags' mixes str 'a' \(position 0\) and int 1 \(position 1\)"),
        ([1.5, "a"], FieldTypeError, r"mixes float 1.5 .* and str 'a'"),
        ([True, False], FieldTypeError, r"boolean True at position 0"),
        ([1, True], FieldTypeError, r"boolean True at position 1"),
        ([["a"]], InvalidDocumentError, r"holds a list at position 0"),
        ([None], InvalidDocumentError, r"holds a NoneType at position 0"),
        ([{"a": 1}], InvalidDocumentError, r"holds a dict"),
        ([1.0, float("nan")], InvalidDocumentError, r"'tags\[1\]' is not finite"),
        ([2**60], FieldTypeError, r"beyond the integers"),
        (["ok", "\ud800"], InvalidDocumentError, r"value 1 holds the lone surrogate"),
        (["x"] * 1001, InvalidDocumentError, r"holds 1,001 values; a list field holds at most 1,000"),
        (list(range(100_000)), InvalidDocumentError, r"holds 100,000 values"),
    ],
)
def test_a_bad_list_field_is_refused_naming_the_document_and_field(
    value: list[Any], error: type[Exception], message: str, tmp_path: Path
) -> None:
    with pytest.raises(error, match=message) as caught:
        Document("doc-1", "t", fields={"tags": value})
    assert "'doc-1'" in str(caught.value) and len(str(caught.value)) < 300


# The constructor's fast path (ASCII text, no links, no fields) must check and freeze exactly
# what the general path does: each case below goes one way or the other.
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "caf\u00e9 \ud800"}, "lone surrogate"),
        ({"text": b"bytes"}, "text must be str"),
        ({"links": ["ok", "bad\n"]}, "links"),
        ({"links": "one-string"}, "single string"),
        ({"links": 5}, "sequence of keys"),
        ({"fields": None}, "fields must be a mapping"),
        ({"fields": [("a", 1)]}, "fields must be a mapping"),
        ({"text_fields": None}, "text_fields must be a mapping"),
        ({"text_fields": {"text": "x"}}, "text field name"),
        ({"fields": {}, "text_fields": {"title": 3}}, "must be str"),
        ({"fields": {"": 1}}, "non-empty str"),
    ],
)
def test_every_shape_of_document_is_still_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidDocumentError, match=message):
        Document("k", **kwargs)


def test_documents_without_fields_read_as_empty_read_only_mappings() -> None:
    from collections.abc import Mapping
    from types import MappingProxyType

    plain = Document("k", "ascii text")
    assert isinstance(plain.fields, MappingProxyType) and dict(plain.fields) == {}
    assert isinstance(plain.text_fields, MappingProxyType) and dict(plain.text_fields) == {}
    assert plain.links == ()
    with pytest.raises(TypeError):
        plain.fields["x"] = 1  # type: ignore[index]
    assert plain == Document("k", "ascii text", fields={}, text_fields={}, links=[])  # type: ignore[arg-type]
    assert Document("k", links=[]).links == ()  # type: ignore[arg-type]
    assert Document("k", links=("a", "a")).links == ("a", "a")
    assert Document("k", "caf\u00e9").text == "caf\u00e9"
    mapped = Document("k", fields=MappingProxyType({"a": 1}), text_fields={"title": "t"})
    assert dict(mapped.fields) == {"a": 1} and dict(mapped.text_fields) == {"title": "t"}
    assert isinstance(mapped.fields, Mapping)
    mutable: dict[str, Any] = {}
    held = Document("k", fields=mutable)
    mutable["late"] = 1  # the document keeps its own copy, not the caller's dict
    assert dict(held.fields) == {}
