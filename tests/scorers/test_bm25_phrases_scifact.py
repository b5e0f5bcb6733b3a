"""Phrase matching on SciFact against a naive scan of the stored texts, re-analysed.

1,000 phrases of 2 or 3 consecutive words are drawn (seeded) from the
corpus's own stored texts, half from ``text`` and half from ``title`` (a named
field, searched as ``title:"..."``). The engine's matches, read from the
segments' compressed positions over two segments with deleted documents,
must be exactly the documents whose re-analysed stored field holds the
phrase's analysed terms in a row, and each match's score must be the BM25 of
the phrase's frequency found by the scan (the bits of the same expression).
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from weftsearch import BM25Scorer, Document, Index, Query
from weftsearch.analysis import EnglishAnalyzer
from weftsearch.corpus import load_documents
from weftsearch.querylang import PhraseNode
from weftsearch.schema import Schema, TextField
from weftsearch.scorers.bm25 import lucene_idf

SCIFACT = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "scifact"
PHRASES = 1_000
K1, B = 1.2, 0.75


def occurrences(terms: list[str], phrase: list[str]) -> int:
    """How many times ``phrase`` occurs as consecutive terms of ``terms`` (a plain scan)."""
    width = len(phrase)
    return sum(terms[i : i + width] == phrase for i in range(len(terms) - width + 1))


@pytest.mark.slow
def test_phrases_drawn_from_scifact_match_a_naive_scan() -> None:
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {SCIFACT} (../shared/datasets/scifact)")
    documents = load_documents(SCIFACT, text_fields=("title",), progress=False)
    index = Index(schema=Schema((TextField("text", positions=True), TextField("title", positions=True))))
    half = len(documents) // 2
    index.add_many(documents[:half])
    index.snapshot()
    ghosts = [
        Document(f"ghost{i}", documents[i].text, text_fields=documents[i].text_fields) for i in range(50)
    ]
    index.add_many(ghosts + documents[half:])
    index.snapshot()  # sealed, so the deletes below are tombstones on the segment
    for ghost in ghosts:
        index.delete(ghost.key)
    snapshot = index.snapshot()
    assert len(snapshot.parts) == 2 and snapshot.parts[1].deleted is not None

    analyzer = EnglishAnalyzer()
    analysed = {
        field: {
            doc.key: analyzer.analyze(doc.text if field == "text" else doc.text_fields.get(field, ""))
            for doc in documents
        }
        for field in ("text", "title")
    }
    averages = {field: sum(map(len, per.values())) / len(per) for field, per in analysed.items()}
    # A term holds no space, so " a b " in " <terms> " finds exactly the documents holding "a b" in a row.
    joined = {
        field: {key: f" {' '.join(terms)} " for key, terms in per.items()} for field, per in analysed.items()
    }
    doc_freq = {
        field: Counter(term for terms in per.values() for term in set(terms))
        for field, per in analysed.items()
    }
    scorer = BM25Scorer(K1, B)
    rng = random.Random(29)
    checked = matched_phrases = 0
    while checked < PHRASES:
        field = "text" if checked % 2 == 0 else "title"
        source = rng.choice(documents)
        stored = source.text if field == "text" else source.text_fields.get(field, "")
        words = stored.split()
        width = rng.choice((2, 3))
        if len(words) < width:
            continue
        start = rng.randrange(len(words) - width + 1)
        phrase_words = tuple(words[start : start + width])
        phrase = [term for word in phrase_words for term in analyzer.analyze(word)]
        if len(phrase) < 2:
            continue  # a stopword or punctuation left one term or none: not a phrase
        checked += 1
        node = PhraseNode(phrase_words, field=None if field == "text" else field)
        ids, scores = scorer.score_all(snapshot, Query(tree=node))
        got = dict(zip(snapshot.keys_of(ids), scores.tolist(), strict=True))
        needle = f" {' '.join(phrase)} "
        holding = [key for key, text in joined[field].items() if needle in text]
        expected = {key: occurrences(analysed[field][key], phrase) for key in holding}
        assert set(got) == set(expected), (field, phrase_words, phrase)
        assert source.key in got  # drawn from it, so it holds it
        idf = 0.0
        for term in phrase:
            idf += float(lucene_idf(len(documents), np.array([doc_freq[field][term]], np.int64))[0])
        for key, frequency in expected.items():
            tf = float(frequency)
            norm = K1 * (1.0 - B + B * float(len(analysed[field][key])) / averages[field])
            assert got[key] == idf * (tf * (K1 + 1.0) / (tf + norm)), (field, phrase_words, key)
        matched_phrases += len(expected) > 1
    assert matched_phrases > 50  # many phrases occur in more than the document they came from
