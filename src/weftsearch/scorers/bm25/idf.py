"""BM25's IDF, the same bits on every machine (see :mod:`weftsearch.scorers.bm25`, "The IDF").

Its own module so that the scorer and the kernel's layout
(:mod:`weftsearch.scorers.bm25.lists`, which keeps each term's IDF with its
descriptor rows) compute it one way.
"""

from __future__ import annotations

import decimal
import functools

import numpy as np
from numpy.typing import NDArray

__all__ = ["exact_idf", "lucene_idf"]

#: Digits :func:`exact_idf` works with: far beyond float64's 17, so rounding the result to float64
#: is a correct rounding except when ln lands within 1e-40 of a halfway point (never seen, and
#: even then the same on every machine, since :mod:`decimal` is exact software arithmetic).
_IDF_DIGITS = 40


#: numpy's long double where it carries at least 63 fraction bits (x86's 80-bit extended, or
#: IEEE quad): :func:`exact_idf` tries it first. ``None`` where it is float64 (then only decimal).
_WIDE: type[np.floating] | None = np.longdouble if np.finfo(np.longdouble).nmant >= 63 else None

#: Bound on the wide computation's absolute error, in units of its epsilon times ``1 + |ln|``:
#: the ratio's one rounding (an absolute error of at most one epsilon in ln), logl's (glibc's is
#: within 2 units of its last place) and the conversion, with room to spare.
_WIDE_MARGIN = 8


@functools.lru_cache(maxsize=1 << 16)
def exact_idf(n_docs: int, doc_freq: int) -> float:
    """``ln(1 + (N - df + 0.5) / (df + 0.5))`` = ``ln((2N + 2) / (2df + 1))``, rounded once to float64.

    Cached per process (an LRU cache of 65,536 pairs). First in long double
    (x86's 80-bit extended: about 3 µs): its value, rounded to float64, is the
    correctly rounded result whenever it lies farther from the float64
    halfway points around it than its error bound; otherwise, and where long
    double is no wider than float64, exactly in :mod:`decimal` (9-30 µs). So
    the bits are the decimal computation's on every machine; a commit changes
    N, and each term's first search on the new snapshot computes its IDF.
    """
    if _WIDE is not None:
        found = _wide_idf(_WIDE, n_docs, doc_freq)
        if found is not None:
            return found
    return _decimal_idf(n_docs, doc_freq)


def _wide_idf(wide: type[np.floating], n_docs: int, doc_freq: int) -> float | None:
    """:func:`exact_idf` in ``wide`` arithmetic, or ``None`` when too near a rounding boundary to tell."""
    if max(2 * n_docs + 2, 2 * doc_freq + 1) >= 1 << 63:
        return None  # past the integers long double holds exactly
    value = np.log(wide(2 * n_docs + 2) / wide(2 * doc_freq + 1))
    nearest = float(value)
    # The float64 neighbours' halfway points, exact in a type with 11 more fraction bits.
    low = (wide(nearest) + wide(np.nextafter(nearest, -np.inf))) / 2
    high = (wide(nearest) + wide(np.nextafter(nearest, np.inf))) / 2
    margin = _WIDE_MARGIN * np.finfo(wide).eps * (1 + abs(value))
    if value - low > margin and high - value > margin:
        return nearest
    return None


def _decimal_idf(n_docs: int, doc_freq: int) -> float:
    """:func:`exact_idf` in :mod:`decimal` at :data:`_IDF_DIGITS` digits (the reference)."""
    context = decimal.Context(prec=_IDF_DIGITS)
    ratio = context.divide(decimal.Decimal(2 * n_docs + 2), decimal.Decimal(2 * doc_freq + 1))
    return float(ratio.ln(context))


def lucene_idf(n_docs: int, doc_freq: NDArray[np.int64]) -> NDArray[np.float64]:
    """Lucene's BM25 IDF, ``ln(1 + (N - df + 0.5) / (df + 0.5))``, elementwise.

    Computed exactly and rounded once (see the module docstring), so the bits
    do not depend on the CPU, numpy's SIMD dispatch or the C library: the
    value is the correctly rounded float64 of the real number. Distinct
    document frequencies are computed once per process (an LRU cache of 65,536).
    """
    frequencies = np.asarray(doc_freq, dtype=np.int64)
    n = int(n_docs)
    # One cache look-up per term (~0.1 us), no np.unique: a query holds a handful of terms.
    values = frequencies.ravel().tolist()
    table = np.fromiter((exact_idf(n, df) for df in values), np.float64, len(values))
    return table.reshape(frequencies.shape)
