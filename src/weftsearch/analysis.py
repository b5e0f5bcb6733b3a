"""Analyzers: text in, index terms out.

An analyzer is chosen when an index is created and its name is recorded with
the index, so queries are always analysed exactly as the documents were. Two
are built in:

``english`` (the default)
    NFKC normalisation, Unicode word tokenisation (runs of word characters,
    keeping inner apostrophes as in ``don't``), case folding, removal of the
    English possessive ``'s``, Lucene's English stopword list, then Snowball
    English stemming through PyStemmer.
``simple``
    Lower-casing and splitting on non-word characters; nothing removed, nothing
    stemmed.
``whitespace``
    The text's whitespace-separated tokens, unchanged (``text.split()``): for
    text analysed already (tokens joined by spaces), as tantivy's ``whitespace``
    tokenizer.

More are registered by :mod:`weftsearch.languages` (``snowball-french`` and
the other Snowball languages, ``keyword``, ``cjk``), loaded on the first lookup.

``EnglishAnalyzer.term_counts`` runs a compiled inner loop where it is built
(``weftsearch.native._analysis``; ``WEFTSEARCH_NO_COMPILED_ANALYSIS=1`` turns it
off, see :mod:`weftsearch.native`): the same counts as from Python. So does
``EnglishAnalyzer.token_arrays`` (highlighting's tokens with offsets, as arrays),
which equals ``tokens`` (pure Python, the reference), and
``WhitespaceAnalyzer.term_counts`` (``Counter(text.split())`` in one pass).

A custom analyzer is any object with a ``name`` and an ``analyze(text)``
method (see :class:`Analyzer`); register it with :func:`register_analyzer` so
that an index which records its name can be reopened.
"""

from __future__ import annotations

import operator
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from functools import partial
from types import ModuleType
from typing import Protocol, runtime_checkable

import numpy as np
import Stemmer

from weftsearch.errors import InvalidParameterError, UnknownAnalyzerError
from weftsearch.native.loader import load_extension
from weftsearch.tokens import (
    Token,
    TokenArrays,
    folded_offset_arrays,
    folded_with_offsets,
    offsets_are_identity,
)

__all__ = [
    "Analyzer",
    "Token",
    "TokenizingAnalyzer",
    "EnglishAnalyzer",
    "SimpleAnalyzer",
    "WhitespaceAnalyzer",
    "LUCENE_ENGLISH_STOPWORDS",
    "WORD_MEMO_SIZE",
    "register_analyzer",
    "get_analyzer",
    "analyzer_names",
]

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words).
LUCENE_ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    [
        "a",
        "an",
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
        "such",
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
    ]
)

# Word characters, with apostrophes kept only between word characters, so that
# "don't" stays one token while a quoted 'word' loses its quotes.
_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")
_NON_WORD = re.compile(r"\W+")
#: Runs of word characters: the complement of :data:`_NON_WORD`'s splits.
_NON_WORD_RUN = re.compile(r"\w+")
#: Runs of characters that are not whitespace: the tokens of ``str.split()`` (both use
#: ``str.isspace``'s whitespace).
_NON_SPACE_RUN = re.compile(r"\S+")
_POSSESSIVE_SUFFIXES = ("'s", "\u2019s")
#: ASCII characters \w does not match (and that are not an apostrophe) -> space.
_ASCII_NON_WORD = str.maketrans({chr(c): " " for c in range(128) if not (chr(c).isalnum() or chr(c) in "_'")})

#: Words an :class:`EnglishAnalyzer` remembers the analysis of (word -> stem,
#: or dropped), per instance. A bound on its memory (about 200 bytes a word,
#: so some 26 MB when full); when full it is emptied and refills from the
#: words that follow. It never changes a term, only how fast they come.
WORD_MEMO_SIZE = 1 << 17

#: True for a memo value that is a term (``None`` marks a dropped word).
_IS_TERM = partial(operator.is_not, None)


def _nfkc_casefold(text: str) -> str:
    """The form :class:`EnglishAnalyzer` tokenises: NFKC, then case folding."""
    return unicodedata.normalize("NFKC", text).casefold()


@runtime_checkable
class Analyzer(Protocol):
    """Turns text into the sequence of terms the index stores.

    ``name`` identifies the analyzer in an index's metadata; two analyzers with
    the same name must produce the same terms for every text.
    """

    @property
    def name(self) -> str:
        """Registry name, recorded with the index."""
        ...

    def analyze(self, text: str) -> list[str]:
        """Return the terms of ``text`` in order, repeats kept. O(len(text))."""
        ...


@runtime_checkable
class TokenizingAnalyzer(Analyzer, Protocol):
    """An :class:`Analyzer` that can also say where each term came from.

    ``[t.term for t in tokens(text)] == analyze(text)`` for every text; the
    built-in analyzers all are. Highlighting needs it; indexing and search do
    not.
    """

    def tokens(self, text: str) -> list[Token]:
        """Return the terms of ``text`` with their source offsets, in order. O(len(text))."""
        ...


#: The compiled inner loop (set at the end of this module, once its self-check ran).
_compiled: ModuleType | None = None


class EnglishAnalyzer:
    """Unicode words, case folding, Lucene English stopwords, Snowball English stems.

    Args:
        stopwords: words removed after case folding (before stemming). Defaults
            to :data:`LUCENE_ENGLISH_STOPWORDS`; pass ``frozenset()`` to keep all.
        name: registry name; change it whenever you change ``stopwords``.

    """

    def __init__(
        self,
        stopwords: frozenset[str] = LUCENE_ENGLISH_STOPWORDS,
        name: str = "english",
    ) -> None:
        self._stopwords = frozenset(stopwords)
        self._name = name
        # One stemmer per analyzer instance.
        self._stemmer = Stemmer.Stemmer("english")
        # word (case folded, as the tokenizer yields it) -> its term, or None
        # when the word is dropped (a stopword, or nothing left once the
        # possessive is removed). Bounded by WORD_MEMO_SIZE. Thread-safe: each
        # dict call is atomic, and a miss is resolved into a table local to
        # the call, so a concurrent clear cannot lose a word.
        self._memo: dict[str, str | None] = {}
        # The compiled loop's own word -> term table (words as code points, no str made for a
        # known word); bounded as the memo is. None without the compiled loop.
        self._words = None if _compiled is None else _compiled.WordCache()

    @property
    def name(self) -> str:
        """Registry name (``"english"`` by default)."""
        return self._name

    def analyze(self, text: str) -> list[str]:
        """Return the stemmed, stopword-free terms of ``text``.

        Each distinct word is folded, filtered and stemmed once and remembered
        (:data:`WORD_MEMO_SIZE`), so a text of known words costs one regex
        scan and one dict lookup a word, all in C. O(len(text)).
        """
        words: list[str]
        if text.isascii():
            # NFKC leaves ASCII unchanged and casefold() is lower() on it. Without
            # an apostrophe the words are the runs of [a-z0-9_], which a
            # translate to spaces and a split find faster than the regex.
            folded = text.lower()
            words = _WORD.findall(folded) if "'" in folded else folded.translate(_ASCII_NON_WORD).split()
        else:
            words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
        memo = self._memo
        try:
            return list(filter(_IS_TERM, map(memo.__getitem__, words)))  # type: ignore[arg-type]
        except KeyError:
            pass
        # Some words are new: resolve them (a C-level set difference finds
        # them), remember them, and look the text's words up again.
        self._remember(self._resolve(set(words).difference(memo)))
        try:
            return list(filter(_IS_TERM, map(memo.__getitem__, words)))  # type: ignore[arg-type]
        except KeyError:  # emptied meanwhile (it was full, or by another thread): no memo
            table = self._resolve(set(words))
            return list(filter(_IS_TERM, map(table.__getitem__, words)))  # type: ignore[arg-type]

    def tokens(self, text: str) -> list[Token]:
        """The terms of ``text`` with the source offsets of their words (see :class:`Token`).

        ``[t.term for t in tokens(text)] == analyze(text)``. Pure Python: it
        serves highlighting, which asks for it lazily, per hit and per
        field, on a bounded text; indexing and search use :meth:`analyze`
        and :meth:`term_counts`. A possessive's span covers the whole word
        (``cat's``). O(len(text)).
        """
        folded, starts, ends = folded_with_offsets(text, str.lower if text.isascii() else _nfkc_casefold)
        matches = list(_WORD.finditer(folded))
        words = [match.group() for match in matches]
        # The words' terms from the memo analyze() fills; new ones resolved in one call and remembered.
        memo = self._memo
        table = self._resolve(set(words).difference(memo))
        self._remember(table)
        lookup = table.get
        terms = [memo[word] if word in memo else lookup(word) for word in words]
        make = Token._make
        return [
            make((term, starts[match.start()], ends[match.end() - 1]))
            for term, match in zip(terms, matches, strict=True)
            if term is not None
        ]

    def token_arrays(self, text: str) -> TokenArrays:
        """What :meth:`tokens` gives, as arrays (see :class:`~weftsearch.tokens.TokenArrays`).

        Where the compiled loop is built, words are found and their terms
        looked up in C, which returns the terms' numbers and offsets as one
        buffer; the offsets are mapped back to the source text with numpy
        (the identity for ASCII and for NFKC-normal text that case folding does
        not lengthen). Else (and in a subclass that overrides :meth:`tokens`,
        so that its tokens are the ones highlighted) built from :meth:`tokens`.
        O(len(text)).
        """
        compiled = _compiled_spans
        if compiled is None or type(self).tokens is not EnglishAnalyzer.tokens:
            return TokenArrays.of_tokens(self.tokens(text))
        ascii_text = text.isascii()
        folded = text.lower() if ascii_text else _nfkc_casefold(text)
        found: tuple[dict[str, int], bytes] = compiled.token_spans(
            folded, self._memo, self._stopwords, self._stemmer.stemWord, WORD_MEMO_SIZE
        )
        numbers, packed = found
        table = np.frombuffer(packed, dtype=np.int64).reshape(-1, 3)
        ids, starts, ends = table[:, 0], table[:, 1], table[:, 2]
        if not ascii_text and not offsets_are_identity(text, folded):
            source_starts, source_ends = folded_offset_arrays(text, folded, _nfkc_casefold)
            starts = source_starts[starts]
            ends = source_ends[ends - 1]
        return TokenArrays(numbers, ids, starts, ends)

    def term_counts(self, text: str) -> tuple[dict[str, int], int]:
        """The terms of ``text`` counted: ``(term -> frequency, number of terms)``.

        Equal to ``Counter(analyze(text))`` (terms in first-seen order) and
        ``len(analyze(text))``; what ``Index.add_many`` stores. Where the
        compiled loop (``weftsearch.native._analysis``) is built, words are found,
        looked up in the memo and counted in one pass in C. O(len(text)).
        """
        compiled = _compiled
        if compiled is None:
            terms = self.analyze(text)
            return Counter(terms), len(terms)
        # NFKC leaves ASCII unchanged and casefold() is lower() on it.
        folded = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()
        # Typed by native/_analysis.pyi; the loader hands the module over as a ModuleType.
        counts: tuple[dict[str, int], int] = compiled.term_counts(
            folded, self._memo, self._stopwords, self._stemmer.stemWord, WORD_MEMO_SIZE, self._words
        )
        return counts

    def term_positions(self, text: str) -> tuple[dict[str, list[int]], int]:
        """The terms of ``text`` with their positions: ``(term -> ascending indexes, number of terms)``.

        A term's positions are its indexes in ``analyze(text)`` (terms in
        first-seen order); what indexing with positions stores. One compiled
        pass where :meth:`term_counts` has one, else a Python step per term.
        O(len(text)).
        """
        compiled = _compiled
        if compiled is None:
            terms = self.analyze(text)
            return _positions_of(terms), len(terms)
        folded = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()
        found: tuple[dict[str, list[int]], int] = compiled.term_positions(
            folded, self._memo, self._stopwords, self._stemmer.stemWord, WORD_MEMO_SIZE, self._words
        )
        return found

    def _remember(self, resolved: dict[str, str | None]) -> None:
        """Add ``resolved`` to the memo, emptying it first if it would hold over :data:`WORD_MEMO_SIZE`."""
        memo = self._memo
        if len(memo) + len(resolved) > WORD_MEMO_SIZE:
            memo.clear()
        if len(resolved) <= WORD_MEMO_SIZE:
            memo.update(resolved)

    def _resolve(self, words: Collection[str]) -> dict[str, str | None]:
        """Map each of ``words`` to its term, or to ``None`` if dropped (stemmed in one call).

        The rule, per word: drop a possessive ``'s``, then drop what is empty
        or a stopword, and stem the rest.
        """
        bases = [word[:-2] if word.endswith(_POSSESSIVE_SUFFIXES) else word for word in words]
        kept = [base for base in bases if base and base not in self._stopwords]
        stems: list[str] = self._stemmer.stemWords(kept)
        stem_of = dict(zip(kept, stems, strict=True))
        return {word: stem_of.get(base) for word, base in zip(words, bases, strict=True)}


class SimpleAnalyzer:
    """Lower-case, split on non-word characters; nothing removed or stemmed."""

    @property
    def name(self) -> str:
        """Registry name: ``"simple"``."""
        return "simple"

    def analyze(self, text: str) -> list[str]:
        """Return the lower-cased words of ``text``."""
        return [token for token in _NON_WORD.split(text.lower()) if token]

    def tokens(self, text: str) -> list[Token]:
        """The lower-cased words of ``text`` with their source offsets (see :class:`Token`).

        ``[t.term for t in tokens(text)] == analyze(text)``. Pure Python, for
        highlighting (lazily, per hit). O(len(text)).
        """
        return _word_tokens(text, _NON_WORD_RUN)


class WhitespaceAnalyzer:
    """The text's whitespace-separated tokens, unchanged: for text that is analysed already.

    ``analyze(text)`` is ``text.split()``: no case folding, nothing removed or
    stemmed, so tokens joined by spaces (an analyzer's output, another
    system's tokens) are indexed as they are. :meth:`term_counts` and
    :meth:`term_positions`, what indexing calls, run one compiled pass where
    ``weftsearch.native._analysis`` is built (a known token costs no ``str``);
    the results equal the Python ones.
    """

    def __init__(self) -> None:
        # token -> the str of it, in C: bounded as the english analyzer's memo is (WORD_MEMO_SIZE).
        self._words = None if _compiled_split is None else _compiled_split.WordCache()

    @property
    def name(self) -> str:
        """Registry name: ``"whitespace"``."""
        return "whitespace"

    def analyze(self, text: str) -> list[str]:
        """Return ``text.split()``. O(len(text))."""
        return text.split()

    def tokens(self, text: str) -> list[Token]:
        """The tokens of ``text`` with their offsets in it (see :class:`Token`). O(len(text))."""
        return [Token(match.group(), match.start(), match.end()) for match in _NON_SPACE_RUN.finditer(text)]

    def term_counts(self, text: str) -> tuple[dict[str, int], int]:
        """``(Counter(text.split()), len(text.split()))``: terms in first-seen order. O(len(text))."""
        compiled = _compiled_split
        if compiled is None:
            terms = text.split()
            return Counter(terms), len(terms)
        counts: tuple[dict[str, int], int] = compiled.split_counts(text, WORD_MEMO_SIZE, self._words)
        return counts

    def term_positions(self, text: str) -> tuple[dict[str, list[int]], int]:
        """Each token of ``text.split()`` (first-seen order) with its indexes there, and their number.

        O(len(text)).
        """
        compiled = _compiled_split
        if compiled is None:
            terms = text.split()
            return _positions_of(terms), len(terms)
        found: tuple[dict[str, list[int]], int] = compiled.split_positions(text, WORD_MEMO_SIZE, self._words)
        return found


def _word_tokens(text: str, word: re.Pattern[str]) -> list[Token]:
    """Each match of ``word`` in ``text.lower()`` as a token over its source characters."""
    folded, starts, ends = folded_with_offsets(text, str.lower, per_character=True)
    return [Token(m.group(), starts[m.start()], ends[m.end() - 1]) for m in word.finditer(folded)]


_REGISTRY: dict[str, Callable[[], Analyzer]] = {
    "english": EnglishAnalyzer,
    "simple": SimpleAnalyzer,
    "whitespace": WhitespaceAnalyzer,
}


_languages_loaded = False


def _load_languages() -> None:
    """Register the analyzers of :mod:`weftsearch.languages` (once; imported on first lookup).

    Imported on first use (it loads the stopword lists); a name the user
    registered first keeps the user's factory.
    """
    global _languages_loaded
    if not _languages_loaded:
        from weftsearch.languages import BUILTIN_ANALYZERS

        for name, factory in BUILTIN_ANALYZERS.items():
            _REGISTRY.setdefault(name, factory)
        _languages_loaded = True


def register_analyzer(name: str, factory: Callable[[], Analyzer]) -> None:
    """Make ``get_analyzer(name)`` return ``factory()``.

    Call this before reopening an index created with a custom analyzer.
    Re-registering a name replaces the factory.
    """
    if not isinstance(name, str) or not name:
        raise InvalidParameterError(f"analyzer name must be a non-empty string, got {name!r}")
    _REGISTRY[name] = factory


def get_analyzer(name: str) -> Analyzer:
    """Return a new instance of the analyzer registered under ``name``."""
    if not isinstance(name, str):
        raise UnknownAnalyzerError(f"analyzer names are strings, got {name!r}")
    _load_languages()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownAnalyzerError(
            f"unknown analyzer {name!r}; registered: {', '.join(sorted(_REGISTRY))}"
        ) from None
    analyzer = factory()
    if analyzer.name != name:
        raise UnknownAnalyzerError(
            f"analyzer factory registered as {name!r} built one named {analyzer.name!r}"
        )
    return analyzer


def analyzer_names() -> Sequence[str]:
    """Names of all registered analyzers, sorted (the built-in languages included)."""
    _load_languages()
    return sorted(_REGISTRY)


def _agrees_with_python(module: ModuleType) -> bool:
    """The compiled loop against :meth:`EnglishAnalyzer.analyze` on a sample: same terms, counts, order.

    The self-check of :func:`~weftsearch.native.loader.load_extension`: words
    with apostrophes and possessives, stopwords, non-ASCII text folded by NFKC,
    digits and underscores, and an empty text.
    """
    samples = (
        "The cats' owner's DOGS don't run, running; it's 42 under_score words words",
        "Caf\u00e9 na\u00efve \ufb01le \u2019quoted\u2019 Stra\u00dfe r\u00e9sum\u00e9s",
        "a an the",
        "",
    )
    cache = module.WordCache()  # shared by the samples and run twice: its hits are checked too
    for text in (*samples, *samples):
        analyzer = EnglishAnalyzer()
        folded = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()
        counts, total = module.term_counts(
            folded, analyzer._memo, analyzer._stopwords, analyzer._stemmer.stemWord, WORD_MEMO_SIZE, cache
        )
        terms = EnglishAnalyzer().analyze(text)
        if list(counts.items()) != list(Counter(terms).items()) or total != len(terms):
            return False
        positions, total = module.term_positions(
            folded, analyzer._memo, analyzer._stopwords, analyzer._stemmer.stemWord, WORD_MEMO_SIZE, cache
        )
        if list(positions.items()) != list(_positions_of(terms).items()) or total != len(terms):
            return False
    return True


def _positions_of(terms: Sequence[str]) -> dict[str, list[int]]:
    """Each term of ``terms`` (first-seen order) with its indexes in ``terms``, ascending."""
    positions: dict[str, list[int]] = {}
    for index, term in enumerate(terms):
        found = positions.get(term)
        if found is None:
            positions[term] = [index]
        else:
            found.append(index)
    return positions


#: The compiled inner loop of :meth:`EnglishAnalyzer.term_counts`, or ``None`` (not built, switched
#: off, or its self-check disagreed): then the same counts come from Python.
_compiled = load_extension("_analysis", _agrees_with_python)


def _spans_agree(module: ModuleType) -> bool:
    """The compiled ``token_spans`` against the Python words on samples: same terms, same offsets."""
    if not hasattr(module, "token_spans"):
        return False  # built before it existed
    samples = (
        "The cats' owner's DOGS don't run, running; it's 42 under_score words words",
        "Caf\u00e9 na\u00efve \ufb01le \u2019quoted\u2019 Stra\u00dfe r\u00e9sum\u00e9s \u00b5g x\u00b2",
        "a an the",
        "",
    )
    for text in samples:
        analyzer = EnglishAnalyzer()
        folded = text.lower() if text.isascii() else _nfkc_casefold(text)
        numbers, packed = module.token_spans(
            folded, analyzer._memo, analyzer._stopwords, analyzer._stemmer.stemWord, WORD_MEMO_SIZE
        )
        table = np.frombuffer(packed, dtype=np.int64).reshape(-1, 3)
        terms = list(numbers)
        expected = [
            (token.term, token.start, token.end) for token in _word_spans_of(EnglishAnalyzer(), folded)
        ]
        if [(terms[number], start, end) for number, start, end in table.tolist()] != expected:
            return False
    return True


def _word_spans_of(analyzer: EnglishAnalyzer, folded: str) -> list[Token]:
    """The kept words of already folded text with their offsets in it (the self-check's reference)."""
    found = []
    for match in _WORD.finditer(folded):
        term = analyzer._resolve([match.group()])[match.group()]
        if term is not None:
            found.append(Token(term, match.start(), match.end()))
    return found


#: The compiled scan of :meth:`EnglishAnalyzer.token_arrays`, or ``None`` (then it is built from
#: :meth:`EnglishAnalyzer.tokens`).
_compiled_spans: ModuleType | None = _compiled if _compiled is not None and _spans_agree(_compiled) else None


def _split_agrees(module: ModuleType) -> bool:
    """The compiled ``split_counts`` and ``split_positions`` against ``text.split()`` on samples."""
    if not hasattr(module, "split_counts"):
        return False  # built before it existed
    samples = (
        "a b  a\tc\u00a0d\x1ce a\u2003\u3000b ",
        "Caf\u00e9 na\u00efve \ufb01le \U0001f600 \U0001f600 " + "x" * 40 + " " + "x" * 40,
        "",
        " \n ",
    )
    cache = module.WordCache()  # shared by the samples and run twice: its hits are checked too
    for text in (*samples, *samples):
        terms = text.split()
        counts, total = module.split_counts(text, WORD_MEMO_SIZE, cache)
        if list(counts.items()) != list(Counter(terms).items()) or total != len(terms):
            return False
        positions, total = module.split_positions(text, WORD_MEMO_SIZE, cache)
        if list(positions.items()) != list(_positions_of(terms).items()) or total != len(terms):
            return False
    return True


#: The compiled passes of :class:`WhitespaceAnalyzer`, or ``None`` (then ``text.split()`` in Python).
_compiled_split: ModuleType | None = _compiled if _compiled is not None and _split_agrees(_compiled) else None
