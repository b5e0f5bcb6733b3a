"""The ``whitespace`` analyzer: ``text.split()``, its terms counted in one compiled pass.

The oracle is ``Counter(text.split())`` (terms in first-seen order) and the
token indexes in ``text.split()``; the compiled pass must give exactly those,
with its word cache warm or cold, full or not. Also the english analyzer's
counting (which shares the compiled table that counts each term object once).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weftsearch import analysis
from weftsearch.analysis import EnglishAnalyzer, WhitespaceAnalyzer, get_analyzer

# Every kind of whitespace str.split() splits on (ASCII separators \x1c-\x1f included, NEL,
# NBSP, the Unicode spaces), beside characters that are not whitespace (ZWSP, BOM).
SPACES = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2003\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
NOT_SPACES = "\u200b\ufeff\u180e"

TEXTS = [
    "",
    "   ",
    "a b  a\tc\u00a0d\x1ce a",
    "graph retrieval graph ranking fusion retrieval graph",
    "Caf\u00e9 na\u00efve \ufb01le \U0001f600 \U0001f600 \u6771\u4eac \u6771\u4eac",
    # beyond the cache's longest word, and at it
    "x" * 40 + " " + "x" * 40 + " " + "x" * 33 + " " + "x" * 32 + " " + "x" * 32,
    "zero\u200bwidth\ufeffjoined\u180e words",
    "\u3000lead and trail\u2029",
]

token_text = st.lists(
    st.sampled_from(["a", "b", "ab", "\u00e9", "\U0001f600", "\u6771", "x" * 35, NOT_SPACES[0], *SPACES]),
    max_size=60,
).map("".join)


def positions_of(terms: list[str]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for index, term in enumerate(terms):
        found.setdefault(term, []).append(index)
    return found


def check(analyzer: WhitespaceAnalyzer, text: str) -> None:
    terms = text.split()
    counts, length = analyzer.term_counts(text)
    assert list(counts.items()) == list(Counter(terms).items())
    assert length == len(terms)
    positions, length = analyzer.term_positions(text)
    assert list(positions.items()) == list(positions_of(terms).items())
    assert length == len(terms)
    assert analyzer.analyze(text) == terms


def test_whitespace_is_registered_and_splits() -> None:
    analyzer = get_analyzer("whitespace")
    assert isinstance(analyzer, WhitespaceAnalyzer)
    assert analyzer.name == "whitespace"
    assert analyzer.analyze("Mixed CASE  kept\u00a0as-is.") == ["Mixed", "CASE", "kept", "as-is."]


def test_the_compiled_pass_is_used_where_it_is_built() -> None:
    if analysis._compiled is None:
        pytest.skip("weftsearch.native._analysis is not built")
    assert analysis._compiled_split is not None


@pytest.mark.parametrize("compiled", [True, False])
def test_counts_and_positions_match_split(monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    if not compiled:
        monkeypatch.setattr(analysis, "_compiled_split", None)
    analyzer = WhitespaceAnalyzer()
    for text in (*TEXTS, *TEXTS):  # twice: the second time from a warm cache
        check(analyzer, text)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(token_text, min_size=1, max_size=5))
def test_random_texts_match_split(texts: list[str]) -> None:
    analyzer = WhitespaceAnalyzer()
    for text in texts:
        check(analyzer, text)


def test_tokens_are_the_split_tokens_with_their_offsets() -> None:
    analyzer = WhitespaceAnalyzer()
    for text in TEXTS:
        tokens = analyzer.tokens(text)
        assert [token.term for token in tokens] == text.split()
        assert all(text[token.start : token.end] == token.term for token in tokens)


def test_a_full_cache_is_emptied_and_the_counts_stay_the_same() -> None:
    compiled = analysis._compiled_split
    if compiled is None:
        pytest.skip("weftsearch.native._analysis is not built")
    cache = compiled.WordCache()
    text = " ".join(f"w{i % 7}" for i in range(50))
    for _ in range(3):
        counts, length = compiled.split_counts(text, 3, cache)  # a limit of 3 words: emptied mid-text
        assert list(counts.items()) == list(Counter(text.split()).items())
        assert length == 50
        assert cache.size() <= 3


def test_the_compiled_pass_refuses_bad_arguments() -> None:
    compiled = analysis._compiled_split
    if compiled is None:
        pytest.skip("weftsearch.native._analysis is not built")
    with pytest.raises(TypeError, match="WordCache"):
        compiled.split_counts("a b", 10, {})
    with pytest.raises(ValueError, match="limit must be at least 1, got 0"):
        compiled.split_counts("a b", 0, None)
    with pytest.raises(TypeError):
        compiled.split_positions(b"a b", 10, None)


def test_english_counts_fold_equal_terms_of_different_words() -> None:
    # run/running/runs stem to one term from different word objects; words longer than the
    # cache's longest come back as new objects each time: each must be counted as one term.
    long = "supercalifragilisticexpialidocious" + "x" * 10
    text = f"running runs run The dogs dog {long} {long} walking walk {long}"
    analyzer = EnglishAnalyzer()
    for _ in range(2):
        counts, length = analyzer.term_counts(text)
        terms = EnglishAnalyzer().analyze(text)
        assert list(counts.items()) == list(Counter(terms).items())
        assert length == len(terms)
