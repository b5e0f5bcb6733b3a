"""Reciprocal Rank Fusion.

Cormack, Clarke & Buettcher (2009), "Reciprocal Rank Fusion outperforms
Condorcet and individual Rank Learning Methods", SIGIR: ``score(d) = sum over
streams i of w_i / (c + rank_i(d))`` with ``c = 60``.

Ranks are **1-based** here (the best candidate of a stream has rank 1 and
contributes ``1 / 61``), as in the paper, trec_eval-style runs, ranx and
Elasticsearch; some libraries use 0-based ranks, which shifts every
contribution and can reorder close calls. Only ranks are read: scores never
influence RRF. A document absent from a stream gets nothing from it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.stream import FusedStream, KeyOrder, Stream
from weftsearch.errors import InvalidParameterError
from weftsearch.fusion._common import check_weights, select, union, weights_for

__all__ = ["RRF", "reciprocal_rank_fusion", "check_rrf_constant"]


def check_rrf_constant(c: float) -> float:
    """Return the RRF constant as a float if finite and >= 0, else raise."""
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0:
        raise InvalidParameterError(f"RRF k must be a finite number >= 0, got {c!r}")
    return float(c)


@functools.lru_cache(maxsize=256)
def _reciprocal_ranks(weight: float, c: float, n: int) -> NDArray[np.float64]:
    """``weight / (c + rank)`` for ranks 1 .. n, read-only and shared (the same few per workload).

    The expression a fusion would evaluate (float64 throughout), so the same
    bits; at most 256 (weight, c, n) triples are kept, each 8n bytes.
    """
    values = np.float64(weight) / (c + np.arange(1, n + 1, dtype=np.float64))
    values.setflags(write=False)
    return values


def reciprocal_rank_fusion(
    streams: Sequence[Stream], k: int, keys: KeyOrder, c: float = 60.0, weights: Sequence[float] | None = None
) -> FusedStream:
    """Fuse ``streams`` by weighted reciprocal rank; keep the best ``k``.

    Args:
        streams: ranked candidate lists, best first.
        k: number of fused candidates to keep.
        keys: key order for ties (a snapshot).
        c: the RRF constant (the paper's k), >= 0.
        weights: one weight per stream, positional; weight 0 removes a stream.

    Complexity: O(M log M) for M candidates in all streams together.

    """
    c = check_rrf_constant(c)
    weight = weights_for(check_weights(weights, "RRF"), streams, "RRF")
    candidates, rows = union(streams, weight)
    contributions = np.zeros((candidates.shape[0], len(streams)), dtype=np.float64)
    for column, (stream, row) in enumerate(zip(streams, rows, strict=False)):
        if weight[column] > 0 and len(stream):
            contributions[row, column] = _reciprocal_ranks(float(weight[column]), c, len(stream))
    return select(candidates, contributions, k, keys)


class RRF:
    """Reciprocal Rank Fusion with equal weights; ``k`` is the RRF constant (60).

    Ranks are 1-based; scores are never read.
    """

    def __init__(self, k: float = 60.0) -> None:
        self.k = check_rrf_constant(k)

    @property
    def name(self) -> str:
        """``"rrf"``."""
        return "rrf"

    def __repr__(self) -> str:
        return f"RRF(k={self.k:g})"

    def fuse(self, streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
        """The best ``k`` documents by summed ``1 / (self.k + rank)``."""
        return reciprocal_rank_fusion(streams, k, keys, c=self.k)
