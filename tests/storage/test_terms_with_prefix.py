"""``SegmentReader.terms_with_prefix``: a binary search and a bounded scan of the term table."""

from __future__ import annotations

from weftsearch import Document, Index


def test_prefix_terms_are_the_dictionary_slice_and_bounded() -> None:
    index = Index(analyzer="simple")
    words = ["ab", "abc", "abd", "abz", "ac", "b", "zé", "zéro", "z\u03c9"]
    index.add_many([Document(f"d{i}", word) for i, word in enumerate(words)])
    reader = index.snapshot().parts[0].reader
    assert reader.terms_with_prefix("ab", 10) == ["ab", "abc", "abd", "abz"]
    assert reader.terms_with_prefix("ab", 2) == ["ab", "abc", "abd"]  # limit + 1: "more than 2"
    assert reader.terms_with_prefix("abz", 10) == ["abz"]
    assert reader.terms_with_prefix("zé", 10) == ["zé", "zéro"]  # code-point (UTF-8 byte) order
    assert reader.terms_with_prefix("z", 10) == ["zé", "zéro", "z\u03c9"]
    assert reader.terms_with_prefix("q", 10) == []
    assert reader.terms_with_prefix("\ud800", 10) == []  # a lone surrogate starts no stored term
    assert reader.terms_with_prefix("", 100) == sorted(words, key=lambda w: w.encode())
