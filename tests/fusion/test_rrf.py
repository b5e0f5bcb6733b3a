"""RRF: hand-computed fusion with 1-based ranks, ties by key, edge cases, make_fuser."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from weftsearch import RRF, Document, FusedStream, Index, ScoreFusion, Stream, WeightedRRF, make_fuser
from weftsearch.errors import InvalidParameterError, UnknownSignalError
from weftsearch.fusion import FUSION_METHODS, reciprocal_rank_fusion


class IdOrder:
    """The trivial KeyOrder: keys compare like the ids."""

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.asarray(ids, dtype=np.int64)


class ReversedOrder:
    """A KeyOrder in which a larger id has a smaller key."""

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return -np.asarray(ids, dtype=np.int64)


KEYS = IdOrder()


def row_sums(fused: FusedStream) -> list[float]:
    """Each row's contributions added left to right, as a person would."""
    sums = []
    for row in fused.contributions.tolist():
        total = 0.0
        for value in row:
            total += value
        sums.append(total)
    return sums


def as_lists(fused: FusedStream) -> tuple[list[int], list[float], list[list[float]]]:
    return fused.ids.tolist(), fused.scores.tolist(), fused.contributions.tolist()


# ---------------------------------------------------------------------------- hand-computed


def test_rank_one_contributes_one_over_sixty_one() -> None:
    fused = RRF().fuse([Stream([7], [123.0])], 10, KEYS)
    assert fused.ids.tolist() == [7]
    assert fused.scores.tolist() == [1 / 61]
    assert fused.contributions.tolist() == [[1 / 61]]


def test_one_stream_keeps_its_order_with_one_based_ranks() -> None:
    fused = RRF().fuse([Stream([3, 1, 2], [9.0, 5.0, 1.0])], 10, KEYS)
    assert fused.ids.tolist() == [3, 1, 2]
    assert fused.scores.tolist() == [1 / 61, 1 / 62, 1 / 63]


def test_two_streams_hand_computed() -> None:
    # A: 0, 1, 2 (ranks 1..3); B: 2, 0 (ranks 1, 2).
    #   doc 0: 1/61 + 1/62 = 0.032522...   doc 2: 1/63 + 1/61 = 0.032266...   doc 1: 1/62
    a = Stream([0, 1, 2], [3.0, 2.0, 1.0])
    b = Stream([2, 0], [0.9, 0.1])
    ids, scores, contributions = as_lists(RRF().fuse([a, b], 10, KEYS))
    assert ids == [0, 2, 1]
    assert scores == pytest.approx([1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62], rel=1e-15)
    assert contributions == [[1 / 61, 1 / 62], [1 / 63, 1 / 61], [1 / 62, 0.0]]


def test_the_constant_is_configurable() -> None:
    a = Stream([5, 6], [2.0, 1.0])
    fused = RRF(k=0).fuse([a], 10, KEYS)
    assert fused.scores.tolist() == [1.0, 0.5]
    fused = RRF(k=1).fuse([a, Stream([6], [1.0])], 10, KEYS)
    # doc 6: 1/3 + 1/2 beats doc 5: 1/2.
    assert fused.ids.tolist() == [6, 5]
    assert fused.scores.tolist() == pytest.approx([1 / 3 + 1 / 2, 1 / 2], rel=1e-15)


def test_zero_versus_one_based_ranks_matter() -> None:
    # With 1-based ranks and k=1: d1 = 1/2 + 1/4 = 0.75, d2 = 1/3 + 1/3 = 0.667: d1 wins.
    # (0-based ranks would give d1 = 1/1 + 1/3 = 1.333, d2 = 1/2 + 1/2 = 1.0: also d1,
    # but the fused scores differ; the test pins the 1-based values.)
    a = Stream([1, 2, 3], [3.0, 2.0, 1.0])
    b = Stream([3, 2, 1], [3.0, 2.0, 1.0])
    fused = RRF(k=1).fuse([a, b], 3, KEYS)
    scores = dict(zip(fused.ids.tolist(), fused.scores.tolist(), strict=True))
    assert scores[1] == pytest.approx(1 / 2 + 1 / 4, rel=1e-15)
    assert scores[2] == pytest.approx(1 / 3 + 1 / 3, rel=1e-15)


def test_contributions_sum_to_the_fused_score() -> None:
    streams = [
        Stream([4, 0, 9, 2], [4.0, 3.0, 2.0, 1.0]),
        Stream([9, 4], [1.0, 0.5]),
        Stream([2, 7, 0, 4], [8.0, 6.0, 4.0, 2.0]),
    ]
    fused = RRF().fuse(streams, 10, KEYS)
    assert fused.contributions.shape == (len(fused), 3)
    assert row_sums(fused) == fused.scores.tolist()
    # A document absent from a stream gets exactly 0 from it.
    row = fused.ids.tolist().index(7)
    assert fused.contributions[row].tolist() == [0.0, 0.0, 1 / 62]


def test_scores_are_non_increasing_and_truncated_to_k() -> None:
    streams = [Stream(list(range(20)), np.linspace(1, 0, 20)), Stream(list(range(19, -1, -1)), np.ones(20))]
    fused = RRF().fuse(streams, 5, KEYS)
    assert len(fused) == 5
    assert bool(np.all(np.diff(fused.scores) <= 0))


# ---------------------------------------------------------------------------- ties


def test_exact_ties_break_on_the_key_order_not_the_id() -> None:
    # doc 1 and doc 2 swap ranks between the streams: an exact tie.
    streams = [Stream([1, 2], [1.0, 0.5]), Stream([2, 1], [1.0, 0.5])]
    by_id = RRF().fuse(streams, 2, IdOrder())
    by_reversed_key = RRF().fuse(streams, 2, ReversedOrder())
    assert by_id.scores[0] == by_id.scores[1]
    assert by_id.ids.tolist() == [1, 2]
    assert by_reversed_key.ids.tolist() == [2, 1]


def test_ties_at_the_cut_are_decided_by_key() -> None:
    # Four documents each at rank 1 of its own stream: all tie at 1/61.
    streams = [Stream([doc], [1.0]) for doc in (8, 3, 5, 1)]
    assert RRF().fuse(streams, 2, IdOrder()).ids.tolist() == [1, 3]
    assert RRF().fuse(streams, 2, ReversedOrder()).ids.tolist() == [8, 5]


def test_ties_break_on_document_keys_with_a_real_snapshot() -> None:
    index = Index()
    index.add_many([Document(key, key) for key in ("delta", "alpha", "charlie", "bravo")])
    snapshot = index.snapshot()
    ids = snapshot.ids_of(["delta", "alpha", "charlie", "bravo"])
    fused = RRF().fuse([Stream([i], [1.0]) for i in ids.tolist()], 4, snapshot)
    assert snapshot.keys_of(fused.ids) == ["alpha", "bravo", "charlie", "delta"]


# ---------------------------------------------------------------------------- edges and errors


def test_no_streams_gives_an_empty_result() -> None:
    fused = RRF().fuse([], 5, KEYS)
    assert len(fused) == 0
    assert fused.contributions.shape == (0, 0)


def test_all_streams_empty_gives_an_empty_result_with_one_column_per_stream() -> None:
    fused = RRF().fuse([Stream.empty(), Stream.empty()], 5, KEYS)
    assert len(fused) == 0
    assert fused.contributions.shape == (0, 2)


def test_an_empty_stream_among_others_contributes_nothing() -> None:
    fused = RRF().fuse([Stream.empty(), Stream([4, 2], [2.0, 1.0])], 5, KEYS)
    assert fused.ids.tolist() == [4, 2]
    assert fused.contributions.tolist() == [[0.0, 1 / 61], [0.0, 1 / 62]]


@pytest.mark.parametrize("k", [0, -1, True, 2.0, "3"])
def test_a_bad_k_raises(k: object) -> None:
    with pytest.raises(InvalidParameterError):
        RRF().fuse([Stream([1], [1.0])], k, KEYS)  # type: ignore[arg-type]


@pytest.mark.parametrize("constant", [-1.0, math.nan, math.inf, True, "60"])
def test_a_bad_constant_raises(constant: object) -> None:
    with pytest.raises(InvalidParameterError):
        RRF(k=constant)  # type: ignore[arg-type]


def test_name_and_repr() -> None:
    assert RRF().name == "rrf"
    assert repr(RRF()) == "RRF(k=60)"
    assert RRF(k=10).k == 10.0


def test_the_function_form_matches_the_class() -> None:
    streams = [Stream([0, 1, 2], [3.0, 2.0, 1.0]), Stream([2, 3], [1.0, 0.0])]
    a = reciprocal_rank_fusion(streams, 3, KEYS, c=20.0)
    b = RRF(k=20.0).fuse(streams, 3, KEYS)
    assert as_lists(a) == as_lists(b)


# ---------------------------------------------------------------------------- make_fuser


def test_make_fuser_dispatches_by_name() -> None:
    assert FUSION_METHODS == ("rrf", "weighted", "score")
    rrf = make_fuser("rrf", k=10)
    assert isinstance(rrf, RRF) and rrf.k == 10.0
    weighted = make_fuser("weighted", weights=[2.0, 1.0])
    assert isinstance(weighted, WeightedRRF) and weighted.weights == (2.0, 1.0)
    score = make_fuser("score", norm="zscore")
    assert isinstance(score, ScoreFusion) and score.norm == "zscore"
    assert isinstance(make_fuser("score"), ScoreFusion)
    assert make_fuser("score").name == "score-minmax"


def test_make_fuser_gives_fusers_that_fuse_like_the_classes() -> None:
    streams: Sequence[Stream] = [Stream([0, 1, 2], [3.0, 2.0, 1.0]), Stream([2, 3], [1.0, 0.0])]
    assert as_lists(make_fuser("rrf").fuse(streams, 4, KEYS)) == as_lists(RRF().fuse(streams, 4, KEYS))
    assert as_lists(make_fuser("weighted", weights=[1, 3]).fuse(streams, 4, KEYS)) == as_lists(
        WeightedRRF([1, 3]).fuse(streams, 4, KEYS)
    )


@pytest.mark.parametrize("name", ["RRF", "combsum", "", "weighted-rrf", "score-minmax"])
def test_make_fuser_rejects_an_unknown_name(name: str) -> None:
    with pytest.raises(UnknownSignalError, match="unknown fusion method"):
        make_fuser(name)


def test_unknown_fuser_error_is_a_value_error_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="rrf, weighted, score"):
        make_fuser("nope")


def test_make_fuser_passes_bad_parameters_to_the_fuser_checks() -> None:
    with pytest.raises(InvalidParameterError):
        make_fuser("rrf", k=-5)
    with pytest.raises(InvalidParameterError):
        make_fuser("score", norm="l2")
