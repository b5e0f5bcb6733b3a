"""Weighted Reciprocal Rank Fusion: RRF with one weight per stream, by position.

See :mod:`weftsearch.fusion.rrf` for the formula and the 1-based rank rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from weftsearch.engine.stream import FusedStream, KeyOrder, Stream
from weftsearch.errors import InvalidParameterError
from weftsearch.fusion._common import check_weights
from weftsearch.fusion.rrf import check_rrf_constant, reciprocal_rank_fusion

__all__ = ["WeightedRRF"]


class WeightedRRF:
    """RRF with one weight per stream, by position: ``w_i / (k + rank_i)``.

    A weight of 0 removes that stream entirely (its documents are not even
    candidates). Ranks are 1-based; scores are never read.
    """

    def __init__(self, weights: Sequence[float], k: float = 60.0) -> None:
        checked = check_weights(weights, "WeightedRRF")
        if checked is None:
            raise InvalidParameterError("WeightedRRF needs weights; use RRF for equal weights")
        self.weights = checked
        self.k = check_rrf_constant(k)

    @property
    def name(self) -> str:
        """``"weighted-rrf"``."""
        return "weighted-rrf"

    def __repr__(self) -> str:
        return f"WeightedRRF(weights={list(self.weights)}, k={self.k:g})"

    def fuse(self, streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
        """The best ``k`` documents by summed ``w_i / (self.k + rank_i)``."""
        return reciprocal_rank_fusion(streams, k, keys, c=self.k, weights=self.weights)
