"""Paired significance tests over queries: the bootstrap and Fisher's randomisation test.

Both take two systems' per-query values keyed by query id (for example
:meth:`~weftsearch.eval.metrics.Evaluation.per_query`), refuse inputs over
different query sets, and work on the per-query differences ``a - b`` in
sorted qid order, so the mapping's order never changes a result. Randomness
comes only from ``np.random.Generator(np.random.PCG64(seed))``: the same
inputs and seed give the same numbers on every run and platform.

References:
    Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13 and
    16 (percentile interval; the shifted-null significance level).
    Smucker, Allan & Carterette (2007), "A Comparison of Statistical
    Significance Tests for Information Retrieval Evaluation", CIKM (the paired
    randomisation test as IR uses it; ranx and trectools report the same
    ``count / permutations`` estimate).

"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import InvalidParameterError

__all__ = [
    "BootstrapResult",
    "RandomisationResult",
    "paired_bootstrap",
    "fisher_randomisation",
    "fisher_randomisation_exact",
]

#: Elements per block of resampled indices or signs: bounds memory at about 32 MiB per block.
_BLOCK_ELEMENTS = 1 << 22

#: Relative slack when comparing a resampled statistic with the observed one, so that
#: values equal in exact arithmetic but summed in another order count as equal.
_TOLERANCE = 1e-10

#: Largest query count :func:`fisher_randomisation_exact` enumerates (2**24 sign vectors).
_MAX_EXACT_QUERIES = 24


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """The outcome of :func:`paired_bootstrap`.

    Attributes:
        mean_difference: ``mean(a) - mean(b)`` over the shared queries.
        low: lower end of the percentile interval of the mean difference.
        high: upper end.
        p_value: two-sided achieved significance level: the fraction of
            resampled mean differences, shifted to mean zero (the null), at
            least as far from zero as the observed one. 0 means below
            ``1 / resamples``.
        confidence: the interval's nominal coverage (0.95 for 95%).
        resamples: number of bootstrap resamples.
        seed: the PCG64 seed.
        queries: number of paired queries.

    """

    mean_difference: float
    low: float
    high: float
    p_value: float
    confidence: float
    resamples: int
    seed: int
    queries: int

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies strictly on one side of zero."""
        return self.low > 0.0 or self.high < 0.0


@dataclass(frozen=True, slots=True)
class RandomisationResult:
    """The outcome of :func:`fisher_randomisation` or :func:`fisher_randomisation_exact`.

    Attributes:
        mean_difference: ``mean(a) - mean(b)`` over the shared queries.
        p_value: two-sided: the fraction of sign assignments whose mean
            difference is at least as large in absolute value as the observed.
        permutations: sign assignments examined (``2 ** queries`` when exact).
        exact: whether every assignment was enumerated.
        seed: the PCG64 seed; ``None`` when exact.
        queries: number of paired queries.

    """

    mean_difference: float
    p_value: float
    permutations: int
    exact: bool
    seed: int | None
    queries: int


def paired_bootstrap(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    resamples: int = 10_000,
    seed: int,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Paired bootstrap over queries of the mean difference ``a - b``.

    Each resample draws ``n`` queries with replacement (one row of a
    ``resamples x n`` index matrix, drawn in blocks to bound memory; the
    blocks consume the generator exactly as one matrix would) and takes the
    mean of their differences. The interval is by nearest-rank percentiles of
    the sorted resampled means: with ``t = (1 - confidence) / 2``, the lower
    end is the ``ceil(t * resamples)``-th smallest and the upper end the
    ``ceil((1 - t) * resamples)``-th smallest (ranks 250 and 9,750 of 10,000
    at 95%), computed in exact rational arithmetic.

    Args:
        a: per-query values of the first system, keyed by query id.
        b: per-query values of the second system, over the same query ids.
        resamples: number of bootstrap resamples, >= 1.
        seed: seed for ``np.random.PCG64``, an integer >= 0.
        confidence: nominal coverage of the interval, in (0, 1).

    Raises:
        InvalidParameterError: the query sets differ (the message names the
            qids missing on each side), there is no query, a value is not a
            finite real number, or a parameter is out of range.

    Complexity: O(resamples * n) time, O(min(resamples * n, 2**22) + resamples) memory.

    """
    resamples = _positive_int(resamples, "resamples")
    seed = _seed(seed)
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise InvalidParameterError(f"confidence must be a number in (0, 1), got {confidence!r}")
    diffs = _paired_differences(a, b)
    n = diffs.shape[0]
    observed = float(diffs.mean())
    rng = np.random.Generator(np.random.PCG64(seed))
    means = np.empty(resamples, dtype=np.float64)
    block = max(1, _BLOCK_ELEMENTS // n)
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        rows = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = diffs[rows].mean(axis=1)
    ordered = np.sort(means)
    tail = (1 - Fraction(float(confidence)).limit_denominator(10**9)) / 2
    low = float(ordered[_nearest_rank(tail, resamples) - 1])
    high = float(ordered[_nearest_rank(1 - tail, resamples) - 1])
    slack = _TOLERANCE * float(np.abs(diffs).max())
    p_value = float(np.count_nonzero(np.abs(means - observed) >= abs(observed) - slack)) / resamples
    return BootstrapResult(observed, low, high, p_value, float(confidence), resamples, seed, n)


def fisher_randomisation(
    a: Mapping[str, float], b: Mapping[str, float], *, permutations: int = 10_000, seed: int
) -> RandomisationResult:
    """Fisher's paired randomisation test, two-sided, by Monte Carlo sampling.

    Under the null hypothesis the two systems are exchangeable on each query,
    so each difference keeps or flips its sign with probability 1/2. Draws
    ``permutations`` independent sign vectors (blocks of a
    ``permutations x n`` matrix) and reports the fraction whose absolute mean
    difference reaches the observed one: ``count / permutations``, the
    estimate ranx and trectools report (the observed assignment is not added).

    Args:
        a: per-query values of the first system, keyed by query id.
        b: per-query values of the second system, over the same query ids.
        permutations: number of random sign vectors, >= 1.
        seed: seed for ``np.random.PCG64``, an integer >= 0.

    Raises:
        InvalidParameterError: as for :func:`paired_bootstrap`.

    Complexity: O(permutations * n) time, O(min(permutations * n, 2**22)) memory.

    """
    permutations = _positive_int(permutations, "permutations")
    seed = _seed(seed)
    diffs = _paired_differences(a, b)
    n = diffs.shape[0]
    threshold = _threshold(diffs)
    rng = np.random.Generator(np.random.PCG64(seed))
    count = 0
    block = max(1, _BLOCK_ELEMENTS // n)
    for start in range(0, permutations, block):
        # int64 draws (not int8) so that blocks consume the generator exactly as one matrix would.
        flips = rng.integers(0, 2, size=(min(block, permutations - start), n)) == 1
        count += _count_extreme(diffs, flips, threshold)
    return RandomisationResult(float(diffs.mean()), count / permutations, permutations, False, seed, n)


def fisher_randomisation_exact(a: Mapping[str, float], b: Mapping[str, float]) -> RandomisationResult:
    """Fisher's paired randomisation test, two-sided, enumerating all ``2 ** n`` sign vectors.

    The exact p-value that :func:`fisher_randomisation` estimates. Practical
    for up to 24 queries (16.8 million assignments, a few seconds).

    Raises:
        InvalidParameterError: as for :func:`paired_bootstrap`, or more than 24 queries.

    """
    diffs = _paired_differences(a, b)
    n = diffs.shape[0]
    if n > _MAX_EXACT_QUERIES:
        raise InvalidParameterError(
            f"exact enumeration covers at most {_MAX_EXACT_QUERIES} queries (2**{_MAX_EXACT_QUERIES} "
            f"assignments), got {n}; use fisher_randomisation"
        )
    threshold = _threshold(diffs)
    total = 1 << n
    bits = np.arange(n, dtype=np.int64)
    count = 0
    block = max(1, _BLOCK_ELEMENTS // n)
    for start in range(0, total, block):
        codes = np.arange(start, min(total, start + block), dtype=np.int64)
        flips = ((codes[:, None] >> bits) & 1).astype(bool)
        count += _count_extreme(diffs, flips, threshold)
    return RandomisationResult(float(diffs.mean()), count / total, total, True, None, n)


def _count_extreme(diffs: NDArray[np.float64], flips: NDArray[np.bool_], threshold: float) -> int:
    """How many rows of ``flips`` (True = swap the pair) reach ``threshold`` in |mean difference|."""
    means = np.where(flips, -diffs, diffs).mean(axis=1)
    return int(np.count_nonzero(np.abs(means) >= threshold))


def _threshold(diffs: NDArray[np.float64]) -> float:
    """The observed |mean difference|, less the rounding slack."""
    return abs(float(diffs.mean())) - _TOLERANCE * float(np.abs(diffs).max())


def _nearest_rank(p: Fraction, count: int) -> int:
    """1-based nearest rank of the ``p``-quantile among ``count`` sorted values."""
    return min(count, max(1, math.ceil(p * count)))


def _positive_int(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InvalidParameterError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def _seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidParameterError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


def _paired_differences(a: Mapping[str, float], b: Mapping[str, float]) -> NDArray[np.float64]:
    """``a[q] - b[q]`` for every shared qid in sorted order, after checking the pairing."""
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    if only_a or only_b:
        raise InvalidParameterError(
            "the two systems were evaluated on different query sets: "
            f"{len(only_a)} qids missing from b {_listing(only_a)}, "
            f"{len(only_b)} qids missing from a {_listing(only_b)}"
        )
    if not a:
        raise InvalidParameterError("no queries to compare: both inputs are empty")
    qids = sorted(a)
    left = _values(a, qids, "a")
    right = _values(b, qids, "b")
    return left - right


def _values(values: Mapping[str, float], qids: list[str], side: str) -> NDArray[np.float64]:
    out = np.empty(len(qids), dtype=np.float64)
    for i, qid in enumerate(qids):
        value = values[qid]
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise InvalidParameterError(
                f"per-query values must be finite numbers, got {value!r} for {qid!r} in {side}"
            )
        out[i] = value
    return out


def _listing(qids: list[str], limit: int = 10) -> str:
    shown = ", ".join(repr(q) for q in qids[:limit])
    more = f", ... ({len(qids) - limit} more)" if len(qids) > limit else ""
    return f"[{shown}{more}]"
