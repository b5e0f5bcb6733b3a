"""VectorScorer through IVF lists: exact scores for whatever is found, recall that grows with
nprobe, exact streams where probing cannot help, and VectorBlock.probe checked by hand.

The storage side (training, bytes, damage) is in tests/storage/test_ivf.py.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from weftsearch import RRF, Document, Index, Query, Snapshot, VectorScorer
from weftsearch.engine.snapshot import VectorBlock
from weftsearch.engine.stream import Stream
from weftsearch.errors import InvalidParameterError
from weftsearch.native.scan import inner_products
from weftsearch.scorers.vector import DEFAULT_NPROBE
from weftsearch.storage.ivf import FLOOR_NPROBE, IVF_MIN_VECTORS, nlist_for

DIM = 16
N = 5000  # nlist_for(5000) == 35
NPROBES = [1, 2, 4, 8, 16, 32]
SEED = 20240601


# ---------------------------------------------------------------------------- helpers


def clustered(m: int, seed: int = SEED, clusters: int = 60, noise: float = 0.35) -> NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, DIM))
    labels = rng.integers(0, clusters, size=m)
    rows: NDArray[np.float32] = (centres[labels] + noise * rng.standard_normal((m, DIM))).astype(np.float32)
    return rows


def documents(vectors: NDArray[np.float32], prefix: str = "doc", start: int = 0) -> list[Document]:
    return [Document(f"{prefix}-{start + i:05d}", vector=vectors[i]) for i in range(vectors.shape[0])]


def queries(vectors: NDArray[np.float32], count: int = 12, seed: int = 5) -> list[NDArray[np.float32]]:
    """Perturbed stored vectors (near a cluster) and a few random directions."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(vectors.shape[0], size=count - 4, replace=False)
    near = [(vectors[i] + 0.2 * rng.standard_normal(DIM)).astype(np.float32) for i in picks.tolist()]
    far = [rng.standard_normal(DIM).astype(np.float32) for _ in range(4)]
    return near + far


def score(snapshot: Snapshot, vector: NDArray[np.float32], k: int, nprobe: int | None) -> Stream:
    return VectorScorer(nprobe=nprobe).score(snapshot, Query(vector=vector), k)


def exact_scores(snapshot: Snapshot, vector: NDArray[np.float32]) -> dict[int, float]:
    stream = score(snapshot, vector, len(snapshot), None)
    return dict(zip(stream.ids.tolist(), stream.scores.tolist(), strict=True))


def keyed(snapshot: Snapshot, stream: Stream) -> list[tuple[str, float]]:
    return list(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))


def assert_ordered(snapshot: Snapshot, stream: Stream) -> None:
    """Higher score first, equal scores by key; ids unique."""
    pairs = [(-s, key) for key, s in keyed(snapshot, stream)]
    assert pairs == sorted(pairs)
    assert len(set(stream.ids.tolist())) == len(stream)


def assert_same_stream(left: Stream, right: Stream) -> None:
    assert np.array_equal(left.ids, right.ids)
    assert left.scores.tobytes() == right.scores.tobytes()


def assert_exact_scores(stream: Stream, exact: dict[int, float]) -> None:
    """Every document of ``stream`` scores what the exact scorer gives it, to the bit."""
    for doc, value in zip(stream.ids.tolist(), stream.scores.tolist(), strict=True):
        assert np.float64(value).tobytes() == np.float64(exact[doc]).tobytes(), doc


def recall_at_10(snapshot: Snapshot, vector: NDArray[np.float32], nprobe: int | None) -> float:
    truth = set(score(snapshot, vector, 10, None).ids.tolist())
    found = set(score(snapshot, vector, 10, nprobe).ids.tolist())
    return len(truth & found) / 10


def partitioned(snapshot: Snapshot) -> list[bool]:
    return [block.centroids is not None for block in snapshot.vector_blocks()]


@pytest.fixture(scope="module")
def vectors() -> NDArray[np.float32]:
    return clustered(N)


@pytest.fixture(scope="module")
def snapshot(vectors: NDArray[np.float32]) -> Snapshot:
    index = Index(analyzer="simple", vector_dim=DIM)
    index.add_many(documents(vectors))
    snap = index.snapshot()
    assert partitioned(snap) == [True]
    return snap


@pytest.fixture(scope="module")
def probes(vectors: NDArray[np.float32]) -> list[NDArray[np.float32]]:
    return queries(vectors)


# ---------------------------------------------------------------------------- constants and parameters


def test_floor_nprobe_is_the_default_nprobe() -> None:
    assert FLOOR_NPROBE == DEFAULT_NPROBE
    assert VectorScorer().nprobe == DEFAULT_NPROBE


@pytest.mark.parametrize("bad", [0, -1, True, False, 1.5, "3", np.int64(0)])
def test_invalid_nprobe(bad: Any) -> None:
    with pytest.raises(InvalidParameterError):
        VectorScorer(nprobe=bad)


def test_numpy_integer_nprobe_is_accepted() -> None:
    scorer = VectorScorer(nprobe=np.int64(3))  # type: ignore[arg-type]
    assert scorer.nprobe == 3 and type(scorer.nprobe) is int
    assert VectorScorer(nprobe=None).nprobe is None


# ---------------------------------------------------------------------------- one partitioned segment


def test_found_documents_have_the_exact_scores_bit_for_bit(
    snapshot: Snapshot, probes: list[NDArray[np.float32]]
) -> None:
    for vector in probes:
        exact = exact_scores(snapshot, vector)
        for nprobe in [*NPROBES, DEFAULT_NPROBE]:
            stream = score(snapshot, vector, 100, nprobe)
            assert 0 < len(stream) <= 100  # one probed list may hold fewer than 100 rows
            assert_ordered(snapshot, stream)
            assert_exact_scores(stream, exact)


def test_recall_grows_with_nprobe(snapshot: Snapshot, probes: list[NDArray[np.float32]]) -> None:
    means = []
    for vector in probes:
        recalls = [recall_at_10(snapshot, vector, nprobe) for nprobe in NPROBES]
        # Probed lists are nested as nprobe grows, so per query recall never drops.
        assert recalls == sorted(recalls), recalls
        means.append(recalls)
    mean = np.mean(np.array(means), axis=0)
    assert mean[-1] >= 0.95, mean
    assert mean[0] < mean[-1], mean  # nprobe=1 does miss something on this data


def test_nprobe_at_or_above_nlist_is_the_exact_stream(
    snapshot: Snapshot, probes: list[NDArray[np.float32]]
) -> None:
    (block,) = snapshot.vector_blocks()
    assert block.centroids is not None
    nlist = block.centroids.shape[0]
    assert nlist == nlist_for(N) == 35
    for vector in probes[:4]:
        exact = score(snapshot, vector, 50, None)
        for nprobe in [nlist, nlist + 1, 10_000]:
            assert_same_stream(score(snapshot, vector, 50, nprobe), exact)
        # k beyond the corpus too.
        assert_same_stream(score(snapshot, vector, N + 10, nlist), score(snapshot, vector, N + 10, None))


def test_below_the_floor_any_nprobe_is_the_exact_stream() -> None:
    vectors = clustered(IVF_MIN_VECTORS - 1, seed=3)
    index = Index(analyzer="simple", vector_dim=DIM)
    index.add_many(documents(vectors))
    snap = index.snapshot()
    assert partitioned(snap) == [False]
    for vector in queries(vectors, count=6):
        exact = score(snap, vector, 20, None)
        for nprobe in [1, 2, 20, 1000]:
            assert_same_stream(score(snap, vector, 20, nprobe), exact)


def test_deleted_and_replaced_documents_are_never_returned(vectors: NDArray[np.float32]) -> None:
    index = Index(analyzer="simple", vector_dim=DIM)
    index.add_many(documents(vectors))
    before = index.snapshot()
    probes = queries(vectors, count=6, seed=8)
    deleted: set[str] = set()
    for vector in probes:
        deleted.update(before.keys_of(score(before, vector, 15, None).ids)[::2])
    index.delete_many(sorted(deleted))
    # Replace the best hit of the first query with a vector pointing elsewhere.
    replaced = before.keys_of(score(before, probes[0], 1, None).ids)[0]
    if replaced in deleted:
        replaced = before.keys_of(score(before, probes[0], 2, None).ids)[1]
    index.add(Document(replaced, vector=-probes[0]))
    after = index.snapshot()
    assert partitioned(after) == [True, False]
    for vector in probes:
        exact = exact_scores(after, vector)
        for nprobe in [*NPROBES, DEFAULT_NPROBE]:
            stream = score(after, vector, 30, nprobe)
            keys = after.keys_of(stream.ids)
            assert not deleted & set(keys)
            assert_ordered(after, stream)
            assert_exact_scores(stream, exact)
    # The replaced document's old vector is gone: it scores as its new vector.
    new_score = exact_scores(after, probes[0])[after.id_of(replaced)]
    assert new_score < -0.9
    for nprobe in NPROBES:
        assert replaced not in after.keys_of(score(after, probes[0], 30, nprobe).ids)


def test_zero_vectors_in_a_partitioned_segment_are_absent() -> None:
    vectors = clustered(4000, seed=21)
    vectors[::80] = 0.0  # 50 zero vectors: they all land in list 0
    index = Index(analyzer="simple", vector_dim=DIM)
    index.add_many(documents(vectors))
    snap = index.snapshot()
    assert partitioned(snap) == [True]
    zero = {f"doc-{i:05d}" for i in range(0, 4000, 80)}
    for vector in queries(vectors, count=6, seed=22):
        exact = exact_scores(snap, vector)
        assert not zero & set(snap.keys_of(np.array(list(exact), dtype=np.int64)))
        for nprobe in NPROBES:
            stream = score(snap, vector, 4000, nprobe)
            assert not zero & set(snap.keys_of(stream.ids))
            assert_exact_scores(stream, exact)


def test_all_vectors_view_of_a_partitioned_segment(snapshot: Snapshot, vectors: NDArray[np.float32]) -> None:
    block = snapshot.vectors()  # ids ascending, whatever order the segment stores rows in
    assert np.array_equal(block.ids, np.arange(N))
    assert block.matrix.tobytes() == vectors.tobytes()
    assert block.centroids is None


# ---------------------------------------------------------------------------- several segments, on disk


def build_multi(path: Path) -> Index:
    """Two committed segments above the floor and one below."""
    vectors = clustered(4000 + 3700 + 200, seed=11)
    # A fixed index id: it is stamped into every file (docs/FORMAT.md, "Determinism").
    index = Index.create(path, analyzer="simple", vector_dim=DIM, index_id="1d" * 16)
    for start, end in [(0, 4000), (4000, 7700), (7700, 7900)]:
        index.add_many(documents(vectors[start:end], start=start))
        index.commit()
    return index


MULTI_QUERIES = queries(clustered(4000 + 3700 + 200, seed=11), count=10, seed=12)


def results(index: Index, nprobes: Sequence[int | None] = (1, 4, DEFAULT_NPROBE, None)) -> list[object]:
    out: list[object] = []
    snap = index.snapshot()
    for vector in MULTI_QUERIES:
        for nprobe in nprobes:
            out.append(keyed(snap, score(snap, vector, 25, nprobe)))
            hits = index.search(Query(vector=vector), 10, RRF(), VectorScorer(nprobe=nprobe))
            out.append([hit.to_dict() for hit in hits])
    return out


def segment_hashes(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.glob("seg-*.wseg"))}


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("multi") / "index"
    build_multi(path).close()
    return path


def test_multi_segment_index_scores_and_order(multi: Path) -> None:
    with Index.open(multi, readonly=True) as index:
        snap = index.snapshot()
        assert partitioned(snap) == [True, True, False]
        assert [b.matrix.shape[0] for b in snap.vector_blocks()] == [4000, 3700, 200]
        for vector in MULTI_QUERIES:
            exact = exact_scores(snap, vector)
            previous = 0.0
            for nprobe in NPROBES:
                stream = score(snap, vector, 40, nprobe)
                assert_ordered(snap, stream)
                assert_exact_scores(stream, exact)
                recall = recall_at_10(snap, vector, nprobe)
                assert recall >= previous
                previous = recall
            assert recall_at_10(snap, vector, 10_000) == 1.0


def test_multi_segment_index_is_deterministic(multi: Path, tmp_path: Path) -> None:
    with build_multi(tmp_path / "again") as again:
        rebuilt = results(again)
    assert segment_hashes(tmp_path / "again") == segment_hashes(multi)
    with Index.open(multi, readonly=True) as index:
        assert results(index) == rebuilt
        assert results(index) == rebuilt  # and the same on a second run in one process


def test_reopen_gives_the_same_results(tmp_path: Path) -> None:
    index = build_multi(tmp_path / "index")
    before = results(index)
    index.close()
    with Index.open(tmp_path / "index", readonly=True) as reopened:
        assert results(reopened) == before
    with Index.open(tmp_path / "index") as writer:
        assert results(writer) == before


def test_merge_retrains_and_keeps_recall(tmp_path: Path) -> None:
    index = build_multi(tmp_path / "index")
    exact_before = results(index, nprobes=(None,))
    assert index.merge(force=True) == 3
    snap = index.snapshot()
    (block,) = snap.vector_blocks()
    assert block.centroids is not None and block.centroids.shape[0] == nlist_for(7900) == 44
    # Exact results never change across a merge, scores to the bit.
    assert results(index, nprobes=(None,)) == exact_before
    recalls = [recall_at_10(snap, vector, DEFAULT_NPROBE) for vector in MULTI_QUERIES]
    assert float(np.mean(recalls)) >= 0.9, recalls
    for vector in MULTI_QUERIES:
        exact = exact_scores(snap, vector)
        stream = score(snap, vector, 30, DEFAULT_NPROBE)
        assert_ordered(snap, stream)
        assert_exact_scores(stream, exact)
    merged = results(index)
    index.close()
    with Index.open(tmp_path / "index", readonly=True) as reopened:
        assert results(reopened) == merged


# ---------------------------------------------------------------------------- VectorBlock.probe

#: Five unit centroids in the plane at 0, 72, 144, 216 and 288 degrees; list 1 is empty.
ANGLES = [0.0, 72.0, 144.0, 216.0, 288.0]
OFFSETS = [0, 10, 10, 40, 70, 100]


def hand_block() -> VectorBlock:
    centroids = np.array(
        [[math.cos(math.radians(a)), math.sin(math.radians(a))] for a in ANGLES], dtype=np.float32
    )
    return VectorBlock(
        np.arange(100, dtype=np.int64),
        np.zeros((100, 2), dtype=np.float32),
        centroids,
        np.array(OFFSETS, dtype=np.uint64),
    )


def unit_at(degrees: float) -> NDArray[np.float32]:
    return np.array([math.cos(math.radians(degrees)), math.sin(math.radians(degrees))], dtype=np.float32)


def test_probe_without_partitions_is_none() -> None:
    block = VectorBlock(np.arange(100, dtype=np.int64), np.zeros((100, 2), dtype=np.float32))
    assert block.probe(unit_at(0.0), 1) is None
    half = VectorBlock(
        np.arange(100, dtype=np.int64), np.zeros((100, 2), dtype=np.float32), hand_block().centroids, None
    )
    assert half.probe(unit_at(0.0), 1) is None


@pytest.mark.parametrize(
    ("degrees", "nprobe", "expected"),
    [
        (144.0, 1, [(10, 40)]),  # list 2
        (115.0, 2, [(10, 40)]),  # lists 1 (empty) and 2
        (170.0, 2, [(10, 70)]),  # lists 2 and 3, adjacent: merged
        (30.0, 2, [(0, 10)]),  # lists 0 and 1 (empty)
        (100.0, 3, [(0, 40)]),  # lists 0, 1, 2: adjacent across the empty list
        (10.0, 3, [(0, 10), (70, 100)]),  # lists 0, 1, 4
        (-30.0, 2, [(0, 10), (70, 100)]),  # lists 0 and 4: not adjacent
        (250.0, 2, [(40, 100)]),  # lists 3 and 4
        (200.0, 4, [(10, 100)]),  # lists 1, 2, 3, 4
    ],
)
def test_probe_by_hand(degrees: float, nprobe: int, expected: list[tuple[int, int]]) -> None:
    assert hand_block().probe(unit_at(degrees), nprobe) == expected


def test_probe_reading_every_list_is_none() -> None:
    block = hand_block()
    assert block.probe(unit_at(0.0), 5) is None
    assert block.probe(unit_at(0.0), 6) is None


def _expected_lists(centroids: NDArray[np.float32], unit: NDArray[np.float32], nprobe: int) -> list[int]:
    closeness = centroids.astype(np.float64) @ unit.astype(np.float64)
    order = np.argsort(-closeness, kind="stable")
    if nprobe < order.shape[0]:
        # No near-tie at the cut, or float32 and float64 could pick differently.
        assert closeness[order[nprobe - 1]] - closeness[order[nprobe]] > 1e-6
    return sorted(order[:nprobe].tolist())


def test_probe_picks_the_closest_centroids(snapshot: Snapshot) -> None:
    (block,) = snapshot.vector_blocks()
    assert block.centroids is not None and block.list_offsets is not None
    m = block.matrix.shape[0]
    offsets = block.list_offsets.astype(np.int64)
    rng = np.random.default_rng(17)
    for _ in range(40):
        vector = rng.standard_normal(DIM).astype(np.float32)
        unit = vector / np.float32(np.linalg.norm(vector))
        for nprobe in [1, 3, 7, 20, 34]:
            ranges = block.probe(unit, nprobe)
            assert ranges is not None
            for start, end in ranges:
                assert 0 <= start < end <= m
            for (_, end), (start, _) in itertools.pairwise(ranges):
                assert end < start  # sorted, disjoint, and adjacent ones merged
            covered = np.zeros(m, dtype=bool)
            for start, end in ranges:
                covered[start:end] = True
            wanted = np.zeros(m, dtype=bool)
            for chosen in _expected_lists(block.centroids, unit, nprobe):
                wanted[offsets[chosen] : offsets[chosen + 1]] = True
            assert np.array_equal(covered, wanted), nprobe


def test_blocks_carry_the_segment_lists(snapshot: Snapshot) -> None:
    (part,) = snapshot.parts
    lists = part.reader.vector_lists()
    assert lists is not None
    (block,) = snapshot.vector_blocks()
    assert block.centroids is not None and block.list_offsets is not None
    assert block.centroids.tobytes() == lists[0].tobytes()
    assert np.array_equal(block.list_offsets, lists[1])


@pytest.mark.slow
def test_recall_sweep_over_seeds() -> None:
    """Longer sweep: recall monotone in nprobe and exact scores, on several seeds and widths."""
    for seed in range(4):
        vectors = clustered(12_000, seed=seed, clusters=120)
        index = Index(analyzer="simple", vector_dim=DIM)
        index.add_many(documents(vectors))
        snap = index.snapshot()
        for vector in queries(vectors, count=20, seed=seed):
            exact = exact_scores(snap, vector)
            recalls = [recall_at_10(snap, vector, nprobe) for nprobe in [*NPROBES, 64]]
            assert recalls == sorted(recalls)
            stream = score(snap, vector, 200, 8)
            assert_exact_scores(stream, exact)


def test_nearest_lists_break_ties_at_the_cut_by_lower_list() -> None:
    # Lists 1, 3 and 4 share a centroid; list 5 is nearest, list 0 and 2 farthest.
    same = unit_at(40.0)
    centroids = np.stack([unit_at(180.0), same, unit_at(170.0), same, same, unit_at(0.0)])
    offsets = np.arange(0, 70, 10, dtype=np.uint64)
    vectors = np.zeros((60, 2), dtype=np.float32)
    block = VectorBlock(np.arange(60, dtype=np.int64), vectors, centroids, offsets)
    query = unit_at(0.0)
    for nprobe, expected in [(1, [5]), (2, [1, 5]), (3, [1, 3, 5]), (4, [1, 3, 4, 5])]:
        chosen = block.nearest_lists(query, nprobe)
        assert chosen is not None and chosen.tolist() == expected


def _reference_lists(closeness: NDArray[np.float32], nprobe: int) -> list[int]:
    """The documented rule, spelled out: highest closeness first, ties to the lower list, NaN never."""
    ranked = sorted((-float(c), position) for position, c in enumerate(closeness) if not np.isnan(c))
    return sorted(position for _, position in ranked[:nprobe])


@settings(max_examples=80, deadline=None)
@given(
    nlist=st.sampled_from([2, 3, 7, 36, 255, 256, 257, 600]),
    levels=st.integers(1, 6),
    nprobe=st.integers(1, 40),
    nans=st.integers(0, 3),
    seed=st.integers(0, 2**16),
)
def test_nearest_lists_follow_the_rule_with_few_and_many_lists(
    nlist: int, levels: int, nprobe: int, nans: int, seed: int
) -> None:
    # Few distinct closeness values, so ties at the cut are common; both the
    # sorting path (<= 256 lists) and the selecting path (more) are covered.
    rng = np.random.default_rng(seed)
    angles = rng.integers(0, levels, size=nlist) * 15.0
    centroids = np.stack([unit_at(float(a)) for a in angles]).astype(np.float32)
    if nans:
        centroids[rng.choice(nlist, size=min(nans, nlist - 1), replace=False)] = np.nan
    rows_per_list = 4
    offsets = (np.arange(nlist + 1) * rows_per_list).astype(np.uint64)
    vectors = np.zeros((nlist * rows_per_list, 2), dtype=np.float32)
    block = VectorBlock(np.arange(vectors.shape[0], dtype=np.int64), vectors, centroids, offsets)
    query = unit_at(0.0)
    chosen = block.nearest_lists(query, nprobe)
    closeness = inner_products(centroids, query, np.arange(nlist, dtype=np.int64))
    if nprobe >= nlist or nlist + nprobe * rows_per_list >= vectors.shape[0]:
        assert chosen is None  # probing would read no fewer rows than a scan
        return
    assert chosen is not None
    assert chosen.dtype == np.int64
    assert chosen.tolist() == _reference_lists(closeness, nprobe)


@pytest.mark.parametrize("nlist", [8, 300])
def test_lists_with_nan_centroids_are_never_chosen(nlist: int) -> None:
    # Fewer lists have a number than nprobe asks for: only those are probed.
    centroids = np.stack([unit_at(10.0 * (i % 9)) for i in range(nlist)]).astype(np.float32)
    centroids[3:] = np.nan
    offsets = (np.arange(nlist + 1) * 4).astype(np.uint64)
    block = VectorBlock(
        np.arange(nlist * 4, dtype=np.int64), np.zeros((nlist * 4, 2), np.float32), centroids, offsets
    )
    chosen = block.nearest_lists(unit_at(0.0), 5)
    assert chosen is not None and chosen.tolist() == [0, 1, 2]
