"""Every reader of a user's file refuses hostile input with a typed error naming file and line
(issue 13 item 14; the corpus reader's own cases are in test_corpus.py): embed's texts reader,
the BEIR loader of the evaluation harness, and the CLI's ids and qrels files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from weftsearch.cli import main
from weftsearch.embed import read_texts_file
from weftsearch.errors import CorpusFormatError
from weftsearch.eval.datasets import load_beir

DEEP = "[" * 100_000 + "]" * 100_000  # a RecursionError from json before


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"id": "a", "text": ' + DEEP + "}", "nested"),
        ('{"id": "a", "text": "x", "text": "y"}', "twice"),
        ('{"id": "a", "key": "b", "text": "x"}', "given twice"),
        ('{"id": "a\\nb", "text": "x"}', "\\n"),
        ('{"id": "a\\u0000", "text": "x"}', "\\x00"),
        ('{"id": " ", "text": "x"}', "whitespace"),
        ('{"id": "a", "text": "lone \\ud800"}', "surrogate"),
        ('{"id": "a", "title": "\\udc00", "text": "x"}', "surrogate"),
    ],
)
def test_embed_texts_reader_refuses_hostile_lines(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "texts.jsonl"
    path.write_text('{"id": "ok", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError) as info:
        read_texts_file(path)
    assert str(info.value).startswith(f"{path}:2:") and needle in str(info.value)


@pytest.mark.parametrize("file", ["corpus.jsonl", "queries.jsonl"])
def test_the_beir_loader_refuses_deep_nesting_with_a_typed_error(tmp_path: Path, file: str) -> None:
    records = {
        "corpus.jsonl": [{"_id": "d1", "title": "", "text": "x"}],
        "queries.jsonl": [{"_id": "q1", "text": "x"}],
    }
    for name, rows in records.items():
        text = "".join(json.dumps(row) + "\n" for row in rows)
        if name == file:
            text += '{"_id": "bad", "text": ' + DEEP + "}\n"
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=f"{file}:2: JSON nested too deeply"):
        load_beir(tmp_path, any_snapshot=True)


def write_corpus(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"key": "a", "text": "alpha"}\n{"key": "b", "text": "beta"}\n', encoding="utf-8")
    np.save(tmp_path / "v.npy", np.eye(2, dtype=np.float32))
    return corpus, tmp_path / "v.npy"


@pytest.mark.parametrize(
    ("ids", "needle"), [(b"a\n\xff\xfeb\n", "not UTF-8"), (b"a\nb\x00\n", "\\x00"), (b"a\n \n", "empty id")]
)
def test_cli_vector_ids_file_errors_name_file_and_line(
    tmp_path: Path, ids: bytes, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, vectors = write_corpus(tmp_path)
    (tmp_path / "ids.txt").write_bytes(ids)
    argv = ["index", str(corpus), "--index", str(tmp_path / "idx"), "--vectors", str(vectors)]
    assert main([*argv, "--vector-ids", str(tmp_path / "ids.txt")]) == 2
    err = capsys.readouterr().err
    assert "ids.txt:2: " in err and needle in err and "Traceback" not in err


def test_cli_qrels_that_are_not_utf8_name_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, _ = write_corpus(tmp_path)
    assert main(["index", str(corpus), "--index", str(tmp_path / "idx")]) == 0
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "q1", "text": "alpha"}\n', encoding="utf-8")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_bytes(b"q1\ta\t1\nq1\t\xe9b\t1\n")
    capsys.readouterr()
    argv = ["search", "--index", str(tmp_path / "idx"), "--queries", str(queries), "--qrels", str(qrels)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "qrels.tsv:2: not UTF-8" in err and "Traceback" not in err


def test_an_embed_record_nested_too_deeply_is_a_reason_not_a_traceback(tmp_path: Path) -> None:
    from weftsearch.embed import _read_record  # the reader every embed record goes through

    path = tmp_path / "record.json"
    path.write_text('{"collection": ' + DEEP + "}", encoding="utf-8")
    record, reason = _read_record(path)
    assert record is None and "record.json is not a JSON record" in reason
