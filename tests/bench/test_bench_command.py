"""Smoke test of the one benchmark command (``bench/query_path.py``, ``make bench``).

Runs ``main()`` in quick mode with every part on a tiny synthetic corpus laid out as
SciFact is (BEIR files, judgements, frozen-vector folder), so the command, its tables,
its targets summary and its JSON cannot rot. One pass, no timing asserted. Peers
that are not installed print "not installed" rows; the checks skip them.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


qp = _load("query_path")


def _tiny_beir(folder: Path, n_docs: int = 300, n_queries: int = 20, dim: int = 8) -> Path:
    """A BEIR folder of synthetic documents (the shared generator), with qrels and vectors."""
    corpus = qp.zipf_corpus(n_docs, n_queries, seed=11)
    rng = np.random.default_rng(11)
    folder.mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for key, tokens in zip(corpus.doc_keys, corpus.doc_tokens, strict=True):
            handle.write(json.dumps({"_id": key, "title": "", "text": " ".join(tokens[:30])}) + "\n")
    query_ids = [f"q{i}" for i in range(n_queries)]
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for qid, tokens in zip(query_ids, corpus.query_tokens, strict=True):
            handle.write(json.dumps({"_id": qid, "text": " ".join(tokens)}) + "\n")
    (folder / "qrels").mkdir()
    lines = ["query-id\tcorpus-id\tscore"]
    for qid in query_ids[::2]:
        lines += [f"{qid}\t{corpus.doc_keys[int(i)]}\t1" for i in rng.choice(n_docs, 3, replace=False)]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    vectors = folder / qp.VECTORS
    vectors.mkdir(parents=True)
    for name, ids in (("corpus", corpus.doc_keys), ("queries", query_ids)):
        matrix = rng.standard_normal((len(ids), dim)).astype(np.float32)
        np.save(vectors / f"{name}.npy", matrix / np.linalg.norm(matrix, axis=1, keepdims=True))
        (vectors / f"{name}_ids.txt").write_text("\n".join(ids) + "\n", encoding="utf-8")
    return folder


@pytest.mark.slow  # 35 s of the default run's 10-minute budget; CI runs it with the slow tests
def test_quick_command_prints_every_part_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _tiny_beir(tmp_path / "tiny")
    out = tmp_path / "bench.json"
    # Every part but SciFact's indexing (the same code as the synthetic indexing table, which
    # also checks the disk and peak-RSS targets): each build is a child process.
    parts = ",".join(part for part in qp.PARTS if part != "index")
    argv = ["--quick", "--data", str(data), "--parts", parts, "--sizes", "400"]
    argv += ["--synthetic-queries", "15", "--numpy-queries", "5", "--rss-queries", "50", "--passes", "1"]
    argv += ["--segments", "2", "--json", str(out)]
    assert qp.main(argv) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text(encoding="utf-8"))
    titles = [table["title"] for table in report["tables"]]
    # SciFact-like BM25 at top-10 and top-100, the RSS table (quick mode runs it on SciFact),
    # hybrid at both k; synthetic BM25 at both k, its RSS table, its indexing.
    assert len(titles) == 9, titles
    assert sum("top-10, BM25" in t for t in titles) == 2 and sum("top-100, BM25" in t for t in titles) == 2
    assert sum("RSS growth" in t for t in titles) == 2 and sum(t.startswith("Indexing") for t in titles) == 1
    assert sum("hybrid" in t for t in titles) == 2
    for table in report["tables"]:
        assert len(table["loadavg"]) == 3 and table["title"] in printed
        for row in table.get("rows", []):
            # Every row was timed, or says why not (a peer not installed, a missing method).
            assert bool(row["seconds"]) != bool(row["unavailable"]), row["label"]
            if row["seconds"]:
                assert row["qps_slowest"] <= row["qps_median"] <= row["qps_fastest"]
    bm25 = [t for t in report["tables"] if t["title"].endswith("BM25")]
    for table in bm25:
        skips = table["extra"]["skips"]["1 segment"]
        if "unavailable" not in skips:
            assert 0.0 <= skips["postings_skipped_mean"] <= 1.0 and 0.0 <= skips["blocks_skipped_mean"] <= 1.0
        assert "2 segments" in table["extra"]["skips"]
    # One line per target in the summary, each MET, MISSED or NOT MEASURED.
    assert report["targets"] and "## Issue 14 targets" in printed
    summary = printed.split("## Issue 14 targets", 1)[1]
    verdicts = [line for line in summary.splitlines() if line.startswith("- ")]
    assert len(verdicts) == len(report["targets"])
    assert all(line.startswith(("- MET", "- MISSED", "- NOT MEASURED")) for line in verdicts)
    names = " ".join(t["name"] for t in report["targets"])
    for wanted in (
        "tantivy one call",
        "2 threads",
        "threads=2",
        "segments",
        "bm25s numba batch",
        "indexing",
        "on disk",
        "peak build RSS",
        "RSS growth",
    ):
        assert wanted in names, wanted
    builds = [t for t in report["tables"] if t["title"].startswith("Indexing")]
    for table in builds:
        weft = next(b for b in table["builds"] if b["engine"] == "weft")
        assert weft["seconds"] and weft["peak_mb"] > 0 and weft["bytes_on_disk"] > 0
        no_text = next(b for b in table["builds"] if b["engine"] == "weft-no-text")
        assert bool(no_text["seconds"]) != bool(no_text["unavailable"])
    assert report["markdown"].count("load average") >= len(titles)


def test_quick_defaults_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        qp.main(["--parts", "nonsense"])
    assert "unknown parts" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        qp.main(["--quick", "--passes", "0"])
    assert ">= 1" in capsys.readouterr().err


def test_target_verdicts() -> None:
    met = qp.Target("a", "c", 1.2, 1.0, spread=(1.1, 1.3))
    missed = qp.Target("b", "c", 0.75, 1.0)
    ceiling = qp.Target("rss", "c", 150.0, 100.0, at_least=False, unit="MB")
    unknown = qp.Target("d", "c", None, 1.0, detail="tantivy not installed")
    assert met.met and met.line().startswith("- MET") and "1.10x to 1.30x" in met.line()
    assert missed.met is False and "MISSED by 0.25x (75% of the target)" in missed.line()
    assert ceiling.met is False and "MISSED by 50.0 MB" in ceiling.line()
    assert unknown.met is None and unknown.line().startswith("- NOT MEASURED")


def test_round_ratios_pair_passes_of_the_same_round() -> None:
    fast = qp.Row("fast", "weft", 100, seconds=[1.0, 2.0])
    slow = qp.Row("slow", "peer", 50, seconds=[1.0, 1.0])
    assert qp.round_ratios(fast, slow) == [2.0, 1.0]
    target = qp.ratio_target("t", "c", {"fast": fast, "slow": slow}, "fast", "slow", 1.5)
    assert target.value == pytest.approx(2.0) and target.spread == (1.0, 2.0)


def test_distinct_queries_are_distinct_and_reproducible() -> None:
    corpus = qp.zipf_corpus(200, 5, seed=3)
    first = qp.distinct_queries(corpus.doc_tokens, 300, seed=5)
    assert first == qp.distinct_queries(corpus.doc_tokens, 300, seed=5)
    assert len({tuple(q) for q in first}) == 300 and all(2 <= len(q) <= 6 for q in first)
    with pytest.raises(ValueError, match="distinct queries"):
        qp.distinct_queries([["a", "b"]], 10)


def test_ndcg_over_a_subset_of_judged_queries_is_the_mean_over_that_subset() -> None:
    """``--ndcg-queries`` asks part of the judged queries: the others must not count as 0."""
    workload = qp.synthetic(20, 3, seed=2)
    workload.qrels = {"q0": {"d00": 1}, "q1": {"d01": 1}, "q2": {"d02": 1}}
    perfect = [["d00", "d05"]]
    assert qp.ndcg10(workload, perfect, [0]) == pytest.approx(1.0)
    both = qp.ndcg10(workload, [["d00"], ["d09", "d08"]], [0, 1])
    assert both == pytest.approx(0.5)


def test_index_table_has_raw_text_arms_where_the_corpus_has_raw_text() -> None:
    """SciFact's indexing table also builds from raw text, each engine with its own analysis."""
    workload = qp.synthetic(60, 2, seed=4)
    workload.name = "SciFact"  # the SciFact targets: docs/s only, no disk or RSS ceiling
    workload.raw_docs = [
        "The " + " ".join(tokens[:20]) + " and\ttabs\nnewlines" for tokens in workload.doc_tokens
    ]
    table = qp.index_table(workload)
    by_engine = {record["engine"]: record for record in table.records}
    assert {"weft", "weft english", "bm25s english", "tantivy en_stem"} <= set(by_engine)
    for engine in ("weft english", "bm25s english", "tantivy en_stem"):
        record = by_engine[engine]
        assert record["unavailable"] or (record["seconds"] and record["bytes_on_disk"] > 0), engine
        assert engine in table.custom_markdown
    names = [t.name for t in table.targets]
    assert names == [
        "indexing docs/s ÷ bm25s (pre-analysed)",
        "indexing docs/s ÷ tantivy (pre-analysed)",
        "indexing docs/s ÷ bm25s (raw text)",
        "indexing docs/s ÷ tantivy (raw text)",
    ]
    assert by_engine["weft english"]["weft_over_engine_docs_s"] == pytest.approx(1.0)
