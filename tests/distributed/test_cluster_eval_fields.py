"""``eval --ray`` on a testbed with named text fields: each worker's replica keeps the schema.

No cluster is started: the worker class is built in this process (as a Ray actor builds it),
and the refusal of an unstored field comes before any connection.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'weft-search[ray]')")

from weftsearch import BM25Scorer, Document, Index, Query
from weftsearch.distributed import cluster_eval
from weftsearch.engine.search import score_queries
from weftsearch.errors import InvalidParameterError
from weftsearch.schema import Schema, TextField

SCHEMA = Schema((TextField("text", positions=False), TextField("title", positions=False)))
DOCUMENTS = [
    Document("a", "graph retrieval over citations", text_fields={"title": "Graph ranking"}),
    Document("b", "ranking documents by links", text_fields={"title": "Retrieval"}),
    Document("c", "nothing about it"),
]


def test_a_worker_replica_scores_bm25f_as_the_testbed_does() -> None:
    index = Index("english", schema=SCHEMA)
    index.add_many(DOCUMENTS, progress=False)
    snapshot = index.snapshot()
    stored = [snapshot.document(doc) for doc in range(snapshot.n_docs)]
    worker = cluster_eval._EvalWorker(stored, "english", None, snapshot.schema)
    scorer = BM25Scorer(fields={"title": 2.0, "text": 1.0})
    queries = [Query("graph ranking"), Query("retrieval")]
    got = worker.streams(scorer, "bm25f", queries, 10)
    expected = score_queries(scorer, "bm25f", snapshot, queries, 10)
    assert [keys for keys, _ in got] == [snapshot.keys_of(stream.ids) for stream in expected]
    assert [scores.tobytes() for _, scores in got] == [stream.scores.tobytes() for stream in expected]
    assert got[0][0]


def test_an_unstored_text_field_is_refused_before_connecting(tmp_path: Path) -> None:
    schema = Schema((TextField("text"), TextField("title", stored=False)))
    index = Index("english", schema=schema)
    index.add_many(DOCUMENTS, progress=False)
    testbed: Any = SimpleNamespace(snapshot=index.snapshot())
    with pytest.raises(InvalidParameterError, match="'title' is not stored"):
        cluster_eval.fill_streams_on_ray("127.0.0.1:1", None, testbed, [])  # type: ignore[arg-type]
