"""The vectorised highlighter against the one it replaced (kept here as the oracle): the same snippets.

``old_highlight_text`` below is ``weftsearch.highlight.highlight_text`` as it was before
highlighting matched token arrays (a Python object per word, string comparisons), copied
verbatim but for its helpers' names. Every case must give identical results: snippets'
offsets, texts, spans, marked strings, order and counts, reasons and ``truncated``.
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weftsearch.analysis import EnglishAnalyzer, SimpleAnalyzer, TokenizingAnalyzer
from weftsearch.errors import InvalidParameterError
from weftsearch.highlight import (
    DEFAULT_FIELD,
    FieldHighlight,
    HighlightOptions,
    Snippet,
    highlight_text,
    query_units,
)
from weftsearch.languages import CJKAnalyzer, KeywordAnalyzer, SnowballAnalyzer
from weftsearch.tokens import Token, TokenArrays

# The oracle: the highlighter before token arrays.


@dataclass(slots=True)
class _Match:
    """A merged run of matched characters and the query units matched in it."""

    start: int
    end: int
    units: set[int] = field(default_factory=set)


def _old_matches(tokens: list[Token], units: tuple[tuple[str, ...], ...]) -> list[_Match]:
    """Every occurrence of every unit in ``tokens``, merged where they overlap, in order.

    O(tokens * units sharing a first term * unit length).
    """
    by_first: dict[str, list[int]] = {}
    for index, unit in enumerate(units):
        if unit:
            by_first.setdefault(unit[0], []).append(index)
    raw: list[tuple[int, int, int]] = []
    terms = [token.term for token in tokens]
    for position, term in enumerate(terms):
        for index in by_first.get(term, ()):
            unit = units[index]
            last = position + len(unit)
            # The second term first: most candidate starts fail there, before any slice is made.
            if last <= len(terms) and (
                len(unit) == 1 or (terms[position + 1] == unit[1] and tuple(terms[position:last]) == unit)
            ):
                raw.append((tokens[position].start, tokens[last - 1].end, index))
    raw.sort()
    merged: list[_Match] = []
    for start, end, index in raw:
        if merged and start < merged[-1].end:
            merged[-1].end = max(merged[-1].end, end)
            merged[-1].units.add(index)
        else:
            merged.append(_Match(start, end, {index}))
    return merged


def _old_window(text: str, matches: list[_Match], first: int, size: int) -> tuple[int, int]:
    """A fragment of about ``size`` characters holding ``matches[first]``, cutting no word if it can."""
    anchor = matches[first]
    length = anchor.end - anchor.start
    # A little context before the match (a quarter of what the fragment leaves over).
    start = max(0, anchor.start - max(0, size - length) // 4)
    end = max(anchor.end, min(len(text), start + size))
    if end - start < size:  # near the end of the text: give the room to the context before
        start = max(0, min(start, end - size))
    # Do not cut a word: move the start past a partial word, the end back before one,
    # never past the anchor.
    if start > 0 and not text[start - 1].isspace():
        space = _old_next_space(text, start, anchor.start)
        start = space if space is not None else start
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", anchor.end, end)
        end = space if space > anchor.end else end
    while start < anchor.start and text[start].isspace():
        start += 1
    while end > anchor.end and text[end - 1].isspace():
        end -= 1
    return start, end


def _old_next_space(text: str, start: int, limit: int) -> int | None:
    """The offset after the first whitespace in ``text[start:limit]``, or ``None``."""
    for offset in range(start, limit):
        if text[offset].isspace():
            return offset + 1
    return None


def _old_mark(
    text: str, start: int, end: int, spans: list[tuple[int, int]], options: HighlightOptions
) -> str:
    """``text[start:end]`` with each span between the tags (escaped when asked)."""
    escape = html.escape if options.escape_html else str
    out: list[str] = []
    cursor = start
    for span_start, span_end in spans:
        out.append(escape(text[cursor:span_start]))
        out.append(options.pre_tag + escape(text[span_start:span_end]) + options.post_tag)
        cursor = span_end
    out.append(escape(text[cursor:end]))
    return "".join(out)


def old_highlight_text(
    text: str,
    units: Iterable[tuple[str, ...]],
    analyzer: TokenizingAnalyzer,
    options: HighlightOptions | None = None,
    field_name: str = DEFAULT_FIELD,
) -> FieldHighlight:
    """The best snippets of ``text`` for the query ``units`` (see the module for the rules).

    Args:
        text: the stored text of one field of one document.
        units: tuples of analysed terms (a term a 1-tuple, a phrase its terms in order).
        analyzer: the field's analyzer; it must have ``tokens()``.
        options: sizes and tags; ``HighlightOptions()`` when ``None``.
        field_name: the name reported in the result.

    Raises:
        InvalidParameterError: ``analyzer`` has no ``tokens()``, or a unit is not a tuple of strings.

    O(min(len(text), max_analyzed_chars) + matches * fragment_size).

    """
    options = HighlightOptions() if options is None else options
    if not isinstance(analyzer, TokenizingAnalyzer):
        raise InvalidParameterError(
            f"analyzer {getattr(analyzer, 'name', analyzer)!r} has no tokens(text): it cannot highlight"
        )
    wanted: dict[tuple[str, ...], None] = {}
    for unit in units:
        if not isinstance(unit, tuple) or not all(isinstance(term, str) for term in unit):
            raise InvalidParameterError(f"a highlight unit is a tuple of terms, got {unit!r}")
        if unit:
            wanted.setdefault(unit, None)
    if not text:
        return FieldHighlight(field_name, reason="the field is empty")
    truncated = len(text) > options.max_analyzed_chars
    analysed = text[: options.max_analyzed_chars]
    if truncated and not text[options.max_analyzed_chars].isspace():
        # Stop before a word cut in two: its first part could match a term it is not.
        boundary = max(analysed.rfind(space) for space in " \t\n\r")
        if boundary > 0:
            analysed = analysed[:boundary]
    if not wanted:
        return FieldHighlight(field_name, reason="the query has no terms for this field", truncated=truncated)
    matches = _old_matches(analyzer.tokens(analysed), tuple(wanted))
    if not matches:
        reason = "no match in the analysed text" if truncated else "no match"
        return FieldHighlight(field_name, reason=reason, truncated=truncated)
    if options.number_of_fragments == 0:
        spans = [(m.start, m.end) for m in matches]
        units_seen = set().union(*(m.units for m in matches))
        marks = _old_mark(analysed, 0, len(analysed), spans, options)
        whole = Snippet(0, len(analysed), analysed, tuple(spans), marks, len(units_seen))
        return FieldHighlight(field_name, (whole,), truncated=truncated)
    candidates: list[tuple[int, int, int, int, int]] = []  # (-distinct, start, end, first, last)
    starts = [m.start for m in matches]
    seen: set[tuple[int, int]] = set()
    for anchor in range(len(matches)):
        start, end = _old_window(analysed, matches, anchor, options.fragment_size)
        if (start, end) in seen:
            continue
        seen.add((start, end))
        # The matches wholly inside the window: a run from the first that starts in it.
        first = last = bisect.bisect_left(starts, start)
        while last < len(matches) and matches[last].end <= end:
            last += 1
        distinct = len(set().union(*(m.units for m in matches[first:last])))
        candidates.append((-distinct, start, end, first, last))
    candidates.sort()
    chosen: list[tuple[int, int, int, int, int]] = []
    for candidate in candidates:
        if len(chosen) == options.number_of_fragments:
            break
        _, start, end, _, _ = candidate
        if all(end <= other[1] or start >= other[2] for other in chosen):
            chosen.append(candidate)
    snippets = []
    for negative, start, end, first, last in chosen:
        spans = [(m.start, m.end) for m in matches[first:last]]
        snippets.append(
            Snippet(
                start,
                end,
                analysed[start:end],
                tuple(spans),
                _old_mark(analysed, start, end, spans, options),
                -negative,
            )
        )
    return FieldHighlight(field_name, tuple(snippets), truncated=truncated)


# The comparison.

ANALYZERS: list[TokenizingAnalyzer] = [
    EnglishAnalyzer(),
    SimpleAnalyzer(),
    SnowballAnalyzer("french"),
    CJKAnalyzer(),
    KeywordAnalyzer(),
]
# Words that stem together, stopwords (which take no position: phrases match across them),
# repeats (overlapping phrase matches), accents, NFKC-changed letters, CJK, emoji, punctuation.
WORDS = [
    "alpha", "beta", "gamma", "run", "Running", "runs", "the", "a", "of", "and", "l'eau", "cat's",
    "\ufb01le", "file", "caf\u00e9", "CAFE\u0301", "\u4e2d\u6587\u5b57", "\U0001f600", "x", "x", "x",
]  # fmt: skip
SEPARATORS = ["", " ", " ", " ", ", ", ". ", "\n", " - ", "  ", "\u00a0", "!"]
TEXTS = st.one_of(
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=80).map(
        lambda pairs: "".join(word + separator for word, separator in pairs)
    ),
    st.text(alphabet="ab x\u00e9\u4e2d.,'\n", max_size=120),
)


@st.composite
def documents_and_queries(draw: st.DrawFn) -> tuple[str, list[tuple[bool, list[str]]]]:
    """A text, and query units (phrase?, words) whose words mostly come from the text, in runs."""
    pairs = draw(
        st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), min_size=1, max_size=80)
    )
    text = "".join(word + separator for word, separator in pairs)
    words = [word for word, _ in pairs]
    query = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            start = draw(st.integers(0, len(words) - 1))
            query.append((draw(st.booleans()), words[start : start + draw(st.integers(1, 3))]))
        else:
            query.append(
                (draw(st.booleans()), draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)))
            )
    return text, query


QUERY_WORDS = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)
QUERIES = st.lists(st.tuples(st.booleans(), QUERY_WORDS), min_size=1, max_size=5)
OPTIONS = st.builds(
    HighlightOptions,
    fragment_size=st.integers(1, 60),
    number_of_fragments=st.integers(0, 4),
    pre_tag=st.sampled_from(["<em>", "[", ""]),
    post_tag=st.sampled_from(["</em>", "]", ""]),
    escape_html=st.booleans(),
    max_analyzed_chars=st.one_of(st.integers(1, 150), st.just(100_000)),
)


def units_of(query: list[tuple[bool, list[str]]], analyzer: TokenizingAnalyzer) -> list[tuple[str, ...]]:
    """Each (phrase?, words) as a phrase unit (its analysed terms) or as its words' terms."""
    units: list[tuple[str, ...]] = []
    for phrase, words in query:
        terms = analyzer.analyze(" ".join(words))
        if phrase:
            units.append(tuple(terms))
        else:
            units.extend((term,) for term in terms)
    return units


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    analyzer=st.sampled_from(ANALYZERS),
    case=st.one_of(documents_and_queries(), documents_and_queries(), st.tuples(TEXTS, QUERIES)),
    options=OPTIONS,
)
def test_the_highlighter_gives_what_the_old_one_gave(
    analyzer: TokenizingAnalyzer, case: tuple[str, list[tuple[bool, list[str]]]], options: HighlightOptions
) -> None:
    text, query = case
    units = units_of(query, analyzer)
    assert highlight_text(text, units, analyzer, options, "body") == old_highlight_text(
        text, units, analyzer, options, "body"
    )


@settings(max_examples=200, deadline=None)
@given(text=TEXTS, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join))
def test_the_same_for_query_text_and_parsed_queries_with_fields(text: str, query: str) -> None:
    from weftsearch import Query

    english = ANALYZERS[0]
    words = query.split()
    parsed = Query.parse(f'{" ".join(words[:2])} title:{words[-1]} "{" ".join(words)}"')
    for source in (query, parsed):
        for field_name in ("text", "title"):
            units = query_units(source, english, field_name)
            assert highlight_text(text, units, english) == old_highlight_text(text, units, english)


@settings(max_examples=150, deadline=None)
@given(case=documents_and_queries(), options=OPTIONS)
def test_the_same_without_the_compiled_loop(
    case: tuple[str, list[tuple[bool, list[str]]]], options: HighlightOptions
) -> None:
    from weftsearch import analysis, highlight

    text, query = case
    english = EnglishAnalyzer()
    units = units_of(query, english)
    saved = analysis._compiled_spans, highlight._native
    analysis._compiled_spans = highlight._native = None
    try:
        found = highlight_text(text, units, english, options)
    finally:
        analysis._compiled_spans, highlight._native = saved
    assert found == old_highlight_text(text, units, EnglishAnalyzer(), options)


def test_long_texts_with_many_matches_agree() -> None:
    english = ANALYZERS[0]
    text = " ".join(f"alpha beta {'gamma' if i % 7 else 'the'} runs delta{i % 13}" for i in range(3000))
    units = [("alpha", "beta"), ("run",), ("beta", "gamma"), ("delta3",), ("gamma",)]
    for options in (
        HighlightOptions(),
        HighlightOptions(number_of_fragments=0),
        HighlightOptions(fragment_size=20, number_of_fragments=100, max_analyzed_chars=20_000),
    ):
        assert highlight_text(text, units, english, options) == old_highlight_text(
            text, units, english, options
        )


def test_unit_type_errors_are_unchanged() -> None:
    english = ANALYZERS[0]
    for bad in (["alpha"], [("alpha", 1)]):
        for function in (highlight_text, old_highlight_text):
            try:
                function("alpha", bad, english)  # type: ignore[arg-type]
            except InvalidParameterError as error:
                assert "a highlight unit is a tuple of terms" in str(error)
            else:
                raise AssertionError("no error")


_UNUSED = (bisect, html, Iterable, FieldHighlight, Snippet)  # the oracle's imports


def test_touching_matches_stay_apart_and_overlapping_ones_merge() -> None:
    # A CJK bigram and a Latin word touch (no separator): two marks; overlapping bigrams: one.
    cjk = CJKAnalyzer()
    for text, units, spans in (
        ("\u4e2d\u6587\u5b57x", [("\u6587\u5b57",), ("x",)], ((1, 3), (3, 4))),
        ("\u4e2d\u6587\u5b57x", [("\u4e2d\u6587",), ("\u6587\u5b57",)], ((0, 3),)),
    ):
        found = highlight_text(text, units, cjk)
        assert found == old_highlight_text(text, units, cjk)
        assert found.snippets[0].spans == spans


def test_the_whitespace_table_is_str_isspace() -> None:
    from weftsearch.highlight import WHITESPACE

    assert sorted(WHITESPACE) == [code for code in range(0x110000) if chr(code).isspace()]
    assert max(WHITESPACE) == 0x3000  # the table's range (_IS_SPACE) covers them all


def test_the_fast_analyzer_check_is_the_protocol_check() -> None:
    import typing

    from weftsearch.highlight import _is_tokenizing

    # The members the fast check reads are the protocol's (typing's private helper, as of 3.11).
    assert set(typing._get_protocol_attrs(TokenizingAnalyzer)) == {"name", "analyze", "tokens"}  # type: ignore[attr-defined]

    class Blocked(EnglishAnalyzer):
        tokens = None  # type: ignore[assignment]

    class NoName:
        def analyze(self, text: str) -> list[str]:
            return []

        def tokens(self, text: str) -> list[Token]:
            return []

    for analyzer in (*ANALYZERS, Blocked(), NoName(), object(), None):
        assert _is_tokenizing(analyzer) == isinstance(analyzer, TokenizingAnalyzer)


def test_the_compiled_windows_refuse_bad_anchors() -> None:
    from weftsearch import highlight

    native = highlight._native
    if native is None:
        return  # not built: the numpy rule runs (the test above checks it)
    good = np.array([0], dtype=np.int64).tobytes()
    for starts, ends, size, message in (
        ([0], [9], 5, "not a span"),
        ([3], [3], 5, "not a span"),
        ([-1], [2], 5, "not a span"),
        ([0], [2], 0, "size must be at least 1"),
        # Too large (the public fragment_size stops far below): the message names the bound.
        ([0], [2], 2**62, f"at most {(2**63 - 1) // 4}, got {2**62}"),
    ):
        with pytest.raises(ValueError, match=message):
            native.fragment_windows(
                "abc def", np.array(starts, np.int64).tobytes(), np.array(ends, np.int64).tobytes(), size
            )
    with pytest.raises(ValueError, match="same length"):
        native.fragment_windows("abc", good, good + good, 2)


def test_only_the_bounded_prefix_is_analysed() -> None:
    seen: list[int] = []

    class Recording(EnglishAnalyzer):
        def token_arrays(self, text: str) -> TokenArrays:
            seen.append(len(text))
            return super().token_arrays(text)

    found = highlight_text(
        "graph " * 100_000, [("graph",)], Recording(), HighlightOptions(max_analyzed_chars=1000)
    )
    assert found.truncated and found.snippets and seen and max(seen) <= 1000


def test_lone_surrogates_and_astral_characters_agree() -> None:
    english = ANALYZERS[0]
    text = "alpha \ud800 beta\udfff gamma \U0001f600 alpha beta " * 20
    units = [("alpha", "beta"), ("gamma",)]
    for options in (HighlightOptions(fragment_size=12), HighlightOptions(number_of_fragments=0)):
        found = highlight_text(text, units, english, options)
        assert found == old_highlight_text(text, units, english, options) and found.snippets
