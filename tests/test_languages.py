"""Analyzers per language and kind of field: snowball-*, keyword, cjk (weftsearch.languages)."""

from __future__ import annotations

from pathlib import Path

import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from weftsearch import RRF, BM25Scorer, Document, Index, analysis
from weftsearch.analysis import TokenizingAnalyzer, analyzer_names, get_analyzer, register_analyzer
from weftsearch.errors import UnknownAnalyzerError
from weftsearch.languages import (
    BUILTIN_ANALYZERS,
    NO_STOPWORDS,
    CJKAnalyzer,
    KeywordAnalyzer,
    SnowballAnalyzer,
    snowball_stopwords,
)


def terms(name: str, text: str) -> list[str]:
    return get_analyzer(name).analyze(text)


def test_one_analyzer_per_snowball_algorithm() -> None:
    names = set(analyzer_names())
    for algorithm in Stemmer.algorithms():
        assert f"snowball-{algorithm}" in names
        analyzer = get_analyzer(f"snowball-{algorithm}")
        assert isinstance(analyzer, SnowballAnalyzer) and analyzer.algorithm == algorithm
    assert {"keyword", "cjk", "english", "simple"} <= names


def test_languages_without_a_stopword_list_are_named() -> None:
    # stopwordsiso 0.7 has no list for these; every other language drops its stopwords.
    assert {"nepali", "serbian", "tamil", "yiddish"} == NO_STOPWORDS
    for algorithm in set(Stemmer.algorithms()) - NO_STOPWORDS:
        assert snowball_stopwords(algorithm), algorithm


def test_unknown_language_names_the_known_ones() -> None:
    with pytest.raises(UnknownAnalyzerError, match=r"'klingon'.*snowball-french.*snowball-german"):
        get_analyzer("klingon")
    with pytest.raises(UnknownAnalyzerError, match=r"'french'.*snowball-french"):
        get_analyzer("french")


# One sentence per family: words we expect (stems) and stopwords we expect gone.
SENTENCES = [
    # Romance, with Lucene's elision of articles.
    ("french", "L'homme et les enfants mangeaient des pommes", ["homm", "enfant", "mang", "pomm"]),
    # stopwordsiso's Italian list holds "uomo": the list is the package's, not ours.
    ("italian", "L'uomo e i bambini mangiavano dell'uva", ["bambin", "mang", "uva"]),
    ("spanish", "Los niños jugaban en el jardín con los perros", ["niñ", "jug", "jardin", "perr"]),
    ("portuguese", "As crianças brincavam no jardim com os cães", ["crianc", "brinc", "jardim", "cã"]),
    # Germanic.
    ("german", "Die Kinder spielten im Garten mit den Hunden", ["kind", "spielt", "gart", "hund"]),
    ("dutch", "De kinderen speelden in de tuin met de honden", ["kinder", "speel", "tuin", "hond"]),
    ("swedish", "Barnen lekte i trädgården med hundarna", ["barn", "lekt", "trädgård", "hund"]),
    ("english", "The children's dogs were running", ["children", "dog", "run"]),
    # Slavic, Greek, Uralic, Turkic.
    ("russian", "Дети играли в саду с собаками", ["дет", "игра", "сад", "собак"]),  # noqa: RUF001
    ("polish", "Dzieci bawiły się w ogrodzie z psami", ["dziec", "baw", "ogrodz", "psam"]),
    ("finnish", "Lapset leikkivät puutarhassa koirien kanssa", ["laps", "leikkiv", "puutarh", "koir"]),
    ("turkish", "Çocuklar bahçede köpeklerle oynuyordu", ["çocuk", "bahçe", "köpek", "oynuyor"]),
    # Semitic and Indic (vowel signs are combining marks: they stay inside the word).
    ("arabic", "الأطفال يلعبون في الحديقة مع الكلاب", ["اطفال", "يلعب", "حديق", "كلاب"]),
    ("hindi", "बच्चे बगीचे में कुत्तों के साथ खेल रहे थे", ["बच्च", "बगीच", "कुत्त", "खेल"]),
    ("tamil", "குழந்தைகள் தோட்டத்தில் நாய்களுடன்", ["குழந்தை", "தோட்டம்", "நாய்"]),
]


@pytest.mark.parametrize(("algorithm", "text", "expected"), SENTENCES, ids=[s[0] for s in SENTENCES])
def test_real_sentences(algorithm: str, text: str, expected: list[str]) -> None:
    analyzer = get_analyzer(f"snowball-{algorithm}")
    assert analyzer.analyze(text) == expected
    assert isinstance(analyzer, TokenizingAnalyzer)
    spans = [text[t.start : t.end] for t in analyzer.tokens(text)]
    assert len(spans) == len(expected) and all(span in text.split() for span in spans)


def test_stopwords_are_folded_like_the_text() -> None:
    # "Über" folds to "über", a German stopword; "STRASSE" and "Straße" fold alike.
    assert terms("snowball-german", "ÜBER die Straße STRASSE") == ["strass", "strass"]


def test_keyword_is_exact() -> None:
    analyzer = KeywordAnalyzer()
    assert analyzer.analyze("Tag-42 X") == ["Tag-42 X"]
    assert analyzer.analyze("tag-42 x") == ["tag-42 x"]  # no case folding, as Lucene's
    assert analyzer.analyze("\ufb01") == ["\ufb01"]  # no normalisation
    assert analyzer.analyze("") == [] and analyzer.tokens("") == []
    assert [tuple(t) for t in analyzer.tokens(" a b ")] == [(" a b ", 0, 5)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("東京都に住んでいる", ["東京", "京都", "都に", "に住", "住ん", "んで", "でい", "いる"]),
        ("中 文", ["中", "文"]),  # lone characters are unigrams
        ("한국어 텍스트", ["한국", "국어", "텍스", "스트"]),
        (
            "ｶﾀｶﾅ \uff34\uff4f\uff4b\uff59\uff4f the DATA",
            ["カタ", "タカ", "カナ", "tokyo", "data"],
        ),  # width folded, stopword gone
        ("東京Tokyo大阪", ["東京", "tokyo", "大阪"]),
    ],
)
def test_cjk_bigrams(text: str, expected: list[str]) -> None:
    assert CJKAnalyzer().analyze(text) == expected


def test_cjk_bigram_spans() -> None:
    text = "ｶﾀｶﾅ 東京"
    assert [(t.term, text[t.start : t.end]) for t in CJKAnalyzer().tokens(text)] == [
        ("カタ", "ｶﾀ"),
        ("タカ", "ﾀｶ"),
        ("カナ", "ｶﾅ"),
        ("東京", "東京"),
    ]


TOKENIZING = [
    *(get_analyzer(f"snowball-{a}") for a in ("french", "english", "german", "hindi", "turkish", "irish")),
    KeywordAnalyzer(),
    CJKAnalyzer(),
]
TEXTS = st.one_of(
    st.text(max_size=50),
    st.text(
        alphabet="l'\u2019 aéE\u0301\ufb01\uff21\u4e2d\u6587\u3042\ud55c\u0915\u093f\u0130ßs-", max_size=50
    ),
)


@pytest.mark.parametrize("analyzer", TOKENIZING, ids=lambda a: a.name)
@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_tokens_agree_with_analyze(analyzer: TokenizingAnalyzer, text: str) -> None:
    tokens = analyzer.tokens(text)
    assert [t.term for t in tokens] == analyzer.analyze(text)
    last = (0, 0)
    for token in tokens:
        assert 0 <= token.start < token.end <= len(text)
        assert (token.start, token.end) >= last
        assert token.term in analyzer.analyze(text[token.start : token.end])
        last = (token.start, token.end)


def test_user_registration_wins_over_a_builtin_loaded_later(monkeypatch: pytest.MonkeyPatch) -> None:
    # As in a fresh process: the built-in languages not loaded yet.
    monkeypatch.setattr(analysis, "_languages_loaded", False)
    fresh = {name: f for name, f in analysis._REGISTRY.items() if name not in BUILTIN_ANALYZERS}
    monkeypatch.setattr(analysis, "_REGISTRY", fresh)

    class Shout:
        name = "keyword"

        def analyze(self, text: str) -> list[str]:
            return [text.upper()]

    register_analyzer("keyword", Shout)
    assert get_analyzer("keyword").analyze("a") == ["A"]  # the lookup loaded the languages...
    assert isinstance(get_analyzer("cjk"), CJKAnalyzer)  # ...and kept the user's keyword


def test_an_index_with_a_language_analyzer_reopens_and_searches(tmp_path: Path) -> None:
    path = tmp_path / "fr"
    with Index.create(path, analyzer="snowball-french") as index:
        index.add_many(
            [
                Document("a", "Les enfants mangeaient des pommes"),
                Document("b", "L'homme lisait le journal"),
            ]
        )
        index.commit()
    with Index.open(path) as index:
        hits = index.search("enfant pomme", 5, RRF(), BM25Scorer())
        assert hits.keys == ["a"]
        assert index.search("hommes", 5, RRF(), BM25Scorer()).keys == ["b"]
