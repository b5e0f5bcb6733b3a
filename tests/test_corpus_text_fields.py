"""Corpus loaders reading named text fields (``text_fields=``) and BEIR's title as a field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weftsearch.corpus import load_documents
from weftsearch.errors import CorpusFormatError
from weftsearch.eval.beir import load_beir


def test_jsonl_named_fields(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    records = [{"key": "a", "title": " T ", "text": "body", "tags": "x y"}, {"key": "b", "text": "only"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    plain = load_documents(path)
    assert plain[0].text == "T body" and plain[0].fields["title"] == "T"
    named = load_documents(path, text_fields=("title", "tags"))
    assert named[0].text == "body" and dict(named[0].text_fields) == {"tags": "x y", "title": "T"}
    assert "title" not in named[0].fields
    assert dict(named[1].text_fields) == {}
    path.write_text(json.dumps({"key": "a", "title": 3}) + "\n")
    with pytest.raises(CorpusFormatError, match="'title' must be a string"):
        load_documents(path, text_fields=("title",))


def test_beir_title_and_text_as_two_fields(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "A Title", "text": "the text"})
        + "\n"
        + json.dumps({"_id": "d2", "title": "", "text": "untitled"})
        + "\n"
    )
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "title"}) + "\n")
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    joined = load_beir(tmp_path, name="mine").documents
    assert joined[0].text == "A Title the text" and dict(joined[0].text_fields) == {}
    split = load_beir(tmp_path, name="mine", fields=True).documents
    assert split[0].text == "the text" and dict(split[0].text_fields) == {"title": "A Title"}
    assert "title" not in split[0].fields
    assert split[1].text == "untitled" and dict(split[1].text_fields) == {}
