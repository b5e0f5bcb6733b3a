"""WeightedRRF: positional weights, weight 0 removes a stream, weight checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from weftsearch import RRF, FusedStream, Stream, WeightedRRF
from weftsearch.errors import InvalidParameterError


class IdOrder:
    """The trivial KeyOrder: keys compare like the ids."""

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.asarray(ids, dtype=np.int64)


KEYS = IdOrder()


def row_sums(fused: FusedStream) -> list[float]:
    sums = []
    for row in fused.contributions.tolist():
        total = 0.0
        for value in row:
            total += value
        sums.append(total)
    return sums


A = Stream([0, 1, 2], [3.0, 2.0, 1.0])
B = Stream([2, 3], [9.0, 8.0])


def test_weights_hand_computed() -> None:
    # Weights (2, 0.5):
    #   doc 0: 2/61            = 0.032787
    #   doc 1: 2/62            = 0.032258
    #   doc 2: 2/63 + 0.5/61   = 0.031746 + 0.008197 = 0.039943
    #   doc 3: 0.5/62          = 0.008065
    fused = WeightedRRF([2.0, 0.5]).fuse([A, B], 10, KEYS)
    assert fused.ids.tolist() == [2, 0, 1, 3]
    assert fused.scores.tolist() == pytest.approx([2 / 63 + 0.5 / 61, 2 / 61, 2 / 62, 0.5 / 62], rel=1e-15)
    assert fused.contributions.tolist() == [[2 / 63, 0.5 / 61], [2 / 61, 0.0], [2 / 62, 0.0], [0.0, 0.5 / 62]]


def test_the_weights_are_positional() -> None:
    # Swapping the streams without swapping the weights changes the result.
    forward = WeightedRRF([2.0, 0.5]).fuse([A, B], 10, KEYS)
    swapped = WeightedRRF([2.0, 0.5]).fuse([B, A], 10, KEYS)
    assert forward.ids.tolist() != swapped.ids.tolist()
    assert swapped.ids.tolist() == [2, 3, 0, 1]  # doc 2: 2/61 + 0.5/63, doc 3: 2/62


def test_contributions_sum_to_the_fused_score() -> None:
    fused = WeightedRRF([0.3, 1.7, 2.9]).fuse([A, B, Stream([3, 1, 0], [1.0, 1.0, 1.0])], 10, KEYS)
    assert row_sums(fused) == fused.scores.tolist()


def test_the_constant_is_configurable() -> None:
    fused = WeightedRRF([1.0, 3.0], k=0).fuse([A, B], 10, KEYS)
    # doc 2: 1/3 + 3/1 = 3.333; doc 3: 3/2 = 1.5; doc 0: 1; doc 1: 1/2.
    assert fused.ids.tolist() == [2, 3, 0, 1]
    assert fused.scores.tolist() == pytest.approx([1 / 3 + 3, 1.5, 1.0, 0.5], rel=1e-15)


def test_equal_weights_are_plain_rrf() -> None:
    streams = [A, B, Stream([1, 3], [2.0, 1.0])]
    weighted = WeightedRRF([1, 1, 1]).fuse(streams, 10, KEYS)
    plain = RRF().fuse(streams, 10, KEYS)
    assert weighted.ids.tolist() == plain.ids.tolist()
    assert weighted.scores.tobytes() == plain.scores.tobytes()
    assert weighted.contributions.tobytes() == plain.contributions.tobytes()


def test_scaling_every_weight_scales_every_score() -> None:
    streams = [A, B]
    base = WeightedRRF([1.0, 3.0]).fuse(streams, 10, KEYS)
    doubled = WeightedRRF([2.0, 6.0]).fuse(streams, 10, KEYS)
    assert doubled.ids.tolist() == base.ids.tolist()
    assert doubled.scores.tolist() == (base.scores * 2).tolist()  # a power of two is exact


# ---------------------------------------------------------------------------- weight 0


def test_a_zero_weight_removes_the_stream_entirely() -> None:
    only_in_b = Stream([3, 4], [5.0, 4.0])
    fused = WeightedRRF([1.0, 0.0]).fuse([A, only_in_b], 10, KEYS)
    # Documents 3 and 4 appear only in the zero-weight stream: not candidates at all.
    assert fused.ids.tolist() == [0, 1, 2]
    assert fused.contributions.shape == (3, 2)
    assert fused.contributions[:, 1].tolist() == [0.0, 0.0, 0.0]
    # The same as fusing without that stream.
    alone = WeightedRRF([1.0]).fuse([A], 10, KEYS)
    assert fused.ids.tolist() == alone.ids.tolist()
    assert fused.scores.tolist() == alone.scores.tolist()


def test_a_zero_weight_stream_adds_nothing_to_shared_documents() -> None:
    fused = WeightedRRF([0.0, 1.0]).fuse([A, B], 10, KEYS)
    assert fused.ids.tolist() == [2, 3]
    assert fused.scores.tolist() == [1 / 61, 1 / 62]
    assert fused.contributions.tolist() == [[0.0, 1 / 61], [0.0, 1 / 62]]


def test_a_zero_weight_leaves_the_other_streams_ranks_alone() -> None:
    # The removed stream must not shift anyone's rank in the live streams.
    zero_first = WeightedRRF([0.0, 1.0, 1.0]).fuse([B, A, Stream([1], [1.0])], 10, KEYS)
    without = RRF().fuse([A, Stream([1], [1.0])], 10, KEYS)
    assert zero_first.ids.tolist() == without.ids.tolist()
    assert zero_first.scores.tolist() == without.scores.tolist()


# ---------------------------------------------------------------------------- checks


@pytest.mark.parametrize("weights", [[1.0], [1.0, 1.0, 1.0], []])
def test_a_weight_count_mismatch_raises(weights: list[float]) -> None:
    if not weights:
        with pytest.raises(InvalidParameterError):
            WeightedRRF(weights)
        return
    fuser = WeightedRRF(weights)
    with pytest.raises(InvalidParameterError, match="weights are positional"):
        fuser.fuse([A, B], 10, KEYS)


@pytest.mark.parametrize(
    "weights", [[-1.0, 1.0], [math.nan, 1.0], [math.inf, 1.0], [0.0, 0.0], [True, 1.0], ["1", 1.0]]
)
def test_bad_weights_raise_at_construction(weights: list[object]) -> None:
    with pytest.raises(InvalidParameterError):
        WeightedRRF(weights)  # type: ignore[arg-type]


def test_weights_are_required() -> None:
    with pytest.raises(InvalidParameterError, match="needs weights"):
        WeightedRRF(None)  # type: ignore[arg-type]


def test_a_bad_constant_raises() -> None:
    with pytest.raises(InvalidParameterError):
        WeightedRRF([1.0], k=-1)


def test_integer_weights_are_accepted_and_stored_as_floats() -> None:
    fuser = WeightedRRF([1, 2])
    assert fuser.weights == (1.0, 2.0)
    assert all(isinstance(w, float) for w in fuser.weights)


def test_name_and_repr() -> None:
    fuser = WeightedRRF([2.0, 0.5], k=10)
    assert fuser.name == "weighted-rrf"
    assert repr(fuser) == "WeightedRRF(weights=[2.0, 0.5], k=10)"


def test_empty_and_single_streams() -> None:
    assert len(WeightedRRF([1.0, 1.0]).fuse([Stream.empty(), Stream.empty()], 3, KEYS)) == 0
    one = WeightedRRF([4.0]).fuse([Stream([9, 8], [1.0, 0.0])], 3, KEYS)
    assert one.ids.tolist() == [9, 8]
    assert one.scores.tolist() == [4 / 61, 4 / 62]
