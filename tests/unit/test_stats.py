"""Seeded statistics: exact McNemar, bootstrap intervals, paired accuracy change."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.stats import (
    accuracy_change,
    bootstrap_ci,
    bootstrap_ratio_of_sums,
    bootstrap_ratio_of_sums_change,
    bootstrap_relative_change,
    discordant_counts,
    mcnemar_exact,
    percentile_stat,
)


def _table(both: int, base_only: int, cand_only: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    """Aligned per-question flags with the given paired 2x2 cell counts."""
    base = [True] * both + [True] * base_only + [False] * cand_only + [False] * neither
    cand = [True] * both + [False] * base_only + [True] * cand_only + [False] * neither
    return np.array(base), np.array(cand)


def test_mcnemar_equals_the_exact_binomial_value():
    # b = 2, c = 9: p = 2 * P(Binomial(11, 1/2) <= 2) = 2 * (1 + 11 + 55) / 2**11
    assert mcnemar_exact(2, 9) == pytest.approx(134 / 2048, rel=1e-12)
    assert mcnemar_exact(9, 2) == pytest.approx(134 / 2048, rel=1e-12)


def test_mcnemar_from_a_constructed_table():
    base, cand = _table(both=80, base_only=1, cand_only=7, neither=12)
    b, c = discordant_counts(base, cand)
    assert (b, c) == (1, 7)
    # 2 * P(Binomial(8, 1/2) <= 1) = 2 * (1 + 8) / 256
    assert mcnemar_exact(b, c) == pytest.approx(18 / 256, rel=1e-12)


def test_mcnemar_without_discordant_pairs_is_one():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_accuracy_change_is_the_paired_difference_with_an_interval_around_it():
    base, cand = _table(both=80, base_only=3, cand_only=9, neither=8)
    point, low, high = accuracy_change(base, cand)
    assert point == pytest.approx((9 - 3) / 100)
    assert low < point < high
    assert -1 <= low and high <= 1


def test_accuracy_change_without_discordant_pairs_still_has_width():
    base, cand = _table(both=50, base_only=0, cand_only=0, neither=50)
    point, low, high = accuracy_change(base, cand)
    assert point == 0 and low < 0 < high
    assert high == pytest.approx(1.959964 / 102, rel=1e-5)  # z * sqrt(1) / (n + 2)


def test_accuracy_change_needs_aligned_questions():
    with pytest.raises(ValueError):
        accuracy_change(np.array([True, False]), np.array([True]))


def _correlated_runs(n: int = 60, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Per-request times that share a prompt effect, the candidate about 10% slower."""
    rng = np.random.default_rng(seed)
    prompt = rng.lognormal(3, 0.5, n)
    return prompt * rng.lognormal(0, 0.05, n), 1.1 * prompt * rng.lognormal(0, 0.05, n)


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("stat", [np.mean, np.median, percentile_stat(95)])
def test_bootstrap_interval_contains_the_point_estimate(paired, stat):
    base, cand = _correlated_runs()
    point, low, high = bootstrap_relative_change(base, cand, paired=paired, stat=stat)
    assert point == pytest.approx(stat(cand) / stat(base) - 1)
    assert low <= point <= high


def test_paired_interval_is_narrower_when_runs_share_prompt_effects():
    base, cand = _correlated_runs()
    _, p_low, p_high = bootstrap_relative_change(base, cand, paired=True)
    _, u_low, u_high = bootstrap_relative_change(base, cand, paired=False)
    assert p_high - p_low < (u_high - u_low) / 3
    assert p_low < 0.1 < p_high


def test_bootstrap_is_reproducible_with_its_seed():
    base, cand = _correlated_runs()
    first = bootstrap_relative_change(base, cand, paired=False, seed=7)
    assert bootstrap_relative_change(base, cand, paired=False, seed=7) == first
    assert bootstrap_relative_change(base, cand, paired=False, seed=8) != first
    assert bootstrap_ci(base, seed=1) == bootstrap_ci(base, seed=1)


def test_ratio_of_sums_change_weighs_requests_by_their_decode_time():
    tokens = np.array([100.0, 100.0, 1000.0, 50.0])
    base_s = np.array([1.0, 2.0, 10.0, 0.5])
    cand_s = base_s * 0.8
    point, low, high = bootstrap_ratio_of_sums_change(tokens, base_s, tokens, cand_s, paired=True)
    assert point == pytest.approx(1 / 0.8 - 1)
    # Every paired resample has the same 0.8 factor, so the interval collapses onto the point.
    assert low == pytest.approx(point) and high == pytest.approx(point)


def test_single_run_intervals_contain_their_point():
    base, _ = _correlated_runs()
    point, low, high = bootstrap_ci(base)
    assert point == pytest.approx(base.mean()) and low <= point <= high
    tokens = np.full(base.size, 15.0)
    point, low, high = bootstrap_ratio_of_sums(tokens, base / 1000)
    assert point == pytest.approx(tokens.sum() / (base.sum() / 1000))
    assert low <= point <= high


def test_empty_or_misaligned_inputs():
    assert all(math.isnan(v) for v in bootstrap_relative_change(np.array([]), np.array([1.0]), paired=False))
    assert all(math.isnan(v) for v in bootstrap_ci(np.array([])))
    with pytest.raises(ValueError):
        bootstrap_relative_change(np.ones(3), np.ones(4), paired=True)
