"""Paired bootstrap and Fisher's randomisation test: reproducibility, known cases, coverage, refusals."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from weftsearch.errors import InvalidParameterError, WeftError
from weftsearch.eval import (
    BootstrapResult,
    fisher_randomisation,
    fisher_randomisation_exact,
    paired_bootstrap,
)
from weftsearch.eval import stats as stats_module


def systems(n: int, seed: int, shift: float = 0.0) -> tuple[dict[str, float], dict[str, float]]:
    """Two systems' per-query values on ``n`` queries; ``b`` is ``a`` plus noise plus ``shift``."""
    rng = np.random.default_rng(seed)
    a = rng.random(n)
    b = np.clip(a + rng.normal(shift, 0.1, n), 0, 1)
    qids = [f"q{i:03d}" for i in range(n)]
    return dict(zip(qids, a.tolist(), strict=True)), dict(zip(qids, b.tolist(), strict=True))


# ---------------------------------------------------------------------------- reproducibility


def test_the_same_seed_gives_the_identical_result() -> None:
    a, b = systems(60, 1)
    first = paired_bootstrap(a, b, seed=42)
    again = paired_bootstrap(a, b, seed=42)
    assert first == again  # every field, to the bit
    reordered = paired_bootstrap(dict(reversed(list(a.items()))), b, seed=42)
    assert reordered == first  # the mappings' order never matters: qids are sorted


def test_a_different_seed_draws_different_resamples() -> None:
    a, b = systems(60, 1)
    one = paired_bootstrap(a, b, seed=1)
    two = paired_bootstrap(a, b, seed=2)
    assert one.mean_difference == two.mean_difference  # the observation does not depend on the seed
    assert (one.low, one.high) != (two.low, two.high)
    assert fisher_randomisation(a, b, seed=1) == fisher_randomisation(a, b, seed=1)


def test_blocked_drawing_equals_one_index_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of rows consume PCG64 exactly as one resamples x queries matrix does."""
    a, b = systems(37, 3)
    diffs = np.asarray([a[q] - b[q] for q in sorted(a)])
    rows = np.random.Generator(np.random.PCG64(9)).integers(0, 37, size=(1000, 37))
    means = np.sort(diffs[rows].mean(axis=1))
    monkeypatch.setattr(stats_module, "_BLOCK_ELEMENTS", 37 * 7)  # blocks of 7 resamples
    result = paired_bootstrap(a, b, resamples=1000, seed=9)
    assert (result.low, result.high) == (means[24], means[974])  # ranks ceil(25) and ceil(975)
    monkeypatch.setattr(stats_module, "_BLOCK_ELEMENTS", 1 << 22)
    assert paired_bootstrap(a, b, resamples=1000, seed=9) == result


def test_blocked_sign_flips_match_one_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = systems(30, 4)
    whole = fisher_randomisation(a, b, permutations=3000, seed=5)
    monkeypatch.setattr(stats_module, "_BLOCK_ELEMENTS", 30 * 11)
    assert fisher_randomisation(a, b, permutations=3000, seed=5) == whole


# ---------------------------------------------------------------------------- known cases


def test_identical_systems_give_a_zero_interval_and_p_one() -> None:
    a, _ = systems(40, 5)
    result = paired_bootstrap(a, dict(a), seed=0)
    assert (result.mean_difference, result.low, result.high, result.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert not result.excludes_zero
    assert fisher_randomisation(a, dict(a), seed=0).p_value == 1.0
    assert (
        fisher_randomisation_exact({k: a[k] for k in list(a)[:8]}, {k: a[k] for k in list(a)[:8]}).p_value
        == 1.0
    )


def test_a_constant_shift_gives_the_interval_d_d() -> None:
    # Dyadic values, so every difference is exactly d and every resampled mean is exactly d.
    d = 0.125
    a = {f"q{i}": (i % 8) / 16 for i in range(50)}
    b = {q: v - d for q, v in a.items()}
    result = paired_bootstrap(a, b, seed=7)
    assert (result.mean_difference, result.low, result.high) == (d, d, d)
    assert result.p_value == 0.0  # no centred resample gets as far from zero as d
    assert result.excludes_zero
    # Fisher: only the identity and the full flip reach |d|; 2 of 2**10 assignments.
    ten_a = {q: a[q] for q in sorted(a)[:10]}
    ten_b = {q: b[q] for q in ten_a}
    assert fisher_randomisation_exact(ten_a, ten_b).p_value == 2 / 2**10


def test_direction_is_a_minus_b() -> None:
    a = {"q1": 1.0, "q2": 0.5}
    b = {"q1": 0.5, "q2": 0.5}
    result = paired_bootstrap(a, b, seed=0, resamples=100)
    assert result.mean_difference == 0.25
    assert fisher_randomisation(a, b, seed=0).mean_difference == 0.25


@pytest.mark.parametrize(
    ("confidence", "resamples", "ranks"),
    [
        (0.95, 10_000, (250, 9750)),
        (0.9, 20, (1, 19)),
        (0.95, 3, (1, 3)),
        (0.5, 8, (2, 6)),
        (0.99, 1000, (5, 995)),
    ],
)
def test_nearest_rank_percentiles(confidence: float, resamples: int, ranks: tuple[int, int]) -> None:
    # ceil(p * R) with p = (1 - c) / 2 and 1 - p, in exact arithmetic (floats give 251 for 0.95 and 10,000).
    tail = (1 - Fraction(confidence).limit_denominator(10**9)) / 2
    got = (stats_module._nearest_rank(tail, resamples), stats_module._nearest_rank(1 - tail, resamples))
    assert got == ranks


def test_interval_ends_are_resampled_means_at_nearest_ranks() -> None:
    # Two queries with differences 0 and 1: resampled means are 0, 1/2 or 1 (prob. 1/4, 1/2, 1/4).
    a = {"x": 1.0, "y": 0.0}
    b = {"x": 0.0, "y": 0.0}
    result = paired_bootstrap(a, b, resamples=10_000, seed=3)
    assert (result.low, result.high) == (0.0, 1.0)
    narrow = paired_bootstrap(a, b, resamples=10_000, seed=3, confidence=0.2)  # ranks 4,000 and 6,000
    assert (narrow.low, narrow.high) == (0.5, 0.5)


# ---------------------------------------------------------------------------- coverage on simulated data


def test_95_percent_intervals_cover_the_true_mean_about_95_percent_of_the_time() -> None:
    true_mean, trials, covered = 0.05, 300, 0
    rng = np.random.default_rng(2024)
    for trial in range(trials):
        diffs = rng.normal(true_mean, 0.2, size=50)
        a = {f"q{i}": float(x) for i, x in enumerate(diffs)}
        b = dict.fromkeys(a, 0.0)
        result = paired_bootstrap(a, b, resamples=1000, seed=trial)
        covered += result.low <= true_mean <= result.high
    # Percentile intervals with n = 50 run slightly narrow; binomial sd at 300 trials is ~1.3 points.
    assert 0.89 <= covered / trials <= 0.99


def test_the_randomisation_test_holds_its_level_under_the_null() -> None:
    rng = np.random.default_rng(7)
    p_values = []
    for trial in range(1000):
        diffs = rng.normal(0.0, 0.2, size=20)
        a = {f"q{i}": float(x) for i, x in enumerate(diffs)}
        p_values.append(fisher_randomisation(a, dict.fromkeys(a, 0.0), permutations=200, seed=trial).p_value)
    # Rejection rates at 5% and 50%; binomial sd at 1,000 trials is 0.7 and 1.6 points.
    assert 0.03 <= np.mean(np.asarray(p_values) <= 0.05) <= 0.075
    assert 0.45 <= np.mean(np.asarray(p_values) <= 0.5) <= 0.56


def test_a_real_difference_is_detected() -> None:
    a, b = systems(200, 8, shift=-0.05)  # b is worse by about 0.05
    result = paired_bootstrap(a, b, seed=1)
    assert result.excludes_zero and result.low > 0
    assert result.p_value < 0.01
    assert fisher_randomisation(a, b, seed=1).p_value < 0.01


# ---------------------------------------------------------------------------- Fisher against enumeration


def brute_force_p(a: dict[str, float], b: dict[str, float]) -> float:
    """Every one of the 2**n swap patterns, one at a time, in plain Python."""
    qids = sorted(a)
    diffs = [a[q] - b[q] for q in qids]
    observed = abs(math.fsum(diffs) / len(diffs))
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(diffs)):
        mean = math.fsum(s * d for s, d in zip(signs, diffs, strict=True)) / len(diffs)
        hits += abs(mean) >= observed - 1e-12
    return hits / (1 << len(diffs))


@pytest.mark.parametrize(("n", "seed"), [(1, 0), (2, 1), (5, 2), (8, 3), (10, 4), (10, 5)])
def test_exact_enumeration_matches_brute_force(n: int, seed: int) -> None:
    a, b = systems(n, seed)
    exact = fisher_randomisation_exact(a, b)
    assert exact.exact and exact.permutations == 2**n and exact.seed is None
    assert exact.p_value == brute_force_p(a, b)


def test_exact_enumeration_with_tied_magnitudes() -> None:
    # Differences 0.5, 0.5, 1, -1 give many sign patterns exactly as far from zero as the observed.
    a = {"a": 1.0, "b": 0.5, "c": 1.0, "d": 0.0}
    b = {"a": 0.5, "b": 0.0, "c": 0.0, "d": 1.0}
    assert fisher_randomisation_exact(a, b).p_value == brute_force_p(a, b)


@pytest.mark.parametrize(("n", "seed"), [(6, 10), (9, 11), (10, 12)])
def test_monte_carlo_agrees_with_the_exact_p_value(n: int, seed: int) -> None:
    a, b = systems(n, seed, shift=0.03)
    exact = brute_force_p(a, b)
    permutations = 20_000
    estimate = fisher_randomisation(a, b, permutations=permutations, seed=seed)
    sd = math.sqrt(exact * (1 - exact) / permutations)
    assert abs(estimate.p_value - exact) <= 5 * sd + 1e-12
    assert estimate.permutations == permutations and not estimate.exact and estimate.seed == seed


def test_exact_enumeration_refuses_too_many_queries() -> None:
    a, b = systems(25, 0)
    with pytest.raises(InvalidParameterError, match="25"):
        fisher_randomisation_exact(a, b)


# ---------------------------------------------------------------------------- refusals


def test_different_query_sets_are_refused_naming_the_qids() -> None:
    a = {"q1": 0.5, "q2": 0.25, "q3": 1.0}
    b = {"q1": 0.5, "q4": 0.0, "q3": 0.0}
    for call in (
        lambda: paired_bootstrap(a, b, seed=0),
        lambda: fisher_randomisation(a, b, seed=0),
        lambda: fisher_randomisation_exact(a, b),
    ):
        with pytest.raises(InvalidParameterError) as caught:
            call()
        message = str(caught.value)
        assert isinstance(caught.value, WeftError) and isinstance(caught.value, ValueError)
        assert "'q2'" in message and "'q4'" in message and "'q1'" not in message


def test_a_long_list_of_missing_qids_is_shortened() -> None:
    a = {f"q{i:02d}": 0.0 for i in range(30)}
    with pytest.raises(InvalidParameterError, match=r"30 qids missing from b \['q00', .*\(20 more\)"):
        paired_bootstrap(a, {"other": 0.0}, seed=0)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"seed": -1}, "seed"),
        ({"seed": True}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"seed": 0, "resamples": 0}, "resamples"),
        ({"seed": 0, "resamples": 2.0}, "resamples"),
        ({"seed": 0, "confidence": 1.0}, "confidence"),
        ({"seed": 0, "confidence": 0}, "confidence"),
        ({"seed": 0, "confidence": "0.95"}, "confidence"),
    ],
)
def test_bad_bootstrap_parameters(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidParameterError, match=fragment):
        paired_bootstrap({"q": 1.0}, {"q": 0.0}, **kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"seed": -3}, {"seed": 0, "permutations": 0}, {"seed": 0, "permutations": True}]
)
def test_bad_randomisation_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidParameterError):
        fisher_randomisation({"q": 1.0}, {"q": 0.0}, **kwargs)


@pytest.mark.parametrize("value", [math.nan, math.inf, "0.5", None, True])
def test_non_finite_or_non_numeric_values_are_refused(value: Any) -> None:
    with pytest.raises(InvalidParameterError, match="'q'"):
        paired_bootstrap({"q": value}, {"q": 0.0}, seed=0)


def test_empty_inputs_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="empty"):
        paired_bootstrap({}, {}, seed=0)


def test_result_records_its_parameters() -> None:
    a, b = systems(12, 0)
    result = paired_bootstrap(a, b, seed=11, resamples=500, confidence=0.9)
    assert isinstance(result, BootstrapResult)
    assert (result.seed, result.resamples, result.confidence, result.queries) == (11, 500, 0.9, 12)
