"""Strings at the boundary: every string UTF-8 can encode (issue 13 item 5), one rule for keys
(issue 12 item 10: no control character, line separator or edge whitespace), and NUL never
resolving to another key (issue 13 item 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, GraphScorer, Index, Query
from weftsearch.documents import check_key, stored_document
from weftsearch.errors import InvalidDocumentError, InvalidQueryError, UnknownKeyError

#: Keys no document may have: each breaks an ids file, a TREC run, UTF-8 or a numpy lookup.
BAD_KEYS = [
    "",
    " ",
    "\t",
    "   ",
    "\u3000",  # ideographic space only
    "\u00a0",
    "a\nb",
    "a\rb",
    "a\tb",
    "a\x00",
    "\x00a",
    "a\x00b",
    "a\x0bb",
    "a\x0cb",
    "a\x1cb",
    "a\x1eb",
    "a\x7fb",
    "a\x85b",
    "a\u2028b",
    "a\u2029b",
    "a\ud800",
    "\udfff",
    " leading",
    "trailing ",
    "trailing\u00a0",
    "line\n",
]
GOOD_KEYS = ["a", "doc-1", "é", "日本", "a b", "a\u00a0b", "x" * 1000, "😀", "a/b\\c", '"quoted"']


@pytest.mark.parametrize("key", BAD_KEYS)
def test_a_bad_key_is_refused_naming_it(key: str) -> None:
    with pytest.raises(InvalidDocumentError) as caught:
        Document(key, "text")
    assert repr(key) in str(caught.value)
    str(caught.value).encode("utf-8")  # the message itself is printable


@pytest.mark.parametrize("key", BAD_KEYS)
def test_a_bad_link_or_seed_is_refused(key: str) -> None:
    with pytest.raises(InvalidDocumentError, match="links"):
        Document("a", "text", links=("b", key))
    with pytest.raises(InvalidQueryError, match="seeds"):
        Query("text", seeds=("a", key))


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_good_keys_are_kept_as_given(key: str, tmp_path: Path) -> None:
    assert check_key(key, "key") == key
    index = Index.create(tmp_path / "idx", analyzer="simple")
    index.add(Document(key, "words", links=(key,)))
    index.commit()
    assert key in index and index.get(key).key == key
    index.close()
    reopened = Index.open(tmp_path / "idx", readonly=True)
    assert reopened.keys() == [key] and reopened.snapshot().id_of(key) == 0
    reopened.close()


SURROGATE_DOCUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("key", {"key": "k\ud800"}),
    ("text", {"key": "k", "text": "lone \ud800 surrogate"}),
    ("text", {"key": "k", "text": "\udcff"}),
    ("link", {"key": "k", "links": ("\ud83d",)}),
    ("field name", {"key": "k", "fields": {"na\ud800me": 1}}),
    ("field", {"key": "k", "fields": {"name": "va\udfffl"}}),
]


@pytest.mark.parametrize(("part", "values"), SURROGATE_DOCUMENTS)
def test_a_lone_surrogate_is_refused_at_add_time(part: str, values: dict[str, Any], tmp_path: Path) -> None:
    # Before: accepted, and then every commit failed with UnicodeEncodeError until it was deleted.
    with pytest.raises(InvalidDocumentError) as caught:
        Document(**values)
    message = str(caught.value)
    message.encode("utf-8")
    assert repr(values["key"]) in message and (part == "key" or part in message)
    index = Index.create(tmp_path / "idx", analyzer="simple")
    index.add(Document("fine", "words"))
    assert index.commit() >= 1  # the index is unharmed by the refused document
    index.close()


def test_a_surrogate_pair_written_as_one_character_is_fine() -> None:
    assert Document("k", "emoji \U0001f600").text.endswith("\U0001f600")


def test_query_text_with_a_surrogate_is_a_typed_error() -> None:
    with pytest.raises(InvalidQueryError, match="surrogate"):
        Query("bad \ud800 query")
    index = Index(analyzer="simple")
    index.add(Document("a", "bad query"))
    with pytest.raises(InvalidQueryError):
        index.search("bad \ud800 query", 5, RRF(), BM25Scorer())


@pytest.mark.parametrize("time", [10**400, -(10**400), 2**1024])
def test_a_time_beyond_float_range_is_a_typed_error(time: int) -> None:
    # Before: an untyped OverflowError from float().
    with pytest.raises(InvalidDocumentError, match="out of range"):
        Document("a", "x", time=time)
    with pytest.raises(InvalidQueryError, match="out of range"):
        Query("x", time=time)


# ------------------------------------------------------------------ NUL lookups (issue 13 item 11)


def nul_index(tmp_path: Path | None) -> Index:
    index = (
        Index(analyzer="simple") if tmp_path is None else Index.create(tmp_path / "idx", analyzer="simple")
    )
    index.add_many([Document("a", "alpha", links=("b",)), Document("b", "beta", links=("a",))])
    if tmp_path is not None:
        index.commit()
    return index


@pytest.mark.parametrize("persisted", [False, True])
@pytest.mark.parametrize("key", ["b\x00", "b\x00\x00", "a\x00"])
def test_a_key_ending_in_nul_never_finds_another_document(persisted: bool, key: str, tmp_path: Path) -> None:
    index = nul_index(tmp_path if persisted else None)
    snapshot = index.snapshot()
    assert key not in snapshot
    assert key not in index
    assert snapshot.ids_of([key, "b"])[0] == -1 and snapshot.ids_of([key, "b"])[1] >= 0
    with pytest.raises(UnknownKeyError):
        snapshot.id_of(key)
    with pytest.raises(UnknownKeyError, match=r"x00"):
        index.get(key)
    with pytest.raises(UnknownKeyError):
        index.delete(key)
    with pytest.raises(UnknownKeyError):
        index.delete_many(["a", key])
    assert sorted(index.keys()) == ["a", "b"]  # nothing deleted, not even "a" from the batch


def test_links_and_seeds_ending_in_nul_are_refused() -> None:
    with pytest.raises(InvalidDocumentError):
        Document("c", "gamma", links=("b\x00",))
    with pytest.raises(InvalidQueryError):
        Query("alpha", seeds=("a\x00",))
    index = nul_index(None)
    hits = index.search(Query("", seeds=("a",)), 5, RRF(), GraphScorer())
    assert [hit.key for hit in hits] == ["b"]


def test_ids_of_accepts_any_mix(tmp_path: Path) -> None:
    snapshot = nul_index(tmp_path).snapshot()
    got = snapshot.ids_of(["a", "\x00", "b\x00", "b", "zz"])
    assert (got >= 0).tolist() == [True, False, False, True, False]
    assert np.unique(got[got >= 0]).shape == (2,)


# ------------------------------------------------------------------ indexes written before the key rule


def test_an_index_written_before_the_key_rule_stays_readable_and_deletable(tmp_path: Path) -> None:
    # stored_document is how the storage layer builds documents it reads back; here it stands in
    # for an older weft-search that accepted these keys and links.
    legacy = [
        stored_document("a\tb", "tab key", None, (), None, {}),
        stored_document(" pad", "padded key", None, ("a\tb",), None, {}),
        stored_document("c", "links to a padded key", None, (" pad", "a\tb"), None, {"f": "v"}),
    ]
    index = Index.create(tmp_path / "idx", analyzer="simple")
    index.add_many(legacy)
    index.commit()
    index.close()
    with pytest.raises(InvalidDocumentError):
        Document("a\tb", "a new document is held to the rule")
    index = Index.open(tmp_path / "idx")
    assert index.scrub().problems == ()
    assert index.get("a\tb").text == "tab key" and index.get("c").links == (" pad", "a\tb")
    assert " pad" in index and " pad" in index.snapshot()
    assert index.delete("a\tb") and "a\tb" not in index
    index.commit()
    assert sorted(index.keys()) == [" pad", "c"]
    index.close()
