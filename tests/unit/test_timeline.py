"""The timeline's series helpers (`harness.metrics.timeline`) at their edges, and the clock-event
reasons against NVML's own constants (nvidia-ml-py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pynvml
import pytest

from harness.metrics.timeline import (
    THROTTLE_REASONS,
    counter_increase,
    counter_rate,
    output_rate,
    relative_gap,
    role_series,
    throttle_names,
    within,
)

NVML = {"idle": "GpuIdle", "applications clocks setting": "ApplicationsClocksSetting",
        "software power cap": "SwPowerCap", "hardware slowdown": "HwSlowdown", "sync boost": "SyncBoost",
        "software thermal slowdown": "SwThermalSlowdown", "hardware thermal slowdown": "HwThermalSlowdown",
        "hardware power brake": "HwPowerBrakeSlowdown", "display clock setting": "DisplayClockSetting"}


def test_each_clock_event_reason_is_nvmls_bit():
    assert {name: bit for bit, name in THROTTLE_REASONS.items()} == {
        name: getattr(pynvml, f"nvmlClocksEventReason{nvml}") for name, nvml in NVML.items()}
    assert throttle_names(0x1FF | 0x2000, ignore=0) == [*THROTTLE_REASONS.values(), "0x2000"]


def test_no_chunk_gives_a_zero_rate_in_every_bin():
    assert output_rate([], [], np.array([0, 10, 20, 30])).tolist() == [0.0, 0.0, 0.0]


def test_a_roles_label_sets_are_summed_at_each_scrape():
    samples = pd.DataFrame({"t_ns": [2, 1, 2, 1, 1], "role": ["a", "a", "a", "a", "b"], "value": [1.0, 2, 3, 4, 100]})
    series = role_series(samples, "a")
    assert list(series.columns) == ["t_ns", "value"]
    assert series["t_ns"].tolist() == [1, 2] and series["value"].tolist() == [6.0, 4.0]


def test_within_keeps_both_ends_and_nothing_outside():
    frame = pd.DataFrame({"t_ns": [1, 2, 5, 6, 9]})
    assert within(frame, 2, 6)["t_ns"].tolist() == [2, 5, 6]


def test_a_counter_gains_fractional_steps_and_restarts_from_zero():
    assert counter_increase(np.array([0.0, 0.5, 1.0])) == 1.0
    assert counter_increase(np.array([5.0, 7.0, 2.0, 3.0])) == 2.0 + 2.0 + 1.0
    assert counter_increase(np.array([5.0, 4.5, 5.0])) == 4.5 + 0.5  # a restart that lands just under the last


def test_a_counters_rate_over_sub_second_steps_of_three_readings():
    midpoints, rate = counter_rate(np.array([0, 500_000_000, 1_000_000_000]), np.array([0.0, 1.0, 3.0]))
    assert midpoints.tolist() == [250_000_000, 750_000_000] and rate.tolist() == [2.0, 4.0]


@pytest.mark.parametrize("value, reference, gap", [(1.5, 1.0, 0.5), (1.0, 0.5, 1.0), (1.0, 0.0, math.nan),
                                                   (1.0, -1.0, math.nan)])
def test_relative_gap_needs_a_positive_reference(value, reference, gap):
    assert relative_gap(value, reference) == pytest.approx(gap, nan_ok=True)
