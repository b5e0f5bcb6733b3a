"""Half-precision vector storage: ``Index(vector_dtype="float16")``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from weftsearch import Document, Index, Query
from weftsearch.errors import InvalidParameterError
from weftsearch.scorers import VectorScorer


def _documents(n: int = 50, dim: int = 8, seed: int = 3) -> list[Document]:
    rng = np.random.default_rng(seed)
    return [
        Document(f"d{i:04d}", f"text {i}", vector=rng.standard_normal(dim).astype(np.float32))
        for i in range(n)
    ]


def test_vectors_are_stored_rounded_to_float16_and_read_back_as_float32(tmp_path: Path) -> None:
    documents = _documents()
    with Index.create(tmp_path / "i", vector_dim=8, vector_dtype="float16") as index:
        index.add_many(documents)
        index.commit()
    reopened = Index.open(tmp_path / "i", readonly=True)
    [block] = reopened.snapshot().vector_blocks()
    assert block.matrix.dtype == np.float16
    got = reopened.get("d0007").vector
    assert got is not None and got.dtype == np.float32
    assert np.array_equal(got, documents[7].vector.astype(np.float16).astype(np.float32))  # type: ignore[union-attr]
    assert reopened.scrub().ok


def test_the_dtype_is_recorded_and_kept_by_a_reopened_writer_and_a_merge(tmp_path: Path) -> None:
    path = tmp_path / "i"
    with Index.create(path, vector_dim=8, vector_dtype="float16") as index:
        index.add_many(_documents(20))
        index.commit()
    manifest = json.loads((path / "MANIFEST").read_text())
    assert manifest["body"]["extra"] == {"vector_dtype": "float16"}
    with Index.open(path) as writer:
        writer.add(Document("z1", "more", vector=np.ones(8, dtype=np.float32)))
        writer.commit()
        writer.merge(force=True)
        assert all(b.matrix.dtype == np.float16 for b in writer.snapshot().vector_blocks())


def test_float32_manifests_carry_no_dtype(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i", vector_dim=8) as index:
        index.add_many(_documents(5))
        index.commit()
    assert json.loads((tmp_path / "i" / "MANIFEST").read_text())["body"]["extra"] == {}


def test_half_precision_scores_are_float32_cosines_of_the_rounded_vectors() -> None:
    documents = _documents(40, dim=16)
    index = Index(vector_dim=16, vector_dtype="float16")
    index.add_many(documents)
    query = Query(vector=documents[3].vector)
    stream = VectorScorer(nprobe=None).score(index.snapshot(), query, 5)
    rounded = np.stack([d.vector for d in documents]).astype(np.float16).astype(np.float64)  # type: ignore[misc]
    q = np.asarray(documents[3].vector, dtype=np.float64)
    cosines = rounded @ (q / np.linalg.norm(q)) / np.linalg.norm(rounded, axis=1)
    assert stream.ids.tolist() == np.argsort(-cosines, kind="stable")[:5].tolist()
    assert stream.scores == pytest.approx(np.sort(cosines)[::-1][:5], abs=1e-5)


def test_same_documents_same_bytes_in_half_precision(tmp_path: Path) -> None:
    hashes = []
    for name in ("a", "b"):
        with Index.create(tmp_path / name, vector_dim=8, vector_dtype="float16", index_id="ab" * 16) as index:
            index.add_many(_documents(30)[:: -1 if name == "b" else 1])
            index.commit()
        hashes.append(sorted((p.name, p.read_bytes()) for p in (tmp_path / name).glob("seg-*")))
    assert hashes[0] == hashes[1]


@pytest.mark.parametrize("dtype", ["float64", "half", "", None, 16])
def test_unknown_dtypes_are_refused(dtype: object) -> None:
    with pytest.raises(InvalidParameterError):
        Index(vector_dtype=dtype)  # type: ignore[arg-type]
