"""``weft-search search ... --highlight``: each hit's marked snippets, in the table and in --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weftsearch import Document, Index
from weftsearch.cli import main
from weftsearch.distributed import ShardedIndex
from weftsearch.schema import Schema, TextField

TEXTS = {
    "a": "Graph retrieval with <b>BM25</b> runs fast over graphs.",
    "b": "Nothing relevant, only running.",
}


def _index(path: Path, store_text: bool = True) -> Path:
    with Index.create(path, store_text=store_text) as index:
        index.add_many([Document(key, text) for key, text in TEXTS.items()])
        index.commit()
    return path


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_highlight_prints_the_marked_snippet_under_each_hit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = _index(tmp_path / "i")
    assert main(["search", "graph running", "--index", str(index), "--highlight"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[:2] == ["1", "a"]
    assert (
        lines[3].strip()
        == "<em>Graph</em> retrieval with <b>BM25</b> <em>runs</em> fast over <em>graphs</em>."
    )
    assert lines[4].split()[:2] == ["2", "b"]
    assert lines[5].strip() == "Nothing relevant, only <em>running</em>."


def test_no_snippet_lines_without_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = _index(tmp_path / "i")
    assert main(["search", "graph", "--index", str(index)]) == 0
    assert "<em>" not in capsys.readouterr().out


def test_highlight_json_and_fragment_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = _index(tmp_path / "i")
    assert (
        main(["search", "bm25", "--index", str(index), "--highlight", "--fragment-size", "12", "--json"]) == 0
    )
    hit = json.loads(capsys.readouterr().out)["hits"][0]
    (snippet,) = hit["highlights"]["text"]["snippets"]
    assert "<em>BM25</em>" in snippet["marked"] and snippet["end"] - snippet["start"] <= 12


def test_highlight_without_stored_text_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = _index(tmp_path / "bare", store_text=False)
    assert main(["search", "graph", "--index", str(index), "--highlight"]) == 0
    assert "(the text is not stored (the index was created with store_text=False))" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--fragment-size", "0"], "--fragment-size: expected a positive integer, got '0'"),
        (["--fragment-size", "10001"], "--fragment-size: at most 10000, got 10001"),
    ],
)
def test_bad_fragment_size_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    index = _index(tmp_path / "i")
    assert main(["search", "graph", "--index", str(index), "--highlight", *extra]) == 2
    assert message in error_line(capsys)


def test_highlight_is_for_one_query(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = _index(tmp_path / "i")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": "graph"}) + "\n", encoding="utf-8")
    assert main(["search", "--queries", str(queries), "--index", str(index), "--highlight"]) == 2
    assert "--highlight is for one QUERY, not a batch (--queries)" in error_line(capsys)


def _named_index(path: Path, shards: int = 0) -> Path:
    """Two documents with a ``title``: one index, or ``shards`` shards of a sharded one."""
    schema = Schema((TextField("text", positions=True), TextField("title", positions=True)))
    documents = [
        Document("a", "gamma beta alpha", text_fields={"title": "Alpha beta runs"}),
        Document("b", "alpha beta", text_fields={"title": "beta alpha"}),
    ]
    index = ShardedIndex.create(path, shards, schema=schema) if shards else Index.create(path, schema=schema)
    with index:
        index.add_many(documents)
        index.commit()
    return path


@pytest.mark.parametrize("shards", [0, 2])
def test_highlight_fields_are_passed_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shards: int
) -> None:
    index = str(_named_index(tmp_path / "i", shards))
    query = ["search", 'title:"alpha beta"', "--syntax", "lucene", "--index", index, "--json", "--highlight"]
    assert main([*query, "--highlight-field", "title", "--highlight-field", "text"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)["hits"]
    assert hit["key"] == "a"
    assert hit["highlights"]["title"]["snippets"][0]["marked"] == "<em>Alpha beta</em> runs"
    assert hit["highlights"]["text"]["snippets"] == []  # a fielded clause marks only its field


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["body:alpha", "--syntax", "lucene"],
            "unknown text field 'body' in the query; the index's text fields are text, title",
        ),
        (["alpha", "--highlight", "--highlight-field", "body"], "cannot highlight unknown text field 'body'"),
        (["alpha", "--highlight-field", "title"], "--highlight-field is for --highlight: add --highlight"),
        (['text:"alpha beta"', "--syntax", "lucene"], None),
    ],
)
@pytest.mark.parametrize("shards", [0, 2])
def test_bad_fields_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str | None, shards: int
) -> None:
    index = str(_named_index(tmp_path / "i", shards))
    code = main(["search", argv[0], "--index", index, *argv[1:]])
    if message is None:
        assert code == 0
        return
    assert code == 2
    assert message in error_line(capsys)
