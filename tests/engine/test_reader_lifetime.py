"""A closed index lets go of its segment readers: no cache anywhere keeps a reader, its mapped file or
its descriptor alive (a weak-keyed cache whose values held their key did, one open file per index
opened and searched, until a long sweep ran out of descriptors)."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, F, Index, Query, Schema, TextField, VectorScorer
from weftsearch.highlight import HighlightOptions


def build(path: Path) -> None:
    schema = Schema((TextField("text", positions=True), TextField("title", positions=True)))
    with Index.create(path, schema=schema, vector_dim=2) as index:
        index.add_many(
            [
                Document(
                    f"d{i:03d}",
                    f"alpha beta gamma delta {i}",
                    text_fields={"title": "alpha title"},
                    fields={"year": 2000 + i % 5},
                    vector=np.array([1.0, i / 300]),
                )
                for i in range(300)
            ],
            progress=False,
        )


SEARCHES: dict[str, Callable[[Index], Any]] = {
    "plain": lambda ix: ix.search("alpha", 5, RRF(), BM25Scorer()),
    "and": lambda ix: ix.search(Query.parse("+alpha +beta"), 5, RRF(), BM25Scorer()),
    "or": lambda ix: ix.search(Query.parse("alpha OR beta"), 5, RRF(), BM25Scorer()),
    "phrase": lambda ix: ix.search(Query.parse('"beta gamma"'), 5, RRF(), BM25Scorer()),
    "bm25f": lambda ix: ix.search("alpha", 5, RRF(), BM25Scorer(fields={"text": 1.0, "title": 2.0})),
    "filter": lambda ix: ix.search(Query("alpha", filter=F("year") >= 2002), 5, RRF(), BM25Scorer()),
    "hybrid": lambda ix: ix.search(
        Query("alpha", vector=np.array([1.0, 0.0])), 5, RRF(), BM25Scorer(), VectorScorer()
    ),
    "highlight": lambda ix: [
        hit.highlights for hit in ix.search("alpha", 5, RRF(), BM25Scorer(), highlight=HighlightOptions())
    ],
    "explain": lambda ix: ix.explain("alpha", "d001", RRF(), BM25Scorer()),
    "many": lambda ix: ix.search_many(["alpha", "beta gamma"], 5, RRF(), BM25Scorer(), threads=2),
}


@pytest.mark.parametrize("kind", sorted(SEARCHES))
def test_a_closed_index_releases_its_readers_and_files(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "index"
    build(path)
    gc.collect()
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    readers: list[weakref.ref[Any]] = []
    for _ in range(5):
        with Index.open(path) as index:
            SEARCHES[kind](index)
            readers.extend(weakref.ref(part.reader) for part in index.snapshot().parts)
        del index
    gc.collect()
    assert [ref for ref in readers if ref() is not None] == []
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) <= before
