"""Tests of the CLI's single-signal runs, ``search --qrels`` id matching, and ``add``/``delete``/``stats``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import DOCS, check_run_file, error_line, write_jsonl
from weftsearch import BM25Scorer, Index, Query
from weftsearch.cli import main, match_judged
from weftsearch.corpus import load_qrels
from weftsearch.eval.datasets import load_collection

DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "corpus.jsonl", DOCS)


@pytest.fixture
def index_dir(tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    directory = tmp_path / "idx"
    assert main(["index", str(corpus), "--index", str(directory)]) == 0
    capsys.readouterr()
    return directory


# ---------------------------------------------------------------------- one signal: its own scores

TIED_DOCS: list[dict[str, Any]] = [
    # Equal texts give equal BM25 scores: ties that RRF would turn into distinct scores.
    {"key": "t3", "text": "graph walk ranking"},
    {"key": "t1", "text": "graph walk ranking"},
    {"key": "t2", "text": "graph walk ranking"},
    {"key": "u", "text": "graph graph ranking of citations"},
    {"key": "v", "text": "a walk in the park"},
    {"key": "w", "text": "nothing relevant"},
]


@pytest.mark.parametrize("fusion", [[], ["--fusion", "score"], ["--fusion", "weighted", "--weights", "2"]])
def test_single_signal_run_file_carries_the_scorers_raw_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fusion: list[str]
) -> None:
    corpus = write_jsonl(tmp_path / "tied.jsonl", TIED_DOCS)
    queries = write_jsonl(
        tmp_path / "q.jsonl", [{"_id": "a", "text": "graph walk"}, {"_id": "b", "text": "walk"}]
    )
    assert main(["index", str(corpus), "--index", str(tmp_path / "idx")]) == 0
    run = tmp_path / "run.txt"
    argv = ["search", "--index", str(tmp_path / "idx"), "--queries", str(queries), "--run-out", str(run)]
    assert main([*argv, "--signals", "text", "-k", "10", *fusion]) == 0
    capsys.readouterr()
    per_query = check_run_file(run.read_text(encoding="utf-8"), 10)
    snapshot = Index.open(tmp_path / "idx", readonly=True).snapshot()
    for qid, text in (("a", "graph walk"), ("b", "walk")):
        stream = BM25Scorer().score(snapshot, Query(text), 100)
        raw = dict(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))
        rows = per_query[qid]
        assert {docid for docid, _, _ in rows} == set(raw)  # every hit of the stream, nothing else
        for docid, _, score in rows:
            assert score == raw[docid], (qid, docid)  # exactly the BM25 score (written with repr)
        # Ties stay ties, ordered by key.
        assert [docid for docid, _, _ in rows if docid.startswith("t")] == ["t1", "t2", "t3"]
        assert len({score for docid, _, score in rows if docid.startswith("t")}) == 1


def test_single_signal_json_explains_the_raw_score(
    index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "rank fusion", "--index", str(index_dir), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["fuser"] == "passthrough"
    for hit in payload["hits"]:
        [signal] = hit["signals"]
        assert signal["signal"] == "bm25" and signal["rank"] == hit["rank"]
        assert signal["score"] == signal["contribution"] == hit["score"]
    assert main(["search", "rank fusion", "--index", str(index_dir)]) == 0
    assert "fusion none (one signal: its own scores)" in capsys.readouterr().out


# ---------------------------------------------------------------------- --qrels: every id accounted for


def test_match_judged_reports_both_sides_and_padding_near_misses() -> None:
    match = match_judged(["01", "2", "07", "x9", "2"], ["1", "2", "3", "007"])
    assert match.run == ("2",)
    assert match.unmatched_judged == ("01", "07", "x9")
    assert match.unjudged == ("1", "3", "007")
    assert (match.judged_count, match.query_count) == (4, 4)
    assert match.near == {"01": "1", "07": "007", "1": "01", "007": "07"}


def batch_files(tmp_path: Path, judged: list[str]) -> tuple[Path, Path]:
    queries = write_jsonl(
        tmp_path / "queries.jsonl", [{"_id": str(n), "text": "rank fusion"} for n in range(1, 13)]
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{qid} 0 fusion 1\n" for qid in judged), encoding="utf-8")
    return queries, qrels


def test_qrels_with_unmatched_judged_ids_exit_1_and_name_them(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Judged: 01..09 zero-padded (the CACM way), 10 and 11 as written, and "99" that no query has.
    judged = [f"{n:02d}" for n in range(1, 10)] + ["10", "11", "99"]
    queries, qrels = batch_files(tmp_path, judged)
    run = tmp_path / "run.txt"
    argv = ["search", "--index", str(index_dir), "--queries", str(queries), "--qrels", str(qrels)]
    argv += ["--run-out", str(run)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"10 of 12 judged query ids in {qrels} match no query id in {queries}" in err
    assert "judged query '01' matches no query; did you mean '1'?" in err
    assert "judged query '05' matches no query; did you mean '5'?" in err
    assert "... and 5 more" in err  # five shown of ten
    assert (
        "note: 10 of 12 queries in" in err
        and "query '1' has no judgement; did you mean judged query '01'?" in err
    )
    assert "Traceback" not in err
    assert set(check_run_file(run.read_text(encoding="utf-8"), 10)) == {"10", "11"}  # the matched ones ran

    assert main([*argv, "--allow-unmatched"]) == 0
    err = capsys.readouterr().err
    assert "warning: 10 of 12 judged query ids" in err and "did you mean '1'?" in err
    assert set(check_run_file(run.read_text(encoding="utf-8"), 10)) == {"10", "11"}


def test_qrels_unjudged_queries_are_noted_without_failing(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries, qrels = batch_files(tmp_path, ["3", "4"])
    argv = ["search", "--index", str(index_dir), "--queries", str(queries), "--qrels", str(qrels), "-k", "2"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "note: 10 of 12 queries in" in captured.err and "query '1' has no judgement" in captured.err
    assert "did you mean" not in captured.err and "judged query ids" not in captured.err
    assert set(check_run_file(captured.out, 2)) == {"3", "4"}


def test_qrels_with_no_matching_query_is_a_user_error(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries, qrels = batch_files(tmp_path, ["q1", "q2"])
    argv = ["search", "--index", str(index_dir), "--queries", str(queries), "--qrels", str(qrels)]
    assert main([*argv, "--allow-unmatched"]) == 2
    err = capsys.readouterr().err
    assert "2 of 2 judged query ids" in err and "nothing to run" in err.splitlines()[-1]
    assert main(["search", "x", "--index", str(index_dir), "--allow-unmatched"]) == 2
    assert "--allow-unmatched needs --queries" in error_line(capsys)
    assert main(["search", "--index", str(index_dir), "--queries", str(queries), "--allow-unmatched"]) == 2
    assert "--allow-unmatched needs --qrels" in error_line(capsys)


@pytest.mark.data
def test_cacm_qrels_report_the_nine_padded_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cacm = DATASETS / "cacm"
    if not (cacm / "qrels.text").is_file() or not (cacm / "query.text").is_file():
        pytest.skip(f"CACM not found at {cacm} (../shared/datasets/cacm)")
    collection = load_collection("cacm", DATASETS)
    # The queries as a user writes them for the CLI: ids as query.text numbers them (1 ... 64).
    queries = write_jsonl(
        tmp_path / "queries.jsonl", [{"_id": qid, "text": text} for qid, text in collection.queries.items()]
    )
    corpus = write_jsonl(
        tmp_path / "corpus.jsonl", [{"key": d.key, "text": d.text} for d in collection.documents]
    )
    assert main(["index", str(corpus), "--index", str(tmp_path / "idx")]) == 0
    run = tmp_path / "run.txt"
    argv = ["search", "--index", str(tmp_path / "idx"), "--queries", str(queries), "--run-out", str(run)]
    argv += ["--qrels", str(cacm / "qrels.text")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    # qrels.text pads 1..9 (01 ... 09): 9 of its 52 judged ids match no query.
    assert "9 of 52 judged query ids" in err
    assert "judged query '01' matches no query; did you mean '1'?" in err
    assert "21 of 64 queries in" in err  # 12 never judged, 9 judged under a padded id
    ran = set(check_run_file(run.read_text(encoding="utf-8"), 10))
    assert ran == {qid for qid in load_qrels(cacm / "qrels.text") if qid in collection.queries}
    assert len(ran) == 43
    assert main([*argv, "--allow-unmatched"]) == 0
    assert "warning: 9 of 52 judged query ids" in capsys.readouterr().err


# ---------------------------------------------------------------------- add


def test_add_upserts_and_commits(index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    more = write_jsonl(
        tmp_path / "more.jsonl",
        [
            {"key": "bm25", "title": "BM25 again", "text": "Okapi weighting, replaced."},
            {"key": "splade", "title": "SPLADE", "text": "Learned sparse expansion.", "links": ["bm25"]},
        ],
    )
    assert main(["add", str(more), "--index", str(index_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"added 1 new and replaced 1 documents (0 with vectors) from {more} into {index_dir}"
    )
    assert "6 -> 7 documents" in out
    index = Index.open(index_dir, readonly=True)
    assert len(index) == 7
    assert index.get("bm25").text.startswith("BM25 again")
    assert index.get("splade").links == ("bm25",)
    assert index.get("tfidf").fields["title"] == "TF-IDF"  # the others untouched


def test_add_bad_line_changes_nothing(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "new1", "text": "x"}\n{"key": "new2", "text": \n', encoding="utf-8")
    manifest = (index_dir / "MANIFEST").read_bytes()
    files = sorted(os.listdir(index_dir))
    assert main(["add", str(bad), "--index", str(index_dir)]) == 2
    line = error_line(capsys)
    assert f"{bad}:2:" in line and "invalid JSON" in line
    assert (index_dir / "MANIFEST").read_bytes() == manifest and sorted(os.listdir(index_dir)) == files
    assert "new1" not in Index.open(index_dir, readonly=True)


def test_add_with_vectors_and_a_width_mismatch(
    tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    keys = [d["key"] for d in DOCS]
    np.save(tmp_path / "v.npy", np.eye(len(keys), 8, dtype=np.float32))
    (tmp_path / "v_ids.txt").write_text("\n".join(keys) + "\n", encoding="utf-8")
    index = tmp_path / "vi"
    assert main(["index", str(corpus), "--index", str(index), "--vectors", str(tmp_path / "v.npy")]) == 0
    more = write_jsonl(tmp_path / "more.jsonl", [{"key": "new", "text": "x"}, {"key": "bm25", "text": "y"}])
    np.save(tmp_path / "w.npy", np.ones((2, 5), dtype=np.float32))
    (tmp_path / "w_ids.txt").write_text("new\nbm25\n", encoding="utf-8")
    capsys.readouterr()
    manifest = (index / "MANIFEST").read_bytes()
    assert main(["add", str(more), "--index", str(index), "--vectors", str(tmp_path / "w.npy")]) == 2
    assert "width 5" in error_line(capsys)
    assert (index / "MANIFEST").read_bytes() == manifest  # nothing committed
    np.save(tmp_path / "w.npy", np.ones((2, 8), dtype=np.float32))
    assert main(["add", str(more), "--index", str(index), "--vectors", str(tmp_path / "w.npy")]) == 0
    assert "(2 with vectors)" in capsys.readouterr().out
    assert Index.open(index, readonly=True).get("new").vector is not None
    assert main(["add", str(more), "--index", str(index), "--vector-ids", "x.txt"]) == 2
    assert "--vector-ids needs --vectors" in error_line(capsys)


def test_add_to_a_missing_index(tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["add", str(corpus), "--index", str(tmp_path / "none")]) == 2
    assert "no index at" in error_line(capsys)
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("layout", ["empty-file", "blank-lines", "beir-empty-corpus"])
def test_ingest_of_no_documents_is_a_user_error(
    layout: str, tmp_path: Path, index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty corpus is refused with one line and exit 2 by `index` and `add` (issue 26, item 9e).

    `index` used to create an empty index and exit 0; nothing is created now, and an
    existing index (even with --overwrite) is left as it was.
    """
    if layout == "beir-empty-corpus":
        corpus = tmp_path / "beir"
        corpus.mkdir()
        (corpus / "corpus.jsonl").write_text("")
    else:
        corpus = tmp_path / "empty.jsonl"
        corpus.write_text("" if layout == "empty-file" else "\n\n")
    capsys.readouterr()
    target = tmp_path / "new-index"
    assert main(["index", str(corpus), "--index", str(target)]) == 2
    assert "holds no documents; nothing was indexed" in error_line(capsys)
    assert not target.exists()
    before = {p.name: p.read_bytes() for p in index_dir.iterdir()}
    assert main(["index", str(corpus), "--index", str(index_dir), "--overwrite"]) == 2
    assert "holds no documents" in error_line(capsys)
    assert main(["add", str(corpus), "--index", str(index_dir)]) == 2
    assert "holds no documents" in error_line(capsys)
    assert {p.name: p.read_bytes() for p in index_dir.iterdir()} == before


# ---------------------------------------------------------------------- delete


def test_delete_keys_and_report_the_missing(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("ann\r\n\nnope\n", encoding="utf-8")
    argv = ["delete", "bm25", "bm25", "ghost", "--keys", str(keys_file), "--index", str(index_dir)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"deleted 2 of 4 keys from {index_dir}: 4 documents left")
    assert f"error: 2 of 4 keys are not in {index_dir}: 'ghost', 'nope'" in captured.err
    index = Index.open(index_dir, readonly=True)
    assert "bm25" not in index and "ann" not in index and len(index) == 4
    assert main(["delete", "bm25", "--index", str(index_dir), "--missing-ok"]) == 0
    captured = capsys.readouterr()
    assert "deleted 0 of 1 keys" in captured.out and "note: 1 of 1 keys" in captured.err
    assert main(["delete", "tfidf", "--index", str(index_dir)]) == 0
    assert capsys.readouterr().err == ""


def test_delete_needs_keys_and_reads_utf8(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["delete", "--index", str(index_dir)]) == 2
    assert "name the keys to delete" in error_line(capsys)
    bad = tmp_path / "keys.txt"
    bad.write_bytes(b"bm25\n\xff\xfe\n")
    assert main(["delete", "--keys", str(bad), "--index", str(index_dir)]) == 2
    assert f"{bad}:2: not UTF-8" in error_line(capsys)
    assert "bm25" in Index.open(index_dir, readonly=True)  # nothing deleted


# ---------------------------------------------------------------------- stats


def test_stats_text_and_json(index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["delete", "bm25", "--index", str(index_dir)]) == 0
    capsys.readouterr()
    assert main(["stats", str(index_dir), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    expected = Index.open(index_dir, readonly=True).stats().to_dict()
    assert record == expected
    assert record["documents"] == 5 and record["deleted"] == 1 and record["analyzer"] == "english"
    assert record["vector_dim"] is None and record["segment_count"] == 1
    assert main(["stats", str(index_dir)]) == 0
    out = capsys.readouterr().out
    assert "documents:  5 (1 deleted" in out and "vectors:    none" in out
    assert f"({record['bytes_on_disk']} bytes)" in out
    [segment] = record["segments"]
    row = next(line for line in out.splitlines() if line.startswith(segment["name"]))
    assert row.split() == [segment["name"], "5", "1", str(segment["bytes"])]
    assert main(["stats", str(tmp_path / "nothing")]) == 2
    assert "no index at" in error_line(capsys)


def test_the_installed_script_adds_deletes_and_shows_stats(tmp_path: Path, corpus: Path) -> None:
    script = Path(sys.executable).parent / "weft-search"
    if not script.is_file():
        pytest.skip(f"no weft-search script next to {sys.executable}")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(script), *args], capture_output=True, text=True, env=env, check=False, timeout=300
        )

    index = str(tmp_path / "idx")
    assert run("index", str(corpus), "--index", index).returncode == 0
    more = write_jsonl(tmp_path / "more.jsonl", [{"key": "extra", "text": "one more"}])
    added = run("add", str(more), "--index", index)
    assert added.returncode == 0 and "added 1 new and replaced 0 documents" in added.stdout
    deleted = run("delete", "extra", "missing", "--index", index)
    assert deleted.returncode == 1 and "'missing'" in deleted.stderr
    stats = run("stats", index, "--json")
    assert stats.returncode == 0 and json.loads(stats.stdout)["documents"] == len(DOCS)
    helped = run("search", "--help")
    assert helped.returncode == 0 and "--allow-unmatched" in helped.stdout


def test_one_signal_runs_from_search_and_eval_are_identical(tmp_path: Path) -> None:
    """Issue 12 item 7: the same arm gives the same run file from `search` and from `eval`.

    Before, `search --signals text` fused BM25 alone with RRF (ties turned into key order, CACM
    nDCG@10 0.488218) while `eval` wrote BM25's own scores (0.488088).
    """
    cacm = DATASETS / "cacm"
    if not (cacm / "qrels.text").is_file() or not (cacm / "query.text").is_file():
        pytest.skip(f"CACM not found at {cacm} (../shared/datasets/cacm)")
    collection = load_collection("cacm", DATASETS)
    queries = write_jsonl(
        tmp_path / "queries.jsonl", [{"_id": qid, "text": text} for qid, text in collection.queries.items()]
    )
    corpus = write_jsonl(
        tmp_path / "corpus.jsonl", [{"key": d.key, "text": d.text} for d in collection.documents]
    )
    assert main(["index", str(corpus), "--index", str(tmp_path / "idx")]) == 0
    searched = tmp_path / "search.trec"
    argv = ["search", "--index", str(tmp_path / "idx"), "--queries", str(queries), "-k", "100"]
    assert main([*argv, "--signals", "text", "--run-out", str(searched)]) == 0
    out = tmp_path / "report"
    argv = ["eval", "cacm", "--data", str(DATASETS), "--arms", "text=bm25", "--vectors", "none"]
    assert main([*argv, "--k", "100", "--resamples", "10", "--out", str(out)]) == 0

    def lines(path: Path) -> list[tuple[str, ...]]:
        # Everything but the run tag (weft's default tag against the arm's name).
        rows = [tuple(line.split()[:5]) for line in path.read_text(encoding="utf-8").splitlines()]
        return [row for row in rows if row[0] in collection.qrels]  # eval runs judged queries only

    evaluated = lines(next(out.rglob("text.trec")))
    assert evaluated, "eval wrote no run lines"
    assert lines(searched) == evaluated
