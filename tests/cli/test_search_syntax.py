"""``weft-search search --syntax lucene``: parsed queries, and syntax errors as exit 2 with a caret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import corpus, index_dir, vectors, write_jsonl  # noqa: F401  (fixtures)
from weftsearch.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_lucene_syntax_is_opt_in(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    base = ["search", "--index", str(index_dir), "--signals", "text", "--json"]
    code, out, _ = run([*base, "frequency AND NOT inverse", "--syntax", "lucene"], capsys)
    parsed = [hit["key"] for hit in json.loads(out)["hits"]]
    code_plain, out_plain, _ = run([*base, "frequency AND NOT inverse"], capsys)
    plain = [hit["key"] for hit in json.loads(out_plain)["hits"]]
    code_word, out_word, _ = run([*base, "frequency"], capsys)
    frequency = [hit["key"] for hit in json.loads(out_word)["hits"]]
    code_inverse, out_inverse, _ = run([*base, "inverse"], capsys)
    inverse = {hit["key"] for hit in json.loads(out_inverse)["hits"]}
    assert code == code_plain == code_word == code_inverse == 0
    assert inverse and frequency
    assert parsed == [key for key in frequency if key not in inverse]
    assert set(plain) >= inverse  # plain text: the words, 'inverse' included


@pytest.mark.parametrize(("query", "position"), [("frequency AND (", 14), ('"inverse document', 0)])
def test_syntax_errors_exit_2_with_a_caret(
    index_dir: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    query: str,
    position: int,
) -> None:
    code, _, err = run(["search", query, "--index", str(index_dir), "--syntax", "lucene"], capsys)
    assert code == 2
    lines = err.rstrip("\n").splitlines()
    assert lines[0].startswith("weft-search: error: ") and f"at position {position}" in lines[0]
    assert "Traceback" not in err
    assert lines[1].strip() == query and lines[2].index("^") == lines[1].index(query[0]) + position


def test_batch_queries_are_parsed_first_and_errors_name_the_query(
    index_dir: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", [{"_id": "q1", "text": "+inverse +frequency"}])
    run_file = tmp_path / "run.txt"
    argv = ["search", "--index", str(index_dir), "--signals", "text", "--syntax", "lucene"]
    code, _, _ = run([*argv, "--queries", str(good), "--run-out", str(run_file)], capsys)
    assert code == 0 and run_file.read_text(encoding="utf-8").strip()
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"_id": "q1", "text": "a"}, {"_id": "q2", "text": "a OR"}])
    code, out, err = run([*argv, "--queries", str(bad)], capsys)
    assert code == 2 and "query 'q2'" in err and "at position 2" in err and not out
