"""The compiled scan (``_scan.c`` through ScanKernel): built, in use, and result for result and bit
for bit the numpy path's, on hand-made blocks with every edge (deleted rows, zero rows, ties, NaN
scores and centroids) and on real multi-segment indexes, from one thread and from several."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from weftsearch import Document, Index, Query, VectorScorer
from weftsearch.engine.stream import Stream, at_least_kth
from weftsearch.errors import CorruptIndexError, InvalidParameterError
from weftsearch.native import scan as kernels
from weftsearch.native.loader import library_path
from weftsearch.native.scan import ScanKernel, compiled_scan_available, inner_products

DISABLED = os.environ.get(kernels.DISABLE_VARIABLE, "") not in ("", "0")
needs_compiled = pytest.mark.skipif(
    DISABLED, reason=f"{kernels.DISABLE_VARIABLE} turns the compiled scan off"
)


@pytest.fixture
def numpy_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The compiled scan turned off for the test (and the cached choice restored after)."""
    monkeypatch.setenv(kernels.DISABLE_VARIABLE, "1")
    kernels._compiled_scan.cache_clear()
    yield
    monkeypatch.delenv(kernels.DISABLE_VARIABLE)
    kernels._compiled_scan.cache_clear()


@needs_compiled
def test_the_compiled_scan_is_built_and_passes_its_self_check() -> None:
    # CI installs with a C compiler: a build that silently fell back would hide here.
    assert library_path("_scan") is not None
    assert compiled_scan_available()


def test_the_switch_turns_it_off(numpy_path: None) -> None:
    assert not compiled_scan_available()
    matrix = np.ones((4, 3), dtype=np.float32)
    norms = np.ones(4, dtype=np.float32)
    assert ScanKernel.for_block(matrix, norms, np.arange(4, dtype=np.int64), None, None) is None


# ------------------------------------------------------------------ the rules, written in numpy


def reference(
    matrix: NDArray[np.floating],
    norms: NDArray[np.float32],
    ids: NDArray[np.int64],
    centroids: NDArray[np.float32] | None,
    offsets: NDArray[np.uint64] | None,
    unit: NDArray[np.float32],
    nprobe: int,
    k: int,
) -> tuple[list[int], bytes]:
    usable = (ids >= 0) & (norms > 0)
    if nprobe == 0 or centroids is None or offsets is None:
        rows = np.flatnonzero(usable)
    else:
        closeness = inner_products(centroids, unit, np.arange(centroids.shape[0], dtype=np.int64))
        ranked = sorted((-float(c), lst) for lst, c in enumerate(closeness.tolist()) if not np.isnan(c))
        lists = sorted(lst for _, lst in ranked[:nprobe])
        rows = np.concatenate(
            [np.arange(int(offsets[lst]), int(offsets[lst + 1]), dtype=np.int64) for lst in lists]
            + [np.empty(0, dtype=np.int64)]
        )
        rows = rows[usable[rows]]
    similarity = inner_products(matrix, unit, rows.astype(np.int64))
    with np.errstate(invalid="ignore"):
        np.divide(similarity, norms[rows], out=similarity)
    if rows.shape[0] > k:
        keep = at_least_kth(similarity, k)
        rows, similarity = rows[keep], similarity[keep]
    found = ids[rows]
    # Score descending, then id; NaN last (numpy's lexsort puts NaN of -score last).
    order = np.lexsort((found, -similarity))
    return found[order].tolist(), similarity[order].astype(np.float64).tobytes()


def unit(vector: NDArray[np.float32]) -> tuple[NDArray[np.float32], np.float32]:
    norm = np.sqrt(vector.dot(vector))
    return vector, norm


@needs_compiled
@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(1, 160),
    dim=st.sampled_from([1, 3, 8, 16, 33]),
    pool=st.integers(1, 40),
    nlist=st.integers(1, 12),
    nprobe=st.integers(0, 14),
    k=st.integers(1, 170),
    edges=st.sets(st.sampled_from(["deleted", "zero", "huge", "nan_centroid", "twin_centroids", "half"])),
    seed=st.integers(0, 2**16),
)
def test_the_compiled_scan_follows_the_written_rules(
    rows: int, dim: int, pool: int, nlist: int, nprobe: int, k: int, edges: set[str], seed: int
) -> None:
    # "half": a float16 matrix, widened row by row inside the scan; "huge" rows are then inf.
    rng = np.random.default_rng(seed)
    # Rows drawn from a small pool of vectors, so equal scores (ties) are common.
    vectors = rng.standard_normal((pool, dim)).astype(np.float32)
    matrix = np.ascontiguousarray(vectors[rng.integers(0, pool, size=rows)])
    ids = rng.permutation(rows).astype(np.int64)
    if "deleted" in edges:
        ids[rng.random(rows) < 0.3] = -1
    if "zero" in edges:
        matrix[rng.random(rows) < 0.2] = 0.0
    if "huge" in edges:  # the dot and the norm overflow: inf / inf is NaN
        matrix[rng.random(rows) < 0.2] = 1e30
    stored: NDArray[np.floating] = matrix
    if "half" in edges:
        with np.errstate(over="ignore"):
            stored = matrix.astype(np.float16)
        matrix = stored.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float32))
    centroids = rng.standard_normal((nlist, dim)).astype(np.float32)
    if "twin_centroids" in edges and nlist > 1:
        centroids[-1] = centroids[0]
    if "nan_centroid" in edges:
        centroids[rng.integers(0, nlist)] = np.nan
    cuts = np.sort(rng.integers(0, rows + 1, size=nlist - 1))
    offsets = np.concatenate([[0], cuts, [rows]]).astype(np.uint64)
    query = rng.standard_normal(dim).astype(np.float32)
    vector, norm = unit(query)
    kernel = ScanKernel.for_block(stored, norms, ids, centroids, offsets)
    assert kernel is not None
    with np.errstate(over="ignore", invalid="ignore"):
        expected = reference(stored, norms, ids, centroids, offsets, query / norm, nprobe, k)
    expected_ids, expected_scores = expected
    got_ids, got_scores = kernel(vector, norm, nprobe, k)
    assert got_ids.tolist() == expected_ids
    assert got_scores.tobytes() == expected_scores
    first_ids, first_scores = kernel(vector, norm, nprobe, k, first=3)
    assert first_ids.tolist() == expected_ids[:3]
    assert first_scores.tobytes() == expected_scores[: 8 * len(first_ids)]


@needs_compiled
@pytest.mark.parametrize("nprobe", [1, 2])
def test_lists_tied_at_the_cut_go_to_the_lower_list(nprobe: int) -> None:
    # Lists 0 and 2 have the same centroid; with nprobe 1 only list 0 is read, with 2 both are.
    # (Random blocks rarely put an exact tie at the cut, so the rule gets a case of its own.)
    e = np.eye(4, dtype=np.float32)
    matrix = np.stack([e[0], 0.5 * e[0] + e[1], -e[0], e[0]])
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float32))
    ids = np.arange(4, dtype=np.int64)
    centroids = np.stack([e[0], -e[0], e[0]])
    offsets = np.array([0, 2, 3, 4], dtype=np.uint64)
    kernel = ScanKernel.for_block(matrix, norms, ids, centroids, offsets)
    assert kernel is not None
    found, scores = kernel(e[0].copy(), np.float32(1.0), nprobe, 10)
    assert found.tolist() == ([0, 1] if nprobe == 1 else [0, 3, 1])
    expected = reference(matrix, norms, ids, centroids, offsets, e[0].copy(), nprobe, 10)
    assert (found.tolist(), scores.tobytes()) == expected


@needs_compiled
def test_more_ties_than_the_result_buffer_holds() -> None:
    # 700 equal rows and k = 5: every tie is kept (700 > the 256 results a buffer starts with).
    matrix = np.tile(np.array([[1.0, 2.0, 3.0]], dtype=np.float32), (700, 1))
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float32))
    ids = np.arange(700, dtype=np.int64)[::-1].copy()
    kernel = ScanKernel.for_block(matrix, norms, ids, None, None)
    assert kernel is not None
    vector, norm = unit(np.array([3.0, 2.0, 1.0], dtype=np.float32))
    found, scores = kernel(vector, norm, 0, 5)
    assert found.tolist() == list(range(700))
    assert np.unique(scores).shape == (1,)
    assert kernel(vector, norm, 0, 5, first=5)[0].tolist() == [0, 1, 2, 3, 4]


@needs_compiled
def test_every_half_widens_as_numpy_widens_it() -> None:
    import ctypes

    path = library_path("_scan")
    assert path is not None
    widen = ctypes.CDLL(str(path)).weft_widen_halves
    widen.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = np.empty(65536, dtype=np.float32)
    widen(got.ctypes.data, halves.ctypes.data, 65536)
    expected = halves.view(np.float16).astype(np.float32)
    finite = ~np.isnan(expected)
    assert got[finite].tobytes() == expected[finite].tobytes()  # subnormals, zeros, infinities included
    assert np.isnan(got[~finite]).all()
    # The tail after the last whole group of 8 goes through the portable conversion.
    widen(got.ctypes.data, halves[5:].ctypes.data, 13)
    assert got[:13].tobytes() == expected[5:18].tobytes()


def test_layouts_the_compiled_scan_does_not_read_go_to_numpy() -> None:
    matrix = np.ones((8, 4), dtype=np.float32)
    norms = np.full(8, 2.0, dtype=np.float32)
    ids = np.arange(8, dtype=np.int64)
    assert ScanKernel.for_block(matrix.astype(np.float64), norms, ids, None, None) is None
    assert ScanKernel.for_block(np.ones((8, 8), dtype=np.float32)[:, ::2], norms, ids, None, None) is None
    assert ScanKernel.for_block(matrix, norms, ids.astype(np.int32), None, None) is None
    assert ScanKernel.for_block(matrix, norms[:4], ids, None, None) is None
    assert ScanKernel.for_block(np.empty((0, 4), dtype=np.float32), norms[:0], ids[:0], None, None) is None
    lists = np.ones((2, 4), dtype=np.float32)
    assert ScanKernel.for_block(matrix, norms, ids, lists, np.array([0, 8], dtype=np.uint64)) is None


# --------------------------------------------------------------------- through the scorer


def build(path: Path) -> None:
    """Two partitioned segments (one with deletes), ties from repeated vectors, and a third small one."""
    rng = np.random.default_rng(11)
    pool = rng.standard_normal((3000, 16)).astype(np.float32)
    index = Index.create(path, vector_dim=16)
    for start in (0, 4000):
        picks = rng.integers(0, 3000, size=4000)
        batch = [Document(f"d{start + i:05d}", vector=pool[p]) for i, p in enumerate(picks.tolist())]
        index.add_many(batch, progress=False)
        index.commit()
    for i in range(0, 8000, 7):
        index.delete(f"d{i:05d}")
    index.add_many([Document(f"s{i:03d}", vector=pool[i]) for i in range(300)], progress=False)
    index.commit()
    index.close()


def streams(path: Path) -> list[Stream]:
    rng = np.random.default_rng(12)
    found = []
    with Index.open(path) as index:
        snapshot = index.snapshot()
        vectors = rng.standard_normal((12, 16)).astype(np.float32)
        for nprobe in (1, 4, 20, None):
            scorer = VectorScorer(nprobe=nprobe)
            for k in (1, 10, 150):
                found += [scorer.score(snapshot, Query(vector=v), k) for v in vectors]
    return found


def test_the_scorer_gives_the_same_streams_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(tmp_path / "index")
    fast = streams(tmp_path / "index")
    monkeypatch.setenv(kernels.DISABLE_VARIABLE, "1")
    kernels._compiled_scan.cache_clear()
    try:
        slow = streams(tmp_path / "index")
    finally:
        monkeypatch.delenv(kernels.DISABLE_VARIABLE)
        kernels._compiled_scan.cache_clear()
    assert len(fast) == len(slow)
    for left, right in zip(fast, slow, strict=True):
        assert left.ids.tolist() == right.ids.tolist()
        assert left.scores.tobytes() == right.scores.tobytes()


def test_one_segment_from_many_threads(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    vectors = rng.standard_normal((5000, 16)).astype(np.float32)
    index = Index(vector_dim=16)
    index.add_many([Document(f"d{i:05d}", vector=vectors[i]) for i in range(5000)], progress=False)
    snapshot = index.snapshot()
    queries = [Query(vector=v) for v in rng.standard_normal((64, 16)).astype(np.float32)]
    scorer = VectorScorer(nprobe=3)

    def run(chunk: int) -> list[list[int]]:
        return [scorer.score(snapshot, q, 7 + chunk).ids.tolist() for q in queries for _ in range(3)]

    alone = [run(chunk) for chunk in range(8)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(run, range(8)))
    assert together == alone


# ------------------------------------------------------------------ sizes (issue 13 item 1)


def raw_scan(
    matrix: NDArray[np.floating],
    norms: NDArray[np.float32],
    ids: NDArray[np.int64],
    centroids: NDArray[np.float32] | None,
    offsets: NDArray[np.uint64] | None,
    unit_query: NDArray[np.float32],
    nprobe: int,
    k: int,
    *,
    rows: int | None = None,
    dim: int | None = None,
    nlist: int | None = None,
) -> tuple[int, list[int], bytes]:
    """weft_probe_scan called straight through ctypes, no Python-side checks or clamps."""
    compiled = kernels._compiled_scan()
    assert compiled is not None
    function, dot = compiled
    capacity = 256
    out_ids = np.zeros(capacity, dtype=np.int64)
    out_scores = np.zeros(capacity, dtype=np.float64)
    kept = function(
        dot,
        unit_query.ctypes.data,
        matrix.shape[1] if dim is None else dim,
        matrix.ctypes.data,
        int(matrix.dtype == np.float16),
        matrix.shape[0] if rows is None else rows,
        norms.ctypes.data,
        ids.ctypes.data,
        None if centroids is None else centroids.ctypes.data,
        None if offsets is None else offsets.ctypes.data,
        (0 if centroids is None else centroids.shape[0]) if nlist is None else nlist,
        nprobe,
        k,
        out_ids.ctypes.data,
        out_scores.ctypes.data,
        capacity,
    )
    count = max(kept, 0)
    return kept, out_ids[:count].tolist(), out_scores[:count].tobytes()


def small_block(
    half: bool = False,
) -> tuple[
    NDArray[np.floating], NDArray[np.float32], NDArray[np.int64], NDArray[np.float32], NDArray[np.uint64]
]:
    rng = np.random.default_rng(13)
    matrix: NDArray[np.floating] = rng.standard_normal((40, 8)).astype(np.float16 if half else np.float32)
    wide = matrix.astype(np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", wide, wide, dtype=np.float32))
    ids = np.arange(40, dtype=np.int64)
    centroids = rng.standard_normal((4, 8)).astype(np.float32)
    offsets = np.array([0, 10, 20, 30, 40], dtype=np.uint64)
    return matrix, norms, ids, centroids, offsets


@needs_compiled
@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("nprobe", [0, 2, 2**62])
@pytest.mark.parametrize("k", [2**60, 2**60 + 1, 2**62, 2**63 - 1])
def test_the_c_scan_clamps_a_huge_k_to_the_rows(half: bool, nprobe: int, k: int) -> None:
    # k * 16 bytes wrapped for k >= 2^60: malloc got a few bytes and the heap was overwritten
    # (an abort, or a silently wrong answer). Now k is clamped to the rows (and nprobe to the
    # lists) before anything is allocated: the answer is every usable row of the probed lists.
    matrix, norms, ids, centroids, offsets = small_block(half)
    vector = np.random.default_rng(1).standard_normal(8).astype(np.float32)
    query = (vector / np.sqrt(vector.dot(vector))).astype(np.float32)
    kept, found, scores = raw_scan(matrix, norms, ids, centroids, offsets, query, nprobe, k)
    expected = reference(matrix, norms, ids, centroids, offsets, query, min(nprobe, 4), 40)
    assert (found, scores) == expected
    assert kept == len(expected[0])


@needs_compiled
@pytest.mark.parametrize(
    "change",
    [
        {"k": 0},
        {"k": -1},
        {"k": -(2**63)},
        {"dim": 0},
        {"rows": -1},
        {"nprobe": -1},
        {"rows": 2**62, "dim": 8},  # rows * dim * 4 bytes does not fit in size_t: refused before any read
        {"rows": 2**40, "dim": 2**30},
        {"nlist": 2**62, "nprobe": 1},
        {"offsets": [0, 10, 5, 30, 40]},  # a list that ends before it starts
        {"offsets": [0, 10, 20, 30, 41]},  # a list past the last row
        {"offsets": [0, 10, 20, 30, 2**64 - 1]},
    ],
)
def test_the_c_scan_refuses_sizes_no_block_has(change: dict[str, Any]) -> None:
    matrix, norms, ids, centroids, offsets = small_block()
    if "offsets" in change:
        offsets = np.array(change.pop("offsets"), dtype=np.uint64)
    query = np.zeros(8, dtype=np.float32)
    query[0] = 1.0
    k = change.pop("k", 5)
    nprobe = change.pop("nprobe", 2)
    kept, found, _ = raw_scan(matrix, norms, ids, centroids, offsets, query, nprobe, k, **change)
    assert kept == -2 and found == []


@needs_compiled
@pytest.mark.parametrize("k", [2**60, 2**63, 2**64, 2**64 + 3, 10**30])
def test_the_scan_kernel_clamps_k_before_the_64_bit_call(k: int) -> None:
    # ctypes wraps a Python int into int64 silently: 2^64 became 0 and 2^63 a negative k.
    matrix, norms, ids, centroids, offsets = small_block()
    kernel = ScanKernel.for_block(matrix, norms, ids, centroids, offsets)
    assert kernel is not None
    vector = np.random.default_rng(2).standard_normal(8).astype(np.float32)
    norm = np.sqrt(vector.dot(vector))
    found, scores = kernel(vector, norm, 0, k)
    expected = reference(matrix, norms, ids, None, None, (vector / norm).astype(np.float32), 0, 40)
    assert (found.tolist(), scores.tobytes()) == expected
    found, _ = kernel(vector, norm, 2**64, k, first=2**64)
    assert len(found) == 40


@needs_compiled
@pytest.mark.parametrize(
    "arguments", [{"k": 0}, {"k": True}, {"k": 2.5}, {"nprobe": -1}, {"first": -1}, {"width": 7}]
)
def test_the_scan_kernel_refuses_bad_arguments_with_a_typed_error(arguments: dict[str, Any]) -> None:
    matrix, norms, ids, centroids, offsets = small_block()
    kernel = ScanKernel.for_block(matrix, norms, ids, centroids, offsets)
    assert kernel is not None
    vector = np.ones(arguments.pop("width", 8), dtype=np.float32)
    call = {"nprobe": 1, "k": 3, "first": None} | arguments
    with pytest.raises(InvalidParameterError):
        kernel(vector, np.float32(1.0), call["nprobe"], call["k"], first=call["first"])


@needs_compiled
def test_list_offsets_outside_the_matrix_are_a_corrupt_index() -> None:
    matrix, norms, ids, centroids, _ = small_block()
    for bad in ([0, 10, 5, 30, 40], [0, 10, 20, 30, 41]):
        with pytest.raises(CorruptIndexError):
            ScanKernel.for_block(matrix, norms, ids, centroids, np.array(bad, dtype=np.uint64))
