"""``weft-search index --embed`` and ``search "text" --signals text,vector`` without a vector file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.fake_embedder import NAME
from weftsearch.cli import main
from weftsearch.engine.index import Index

CORPUS = [
    {"id": "a", "text": "sparse retrieval with inverted indexes"},
    {"id": "b", "text": "dense retrieval with neural embeddings"},
    {"id": "c", "text": "graph walks over citation links"},
]


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in CORPUS))
    return path


@pytest.fixture
def embedded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    index = tmp_path / "idx"
    assert main(["index", str(_corpus(tmp_path)), "--index", str(index), "--embed", NAME]) == 0
    out = capsys.readouterr().out
    assert f"(3 with vectors, dim 16, embedder {NAME})" in out
    return index


def test_index_embed_records_the_embedder_and_embeds_documents(embedded: Path) -> None:
    with Index.open(embedded, readonly=True) as index:
        assert index.embedder is not None and index.embedder.name == NAME
        assert all(index.get(key).vector is not None for key in "abc")


def test_search_text_with_the_vector_signal_needs_no_vector_file(
    embedded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "citation links", "--index", str(embedded), "--json", "-k", "3"]
    assert main([*argv, "--signals", "text,vector"]) == 0
    captured = capsys.readouterr()
    assert "vector signal needs" not in captured.err
    result = json.loads(captured.out)
    assert result["signals"] == ["bm25", "vector"]
    assert result["hits"][0]["key"] == "c"
    assert main([*argv, "--rank", "vector"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["key"] == "c"


def test_search_batch_embeds_each_query(
    embedded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "q1", "text": "neural embeddings"}\n{"_id": "q2", "text": "citation"}\n')
    run = tmp_path / "run.txt"
    argv = ["search", "--queries", str(queries), "--index", str(embedded), "--rank", "vector", "-k", "1"]
    assert main([*argv, "--run-out", str(run)]) == 0
    assert "no vector" not in capsys.readouterr().err
    firsts = {line.split()[0]: line.split()[2] for line in run.read_text().splitlines()}
    assert firsts == {"q1": "b", "q2": "c"}


def test_an_unknown_embedder_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", str(_corpus(tmp_path)), "--index", str(tmp_path / "i"), "--embed", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("weft-search: error: unknown embedder 'nope'")
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "i").exists()


def test_an_index_without_embedder_still_drops_the_vector_signal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", str(_corpus(tmp_path)), "--index", str(tmp_path / "i")]) == 0
    capsys.readouterr()
    assert main(["search", "links", "--index", str(tmp_path / "i"), "--signals", "text,vector"]) == 0
    assert "the vector signal needs a query vector" in capsys.readouterr().err


def test_search_says_where_the_query_vector_came_from(
    embedded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "citation links", "--index", str(embedded), "-k", "1"]
    assert main([*argv, "--rank", "vector", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["query_vector"] == {"source": "embedder", "name": NAME}
    assert main([*argv, "--rank", "vector"]) == 0
    assert (
        f"query vector: the query text embedded by the index's embedder {NAME}\n" in capsys.readouterr().out
    )
    own = tmp_path / "q.npy"
    np.save(own, np.ones(16, dtype=np.float32))
    assert main([*argv, "--rank", "vector", "--query-vector", str(own), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["query_vector"] == {"source": "file", "path": str(own)}
    assert main([*argv, "--rank", "bm25", "--json"]) == 0  # no vector read: none to account for
    assert json.loads(capsys.readouterr().out)["query_vector"] is None
    assert main([*argv, "--rank", "bm25"]) == 0
    assert "query vector:" not in capsys.readouterr().out


def test_search_without_an_embedder_drops_the_vector_signal_and_reports_no_vector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", str(_corpus(tmp_path)), "--index", str(tmp_path / "i")]) == 0
    capsys.readouterr()
    argv = ["search", "links", "--index", str(tmp_path / "i"), "--signals", "text,vector"]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    assert "the vector signal needs a query vector" in captured.err
    assert json.loads(captured.out)["query_vector"] is None
