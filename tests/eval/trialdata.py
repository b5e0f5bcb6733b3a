"""A small judged collection with stored profiles, for trials against a real server (issue 28).

Ten documents with 8-dimensional vectors, six judged queries with frozen query vectors, and two
stored profiles: ``lex`` (version 1) and ``hyb`` (versions 1 and 2; plans pin version 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from weftsearch import Document, Index
from weftsearch.ranking.profiles import ProfileStore

__all__ = ["QRELS", "QUERIES", "SPECS", "TEXTS", "make_trial_data", "vector"]

TEXTS = {
    f"d{i}": text
    for i, text in enumerate(
        [
            "graph retrieval over citation links",
            "bm25 ranking of text documents",
            "dense vector search with embeddings",
            "graph neural networks for ranking",
            "recency signals in news search",
            "hybrid search fuses text and vector rankings",
            "rank fusion of text and graph signals",
            "vector quantisation for search",
            "citation graphs and ranking of papers",
            "news ranking with text and time",
        ]
    )
}
QUERIES = {
    "q1": "graph ranking",
    "q2": "vector search",
    "q3": "text ranking",
    "q4": "news search",
    "q5": "citation graph",
    "q6": "hybrid fusion",
}
QRELS = {
    "q1": {"d3": 1, "d8": 2},
    "q2": {"d2": 1, "d7": 1},
    "q3": {"d1": 1, "d9": 1},
    "q4": {"d4": 2, "d9": 1},
    "q5": {"d8": 1, "d0": 1},
    "q6": {"d5": 1, "d6": 1},
}
SPECS = {"lex": "bm25@20", "hyb": "rrf(bm25, vector, k=10)@20"}


def vector(seed: int) -> np.ndarray:
    """A seeded random 8-dimensional float32 vector."""
    return np.random.default_rng(seed).standard_normal(8).astype(np.float32)


def make_trial_data(root: Path) -> Path:
    """Write the index (``root/idx``), ``queries.jsonl``, ``qrels.tsv`` and ``qv.npy`` under ``root``."""
    with Index.create(root / "idx") as index:
        index.add_many(
            [Document(k, t, vector=vector(i)) for i, (k, t) in enumerate(TEXTS.items())], progress=False
        )
    store = ProfileStore(root / "idx")
    for name, spec in SPECS.items():
        store.create(name, spec)
    store.create("hyb", "rrf(bm25, vector, k=60)@20")  # hyb version 2: the plan pins version 1
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    (root / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{g}\n" for q, j in QRELS.items() for d, g in j.items())
    )
    np.save(root / "qv.npy", np.stack([vector(100 + i) for i in range(len(QUERIES))]))
    (root / "qv_ids.txt").write_text("".join(f"{q}\n" for q in QUERIES))
    return root
