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


@functools.lru_cache(maxsize=1 << 16)
def exact_idf(n_docs: int, doc_freq: int) -> float:
    """``ln(1 + (N - df + 0.5) / (df + 0.5))`` = ``ln((2N + 2) / (2df + 1))``, rounded once to float64.

    Cached per process (an LRU cache of 65,536 pairs).
    """
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
