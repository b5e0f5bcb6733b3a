"""Overlap of two rankings against the paper: rank-biased overlap (Webber, Moffat and Zobel 2010)
and Jaccard, checked on cases derived by hand from the paper's formulas and on the formula
written out set by set.

Agreement-with-a-reference tests live in ``tests/*/reference/``, apart from behaviour tests.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weftsearch.errors import InvalidParameterError
from weftsearch.eval.metrics import jaccard, rank_biased_overlap


def reference_rbo(a: list[str], b: list[str], p: float) -> float:
    """Webber et al. (2010) eq. 32, by sets at every depth."""
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, length = len(short), len(long_)

    def overlap(d: int) -> int:
        return len(set(short[: min(d, s)]) & set(long_[:d]))

    total = sum(overlap(d) / d * p**d for d in range(1, length + 1))
    total += sum(overlap(s) * (d - s) / (s * d) * p**d for d in range(s + 1, length + 1))
    return (1 - p) / p * total + ((overlap(length) - overlap(s)) / length + overlap(s) / s) * p**length


def test_rbo_of_even_lists_by_hand() -> None:
    """Eq. 30 (lists of one length k): RBO_ext = A_k p^k + (1 - p)/p sum_d A_d p^d.

    S = a b c d, T = b a c e, p = 0.9: agreements A_1..A_4 = 0, 1, 1, 3/4, so
    RBO_ext = 0.75 * 0.6561 + (0.81 + 0.729 + 0.75 * 0.6561) / 9 = 0.492075 + 0.225675 = 0.71775.
    """
    assert rank_biased_overlap(list("abcd"), list("bace"), 0.9) == pytest.approx(0.71775, abs=1e-12)


def test_rbo_of_uneven_lists_by_hand() -> None:
    """Eq. 32 (S of length s = 3 seen whole, L of length l = 5), p = 1/2, so (1 - p)/p = 1.

    S = a b c, L = a c d b e: X_1..X_5 = 1, 1, 2, 3, 3 (past s, X_d counts all of S), X_s = 2.
    sum_d X_d/d p^d = 1/2 + 1/8 + 1/12 + 3/64 + 3/160 = 743/960;
    sum_{d>s} X_s (d - s)/(s d) p^d = 1/96 + 1/120 = 18/960;
    ((X_l - X_s)/l + X_s/s) p^l = (1/5 + 2/3)/32 = 26/960; RBO_ext = 787/960.
    """
    expected = float(Fraction(787, 960))
    assert rank_biased_overlap(list("abc"), list("acdbe"), 0.5) == pytest.approx(expected, abs=1e-12)
    assert rank_biased_overlap(list("acdbe"), list("abc"), 0.5) == pytest.approx(expected, abs=1e-12)


def test_rbo_known_values() -> None:
    assert rank_biased_overlap(list("abc"), list("abc")) == pytest.approx(1.0)
    assert rank_biased_overlap(list("abcdefghij"), list("abcdefghij"), 0.5) == pytest.approx(1.0)
    assert rank_biased_overlap(list("abc"), list("xyz")) == 0.0
    # X = 1, 1, 3: (1/9)(0.9 + 0.405 + 0.729) + 0.729
    assert rank_biased_overlap(list("abc"), list("acb")) == pytest.approx(2.034 / 9 + 0.729)
    assert rank_biased_overlap([], []) == 1.0 and rank_biased_overlap(["a"], []) == 0.0


@pytest.mark.parametrize(
    ("a", "b", "p"), [(["a", "a"], ["a"], 0.9), (["a"], ["a"], 1.0), (["a"], ["a"], 0.0)]
)
def test_rbo_refuses_repeats_and_p_outside_0_1(a: list[str], b: list[str], p: float) -> None:
    with pytest.raises(InvalidParameterError):
        rank_biased_overlap(a, b, p)


rankings = st.lists(st.sampled_from("abcdefghijkl"), min_size=1, max_size=12, unique=True)


@given(rankings, rankings, st.sampled_from([0.5, 0.9, 0.98]))
def test_rbo_matches_the_formula_and_is_symmetric(a: list[str], b: list[str], p: float) -> None:
    value = rank_biased_overlap(a, b, p)
    assert value == pytest.approx(reference_rbo(a, b, p), abs=1e-12)
    assert value == pytest.approx(rank_biased_overlap(b, a, p), abs=1e-12)
    assert -1e-12 <= value <= 1 + 1e-12


def test_jaccard_by_hand() -> None:
    assert jaccard(["a", "b", "c"], ["b", "c", "d", "e"]) == pytest.approx(2 / 5)
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert jaccard([], []) == 1.0 and jaccard(["a"], []) == 0.0
