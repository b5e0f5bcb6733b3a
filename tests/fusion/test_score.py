"""ScoreFusion: min-max and z-score, hand-computed, with the documented edge rules.

The rules (module docstring of weftsearch.fusion.score): each stream is
normalised over its own returned candidates; a constant stream gives 1 under
minmax and 0 under zscore; a document absent from a stream counts as that
stream's worst candidate (0 under minmax, the stream's minimum z under zscore,
0 for a constant stream); only documents in a stream of positive weight are
candidates.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from weftsearch import FusedStream, ScoreFusion, Stream
from weftsearch.errors import InvalidParameterError
from weftsearch.fusion.score import Normalisation


class IdOrder:
    """The trivial KeyOrder: keys compare like the ids."""

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.asarray(ids, dtype=np.int64)


class ReversedOrder:
    """A KeyOrder in which a larger id has a smaller key."""

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return -np.asarray(ids, dtype=np.int64)


KEYS = IdOrder()
SQRT_1_5 = math.sqrt(1.5)


def row_sums(fused: FusedStream) -> list[float]:
    sums = []
    for row in fused.contributions.tolist():
        total = 0.0
        for value in row:
            total += value
        sums.append(total)
    return sums


def by_id(fused: FusedStream) -> dict[int, tuple[float, list[float]]]:
    return {
        doc: (score, row)
        for doc, score, row in zip(
            fused.ids.tolist(), fused.scores.tolist(), fused.contributions.tolist(), strict=True
        )
    }


A = Stream([0, 1, 2], [10.0, 6.0, 2.0])
B = Stream([2, 3], [4.0, 1.0])


# ---------------------------------------------------------------------------- min-max


def test_minmax_hand_computed() -> None:
    # A -> 1, 0.5, 0 ; B -> 1, 0 ; absent -> 0.
    #   doc 0: 1 + 0 = 1   doc 2: 0 + 1 = 1   doc 1: 0.5   doc 3: 0 + 0 = 0
    fused = ScoreFusion().fuse([A, B], 10, KEYS)
    assert fused.ids.tolist() == [0, 2, 1, 3]  # 0 and 2 tie exactly; the key decides
    assert fused.scores.tolist() == [1.0, 1.0, 0.5, 0.0]
    assert fused.contributions.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.5, 0.0], [0.0, 0.0]]


def test_minmax_tie_follows_the_key_order() -> None:
    fused = ScoreFusion().fuse([A, B], 10, ReversedOrder())
    assert fused.ids.tolist() == [2, 0, 1, 3]


def test_minmax_with_weights_hand_computed() -> None:
    # Weights (2, 1): doc 0: 2, doc 1: 1, doc 2: 0 + 1 = 1, doc 3: 0.
    fused = ScoreFusion([2.0, 1.0]).fuse([A, B], 10, KEYS)
    assert fused.ids.tolist() == [0, 1, 2, 3]
    assert fused.scores.tolist() == [2.0, 1.0, 1.0, 0.0]
    assert fused.contributions.tolist() == [[2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]


def test_minmax_constant_stream_gives_one_to_each_of_its_candidates() -> None:
    constant = Stream([0, 1], [5.0, 5.0])
    single = Stream([2], [3.0])
    fused = ScoreFusion().fuse([constant, single], 10, KEYS)
    assert fused.ids.tolist() == [0, 1, 2]
    assert fused.contributions.tolist() == [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]


def test_minmax_absent_counts_as_the_streams_last() -> None:
    fused = by_id(ScoreFusion().fuse([A, B], 10, KEYS))
    # doc 3 is absent from A; doc 2 is A's last. Both get A's worst value, 0.
    assert fused[3][1][0] == fused[2][1][0] == 0.0


def test_minmax_ignores_scale_and_offset() -> None:
    scaled = [Stream(A.ids, A.scores * 1e9 - 7.0), Stream(B.ids, B.scores * 1e-9)]
    a = ScoreFusion().fuse([A, B], 10, KEYS)
    b = ScoreFusion().fuse(scaled, 10, KEYS)
    assert a.ids.tolist() == b.ids.tolist()
    np.testing.assert_allclose(b.scores, a.scores, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------- z-score


def test_zscore_hand_computed() -> None:
    # A: scores 3, 2, 1: mean 2, population std sqrt(2/3), z = +sqrt(1.5), 0, -sqrt(1.5);
    #    absent -> -sqrt(1.5) (A's minimum).
    # B: scores 4, 0: mean 2, std 2, z = +1, -1; absent -> -1.
    #   doc 0: sqrt(1.5) - 1 = 0.2247     doc 2: -sqrt(1.5) + 1 = -0.2247
    #   doc 1: 0 - 1        = -1          doc 3: -sqrt(1.5) - 1 = -2.2247
    a = Stream([0, 1, 2], [3.0, 2.0, 1.0])
    b = Stream([2, 3], [4.0, 0.0])
    fused = ScoreFusion(norm="zscore").fuse([a, b], 10, KEYS)
    assert fused.ids.tolist() == [0, 2, 1, 3]
    assert fused.scores.tolist() == pytest.approx(
        [SQRT_1_5 - 1, -SQRT_1_5 + 1, -1.0, -SQRT_1_5 - 1], rel=1e-12, abs=1e-15
    )
    expected = [[SQRT_1_5, -1.0], [-SQRT_1_5, 1.0], [0.0, -1.0], [-SQRT_1_5, -1.0]]
    for row, want in zip(fused.contributions.tolist(), expected, strict=True):
        assert row == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert row_sums(fused) == fused.scores.tolist()


def test_zscore_absent_gets_the_streams_minimum_z() -> None:
    a = Stream([0, 1, 2], [3.0, 2.0, 1.0])
    b = Stream([3], [1.0])
    fused = by_id(ScoreFusion(norm="zscore").fuse([a, b], 10, KEYS))
    # doc 3 is absent from A: exactly A's last candidate's value, never better.
    assert fused[3][1][0] == fused[2][1][0]
    assert fused[3][1][0] == pytest.approx(-SQRT_1_5, rel=1e-12)


def test_zscore_constant_stream_contributes_zero_to_everyone() -> None:
    a = Stream([0, 1, 2], [3.0, 2.0, 1.0])
    constant = Stream([1, 3], [7.0, 7.0])
    fused = ScoreFusion(norm="zscore").fuse([a, constant], 10, KEYS)
    assert fused.contributions[:, 1].tolist() == [0.0, 0.0, 0.0, 0.0]
    rows = by_id(fused)
    # doc 3 is only in the constant stream: A's minimum z plus nothing.
    assert rows[3][0] == pytest.approx(-SQRT_1_5, rel=1e-12)
    assert fused.ids.tolist() == [0, 1, 2, 3]  # doc 2 and doc 3 tie at -sqrt(1.5); key decides


def test_zscore_single_candidate_is_a_constant_stream() -> None:
    fused = ScoreFusion(norm="zscore").fuse([Stream([5], [42.0])], 10, KEYS)
    assert fused.ids.tolist() == [5]
    assert fused.scores.tolist() == [0.0]


def test_zscore_with_weights() -> None:
    a = Stream([0, 1, 2], [3.0, 2.0, 1.0])
    b = Stream([2, 3], [4.0, 0.0])
    fused = by_id(ScoreFusion([3.0, 0.5], norm="zscore").fuse([a, b], 10, KEYS))
    assert fused[0][1] == pytest.approx([3 * SQRT_1_5, -0.5], rel=1e-12)
    assert fused[3][1] == pytest.approx([-3 * SQRT_1_5, -0.5], rel=1e-12)


def test_zscore_ignores_scale_and_offset() -> None:
    a = Stream([0, 1, 2], [3.0, 2.0, 1.0])
    b = Stream([2, 3], [4.0, 0.0])
    base = ScoreFusion(norm="zscore").fuse([a, b], 10, KEYS)
    scaled = ScoreFusion(norm="zscore").fuse(
        [Stream(a.ids, a.scores * 1e6 + 3.0), Stream(b.ids, b.scores * 1e-6)], 10, KEYS
    )
    assert base.ids.tolist() == scaled.ids.tolist()
    np.testing.assert_allclose(scaled.scores, base.scores, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------- candidates and weights


def test_normalisation_is_per_stream_and_independent_of_k() -> None:
    full = ScoreFusion().fuse([A, B], 10, KEYS)
    for k in range(1, 5):
        head = ScoreFusion().fuse([A, B], k, KEYS)
        assert head.ids.tolist() == full.ids.tolist()[:k]
        assert head.scores.tolist() == full.scores.tolist()[:k]


@pytest.mark.parametrize("norm", ["minmax", "zscore"])
def test_a_zero_weight_removes_the_stream_entirely(norm: Normalisation) -> None:
    only_in_b = Stream([3, 4], [5.0, 4.0])
    fused = ScoreFusion([1.0, 0.0], norm=norm).fuse([A, only_in_b], 10, KEYS)
    assert fused.ids.tolist() == [0, 1, 2]
    assert fused.contributions[:, 1].tolist() == [0.0, 0.0, 0.0]
    alone = ScoreFusion(norm=norm).fuse([A], 10, KEYS)
    assert fused.scores.tolist() == alone.scores.tolist()


def test_contributions_sum_to_the_fused_score() -> None:
    streams = [A, B, Stream([3, 0, 5], [0.7, 0.2, -4.0])]
    norms: tuple[Normalisation, ...] = ("minmax", "zscore")
    for norm in norms:
        fused = ScoreFusion([0.3, 1.1, 2.0], norm=norm).fuse(streams, 10, KEYS)
        assert row_sums(fused) == fused.scores.tolist()


@pytest.mark.parametrize("weights", [[1.0], [1.0, 1.0, 1.0]])
def test_a_weight_count_mismatch_raises(weights: list[float]) -> None:
    with pytest.raises(InvalidParameterError, match="weights are positional"):
        ScoreFusion(weights).fuse([A, B], 10, KEYS)


@pytest.mark.parametrize("weights", [[-1.0, 1.0], [math.nan, 1.0], [0.0, 0.0], []])
def test_bad_weights_raise(weights: list[float]) -> None:
    with pytest.raises(InvalidParameterError):
        ScoreFusion(weights)


def test_an_unknown_normalisation_raises() -> None:
    with pytest.raises(InvalidParameterError, match="norm"):
        ScoreFusion(norm="l2")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_non_finite_scores_raise(bad: float) -> None:
    with pytest.raises(InvalidParameterError, match="stream 1"):
        ScoreFusion().fuse([A, Stream([1, 2], [bad, 0.0])], 10, KEYS)


def test_names_and_repr() -> None:
    assert ScoreFusion().name == "score-minmax"
    assert ScoreFusion(norm="zscore").name == "score-zscore"
    assert repr(ScoreFusion([1, 2], norm="zscore")) == "ScoreFusion(weights=[1.0, 2.0], norm='zscore')"


def test_empty_and_single_streams() -> None:
    assert len(ScoreFusion().fuse([], 3, KEYS)) == 0
    empty = ScoreFusion().fuse([Stream.empty(), Stream.empty()], 3, KEYS)
    assert len(empty) == 0 and empty.contributions.shape == (0, 2)
    one = ScoreFusion().fuse([Stream([9, 8, 7], [3.0, 2.0, 0.0])], 2, KEYS)
    assert one.ids.tolist() == [9, 8]
    assert one.scores.tolist() == [1.0, 2.0 / 3.0]
    mixed = ScoreFusion(norm="zscore").fuse([Stream.empty(), Stream([4, 6], [1.0, 0.0])], 5, KEYS)
    assert mixed.ids.tolist() == [4, 6]
    assert mixed.contributions[:, 0].tolist() == [0.0, 0.0]
