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
    mean_interval,
    percentile_stat,
    welch_relative_change,
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


def test_a_percentile_interval_is_the_2_5th_and_97_5th_percentiles_of_the_seeded_resamples():
    """The module's stated recipe, step by step: indices from default_rng(seed), (R, n), the
    statistic per row, numpy's linear percentiles at 2.5 and 97.5."""
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    rng = np.random.default_rng(4)
    draws = x[rng.integers(0, x.size, size=(2000, x.size))].mean(axis=-1)
    low, high = np.percentile(draws, [2.5, 97.5])
    assert bootstrap_ci(x, seed=4) == (x.mean(), low, high)


def test_resamples_without_a_value_are_left_out_and_a_zero_denominator_has_no_point():
    # A resample of only the first request divides by 0 (no value); the others give 2 or 1 / 0.5.
    point, low, high = bootstrap_ratio_of_sums(np.array([1.0, 1.0]), np.array([0.0, 1.0]))
    assert point == 2.0 and (low, high) == (pytest.approx(1.0), pytest.approx(2.0))
    assert all(math.isnan(v) for v in bootstrap_ratio_of_sums(np.array([1.0]), np.array([0.0])))
    assert all(math.isnan(v) for v in bootstrap_ratio_of_sums(np.array([]), np.array([])))


def test_unpaired_change_of_a_ratio_of_sums_resamples_each_run_on_its_own():
    tokens, base_s = np.array([100.0, 100.0, 1000.0, 50.0]), np.array([1.0, 2.0, 10.0, 0.5])
    point, low, high = bootstrap_ratio_of_sums_change(tokens, base_s, tokens, base_s * 0.8, paired=False)
    assert point == pytest.approx(0.25) and low < 0.2 and high > 0.3  # no longer the same factor in each


def test_mean_interval_is_the_hand_worked_student_t_interval():
    # 1, 2, 3, 4: mean 2.5, s = 1.29099, t(0.975, 3) = 3.18245: half width 3.18245 * 1.29099 / 2 = 2.05426
    mean, low, high = mean_interval(np.array([1.0, 2.0, math.nan, 3.0, 4.0]))
    assert (mean, low, high) == pytest.approx((2.5, 2.5 - 2.05426, 2.5 + 2.05426), abs=1e-5)
    assert mean_interval(np.array([7.0]))[0] == 7.0 and math.isnan(mean_interval(np.array([7.0]))[1])
    assert all(math.isnan(v) for v in mean_interval(np.array([math.nan])))


def test_welch_relative_change_is_the_hand_worked_interval():
    """base 10, 12, 14 (mean 12, s^2/n = 4/3), candidate 11, 13, 15, 17 (mean 14, s^2/n = 20/3/4 =
    5/3): change 14/12 - 1 = 1/6, se = sqrt(3), nu = 9 / ((4/3)^2 / 2 + (5/3)^2 / 3) = 4.95918,
    t(0.975, 4.95918) = 2.57705, half width 2.57705 * 1.73205 / 12 = 0.37195."""
    point, low, high = welch_relative_change(np.array([10.0, 12.0, 14.0]), np.array([11.0, 13.0, 15.0, 17.0]))
    assert (point, low, high) == pytest.approx((1 / 6, 1 / 6 - 0.37195, 1 / 6 + 0.37195), abs=1e-5)


def test_welch_relative_change_at_its_edges():
    assert welch_relative_change(np.array([2.0, 2.0]), np.array([3.0, 3.0])) == (0.5, 0.5, 0.5)  # no spread
    point, low, high = welch_relative_change(np.array([2.0]), np.array([3.0, 4.0]))
    assert point == pytest.approx(0.75) and math.isnan(low) and math.isnan(high)
    point, low, _ = welch_relative_change(np.array([2.0, 4.0]), np.array([3.0]))
    assert point == pytest.approx(0.0) and math.isnan(low)
    assert all(math.isnan(v) for v in welch_relative_change(np.array([0.0, 0.0]), np.array([1.0, 2.0])))
    assert all(math.isnan(v) for v in welch_relative_change(np.array([]), np.array([1.0, 2.0])))


def test_accuracy_change_is_agresti_and_mins_interval_worked_by_hand():
    """b = 3, c = 9 of 100: n* = 102, b* = 3.5, c* = 9.5, centre 6 / 102 = 0.058824,
    se = sqrt(13 - 36 / 102) / 102 = 0.034865, so 0.058824 -/+ 0.068335: -0.009511 to 0.127158."""
    base, cand = _table(both=80, base_only=3, cand_only=9, neither=8)
    assert accuracy_change(base, cand) == pytest.approx((0.06, -0.009511, 0.127158), abs=2e-6)
    # b = 0, c = 3 of 3: centre 3 / 5 = 0.6, se = sqrt(4 - 9 / 5) / 5 = 0.296648: the high end
    # 1.1814 is clipped to 1, the low end 0.018581 is kept.
    base, cand = _table(both=0, base_only=0, cand_only=3, neither=0)
    assert accuracy_change(base, cand) == pytest.approx((1.0, 0.018581, 1.0), abs=2e-6)
    base, cand = _table(both=0, base_only=3, cand_only=0, neither=0)
    assert accuracy_change(base, cand) == pytest.approx((-1.0, -1.0, -0.018581), abs=2e-6)
    assert all(math.isnan(v) for v in accuracy_change(np.array([], dtype=bool), np.array([], dtype=bool)))


def test_a_negative_discordant_count_is_refused_even_when_the_counts_sum_to_zero():
    with pytest.raises(ValueError):
        mcnemar_exact(1, -1)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 1)


def test_no_data_is_nan_without_a_numpy_warning():
    """A run without requests, or repeats without values, gives NaN quietly: nothing is averaged
    over an empty sample (numpy would warn "Mean of empty slice" into the report's output)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(math.isnan(v) for v in bootstrap_ci(np.array([])))
        assert all(math.isnan(v) for v in welch_relative_change(np.array([]), np.array([1.0, 2.0])))
        assert all(math.isnan(v) for v in welch_relative_change(np.array([1.0, 2.0]), np.array([])))
