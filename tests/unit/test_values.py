"""The shared value helpers of the metrics (`harness.metrics.values`): every edge their docstrings promise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.errors import SparkbenchError
from harness.metrics.values import elapsed_ms, int_array, parse_meta, ratio


@pytest.mark.parametrize("raw", [None, "", "   ", 3.0])
def test_a_record_without_a_meta_object_has_an_empty_one(raw):
    assert parse_meta(raw) == {}


def test_a_meta_object_that_is_not_json_is_one_error_quoting_its_start():
    raw = "{" + "x" * 200
    with pytest.raises(SparkbenchError) as error:
        parse_meta(raw)
    assert str(error.value) == f"meta_info_json is not valid JSON: {raw[:80]!r}"


@pytest.mark.parametrize("missing", [None, math.nan])
def test_a_missing_list_cell_is_an_empty_int_array(missing):
    cell = int_array(missing)
    assert cell.shape == (0,) and cell.dtype == np.int64


def test_elapsed_ms_subtracts_whole_stamps_past_float_precision():
    start = 2**60  # float64 cannot hold start + 3 ms apart from start
    later = pd.Series([start + 3_000_000, 5_000_000, None], dtype="Int64")
    earlier = pd.Series([start, 2_000_000, 1], dtype="Int64")
    assert elapsed_ms(later, earlier).tolist()[:2] == [3.0, 3.0]
    assert math.isnan(elapsed_ms(later, earlier)[2])


def test_a_ratio_is_missing_wherever_the_denominator_is_not_above_zero():
    out = ratio(np.array([1.0, 1.0, 1.0, 1.0]), np.array([2.0, 0.0, -1.0, np.nan]))
    assert out[0] == 0.5 and np.isnan(out[1:]).all()
