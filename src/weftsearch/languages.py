"""Analyzers per language and per kind of field: Snowball languages, keyword and CJK.

Registered in :mod:`weftsearch.analysis`'s registry (``get_analyzer(name)``),
which loads :data:`BUILTIN_ANALYZERS` the first time a name is looked up:

``snowball-<algorithm>``, one per algorithm PyStemmer offers (``Stemmer.algorithms()``:
    ``snowball-french``, ``snowball-german``, ``snowball-russian``, ...; also
    ``snowball-english``, ``snowball-porter`` and ``snowball-dutch_porter``).
    NFKC, Unicode words (inner apostrophes kept, as ``english``), case folding,
    Lucene's elision of articles (``l'homme`` -> ``homme``) for French,
    Italian, Catalan and Irish, the English possessive ``'s`` removed for the
    English algorithms, the language's stopwords from the ``stopwordsiso``
    package (dropped before stemming, compared after the same NFKC and case
    folding), then the Snowball stemmer. The names carry the ``snowball-``
    prefix so the built-in ``english`` (Lucene's 33 stopwords) keeps its
    meaning. Languages with no list in ``stopwordsiso`` (:data:`NO_STOPWORDS`:
    Nepali, Serbian, Tamil, Yiddish) drop no word.
``keyword``
    The whole text as one term, exactly as given (no normalisation, no case
    folding), as Lucene's ``KeywordAnalyzer``: for ids and tags that must match
    exactly. An empty text gives no term.
``cjk``
    As Lucene's ``CJKAnalyzer``: NFKC (which folds full- and half-width forms
    as its ``CJKWidthFilter`` does) and case folding, then each run of
    adjacent Han, Hiragana, Katakana or Hangul characters becomes its
    overlapping bigrams (a run of one character is that character), every
    other word is a word as the ``simple`` analyzer finds it, and Lucene's CJK
    stopwords (English) are dropped.

Every analyzer here also has ``tokens(text)`` (terms with source offsets), in
Python; highlighting calls it lazily, per hit.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable

import Stemmer
import stopwordsiso

from weftsearch.tokens import Token, folded_with_offsets

__all__ = [
    "SnowballAnalyzer",
    "KeywordAnalyzer",
    "CJKAnalyzer",
    "SNOWBALL_PREFIX",
    "STOPWORD_LANGUAGE",
    "NO_STOPWORDS",
    "CJK_STOPWORDS",
    "snowball_stopwords",
    "BUILTIN_ANALYZERS",
    "WORD_MEMO_SIZE",
]

#: Registry names of the Snowball analyzers are this prefix and the algorithm's name.
SNOWBALL_PREFIX = "snowball-"

#: Snowball algorithm -> ISO 639-1 code of its stopword list in ``stopwordsiso``.
STOPWORD_LANGUAGE: dict[str, str] = {
    "arabic": "ar",
    "armenian": "hy",
    "basque": "eu",
    "catalan": "ca",
    "czech": "cs",
    "danish": "da",
    "dutch": "nl",
    "dutch_porter": "nl",
    "english": "en",
    "esperanto": "eo",
    "estonian": "et",
    "finnish": "fi",
    "french": "fr",
    "german": "de",
    "greek": "el",
    "hindi": "hi",
    "hungarian": "hu",
    "indonesian": "id",
    "irish": "ga",
    "italian": "it",
    "lithuanian": "lt",
    "nepali": "ne",
    "norwegian": "no",
    "persian": "fa",
    "polish": "pl",
    "porter": "en",
    "portuguese": "pt",
    "romanian": "ro",
    "russian": "ru",
    "serbian": "sr",
    "sesotho": "st",
    "spanish": "es",
    "swedish": "sv",
    "tamil": "ta",
    "turkish": "tr",
    "yiddish": "yi",
}

#: Algorithms whose language has no stopword list in ``stopwordsiso`` (0.7): nothing is dropped.
NO_STOPWORDS: frozenset[str] = frozenset(
    algorithm
    for algorithm in Stemmer.algorithms()
    if not stopwordsiso.has_lang(STOPWORD_LANGUAGE.get(algorithm, ""))
)

#: Articles Lucene's ``ElisionFilter`` removes before an apostrophe, per algorithm.
ELISIONS: dict[str, frozenset[str]] = {
    "french": frozenset(
        ["l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu"]
    ),
    "italian": frozenset(
        [
            "c",
            "l",
            "all",
            "dall",
            "dell",
            "nell",
            "sull",
            "coll",
            "pell",
            "gl",
            "agl",
            "dagl",
            "degl",
            "negl",
            "sugl",
            "un",
            "m",
            "t",
            "s",
            "v",
            "d",
        ]
    ),
    "catalan": frozenset(["d", "l", "m", "n", "s", "t"]),
    "irish": frozenset(["d", "m", "b"]),
}

#: Lucene ``CJKAnalyzer``'s default stopwords (``stopwords.txt`` of its package): Lucene's
#: English set and ``s``, ``t``, ``www``.
CJK_STOPWORDS: frozenset[str] = frozenset(
    [
        "a",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "s",
        "such",
        "t",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
        "www",
    ]
)

#: Words a :class:`SnowballAnalyzer` remembers the term of (as ``english`` does), per instance;
#: emptied when full.
WORD_MEMO_SIZE = 1 << 17


@functools.cache
def _word_pattern() -> re.Pattern[str]:
    """A word: a word character, then word characters and combining marks, inner apostrophes kept.

    As :mod:`weftsearch.analysis`'s words, marks added. Built on first use
    (some 0.1 s), so registering the analyzers costs nothing.
    """
    marks = _mark_class()
    return re.compile(f"\\w[\\w{marks}]*(?:['\u2019]\\w[\\w{marks}]*)*")


def _mark_class() -> str:
    r"""A regex class body of every combining mark (categories Mn, Mc, Me), as ranges.

    Python's ``\w`` leaves them out, which would cut a Devanagari or Tamil
    word at every vowel sign. Scanned once, over the planes that
    hold marks (some 0.2 M code points).
    """
    ranges: list[tuple[int, int]] = []
    for code in (*range(0x30000), *range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(code)) in ("Mn", "Mc", "Me"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges)


_APOSTROPHES = ("'", "\u2019")
_POSSESSIVE_SUFFIXES = ("'s", "\u2019s")
_ENGLISH_ALGORITHMS = frozenset(["english", "porter"])

# Han (with extensions and compatibility ideographs), Hiragana, Katakana (with its
# phonetic extensions and the prolonged sound mark) and Hangul (syllables and jamo):
# the scripts Lucene's CJKBigramFilter joins into bigrams.
_CJK_CLASS = (
    "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\U00020000-\U0003134f"
)
# A CJK run, or a word of other word characters.
_CJK_OR_WORD = re.compile(f"(?P<cjk>[{_CJK_CLASS}]+)|(?:(?![{_CJK_CLASS}])\\w)+")


def _fold(text: str) -> str:
    """NFKC, then case folding: the form every analyzer here but ``keyword`` tokenises."""
    return unicodedata.normalize("NFKC", text).casefold()


def snowball_stopwords(algorithm: str) -> frozenset[str]:
    """The stopwords a ``snowball-<algorithm>`` analyzer drops, NFKC-normalised and case folded.

    From ``stopwordsiso`` by the language's ISO 639-1 code
    (:data:`STOPWORD_LANGUAGE`); empty for the languages in :data:`NO_STOPWORDS`.
    """
    code = STOPWORD_LANGUAGE.get(algorithm, "")
    if not stopwordsiso.has_lang(code):
        return frozenset()
    return frozenset(_fold(word) for word in stopwordsiso.stopwords(code))


class SnowballAnalyzer:
    """Unicode words, case folding, elision, stopwords, then a Snowball stemmer (see the module).

    Args:
        algorithm: one of ``Stemmer.algorithms()``.
        stopwords: words dropped (after folding, before stemming); ``None``
            means the language's list (:func:`snowball_stopwords`).
        name: registry name; ``None`` means ``snowball-<algorithm>``. Change it
            whenever you change ``stopwords``.

    """

    def __init__(
        self, algorithm: str, stopwords: frozenset[str] | None = None, name: str | None = None
    ) -> None:
        self._algorithm = algorithm
        self._stemmer = Stemmer.Stemmer(algorithm)
        self._stopwords = snowball_stopwords(algorithm) if stopwords is None else frozenset(stopwords)
        self._elisions = ELISIONS.get(algorithm, frozenset())
        self._possessive = algorithm in _ENGLISH_ALGORITHMS
        self._name = SNOWBALL_PREFIX + algorithm if name is None else name
        # word (folded) -> its term, or None when dropped; bounded by WORD_MEMO_SIZE.
        self._memo: dict[str, str | None] = {}

    @property
    def name(self) -> str:
        """Registry name (``snowball-<algorithm>`` by default)."""
        return self._name

    @property
    def algorithm(self) -> str:
        """The Snowball algorithm (``"french"``, ...)."""
        return self._algorithm

    @property
    def stopwords(self) -> frozenset[str]:
        """The words dropped, as compared (folded)."""
        return self._stopwords

    def _term(self, word: str) -> str | None:
        """The term of one folded word, or ``None`` when it is dropped (remembered)."""
        memo = self._memo
        if word in memo:
            return memo[word]
        base = word
        if self._elisions:
            for apostrophe in _APOSTROPHES:
                head, found, rest = base.partition(apostrophe)
                if found and head in self._elisions:
                    base = rest
                    break
        if self._possessive and base.endswith(_POSSESSIVE_SUFFIXES):
            base = base[:-2]
        term = self._stemmer.stemWord(base) if base and base not in self._stopwords else None
        if len(memo) >= WORD_MEMO_SIZE:
            memo.clear()
        memo[word] = term
        return term

    def analyze(self, text: str) -> list[str]:
        """Return the stemmed, stopword-free terms of ``text``. O(len(text))."""
        terms = map(self._term, _word_pattern().findall(_fold(text)))
        return [term for term in terms if term is not None]

    def tokens(self, text: str) -> list[Token]:
        """The terms of ``text`` with their words' source offsets (for highlighting). O(len(text))."""
        folded, starts, ends = folded_with_offsets(text, _fold)
        found: list[Token] = []
        for match in _word_pattern().finditer(folded):
            term = self._term(match.group())
            if term is not None:
                found.append(Token(term, starts[match.start()], ends[match.end() - 1]))
        return found


class KeywordAnalyzer:
    """The whole text as one term, exactly as given (Lucene's ``KeywordAnalyzer``): ids, tags."""

    @property
    def name(self) -> str:
        """Registry name: ``"keyword"``."""
        return "keyword"

    def analyze(self, text: str) -> list[str]:
        """``[text]``, or ``[]`` for the empty text."""
        return [text] if text else []

    def tokens(self, text: str) -> list[Token]:
        """The one term over the whole text, or none for the empty text."""
        return [Token(text, 0, len(text))] if text else []


class CJKAnalyzer:
    """Overlapping bigrams of CJK runs, other words whole (Lucene's ``CJKAnalyzer``; see the module).

    Args:
        stopwords: words dropped (after folding); defaults to :data:`CJK_STOPWORDS`.
        name: registry name; change it whenever you change ``stopwords``.

    """

    def __init__(self, stopwords: frozenset[str] = CJK_STOPWORDS, name: str = "cjk") -> None:
        self._stopwords = frozenset(stopwords)
        self._name = name

    @property
    def name(self) -> str:
        """Registry name (``"cjk"`` by default)."""
        return self._name

    def analyze(self, text: str) -> list[str]:
        """Return the bigrams and words of ``text``. O(len(text))."""
        return [token.term for token in self._spans(_fold(text))]

    def tokens(self, text: str) -> list[Token]:
        """The terms of ``text`` with their source offsets (a bigram spans its two characters)."""
        folded, starts, ends = folded_with_offsets(text, _fold)
        return [Token(t.term, starts[t.start], ends[t.end - 1]) for t in self._spans(folded)]

    def _spans(self, folded: str) -> list[Token]:
        """The terms of already folded text, with offsets into it."""
        found: list[Token] = []
        for match in _CJK_OR_WORD.finditer(folded):
            start, end = match.span()
            if match.group("cjk") is None:
                if match.group() not in self._stopwords:
                    found.append(Token(match.group(), start, end))
            elif end - start == 1:
                found.append(Token(match.group(), start, end))
            else:
                found.extend(Token(folded[i : i + 2], i, i + 2) for i in range(start, end - 1))
        return found


#: The analyzers this module adds to :mod:`weftsearch.analysis`'s registry: name -> factory.
BUILTIN_ANALYZERS: dict[str, Callable[[], SnowballAnalyzer | KeywordAnalyzer | CJKAnalyzer]] = {
    **{SNOWBALL_PREFIX + a: functools.partial(SnowballAnalyzer, a) for a in Stemmer.algorithms()},
    "keyword": KeywordAnalyzer,
    "cjk": CJKAnalyzer,
}
