"""Collections loaded with ``fields=True``: the title and the text as two text fields, indexed by a
testbed with a schema, reachable from ``weft-search eval --fields``; the default stays one joined text."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.eval.test_datasets import DATA, load_mini, mini_scifact, write_files
from weftsearch import RRF, BM25Scorer
from weftsearch.cli import main
from weftsearch.eval.datasets import load_beir, load_collection
from weftsearch.eval.harness import build_testbed, content_hash, fielded_schema, title_body_documents


@pytest.mark.parametrize("name", ["cacm", "cisi", "cranfield", "scifact"])
def test_every_loader_maps_title_and_text_onto_two_fields(tmp_path: Path, name: str) -> None:
    plain = load_mini(tmp_path / "plain", name)
    fielded = load_mini(tmp_path / "fielded", name, fields=True)
    assert plain.parameters.get("text_fields") is None
    assert fielded.parameters["text_fields"] == "title,text"
    assert [d.key for d in plain.documents] == [d.key for d in fielded.documents]
    assert plain.queries == fielded.queries and plain.qrels == fielded.qrels
    titled = 0
    for joined, split in zip(plain.documents, fielded.documents, strict=True):
        title = split.text_fields.get("title", "")
        assert "title" not in split.fields  # the title is a text field, not metadata
        # The joined text is exactly the title, one space, the text (either may be empty).
        assert joined.text == " ".join(part for part in (title, split.text) if part)
        assert {k: v for k, v in joined.fields.items() if k != "title"} == dict(split.fields)
        assert joined.links == split.links and joined.time == split.time
        titled += bool(title)
    assert titled


def test_mini_cacm_fields(tmp_path: Path) -> None:
    first, second, _ = load_mini(tmp_path, "cacm", fields=True).documents
    assert first.text == "" and dict(first.text_fields) == {
        "title": "Preliminary Report-International Algebraic Language"
    }
    assert second.text == "An algorithm for extracting roots."
    assert dict(second.text_fields) == {"title": "Extraction of Roots"}


def test_a_fielded_testbed_has_a_schema_and_its_own_hash(tmp_path: Path) -> None:
    plain = load_mini(tmp_path / "plain", "scifact")
    fielded = load_mini(tmp_path / "fielded", "scifact", fields=True)
    assert fielded_schema(plain.documents) is None
    schema = fielded_schema(fielded.documents, "english")
    assert schema is not None and schema.names == ("text", "title")
    assert all(field.analyzer == "english" for field in schema.fields)
    bed = build_testbed(fielded)
    assert bed.index.schema == schema
    assert bed.record()["text_fields"] == ["text", "title"]
    assert "text_fields" not in build_testbed(plain).record()  # records published before fields hold
    # The same document text with and without a title field hashes apart.
    no_titles = [d.__class__(d.key, d.text) for d in fielded.documents]
    assert content_hash(no_titles, "english") != content_hash(fielded.documents, "english")
    # bm25f scores the title: a query word only in a title finds its document.
    hits = bed.index.search("title", 10, RRF(), BM25Scorer(fields={"title": 2.0, "text": 1.0}))
    assert hits.keys == ["10"]
    assert bed.index.search("title", 10, RRF(), BM25Scorer()).keys == []  # text alone


def test_eval_fields_runs_bm25f_arms_on_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = mini_scifact()
    write_files(tmp_path / "mine", files)
    out = tmp_path / "out"
    argv = ["eval", str(tmp_path / "mine"), "--fields", "--out", str(out), "--no-plots", "--resamples", "200"]
    arms = ["--arms", "text=bm25", "f=bm25f(title=2, body=1)"]
    assert main([*argv, *arms]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["testbed"]["text_fields"] == ["text", "body", "title"]
    capsys.readouterr()
    # Without --fields the index has no title field, and bm25f(title=...) says so.
    assert main(["eval", str(tmp_path / "mine"), "--arms", "f=bm25f(title=2, body=1)"]) == 2
    assert "'title' is not a text field" in capsys.readouterr().err
    assert main([*argv, *arms, "--vectors", "some"]) == 2
    assert "--vectors none" in capsys.readouterr().err


@pytest.mark.data
def test_cacm_fields_on_the_shared_data() -> None:
    if not (DATA / "cacm").is_dir():
        pytest.skip(f"needs {DATA / 'cacm'}")
    plain = load_collection("cacm", DATA)
    fielded = load_collection("cacm", DATA, fields=True)
    titled = sum("title" in d.fields for d in plain.documents)
    assert sum(bool(d.text_fields) for d in fielded.documents) == titled > 3000
    assert sum(bool(d.text) for d in fielded.documents) < len(fielded.documents)  # many lack .W
    for joined, split in zip(plain.documents, fielded.documents, strict=True):
        assert joined.text == " ".join(p for p in (split.text_fields.get("title", ""), split.text) if p)
    bed = build_testbed(fielded)
    scores = bed.index.search("algebraic language", 5, RRF(), BM25Scorer(fields={"title": 1.0, "text": 1.0}))
    assert len(scores.keys) == 5 and np.all(np.diff(scores.score_array) <= 0)


def test_load_beir_records_fields(tmp_path: Path) -> None:
    files = mini_scifact()
    write_files(tmp_path / "s", files)
    collection = load_beir(tmp_path / "s", name="mine", fields=True)
    assert collection.parameters["text_fields"] == "title,text"


def test_title_body_documents_keep_the_joined_text_so_bm25_is_unchanged_to_the_bit(tmp_path: Path) -> None:
    plain = load_mini(tmp_path / "plain", "cacm")
    fielded = load_mini(tmp_path / "fielded", "cacm", fields=True)
    documents = title_body_documents(fielded.documents)
    assert [d.text for d in documents] == [d.text for d in plain.documents]
    first, second, _ = documents
    assert dict(first.text_fields) == {"title": "Preliminary Report-International Algebraic Language"}
    assert dict(second.text_fields) == {
        "title": "Extraction of Roots",
        "body": "An algorithm for extracting roots.",
    }
    both = build_testbed(replace(fielded, documents=documents))
    alone = build_testbed(plain)
    for text in ("algebraic roots", "extraction paper", "language"):
        got = both.index.search(text, 10, RRF(), BM25Scorer())
        want = alone.index.search(text, 10, RRF(), BM25Scorer())
        assert got.keys == want.keys and got.keys
        assert np.array_equal(got.score_array.view(np.uint64), want.score_array.view(np.uint64))
    # BM25F over title and body is another ranking (the title counts 5 times here).
    fielded_hits = both.index.search("roots", 10, RRF(), BM25Scorer(fields={"title": 5.0, "body": 1.0}))
    assert fielded_hits.keys == ["2"]
