"""``tokens()`` of the built-in analyzers: the terms of ``analyze()`` with the source span of each word."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weftsearch.analysis import (
    EnglishAnalyzer,
    SimpleAnalyzer,
    Token,
    TokenizingAnalyzer,
)

# Characters that NFKC or case folding changes (ligatures, full-width and circled letters,
# superscripts, fractions, the long s, sharp s, dotted I, final sigma), marks that compose,
# Hangul jamo that compose, apostrophes, and plain letters and separators.
AWKWARD = (
    "\ufb01\ufb02\ufb00\uff21\uff42\uff10\u2460\u00b2\u00bd\u017f\u00df\u0130\u03a3\u03c2"
    "\u0301\u0308\u0327\u1100\u1161\u11a8\uac00\u3392\u2126\u212b\u1e9e"
    "'\u2019 _-.,\t\n"
    "abcsSeE\u00e9\u00c9\u0436\u4e2d\u0645"
)
TEXTS = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=AWKWARD, max_size=60),
    st.lists(
        st.sampled_from(["cat's", "Dogs'", "don't", "THE", "\ufb01le", "\uff26ull", "na\u00efve", "x"])
    ).map(" ".join),
)
ANALYZERS = [EnglishAnalyzer(), SimpleAnalyzer()]


def _check(analyzer: TokenizingAnalyzer, text: str) -> None:
    tokens = analyzer.tokens(text)
    assert [token.term for token in tokens] == analyzer.analyze(text)
    previous_start = previous_end = 0
    for token in tokens:
        assert 0 <= token.start < token.end <= len(text)
        assert token.start >= previous_start and token.end >= previous_end
        # The span is the source word: analysed alone it gives the term (up to the form of
        # sigma, which str.lower chooses by context: final or medial).
        alone = [term.replace("\u03c2", "\u03c3") for term in analyzer.analyze(text[token.start : token.end])]
        assert token.term.replace("\u03c2", "\u03c3") in alone
        previous_start, previous_end = token.start, token.end


@pytest.mark.parametrize("analyzer", ANALYZERS, ids=lambda a: a.name)
@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_tokens_agree_with_analyze(analyzer: TokenizingAnalyzer, text: str) -> None:
    _check(analyzer, text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The cat's \ufb01le", [("cat", "cat's"), ("file", "\ufb01le")]),
        ("\uff26\uff55\uff4c\uff4c width", [("full", "\uff26\uff55\uff4c\uff4c"), ("width", "width")]),
        # A decomposed accent is composed (NFKC); the span keeps the mark with its letter.
        ("cafe\u0301 na\u00efve!", [("caf\u00e9", "cafe\u0301"), ("na\u00efv", "na\u00efve")]),
        ("don't \u2019quoted\u2019 runs", [("don't", "don't"), ("quot", "quoted"), ("run", "runs")]),
        ("STRASSE Stra\u00dfe", [("strass", "STRASSE"), ("strass", "Stra\u00dfe")]),
    ],
)
def test_english_spans(text: str, expected: list[tuple[str, str]]) -> None:
    tokens = EnglishAnalyzer().tokens(text)
    assert [(t.term, text[t.start : t.end]) for t in tokens] == expected


def test_simple_spans_and_final_sigma() -> None:
    text = "\u039f\u0394\u039f\u03a3 Big-cat"
    tokens = SimpleAnalyzer().tokens(text)
    assert tokens == [Token("\u03bf\u03b4\u03bf\u03c2", 0, 4), Token("big", 5, 8), Token("cat", 9, 12)]


def test_both_are_tokenizing_analyzers() -> None:
    assert all(isinstance(a, TokenizingAnalyzer) for a in ANALYZERS)
