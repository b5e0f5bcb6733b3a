"""Embedders at the index: protocol, registry, the record in the manifest, embedding on add and query."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import weftsearch.embedders as embedders
from tests.fake_embedder import DIM, NAME, FakeEmbedder
from weftsearch import RRF, BM25Scorer, Document, Index, Query, VectorScorer, get_embedder, register_embedder
from weftsearch.embed import MiniLMEmbedder
from weftsearch.embedders import EMBED_BATCH_SIZE, MINILM, Embedder, embedder_names
from weftsearch.errors import (
    CorruptIndexError,
    EmbedderMismatchError,
    EmbeddingError,
    InvalidDocumentError,
    InvalidParameterError,
    InvalidQueryError,
    MissingDependencyError,
    UnknownEmbedderError,
    VectorDimensionError,
    WeftError,
)
from weftsearch.storage.directory import Manifest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    Document("a", "sparse retrieval with inverted indexes"),
    Document("b", "dense retrieval with neural embeddings"),
    Document("c", "graph walks over citation links"),
]


def _manifest(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((path / "MANIFEST").read_text())["body"]
    return record


def test_the_builtin_minilm_is_registered_and_an_embedder() -> None:
    assert MINILM in embedder_names()
    minilm = get_embedder(MINILM)
    assert isinstance(minilm, Embedder)
    assert minilm.dim == 384
    assert minilm.model_record["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(minilm.model_record["onnx_sha256"]) == 64


def test_create_records_the_embedder_and_open_finds_it_by_name(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i", embedder=NAME) as index:
        assert index.vector_dim == DIM
        index.add_many(DOCS)
    record = _manifest(tmp_path / "i")["extra"]["embedder"]
    assert record == {"name": NAME, "dim": DIM, "model": {"name": "hashed-words", "version": 1}}
    with Index.open(tmp_path / "i", readonly=True) as index:
        assert isinstance(index.embedder, FakeEmbedder)
        assert index.vector_dim == DIM


def test_an_index_without_embedder_records_none(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i") as index:
        index.add(Document("a", "text"))
    assert "embedder" not in _manifest(tmp_path / "i").get("extra", {})
    with Index.open(tmp_path / "i") as index:
        assert index.embedder is None
    with pytest.raises(EmbedderMismatchError, match="without an embedder"):
        Index.open(tmp_path / "i", embedder=FakeEmbedder())


def test_reopening_in_another_process_without_registration_names_the_embedder(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i", embedder=NAME) as index:
        index.add_many(DOCS)
    code = (
        "import sys\n"
        "from weftsearch import Index\n"
        "from weftsearch.errors import UnknownEmbedderError\n"
        "try:\n"
        f"    Index.open({str(tmp_path / 'i')!r}, readonly=True)\n"
        "except UnknownEmbedderError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
        "import tests.fake_embedder\n"  # registers it: now the index opens
        f"print(Index.open({str(tmp_path / 'i')!r}, readonly=True).embedder.name)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3, done.stderr
    assert f"unknown embedder {NAME!r}" in done.stdout
    assert "register_embedder" in done.stdout


def test_an_unregistered_name_is_refused_at_create(tmp_path: Path) -> None:
    with pytest.raises(UnknownEmbedderError, match=r"'no-such-model'.*register_embedder"):
        Index.create(tmp_path / "i", embedder="no-such-model")
    assert not (tmp_path / "i").exists()


@pytest.mark.parametrize(
    ("changed", "what"),
    [
        ({"version": 2}, "model"),
        ({"dim": 8}, "dim"),
    ],
)
def test_another_model_or_width_under_the_recorded_name_is_refused_naming_both(
    tmp_path: Path, changed: dict[str, int], what: str
) -> None:
    with Index.create(tmp_path / "i", embedder=NAME) as index:
        index.add_many(DOCS)

    class Changed(FakeEmbedder):
        dim = changed.get("dim", DIM)

        def __init__(self) -> None:
            super().__init__(version=changed.get("version", 1))

    with pytest.raises(EmbedderMismatchError) as caught:
        Index.open(tmp_path / "i", embedder=Changed())
    message = str(caught.value)
    assert f"its {what} differs" in message
    assert message.count(repr(NAME)) == 2  # both embedders named
    register_embedder(NAME, Changed)
    try:
        with pytest.raises(EmbedderMismatchError, match=f"its {what} differs"):
            Index.open(tmp_path / "i")
    finally:
        register_embedder(NAME, FakeEmbedder)


def test_a_factory_that_makes_another_name_or_no_embedder_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders, "_REGISTRY", dict(embedders._REGISTRY))  # registered for this test only

    class Other(FakeEmbedder):
        name = "other"

    register_embedder("misnamed", Other)
    with pytest.raises(UnknownEmbedderError, match="made one named 'other'"):
        get_embedder("misnamed")
    register_embedder("not-one", object)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="not an Embedder"):
        get_embedder("not-one")
    with pytest.raises(InvalidParameterError, match="non-empty string"):
        register_embedder("", FakeEmbedder)


def test_vector_dim_must_agree_with_the_embedder() -> None:
    with pytest.raises(VectorDimensionError, match="vector_dim is 8 but embedder 'fake-16'"):
        Index(vector_dim=8, embedder=NAME)
    assert Index(vector_dim=DIM, embedder=NAME).vector_dim == DIM


def test_a_damaged_embedder_record_is_corrupt(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i", embedder=NAME) as index:
        index.add_many(DOCS)
    path = tmp_path / "i" / "MANIFEST"
    manifest = Manifest.from_bytes(path.read_bytes(), path)
    good = manifest.extra["embedder"]
    for bad, message in [
        ({**good, "dim": "16"}, "embedder dim"),
        ({**good, "dim": 0}, "embedder dim"),
        ({**good, "name": ""}, "embedder name"),
        ({**good, "model": []}, "embedder model"),
        ({"name": NAME, "dim": DIM}, "lacks 'model'"),
        ({**good, "weights": "x"}, "unknown key"),
        ("fake-16", "not an object"),
    ]:
        path.write_bytes(replace(manifest, extra={"embedder": bad}).to_bytes())
        with pytest.raises(CorruptIndexError, match=message):
            Index.open(tmp_path / "i", readonly=True)
    path.write_bytes(replace(manifest, extra={"embedder": {**good, "dim": 8}}).to_bytes())
    with pytest.raises(CorruptIndexError, match="embedder 'fake-16' of 8 dims but vectors of 16"):
        Index.open(tmp_path / "i", readonly=True)


# ---------------------------------------------------------------------- embedding on add


def test_documents_without_a_vector_get_the_embedders_and_own_vectors_are_kept() -> None:
    index = Index(embedder=NAME)
    own = np.ones(DIM, dtype=np.float32)
    index.add_many([*DOCS, Document("own", "sparse retrieval", vector=own), Document("blank", "  ")])
    fake = FakeEmbedder()
    for document in DOCS:
        stored = index.get(document.key).vector
        assert stored is not None
        np.testing.assert_array_equal(stored, fake.embed([document.text])[0])
    kept = index.get("own").vector
    assert kept is not None
    np.testing.assert_array_equal(kept, own)
    assert index.get("blank").vector is None  # nothing to embed


def test_an_own_vector_of_another_width_is_refused() -> None:
    index = Index(embedder=NAME)
    with pytest.raises(VectorDimensionError, match="'x' has a vector of width 3; the index holds 16"):
        index.add(Document("x", "text", vector=np.ones(3, dtype=np.float32)))


def test_embedding_is_batched() -> None:
    index = Index(embedder=NAME)
    embedder = index.embedder
    assert isinstance(embedder, FakeEmbedder)
    count = EMBED_BATCH_SIZE * 2 + 5
    index.add_many([Document(f"d{i}", f"text number {i}") for i in range(count)], progress=False)
    assert embedder.calls == [EMBED_BATCH_SIZE, EMBED_BATCH_SIZE, 5]


class Faulty(FakeEmbedder):
    """Fails on the batch holding the text ``"poison"``, in the way ``how`` says."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        rows = super().embed(texts)
        if "poison" not in texts:
            return rows
        if self.how == "raise":
            raise RuntimeError("model fell over")
        if self.how == "nan":
            rows[texts.index("poison"), 3] = np.nan
            return rows
        if self.how == "inf":
            rows[0, 0] = np.inf
            return rows
        if self.how == "float64":
            wide: Any = rows.astype(np.float64)
            return wide  # type: ignore[no-any-return]
        if self.how == "width":
            return rows[:, :8]
        if self.how == "rows":
            return rows[:-1]
        if self.how == "list":
            listed: Any = rows.tolist()
            return listed  # type: ignore[no-any-return]
        raise AssertionError(self.how)


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("raise", "RuntimeError: model fell over"),
        ("nan", "NaN or infinity in row"),
        ("inf", "NaN or infinity in row 0"),
        ("float64", "float64 rows; an embedder returns float32"),
        ("width", r"shape \(\d+, 8\), expected \(\d+, 16\)"),
        ("rows", "shape"),
        ("list", "returned list, not a numpy array"),
    ],
)
def test_a_failed_batch_is_refused_whole_and_loses_no_document(tmp_path: Path, how: str, reason: str) -> None:
    index = Index.create(tmp_path / "i", embedder=Faulty(how))
    index.add_many(DOCS)
    index.commit()
    index.add(Document("pending", "added before, not committed"))
    batch = [Document(f"n{i}", "fine text" if i != 300 else "poison") for i in range(400)]
    with pytest.raises(EmbeddingError, match=reason) as caught:
        index.add_many(batch, progress=False)
    assert "a batch of 144 documents ('n256' to 'n399')" in str(caught.value)
    assert len(index) == 4
    assert not any(f"n{i}" in index for i in range(400))
    assert "pending" in index
    index.commit()
    index.close()
    with Index.open(tmp_path / "i", embedder=Faulty(how)) as reopened:
        assert sorted(reopened.keys()) == ["a", "b", "c", "pending"]


def test_a_single_failed_document_is_named() -> None:
    index = Index(embedder=Faulty("raise"))
    with pytest.raises(EmbeddingError, match="failed on the document 'p'"):
        index.add(Document("p", "poison"))
    assert len(index) == 0


def test_large_adds_written_in_runs_are_embedded_first(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "i", embedder=Faulty("raise"))
    index._flush_documents = 100  # the run path (_add_in_runs), without writing thousands of documents
    files = sorted(p.name for p in (tmp_path / "i").iterdir())
    with pytest.raises(EmbeddingError):
        index.add_many([Document(f"n{i}", "poison" if i == 250 else "fine") for i in range(300)])
    assert sorted(p.name for p in (tmp_path / "i").iterdir()) == files
    index.add_many([Document(f"n{i}", f"fine {i}") for i in range(300)])
    assert index.get("n299").vector is not None
    assert len([p for p in (tmp_path / "i").iterdir() if p.suffix == ".wseg"]) == 3  # three runs
    index.commit()
    index.close()


# ---------------------------------------------------------------------- query text


def test_search_embeds_query_text_when_a_scorer_needs_a_vector() -> None:
    index = Index(embedder=NAME)
    index.add_many(DOCS)
    vector_only = index.search("citation links graph", 3, RRF(), VectorScorer())
    assert vector_only.hits[0].key == "c"
    given = index.search(
        Query("citation links graph", vector=FakeEmbedder().embed(["citation links graph"])[0]),
        3,
        RRF(),
        VectorScorer(),
    )
    assert [h.key for h in given.hits] == [h.key for h in vector_only.hits]
    assert [h.score for h in given.hits] == [h.score for h in vector_only.hits]
    hybrid = index.search_many(["dense embeddings", "sparse"], 2, RRF(), BM25Scorer(), VectorScorer())
    assert hybrid[0].hits[0].key == "b"
    assert all(len(signals) == 2 for signals in [r.signals for r in hybrid])


def test_text_only_rankings_never_call_the_embedder() -> None:
    index = Index(embedder=NAME)
    index.add_many(DOCS)
    embedder = index.embedder
    assert isinstance(embedder, FakeEmbedder)
    before = list(embedder.calls)
    index.search("sparse", 3, RRF(), BM25Scorer())
    index.search(Query("sparse", vector=np.ones(DIM, dtype=np.float32)), 3, RRF(), VectorScorer())
    assert embedder.calls == before


def test_a_failing_query_embedding_is_an_embedding_error() -> None:
    index = Index(embedder=Faulty("nan"))
    index.add_many(DOCS)
    with pytest.raises(EmbeddingError, match="the query text 'poison'"):
        index.search("poison", 3, RRF(), VectorScorer())
    with pytest.raises(InvalidParameterError, match="has no embedder"):
        Index().embed_query("text")


def _embed_extra_missing() -> str | None:
    """Why the MiniLM model cannot run here, or ``None`` when it can."""
    try:
        from weftsearch.embed import Encoder

        Encoder()
    except WeftError as exc:  # MissingDependencyError, or model files that fail their pin
        return f"the embed extra is not usable: {exc}"
    return None


def test_the_real_minilm_model_embeds_documents_and_queries(tmp_path: Path) -> None:
    reason = _embed_extra_missing()
    if reason is not None:
        pytest.skip(reason)
    with Index.create(tmp_path / "i", embedder=MINILM) as index:
        index.add_many(DOCS)
    with Index.open(tmp_path / "i", readonly=True) as index:
        assert isinstance(index.embedder, MiniLMEmbedder)
        assert index.vector_dim == 384
        stored = index.get("b").vector
        assert stored is not None
        assert abs(float(np.linalg.norm(stored)) - 1.0) < 1e-5
        hits = index.search("neural network embeddings for search", 3, RRF(), VectorScorer()).hits
        assert hits[0].key == "b"


def test_embed_documents_embeds_as_add_many_would() -> None:
    index = Index(embedder=NAME)
    made = index.embed_documents([*DOCS, Document("blank", "")])
    assert [d.key for d in made] == ["a", "b", "c", "blank"]
    np.testing.assert_array_equal(made[0].vector, FakeEmbedder().embed([DOCS[0].text])[0])
    assert made[3].vector is None
    assert Index().embed_documents(DOCS) == DOCS
    with pytest.raises(InvalidDocumentError, match="not a Document"):
        index.embed_documents(["text"])  # type: ignore[list-item]


def test_without_the_embed_extra_minilm_names_it_and_adds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import weftsearch.embed as embed

    def missing() -> None:
        raise MissingDependencyError("weftsearch.embed needs onnxruntime and tokenizers (test); install them")

    monkeypatch.setattr(embed, "_runtime", missing)
    index = Index(embedder=MINILM)  # creating and opening need no model
    index.add(Document("own", "kept", vector=np.ones(384, dtype=np.float32)))
    with pytest.raises(MissingDependencyError, match="onnxruntime"):
        index.add_many(DOCS)
    assert index.keys() == ["own"]
    assert index.search("kept", 1, RRF(), BM25Scorer()).keys == ["own"]  # text search still works


def test_bad_query_batches_are_refused_as_without_an_embedder() -> None:
    index = Index(embedder=NAME)
    index.add_many(DOCS)
    embedder = index.embedder
    assert isinstance(embedder, FakeEmbedder)
    before = list(embedder.calls)
    with pytest.raises(InvalidParameterError, match="sequence"):
        index.search_many("graph", 2, RRF(), VectorScorer())
    with pytest.raises(InvalidQueryError, match=r"queries\[1\]"):
        index.search_many(["graph", 7], 2, RRF(), VectorScorer())  # type: ignore[list-item]
    assert embedder.calls == before  # nothing embedded for a batch that is refused
