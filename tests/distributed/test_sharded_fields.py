"""Named text fields on a sharded index: one index's keys, order and score bits.

Fielded leaves (``title:word``, ``title:"a phrase"``), phrases, boolean trees,
prefixes and boosts, and the BM25F scorer (``fields=``, ``field_b=``), over
random small corpora with named fields on 1-3 shards, against one
:class:`~weftsearch.Index` holding the same documents. Exact because the
coordinator gathers per-field statistics (each field's total length, its df,
and BM25F's any-field df) as it gathers the default field's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.distributed.building import close_all, sharded_copies
from tests.querylang.strategies import trees
from tests.scorers.test_bm25_tree import BM25F_B, BM25F_WEIGHTS, FIELD_DOCS, FIELD_SCHEMA, field_leaves
from weftsearch import RRF, BM25Scorer, Document, Index, Query, SearchResults
from weftsearch.distributed import ShardedIndex
from weftsearch.errors import (
    InvalidDocumentError,
    InvalidParameterError,
    InvalidQueryError,
    PhrasePositionsError,
    UnknownTextFieldError,
)
from weftsearch.highlight import HighlightOptions
from weftsearch.querylang import BoolNode, Node, PhraseNode, TermNode
from weftsearch.schema import Schema, TextField

K1, B = 1.2, 0.75
GHOST = {"text": "alpha gamma running", "title": "beta alpha", "tags": "alpha"}


def document(key: str, fields: dict[str, str]) -> Document:
    return Document(key, fields.get("text", ""), text_fields={k: v for k, v in fields.items() if k != "text"})


def fill(index: Index | ShardedIndex, docs: dict[str, dict[str, str]], extra: int) -> None:
    """``docs`` in two commits, ``extra`` documents added then deleted (df and lengths skip them)."""
    items = list(docs.items())
    half = len(items) // 2
    index.add_many([document(key, fields) for key, fields in items[:half]], progress=False)
    index.commit()
    ghosts = [document(f"zz{i}", GHOST) for i in range(extra)]
    index.add_many(ghosts + [document(key, fields) for key, fields in items[half:]], progress=False)
    index.delete_many([ghost.key for ghost in ghosts])
    index.commit()


def scorer(bm25f: bool) -> BM25Scorer:
    return BM25Scorer(K1, B, fields=BM25F_WEIGHTS, field_b=BM25F_B) if bm25f else BM25Scorer(K1, B)


def assert_same(expected: SearchResults, got: SearchResults) -> None:
    assert list(got.keys) == list(expected.keys)
    assert got.scores.tobytes() == expected.scores.tobytes()
    assert [s.score for h in got for s in h.signals] == [s.score for h in expected for s in h.signals]


def compare(
    docs: dict[str, dict[str, str]], queries: Sequence[Query], k: int, extra: int, shards: int, bm25f: bool
) -> None:
    with tempfile.TemporaryDirectory() as root:
        single = Index.create(Path(root) / "one", schema=FIELD_SCHEMA)
        sharded = ShardedIndex.create(Path(root) / "sharded", shards, schema=FIELD_SCHEMA)
        try:
            fill(single, docs, extra)
            fill(sharded, docs, extra)
            expected = single.search_many(queries, k, RRF(), scorer(bm25f))
            got = sharded.search_many(queries, k, RRF(), scorer(bm25f))
            for want, have in zip(expected, got, strict=True):
                assert_same(want, have)
        finally:
            sharded.close()
            single.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    FIELD_DOCS,
    st.lists(trees(field_leaves(), max_leaves=5), min_size=1, max_size=3),
    st.integers(1, 12),
    st.integers(0, 2),
    st.integers(1, 3),
    st.booleans(),
)
@example(
    {"a": {"text": "alpha beta", "title": "beta alpha"}, "b": {"title": "alpha beta gamma"}, "c": {}},
    [PhraseNode(("alpha", "beta")), TermNode("alpha", field="title", boost=2.0)],
    5,
    1,
    2,
    True,
)
@example(
    {"a": {"text": "gamma", "title": "running"}, "b": {"title": "gamma"}, "c": {"text": "gamma gamma"}},
    [BoolNode(must=(TermNode("gamma"),), must_not=(PhraseNode(("run",), field="title"),))],
    5,
    0,
    3,
    False,
)
def test_fielded_trees_score_the_single_index_bits_on_every_shard_count(
    docs: dict[str, dict[str, str]], nodes: list[Node], k: int, extra: int, shards: int, bm25f: bool
) -> None:
    compare(docs, [Query(tree=node) for node in nodes], k, extra, shards, bm25f)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    FIELD_DOCS,
    st.lists(st.sampled_from(["alpha", "beta gamma", "running the", "epsilon alpha-beta"]), min_size=1),
    st.integers(1, 12),
    st.integers(0, 2),
    st.integers(1, 3),
)
def test_bm25f_over_plain_text_scores_the_single_index_bits(
    docs: dict[str, dict[str, str]], texts: list[str], k: int, extra: int, shards: int
) -> None:
    compare(docs, [Query(text) for text in texts], k, extra, shards, True)


PARSED = [
    "title:alpha",
    'title:"beta alpha"',
    '"alpha beta"~1 OR title:gamma^2',
    "+alpha -title:beta",
    "(alpha AND title:gamma) OR NOT tags:Beta",
    "tags:Al* OR title:ru*^3",
    "text:alpha title:alpha",
]
TITLED = {
    "a": {"text": "alpha beta gamma", "title": "beta alpha"},
    "b": {"text": "beta alpha", "title": "gamma running", "tags": "Beta"},
    "c": {"text": "running runs gamma", "title": "alpha", "tags": "alpha"},
    "d": {"text": "alpha alpha delta", "title": "alpha beta gamma"},
    "e": {"title": "gamma"},
}


@pytest.mark.parametrize("bm25f", [False, True])
@pytest.mark.parametrize("text", PARSED)
def test_parsed_fielded_queries_score_the_single_index_bits(tmp_path: Path, text: str, bm25f: bool) -> None:
    documents = [document(key, fields) for key, fields in TITLED.items()]
    single = Index.create(tmp_path / "one", schema=FIELD_SCHEMA)
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [2, 3], schema=FIELD_SCHEMA)
    try:
        query = Query.parse(text)
        expected = single.search(query, 10, RRF(), scorer(bm25f))
        assert expected.keys, text  # the query has hits to compare
        for count in (2, 3):
            assert_same(expected, sharded[count].search(query, 10, RRF(), scorer(bm25f)))
    finally:
        close_all(single, sharded)


# ---------------------------------------------------------------------- highlighting

HIGHLIGHT_SCHEMA = Schema(
    (TextField("text", positions=True), TextField("title", positions=True), TextField("notes", stored=False))
)
HIGHLIGHTED = {
    f"d{i}": {
        "text": f"alpha beta {'gamma ' * (i % 3)}running delta number {i}",
        "title": ["Alpha beta", "gamma runs", "Beta, then alpha"][i % 3],
        "notes": "alpha",
    }
    for i in range(14)
}


def highlighted(results: SearchResults) -> list[tuple[str, dict[str, object] | None]]:
    return [(hit.key, hit.to_dict().get("highlights")) for hit in results]


@pytest.mark.parametrize("text", ['"alpha beta" OR title:gamma', "title:runs^2 alpha", "running"])
def test_highlights_are_the_single_index_ones(tmp_path: Path, text: str) -> None:
    documents = [document(key, fields) for key, fields in HIGHLIGHTED.items()]
    single = Index.create(tmp_path / "one", schema=HIGHLIGHT_SCHEMA)
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [1, 3], schema=HIGHLIGHT_SCHEMA)
    options = HighlightOptions(fields=("title", "text", "notes"), fragment_size=20, pre_tag="[", post_tag="]")
    try:
        query = Query.parse(text)
        for offset in (0, 4):
            expected = single.search(query, 6, RRF(), BM25Scorer(), highlight=options, offset=offset)
            want = highlighted(expected)
            assert want and all(found is not None for _, found in want)
            for index in sharded.values():
                assert (
                    highlighted(index.search(query, 6, RRF(), BM25Scorer(), highlight=options, offset=offset))
                    == want
                )
                assert highlighted(
                    index.search(query, 6, RRF(), BM25Scorer(), highlight=True, offset=offset)
                ) == (
                    highlighted(single.search(query, 6, RRF(), BM25Scorer(), highlight=True, offset=offset))
                )
        # Without highlight=, no highlights, as one index.
        assert all(hit.highlights is None for hit in sharded[3].search(query, 6, RRF(), BM25Scorer()))
    finally:
        close_all(single, sharded)


def test_bad_highlight_options_are_refused_as_one_index_refuses_them(tmp_path: Path) -> None:
    documents = [document(key, fields) for key, fields in HIGHLIGHTED.items()]
    single = Index.create(tmp_path / "one", schema=HIGHLIGHT_SCHEMA)
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [2], schema=HIGHLIGHT_SCHEMA)
    try:
        # An unknown field, with hits and with none (nothing matches "zzz").
        for text in ("alpha", "zzz"):
            bad = HighlightOptions(fields=("body",))
            with pytest.raises(InvalidParameterError) as one:
                single.search(text, 5, RRF(), BM25Scorer(), highlight=bad)
            with pytest.raises(InvalidParameterError) as many:
                sharded[2].search(text, 5, RRF(), BM25Scorer(), highlight=bad)
            assert str(many.value) == str(one.value) and "'body'" in str(many.value)
        for wrong in ("text", 3):
            with pytest.raises(InvalidParameterError) as one:
                single.search("alpha", 5, RRF(), BM25Scorer(), highlight=wrong)  # type: ignore[arg-type]
            with pytest.raises(InvalidParameterError) as many:
                sharded[2].search("alpha", 5, RRF(), BM25Scorer(), highlight=wrong)  # type: ignore[arg-type]
            assert str(many.value) == str(one.value)
    finally:
        close_all(single, sharded)


def test_an_index_without_stored_text_says_why_on_every_shard(tmp_path: Path) -> None:
    documents = [Document(f"d{i}", f"alpha beta {i}") for i in range(6)]
    single = Index.create(tmp_path / "one", store_text=False)
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [3], store_text=False)
    try:
        want = highlighted(single.search("alpha", 5, RRF(), BM25Scorer(), highlight=True))
        assert want and "not stored" in str(want[0][1])
        assert highlighted(sharded[3].search("alpha", 5, RRF(), BM25Scorer(), highlight=True)) == want
    finally:
        close_all(single, sharded)


# ---------------------------------------------------------------------- refusals

REFUSAL_SCHEMA = Schema(
    (
        TextField("text", positions=True),
        TextField("title", positions=False),
        TextField("tags", analyzer="keyword"),
    )
)
#: 100 documents, each with its own "w<i>x" term: 100 terms start with "w" over the collection,
#: fewer than MAX_PREFIX_TERMS (64) on each of 2 or 3 shards.
REFUSAL_DOCS = [
    Document(f"k{i}", f"alpha w{i}x beta", text_fields={"title": f"zebra t{i}y", "tags": "Q"})
    for i in range(100)
]
REFUSALS = [
    ('title:"zebra t1y"', None, PhrasePositionsError),
    ('"alpha w1x"', {"text": 1.0, "title": 2.0}, PhrasePositionsError),
    ("body:alpha", None, UnknownTextFieldError),
    ("body:alpha", {"text": 1.0, "title": 2.0}, UnknownTextFieldError),
    ("alpha", {"body": 1.0}, InvalidParameterError),
    ("alpha", {"text": 1.0, "tags": 2.0}, InvalidParameterError),
    ("w*", None, InvalidQueryError),
    ("alpha OR title:t*", None, InvalidQueryError),
    # Fewer than 64 in each field, more than 64 in text and title together (BM25F's expansion).
    ("w1* OR t1* OR w2* OR t2* OR w3* OR t3* OR w4* OR t4*", {"text": 1.0, "title": 2.0}, None),
    ("zebra", {"text": 1.0, "title": 2.0}, None),
    ("a*", {"text": 1.0, "title": 2.0}, None),
    ('tags:"Q"', None, None),
]


@pytest.mark.parametrize(("text", "fields", "error"), REFUSALS)
def test_what_one_index_refuses_a_sharded_index_refuses_alike(
    tmp_path: Path, text: str, fields: dict[str, float] | None, error: type[Exception] | None
) -> None:
    single = Index.create(tmp_path / "one", schema=REFUSAL_SCHEMA)
    single.add_many(REFUSAL_DOCS, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, REFUSAL_DOCS, [2, 3], schema=REFUSAL_SCHEMA)
    try:
        query = Query.parse(text)
        if error is None:
            expected = single.search(query, 10, RRF(), BM25Scorer(fields=fields))
            for index in sharded.values():
                assert_same(expected, index.search(query, 10, RRF(), BM25Scorer(fields=fields)))
            return
        with pytest.raises(error) as one:
            single.search(query, 10, RRF(), BM25Scorer(fields=fields))
        for index in sharded.values():
            with pytest.raises(error) as many:
                index.search(query, 10, RRF(), BM25Scorer(fields=fields))
            assert type(many.value) is type(one.value) and str(many.value) == str(one.value)
    finally:
        close_all(single, sharded)


def test_a_prefix_is_bounded_over_bm25f_fields_together(tmp_path: Path) -> None:
    """50 terms start with "q" in text, 50 others in title: each field is under the bound, both over."""
    documents = [Document(f"k{i}", f"q{i}a", text_fields={"title": f"q{i}b", "tags": "Q"}) for i in range(50)]
    single = Index.create(tmp_path / "one", schema=REFUSAL_SCHEMA)
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [2], schema=REFUSAL_SCHEMA)
    try:
        bm25f = BM25Scorer(fields={"text": 1.0, "title": 1.0})
        for index in (single, sharded[2]):
            assert index.search(Query.parse("q*"), 10, RRF(), BM25Scorer()).keys  # text alone: 50
            with pytest.raises(InvalidQueryError, match="MAX_PREFIX_TERMS"):
                index.search(Query.parse("q*"), 10, RRF(), bm25f)
    finally:
        close_all(single, sharded)


# ---------------------------------------------------------------------- the schema


def test_the_schema_is_every_shards_and_an_unknown_text_field_reaches_no_shard(tmp_path: Path) -> None:
    with ShardedIndex.create(tmp_path / "s", 3, schema=REFUSAL_SCHEMA) as sharded:
        assert sharded.schema == REFUSAL_SCHEMA
        sharded.add_many(REFUSAL_DOCS[:5], progress=False)
        sharded.commit()
        bad = [*REFUSAL_DOCS[5:40], Document("x", "alpha", text_fields={"body": "b"})]
        with pytest.raises(InvalidDocumentError, match="text field 'body' is not in the index's schema"):
            sharded.add_many(bad, progress=False)
        sharded.commit()
        assert sharded.stats().documents == 5  # the batch was refused whole, before any shard wrote
    with ShardedIndex.open(tmp_path / "s", readonly=True) as reopened:
        assert reopened.schema == REFUSAL_SCHEMA
    with ShardedIndex.create(tmp_path / "plain", 2) as plain:
        assert plain.schema == Schema.default()
        with pytest.raises(InvalidDocumentError, match="none besides 'text'"):
            plain.add_many([Document("t", "x", text_fields={"title": "t"})], progress=False)


@pytest.mark.parametrize("bm25f", [False, True])
def test_filters_combine_with_fielded_queries_as_on_one_index(tmp_path: Path, bm25f: bool) -> None:
    documents = [
        Document(key, fields.get("text", ""), fields={"n": n}, text_fields={"title": fields.get("title", "")})
        for n, (key, fields) in enumerate(TITLED.items())
    ]
    single = Index.create(tmp_path / "one", schema=FIELD_SCHEMA)
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [2], schema=FIELD_SCHEMA)
    try:
        for text in ("title:alpha OR gamma", '"alpha beta" title:gamma^2', "run*"):
            query = Query.parse(text, filter="n >= 1")
            expected = single.search(query, 10, RRF(), scorer(bm25f))
            assert expected.keys and "a" not in expected.keys, text
            assert_same(expected, sharded[2].search(query, 10, RRF(), scorer(bm25f)))
    finally:
        close_all(single, sharded)
