"""Helpers shared by the fusers: weight checks, candidate union, final selection."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.stream import FusedStream, KeyOrder, Stream, check_k, top_k
from weftsearch.errors import InvalidParameterError

__all__ = ["check_weights", "weights_for", "union", "select"]


def check_weights(weights: Sequence[float] | None, what: str) -> tuple[float, ...] | None:
    """Validate weights (finite, >= 0, not all 0); ``None`` means equal weights."""
    if weights is None:
        return None
    try:
        values = tuple(weights)
    except TypeError:
        raise InvalidParameterError(f"{what}: weights must be numbers, got {weights!r}") from None
    for weight in values:
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not math.isfinite(weight)
            or weight < 0
        ):
            raise InvalidParameterError(f"{what}: weights must be finite numbers >= 0, got {weight!r}")
    if not values or not any(values):
        raise InvalidParameterError(f"{what}: at least one weight must be positive, got {values}")
    return tuple(float(w) for w in values)


def weights_for(
    weights: tuple[float, ...] | None, streams: Sequence[Stream], what: str
) -> NDArray[np.float64]:
    """The weight of each stream; positional weights must match the stream count."""
    if weights is None:
        return np.ones(len(streams), dtype=np.float64)
    if len(weights) != len(streams):
        raise InvalidParameterError(
            f"{what}: {len(weights)} weights given for {len(streams)} streams (weights are positional)"
        )
    return np.asarray(weights, dtype=np.float64)


def union(
    streams: Sequence[Stream], weights: NDArray[np.float64]
) -> tuple[NDArray[np.int64], list[NDArray[np.int64]]]:
    """Ids in any stream of positive weight (ascending), and each stream's rows in it.

    A stream of weight 0 contributes no candidates: it is removed entirely.
    """
    live = [stream.ids for stream, weight in zip(streams, weights, strict=False) if weight > 0]
    candidates = np.unique(np.concatenate(live)) if live else np.empty(0, np.int64)
    rows = [np.searchsorted(candidates, stream.ids) for stream in streams]
    return candidates.astype(np.int64), rows


def select(
    candidates: NDArray[np.int64], contributions: NDArray[np.float64], k: int, keys: KeyOrder
) -> FusedStream:
    """Sum contributions across streams (in stream order) and keep the best ``k``."""
    k = check_k(k)
    if candidates.size == 0:
        return FusedStream(candidates, np.empty(0), np.zeros((0, contributions.shape[1])))
    # Column by column, so every document's sum is formed in the same order
    # whatever the number of candidates.
    fused = np.zeros(candidates.shape[0], dtype=np.float64)
    for column in range(contributions.shape[1]):
        fused += contributions[:, column]
    ids, scores = top_k(candidates, fused, k, keys)
    rows = np.searchsorted(candidates, ids)
    return FusedStream(ids, scores, contributions[rows])
