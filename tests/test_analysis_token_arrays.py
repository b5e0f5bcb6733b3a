"""``EnglishAnalyzer.token_arrays``: the compiled tokens with offsets, equal to the Python ``tokens()``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weftsearch import analysis
from weftsearch.analysis import WORD_MEMO_SIZE, EnglishAnalyzer
from weftsearch.tokens import Token, TokenArrays

# What NFKC or case folding changes (ligatures, full-width letters, superscripts, sharp s,
# dotted I, sigma, composing marks and jamo), apostrophes, separators, accents, CJK, Arabic,
# digits of other scripts, emoji (outside the BMP, with a variation selector and a ZWJ).
ALPHABET = (
    "\ufb01\ufb00\uff21\uff42\uff10\u00b2\u00bd\u017f\u00df\u0130\u03a3\u03c2\u00b5"
    "\u0301\u0308\u0327\u1100\u1161\u11a8\uac00\u3392\u2126\u1e9e"
    "'\u2019 _-.,;:!?\"()\t\n\u00a0\u2003"
    "abcdesStT\u00e9\u00c9\u00e8\u00fc\u00f1\u0436\u4e2d\u6587\u3042\u0645\u0663"
    "\U0001f600\U0001f44d\ufe0f\u200d\U00020000"
)
WORDS = [
    "cat's",
    "Dogs'",
    "don't",
    "THE",
    "and",
    "\ufb01le",
    "\uff26ull",
    "na\u00efve",
    "running",
    "r\u00e9sum\u00e9",
]
TEXTS = st.one_of(
    st.text(max_size=80),
    st.text(alphabet=ALPHABET, max_size=80),
    st.lists(st.sampled_from([*WORDS, ",", "\u4e2d\u6587", "\U0001f600", "\u00b5g"])).map(" ".join),
)

needs_compiled = pytest.mark.skipif(
    analysis._compiled_spans is None, reason="the compiled analysis loop is not built (or switched off)"
)


@needs_compiled
@settings(max_examples=400, deadline=None)
@given(text=TEXTS)
def test_compiled_token_arrays_equal_the_python_tokens(text: str) -> None:
    analyzer = EnglishAnalyzer()
    arrays = analyzer.token_arrays(text)
    expected = EnglishAnalyzer().tokens(text)
    assert arrays.tokens() == expected
    assert list(arrays.numbers) == list(dict.fromkeys(token.term for token in expected))
    assert arrays.ids.dtype == arrays.starts.dtype == arrays.ends.dtype


@settings(max_examples=100, deadline=None)
@given(text=TEXTS)
def test_the_fallback_without_the_compiled_loop_gives_the_same_arrays(text: str) -> None:
    analyzer = EnglishAnalyzer()
    saved = analysis._compiled_spans
    analysis._compiled_spans = None
    try:
        arrays = analyzer.token_arrays(text)
    finally:
        analysis._compiled_spans = saved
    assert arrays.tokens() == EnglishAnalyzer().tokens(text)


def test_of_tokens_numbers_terms_in_first_seen_order() -> None:
    arrays = TokenArrays.of_tokens([Token("b", 0, 1), Token("a", 2, 3), Token("b", 4, 5)])
    assert arrays.numbers == {"b": 0, "a": 1}
    assert arrays.ids.tolist() == [0, 1, 0]
    assert arrays.starts.tolist() == [0, 2, 4] and arrays.ends.tolist() == [1, 3, 5]
    assert arrays.tokens() == [Token("b", 0, 1), Token("a", 2, 3), Token("b", 4, 5)]


@needs_compiled
@pytest.mark.parametrize("text", ["x", "x y", "x " * 5000, "x" * 3 + " y" * 777, ""])
def test_the_compiled_table_is_bounded_by_the_text(text: str) -> None:
    # The densest text (one-letter words, one separator each) fills the table to its bound.
    analyzer = EnglishAnalyzer()
    assert analysis._compiled_spans is not None
    numbers, table = analysis._compiled_spans.token_spans(
        text, analyzer._memo, analyzer._stopwords, analyzer._stemmer.stemWord, WORD_MEMO_SIZE
    )
    assert len(table) == 24 * len(text.split()) <= 12 * (len(text) + 2)
    assert list(numbers) == list(dict.fromkeys(text.split()))


@needs_compiled
def test_the_compiled_loop_reports_a_stemmer_error() -> None:
    analyzer = EnglishAnalyzer()

    def broken(word: str) -> str:
        raise ValueError(f"no stem for {word}")

    assert analysis._compiled_spans is not None
    with pytest.raises(ValueError, match="no stem for newword"):
        analysis._compiled_spans.token_spans("a newword", {}, analyzer._stopwords, broken, WORD_MEMO_SIZE)


def test_a_subclass_overriding_tokens_gets_its_own_tokens_as_arrays() -> None:
    class Shouting(EnglishAnalyzer):
        def tokens(self, text: str) -> list[Token]:
            return [Token(token.term.upper(), token.start, token.end) for token in super().tokens(text)]

    arrays = Shouting().token_arrays("Running dogs")
    assert arrays.tokens() == [Token("RUN", 0, 7), Token("DOG", 8, 12)]
