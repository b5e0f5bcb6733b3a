"""The vector scan's kernels: inner products of one vector with chosen rows of a matrix, row by row.

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

:class:`ScanKernel` is the vector scorer's whole per-segment step (rank the
IVF lists, score the probed rows, divide by the norms, keep the k best and
their ties) in one call into ``_scan.c``, a C library loaded with ctypes
that calls the very faiss function ``fvec_inner_products_by_idx`` calls per
row. Why: the arithmetic of a small probe takes microseconds, and the numpy
version of the same step was about 25 numpy calls of 1-3 us each around it.
The compiled scan is optional (built where a C compiler is, turned off by
:data:`DISABLE_VARIABLE`, see :mod:`weftsearch.native`); the numpy path gives the
same results to the bit. Everything here is over arrays: the vector scorer
decides which blocks, rows and lists a query reads.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import CorruptIndexError, InvalidParameterError
from weftsearch.native.loader import SCAN_SWITCH, Scratch, load_library

__all__ = ["RowKernel", "ScanKernel", "inner_products", "compiled_scan_available"]


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


# --- The compiled scan ------------------------------------------------------------------------

#: faiss's dispatching ``float fvec_inner_product(const float*, const float*, size_t)``: the
#: function ``fvec_inner_products_by_idx`` calls for each row (Itanium C++ mangling).
_FAISS_DOT_SYMBOL = "_ZN5faiss18fvec_inner_productEPKfS1_m"

#: Set to ``1`` to turn the compiled scan off (the numpy path computes the same bits).
DISABLE_VARIABLE = SCAN_SWITCH

_POINTER = ctypes.c_void_p
_INT = ctypes.c_int64

#: ``weft_probe_scan``'s error returns (``_scan.c``): out of memory, and arguments no block has.
_NO_MEMORY = -1
_BAD_ARGUMENT = -2


def _faiss_dot_address() -> int | None:
    """The address of faiss's row kernel in the faiss library this process loaded, or ``None``."""
    import faiss

    folder = Path(faiss.__file__).resolve().parent
    libraries = sorted(folder.glob("libfaiss*.so*")) + sorted(folder.glob("_swigfaiss*.so"))
    for library in libraries:
        try:
            function = ctypes.CDLL(str(library))[_FAISS_DOT_SYMBOL]
        except (OSError, AttributeError):
            continue
        address = ctypes.cast(function, ctypes.c_void_p).value
        if address:
            return int(address)
    return None


@cache
def _compiled_scan() -> tuple[Callable[..., int], int] | None:
    """The compiled scan and faiss's kernel address, or ``None`` (the numpy path is used).

    ``None`` when turned off (:data:`DISABLE_VARIABLE`), when the library was
    not built (no C compiler at install time), when this faiss does not export
    its row kernel, or when a self-check finds the compiled scan's scores
    differ in any bit from :func:`inner_products` divided by the norms (see
    :func:`~weftsearch.native.loader.load_library`).
    """
    return load_library("_scan", _bind_scan, _agrees_with_numpy)


def _bind_scan(library: ctypes.CDLL) -> tuple[Callable[..., int], int] | None:
    """``weft_probe_scan`` with its argument types, and faiss's row kernel address (``None``: no kernel)."""
    function = library.weft_probe_scan
    dot = _faiss_dot_address()
    if dot is None:
        return None
    # dot, query, dim, matrix, half, rows, divisors, ids, centroids, offsets,
    # nlist, nprobe, k, ids_out, scores_out, out_capacity (see _scan.c).
    function.argtypes = [_POINTER, _POINTER, _INT, _POINTER, _INT, _INT, _POINTER, _POINTER]
    function.argtypes += [_POINTER, _POINTER, _INT, _INT, _INT, _POINTER, _POINTER, _INT]
    function.restype = _INT
    return function, dot


@cache
def _compiled_rows_scan() -> Callable[..., int] | None:
    """``weft_rows_scan`` (the scan over chosen rows), or ``None`` (the numpy path serves chosen rows).

    Available only where :func:`_compiled_scan` is, and only if its own
    self-check agrees to the bit with :func:`inner_products` divided by the
    norms on every row of a sample, chosen rows in order.
    """
    compiled = _compiled_scan()
    if compiled is None:
        return None
    return load_library(
        "_scan", _bind_rows_scan, lambda rows_scan: _rows_agree_with_numpy(compiled, rows_scan)
    )


def _bind_rows_scan(library: ctypes.CDLL) -> Callable[..., int]:
    """``weft_rows_scan`` with its argument types (``AttributeError``: a library built before it existed)."""
    function = library.weft_rows_scan
    # dot, query, dim, matrix, half, row_count, norms, ids, rows, row_total, k, ids_out,
    # scores_out, out_capacity (see _scan.c).
    function.argtypes = [_POINTER, _POINTER, _INT, _POINTER, _INT, _INT, _POINTER, _POINTER]
    function.argtypes += [_POINTER, _INT, _INT, _POINTER, _POINTER, _INT]
    function.restype = _INT
    return function


def _rows_agree_with_numpy(compiled: tuple[Callable[..., int], int], rows_scan: Callable[..., int]) -> bool:
    rng = np.random.default_rng(1)
    for dim, dtype in itertools.product((1, 3, 16, 33, 384), (np.float32, np.float16)):
        matrix = rng.standard_normal((50, dim)).astype(dtype)
        wide = matrix.astype(np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", wide, wide, dtype=np.float32))
        ids = np.arange(50, dtype=np.int64)
        chosen = np.flatnonzero(rng.random(50) < 0.5).astype(np.int64)
        query = rng.standard_normal(dim).astype(np.float32)
        norm = np.sqrt(query.dot(query))
        kernel = ScanKernel(matrix, norms, ids, None, None, compiled, rows_scan)
        got_ids, got = kernel.rows(query, norm, chosen, 50)
        expected = inner_products(matrix, query / norm, chosen) / norms[chosen]
        order = np.lexsort((chosen, -expected.astype(np.float64)))  # score desc, then id (ids are rows)
        if got_ids.tolist() != chosen[order].tolist():
            return False
        if got.tobytes() != expected[order].astype(np.float64).tobytes():
            return False
    return True


def _agrees_with_numpy(compiled: tuple[Callable[..., int], int]) -> bool:
    rng = np.random.default_rng(0)
    for dim, dtype in itertools.product((1, 3, 16, 33, 384), (np.float32, np.float16)):
        matrix = rng.standard_normal((50, dim)).astype(dtype)
        wide = matrix.astype(np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", wide, wide, dtype=np.float32))
        ids = np.arange(50, dtype=np.int64)
        query = rng.standard_normal(dim).astype(np.float32)
        norm = np.sqrt(query.dot(query))
        kernel = ScanKernel(matrix, norms, ids, None, None, compiled)
        got_ids, got = kernel(query, norm, 0, 50)
        query = query / norm
        expected = inner_products(matrix, query, ids) / norms
        if got.astype(np.float32)[np.argsort(got_ids)].tobytes() != expected.tobytes():
            return False
    return True


def compiled_scan_available() -> bool:
    """Whether the vector scorer's scan runs compiled (``False``: the numpy path, same results)."""
    return _compiled_scan() is not None


_scratch = Scratch()


class ScanKernel:
    """One vector block's probe, score and select in a single compiled call (``_scan.c``).

    For one query it ranks the block's IVF lists (or takes every row), scores
    the usable rows of the probed lists (id >= 0, divisor > 0) as the inner
    product with ``vector / norm`` divided by the row's divisor, and keeps
    the ``k`` best and every tie with the ``k``-th, sorted by score (descending)
    then internal id. Scores are bit for bit those of :func:`inner_products`
    divided by the divisors in numpy (the same faiss kernel computes each row;
    :func:`_compiled_scan` checks it on load), and the list and tie rules are
    the numpy path's, so which path runs never changes a result.

    The metric stays the caller's: the vector scorer passes the row norms as
    divisors and the query's norm, which makes the score a cosine; the
    kernel only multiplies, divides and selects.

    Use :meth:`for_block`, which returns ``None`` where the compiled scan
    cannot serve (not built, turned off, or arrays in another layout, such as
    a strided view). Thread-safe: each thread writes its own buffers, and
    the call releases the GIL. A float16 matrix is read as it is stored:
    each probed row is widened (exactly; F16C where the CPU has it) just
    before its dot product, never the whole matrix. The arrays must outlive
    the kernel (it holds references).
    """

    __slots__ = ("_arrays", "_block", "_call", "_dim", "_dot", "_has_lists", "_nlist", "_rows", "_rows_call")

    def __init__(
        self,
        matrix: NDArray[np.floating],
        divisors: NDArray[np.float32],
        ids: NDArray[np.int64],
        centroids: NDArray[np.float32] | None,
        offsets: NDArray[np.uint64] | None,
        compiled: tuple[Callable[..., int], int],
        rows_scan: Callable[..., int] | None = None,
    ) -> None:
        self._call, self._dot = compiled
        self._rows_call = rows_scan
        self._arrays = (matrix, divisors, ids, centroids, offsets)
        self._dim = int(matrix.shape[1])
        self._has_lists = centroids is not None
        self._rows = int(matrix.shape[0])
        self._nlist = 0 if centroids is None else int(centroids.shape[0])
        # The block's arguments after the query, in _scan.c's order, addresses taken once.
        self._block = (
            self._dim,
            matrix.ctypes.data,
            int(matrix.dtype == np.float16),
            int(matrix.shape[0]),
            divisors.ctypes.data,
            ids.ctypes.data,
            None if centroids is None else centroids.ctypes.data,
            None if offsets is None else offsets.ctypes.data,
            0 if centroids is None else int(centroids.shape[0]),
        )

    @classmethod
    def for_block(
        cls,
        matrix: NDArray[np.floating],
        divisors: NDArray[np.float32],
        ids: NDArray[np.int64],
        centroids: NDArray[np.float32] | None,
        offsets: NDArray[np.uint64] | None,
    ) -> ScanKernel | None:
        """A kernel for these arrays, or ``None`` when the numpy path must serve them.

        The compiled scan reads float32 or float16 C-order matrices (rows x
        dim; centroids float32, nlist x dim), float32 divisors, int64 ids and
        uint64 list offsets, all contiguous; anything else goes to the numpy
        path.
        """
        compiled = _compiled_scan()
        if compiled is None or matrix.ndim != 2 or matrix.shape[0] == 0:
            return None
        layouts = [
            (matrix, np.float16 if matrix.dtype == np.float16 else np.float32),
            (divisors, np.float32),
            (ids, np.int64),
            (centroids, np.float32),
            (offsets, np.uint64),
        ]
        for array, dtype in layouts:
            if array is not None and not (array.dtype == dtype and array.flags.c_contiguous):
                return None
        if divisors.shape[0] != matrix.shape[0] or ids.shape[0] != matrix.shape[0]:
            return None
        if centroids is not None and (
            offsets is None
            or centroids.shape[1] != matrix.shape[1]
            or offsets.shape[0] != centroids.shape[0] + 1
        ):
            return None
        if (
            offsets is not None
            and offsets.shape[0]
            and (bool(np.any(offsets[1:] < offsets[:-1])) or int(offsets[-1]) > matrix.shape[0])
        ):
            # Lists outside the matrix or overlapping: the C scan refuses them on every call.
            raise CorruptIndexError(
                f"vector block list offsets are not non-decreasing within its {matrix.shape[0]} rows"
            )
        return cls(matrix, divisors, ids, centroids, offsets, compiled, _compiled_rows_scan())

    @property
    def scans_rows(self) -> bool:
        """Whether :meth:`rows` runs compiled here (``False``: the caller's numpy path serves chosen rows)."""
        return self._rows_call is not None

    def rows(
        self, vector: NDArray[np.float32], norm: np.float32, rows: NDArray[np.int64], k: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """``(ids, scores)`` of the ``k`` best chosen ``rows`` and their ties, best first (ties: lower id).

        The scan of :meth:`__call__` over exactly ``rows`` (strictly ascending
        row numbers of the block: a filter's matching rows, or the matching
        rows of the lists probed): each row scored with the same kernel and
        division, selected by the same rules, so a row's score is the same
        bits whichever call reads it. Unusable rows (id < 0, norm 0) are
        skipped. O(len(rows) * dim + log k per candidate that beats the
        running k-th).

        Raises:
            InvalidParameterError: ``k`` is not a positive int, the query not of
                the block's width, or ``rows`` not strictly ascending int64 rows
                of the block; or this kernel has no compiled row scan
                (:attr:`scans_rows` is ``False``).
            MemoryError: the library could not allocate its working memory.

        """
        k = _count(k, "k", 1)
        if self._rows_call is None:
            raise InvalidParameterError("this kernel has no compiled row scan (see ScanKernel.scans_rows)")
        if vector.shape != (self._dim,):
            raise InvalidParameterError(
                f"query vector has shape {vector.shape}; the block holds width {self._dim}"
            )
        if rows.dtype != np.int64 or rows.ndim != 1 or not rows.flags.c_contiguous:
            rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
        total = int(rows.shape[0])
        k = min(k, max(total, 1))
        scratch = _scratch
        np.divide(vector, norm, out=scratch.query_of_width(self._dim))
        dim, matrix, half, row_count, divisors, ids = self._block[:6]
        while True:
            kept = self._rows_call(
                self._dot,
                scratch.query_address,
                dim,
                matrix,
                half,
                row_count,
                divisors,
                ids,
                rows.ctypes.data,
                total,
                k,
                scratch.ids_address,
                scratch.scores_address,
                scratch.capacity,
            )
            if kept == _BAD_ARGUMENT:
                raise InvalidParameterError(
                    f"rows must be strictly ascending rows of the block's {row_count}, got {total} rows"
                )
            if kept < 0:
                raise MemoryError("the vector scan could not allocate its working memory")
            if kept <= scratch.capacity:
                break
            scratch.reserve(kept)
        return scratch.ids[:kept].copy(), scratch.scores[:kept].copy()

    def __call__(
        self, vector: NDArray[np.float32], norm: np.float32, nprobe: int, k: int, first: int | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """``(ids, scores)`` of the ``k`` best usable rows and their ties, best first (ties: lower id).

        The unit query is ``vector / norm`` (float32, as numpy divides);
        ``nprobe`` lists are probed (``0``, or a block without lists: every
        row is scanned; the caller decides, with
        :meth:`~weftsearch.engine.snapshot.VectorBlock.lists_to_probe`). Scores are float64
        copies of the float32 cosines. ``first``: return only the first
        ``first`` of them. O(nlist * dim + scanned * dim + log k per
        candidate that beats the running k-th).

        ``k`` may be any positive int: it is clamped here to the rows that
        exist (and ``nprobe`` to the lists), before it reaches C, whose
        arguments are 64-bit (a larger int would wrap) and whose memory is
        sized by the clamped values.

        Raises:
            InvalidParameterError: ``k`` is not a positive int, ``nprobe`` not a
                non-negative int, ``first`` negative, or the query not of the block's width.
            CorruptIndexError: the library refused the block's own arrays.
            MemoryError: the library could not allocate its working memory.

        """
        k = _count(k, "k", 1)
        nprobe = _count(nprobe, "nprobe", 0)
        if first is not None:
            first = _count(first, "first", 0)
        if vector.shape != (self._dim,):
            raise InvalidParameterError(
                f"query vector has shape {vector.shape}; the block holds width {self._dim}"
            )
        rows, nlist = self._rows, self._nlist
        k = min(k, max(rows, 1))  # the candidates that exist (a larger k keeps the same rows)
        nprobe = min(nprobe, nlist)
        scratch = _scratch
        np.divide(vector, norm, out=scratch.query_of_width(self._dim))
        if not self._has_lists:
            nprobe = 0
        while True:
            kept = self._call(
                self._dot,
                scratch.query_address,
                *self._block,
                nprobe,
                k,
                scratch.ids_address,
                scratch.scores_address,
                scratch.capacity,
            )
            if kept == _BAD_ARGUMENT:  # the arguments were checked above: the block's arrays are at fault
                raise CorruptIndexError(f"the vector scan refused a block of {rows} rows and {nlist} lists")
            if kept < 0:
                raise MemoryError("the vector scan could not allocate its working memory")
            if kept <= scratch.capacity:
                break
            scratch.reserve(kept)  # more ties than room: scan again (the same result, now written)
        count = kept if first is None else min(kept, first)
        return scratch.ids[:count].copy(), scratch.scores[:count].copy()


def _count(value: int, what: str, least: int) -> int:
    """``value`` as a Python int if it is an int (not a bool) of at least ``least``.

    Raises:
        InvalidParameterError: it is not.

    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise InvalidParameterError(f"{what} must be an integer of at least {least}, got {value!r}")
    return int(value)
