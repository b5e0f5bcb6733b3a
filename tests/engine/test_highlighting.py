"""Index.search(..., highlight=...): each hit's snippets, computed lazily from the snapshot searched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.analysis import EnglishAnalyzer, Token
from weftsearch.engine.highlighting import NOT_STORED, NOT_STORED_FIELD
from weftsearch.errors import InvalidParameterError
from weftsearch.highlight import HighlightOptions
from weftsearch.schema import Schema, TextField

DOCS = [
    Document("a", "Graph retrieval with <b>BM25</b>: running fast over graphs."),
    Document("b", "Nothing about it here, only running."),
    Document("c", "A lazy dog; lazy the dog; dog lazy.", fields={"lang": "en"}),
]


class CountingEnglish(EnglishAnalyzer):
    """The english analyzer, counting ``tokens()`` calls (the highlighting work)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def tokens(self, text: str) -> list[Token]:
        self.calls += 1
        return super().tokens(text)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index.create(tmp_path / "i") as built:
        built.add_many(DOCS)
        built.commit()
        yield built


def test_hits_carry_highlights_when_asked(index: Index) -> None:
    results = index.search("graph running", 5, RRF(), BM25Scorer(), highlight=True)
    hit = results[0]
    assert hit.key == "a" and hit.highlights is not None
    (snippet,) = hit.highlights["text"].snippets
    assert (
        snippet.marked
        == "<em>Graph</em> retrieval with <b>BM25</b>: <em>running</em> fast over <em>graphs</em>."
    )
    text = DOCS[0].text
    assert [text[s:e] for s, e in snippet.spans] == ["Graph", "running", "graphs"]
    row = hit.to_dict()
    assert row["highlights"]["text"]["snippets"][0]["marked"] == snippet.marked
    running, graphs = text.index("running"), text.index("graphs")
    assert row["highlights"]["text"]["snippets"][0]["spans"] == [
        [0, 5],
        [running, running + 7],
        [graphs, graphs + 6],
    ]
    assert results.to_dict()["hits"][0]["highlights"] == row["highlights"]


def test_no_highlights_unless_asked(index: Index) -> None:
    hit = index.search("graph", 5, RRF(), BM25Scorer())[0]
    assert hit.highlights is None and "highlights" not in hit.to_dict()
    assert index.search("graph", 5, RRF(), BM25Scorer(), highlight=False)[0].highlights is None


def test_options_escape_and_size(index: Index) -> None:
    options = HighlightOptions(fragment_size=20, pre_tag="<mark>", post_tag="</mark>", escape_html=True)
    hit = index.search("bm25", 5, RRF(), BM25Scorer(), highlight=options)[0]
    assert hit.highlights is not None
    (snippet,) = hit.highlights["text"].snippets
    assert "<mark>BM25</mark>" in snippet.marked and "&lt;b&gt;" in snippet.marked
    assert snippet.end - snippet.start <= 20


def test_highlighting_is_lazy_per_hit(tmp_path: Path) -> None:
    analyzer = CountingEnglish()
    with Index.create(tmp_path / "lazy", analyzer=analyzer) as index:
        index.add_many(DOCS)
        index.commit()
        results = index.search("running", 5, RRF(), BM25Scorer(), highlight=True)
        assert len(results) == 2 and analyzer.calls == 0  # the search itself highlights nothing
        assert results.keys == ["b", "a"] and analyzer.calls == 0
        first = results[0]
        assert analyzer.calls == 1 and first.highlights is not None
        assert results[0] is first and analyzer.calls == 1  # built once
        list(results)
        assert analyzer.calls == 2


def test_an_index_without_stored_text_says_why(tmp_path: Path) -> None:
    with Index.create(tmp_path / "bare", store_text=False) as index:
        index.add_many(DOCS)
        index.commit()
        hit = index.search("graph", 5, RRF(), BM25Scorer(), highlight=True)[0]
        assert hit.highlights is not None
        found = hit.highlights["text"]
        assert found.snippets == () and found.reason == NOT_STORED
        assert hit.to_dict()["highlights"]["text"]["reason"] == NOT_STORED


def test_every_occurrence_is_marked(index: Index) -> None:
    hit = index.search("lazy", 5, RRF(), BM25Scorer(), highlight=True)[0]
    assert hit.key == "c" and hit.highlights is not None
    assert [hit.highlights["text"].snippets[0].marked] == [
        "A <em>lazy</em> dog; <em>lazy</em> the dog; dog <em>lazy</em>."
    ]


@pytest.mark.parametrize(
    ("highlight", "message"),
    [
        (HighlightOptions(fields=("title",)), "unknown text field 'title'; text fields: text"),
        ("yes", "highlight must be True, False or HighlightOptions"),
    ],
)
def test_bad_highlight_requests_are_typed_errors(index: Index, highlight: object, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        index.search("graph", 5, RRF(), BM25Scorer(), highlight=highlight)  # type: ignore[arg-type]


def test_a_custom_analyzer_without_tokens_is_refused_by_name(tmp_path: Path) -> None:
    class Plain:
        name = "plain-words"

        def analyze(self, text: str) -> list[str]:
            return text.lower().split()

    with Index.create(tmp_path / "plain", analyzer=Plain()) as index:
        index.add_many(DOCS)
        index.commit()
        assert index.search("graph", 5, RRF(), BM25Scorer()).keys == ["a"]
        with pytest.raises(InvalidParameterError, match="'plain-words' has no tokens"):
            index.search("graph", 5, RRF(), BM25Scorer(), highlight=True)


def named_field_index() -> Index:
    schema = Schema(
        (
            TextField("text", positions=True),
            TextField("title", positions=True),
            TextField("tags", analyzer="keyword"),
            TextField("secret", stored=False),
        )
    )
    index = Index(schema=schema)
    index.add_many(
        [
            Document(
                "a",
                "The alpha beta gamma, and beta.",
                text_fields={"title": "Beta alpha", "tags": "Alpha", "secret": "alpha"},
            ),
            Document("b", "gamma beta alpha", text_fields={"title": "Alpha beta runs", "tags": "beta"}),
        ]
    )
    return index


def marked(index: Index, query: str, fields: tuple[str, ...]) -> dict[str, dict[str, list[str] | str]]:
    results = index.search(
        Query.parse(query), 5, RRF(), BM25Scorer(), highlight=HighlightOptions(fields=fields)
    )
    found: dict[str, dict[str, list[str] | str]] = {}
    for hit in results:
        assert hit.highlights is not None
        found[hit.key] = {
            name: [snippet.marked for snippet in value.snippets] or str(value.reason)
            for name, value in hit.highlights.items()
        }
    return found


def test_named_fields_highlight_with_their_own_analyzers() -> None:
    index = named_field_index()
    # A fielded clause highlights only its field; the phrase as one span; "running" marks "runs" (stems).
    got = marked(index, 'title:"alpha beta" OR text:gamma OR title:running', ("text", "title"))
    assert got["b"]["title"] == ["<em>Alpha beta</em> <em>runs</em>"]
    assert got["b"]["text"] == ["<em>gamma</em> beta alpha"]
    assert got["a"]["title"] == "no match"  # "Beta alpha" is not the phrase
    # The keyword field matches its whole value, exactly (its analyzer, not english).
    assert marked(index, "tags:Alpha", ("tags",)) == {"a": {"tags": ["<em>Alpha</em>"]}}
    # An unstored field says so instead of a snippet.
    assert marked(index, "alpha", ("secret",))["a"]["secret"] == NOT_STORED_FIELD


def test_highlighting_an_unknown_field_names_the_known_ones() -> None:
    with pytest.raises(InvalidParameterError, match="'body'; text fields: secret, tags, text, title"):
        marked(named_field_index(), "alpha", ("body",))
