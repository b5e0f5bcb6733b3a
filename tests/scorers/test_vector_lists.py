"""IVF lists in segments and the vector scorer's probe (the core properties; see also storage tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.storage.crafting import refresh_identities, rewrite_sections
from weftsearch import Document, Index, Query
from weftsearch.errors import CorruptIndexError, InvalidParameterError
from weftsearch.scorers import VectorScorer
from weftsearch.scorers.vector import DEFAULT_NPROBE
from weftsearch.storage import ivf

DIM = 16


def _clustered(n: int, seed: int = 5) -> list[Document]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM))
    rows = centres[rng.integers(0, 40, n)] + 0.3 * rng.standard_normal((n, DIM))
    return [Document(f"d{i:05d}", "", vector=rows[i].astype(np.float32)) for i in range(n)]


@pytest.fixture(scope="module")
def index() -> Index:
    built = Index(vector_dim=DIM)
    built.add_many(_clustered(5000))
    return built


def test_floor_and_defaults_agree() -> None:
    assert ivf.FLOOR_NPROBE == DEFAULT_NPROBE
    assert ivf.IVF_MIN_VECTORS == (3 * DEFAULT_NPROBE) ** 2 == 3600
    assert [ivf.nlist_for(m) for m in (1, 3600, 1_000_000)] == [1, 30, 500]
    assert ivf.worth_probing(10_000, 50, 20) and not ivf.worth_probing(10_000, 50, 50)


def test_partition_order_and_offsets(index: Index) -> None:
    [block] = index.snapshot().vector_blocks()
    assert block.centroids is not None and block.list_offsets is not None
    offsets = block.list_offsets.astype(np.int64)
    assert offsets[0] == 0 and offsets[-1] == 5000 and bool(np.all(np.diff(offsets) >= 0))
    assert np.allclose(np.linalg.norm(block.centroids, axis=1), 1, atol=1e-5)
    # Each row sits in the list of its best centroid.
    unit = block.matrix / np.linalg.norm(block.matrix, axis=1, keepdims=True)
    best = np.argmax(unit @ block.centroids.T, axis=1)
    lists = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
    assert np.mean(best == lists) > 0.999  # BLAS rounding may flip a near-tie


def test_probed_scores_equal_the_exact_scores_and_recall_grows(index: Index) -> None:
    snapshot = index.snapshot()
    rng = np.random.default_rng(9)
    queries = [Query(vector=rng.standard_normal(DIM).astype(np.float32)) for _ in range(30)]
    exact = [VectorScorer(nprobe=None).score(snapshot, q, 10) for q in queries]
    recalls = []
    for nprobe in (1, 2, 4, 8, 16):
        found = 0
        for query, reference in zip(queries, exact, strict=True):
            stream = VectorScorer(nprobe=nprobe).score(snapshot, query, 10)
            truth = dict(zip(reference.ids.tolist(), reference.scores.tolist(), strict=True))
            for doc, score in zip(stream.ids.tolist(), stream.scores.tolist(), strict=True):
                if doc in truth:
                    assert score == truth[doc]  # to the bit
            found += len(set(stream.ids.tolist()) & set(truth))
        recalls.append(found / 300)
    assert recalls == sorted(recalls) and recalls[-1] > 0.9
    [block] = snapshot.vector_blocks()
    assert block.centroids is not None
    everything = VectorScorer(nprobe=block.centroids.shape[0]).score(snapshot, queries[0], 10)
    assert everything.ids.tolist() == exact[0].ids.tolist()


def test_below_the_floor_every_nprobe_is_exact() -> None:
    small = Index(vector_dim=DIM)
    small.add_many(_clustered(500))
    snapshot = small.snapshot()
    assert snapshot.vector_blocks()[0].centroids is None
    query = Query(vector=np.ones(DIM, dtype=np.float32))
    assert (
        VectorScorer(nprobe=1).score(snapshot, query, 20).ids.tolist()
        == VectorScorer(nprobe=None).score(snapshot, query, 20).ids.tolist()
    )


@pytest.mark.parametrize("nprobe", [0, -1, True, 1.5])
def test_bad_nprobe(nprobe: object) -> None:
    with pytest.raises(InvalidParameterError):
        VectorScorer(nprobe=nprobe)  # type: ignore[arg-type]


def test_same_vectors_same_segment_bytes_and_merge_equals_fresh_build(tmp_path: Path) -> None:
    documents = _clustered(4000, seed=2)
    with Index.create(tmp_path / "a", vector_dim=DIM) as one:
        one.add_many(documents)
        one.commit()
    with Index.create(tmp_path / "b", vector_dim=DIM) as two:
        two.add_many(documents[2000:])
        two.commit()
        two.add_many(documents[:2000])
        two.commit()
        two.merge(force=True)
    [a] = (tmp_path / "a").glob("seg-*.wseg")
    [b] = (tmp_path / "b").glob("seg-*.wseg")
    # Equal but for the stamp (index id, segment number) and the header CRC over it (docs/FORMAT.md).
    assert a.read_bytes()[:28] == b.read_bytes()[:28] and a.read_bytes()[64:] == b.read_bytes()[64:]


def test_inconsistent_list_offsets_are_corrupt_even_with_valid_checksums(tmp_path: Path) -> None:
    with Index.create(tmp_path / "i", vector_dim=DIM) as writer:
        writer.add_many(_clustered(4000, seed=3))
        writer.commit()
    [path] = (tmp_path / "i").glob("seg-*.wseg")

    def swap(arrays: dict[str, Any]) -> None:
        offsets = arrays["ivf.offsets"]
        offsets[1], offsets[2] = offsets[2], offsets[1]

    rewrite_sections(path, swap)  # valid checksums, the file's stamp kept
    refresh_identities(tmp_path / "i")  # and a manifest that records it: only the ivf rules can object
    reopened = Index.open(tmp_path / "i", readonly=True)
    with pytest.raises(CorruptIndexError, match="ivf"):
        VectorScorer().score(reopened.snapshot(), Query(vector=np.ones(DIM, dtype=np.float32)), 5)
    assert not reopened.scrub().ok
