"""Smoke test of bench/query_path.py: every row is produced, and the peers rank as weft does.

One pass on a tiny corpus; no timing is asserted. A peer that is not installed skips its
checks (with the reason) and, in the tables, prints "not installed".
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "query_path.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_query_path", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


qp = _load()


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[bench]')")


def _toy(n_docs: int = 400, n_queries: int = 25, dim: int = 16) -> Any:
    """A small synthetic workload, documents shorter than 24 tokens, with vectors and judgements.

    Below 24 tokens tantivy stores document lengths exactly, so its BM25 is weft's formula.
    """
    workload = qp.synthetic(n_docs, n_queries, seed=7)
    rng = np.random.default_rng(7)
    workload.doc_tokens = [tokens[: int(rng.integers(3, 23))] for tokens in workload.doc_tokens]
    vectors = rng.standard_normal((n_docs, dim)).astype(np.float32)
    workload.doc_vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.standard_normal((n_queries, dim)).astype(np.float32)
    workload.query_vectors = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    workload.qrels = {
        qid: {workload.doc_keys[int(i)]: 1 for i in rng.choice(n_docs, 5, replace=False)}
        for qid in workload.query_ids[::2]
    }
    return workload


@pytest.fixture(scope="module")
def toy() -> Any:
    return _toy()


@pytest.fixture(scope="module")
def weft(toy: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    engine = qp.Weft(toy, tmp_path_factory.mktemp("weft") / "index")
    yield engine
    engine.close()


def test_synthetic_is_deterministic() -> None:
    first, second = qp.synthetic(300, 10, seed=3), qp.synthetic(300, 10, seed=3)
    assert first.doc_tokens == second.doc_tokens and first.query_tokens == second.query_tokens
    assert qp.synthetic(300, 10, seed=4).doc_tokens != first.doc_tokens
    lengths = [len(tokens) for tokens in first.doc_tokens]
    assert 70 <= float(np.median(lengths)) <= 130  # "lengths around 100 tokens"


def test_alternate_interleaves_weft_and_peer() -> None:
    arms = [
        qp.Arm(label, side, lambda: None, 1)
        for label, side in [("w1", "weft"), ("w2", "weft"), ("w3", "weft"), ("p1", "peer"), ("p2", "peer")]
    ]
    assert [a.label for a in qp.alternate(arms)] == ["w1", "p1", "w2", "p2", "w3"]
    rows = qp.measure(arms, 2)
    assert all(len(row.seconds) == 2 for row in rows.values())


def _agree_up_to_ties(weft: Any, theirs: list[list[str]], k: int, rel: float) -> None:
    """Each peer list scores, under weft's own BM25, what weft's top-k scores, position by position.

    Peers break exact ties their own way and bm25s/tantivy round scores to float32, so
    key lists may differ only among documents whose weft scores are (nearly) equal.
    """
    for number, (query, keys) in enumerate(zip(weft.queries, theirs, strict=True)):
        stream = weft.scorer.score(weft.snapshot, query, k)
        ids, scores = weft.scorer.score_all(weft.snapshot, query)
        everything = dict(zip(weft.snapshot.keys_of(ids), scores.tolist(), strict=True))
        under_weft = [everything.get(key, 0.0) for key in keys]
        assert len(keys) == len(stream.ids), f"query #{number}: {len(keys)} hits, weft {len(stream.ids)}"
        assert under_weft == pytest.approx(stream.scores.tolist(), rel=rel), f"query #{number}"


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_bm25s_top10_agrees_with_weft(toy: Any, weft: Any, backend: str) -> None:
    _needs("bm25s")
    if backend == "numba":
        _needs("numba")
    _agree_up_to_ties(weft, qp.Bm25s(toy, backend).rankings(10), 10, 1e-5)


def test_tantivy_top10_agrees_with_weft(toy: Any, weft: Any, tmp_path: Path) -> None:
    _needs("tantivy")
    _agree_up_to_ties(weft, qp.Tantivy(toy, tmp_path / "tantivy").rankings(10), 10, 1e-5)


def test_qdrant_bm25_and_rrf_agree_with_weft(toy: Any, weft: Any) -> None:
    _needs("qdrant_client")
    qdrant = qp.Qdrant(toy)
    _agree_up_to_ties(weft, [qdrant.bm25(tokens, 10) for tokens in toy.query_tokens], 10, 1e-5)
    # The same BM25 and RRF (k = 60) over the same exact dense scan: the same fused top-10
    # up to ties of the fused score (weft breaks them by key, Qdrant its own way): every
    # key Qdrant returns has, in weft's fusion of the same depth-100 streams, the score weft
    # gives at that position. A query whose BM25 stream holds exact ties is left out: the
    # two engines rank tied documents differently inside the stream, which moves their
    # reciprocal ranks (not a difference of formula).
    checked = 0
    for number, query in enumerate(weft.hybrid):
        bm25 = weft.scorer.score(weft.snapshot, query, qp.DEPTH).scores
        if np.unique(bm25).shape[0] != bm25.shape[0]:
            continue
        checked += 1
        mine = weft.index.search(query, 10, weft.fuser, weft.scorer, weft.vector, depth=qp.DEPTH)
        theirs = qdrant.search(toy.query_tokens[number], toy.query_vectors[number], 10)
        fused: dict[str, float] = {}
        for scorer in (weft.scorer, weft.vector):
            stream = scorer.score(weft.snapshot, query, qp.DEPTH)
            for rank, key in enumerate(weft.snapshot.keys_of(stream.ids), start=1):
                fused[key] = fused.get(key, 0.0) + 1.0 / (qp.RRF_K + rank)
        assert [fused.get(key, 0.0) for key in theirs] == pytest.approx([h.score for h in mine], rel=1e-9)
    assert checked >= 5, f"only {checked} queries without BM25 ties"


def test_lancedb_hybrid_returns_k_keys(toy: Any, tmp_path: Path) -> None:
    """LanceDB's FTS BM25 and RRF reranker are its own, so only the shape is checked here."""
    _needs("lancedb")
    lance = qp.Lance(toy, tmp_path / "lance")
    ranked = lance.run_many([" ".join(t) for t in toy.query_tokens], toy.query_vectors, 10)
    assert all(len(keys) == 10 and len(set(keys)) == 10 for keys in ranked)


def test_split_index_has_its_segments_and_the_same_results(toy: Any, weft: Any, tmp_path: Path) -> None:
    split = qp.Weft(toy, tmp_path / "split", segments=4)
    try:
        assert split.index.segment_count == 4 and weft.index.segment_count == 1
        # Collection statistics are global, so the rankings are the one-segment index's.
        assert split.search_rankings(10) == weft.search_rankings(10)
    finally:
        split.close()


def test_bm25_tables_produce_every_row(toy: Any) -> None:
    tables = qp.bm25_tables(toy, [10, 100], 1)
    assert [t.title.split("top-")[1].split(",")[0] for t in tables] == ["10", "100"]
    for table in tables:
        labels = [row.label for row in table.rows]
        expected = [
            qp.SCORER,
            qp.SEARCH,
            "weft Index.search (2 threads)",
            "weft Index.search_many (threads=1)",
            "weft Index.search_many (threads=2)",
            "bm25s numba, one call per query",
            "bm25s numba, batch",
            "bm25s numpy, one call per query",
            "bm25s numpy, batch",
            "tantivy, one call per query",
            "weft Index.search (10 segments)",
        ]
        assert sorted(labels) == sorted(expected)
        for row in table.rows:
            assert bool(row.seconds) != bool(row.unavailable), row.label
            if row.unavailable:
                assert "not installed" in row.unavailable or "search_many" in row.label
        markdown = table.markdown()
        assert all(label in markdown for label in expected) and "load average" in markdown
        widths = {line.count("|") for line in markdown.splitlines() if line.startswith("|")}
        assert len(widths) == 1, "every table line has the header's number of cells"
        assert table.as_json()["rows"][0]["ratio_weft_scorer_over_row"] == 1.0


def test_hybrid_tables_produce_every_row(toy: Any) -> None:
    tables = qp.hybrid_tables(toy, [10], 1, 3)
    (table,) = tables
    assert len(table.rows) == 4
    for weft_row in table.rows[:2]:  # VectorScorer() and the exact scan
        assert weft_row.side == "weft" and weft_row.seconds and weft_row.ndcg10 is not None
    for row in table.rows[2:]:
        assert bool(row.seconds) != bool(row.unavailable), row.label
        assert row.unavailable or row.ndcg10 is not None
    widths = {line.count("|") for line in table.markdown().splitlines() if line.startswith("|")}
    assert len(widths) == 1, "every table line has the header's number of cells"


def test_index_table_builds_in_children(toy: Any) -> None:
    table = qp.index_table(toy)
    engines = [record["engine"] for record in table.records]
    assert engines[0] == "weft" and engines[0] in table.custom_markdown
    for record in table.records:
        if record["unavailable"]:  # a peer not installed, or no store_text option
            continue
        assert record["docs"] == len(toy.doc_keys) and record["bytes_on_disk"] > 0
        assert record["peak_mb"] > 0 and min(record["maxrss_mb"]) > 0 and len(record["seconds"]) == 1
