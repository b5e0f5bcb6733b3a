"""Tests of the corpus, query, qrels and vector loaders (weftsearch.corpus)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.corpus import (
    default_ids_path,
    detect_format,
    load_documents,
    load_qrels,
    load_queries,
    load_query_vector,
    load_vectors,
    parse_time,
    trec_run_lines,
)
from weftsearch.errors import CorpusFormatError, InvalidParameterError, WeftError


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_vectors(directory: Path, stem: str, ids: list[str], matrix: np.ndarray[Any, Any]) -> Path:
    npy = directory / f"{stem}.npy"
    np.save(npy, matrix)
    (directory / f"{stem}_ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
    return npy


RECORDS: list[dict[str, Any]] = [
    {
        "key": "a",
        "title": "Inverted index",
        "text": "Postings lists.",
        "links": ["b", "zzz"],
        "time": "2020-01-02T03:04:05Z",
        "fields": {"topic": "lexical", "year": 2020, "score": 0.5, "ok": True, "none": None},
    },
    {"_id": "b", "title": "", "text": "no title here", "time": 1_600_000_000},
    {"id": 7, "text": "an integer id", "links": [3]},
]


# ---------------------------------------------------------------------- JSONL


def test_jsonl_documents_are_read_with_every_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", RECORDS)
    docs = load_documents(path)
    assert [d.key for d in docs] == ["a", "b", "7"]
    a, b, seven = docs
    assert a.text == "Inverted index Postings lists."
    assert a.fields["title"] == "Inverted index"
    assert dict(a.fields) == {
        "topic": "lexical",
        "year": 2020,
        "score": 0.5,
        "ok": True,
        "title": "Inverted index",
    }
    assert a.links == ("b", "zzz")
    assert a.timestamp == datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp()
    assert b.text == "no title here" and "title" not in b.fields
    assert b.timestamp == 1_600_000_000.0
    assert seven.links == ("3",) and seven.time is None and seven.vector is None


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('\n{"key": "a", "text": "x"}\n\n   \n{"key": "b", "text": "y"}\n', encoding="utf-8")
    assert [d.key for d in load_documents(path)] == ["a", "b"]


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"key": "x", "text": ', "invalid JSON"),
        ('["not", "an", "object"]', "expected a JSON object"),
        ('{"title": "no key"}', "has no key"),
        ('{"key": "", "text": "x"}', "non-empty string"),
        ('{"key": "x", "text": 5}', "'text' must be a string"),
        ('{"key": "x", "time": "yesterday"}', "not an ISO-8601"),
        ('{"key": "x", "time": true}', "time must be"),
        ('{"key": "x", "links": "b"}', "'links' must be a list"),
        ('{"key": "x", "fields": {"tags": {"a": 1}}}', "fields.tags"),
        # Lists are list fields now (issue 30); a mixed one is refused by Document, naming it.
        ('{"key": "x", "fields": {"tags": ["a", 1]}}', "list field 'tags' mixes str 'a'"),
        ('{"key": "x", "fields": {"tags": [true]}}', "holds the boolean True"),
        ('{"key": "x", "fields": [1]}', "'fields' must be an object"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"key": "ok1", "text": "x"}\n\n' + line + '\n{"key": "ok2"}\n', encoding="utf-8")
    with pytest.raises(CorpusFormatError) as info:
        load_documents(path)
    assert f"{path}:3:" in str(info.value)
    assert needle in str(info.value)
    assert isinstance(info.value, WeftError)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"key": "a"}\n{"key": "\xff"}\n')
    with pytest.raises(CorpusFormatError, match=r"bad\.jsonl:2:"):
        load_documents(path)


def test_duplicate_key_names_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"key": "a"}, {"key": "b"}, {"key": "a"}])
    with pytest.raises(CorpusFormatError, match=r"c\.jsonl:3: key 'a' repeats \(first on line 1\)"):
        load_documents(path)


def test_parse_time_forms() -> None:
    assert parse_time(None) is None
    assert parse_time(12) == 12.0
    moment = parse_time("2021-06-01")
    assert isinstance(moment, datetime) and moment.year == 2021
    offset = parse_time("2021-06-01T10:00:00+02:00")
    assert isinstance(offset, datetime) and offset.utcoffset() is not None
    with pytest.raises(CorpusFormatError):
        parse_time(float("nan"))
    with pytest.raises(CorpusFormatError):
        parse_time({"year": 2020})


# ---------------------------------------------------------------------- BEIR and format detection


def make_beir(folder: Path) -> Path:
    folder.mkdir()
    write_jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "BM25", "text": "ranking function", "metadata": {"url": "u", "x": [1]}},
            {"_id": "d2", "title": "", "text": "dense vectors", "metadata": {}},
        ],
    )
    write_jsonl(
        folder / "queries.jsonl",
        [{"_id": "q1", "text": "ranking", "metadata": {}}, {"_id": "q2", "text": "vectors"}],
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\r\nq1\td1\t1\r\nq2\td2\t2\r\n")
    return folder


def test_beir_folder(tmp_path: Path) -> None:
    folder = make_beir(tmp_path / "beir")
    assert detect_format(folder) == "beir"
    docs = load_documents(folder)
    assert [d.key for d in docs] == ["d1", "d2"]
    assert docs[0].text == "BM25 ranking function"
    assert dict(docs[0].fields) == {"url": "u", "title": "BM25"}  # nested metadata dropped
    assert load_documents(folder / "corpus.jsonl", "beir")[1].text == "dense vectors"
    queries = load_queries(folder)
    assert [(q.qid, q.query.text) for q in queries] == [("q1", "ranking"), ("q2", "vectors")]
    assert load_qrels(folder / "qrels" / "test.tsv") == {"q1": {"d1": 1}, "q2": {"d2": 2}}


def test_format_detection_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusFormatError, match=r"corpus\.jsonl"):
        detect_format(tmp_path / "empty")
    (tmp_path / "c.txt").write_text("x", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match="--format"):
        detect_format(tmp_path / "c.txt")
    with pytest.raises(FileNotFoundError):
        detect_format(tmp_path / "missing.jsonl")
    folder = make_beir(tmp_path / "beir")
    with pytest.raises(CorpusFormatError, match="folder"):
        load_documents(folder, "jsonl")
    with pytest.raises(CorpusFormatError, match="unknown corpus format"):
        load_documents(folder, "csv")  # type: ignore[arg-type]


def test_qrels_trec_form_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text("1 0 d1 1\n1 0 d2 0\n", encoding="utf-8")
    assert load_qrels(path) == {"1": {"d1": 1, "d2": 0}}
    path.write_text("1 d1\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"qrels\.txt:1: expected 3 or 4 columns"):
        load_qrels(path)
    path.write_text("1 d1 high\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"qrels\.txt:1:"):
        load_qrels(path)


def test_qrels_in_the_smart_layout_read_their_document_ids(tmp_path: Path) -> None:
    # CACM's and CISI's qrels are "qid docid 0 0": read as TREC's "qid iteration docid grade" every
    # judgement became document "0" with grade 0 (issue 12: found while matching --qrels ids).
    path = tmp_path / "qrels.text"
    path.write_text("01 1410  0 0\n01 1572  0 0\n02 2434  0 0\n", encoding="utf-8")
    assert load_qrels(path) == {"01": {"1410": 1, "1572": 1}, "02": {"2434": 1}}
    # TREC's layout keeps one iteration value throughout, whatever the grades.
    path.write_text("1 0 d1 2\n1 0 d2 0\n2 0 d1 1\n", encoding="utf-8")
    assert load_qrels(path) == {"1": {"d1": 2, "d2": 0}, "2": {"d1": 1}}
    path.write_text("1 0 d1 1\n", encoding="utf-8")  # one line, iteration 0: TREC
    assert load_qrels(path) == {"1": {"d1": 1}}
    for text in ("1 a d1 1\n2 b d2 0\n", "1 d9 0 0\n"):  # fits neither layout / could be either
        path.write_text(text, encoding="utf-8")
        with pytest.raises(CorpusFormatError, match="neither known layout"):
            load_qrels(path)
    path.write_text("1 0 d1 1\n1 d2 1\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"qrels\.text:2: 3 columns, but line 1 has 4"):
        load_qrels(path)


def test_cacm_qrels_agree_with_the_pinned_loader() -> None:
    data = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    if not (data / "cacm" / "qrels.text").exists():
        pytest.skip(f"{data / 'cacm'} is absent")
    from weftsearch.eval import load_collection

    pinned = load_collection("cacm", data).qrels
    read = load_qrels(data / "cacm" / "qrels.text")
    # The pinned loader also drops the zero-padding of ids ("0851" is document "851").
    as_pairs = {(str(int(qid)), str(int(docid))) for qid, docs in read.items() for docid in docs}
    pinned_pairs = {
        (str(int(qid)), docid) for qid, docs in pinned.items() for docid, grade in docs.items() if grade
    }
    assert as_pairs == pinned_pairs


def test_query_errors_name_the_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [{"_id": "q1", "text": "a"}, {"_id": "q2"}])
    with pytest.raises(CorpusFormatError, match=r"q\.jsonl:2: query 'q2' has no 'text'"):
        load_queries(path)
    path = write_jsonl(tmp_path / "q.jsonl", [{"_id": "q1", "text": "a"}, {"_id": "q1", "text": "b"}])
    with pytest.raises(CorpusFormatError, match="repeats"):
        load_queries(path)


def test_queries_only_filter(tmp_path: Path) -> None:
    folder = make_beir(tmp_path / "beir")
    assert [q.qid for q in load_queries(folder / "queries.jsonl", only={"q2"})] == ["q2"]


# ---------------------------------------------------------------------- vectors


def test_vectors_attach_by_key_and_missing_rows_are_fine(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", RECORDS)
    matrix = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    npy = write_vectors(tmp_path, "vec", ["7", "a"], matrix)  # row order differs from the corpus
    assert default_ids_path(npy) == tmp_path / "vec_ids.txt"
    vectors = load_vectors(npy)
    assert vectors.dim == 2 and len(vectors) == 2
    docs = {d.key: d for d in load_documents(path, vectors=vectors)}
    assert docs["a"].vector is not None and docs["a"].vector.tolist() == [1.0, 0.0]
    assert docs["7"].vector is not None and docs["7"].vector.tolist() == [0.0, 1.0]
    assert docs["b"].vector is None
    index = Index()
    index.add_many(docs.values())
    assert index.vector_dim == 2


def test_vector_row_count_mismatch(tmp_path: Path) -> None:
    np.save(tmp_path / "v.npy", np.ones((3, 4), dtype=np.float32))
    (tmp_path / "v_ids.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"has 3 rows but .* lists 2 ids"):
        load_vectors(tmp_path / "v.npy")


def test_vector_id_not_in_corpus(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", RECORDS)
    npy = write_vectors(tmp_path, "v", ["a", "ghost"], np.ones((2, 3), dtype=np.float32))
    with pytest.raises(CorpusFormatError, match=r"not in the corpus .*'ghost'"):
        load_documents(path, vectors=load_vectors(npy))


@pytest.mark.parametrize(
    ("ids", "matrix", "needle"),
    [
        ("a\na\n", np.ones((2, 2), np.float32), "repeats"),
        ("a\n\nb\n", np.ones((3, 2), np.float32), "empty id"),
        ("a\nb\n", np.array([[1, 2], [np.nan, 1]], np.float32), "row 1 \\(id 'b'\\) has a non-finite"),
        ("a\n", np.ones(3, np.float32), "2-D"),
        ("a\n", np.array([["x", "y"]]), "real numbers"),
    ],
)
def test_bad_vector_files(tmp_path: Path, ids: str, matrix: np.ndarray[Any, Any], needle: str) -> None:
    np.save(tmp_path / "v.npy", matrix)
    (tmp_path / "ids.txt").write_text(ids, encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=needle):
        load_vectors(tmp_path / "v.npy", tmp_path / "ids.txt")


def test_vectors_need_an_ids_file(tmp_path: Path) -> None:
    np.save(tmp_path / "v.npy", np.ones((1, 2), dtype=np.float32))
    with pytest.raises(CorpusFormatError, match="no ids file"):
        load_vectors(tmp_path / "v.npy")


def test_non_npy_file(tmp_path: Path) -> None:
    (tmp_path / "v.npy").write_bytes(b"not numpy at all")
    (tmp_path / "v_ids.txt").write_text("a\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"not a readable \.npy"):
        load_vectors(tmp_path / "v.npy")


def test_float64_vectors_become_float32(tmp_path: Path) -> None:
    npy = write_vectors(tmp_path, "v", ["a"], np.ones((1, 3), dtype=np.float64))
    assert load_vectors(npy).matrix.dtype == np.float32


def test_query_vector_file(tmp_path: Path) -> None:
    np.save(tmp_path / "q.npy", np.array([1.0, 2.0]))
    assert load_query_vector(tmp_path / "q.npy").tolist() == [1.0, 2.0]
    np.save(tmp_path / "q.npy", np.array([[1.0, 2.0]]))
    assert load_query_vector(tmp_path / "q.npy").dtype == np.float32
    np.save(tmp_path / "q.npy", np.ones((2, 2)))
    with pytest.raises(CorpusFormatError, match="1-D"):
        load_query_vector(tmp_path / "q.npy")
    np.save(tmp_path / "q.npy", np.array([1.0, np.inf]))
    with pytest.raises(CorpusFormatError, match="non-finite"):
        load_query_vector(tmp_path / "q.npy")


def test_query_vectors_attach_and_wrong_file_is_caught(tmp_path: Path) -> None:
    folder = make_beir(tmp_path / "beir")
    npy = write_vectors(tmp_path, "qv", ["q2", "q9"], np.array([[1, 0], [0, 1]], dtype=np.float32))
    queries = {q.qid: q.query for q in load_queries(folder, vectors=load_vectors(npy))}
    assert queries["q1"].vector is None
    vector = queries["q2"].vector
    assert vector is not None and vector.tolist() == [1.0, 0.0]
    wrong = write_vectors(tmp_path, "wrong", ["x"], np.ones((1, 2), dtype=np.float32))
    with pytest.raises(CorpusFormatError, match="no id matches a query"):
        load_queries(folder, vectors=load_vectors(wrong))


# ---------------------------------------------------------------------- TREC runs


def test_trec_run_lines() -> None:
    index = Index()
    index.add_many([Document("d1", "ranking ranking"), Document("d2", "ranking")])
    results = index.search(Query("ranking"), 5, RRF(), BM25Scorer())
    lines = list(trec_run_lines("q1", results, "tag"))
    assert [line.split() for line in lines] == [
        ["q1", "Q0", "d1", "1", repr(results[0].score), "tag"],
        ["q1", "Q0", "d2", "2", repr(results[1].score), "tag"],
    ]
    with pytest.raises(InvalidParameterError):
        list(trec_run_lines("q 1", results))
    with pytest.raises(InvalidParameterError):
        list(trec_run_lines("q1", results, "two words"))


# ------------------------------------------------- hostile lines (issues 12.10, 13.5, 13.11, 13.14)

DEEP = "[" * 100_000 + "]" * 100_000  # past the recursion limit: a RecursionError before
HOSTILE_LINES = [
    ('{"key": "x", "key": "y"}', "names member 'key' twice"),
    ('{"key": "x", "text": "a", "text": "b"}', "names member 'text' twice"),
    ('{"key": "x", "fields": {"a": 1, "a": 2}}', "names member 'a' twice"),
    ('{"key": "x", "_id": "x"}', "gives its key twice ('key' and '_id')"),
    ('{"_id": "x", "id": 3}', "gives its key twice ('_id' and 'id')"),
    ('{"key": "x", "extra": ' + DEEP + "}", "nested deeper than 64"),
    ('{"key": "x", "extra": ' + "[" * 65 + "]" * 65 + "}", "nested deeper than 64"),
    ('{"key": "x", "extra": {"a": ' * 70 + "1" + "}" * 140, "nested deeper than 64"),
    ('{"key": "x", "text": "lone \\ud800 surrogate"}', "surrogate"),
    ('{"key": "x\\udc00"}', "\\udc00"),
    ('{"key": "x", "title": "\\ud83d"}', "surrogate"),
    ('{"key": "x", "links": ["b", "\\ud800"]}', "\\ud800"),
    ('{"key": "x", "fields": {"n\\ud800": 1}}', "surrogate"),
    ('{"key": "x", "fields": {"name": "\\udfff"}}', "surrogate"),
    ('{"key": "b\\u0000"}', "\\x00"),
    ('{"key": "x", "links": ["b\\u0000"]}', "\\x00"),
    ('{"key": " "}', "whitespace"),
    ('{"key": "  padded"}', "whitespace"),
    ('{"key": "a\\nb"}', "\\n"),
    ('{"key": "a\\tb"}', "\\t"),
    ('{"key": "a\\rb"}', "\\r"),
    ('{"key": "a\\u2028b"}', "\\u2028"),
    ('{"key": "a\\u0085b"}', "\\x85"),
    ('{"key": "x", "time": 1e400}', "time must be finite"),
    ('{"key": "x", "time": -1e400}', "time must be finite"),
    ('{"key": "x", "time": 1' + "0" * 400 + "}", "out of range"),
    ('{"key": "x", "time": NaN}', "time must be finite"),
    ('{"key": "x", "time": Infinity}', "time must be finite"),
    ('{"key": "x", "fields": {"n": NaN}}', "fields.n is not finite"),
    ('{"key": "x", "fields": {"n": -Infinity}}', "fields.n is not finite"),
    ('{"key": "x", "fields": {"n": 1e999}}', "fields.n is not finite"),
    ('{"key": "x", "fields": {"n": ' + "9" * 5000 + "}}", "invalid JSON"),
]


@pytest.mark.parametrize(
    ("line", "needle"), HOSTILE_LINES, ids=[f"line{i}" for i in range(len(HOSTILE_LINES))]
)
def test_hostile_lines_are_typed_errors_naming_file_and_line(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"key": "ok1", "text": "x"}\n\n' + line + '\n{"key": "ok2"}\n', encoding="utf-8")
    with pytest.raises(CorpusFormatError) as info:
        load_documents(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3:") and needle in message, message
    message.encode("utf-8")  # printable: a surrogate is shown escaped


def test_nesting_up_to_the_bound_and_the_largest_integer_fields_are_fine(tmp_path: Path) -> None:
    nested = "[" * 60 + "]" * 60
    path = write_jsonl(tmp_path / "c.jsonl", [])
    path.write_text(
        '{"key": "a", "ignored": ' + nested + ', "fields": {"n": ' + str(2**53) + "}}\n"
        '{"key": "b", "text": "brackets [[[[[[[[ in {{{{ text", "fields": {"s": "]]]]"}}\n'
        '{"key": "c", "text": "quoted \\" [ and \\\\", "title": "t"}\n',
        encoding="utf-8",
    )
    docs = load_documents(path)
    assert [d.key for d in docs] == ["a", "b", "c"]
    assert docs[0].fields["n"] == 2**53


def test_an_integer_field_a_number_field_cannot_hold_is_refused_by_size(tmp_path: Path) -> None:
    # Issue 26 item 9b: 400 digits loaded fine and failed at indexing (OverflowError); 5,000
    # digits failed in the JSON reader itself (ValueError: past Python's 4,300-digit limit).
    for digits in (17, 400, 5000):
        path = tmp_path / f"c{digits}.jsonl"
        path.write_text('{"key": "a", "fields": {"n": ' + "7" * digits + "}}\n", encoding="utf-8")
        with pytest.raises(CorpusFormatError, match=r"c\d+\.jsonl:1: ") as caught:
            load_documents(path)
        assert len(str(caught.value)) < 400


def test_hostile_query_lines_are_typed_errors(tmp_path: Path) -> None:
    cases = [
        ('{"_id": "q", "text": "x", "text": "y"}', "twice"),
        ('{"_id": "q", "id": "q", "text": "x"}', "twice"),
        ('{"_id": "q", "text": ' + DEEP + "}", "nested"),
        ('{"_id": "q", "text": "bad \\ud800"}', "surrogate"),
        ('{"_id": "q\\t1", "text": "x"}', "\\t"),
        ('{"_id": "q\\u0000", "text": "x"}', "\\x00"),
    ]
    for line, needle in cases:
        path = tmp_path / "queries.jsonl"
        path.write_text('{"_id": "ok", "text": "fine"}\n' + line + "\n", encoding="utf-8")
        with pytest.raises(CorpusFormatError) as info:
            load_queries(path)
        assert str(info.value).startswith(f"{path}:2:") and needle in str(info.value), line


def test_ids_and_qrels_files_that_are_not_utf8_name_the_line(tmp_path: Path) -> None:
    npy = write_vectors(tmp_path, "v", ["a", "b", "c"], np.ones((3, 2), dtype=np.float32))
    (tmp_path / "v_ids.txt").write_bytes(b"a\nb\xff\xfe\nc\n")
    with pytest.raises(CorpusFormatError, match=r"v_ids\.txt:2: not UTF-8"):
        load_vectors(npy)
    qrels = tmp_path / "qrels.tsv"
    qrels.write_bytes(b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td\xe92\t1\n")
    with pytest.raises(CorpusFormatError, match=r"qrels\.tsv:3: not UTF-8"):
        load_qrels(qrels)


@pytest.mark.parametrize(
    ("ids", "needle"),
    [(b"a\nb\x00\nc\n", "\\x00"), (b"a\nb\x0bc\nd\n", "\\x0b"), (b"a\nb\xe2\x80\xa8c\nd\n", "\\u2028")],
)
def test_ids_that_break_the_key_rule_are_refused(tmp_path: Path, ids: bytes, needle: str) -> None:
    npy = write_vectors(tmp_path, "v", ["a", "b", "c"], np.ones((3, 2), dtype=np.float32))
    (tmp_path / "v_ids.txt").write_bytes(ids)
    with pytest.raises(CorpusFormatError) as info:
        load_vectors(npy)
    assert "v_ids.txt:2:" in str(info.value) and needle in str(info.value)


def test_a_query_vector_header_claiming_a_huge_shape_is_refused(tmp_path: Path) -> None:
    # Read without a map, numpy allocated what the header claimed (3.6 TiB: MemoryError).
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }"
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    path = tmp_path / "q.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 64)
    with pytest.raises(CorpusFormatError, match=r"not a readable \.npy"):
        load_query_vector(path)


def test_a_list_in_fields_is_a_list_field(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"key": "a", "fields": {"tags": ["x", "y"], "n": [1, 2.5], "none": []}}\n', encoding="utf-8"
    )
    (doc,) = load_documents(path)
    assert doc.fields == {"tags": ("x", "y"), "n": (1, 2.5), "none": ()}
