"""A server over an index made with an embedder: query text and upserts embedded with it, no record."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from numpy.typing import NDArray

from tests.fake_embedder import DIM, NAME, FakeEmbedder
from weftsearch import Document, Index, register_embedder
from weftsearch.errors import InvalidParameterError
from weftsearch.server.app import create_app

DOCS = [
    Document("a", "sparse retrieval with inverted indexes"),
    Document("b", "dense retrieval with neural embeddings"),
    Document("c", "graph walks over citation links"),
]


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    with Index.create(tmp_path / "idx", embedder=NAME) as index:
        index.add_many(DOCS)
    return tmp_path / "idx"


@pytest.fixture
def client(index_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(index_path)) as served:
        yield served


def test_text_only_searches_are_embedded_with_the_index_embedder(client: TestClient) -> None:
    answer = client.post("/v1/search", json={"text": "citation links", "spec": "vector", "k": 3})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["hits"][0]["key"] == "c"
    assert body["query_vector"] == {"source": "server", "model": "hashed-words", "vectors": NAME, "dims": DIM}
    hybrid = client.post("/v1/search", json={"text": "dense embeddings"}).json()
    assert hybrid["signals"] == ["bm25", "vector"] and hybrid["query_vector"]["source"] == "server"
    bm25 = client.post("/v1/search", json={"text": "dense", "spec": "bm25"}).json()
    assert bm25["query_vector"]["source"] == "none"


def test_a_vector_declared_from_another_model_is_refused_naming_both(client: TestClient) -> None:
    sent = {"text": "x", "vector": [0.25] * DIM, "vector_model": "other-model", "spec": "vector"}
    answer = client.post("/v1/search", json=sent)
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert "'other-model'" in message and "'hashed-words'" in message
    own = client.post("/v1/search", json={**sent, "vector_model": NAME})
    assert own.status_code == 200, own.text


def test_upserts_without_a_vector_are_embedded(client: TestClient, index_path: Path) -> None:
    answer = client.post("/v1/documents", json={"documents": [{"key": "d", "text": "citation graph walks"}]})
    assert answer.status_code == 200, answer.text
    client.post("/v1/commit")
    with Index.open(index_path, readonly=True) as index:
        stored = index.get("d").vector
    assert stored is not None
    np.testing.assert_array_equal(stored, FakeEmbedder().embed(["citation graph walks"])[0])


def test_a_record_of_another_model_is_refused_at_start(index_path: Path, tmp_path: Path) -> None:
    record = tmp_path / "r.json"
    record.write_text(json.dumps({"model": {"name": "sentence-transformers/all-MiniLM-L6-v2"}, "dims": DIM}))
    with pytest.raises(InvalidParameterError, match="made with embedder 'hashed-words'"):
        create_app(index_path, vectors_record=record)


class _Refusing(FakeEmbedder):
    """Raises on the text "poison" (registered as "refusing-16" for the test below)."""

    name = "refusing-16"

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if "poison" in texts:
            raise RuntimeError("the model fell over")
        return super().embed(texts)


def test_a_failed_upsert_embedding_is_a_400_and_adds_nothing(tmp_path: Path) -> None:
    register_embedder("refusing-16", _Refusing)
    with Index.create(tmp_path / "idx", embedder="refusing-16") as index:
        index.add_many(DOCS)
    with TestClient(create_app(tmp_path / "idx")) as client:
        sent = [{"key": "d", "text": "fine"}, {"key": "e", "text": "poison"}]
        answer = client.post("/v1/documents", json={"documents": sent})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["type"] == "EmbeddingError" and "the model fell over" in error["message"]
        assert client.get("/v1/documents/d").status_code == 404
        assert client.get("/v1/documents/a").status_code == 200
