"""``weft-search index --text-field`` / ``--schema``: named text fields from a JSONL corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import error_line, write_jsonl
from weftsearch import Index
from weftsearch.cli import main
from weftsearch.schema import Schema, TextField

RECORDS = [
    {"key": "a", "title": "Dogs running", "text": "a story about cats", "tags": "pets"},
    {"key": "b", "title": "Cats", "text": "dogs dogs"},
]


def test_text_field_makes_the_title_its_own_field(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", RECORDS)
    assert main(["index", str(corpus), "--index", str(tmp_path / "i"), "--text-field", "title"]) == 0
    index = Index.open(tmp_path / "i", readonly=True)
    assert index.schema.names == ("text", "title")
    document = index.get("a")
    assert document.text == "a story about cats"  # not joined to the title
    assert dict(document.text_fields) == {"title": "Dogs running"}
    assert "title" not in document.fields
    # `add` reads the same fields, from the index's own schema.
    write_jsonl(corpus, [{"key": "c", "title": "Birds", "text": "x"}])
    assert main(["add", str(corpus), "--index", str(tmp_path / "i")]) == 0
    assert dict(Index.open(tmp_path / "i", readonly=True).get("c").text_fields) == {"title": "Birds"}


def test_schema_file(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", RECORDS)
    schema = Schema((TextField("title", weight=2.0), TextField("tags", analyzer="simple", stored=False)))
    (tmp_path / "schema.json").write_text(json.dumps(schema.to_dict()))
    argv = ["index", str(corpus), "--index", str(tmp_path / "i"), "--schema", str(tmp_path / "schema.json")]
    assert main(argv) == 0
    index = Index.open(tmp_path / "i", readonly=True)
    assert index.schema == schema
    assert dict(index.get("a").text_fields) == {"title": "Dogs running"}  # tags: indexed, not stored


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--text-field", "text"], "'text' is the default field"),
        (["--text-field", "bad-name"], "text field name"),
        (["--text-field", "title", "--schema", "x.json"], "not both"),
        (["--schema", "missing.json"], "cannot read it as JSON"),
        (["--schema", "{schema}"], "weight must be finite"),
    ],
)
def test_bad_field_options_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", RECORDS)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"fields": [{"name": "title", "weight": 0}]}))
    extra = [str(bad) if part == "{schema}" else part for part in extra]
    assert main(["index", str(corpus), "--index", str(tmp_path / "i"), *extra]) == 2
    assert message in error_line(capsys)
    assert not (tmp_path / "i").exists()
