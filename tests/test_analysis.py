"""Analyzers: the english and simple built-ins, the registry, and the analyzer an index records."""

from __future__ import annotations

from pathlib import Path

import pytest

from weftsearch import (
    RRF,
    Analyzer,
    BM25Scorer,
    Document,
    EnglishAnalyzer,
    Index,
    SimpleAnalyzer,
    get_analyzer,
    register_analyzer,
)
from weftsearch.analysis import LUCENE_ENGLISH_STOPWORDS, analyzer_names
from weftsearch.errors import UnknownAnalyzerError

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, copied independently.
LUCENE_33 = [
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


def english(text: str) -> list[str]:
    return EnglishAnalyzer().analyze(text)


def test_stopword_list_is_lucenes() -> None:
    assert len(LUCENE_33) == 33
    assert frozenset(LUCENE_33) == LUCENE_ENGLISH_STOPWORDS


def test_stopwords_removed() -> None:
    assert english(" ".join(LUCENE_33)) == []
    assert english("The cat and the hat") == ["cat", "hat"]
    # Words that other stopword lists drop but Lucene's keeps.
    assert english("she was here") == ["she", "here"]
    assert english("we have our own") == ["we", "have", "our", "own"]


def test_stopwords_removed_after_case_folding() -> None:
    assert english("THE Cat AND The Hat") == ["cat", "hat"]


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("running", "run"),
        ("runs", "run"),
        ("dogs", "dog"),
        ("ponies", "poni"),
        ("generously", "generous"),
        ("retrieval", "retriev"),
        ("connected", "connect"),
        ("connection", "connect"),
    ],
)
def test_snowball_stems(word: str, stem: str) -> None:
    assert english(word) == [stem]


def test_case_folding() -> None:
    assert english("RUNNING Running running") == ["run", "run", "run"]
    # casefold, not lower: the German sharp s folds to "ss".
    assert english("STRASSE straße") == english("strasse strasse")


def test_unicode_words() -> None:
    assert english("Café") == ["café"]
    assert english("naïve") == english("NAÏVE")
    assert english("naïve")[0].startswith("naïv")
    assert english("Café naïve résumé") == [english("café")[0], english("naïve")[0], english("résumé")[0]]
    # NFKC: a decomposed é equals the precomposed one; the fi ligature is "fi".
    assert english("Cafe\u0301") == english("Café")
    assert english("\ufb01sh") == english("fish")


def test_possessive_removed() -> None:
    assert english("John's book") == ["john", "book"]
    assert english("John\u2019s book") == ["john", "book"]
    assert english("the dog's bone") == ["dog", "bone"]


def test_contraction_is_one_token() -> None:
    assert english("don't") == ["don't"]
    assert english("I don't know") == ["i", "don't", "know"]


def test_punctuation_and_quotes() -> None:
    assert english("'quoted' words, here!") == ["quot", "word", "here"]
    assert english("") == []
    assert english("... ,,, !!!") == []


def test_repeats_are_kept_in_order() -> None:
    assert english("graph search graph") == ["graph", "search", "graph"]


def test_numbers_are_words() -> None:
    assert english("BM25 in 2009") == ["bm25", "2009"]


def test_custom_stopwords() -> None:
    analyzer = EnglishAnalyzer(stopwords=frozenset(), name="english-all")
    assert analyzer.analyze("the running") == ["the", "run"]
    assert analyzer.name == "english-all"


def test_simple_analyzer() -> None:
    simple = SimpleAnalyzer()
    assert simple.name == "simple"
    assert simple.analyze("The Running dogs, don't STOP!") == ["the", "running", "dogs", "don", "t", "stop"]
    assert simple.analyze("Café_au-lait") == ["café_au", "lait"]
    assert simple.analyze("") == []
    assert simple.analyze("a a a") == ["a", "a", "a"]


def test_builtins_are_registered() -> None:
    assert {"english", "simple"} <= set(analyzer_names())
    assert isinstance(get_analyzer("english"), EnglishAnalyzer)
    assert isinstance(get_analyzer("simple"), SimpleAnalyzer)
    assert get_analyzer("english") is not get_analyzer("english")
    assert isinstance(get_analyzer("simple"), Analyzer)


class ReverseAnalyzer:
    """Splits on whitespace and reverses each word: easy to tell apart."""

    @property
    def name(self) -> str:
        return "test-analysis-reverse"

    def analyze(self, text: str) -> list[str]:
        return [word[::-1] for word in text.split()]


def test_register_and_get_analyzer() -> None:
    with pytest.raises(UnknownAnalyzerError):
        get_analyzer("test-analysis-never-registered")
    register_analyzer("test-analysis-reverse", ReverseAnalyzer)
    analyzer = get_analyzer("test-analysis-reverse")
    assert analyzer.name == "test-analysis-reverse"
    assert analyzer.analyze("abc de") == ["cba", "ed"]
    assert "test-analysis-reverse" in analyzer_names()


def test_index_records_analyzer_name() -> None:
    assert Index().analyzer.name == "english"
    assert Index(analyzer="simple").analyzer.name == "simple"
    index = Index(analyzer=ReverseAnalyzer())
    assert index.analyzer.name == "test-analysis-reverse"
    assert index.snapshot().analyzer.name == "test-analysis-reverse"


def test_queries_use_the_index_analyzer() -> None:
    english_index = Index()
    english_index.add(Document("a", "Running dogs"))
    assert english_index.search("run", 5, RRF(), BM25Scorer()).keys == ["a"]
    simple_index = Index(analyzer="simple")
    simple_index.add(Document("a", "Running dogs"))
    assert simple_index.search("run", 5, RRF(), BM25Scorer()).keys == []
    assert simple_index.search("RUNNING", 5, RRF(), BM25Scorer()).keys == ["a"]


def test_open_uses_recorded_analyzer(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "simple", analyzer="simple")
    index.add(Document("a", "Running dogs"))
    index.commit()
    index.close()
    reopened = Index.open(tmp_path / "simple")
    assert reopened.analyzer.name == "simple"
    # Under the english analyzer "run" would match "Running"; under simple it must not.
    assert reopened.search("run", 5, RRF(), BM25Scorer()).keys == []
    assert reopened.search("running", 5, RRF(), BM25Scorer()).keys == ["a"]


def test_open_uses_registered_custom_analyzer(tmp_path: Path) -> None:
    register_analyzer("test-analysis-reverse", ReverseAnalyzer)
    index = Index.create(tmp_path / "custom", analyzer=ReverseAnalyzer())
    index.add(Document("a", "hello world"))
    index.commit()
    index.close()
    reopened = Index.open(tmp_path / "custom")
    assert reopened.analyzer.name == "test-analysis-reverse"
    assert reopened.snapshot().doc_freq("olleh") == 1
    assert reopened.search("hello", 5, RRF(), BM25Scorer()).keys == ["a"]


class UnregisteredAnalyzer:
    @property
    def name(self) -> str:
        return "test-analysis-unregistered"

    def analyze(self, text: str) -> list[str]:
        return text.split()


def test_open_with_unregistered_analyzer_raises(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "lost", analyzer=UnregisteredAnalyzer())
    index.add(Document("a", "hello"))
    index.commit()
    index.close()
    with pytest.raises(UnknownAnalyzerError):
        Index.open(tmp_path / "lost")
