"""A small, deterministic slice of SciFact for the sharded tests, with fields, times and links added.

SciFact has text and frozen vectors but no fields, times or links; those are
derived from each key by a hash (never by Python's salted ``hash``), so every
run and every shard count sees the same documents.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from weftsearch import Document, Query

SCIFACT = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "scifact"
FROZEN = SCIFACT / "vectors" / "all-minilm-l6-v2-int8"


def _number(key: str, salt: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{salt}:{key}".encode(), digest_size=8).digest(), "big")


def scifact_documents(limit: int | None) -> list[Document]:
    """The first ``limit`` SciFact documents (all with ``None``), with vectors, fields, times, links."""
    if not (SCIFACT / "corpus.jsonl").is_file() or not (FROZEN / "corpus.npy").is_file():
        pytest.skip(f"SciFact with frozen vectors not found at {SCIFACT} (../shared/datasets/scifact)")
    records = []
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            records.append(json.loads(line))
            if limit is not None and len(records) >= limit:
                break
    ids = (FROZEN / "corpus_ids.txt").read_text(encoding="utf-8").split()
    matrix = np.load(FROZEN / "corpus.npy", mmap_mode="r")
    row = {key: position for position, key in enumerate(ids)}
    keys = [str(record["_id"]) for record in records]
    documents = []
    for record, key in zip(records, keys, strict=True):
        links = tuple(sorted({keys[_number(key, f"link{i}") % len(keys)] for i in range(3)} - {key}))
        documents.append(
            Document(
                key=key,
                text=f"{record.get('title', '')} {record.get('text', '')}",
                vector=np.asarray(matrix[row[key]], dtype=np.float32),
                links=links,
                time=1_600_000_000 + (_number(key, "time") % 100_000) * 60,
                fields={
                    "year": 1990 + _number(key, "year") % 30,
                    "source": ("a", "b", "c")[_number(key, "src") % 3],
                },
            )
        )
    return documents


def scifact_queries(limit: int) -> list[Query]:
    """The first ``limit`` SciFact queries, with their frozen vectors."""
    ids = (FROZEN / "queries_ids.txt").read_text(encoding="utf-8").split()
    matrix = np.load(FROZEN / "queries.npy", mmap_mode="r")
    row = {key: position for position, key in enumerate(ids)}
    queries = []
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            key = str(record["_id"])
            if key in row:
                queries.append(
                    Query(text=record["text"], vector=np.asarray(matrix[row[key]], dtype=np.float32))
                )
            if len(queries) >= limit:
                break
    return queries
