"""Filter expressions: the builder and the string form agree, errors name what is wrong, and the
vectorised segment evaluation equals a plain per-document reading of the rules."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weftsearch.engine.filters import (
    TIME_FIELD,
    And,
    Compare,
    Contains,
    Exists,
    F,
    Filter,
    IsIn,
    Not,
    Or,
    SegmentFields,
    check_filter,
    parse_filter,
    segment_mask,
)
from weftsearch.errors import (
    CorruptIndexError,
    FieldTypeError,
    FilterSyntaxError,
    FilterTypeError,
    InvalidFilterError,
    InvalidQueryError,
    UnknownFieldError,
)
from weftsearch.storage.fields import FIELD_SECTIONS, FieldIndex

# ---------------------------------------------------------------- the two forms


def test_builder_and_string_form_give_the_same_filter() -> None:
    built = (F("year") >= 1990) & F("source").isin(["pubmed", "arxiv"]) & ~F("retracted").exists()
    parsed = parse_filter('year >= 1990 and source in ("pubmed", "arxiv") and not exists(retracted)')
    assert built == parsed
    assert parse_filter(built.to_string()) == built
    assert str(built) == 'year >= 1990 and source in ("pubmed", "arxiv") and not exists(retracted)'


def test_precedence_and_keywords() -> None:
    node = parse_filter("a = 1 or b != 'x' and not (c < 2.5 or `we ird` in (true, false,))")
    assert isinstance(node, Or)
    assert node.parts[0] == Compare("a", "==", 1)
    second = node.parts[1]
    assert isinstance(second, And)
    assert second.parts[0] == Compare("b", "!=", "x")
    assert second.parts[1] == Not(Or((Compare("c", "<", 2.5), IsIn("we ird", (True, False)))))
    # Keywords are case-insensitive; names that merely start with one are names.
    assert parse_filter("android == 1 AND orange == 2 And notes == 'n' and ins = 3 and and.x = 1") == And(
        (
            Compare("android", "==", 1),
            Compare("orange", "==", 2),
            Compare("notes", "==", "n"),
            Compare("ins", "==", 3),
            Compare("and.x", "==", 1),
        )
    )
    assert parse_filter("lang NOT IN ('en', 'de')") == Not(IsIn("lang", ("en", "de")))


def test_time_conditions_take_any_time_form() -> None:
    node = parse_filter("@time >= '2009-06-01' and @time < 1300000000")
    assert node == (F.time() >= "2009-06-01T00:00:00Z") & (F.time() < 1_300_000_000)
    assert isinstance(node, And)
    first = node.parts[0]
    assert isinstance(first, Compare) and first.field == TIME_FIELD and first.value == 1243814400.0
    with pytest.raises(FilterTypeError, match="@time"):
        parse_filter("@time > 'not a date'")
    with pytest.raises(FilterTypeError, match="boolean"):
        _ = F.time() == True  # noqa: E712 - the builder, not a comparison


def test_between_builds_closed_and_open_ranges() -> None:
    assert F("x").between(1, 5) == (F("x") >= 1) & (F("x") <= 5)
    assert F("x").between(1, 5, closed="neither") == (F("x") > 1) & (F("x") < 5)
    assert F("x").between(None, 5, closed="left") == Compare("x", "<", 5)
    with pytest.raises(InvalidFilterError):
        F("x").between(None, None)


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("year >= ", 8),
        ("year >> 3", 6),
        ("(a == 1", 7),
        ("a == 1 and", 10),
        ("a in ()", 6),
        ("a == nan", 5),
        ("a == 1 b == 2", 7),
        ("a ~ 1", 2),
    ],
)
def test_malformed_text_names_the_position(text: str, position: int) -> None:
    with pytest.raises(FilterSyntaxError, match=f"character {position}") as caught:
        parse_filter(text)
    assert isinstance(caught.value, InvalidQueryError)


def test_other_bad_filters() -> None:
    with pytest.raises(FilterSyntaxError, match="empty"):
        parse_filter("   ")
    with pytest.raises(FilterSyntaxError, match="at most"):
        parse_filter("a == 1 and " * 2000 + "a == 1")
    with pytest.raises(FilterSyntaxError, match="out of range"):
        parse_filter("a == 1e999")
    with pytest.raises(InvalidFilterError, match="finite"):
        _ = F("a") == math.nan
    with pytest.raises(InvalidFilterError, match="str, int, float or bool"):
        _ = F("a") == [1]
    with pytest.raises(InvalidFilterError, match="non-empty"):
        F("a").isin([])
    with pytest.raises(InvalidFilterError, match="not a string"):
        F("a").isin("abc")
    with pytest.raises(InvalidFilterError):
        F("")
    with pytest.raises(TypeError, match="&, \\| and ~"):
        bool(F("a") == 1)


def test_check_filter_names_unknown_fields_and_type_mismatches() -> None:
    schema: dict[str, Any] = {"year": "number", "source": "keyword", "open": "boolean"}
    check_filter(parse_filter("year > 1 and source == 'x' and open == true and @time > 0"), schema)
    with pytest.raises(UnknownFieldError, match=r"'yaer' \(at character 12\); did you mean 'year'"):
        check_filter(parse_filter("year > 1 or yaer > 2"), schema)
    with pytest.raises(FilterTypeError, match=r"'source'.*range.*character 0"):
        check_filter(parse_filter("source > 'a'"), schema)
    with pytest.raises(FilterTypeError, match="'year' holds number values; 'x' is a keyword"):
        check_filter(parse_filter("year in (1, 'x')"), schema)
    with pytest.raises(FilterTypeError, match="'open' holds boolean values; 1 is a number"):
        check_filter(F("open") == 1, schema)
    with pytest.raises(FilterTypeError, match="range"):
        check_filter(F("open") >= True, schema)


# ---------------------------------------------------------------- evaluation against a plain reading

KEYWORDS = ["a", "b", "c", "é", ""]


def plain(node: Filter, fields: dict[str, Any], time: float | None) -> bool:
    """The rules of the module docstring, one document at a time."""
    if isinstance(node, And):
        return all(plain(p, fields, time) for p in node.parts)
    if isinstance(node, Or):
        return any(plain(p, fields, time) for p in node.parts)
    if isinstance(node, Not):
        return not plain(node.part, fields, time)
    if node.field == TIME_FIELD:  # type: ignore[attr-defined]
        value: Any = time
    else:
        value = fields.get(node.field)  # type: ignore[attr-defined]
    if isinstance(value, (list, tuple)):
        if not value:  # an empty list is no value
            value = None
        elif isinstance(node, Contains) and node.mode == "all":
            return all(any(same(element, v) for element in value) for v in node.values)
        elif isinstance(node, Compare) and node.op == "!=":
            equal = Compare(node.field, "==", node.value)
            return not any(plain(equal, {node.field: element}, time) for element in value)
        elif not isinstance(node, Exists):
            # A condition on a list holds when it holds for some element (Elasticsearch's reading).
            return any(plain(node, {node.field: element}, time) for element in value)  # type: ignore[attr-defined]
    if isinstance(node, Exists):
        return value is not None
    if value is None:
        return isinstance(node, Compare) and node.op == "!="
    if isinstance(node, (IsIn, Contains)):
        return any(same(value, v) for v in node.values)
    assert isinstance(node, Compare)
    if node.op == "==":
        return same(value, node.value)
    if node.op == "!=":
        return not same(value, node.value)
    if isinstance(value, (bool, str)) or isinstance(node.value, (bool, str)):
        return False
    ordered = {"<": value < node.value, "<=": value <= node.value, ">": value > node.value}
    return bool(ordered.get(node.op, value >= node.value))


def same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return bool(a == b)  # exact, as Python compares an int with a float


#: The largest integer a number field holds (exactly, as float64).
BIG = 2**53

documents = st.lists(
    st.tuples(
        st.fixed_dictionaries(
            {},
            optional={
                "kw": st.sampled_from(KEYWORDS),
                "num": st.one_of(
                    st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0, 1e300, 1e20, BIG, -BIG, BIG - 1])
                ),
                "flag": st.booleans(),
                "tags": st.lists(st.sampled_from(KEYWORDS), max_size=4),
                "nums": st.lists(
                    st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 2.0, 1e20, BIG, -BIG])), max_size=4
                ),
            },
        ),
        st.one_of(st.none(), st.sampled_from([0.0, 86400.0, 1e9, -5.0])),
    ),
    min_size=1,
    max_size=40,
)


def conditions() -> st.SearchStrategy[Filter]:
    kw = st.sampled_from([*KEYWORDS, "zz"])
    # Integers no float64 holds (BIG + 1, 10**20 + 1) compare exactly, not as the float they round to.
    num = st.one_of(
        st.integers(-4, 4),
        st.sampled_from([0.5, -1.5, 2.0, 1e300, 2.5, BIG, BIG + 1, -BIG - 1, 10**20, 10**20 + 1, 10**300]),
    )
    ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
    return st.one_of(
        st.builds(Compare, st.just("kw"), st.sampled_from(["==", "!="]), kw),
        st.builds(Compare, st.just("num"), ops, num),
        st.builds(Compare, st.just("flag"), st.sampled_from(["==", "!="]), st.booleans()),
        st.builds(Compare, st.just(TIME_FIELD), ops, st.sampled_from([0.0, 86400.0, 1e9, 5.0])),
        st.builds(IsIn, st.just("kw"), st.lists(kw, min_size=1, max_size=3).map(tuple)),
        st.builds(IsIn, st.just("num"), st.lists(num, min_size=1, max_size=3).map(tuple)),
        st.builds(IsIn, st.just(TIME_FIELD), st.lists(st.sampled_from([0.0, 1e9]), min_size=1).map(tuple)),
        st.builds(Exists, st.sampled_from(["kw", "num", "flag", "tags", "nums", TIME_FIELD, "absent"])),
        # List fields: contains any/all, and the scalar conditions read as "some element".
        st.builds(
            Contains,
            st.just("tags"),
            st.lists(kw, min_size=1, max_size=3).map(tuple),
            st.sampled_from(["any", "all"]),
        ),
        st.builds(
            Contains,
            st.just("nums"),
            st.lists(num, min_size=1, max_size=3).map(tuple),
            st.sampled_from(["any", "all"]),
        ),
        st.builds(Compare, st.just("tags"), st.sampled_from(["==", "!="]), kw),
        st.builds(Compare, st.just("nums"), ops, num),
        st.builds(IsIn, st.just("tags"), st.lists(kw, min_size=1, max_size=3).map(tuple)),
        st.builds(IsIn, st.just("nums"), st.lists(num, min_size=1, max_size=3).map(tuple)),
    )


filters = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda parts: And(tuple(parts))),
        st.lists(inner, min_size=2, max_size=3).map(lambda parts: Or(tuple(parts))),
        inner.map(Not),
    ),
    max_leaves=8,
)


def field_index(docs: list[tuple[dict[str, Any], float | None]]) -> SegmentFields:
    built = FieldIndex.build([fields for fields, _ in docs])
    sections = built.sections()
    # Through the stored form, as a reader sees it.
    read = FieldIndex.from_sections(lambda name: sections[name], len(docs), "test")
    times = np.array([math.nan if t is None else t for _, t in docs], dtype=np.float64)
    return SegmentFields(read, times)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=documents, node=filters)
def test_segment_mask_equals_the_plain_reading(
    docs: list[tuple[dict[str, Any], float | None]], node: Filter
) -> None:
    mask = segment_mask(node, field_index(docs))
    want = [plain(node, fields, time) for fields, time in docs]
    assert mask.tolist() == want


@settings(max_examples=200, deadline=None)
@given(node=filters)
def test_string_form_round_trips(node: Filter) -> None:
    assert parse_filter(node.to_string()) == node


# ---------------------------------------------------------------- the field index


def test_field_types_are_fixed_by_the_first_document() -> None:
    with pytest.raises(FieldTypeError, match="'year' holds number values; document 1 gives it '1990'"):
        FieldIndex.build([{"year": 1990}, {"year": "1990"}])
    with pytest.raises(FieldTypeError, match="boolean"):
        FieldIndex.build([{"open": True}], kinds={"open": "number"})
    with pytest.raises(FieldTypeError, match="2\\*\\*53"):
        FieldIndex.build([{"id": 2**60}])
    assert FieldIndex.build([{"x": 1}, {"x": 2.5}]).kinds() == {"x": "number"}


def test_sections_are_deterministic_and_declared() -> None:
    docs: list[dict[str, Any]] = [{"b": "x", "a": 2}, {"a": 1.5, "c": True}, {"b": "w"}]
    one = FieldIndex.build(docs).sections()
    two = FieldIndex.build(docs).sections()
    assert set(one) == set(FIELD_SECTIONS)
    for name, array in one.items():
        assert array.tobytes() == two[name].tobytes()
        assert np.dtype(FIELD_SECTIONS[name]) == array.dtype.newbyteorder("<") or array.dtype.itemsize == 1


@pytest.mark.parametrize(
    ("section", "damage", "message"),
    [
        ("fld.kinds", lambda a: a.__setitem__(0, 7), "kind"),
        ("fld.kw_ids", lambda a: a.__setitem__(0, 99), "past the segment"),
        ("fld.num_values", lambda a: a.__setitem__(0, np.nan), "NaN"),
        ("fld.num_values", lambda a: a.__setitem__(0, 1e9), "order"),
        ("fld.kw_id_offsets", lambda a: a.__setitem__(1, 3), "goes backwards|ascending|two values"),
        ("fld.kw_value_offsets", lambda a: a.__setitem__(-1, 1), "does not run"),
        ("fld.names", lambda a: a.__setitem__(0, 0xFF), "UTF-8"),
        ("fld.kw_values", lambda a: a.__setitem__(0, ord("z")), "strictly increasing"),
        ("fld.num_start", lambda a: a.__setitem__(-1, 1), "does not run"),
    ],
)
def test_a_damaged_field_index_is_refused(section: str, damage: Any, message: str) -> None:
    docs = [{"a": 2, "b": "x", "c": True}, {"a": 1, "b": "y"}, {"a": 3, "b": "x", "c": False}]
    sections = {name: array.copy() for name, array in FieldIndex.build(docs).sections().items()}
    damage(sections[section])
    with pytest.raises(CorruptIndexError, match=message):
        FieldIndex.from_sections(lambda name: sections[name], len(docs), "seg-1.wseg")


@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(
        st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "kw": st.sampled_from(KEYWORDS),
                    "num": st.integers(-3, 3),
                    "flag": st.booleans(),
                    "tags": st.lists(st.sampled_from(KEYWORDS), max_size=3),
                    "nums": st.lists(st.integers(-3, 3), max_size=3),
                },
            ),
            min_size=1,
            max_size=15,
        ),
        min_size=1,
        max_size=3,
    ),
    seed=st.integers(0, 1000),
)
def test_merged_field_indexes_equal_a_fresh_build(parts: list[list[dict[str, Any]]], seed: int) -> None:
    rng = np.random.default_rng(seed)
    maps = []
    survivors: list[dict[str, Any]] = []
    for docs in parts:
        keep = rng.random(len(docs)) < 0.7
        new_ids = np.full(len(docs), -1, dtype=np.int64)
        for local in np.flatnonzero(keep).tolist():
            new_ids[local] = len(survivors)
            survivors.append(docs[local])
        maps.append((FieldIndex.build(docs), new_ids))
    merged = FieldIndex.merge(maps, len(survivors)).sections()
    fresh = FieldIndex.build(survivors).sections()
    for name in FIELD_SECTIONS:
        assert merged[name].tobytes() == fresh[name].tobytes(), name


@pytest.mark.parametrize("section", sorted(FIELD_SECTIONS))
def test_a_field_section_of_another_type_or_missing_is_refused(section: str) -> None:
    docs: list[dict[str, Any]] = [{"a": 2, "b": "x"}, {"a": 1, "b": "y"}]
    sections: dict[str, Any] = dict(FieldIndex.build(docs).sections())
    sections[section] = sections[section].astype(np.float32)  # the fuzzer found this one
    with pytest.raises(CorruptIndexError, match=section):
        FieldIndex.from_sections(lambda name: sections[name], len(docs), "seg")
    del sections[section]
    with pytest.raises(CorruptIndexError, match="missing"):
        FieldIndex.from_sections(lambda name: sections[name], len(docs), "seg")


# ---------------------------------------------------------------- numbers and nesting (issue 26)

HUGE_TEXTS = ["1" + "0" * 400, "-1" + "0" * 400, "1" + "0" * 5000, "0" * 5000 + "1" + "0" * 400]


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
@pytest.mark.parametrize(
    "number",
    [*HUGE_TEXTS, "1e400", "-1e400", "1e-400", "-2.5e-999", "0.000e-999999"],
    ids=lambda text: text if len(text) < 20 else f"{len(text)}-digits",
)
def test_a_number_a_field_cannot_hold_is_a_syntax_error(op: str, number: str) -> None:
    # Issue 26 item 2: an OverflowError, a ValueError (over 4,300 digits), or a silent 0.
    expressions = [f"year {op} {number}", f"year in (1, {number})", f"year not in ({number})"]
    expressions += [f"@time {op} {number}"] if op != "!=" else []
    for text in expressions:
        if number.startswith("0.000"):  # zero written with an exponent is zero, not an underflow
            assert parse_filter(text) is not None
            continue
        with pytest.raises(FilterSyntaxError, match=r"out of range|underflows to 0") as caught:
            parse_filter(text)
        message = str(caught.value)
        assert "(at character" in message and len(message) < 300, message  # named, not printed in full


@pytest.mark.parametrize("value", [10**400, -(10**400), 10**5000], ids=["1e400", "-1e400", "1e5000"])
def test_a_built_integer_a_field_cannot_hold_is_a_type_error(value: int) -> None:
    builds: list[Callable[[], object]] = [
        lambda: F("year") == value,
        lambda: F("year") != value,
        lambda: F("year") < value,
        lambda: F("year") >= value,
        lambda: F("year").between(0, value),
        lambda: F("year").isin([1, value]),
    ]
    for build in builds:
        with pytest.raises(FilterTypeError, match="digits") as caught:
            build()
        assert len(str(caught.value)) < 300


def test_integers_compare_exactly_through_a_search(tmp_path: Any) -> None:
    from weftsearch import RRF, BM25Scorer, Document, Index, Query

    values: dict[str, int | float] = {"a": 2**53, "b": 2**53 - 1, "c": -(2**53), "d": 1e20, "e": 7}
    with Index.create(tmp_path / "idx") as index:
        index.add_many(
            [Document(key, "word", fields={"n": value}) for key, value in values.items()], progress=False
        )
        for text in [
            "n == 9007199254740993",  # 2**53 + 1: no float64 holds it; 2**53 must not match
            "n >= 9007199254740993",
            "n > 9007199254740992",
            "n < -9007199254740993",
            "n <= 100000000000000000001",
            "n > 100000000000000000001",
            "n >= 100000000000000000000",
            "n in (9007199254740993, 100000000000000000001)",
            "n != 9007199254740993",
            "n < 1" + "0" * 300,
            "n > -1" + "0" * 300,
        ]:
            node = parse_filter(text)
            found = {
                hit.key for hit in index.search(Query(text="word", filter=node), 10, RRF(), BM25Scorer())
            }
            want = {key for key, value in values.items() if plain(node, {"n": value}, None)}
            assert found == want, text
        assert {
            h.key
            for h in index.search(Query(text="word", filter=F("n") >= 2**53 + 1), 10, RRF(), BM25Scorer())
        } == {"d"}


def test_nesting_is_bounded_in_both_forms() -> None:
    from weftsearch.engine.filters import MAX_FILTER_DEPTH

    deepest = "not " * MAX_FILTER_DEPTH + "x == 1"
    assert parse_filter(deepest).to_string().count("not") == MAX_FILTER_DEPTH
    for text in [
        "not " * (MAX_FILTER_DEPTH + 1) + "x == 1",
        "not " * MAX_FILTER_DEPTH + "x not in (1)",
        "not " * 2_400 + "x == 1",  # under the 10,000 characters: was a RecursionError
        "(x == 1 and (x == 2 or " * 20 + "x == 3" + "))" * 20,
    ]:
        with pytest.raises(FilterSyntaxError, match=f"more than {MAX_FILTER_DEPTH} deep"):
            parse_filter(text)
    node: Filter = F("x") == 1
    for _ in range(MAX_FILTER_DEPTH):
        node = ~node
    with pytest.raises(InvalidFilterError, match=f"at most {MAX_FILTER_DEPTH} deep"):
        _ = ~node
    with pytest.raises(InvalidFilterError, match=f"at most {MAX_FILTER_DEPTH} deep"):
        _ = node & (F("y") == 2)
    # Flattened and/or chains are one level however long.
    wide = parse_filter(" or ".join(f"x == {i}" for i in range(500)))
    assert isinstance(wide, Or) and len(wide.parts) == 500


@pytest.mark.parametrize(
    ("section", "damage", "message"),
    [
        # A list field's document once under each value: an id twice in one run is refused ...
        ("fld.kw_ids", lambda a: a.__setitem__(1, 0), "empty or not ascending"),
        # ... and so is a (value, id) pair twice.
        ("fld.num_ids", lambda a: a.__setitem__(1, 0), "order"),
        # A scalar field read as a list field's kind code, or the reverse, is checked against its values.
        ("fld.kinds", lambda a: a.__setitem__(1, 0), "two values of field 'tags'"),
        ("fld.kinds", lambda a: a.__setitem__(0, 1), "two values of field 'n'"),
    ],
)
def test_a_damaged_list_field_index_is_refused(section: str, damage: Any, message: str) -> None:
    docs: list[dict[str, Any]] = [{"tags": ("x", "y"), "n": (1, 1.5)}, {"tags": ("x",), "n": (1, 2)}]
    sections = {name: array.copy() for name, array in FieldIndex.build(docs).sections().items()}
    damage(sections[section])
    with pytest.raises(CorruptIndexError, match=message):
        FieldIndex.from_sections(lambda name: sections[name], len(docs), "seg-1.wseg")
