"""Score fusion: a weighted sum of per-stream normalised scores (CombSUM).

Fox & Shaw (1994), "Combination of multiple searches", TREC-2; the
normalisations follow Lee (1997), "Analyses of multiple evidence
combination", SIGIR.

Normalisation runs over **each stream's own returned candidates** (its top
``depth``), not over the whole collection, and each stream is normalised
independently:

* ``minmax``: ``(s - min) / (max - min)``; the stream's best candidate gets 1,
  its worst 0. A stream whose candidates all share one score gives them 1.
* ``zscore``: ``(s - mean) / std`` (population std). A stream whose candidates
  all share one score carries no ordering information and contributes 0.

A document absent from a stream is treated as that stream's worst candidate:
it contributes 0 under ``minmax`` and the stream's minimum z-score under
``zscore``, so absence is never better than being last. Only documents present
in at least one stream of positive weight are candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.stream import FusedStream, KeyOrder, Stream
from weftsearch.errors import InvalidParameterError
from weftsearch.fusion._common import check_weights, select, union, weights_for

__all__ = ["ScoreFusion", "normalise", "Normalisation"]

Normalisation = Literal["minmax", "zscore"]


def normalise(scores: NDArray[np.float64], method: Normalisation) -> tuple[NDArray[np.float64], float]:
    """Normalised scores of one stream, and the value an absent document gets."""
    if scores.size == 0:
        return scores.copy(), 0.0
    if method == "minmax":
        low, high = float(scores.min()), float(scores.max())
        if high == low:
            return np.ones_like(scores), 0.0
        return (scores - low) / (high - low), 0.0
    std = float(scores.std())
    if std == 0.0 or not np.isfinite(std):
        return np.zeros_like(scores), 0.0
    z = (scores - scores.mean()) / std
    return z, float(z.min())


class ScoreFusion:
    """Weighted sum of normalised scores (see the module docstring for the rules).

    Args:
        weights: one weight per stream, positional (``None``: all 1). Weight 0
            removes a stream entirely.
        norm: ``"minmax"`` (default) or ``"zscore"``.

    Streams with infinite scores cannot be normalised and raise
    :class:`~weftsearch.errors.InvalidParameterError`.

    """

    def __init__(self, weights: Sequence[float] | None = None, norm: Normalisation = "minmax") -> None:
        if norm not in ("minmax", "zscore"):
            raise InvalidParameterError(f"norm must be 'minmax' or 'zscore', got {norm!r}")
        self.weights = check_weights(weights, "ScoreFusion")
        self.norm: Normalisation = norm

    @property
    def name(self) -> str:
        """``"score-minmax"`` or ``"score-zscore"``."""
        return f"score-{self.norm}"

    def __repr__(self) -> str:
        weights = None if self.weights is None else list(self.weights)
        return f"ScoreFusion(weights={weights}, norm={self.norm!r})"

    def fuse(self, streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
        """The best ``k`` documents by weighted sum of normalised scores."""
        weight = weights_for(self.weights, streams, "ScoreFusion")
        candidates, rows = union(streams, weight)
        contributions = np.zeros((candidates.shape[0], len(streams)), dtype=np.float64)
        for column, (stream, row) in enumerate(zip(streams, rows, strict=False)):
            if weight[column] == 0 or len(stream) == 0:
                continue
            if not np.all(np.isfinite(stream.scores)):
                raise InvalidParameterError(f"ScoreFusion: stream {column} has infinite scores")
            values, absent = normalise(stream.scores, self.norm)
            contributions[:, column] = weight[column] * absent
            contributions[row, column] = weight[column] * values
        return select(candidates, contributions, k, keys)
