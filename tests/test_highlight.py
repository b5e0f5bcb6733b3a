"""weftsearch.highlight: snippets of a stored text with the query's terms and phrases marked."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weftsearch.analysis import EnglishAnalyzer, SimpleAnalyzer
from weftsearch.errors import InvalidParameterError
from weftsearch.highlight import (
    MAX_FRAGMENT_SIZE,
    FieldHighlight,
    HighlightOptions,
    highlight_text,
    options_of,
)
from weftsearch.highlight import query_units as units_of

ENGLISH = EnglishAnalyzer()


def marked(text: str, query: str, **options: object) -> list[str]:
    found = highlight_text(text, units_of(query, ENGLISH), ENGLISH, HighlightOptions(**options))  # type: ignore[arg-type]
    return [snippet.marked for snippet in found.snippets]


def test_terms_are_marked_as_search_matches_them() -> None:
    text = "Runners run; the running dog RAN. Graphs!"
    found = highlight_text(text, units_of("run graph", ENGLISH), ENGLISH)
    (snippet,) = found.snippets
    # "run", "running" stem to "run"; "Runners" (runner) and "RAN" (ran) do not.
    assert [text[s:e] for s, e in snippet.spans] == ["run", "running", "Graphs"]
    assert snippet.marked == "Runners <em>run</em>; the <em>running</em> dog RAN. <em>Graphs</em>!"
    assert snippet.matched == 2 and found.reason is None and not found.truncated


def test_a_phrase_matches_consecutive_terms_only() -> None:
    text = "lazy dogs sleep; a dog is lazy; lazy, the dog barks"
    phrase = tuple(ENGLISH.analyze("lazy dog"))
    found = highlight_text(text, [phrase], ENGLISH)
    # The stopword "the" takes no position, so "lazy, the dog" is the phrase too (as in search).
    assert [text[s:e] for s, e in found.snippets[0].spans] == ["lazy dogs", "lazy, the dog"]


def test_overlapping_units_are_merged_into_one_mark() -> None:
    text = "new york city"
    units = [("new", "york"), ("york", "citi"), ("citi",)]
    (snippet,) = highlight_text(text, units, ENGLISH).snippets
    assert snippet.spans == ((0, 13),) and snippet.marked == "<em>new york city</em>" and snippet.matched == 3


def test_best_fragments_first_then_position_and_bounded() -> None:
    filler = " ".join(["filler"] * 40)
    text = f"alpha one. {filler} alpha beta two. {filler} alpha beta gamma three. {filler} beta four."
    found = highlight_text(
        text,
        units_of("alpha beta gamma", ENGLISH),
        ENGLISH,
        HighlightOptions(fragment_size=40, number_of_fragments=3),
    )
    assert [s.matched for s in found.snippets] == [3, 2, 1]
    assert "gamma" in found.snippets[0].marked and "two" in found.snippets[1].marked
    assert found.snippets[2].start < found.snippets[1].start  # a tie on matches goes to the earlier
    for snippet in found.snippets:
        assert snippet.end - snippet.start <= 40
    bounds = sorted((s.start, s.end) for s in found.snippets)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(bounds))  # no overlap


def test_fragments_do_not_cut_words() -> None:
    text = "aaaa bbbb cccc target dddd eeee ffff gggg"
    (snippet,) = highlight_text(text, [("target",)], ENGLISH, HighlightOptions(fragment_size=17)).snippets
    fragment = text[snippet.start : snippet.end]
    assert fragment in text and "target" in fragment
    assert all(word in text.split() for word in fragment.split())


def test_html_escaping_and_tags() -> None:
    text = "<script>alert('x')</script> graph & <b>graph</b>"
    assert marked(text, "graph", escape_html=True) == [
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; <em>graph</em> &amp; "
        "&lt;b&gt;<em>graph</em>&lt;/b&gt;"
    ]
    assert marked("a graph", "graph", pre_tag="[", post_tag="]") == ["a [graph]"]
    assert marked("a <graph>", "graph") == ["a <<em>graph</em>>"]  # not escaped unless asked


def test_whole_text_with_zero_fragments() -> None:
    text = "graph " + "x " * 200 + "graph"
    (snippet,) = highlight_text(text, [("graph",)], ENGLISH, HighlightOptions(number_of_fragments=0)).snippets
    assert (snippet.start, snippet.end) == (0, len(text)) and len(snippet.spans) == 2


def test_a_word_cut_by_the_bound_is_not_matched() -> None:
    # "graphs" cut after "graph" would match "graph": the analysed text stops before it.
    found = highlight_text("a graphs", [("graph",)], SimpleAnalyzer(), HighlightOptions(max_analyzed_chars=7))
    assert found.snippets == () and found.truncated


def test_analysis_is_bounded_and_says_so() -> None:
    text = "x " * 100 + "graph"
    found = highlight_text(text, [("graph",)], ENGLISH, HighlightOptions(max_analyzed_chars=50))
    assert found.snippets == () and found.truncated and found.reason == "no match in the analysed text"
    found = highlight_text("graph " + text, [("graph",)], ENGLISH, HighlightOptions(max_analyzed_chars=50))
    assert len(found.snippets) == 1 and found.truncated and found.reason is None


@pytest.mark.parametrize(
    ("text", "units", "reason"),
    [
        ("", [("graph",)], "the field is empty"),
        ("no such word", [("graph",)], "no match"),
        ("graph", [], "the query has no terms for this field"),
    ],
)
def test_no_snippet_says_why(text: str, units: list[tuple[str, ...]], reason: str) -> None:
    assert highlight_text(text, units, ENGLISH) == FieldHighlight("text", reason=reason)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fragment_size": 0}, "fragment_size must be an int from 1"),
        ({"fragment_size": MAX_FRAGMENT_SIZE + 1}, "fragment_size"),
        ({"fragment_size": True}, "fragment_size"),
        ({"fragment_size": 10.5}, "fragment_size"),
        ({"number_of_fragments": -1}, "number_of_fragments"),
        ({"number_of_fragments": 101}, "number_of_fragments"),
        ({"max_analyzed_chars": 0}, "max_analyzed_chars"),
        ({"fields": "text"}, "sequence of field names"),
        ({"fields": ()}, "non-empty field names"),
        ({"fields": ("text", "")}, "non-empty field names"),
        ({"pre_tag": "x" * 101}, "pre_tag"),
        ({"post_tag": None}, "post_tag"),
        ({"escape_html": "yes"}, "escape_html"),
    ],
)
def test_bad_options_are_typed_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        HighlightOptions(**options)  # type: ignore[arg-type]


def test_options_of_a_search_argument() -> None:
    assert options_of(None) is None and options_of(False) is None
    assert options_of(True) == HighlightOptions()
    custom = HighlightOptions(fragment_size=20)
    assert options_of(custom) is custom
    with pytest.raises(InvalidParameterError, match="highlight must be"):
        options_of("yes")  # type: ignore[arg-type]


def test_bad_units_and_analyzers_are_typed_errors() -> None:
    with pytest.raises(InvalidParameterError, match="tuple of terms"):
        highlight_text("graph", ["graph"], ENGLISH)  # type: ignore[list-item]

    class NoTokens:
        name = "plain"

        def analyze(self, text: str) -> list[str]:
            return text.split()

    with pytest.raises(InvalidParameterError, match="'plain' has no tokens"):
        highlight_text("graph", [("graph",)], NoTokens())  # type: ignore[arg-type]


# Stand-ins shaped as issue 29's query tree (weftsearch.querylang, built in parallel).
@dataclass(frozen=True)
class TermNode:
    text: str
    field: str | None = None


@dataclass(frozen=True)
class PhraseNode:
    terms: tuple[str, ...]
    field: str | None = None


@dataclass(frozen=True)
class BoolNode:
    must: tuple[object, ...] = ()
    should: tuple[object, ...] = ()
    must_not: tuple[object, ...] = ()


@dataclass(frozen=True)
class Parsed:
    tree: object


def test_query_units_from_text_and_from_a_tree() -> None:
    assert units_of("The running dogs, running", ENGLISH) == (("run",), ("dog",))
    tree = BoolNode(
        must=(PhraseNode(("Lazy", "Dogs")), TermNode("title words", field="title")),
        should=(TermNode("graphs"),),
        must_not=(TermNode("excluded"),),
    )
    assert units_of(Parsed(tree), ENGLISH) == (("lazi", "dog"), ("graph",))
    assert units_of(tree, ENGLISH, "title") == (("lazi", "dog"), ("titl",), ("word",), ("graph",))
    assert units_of(PhraseNode(("the", "a")), ENGLISH) == ()  # a phrase of stopwords marks nothing


WORDS = ["graph", "Graphs", "retrieval", "the", "lazy", "dog", "<b>", "&", "caf\u00e9", "\ufb01le", "x"]


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS), max_size=80),
    separators=st.lists(st.sampled_from([" ", "  ", ", ", "\n", "-"]), min_size=1),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    size=st.integers(1, 60),
    count=st.integers(1, 4),
    escape=st.booleans(),
)
def test_snippets_hold_their_marks(
    words: list[str], separators: list[str], query: list[str], size: int, count: int, escape: bool
) -> None:
    text = "".join(word + separators[i % len(separators)] for i, word in enumerate(words))
    analyzer = SimpleAnalyzer() if len(query) % 2 else ENGLISH
    units = [*units_of(" ".join(query), analyzer), tuple(analyzer.analyze(" ".join(query[:2])))]
    options = HighlightOptions(
        fragment_size=size, number_of_fragments=count, pre_tag="[[", post_tag="]]", escape_html=escape
    )
    found = highlight_text(text, units, analyzer, options)
    wanted = {unit for unit in units if unit}
    assert len(found.snippets) <= count
    assert (found.reason is None) == bool(found.snippets)
    previous: list[tuple[int, int]] = []
    for snippet in found.snippets:
        assert 0 <= snippet.start < snippet.end <= len(text)
        assert all(snippet.end <= s or snippet.start >= e for s, e in previous)  # fragments do not overlap
        previous.append((snippet.start, snippet.end))
        longest = max(e - s for s, e in snippet.spans)
        assert snippet.end - snippet.start <= max(size, longest)
        last = snippet.start
        for start, end in snippet.spans:
            assert last <= start < end <= snippet.end
            last = end
            # Each mark holds a query unit as the analyzer sees it.
            terms = tuple(analyzer.analyze(text[start:end]))
            assert any(terms[i : i + len(u)] == u for u in wanted for i in range(len(terms)))
        assert snippet.text == text[snippet.start : snippet.end]
        if not escape:
            assert snippet.marked.replace("[[", "").replace("]]", "") == snippet.text
    # Snippets come best first: distinct units matched never increase.
    assert [s.matched for s in found.snippets] == sorted((s.matched for s in found.snippets), reverse=True)
