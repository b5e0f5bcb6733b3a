from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")

from fastapi.testclient import TestClient

from weftsearch import Document, Index
from weftsearch.server.app import ServerLimits, create_app

KEY = "test-key-0123456789"
WRITE = {"X-API-Key": KEY}

TEXTS = {
    "d1": "graph retrieval over citation links",
    "d2": "bm25 ranking of text documents",
    "d3": "dense vector search with embeddings",
    "d4": "graph neural networks for ranking",
    "d5": "recency signals in news search",
    "d6": "hybrid search fuses text and vector rankings",
}


def vector(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    return rng.standard_normal(8).astype(np.float32)


def make_index(path: Path) -> Path:
    with Index.create(path, index_id="0123456789abcdef0123456789abcdef") as index:
        index.add_many(
            [
                Document(
                    key,
                    text,
                    vector=vector(i),
                    links=("d1",) if key != "d1" else (),
                    time=1_600_000_000 + 86_400 * i,
                    fields={"year": 1990 + i, "source": "a" if i % 2 else "b"},
                )
                for i, (key, text) in enumerate(TEXTS.items())
            ],
            progress=False,
        )
    return path


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    return make_index(tmp_path / "idx")


@pytest.fixture
def client(index_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(index_path, api_key=KEY)) as c:
        yield c


@pytest.fixture
def open_client(index_path: Path) -> Iterator[TestClient]:
    """No API key configured."""
    with TestClient(create_app(index_path, limits=ServerLimits(max_k=50, max_batch=8))) as c:
        yield c
