"""The shared selection: at_least_kth and top_k against a brute-force reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from weftsearch.engine.stream import at_least_kth, order_by_score, top_k


class IdsAreKeys:
    """Key order equal to id order (one segment), as a snapshot gives it."""

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return ids


def reference_at_least_kth(scores: NDArray[np.floating], k: int) -> NDArray[np.intp]:
    if scores.shape[0] <= k:
        return np.arange(scores.shape[0])
    finite = np.sort(scores[~np.isnan(scores)])[::-1]
    if finite.shape[0] < k:
        return np.flatnonzero(~np.isnan(scores))
    return np.flatnonzero(scores >= finite[k - 1])


def scores_from(values: list[int], nan_at: list[int], dtype: type) -> NDArray[np.floating]:
    # Small integers make ties common; dividing keeps them exact in float32.
    scores: NDArray[np.floating] = (np.array(values, dtype=np.float64) / 8).astype(dtype)
    if nan_at:
        scores[np.array(nan_at) % scores.shape[0]] = np.nan
    return scores


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.integers(-20, 20), min_size=1, max_size=3000),
    k=st.integers(1, 40),
    nan_at=st.lists(st.integers(0, 10_000), max_size=3),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_at_least_kth_matches_the_reference(
    values: list[int], k: int, nan_at: list[int], dtype: type
) -> None:
    scores = scores_from(values, nan_at, dtype)
    found = at_least_kth(scores, k)
    assert found.tolist() == reference_at_least_kth(scores, k).tolist()


@pytest.mark.parametrize("n", [320, 321, 1000, 5000, 40_000])
@pytest.mark.parametrize("k", [1, 10, 100])
def test_at_least_kth_grouped_path_on_continuous_scores(n: int, k: int) -> None:
    rng = np.random.default_rng(n * 1000 + k)
    scores = rng.standard_normal(n).astype(np.float32)
    assert at_least_kth(scores, k).tolist() == reference_at_least_kth(scores, k).tolist()
    # The best scores all in one group: the bound must still let them through.
    scores[np.arange(0, n, 8 * k)[:k]] = 10.0
    assert at_least_kth(scores, k).tolist() == reference_at_least_kth(scores, k).tolist()


def test_at_least_kth_keeps_every_tie_and_drops_nan() -> None:
    scores = np.zeros(4000, dtype=np.float32)
    scores[17] = np.nan
    found = at_least_kth(scores, 10)
    assert found.shape[0] == 3999 and 17 not in found
    scores[::400] = 1.0  # ten clear winners
    assert at_least_kth(scores, 10).tolist() == list(range(0, 4000, 400))
    assert at_least_kth(np.full(5, np.nan), 10).tolist() == [0, 1, 2, 3, 4]  # n <= k keeps all
    assert at_least_kth(np.array([-np.inf] * 400 + [np.inf]), 1).tolist() == [400]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-5, 5), min_size=1, max_size=800), k=st.integers(1, 30))
def test_top_k_orders_by_score_then_key(values: list[int], k: int) -> None:
    rng = np.random.default_rng(len(values))
    ids = rng.permutation(len(values)).astype(np.int64)
    scores = np.array(values, dtype=np.float64)
    got_ids, got_scores = top_k(ids, scores, k, IdsAreKeys())
    expected = sorted(zip(values, ids.tolist(), strict=True), key=lambda pair: (-pair[0], pair[1]))[:k]
    assert got_ids.tolist() == [i for _, i in expected]
    assert got_scores.tolist() == [float(v) for v, _ in expected]


class ShuffledKeys:
    """Key order unrelated to id order (several segments), recording the ids it was asked to rank."""

    def __init__(self, n: int, seed: int) -> None:
        self.rank_of = np.random.default_rng(seed).permutation(n).astype(np.int64)
        self.asked: list[int] = []

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        self.asked.extend(ids.tolist())
        ranks: NDArray[np.int64] = self.rank_of[ids]
        return ranks


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.integers(-6, 6), min_size=0, max_size=300),
    nan_at=st.lists(st.integers(0, 10_000), max_size=2),
    zeros=st.booleans(),
)
def test_order_by_score_is_the_lexsort_and_reads_keys_only_for_ties(
    values: list[int], nan_at: list[int], zeros: bool
) -> None:
    n = len(values)
    scores = np.array(values, dtype=np.float64) / 4
    if zeros and n:
        scores[scores == 0.0] = -0.0  # -0.0 ties with 0.0
    if nan_at and n:
        scores[np.array(nan_at) % n] = np.nan
    ids = np.random.default_rng(n).permutation(max(n, 1))[:n].astype(np.int64)
    keys = ShuffledKeys(max(n, 1), n + 3)
    got = order_by_score(ids, scores, keys)
    want = np.lexsort((keys.rank_of[ids], -scores))
    assert got.tolist() == want.tolist()
    if n > 1 and not np.isnan(scores).any():
        # Keys were read for documents sharing a score with another one, and no others.
        shared = {int(i) for i, s in zip(ids, scores, strict=True) if np.count_nonzero(scores == s) > 1}
        assert set(keys.asked) == shared
