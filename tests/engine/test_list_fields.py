"""List-valued fields (issue 30, item 2): stored, typed for the whole index, merged, scrubbed,
and filtered with ``contains`` / ``contains any`` / ``contains all`` with exactly k results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.engine.filters import F, check_filter, parse_filter
from weftsearch.errors import FieldTypeError, FilterTypeError, InvalidFilterError
from weftsearch.storage.fields import FieldIndex


def _keys(index: Index, filter_text: str, k: int = 100) -> list[str]:
    results = index.search(Query("w", filter=filter_text), k, RRF(), BM25Scorer())
    return sorted(hit.key for hit in results)


def _corpus(n: int, seed: int) -> list[Document]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        tags = [f"t{int(t)}" for t in rng.integers(0, 6, int(rng.integers(0, 4)))]
        years = [int(y) for y in rng.integers(1990, 2000, int(rng.integers(0, 3)))]
        docs.append(Document(f"d{i:04d}", "w " * (1 + i % 3), fields={"tags": tags, "years": years}))
    return docs


def _plain(docs: list[Document], test: Any) -> list[str]:
    return sorted(d.key for d in docs if test(d.fields))


@pytest.mark.parametrize("persist", [False, True])
def test_list_fields_filter_exactly_through_commits_merges_and_reopen(tmp_path: Path, persist: bool) -> None:
    docs = _corpus(300, 3)
    index = Index.create(tmp_path / "idx") if persist else Index("english")
    for start in range(0, 300, 100):  # three segments, then one merged segment
        index.add_many(docs[start : start + 100], progress=False)
        if persist:
            index.commit()
    index.delete("d0001")
    if persist:
        index.commit()
    live = [d for d in docs if d.key != "d0001"]
    cases = {
        'tags contains "t1"': lambda f: "t1" in f["tags"],
        'tags contains any ("t1", "t2")': lambda f: {"t1", "t2"} & set(f["tags"]),
        'tags contains all ("t1", "t2")': lambda f: {"t1", "t2"} <= set(f["tags"]),
        'tags == "t3"': lambda f: "t3" in f["tags"],
        'tags != "t3"': lambda f: "t3" not in f["tags"],
        'tags in ("t0", "t5")': lambda f: {"t0", "t5"} & set(f["tags"]),
        "not exists(tags)": lambda f: not f["tags"],
        "years > 1997": lambda f: any(y > 1997 for y in f["years"]),
        "years contains all (1990, 1991.0)": lambda f: {1990, 1991} <= set(f["years"]),
        "years contains 1995 and tags contains any ('t0', 't4')": lambda f: (
            1995 in f["years"] and {"t0", "t4"} & set(f["tags"])
        ),
    }
    for _ in range(2):
        for text, test in cases.items():
            assert _keys(index, text, 400) == _plain(live, test), text
        if persist:
            assert index.segment_count > 1 or _ == 1
            index.merge(force=True)
            index.wait_for_merges()
    if persist:
        index.close()
        index = Index.open(tmp_path / "idx")
        assert index.scrub().ok
        for text, test in cases.items():
            assert _keys(index, text, 400) == _plain(live, test), text
    assert index.field_kinds() == {"tags": "keyword-list", "years": "number-list"}
    assert index.get("d0002").fields == docs[2].fields
    assert all(isinstance(v, tuple) for v in index.get("d0002").fields.values())


def test_a_filter_on_a_list_field_returns_exactly_k(tmp_path: Path) -> None:
    docs = [
        Document(f"d{i:04d}", "w", fields={"tags": ["common", "rare"] if i % 50 == 0 else ["common"]})
        for i in range(2000)
    ]
    with Index.create(tmp_path / "idx") as index:
        index.add_many(docs, progress=False)
        index.commit()
        for text in ('tags contains "rare"', 'tags contains all ("rare", "common")'):
            results = index.search(Query("w", filter=text), 30, RRF(), BM25Scorer())
            assert len(results) == 30
            for hit in results:
                tags = hit.fields["tags"]
                assert isinstance(tags, tuple) and "rare" in tags
        results = index.search(Query("w", filter=F("tags").contains("rare")), 100, RRF(), BM25Scorer())
        assert len(results) == 40


def test_a_field_is_a_list_or_a_scalar_for_the_whole_index(tmp_path: Path) -> None:
    with Index.create(tmp_path / "idx") as index:
        index.add(Document("a", "w", fields={"tags": ["x"], "year": 1990}))
        with pytest.raises(FieldTypeError, match=r"'tags' holds keyword-list values.*'x'.*a keyword"):
            index.add(Document("b", "w", fields={"tags": "x"}))
        with pytest.raises(FieldTypeError, match=r"'tags' holds keyword-list values.*number-list"):
            index.add(Document("b", "w", fields={"tags": [1, 2]}))
        with pytest.raises(FieldTypeError, match=r"'year' holds number values.*number-list"):
            index.add(Document("b", "w", fields={"year": [1990]}))
        with pytest.raises(FieldTypeError, match=r"'year' holds number values.*empty list"):
            index.add(Document("b", "w", fields={"year": []}))
        with pytest.raises(FieldTypeError, match="'tags'"):  # in one batch, refused whole
            index.add_many(
                [Document("c", "w", fields={"tags": ["y"]}), Document("d", "w", fields={"tags": "y"})]
            )
        index.add(Document("e", "w", fields={"tags": []}))  # no value: fits a list field
        index.commit()
        assert index.keys() == ["a", "e"]
    # The kinds are recorded in the manifest.
    with Index.open(tmp_path / "idx") as index, pytest.raises(FieldTypeError, match="keyword-list"):
        index.add(Document("f", "w", fields={"tags": "x"}))


def test_contains_is_for_list_fields_and_values_of_their_element_kind() -> None:
    schema = {"tags": "keyword-list", "years": "number-list", "title": "keyword"}
    check_filter(parse_filter("years >= 1990 and tags in ('a')"), schema)
    with pytest.raises(FilterTypeError, match=r"'title' holds keyword values, not lists.*use == or in"):
        check_filter(parse_filter("title contains 'a'"), schema)
    with pytest.raises(FilterTypeError, match="'tags' holds keyword-list values; 1 is a number"):
        check_filter(parse_filter("tags contains any ('a', 1)"), schema)
    with pytest.raises(FilterTypeError, match="range"):
        check_filter(parse_filter("tags > 'a'"), schema)
    with pytest.raises(FilterTypeError, match="@time is one time, not a list"):
        parse_filter("@time contains 5")
    with pytest.raises(InvalidFilterError, match="non-empty"):
        F("tags").contains_all([])
    with pytest.raises(InvalidFilterError, match="not a string"):
        F("tags").contains_any("ab")
    with pytest.raises(InvalidFilterError, match="str, int, float or bool"):
        F("tags").contains(["a"])  # type: ignore[arg-type]


def test_the_builder_and_the_string_form_agree_on_contains() -> None:
    assert parse_filter("tags contains 'x'") == F("tags").contains("x")
    assert parse_filter("tags CONTAINS ANY ('x', 'y',)") == F("tags").contains_any(["x", "y"])
    assert parse_filter("tags contains all ('x', 'y')") == F("tags").contains_all(["x", "y"])
    assert F("tags").contains_all(["x"]) == F("tags").contains("x")  # one value: any and all agree
    assert F("tags").contains_all(["x", "y"]) != F("tags").contains_any(["x", "y"])
    assert str(F("tags").contains_any(["x", "y"])) == 'tags contains any ("x", "y")'
    # Fields named like the new words still parse (backquoted in the canonical form).
    for name in ("contains", "any", "all"):
        node = parse_filter(f"{name} == 1")
        assert parse_filter(node.to_string()) == node and node.to_string().startswith("`")


def test_list_field_index_entries_are_distinct_per_document() -> None:
    index = FieldIndex.build([{"tags": ("a", "a", "b"), "n": (1, 1.0, 2)}, {"tags": (), "n": (2,)}])
    sections = index.sections()
    assert sections["fld.kw_ids"].tolist() == [0, 0]  # "a" then "b": document 0 once under each
    assert sections["fld.num_values"].tolist() == [1.0, 2.0, 2.0]
    assert sections["fld.num_ids"].tolist() == [0, 0, 1]
    read = FieldIndex.from_sections(lambda name: sections[name], 2, "test")
    assert read.kinds() == {"tags": "keyword-list", "n": "number-list"}
    assert not read.disagreements(index)
