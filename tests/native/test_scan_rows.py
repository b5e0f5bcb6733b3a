"""The row-wise inner-product kernel: correct, and each row's bits independent of the others asked for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weftsearch.native.scan import RowKernel, inner_products

DIMS = [1, 2, 3, 4, 8, 12, 16, 31, 384]


@pytest.mark.parametrize("dim", DIMS)
def test_values_match_a_float64_reference(dim: int) -> None:
    rng = np.random.default_rng(dim)
    matrix = rng.standard_normal((300, dim)).astype(np.float32)
    vector = rng.standard_normal(dim).astype(np.float32)
    rows = rng.integers(0, 300, size=120).astype(np.int64)
    got = inner_products(matrix, vector, rows)
    assert got.dtype == np.float32 and got.shape == (120,)
    reference = matrix[rows].astype(np.float64) @ vector.astype(np.float64)
    scale = np.abs(matrix[rows].astype(np.float64)) @ np.abs(vector.astype(np.float64))
    assert np.all(np.abs(got - reference) <= 1e-5 * scale + 1e-30)


@settings(max_examples=60, deadline=None)
@given(
    dim=st.sampled_from(DIMS),
    picks=st.lists(st.integers(0, 199), min_size=1, max_size=80),
    seed=st.integers(0, 2**16),
)
def test_a_rows_bits_do_not_depend_on_the_other_rows(dim: int, picks: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((200, dim)).astype(np.float32)
    vector = rng.standard_normal(dim).astype(np.float32)
    every = inner_products(matrix, vector, np.arange(200, dtype=np.int64))
    rows = np.array(picks, dtype=np.int64)
    assert inner_products(matrix, vector, rows).tobytes() == every[rows].tobytes()
    # The same row alone, and in a contiguous copy of a slice (as another segment would hold it).
    for row in picks[:5]:
        alone = inner_products(matrix, vector, np.array([row], dtype=np.int64))
        assert alone.tobytes() == every[row : row + 1].tobytes()
        copy = np.ascontiguousarray(matrix[row:])
        assert inner_products(copy, vector, np.array([0], dtype=np.int64)).tobytes() == alone.tobytes()


def test_memory_map_half_precision_and_strided_views(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((64, 24)).astype(np.float32)
    vector = rng.standard_normal(24).astype(np.float32)
    rows = np.array([5, 0, 63, 5], dtype=np.int64)
    expected = inner_products(matrix, vector, rows)
    np.save(tmp_path / "m.npy", matrix)
    mapped = np.load(tmp_path / "m.npy", mmap_mode="r")
    assert inner_products(mapped, vector, rows).tobytes() == expected.tobytes()
    wide = np.zeros((64, 48), dtype=np.float32)
    wide[:, ::2] = matrix
    assert inner_products(wide[:, ::2], vector, rows).tobytes() == expected.tobytes()
    half = matrix.astype(np.float16)
    assert (
        inner_products(half, vector, rows).tobytes()
        == inner_products(half.astype(np.float32), vector, rows).tobytes()
    )
    assert inner_products(matrix, vector, np.empty(0, dtype=np.int64)).shape == (0,)


def test_a_bound_kernel_gives_the_bits_of_inner_products(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    matrix = rng.standard_normal((90, 384)).astype(np.float32)
    np.save(tmp_path / "m.npy", matrix)
    mapped = np.load(tmp_path / "m.npy", mmap_mode="r")
    vector = rng.standard_normal(384).astype(np.float32)
    rows = rng.integers(0, 90, size=200).astype(np.int64)
    expected = inner_products(matrix, vector, rows).tobytes()
    for source in (matrix, mapped, matrix.astype(np.float16).astype(np.float32)):
        kernel = RowKernel(source)
        assert kernel(vector, rows).tobytes() == inner_products(source, vector, rows).tobytes()
    kernel = RowKernel(mapped)
    assert kernel(vector, rows).tobytes() == expected
    # Inputs off the fast path (strided rows, int32 rows, float64 or strided vector) give the same bits.
    assert kernel(vector, np.repeat(rows, 2)[::2]).tobytes() == expected
    assert kernel(vector, rows.astype(np.int32)).tobytes() == expected
    assert kernel(vector.astype(np.float64), rows).tobytes() == expected
    assert kernel(np.repeat(vector, 2)[::2], rows).tobytes() == expected
    assert kernel(vector, np.empty(0, dtype=np.int64)).shape == (0,)
    # Half precision and non-contiguous matrices take the converting path.
    half = matrix.astype(np.float16)
    assert RowKernel(half)(vector, rows).tobytes() == inner_products(half, vector, rows).tobytes()
    wide = np.zeros((90, 768), dtype=np.float32)
    wide[:, ::2] = matrix
    assert RowKernel(wide[:, ::2])(vector, rows).tobytes() == expected
    assert RowKernel(np.empty((0, 384), dtype=np.float32))(vector, np.empty(0, dtype=np.int64)).shape == (0,)


def test_every_half_precision_value_converts_exactly() -> None:
    import weftsearch.native.scan as kernels

    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)]
    dim = 16
    matrix = np.zeros((-(-finite.shape[0] // dim), dim), dtype=np.float16)
    matrix.reshape(-1)[: finite.shape[0]] = finite
    rows = np.arange(matrix.shape[0], dtype=np.int64)
    widened = matrix.astype(np.float32)
    for position in range(dim):  # each column alone: the product is that value, exactly
        unit = np.zeros(dim, dtype=np.float32)
        unit[position] = 1.0
        got = inner_products(matrix, unit, rows)
        # Equal as numbers (-0.0 plus the other columns' zeros comes out +0.0).
        assert np.array_equal(got, widened[:, position])
    assert kernels._half_decoder(dim) is not None  # faiss's decoder, not the numpy fallback


def test_conversion_in_chunks_gives_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    import weftsearch.native.scan as kernels

    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((500, 24)).astype(np.float16)
    vector = rng.standard_normal(24).astype(np.float32)
    rows = rng.integers(0, 500, size=333).astype(np.int64)
    expected = inner_products(matrix.astype(np.float32), vector, rows).tobytes()
    assert inner_products(matrix, vector, rows).tobytes() == expected
    for chunk in (1, 7, 100, 333, 334):
        monkeypatch.setattr(kernels, "CONVERT_ROWS", chunk)
        assert inner_products(matrix, vector, rows).tobytes() == expected
        assert inner_products(matrix[:, ::-1][:, ::-1], vector, rows).tobytes() == expected
    monkeypatch.setattr(kernels, "_half_decoder", lambda dim: None)  # the numpy path agrees
    assert inner_products(matrix, vector, rows).tobytes() == expected
