"""Tests of the weft-search command line (weftsearch.cli) and the demo (weftsearch.demo)."""

from __future__ import annotations

import itertools
import json
import zlib
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.plans import without_paths
from weftsearch import RRF, BM25Scorer, Index
from weftsearch.cli import main, parse_signals
from weftsearch.corpus import load_documents, load_qrels
from weftsearch.demo import DEMO_DIM, DEMO_QUERIES, demo_documents, hash_embedding
from weftsearch.errors import UnknownSignalError

DOCS: list[dict[str, Any]] = [
    {
        "key": "bm25",
        "title": "BM25",
        "text": "BM25 ranks documents by term frequency and inverse document frequency.",
        "links": ["tfidf", "fusion"],
        "time": "2015-01-01",
        "fields": {"topic": "lexical"},
    },
    {
        "key": "tfidf",
        "title": "TF-IDF",
        "text": "Term frequency times inverse document frequency.",
        "links": ["bm25"],
        "time": "2012-06-01",
        "fields": {"topic": "lexical"},
    },
    {
        "key": "dense",
        "title": "Dense retrieval",
        "text": "Neural encoders map queries and documents to vectors.",
        "links": ["ann"],
        "time": "2020-03-01",
        "fields": {"topic": "dense"},
    },
    {
        "key": "ann",
        "title": "Nearest neighbours",
        "text": "Approximate nearest neighbour search over vectors with graphs.",
        "links": ["dense"],
        "time": "2019-05-01",
    },
    {
        "key": "fusion",
        "title": "Rank fusion",
        "text": "Reciprocal rank fusion merges the rankings of BM25 and dense retrieval.",
        "links": ["bm25", "dense"],
        "time": "2021-09-01T12:00:00Z",
    },
    {"key": "untitled", "text": "A document with no title, no links and no date about fusion."},
]
QUERIES = [
    {"_id": "q1", "text": "inverse document frequency"},
    {"_id": "q2", "text": "rank fusion of dense retrieval"},
    {"_id": "q3", "text": "nearest neighbour vectors"},
]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "corpus.jsonl", DOCS)


@pytest.fixture
def vectors(tmp_path: Path) -> Path:
    """Hash vectors for the tiny corpus, in reverse key order, with a sibling ids file."""
    keys = [d["key"] for d in DOCS][::-1]
    texts = {d["key"]: f"{d.get('title', '')} {d['text']}" for d in DOCS}
    np.save(tmp_path / "docs.npy", np.stack([hash_embedding(texts[k], 16) for k in keys]))
    (tmp_path / "docs_ids.txt").write_text("\n".join(keys) + "\n", encoding="utf-8")
    return tmp_path / "docs.npy"


@pytest.fixture
def index_dir(tmp_path: Path, corpus: Path, vectors: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    directory = tmp_path / "idx"
    assert main(["index", str(corpus), "--index", str(directory), "--vectors", str(vectors)]) == 0
    capsys.readouterr()
    return directory


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("weft-search: error: ")
    assert "Traceback" not in captured.err
    return lines[0]


# ---------------------------------------------------------------------- index


def test_index_prints_a_one_line_summary(
    tmp_path: Path, corpus: Path, vectors: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", str(corpus), "--index", str(tmp_path / "plain")]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("indexed 6 documents (0 with vectors)") and out.endswith(" s")
    assert len(out.splitlines()) == 1
    assert main(["index", str(corpus), "--index", str(tmp_path / "v"), "--vectors", str(vectors)]) == 0
    assert "indexed 6 documents (6 with vectors, dim 16)" in capsys.readouterr().out


def test_index_refuses_to_overwrite_unless_asked(
    index_dir: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", str(corpus), "--index", str(index_dir)]) == 2
    assert "not empty" in error_line(capsys)
    assert main(["index", str(corpus), "--index", str(index_dir), "--overwrite", "--analyzer", "simple"]) == 0


def test_index_bad_jsonl_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "a", "text": "x"}\n{"key": "b", "text": \n', encoding="utf-8")
    assert main(["index", str(bad), "--index", str(tmp_path / "idx")]) == 2
    line = error_line(capsys)
    assert f"{bad}:2:" in line and "invalid JSON" in line
    assert not (tmp_path / "idx").exists()  # nothing is created when the corpus is bad


def test_index_vector_ids_mismatch(tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "v.npy", np.ones((5, 4), dtype=np.float32))
    (tmp_path / "ids.txt").write_text("bm25\ntfidf\n", encoding="utf-8")
    argv = ["index", str(corpus), "--index", str(tmp_path / "i"), "--vectors", str(tmp_path / "v.npy")]
    assert main([*argv, "--vector-ids", str(tmp_path / "ids.txt")]) == 2
    assert "has 5 rows but" in error_line(capsys)
    assert main(argv) == 2  # no v_ids.txt next to v.npy
    assert "no ids file" in error_line(capsys)


def test_index_missing_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["index", str(tmp_path / "nope.jsonl"), "--index", str(tmp_path / "i")]) == 2
    assert "nope.jsonl" in error_line(capsys)


def test_index_beir_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "beir"
    folder.mkdir()
    write_jsonl(folder / "corpus.jsonl", [{"_id": "d1", "title": "T", "text": "x", "metadata": {}}])
    assert main(["index", str(folder), "--index", str(tmp_path / "i")]) == 0
    assert "indexed 1 documents" in capsys.readouterr().out
    assert main(["search", "x", "--index", str(tmp_path / "i"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["fields"] == {"title": "T"}


# ---------------------------------------------------------------------- single search


def test_search_round_trip_table(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "inverse frequency", "--index", str(index_dir), "-k", "3"]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0].startswith("query 'inverse frequency': 2 hit(s)")
    assert lines[1].split() == ["rank", "key", "score", "title"]
    assert [line.split()[:2] for line in lines[2:]] == [["1", "tfidf"], ["2", "bm25"]]
    assert lines[2].endswith("TF-IDF")
    assert main(["search", "title", "--index", str(index_dir)]) == 0
    assert "A document with no title" in capsys.readouterr().out  # text shown when there is no title


def test_search_json_parses(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["search", "rank fusion", "--index", str(index_dir), "--json", "--signals", "text,graph,recency"]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["query"] == "rank fusion"
    assert payload["signals"] == ["bm25", "graph", "recency"]  # --signals text is bm25 in the spec
    assert payload["fuser"] == "rrf"
    hits = payload["hits"]
    assert hits[0]["key"] == "fusion"
    assert [hit["rank"] for hit in hits] == list(range(1, len(hits) + 1))
    assert all(len(hit["signals"]) == 3 for hit in hits)
    assert hits[0]["fields"]["title"] == "Rank fusion"


def test_search_explain_shows_every_signal(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "search",
        "bm25",
        "--index",
        str(index_dir),
        "--signals",
        "text,graph,pagerank,recency",
        "--explain",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[1].split()
    assert header == ["rank", "key", "score", "bm25", "graph", "pagerank", "recency", "title"]
    for signal in ("bm25", "graph", "pagerank", "recency"):
        assert any(line.split()[:1] == [signal] and "contribution" in line for line in out.splitlines())
    assert "absent" in out  # the graph signal drops its seed (bm25)
    assert "score" in out and "rank 1" in out


def test_search_explain_terms_prints_and_returns_each_hits_breakdown(
    index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "rank fusion", "--index", str(index_dir), "--signals", "text,recency", "-k", "2"]
    assert main([*argv, "--explain-terms"]) == 0
    out = capsys.readouterr().out
    assert out.count("why '") == 2
    assert "fused by rrf from each stream's contribution:" in out
    assert "weight(text:fusion) [BM25]" in out and "idf, computed as" in out
    assert main([*argv, "--explain-terms", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    for hit in payload["hits"]:
        assert hit["explanation"]["value"] == hit["score"]
        assert [d["value"] for d in hit["explanation"]["details"]] == [
            s["contribution"] for s in hit["signals"]
        ]
    assert main(argv) == 0
    assert "why '" not in capsys.readouterr().out


def test_search_with_query_vector(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "q.npy", hash_embedding("Nearest neighbours vectors graphs", 16))
    argv = ["search", "neighbour", "--index", str(index_dir), "--signals", "text,vector", "--json"]
    assert main([*argv, "--query-vector", str(tmp_path / "q.npy")]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["signals"] == ["bm25", "vector"]
    assert payload["hits"][0]["key"] == "ann"
    vector_hit = payload["hits"][0]["signals"][1]
    assert vector_hit["rank"] == 1 and vector_hit["score"] > 0.5


def test_vector_signal_without_query_vector_is_dropped_with_a_warning(
    index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "fusion", "--index", str(index_dir), "--signals", "text,vector", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "weft-search: warning: the vector signal needs a query vector" in captured.err
    assert json.loads(captured.out)["signals"] == ["bm25"]
    assert main(["search", "fusion", "--index", str(index_dir), "--signals", "vector"]) == 2
    assert "no other signal" in error_line(capsys)


def test_weighted_and_score_fusion(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["search", "dense retrieval", "--index", str(index_dir), "--signals", "text,recency", "--json"]
    assert main([*base, "--fusion", "weighted", "--weights", "1,0"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["fuser"] == "weighted-rrf"
    assert all(hit["signals"][1]["contribution"] == 0 for hit in payload["hits"])
    assert main([*base, "--fusion", "score", "--norm", "zscore", "--weights", "2,1"]) == 0
    assert json.loads(capsys.readouterr().out)["fuser"] == "score-zscore"
    assert main([*base, "--fusion", "weighted"]) == 2
    assert "needs --weights" in error_line(capsys)
    assert main([*base, "--fusion", "weighted", "--weights", "1,1,1"]) == 2
    assert "--weights has 3" in error_line(capsys)
    assert main([*base, "--weights", "1,1"]) == 2
    assert "--fusion weighted" in error_line(capsys)


def test_unknown_signal_exit_code_and_one_line(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "x", "--index", str(index_dir), "--signals", "text,popularity"]) == 2
    line = error_line(capsys)
    assert "unknown signal 'popularity'" in line and "text, vector, graph, pagerank, recency" in line
    with pytest.raises(UnknownSignalError):
        parse_signals("text,nope")
    assert parse_signals(" Text , GRAPH ") == ["text", "graph"]


def test_missing_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "x", "--index", str(tmp_path / "none")]) == 2
    assert "no index at" in error_line(capsys)


def test_usage_errors(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "--index", str(index_dir)]) == 2
    assert "give a QUERY" in error_line(capsys)
    assert main(["search", "x", "--index", str(index_dir), "--run-out", "r.txt"]) == 2
    assert "needs --queries" in error_line(capsys)
    assert main(["search", "x", "--index", str(index_dir), "-k", "0"]) == 2  # argparse's type check
    assert "argument -k: expected a positive integer, got '0'" in error_line(capsys)  # no usage block
    assert main(["search", "x", "--index", str(index_dir), "-k", "abc", "--rrf-k", "1"]) == 2
    assert "argument -k:" in error_line(capsys)
    assert main(["search", "x", "--index", str(index_dir), "--bogus"]) == 2  # a usage error keeps it
    assert "usage: weft-search" in capsys.readouterr().err
    assert main(["search", "x", "--index", str(index_dir), "-k", "5", "--depth", "2"]) == 2
    assert "depth" in error_line(capsys)
    assert main([]) == 2
    capsys.readouterr()
    assert main(["--help"]) == 0
    assert "index" in capsys.readouterr().out


# ---------------------------------------------------------------------- batch search


def check_run_file(text: str, k: int, tag: str = "weft") -> dict[str, list[tuple[str, int, float]]]:
    """Parse a TREC run; check 6 columns, ranks 1..n per query, scores non-increasing."""
    per_query: dict[str, list[tuple[str, int, float]]] = {}
    for line in text.splitlines():
        columns = line.split()
        assert len(columns) == 6, line
        qid, q0, docid, rank, score, run_tag = columns
        assert q0 == "Q0" and run_tag == tag
        per_query.setdefault(qid, []).append((docid, int(rank), float(score)))
    for qid, rows in per_query.items():
        assert [rank for _, rank, _ in rows] == list(range(1, len(rows) + 1)), qid
        assert len(rows) <= k
        scores = [score for _, _, score in rows]
        assert all(a >= b for a, b in itertools.pairwise(scores)), qid
        assert len({docid for docid, _, _ in rows}) == len(rows)
    return per_query


def test_batch_run_file(index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = write_jsonl(tmp_path / "queries.jsonl", QUERIES)
    run = tmp_path / "run.txt"
    argv = ["search", "--index", str(index_dir), "--queries", str(queries), "-k", "4", "--run-out", str(run)]
    assert main([*argv, "--signals", "text,graph", "--run-tag", "mytag"]) == 0
    assert "wrote" in capsys.readouterr().err
    per_query = check_run_file(run.read_text(encoding="utf-8"), 4, "mytag")
    assert set(per_query) == {"q1", "q2", "q3"}
    assert per_query["q1"][0][0] in {"tfidf", "bm25"}
    assert "fusion" in {docid for docid, _, _ in per_query["q2"]}


def test_batch_with_query_vectors_and_qrels(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = write_jsonl(tmp_path / "queries.jsonl", QUERIES)
    ids = ["q3", "q1"]  # q2 has no vector
    np.save(
        tmp_path / "qv.npy",
        np.stack([hash_embedding(q["text"], 16) for q in QUERIES if q["_id"] in ids][::-1]),
    )
    (tmp_path / "qv_ids.txt").write_text("q3\nq1\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    argv = ["search", "--index", str(index_dir), "--queries", str(queries), "--run-out", str(run)]
    argv += ["--signals", "text,vector", "--query-vectors", str(tmp_path / "qv.npy"), "-k", "3"]
    assert main(argv) == 0
    assert "1 of 3 queries have no vector" in capsys.readouterr().err
    per_query = check_run_file(run.read_text(encoding="utf-8"), 3)
    assert per_query["q3"][0][0] == "ann"
    qrels = tmp_path / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq3\tann\t1\n", encoding="utf-8")
    assert main([*argv, "--qrels", str(qrels)]) == 0
    assert set(check_run_file(run.read_text(encoding="utf-8"), 3)) == {"q3"}


def test_batch_to_stdout_and_json_lines(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = write_jsonl(tmp_path / "queries.jsonl", QUERIES)
    argv = ["search", "--index", str(index_dir), "--queries", str(queries), "-k", "2"]
    assert main(argv) == 0
    assert set(check_run_file(capsys.readouterr().out, 2)) == {"q1", "q2", "q3"}
    assert main([*argv, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["qid"] for row in rows] == ["q1", "q2", "q3"]
    assert all(len(row["hits"]) <= 2 for row in rows)


def test_batch_threads_give_the_same_output_as_one_search_per_query(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch runs through Index.search_many (in slices, on threads): the same bytes as
    one Index.search per query, for more queries than one slice holds."""
    import weftsearch.cli.search as cli

    monkeypatch.setattr(cli, "_BATCH_SLICE", 2)  # four slices for seven queries
    many = [{"_id": f"m{n}", "text": QUERIES[n % len(QUERIES)]["text"]} for n in range(7)]
    queries = write_jsonl(tmp_path / "queries.jsonl", many)
    argv = ["search", "--index", str(index_dir), "--queries", str(queries), "-k", "3", "--json"]
    outputs = []
    for threads in ([], ["--threads", "1"], ["--threads", "4"]):
        assert main([*argv, *threads]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2]
    index = Index.open(index_dir, readonly=True)
    rows = [json.loads(line) for line in outputs[0].splitlines()]
    assert [row["qid"] for row in rows] == [f"m{n}" for n in range(7)]
    for row, query in zip(rows, many, strict=True):
        one = index.search(query["text"], 3, RRF(), BM25Scorer()).to_dict()  # the CLI's default: bm25
        # The batch may score BM25 compiled where one search runs numpy: the path-free plan only.
        assert without_paths({key: row[key] for key in one}) == without_paths(json.loads(json.dumps(one)))
    assert main([*argv, "--threads", "0"]) == 2
    assert "positive integer" in capsys.readouterr().err
    assert main(["search", "x", "--index", str(index_dir), "--threads", "2"]) == 2
    assert "--threads needs --queries" in error_line(capsys)


def test_batch_bad_query_file(index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"_id": "q1", "text": "a"}\nnot json\n', encoding="utf-8")
    assert main(["search", "--index", str(index_dir), "--queries", str(bad)]) == 2
    assert f"{bad}:2:" in error_line(capsys)


# ---------------------------------------------------------------------- demo


def test_demo_runs_and_explains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "toy" in out and "not a language model" in out
    for number, query in enumerate(DEMO_QUERIES, start=1):
        assert f"[{number}/{len(DEMO_QUERIES)}] query: {query!r}" in out
    assert out.count("rank  key") == len(DEMO_QUERIES)
    assert "text  vector  graph  recency" in out
    assert out.count("contribution") == 4 * 5 * len(DEMO_QUERIES)


def test_demo_corpus_is_well_formed() -> None:
    with resources.as_file(resources.files("weftsearch").joinpath("data/demo_corpus.jsonl")) as path:
        documents = load_documents(path, "jsonl")
    keys = {d.key for d in documents}
    assert 30 <= len(documents) <= 45
    for document in documents:
        assert document.links and set(document.links) <= keys, document.key  # every link resolves
        assert document.time is not None and document.fields.get("title") and document.fields.get("topic")
    stamps = [d.timestamp for d in documents if d.timestamp is not None]
    assert max(stamps) - min(stamps) > 5 * 365 * 86400  # dates spread over years


def test_demo_documents_have_hash_vectors() -> None:
    documents = demo_documents()
    assert all(d.vector is not None and d.vector.shape == (DEMO_DIM,) for d in documents)
    assert all(abs(float(np.linalg.norm(d.vector)) - 1.0) < 1e-5 for d in documents if d.vector is not None)


def test_hash_embedding_is_the_documented_function() -> None:
    # "Stemming" analyses to the single term "stem": one bucket, sign from bit 31 of crc32.
    code = zlib.crc32(b"stem")
    expected = np.zeros(32, dtype=np.float32)
    expected[code % 32] = -1.0 if code >> 31 else 1.0
    assert hash_embedding("Stemming", 32).tolist() == expected.tolist()
    assert hash_embedding("the of and", 8).tolist() == [0.0] * 8  # stopwords only: zero vector
    first = hash_embedding("Reciprocal rank fusion of rankings")
    assert (
        first.dtype == np.float32
        and first.tolist() == hash_embedding("reciprocal RANK fusion rankings").tolist()
    )


# ---------------------------------------------------------------------- SciFact (shared data)

SCIFACT = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "scifact"
FROZEN = SCIFACT / "vectors" / "all-minilm-l6-v2-int8"


def mean_ndcg10(run_text: str, qrels: dict[str, dict[str, int]]) -> float:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    run: dict[str, dict[str, float]] = {}
    for line in run_text.splitlines():
        qid, _, docid, _, score, _ = line.split()
        run.setdefault(qid, {})[docid] = float(score)
    measures = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(run)
    return float(np.mean([m["ndcg_cut_10"] for m in measures.values()]))


@pytest.mark.reference
@pytest.mark.data
def test_scifact_text_and_hybrid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (SCIFACT / "corpus.jsonl").is_file() or not (FROZEN / "corpus.npy").is_file():
        pytest.skip(f"SciFact with frozen vectors not found at {SCIFACT} (../shared/datasets/scifact)")
    qrels_path = SCIFACT / "qrels" / "test.tsv"
    qrels = load_qrels(qrels_path)

    text_index, hybrid_index = tmp_path / "text", tmp_path / "hybrid"
    assert main(["index", str(SCIFACT), "--index", str(text_index)]) == 0
    assert "indexed 5183 documents (0 with vectors)" in capsys.readouterr().out
    argv = ["index", str(SCIFACT), "--index", str(hybrid_index), "--vectors", str(FROZEN / "corpus.npy")]
    assert main([*argv, "--vector-ids", str(FROZEN / "corpus_ids.txt")]) == 0
    assert "indexed 5183 documents (5183 with vectors, dim 384)" in capsys.readouterr().out

    assert main(["search", "microRNA and cancer", "--index", str(text_index), "-k", "5", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["hits"]) == 5

    batch = ["search", "--queries", str(SCIFACT / "queries.jsonl"), "--qrels", str(qrels_path), "-k", "10"]
    text_run, hybrid_run = tmp_path / "text.run", tmp_path / "hybrid.run"
    assert main([*batch, "--index", str(text_index), "--run-out", str(text_run)]) == 0
    hybrid = [*batch, "--index", str(hybrid_index), "--run-out", str(hybrid_run), "--signals", "text,vector"]
    hybrid += [
        "--query-vectors",
        str(FROZEN / "queries.npy"),
        "--query-vector-ids",
        str(FROZEN / "queries_ids.txt"),
    ]
    assert main(hybrid) == 0
    capsys.readouterr()

    text_lines = text_run.read_text(encoding="utf-8")
    hybrid_lines = hybrid_run.read_text(encoding="utf-8")
    assert set(check_run_file(text_lines, 10)) <= set(qrels)
    assert set(check_run_file(hybrid_lines, 10)) == set(qrels)  # 300 test queries, each with a vector
    text_ndcg, hybrid_ndcg = mean_ndcg10(text_lines, qrels), mean_ndcg10(hybrid_lines, qrels)
    # Published BM25 on SciFact is about 0.665 nDCG@10, the frozen MiniLM vectors 0.647.
    assert text_ndcg > 0.64, text_ndcg
    assert hybrid_ndcg > text_ndcg, (text_ndcg, hybrid_ndcg)


@pytest.mark.parametrize("option", ["-k", "--depth"])
@pytest.mark.parametrize(
    "value", ["1000001", "1152921504606846976", "9223372036854775808", "18446744073709551616"]
)
def test_search_refuses_a_k_above_the_maximum(
    index_dir: Path, option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 13 item 1: -k 1152921504606846976 --signals vector overwrote the heap in the compiled scan.
    argv = ["search", "nearest", "--index", str(index_dir), "--signals", "vector", option, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "at most 1,000,000" in err and value in err and "Traceback" not in err


def test_search_accepts_k_of_the_maximum(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["search", "nearest", "--index", str(index_dir), "--signals", "text", "-k", "1000000", "--json"]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip()


def test_search_filter_applies_inside_every_signal(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "rank fusion", "--index", str(index_dir), "--json", "--signals", "text,graph,recency"]
    assert main([*argv, "--filter", "topic == 'lexical'"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert hits and all(hit["fields"]["topic"] == "lexical" for hit in hits)
    # The same filter in a batch: every run line is a lexical document.
    queries = write_jsonl(tmp_path / "queries.jsonl", QUERIES)
    run = tmp_path / "run.txt"
    batch = ["search", "--index", str(index_dir), "--queries", str(queries), "--run-out", str(run)]
    assert main([*batch, "--filter", "topic == 'lexical'"]) == 0
    lexical = {row["key"] for row in DOCS if row.get("fields", {}).get("topic") == "lexical"}
    docids = {line.split()[2] for line in run.read_text(encoding="utf-8").splitlines()}
    assert docids and docids <= lexical


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("topic >", "ends too early (at character 7)"),
        ("topik == 'lexical'", "no document has field 'topik' (at character 0); did you mean 'topic'"),
        ("topic >= 3", "'topic' holds keyword values"),
        # Issue 26 item 2: an OverflowError traceback (exit 1), a ValueError, a silent 0.
        ("topic == 1" + "0" * 400, "an integer of 401 digits is beyond"),
        ("topic < 1" + "0" * 5000, "an integer of 5,001 digits is beyond"),
        ("topic in ('a', 1e400)", "number 1e400 is out of range (beyond float64's 1.798e+308) (at character"),
        ("topic > 1e-400", "number 1e-400 is too small: it underflows to 0"),
        # Issue 26 item 4: a RecursionError traceback.
        ("not " * 2000 + "topic == 'a'", "nests and/or/not more than 32 deep"),
    ],
)
def test_search_bad_filters_are_one_line_errors(
    index_dir: Path, expression: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 26 item 16: one line, no usage block, whether argparse's type check or the
    # search refuses it.
    assert main(["search", "rank", "--index", str(index_dir), "--filter", expression]) == 2
    line = error_line(capsys)
    assert message in line and len(line) < 400


@pytest.mark.parametrize("dtype", ["complex64", "bool", "U4", "datetime64[D]"])
def test_vector_files_of_anything_but_real_numbers_are_one_line_errors(
    tmp_path: Path,
    corpus: Path,
    vectors: Path,
    index_dir: Path,
    dtype: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Issue 26 item 9d: every way a vector enters; a complex file must not lose its imaginary part.
    matrix = np.load(vectors)
    bad = tmp_path / "bad.npy"
    np.save(bad, (matrix != 0).astype(dtype) if dtype != "complex64" else matrix.astype(dtype) * 1j)
    (tmp_path / "bad_ids.txt").write_text((tmp_path / "docs_ids.txt").read_text(encoding="utf-8"))
    assert main(["index", str(corpus), "--index", str(tmp_path / "i2"), "--vectors", str(bad)]) == 2
    assert "got dtype" in error_line(capsys)
    one = tmp_path / "one.npy"
    np.save(one, np.load(bad)[0])
    assert main(["search", "x", "--index", str(index_dir), "--query-vector", str(one)]) == 2
    assert "got dtype" in error_line(capsys)
