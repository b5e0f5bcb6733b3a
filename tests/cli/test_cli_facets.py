"""``weft-search search --facets`` and list fields from a JSONL corpus (issue 30, items 2 and 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import error_line, write_jsonl
from weftsearch import Index
from weftsearch.cli import main

ROWS = [
    {"key": "a", "text": "graph retrieval", "fields": {"tags": ["graph", "ir"], "year": 2020}},
    {"key": "b", "text": "graph ranking", "fields": {"tags": ["graph"], "year": 2021}},
    {"key": "c", "text": "dense retrieval", "fields": {"tags": ["dense", "ir"], "year": 2021}},
    {"key": "d", "text": "lexical retrieval", "fields": {"tags": [], "year": 2019}},
]


@pytest.fixture
def index_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", ROWS)
    assert main(["index", str(corpus), "--index", str(tmp_path / "idx")]) == 0
    capsys.readouterr()
    return tmp_path / "idx"


def test_search_facets_count_over_the_filter_matches(
    index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "retrieval", "--index", str(index_dir), "-k", "1", "--facets", "tags,year"]
    assert main([*argv, "--json", "--filter", "tags contains 'ir'"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["hits"]) == 1  # k cuts the hits, never the counts
    assert out["facets"] == {
        "tags": [{"value": "ir", "count": 2}, {"value": "dense", "count": 1}, {"value": "graph", "count": 1}],
        "year": [{"value": 2020, "count": 1}, {"value": 2021, "count": 1}],
    }
    with Index.open(index_dir, readonly=True) as index:
        assert index.facets("tags contains 'ir'", ["tags"]) == {
            "tags": [("ir", 2), ("dense", 1), ("graph", 1)]
        }
    assert main([*argv, "--facet-k", "1"]) == 0
    text = capsys.readouterr().out
    assert 'tags: "graph" (2)\n' in text and "year: 2021 (2)\n" in text
    assert main(["search", "retrieval", "--index", str(index_dir), "--json"]) == 0
    assert "facets" not in json.loads(capsys.readouterr().out)  # only when asked


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--facets", "text"], "no document has field 'text' to facet on"),
        (["--facets", "tags,,year"], "--facets takes field names separated by commas"),
        (["--facets", "@time"], "@time cannot be a facet"),
        (["--facets", "tags", "--facet-k", "0"], "expected a positive integer"),
        (["--facets", "tags", "--facet-k", "10001"], "facet k must be an integer from 1 to 10000"),
        (["--filter", "year contains 2020"], "'year' holds number values, not lists"),
    ],
)
def test_bad_facet_options_are_one_line_errors(
    index_dir: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "retrieval", "--index", str(index_dir), *extra]) == 2
    line = error_line(capsys)
    assert message in line and len(line) < 400


def test_a_list_field_mixing_types_in_a_corpus_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_jsonl(tmp_path / "bad.jsonl", [{"key": "x", "text": "t", "fields": {"tags": ["a", 1]}}])
    assert main(["index", str(corpus), "--index", str(tmp_path / "idx")]) == 2
    line = error_line(capsys)
    assert "bad.jsonl:1" in line and "'tags' mixes str 'a'" in line


def test_batch_mode_facets_each_query_in_json_lines(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q1", "text": "graph"}\n{"_id": "q2", "text": "retrieval"}\n')
    argv = [
        "search",
        "--queries",
        str(queries),
        "--index",
        str(index_dir),
        "--facets",
        "tags",
        "--facet-k",
        "1",
    ]
    assert main([*argv, "--json", "--filter", "year >= 2021"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["qid"] for line in lines] == ["q1", "q2"]
    # Counted over the filter's matches (b and c), whatever each query's hits are.
    assert all(line["facets"] == {"tags": [{"value": "dense", "count": 1}]} for line in lines)
    assert main(argv) == 2  # a TREC run has no place for them
    assert "--facets with --queries needs --json" in error_line(capsys)
    assert main([*argv, "--json", "--facets", "text"]) == 2
    assert "no document has field 'text' to facet on" in error_line(capsys)
