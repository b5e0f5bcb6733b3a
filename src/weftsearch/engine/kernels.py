"""Inner products of one vector with chosen rows of a matrix, row by row, through faiss.

Why faiss and not numpy: a vector score must not depend on which other rows
were computed with it (otherwise a merge, a reopen or a different probe would
move scores in the last bit). numpy offers that only through ``einsum``, which
runs at about a quarter of BLAS speed; BLAS itself picks kernels by block
shape, so the same row can round differently in a block of 5 rows and in a
block of 8. faiss's ``fvec_inner_products_by_idx`` computes every listed row
with the same SIMD dot product, one row at a time, straight from the matrix
(no gather copy), in one call for any set of rows: the speed of BLAS and the
row-wise determinism of ``einsum``. docs/BENCHMARKS.md has the measurements.

Determinism holds on one machine (the SIMD width faiss dispatches to is fixed
per CPU); across CPU kinds the last bit may differ, as with any float kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["RowKernel", "inner_products"]


@cache
def _faiss() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Faiss's kernel and pointer helper, imported on first use (indexes without vectors never pay)."""
    import faiss

    # faiss's bundled stubs omit this function (it is in every faiss-cpu since 1.7).
    return faiss.fvec_inner_products_by_idx, faiss.swig_ptr  # type: ignore[attr-defined]


class RowKernel:
    """:func:`inner_products` bound to one matrix, for many queries against it.

    The matrix's layout is checked and its address taken once, so a call
    costs one faiss call and one allocation: the scorer makes one per segment
    and reuses it for every query. The matrix must outlive the kernel (the
    kernel holds a reference).

    Args:
        matrix: as for :func:`inner_products`.

    """

    __slots__ = ("_address", "_dim", "_direct", "_matrix")

    def __init__(self, matrix: NDArray[np.floating]) -> None:
        self._matrix = matrix
        self._dim = int(matrix.shape[1])
        self._direct = matrix.dtype == np.float32 and bool(matrix.flags.c_contiguous)
        self._address = _faiss()[1](matrix) if self._direct and matrix.shape[0] else None

    def __call__(self, vector: NDArray[np.float32], rows: NDArray[np.int64]) -> NDArray[np.float32]:
        """``matrix[rows] @ vector`` in float32, each row on its own (see :func:`inner_products`).

        ``vector`` must be a C-contiguous float32 ``(dim,)`` array and ``rows``
        C-contiguous int64 in ``[0, m)``; other inputs go through
        :func:`inner_products`. O(len(rows) * dim).
        """
        if not (
            self._address is not None
            and rows.dtype == np.int64
            and rows.flags.c_contiguous
            and vector.dtype == np.float32
            and vector.flags.c_contiguous
        ):
            return inner_products(self._matrix, vector, rows)
        out = np.empty(rows.shape[0], dtype=np.float32)
        if rows.shape[0]:
            by_index, pointer = _faiss()
            by_index(pointer(out), pointer(vector), self._address, pointer(rows), self._dim, 1, rows.shape[0])
        return out


def inner_products(
    matrix: NDArray[np.floating], vector: NDArray[np.float32], rows: NDArray[np.int64]
) -> NDArray[np.float32]:
    """``matrix[rows] @ vector`` in float32, each row computed on its own.

    Args:
        matrix: ``(m, dim)`` float32 or float16, any read-only view (a memory
            map is read in place when it is float32 and C-contiguous; other
            layouts and float16 are converted, :data:`CONVERT_ROWS` chosen
            rows at a time, into a float32 buffer, which is exact).
        vector: ``(dim,)`` float32.
        rows: int64 row indices in ``[0, m)``, any order, repeats allowed. The
            caller guarantees the range (the engine's row ids are validated
            when a segment is read); faiss does not check it.

    Returns:
        float32 ``(len(rows),)``: the inner product of ``vector`` with each row.
        A row's value is the same bits whichever other rows are asked for.

    Complexity: O(len(rows) * dim), one call into faiss (which releases the GIL).

    """
    out = np.empty(rows.shape[0], dtype=np.float32)
    if not rows.shape[0]:
        return out
    dim = int(matrix.shape[1])
    query = np.ascontiguousarray(vector, dtype=np.float32)
    by_index, pointer = _faiss()
    if matrix.dtype == np.float32 and matrix.flags.c_contiguous:
        index = np.ascontiguousarray(rows, dtype=np.int64)
        by_index(pointer(out), pointer(query), pointer(matrix), pointer(index), dim, 1, index.shape[0])
        return out
    # Other layouts and float16: convert the chosen rows a chunk at a time into
    # one float32 buffer (never a float32 copy of the whole matrix: an exact
    # scan of a float16 index would otherwise allocate twice its vectors).
    decode = _half_decoder(dim) if matrix.dtype == np.float16 else None
    width = min(rows.shape[0], CONVERT_ROWS)
    buffer = np.empty((width, dim), dtype=np.float32)
    positions = np.arange(width, dtype=np.int64)
    for start in range(0, rows.shape[0], CONVERT_ROWS):
        chosen = np.ascontiguousarray(matrix[rows[start : start + CONVERT_ROWS]])
        count = chosen.shape[0]
        if decode is not None:
            decode(pointer(chosen.view(np.uint8)), pointer(buffer), count)
        else:
            buffer[:count] = chosen
        by_index(pointer(out[start:]), pointer(query), pointer(buffer), pointer(positions), dim, 1, count)
    return out


#: Rows converted to float32 at a time on the converting path (6 MiB at 384 dims).
CONVERT_ROWS = 4096


@cache
def _half_decoder(dim: int) -> Callable[..., Any] | None:
    """The float16 -> float32 row decoder of faiss for width ``dim``, or ``None`` (numpy converts).

    The conversion is exact either way (every float16 is a float32; the tests
    compare every finite half); faiss's is about 2.3x numpy's.
    """
    import faiss

    try:
        quantizer = faiss.ScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16)
        decode: Callable[..., Any] = quantizer.decode_c  # type: ignore[attr-defined]  # raw SWIG binding
    except AttributeError:  # a faiss without the raw binding
        return None
    # The bound method keeps the quantizer alive.
    return decode
