"""The fast EnglishAnalyzer gives exactly the terms of the straightforward one, term for term.

The reference below is the analyzer as it was before the word memo and the
ASCII fast path (one regex scan, a Python loop for possessives and stopwords,
PyStemmer's ``stemWords`` on every word), kept here as the oracle.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
import Stemmer

from weftsearch import analysis
from weftsearch.analysis import LUCENE_ENGLISH_STOPWORDS, EnglishAnalyzer

SCIFACT = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"

_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")


class ReferenceEnglish:
    """The english analyzer's rule, written out plainly (the oracle)."""

    def __init__(self, stopwords: frozenset[str] = LUCENE_ENGLISH_STOPWORDS) -> None:
        self.stopwords = stopwords
        self.stemmer = Stemmer.Stemmer("english")

    def analyze(self, text: str) -> list[str]:
        folded = unicodedata.normalize("NFKC", text).casefold()
        words: list[str] = []
        for word in _WORD.findall(folded):
            if word.endswith(("'s", "\u2019s")):
                word = word[:-2]
            if word and word not in self.stopwords:
                words.append(word)
        stems: list[str] = self.stemmer.stemWords(words)
        return stems


# Texts that exercise every branch: NFKC (ligatures, full-width, superscripts,
# compatibility forms), casefold beyond lower() (ß, final sigma, Turkish dotted
# I), apostrophes of both kinds in every position, possessives of stopwords,
# digits of other scripts, combining marks, CJK, emoji, underscores.
UNICODE_TEXTS = [
    "",
    "   ",
    "The cat's whiskers and the dogs' bones",
    "It's its; it\u2019s ITS. 's 'S' ''s x''s don't 'quoted' rock'n'roll o'clock",
    "the's a's THE\u2019S and's this's that\u2019s",
    "\ufb01nancial \ufb02ows \uff26\uff35\uff2c\uff2c\uff37\uff29\uff24\uff34\uff28 x\u00b2 \u2460 \u2168",
    "Stra\u00dfe STRASSE stra\u00dfe \u03a3\u039f\u03a6\u039f\u03a3 \u03c3\u03bf\u03c6\u03bf\u03c2",
    "\u0130stanbul \u0131 \u0130I\u0307",
    "Caf\u00e9 cafe\u0301 na\u00efve NA\u00cfVE r\u00e9sum\u00e9s co\u00f6perating",
    "\u0661\u0662\u0663 \u0967\u0968 12,000 3.14 10\u00b3 \u00bd",
    "\u6771\u4eac\u90fd \u5927\u5b66 \u30c6\u30b9\u30c8 \ud55c\uad6d\uc5b4 \u0645\u0631\u062d\u0628\u0627",
    "emoji \U0001f600 smiles \U0001f44d\U0001f3fd running_fast snake_case __init__",
    "Tab\tnew\nline\r\nend\u2028sep\u2029para \u00a0nbsp\u2009thin",
    "\u2019twas \u2019tis the season\u2019s greetings\u2019",
    "running runs ran runner easily fairly generously happiness",
    "A\u0308\u0304 \u1e9b\u0323 \u212b \u2126 \u00c5 \u01c4 \u01c5 \u01c6",
]


def check_same(texts: list[str], analyzer: EnglishAnalyzer, reference: ReferenceEnglish) -> None:
    """``analyze`` and ``term_counts`` (compiled or not) give the reference's terms exactly.

    ``counter`` only ever counts, so its memo is filled by term_counts itself
    (the compiled resolution of new words, where built), not by ``analyze``.
    """
    plain = EnglishAnalyzer(analyzer._stopwords, analyzer.name)
    counter = EnglishAnalyzer(analyzer._stopwords, analyzer.name)
    positioner = EnglishAnalyzer(analyzer._stopwords, analyzer.name)
    for text in texts:
        expected = reference.analyze(text)
        assert analyzer.analyze(text) == expected, text
        for counting in (counter, analyzer):
            counts, length = counting.term_counts(text)
            assert length == len(expected), text
            assert list(counts.items()) == list(Counter(expected).items()), text  # order too
        where = {term: [i for i, t in enumerate(expected) if t == term] for term in dict.fromkeys(expected)}
        for listing in (positioner, analyzer):
            positions, length = listing.term_positions(text)
            assert length == len(expected), text
            assert list(positions.items()) == list(where.items()), text  # order too
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(analysis, "_compiled", None)
            assert plain.term_counts(text) == (Counter(expected), len(expected)), text
            assert plain.term_positions(text) == (where, len(expected)), text


def test_the_compiled_loop_is_checked_where_it_is_built() -> None:
    # Says so when the checks of this file ran against Python alone.
    if vars(analysis)["_compiled"] is None:
        pytest.skip("weftsearch.native._analysis is not built (setup.py build_ext --inplace): Python only")
    counts = EnglishAnalyzer().term_counts("The walkers' walks, walking")
    assert counts == ({"walker": 1, "walk": 2}, 3)
    assert EnglishAnalyzer().term_positions("The walkers' walks, walking") == (
        {"walker": [0], "walk": [1, 2]},
        3,
    )


def test_unicode_texts_match_the_reference() -> None:
    analyzer, reference = EnglishAnalyzer(), ReferenceEnglish()
    check_same(UNICODE_TEXTS, analyzer, reference)
    check_same(UNICODE_TEXTS, analyzer, reference)  # second time from the memo
    check_same(list(reversed(UNICODE_TEXTS)), EnglishAnalyzer(), reference)


def test_random_unicode_texts_match_the_reference() -> None:
    rng = random.Random(14)
    alphabet = (
        "abcxyzABCXYZ0129_'\u2019 .,;-s"
        "\u00df\u00e9\u0301\u0308\u03a3\u03c3\u03c2\u0130\u0131\ufb01\uff21\u00b2\u0661\u6771\u3000\u00a0"
    )
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    check_same(texts, EnglishAnalyzer(), ReferenceEnglish())


def test_random_ascii_texts_match_the_reference() -> None:
    # Every ASCII character, words and stopwords among them: the translate-and-split path.
    rng = random.Random(15)
    pieces = [chr(c) for c in range(128)] + ["the", "cat's", "running", "don't", "A_B", "x9"] * 8
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    assert all(text.isascii() for text in texts)
    assert sum("'" not in text for text in texts) > 300
    check_same(texts, EnglishAnalyzer(), ReferenceEnglish())


def test_custom_stopwords_match_the_reference() -> None:
    stopwords = frozenset({"cat", "dog", "\u00e9t\u00e9", "strasse"})
    analyzer = EnglishAnalyzer(stopwords, name="english-pets")
    texts = [*UNICODE_TEXTS, "cat's dog's \u00c9T\u00c9 Stra\u00dfe cats"]
    check_same(texts, analyzer, ReferenceEnglish(stopwords))


def test_full_memo_is_emptied_and_terms_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "WORD_MEMO_SIZE", 5)
    analyzer, reference = EnglishAnalyzer(), ReferenceEnglish()
    texts = ["one two three four", "five six seven eight nine ten eleven", "one five eleven twelve"]
    check_same(texts * 2, analyzer, reference)
    assert len(analyzer._memo) <= 5
    # A text with more distinct words than the memo holds is analysed without it.
    check_same(["alpha beta gamma delta epsilon zeta eta theta"], analyzer, reference)
    assert len(analyzer._memo) <= 5
    # term_counts while the memo is emptied at every new word (as another thread might).
    fresh = EnglishAnalyzer()

    class LosingStemmer:
        def stemWord(self, word: str) -> str:  # noqa: N802 - PyStemmer's name
            fresh._memo.clear()
            stem: str = Stemmer.Stemmer("english").stemWord(word)
            return stem

    monkeypatch.setattr(fresh, "_stemmer", LosingStemmer())
    text = "graphs ranked by the walkers' walks, graphs walks"
    expected = reference.analyze(text)
    assert fresh.term_counts(text) == (Counter(expected), len(expected))


@pytest.mark.slow
def test_scifact_matches_the_reference_term_for_term() -> None:
    if not SCIFACT.is_file():
        pytest.skip(f"SciFact not found at {SCIFACT} (../shared/datasets/scifact)")
    from weftsearch.corpus import load_documents

    texts = [document.text for document in load_documents(SCIFACT, progress=False)]
    analyzer, reference = EnglishAnalyzer(), ReferenceEnglish()
    check_same(texts, analyzer, reference)
    check_same(texts[:500], analyzer, reference)  # from the memo


def test_the_compiled_word_cache_gives_the_memos_terms_and_stays_bounded() -> None:
    """The C word -> term table (``WordCache``): the same terms, hit or miss, emptied at its limit."""
    module = vars(analysis)["_compiled"]
    if module is None:
        pytest.skip("weftsearch.native._analysis is not built (setup.py build_ext --inplace): Python only")
    reference = ReferenceEnglish()
    rng = random.Random(31)
    words = [
        *(
            "running",
            "cat's",
            "don't",
            "the",
            "Stra\u00dfe",
            "\u6771\u4eac",
            "\U0001f600x",
            "x" * 32,
            "y" * 33,
        ),
        *("caf\u00e9s", "r\u00e9sum\u00e9", "a_b", "\u2019tis", "dogs\u2019"),
    ]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) for _ in range(400)]
    for limit in (3, 1000):  # 3: emptied again and again
        analyzer = EnglishAnalyzer()
        cache = module.WordCache()
        for text in texts + texts:  # the second time, known words come from the cache
            folded = unicodedata.normalize("NFKC", text).casefold()
            expected = reference.analyze(text)
            counts, length = module.term_counts(
                folded, {}, analyzer._stopwords, analyzer._stemmer.stemWord, limit, cache
            )
            assert (list(counts.items()), length) == (list(Counter(expected).items()), len(expected)), text
            positions, length = module.term_positions(
                folded, {}, analyzer._stopwords, analyzer._stemmer.stemWord, limit, cache
            )
            assert sum(map(len, positions.values())) == length == len(expected), text
            assert cache.size() <= limit
    # The analyzer's own cache fills from term_counts (a known word then costs no str).
    analyzer = EnglishAnalyzer()
    analyzer.term_counts("walkers walk")
    assert analyzer._words is not None and analyzer._words.size() == 2
    with pytest.raises(TypeError, match="WordCache"):
        module.term_counts("a", {}, frozenset(), str, 10, {})
