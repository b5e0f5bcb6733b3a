"""Named text fields through the index: the schema in the manifest, per-field analysis, stored texts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from weftsearch import Document, Index
from weftsearch.errors import AnalysisError, InvalidDocumentError, InvalidParameterError, UnknownAnalyzerError
from weftsearch.schema import Schema, TextField
from weftsearch.storage import MANIFEST

SCHEMA = Schema((TextField("title", weight=2.0), TextField("tags", analyzer="simple", stored=False)))


def documents() -> list[Document]:
    return [
        Document("a", "Running dogs", text_fields={"title": "The Dogs", "tags": "Pets Running"}),
        Document("b", "cats sleeping", text_fields={"title": "Cats"}),
        Document("c", "no named fields here"),
    ]


def manifest_body(path: Path) -> dict[str, object]:
    body: dict[str, object] = json.loads((path / MANIFEST).read_text())["body"]
    return body


def test_schema_is_recorded_and_fields_are_analysed_and_stored(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i", schema=SCHEMA) as index:
        index.add_many(documents())
    extra = manifest_body(tmp_path / "i")["extra"]
    assert isinstance(extra, dict)
    assert Schema.from_dict(extra["schema"]) == SCHEMA
    index = Index.open(tmp_path / "i", readonly=True)
    assert index.schema == SCHEMA
    # Stored fields come back; an unstored one is indexed but not returned.
    assert dict(index.get("a").text_fields) == {"title": "The Dogs"}
    assert dict(index.get("c").text_fields) == {}
    segment = index.snapshot().parts[0].reader
    title, tags = segment.text_field("title"), segment.text_field("tags")
    assert title.terms() == ["cat", "dog"]  # english: stopword dropped, stemmed
    assert tags.terms() == ["pets", "running"]  # simple: lower-cased only
    assert title.doc_lengths().tolist() == [1, 1, 0]
    assert tags.doc_lengths().tolist() == [2, 0, 0]
    snapshot = index.snapshot()
    assert dict(snapshot.document(snapshot.id_of("a")).text_fields) == {"title": "The Dogs"}
    assert index.scrub().ok


def test_an_index_without_a_schema_records_none(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i") as index:
        index.add_many([Document("a", "alpha")])
    extra = manifest_body(tmp_path / "i")["extra"]
    assert isinstance(extra, dict) and "schema" not in extra
    assert Index.open(tmp_path / "i", readonly=True).schema == Schema.default("english", True)


def test_a_field_outside_the_schema_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "i", schema=SCHEMA)
    with pytest.raises(InvalidDocumentError, match=r"'body'.*title, tags"):
        index.add(Document("x", "x", text_fields={"body": "y"}))
    plain = Index()
    with pytest.raises(InvalidDocumentError, match=r"'title'.*none besides 'text'"):
        plain.add(Document("x", "x", text_fields={"title": "y"}))
    index.close(discard=True)


@pytest.mark.parametrize("name", ["text", "1x", "a-b", ""])
def test_a_document_refuses_bad_field_names(name: str) -> None:
    with pytest.raises(InvalidDocumentError, match="text field name"):
        Document("x", "x", text_fields={name: "y"})


def test_a_document_refuses_non_string_field_texts() -> None:
    with pytest.raises(InvalidDocumentError, match="'title' must be str"):
        Document("x", "x", text_fields={"title": 3})  # type: ignore[dict-item]
    with pytest.raises(InvalidDocumentError, match="surrogate"):
        Document("x", "x", text_fields={"title": "\ud800"})


def test_the_schema_must_agree_with_the_index(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="analysed by 'simple'"):
        Index(schema=Schema((TextField("text", analyzer="simple"),)))
    with pytest.raises(InvalidParameterError, match="store_text"):
        Index(store_text=False, schema=SCHEMA)
    with pytest.raises(UnknownAnalyzerError, match="nope"):
        Index(schema=Schema((TextField("title", analyzer="nope"),)))
    with pytest.raises(InvalidParameterError, match="Schema"):
        Index(schema={"fields": []})  # type: ignore[arg-type]


def test_a_failing_field_analyzer_names_the_document_and_field() -> None:
    from weftsearch.analysis import register_analyzer

    class Boom:
        name = "boom-fields"

        def analyze(self, text: str) -> list[str]:
            raise RuntimeError("no")

    register_analyzer("boom-fields", Boom)
    index = Index(schema=Schema((TextField("title", analyzer="boom-fields"),)))
    with pytest.raises(AnalysisError, match="'a': text field 'title'"):
        index.add(Document("a", "fine", text_fields={"title": "bad"}))


def _hashes(path: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.iterdir())
        if p.name != "write.lock"
    }


def test_files_are_byte_identical_whatever_the_order_and_workers(tmp_path: Path) -> None:
    many = [
        Document(f"k{i:04d}", f"body {i % 7} words", text_fields={"title": f"title {i % 5}"} if i % 2 else {})
        for i in range(2500)
    ]
    for name, batch, workers in (("a", many, 1), ("b", many[::-1], 2)):
        with Index.create(tmp_path / name, schema=SCHEMA, index_id="ab" * 16) as index:
            index.add_many(batch, workers=workers, progress=False)
    assert _hashes(tmp_path / "a") == _hashes(tmp_path / "b")


def test_a_merge_keeps_the_fields(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i", schema=SCHEMA) as index:
        index.add_many(documents()[:2])
        index.commit()
        index.add_many(documents()[2:])
        index.commit()
        index.delete("b")
        index.commit()
        index.merge(force=True)
    index = Index.open(tmp_path / "i", readonly=True)
    assert dict(index.get("a").text_fields) == {"title": "The Dogs"}
    readers = [p.reader for p in index.snapshot().parts]
    assert sum(r.text_field("title").postings("dog")[0].shape[0] for r in readers) == 1
    assert index.scrub().ok
