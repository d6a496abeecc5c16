"""The LM-head rounding of the test bed's FP8-head model copies (numpy only; torch is not needed)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.testbed.build_rounded_head import format_max, round_rows, round_to_grid


def test_format_max_is_e4m3fn_448_and_smaller_for_coarser_grids():
    assert [format_max(bits) for bits in (3, 2, 1)] == [448.0, 384.0, 256.0]


@pytest.mark.parametrize(("value", "expected"), [
    (1.0, 1.0), (1.1, 1.125), (1.0625, 1.0), (1.1875, 1.25),  # ties go to the even mantissa
    (-3.3, -3.25), (300.0, 288.0), (448.0, 448.0), (2.0**-9 * 1.4, 2.0**-9), (2.0**-11, 0.0),
])
def test_e4m3_grid_rounds_to_nearest_even_with_subnormals(value, expected):
    assert round_to_grid(np.array([value]), 3)[0] == expected


def test_one_mantissa_bit_keeps_two_values_per_binade():
    values = np.array([1.0, 1.2, 1.3, 1.7, 2.9, 3.1])
    assert round_to_grid(values, 1).tolist() == [1.0, 1.0, 1.5, 1.5, 3.0, 3.0]


def test_each_row_is_scaled_to_its_own_maximum():
    rng = np.random.default_rng(0)
    weight = rng.normal(scale=[[0.001], [1.0], [50.0]], size=(3, 64))
    rounded = round_rows(weight, 3)
    assert np.allclose(np.abs(rounded).max(axis=1), np.abs(weight).max(axis=1))  # amax lands on 448 exactly
    relative = np.abs(rounded - weight) / np.abs(weight).max(axis=1, keepdims=True)
    assert relative.max() < 2.0**-4  # half a step of a 3-bit mantissa, relative to the row's scale


def test_fewer_mantissa_bits_round_coarser():
    weight = np.random.default_rng(1).normal(scale=0.02, size=(32, 128))
    errors = [np.abs(round_rows(weight, bits) - weight).mean() for bits in (3, 2, 1)]
    assert 0 < errors[0] < errors[1] < errors[2]


def test_only_one_to_three_mantissa_bits():
    with pytest.raises(ValueError):
        round_rows(np.ones((1, 2)), 4)
