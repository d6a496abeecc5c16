"""Energy per token from recorded power samples: counter wrap-around, window interpolation,
power-only devices, the sampler thread with fake sensors, and "not measured" without a sensor."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from harness.metrics.energy import (
    counter_joules,
    energy_values,
    peak_power_w,
    power_energy_j,
    run_energy,
    window_energy_j,
)
from harness.power.sampler import POWER_NAME, PowerSampler, load_power_samples, power_sampling
from harness.power.sensors import SensorInfo, rapl_sensors

S = 1_000_000_000  # ns per second
RAPL = {"sensor": "rapl:intel-rapl:0", "domain": "cpu_package", "energy_unit_j": 1e-6, "wrap": 1000e6}
GPU = {"sensor": "nvml:0", "domain": "gpu", "energy_unit_j": 1e-3, "wrap": None}


def test_counter_unwraps_at_the_stated_range():
    # From 900 J the counter wraps at 1000 J and reads 100 J: 200 J more were spent, not -800.
    joules = counter_joules(np.array([800e6, 900e6, 100e6, 300e6]), 1e-6, 1000e6)
    assert joules.tolist() == pytest.approx([0, 100, 300, 500])
    assert counter_joules(np.array([800e6]), 1e-6, 1000e6).tolist() == [0.0]  # energy counts from the first reading


def test_counter_reset_without_wrap_is_not_guessed():
    joules = counter_joules(np.array([5000.0, 6000.0, 10.0, 20.0]), 1e-3, None)
    assert joules[1] == pytest.approx(1.0)
    assert np.isnan(joules[2:]).all()


def test_window_energy_interpolates_the_counter_at_both_ends():
    t = np.array([0, 1, 2, 3]) * S
    joules = np.array([0.0, 10.0, 30.0, 60.0])  # 10 W, then 20 W, then 30 W
    assert window_energy_j(t, joules, 0.5 * S, 2.5 * S) == pytest.approx(45 - 5)
    assert math.isnan(window_energy_j(t, joules, 0.5 * S, 3.5 * S))  # the samples do not cover the end


def test_power_readings_integrate_by_trapezoid():
    t = np.array([0, 1, 2]) * S
    assert power_energy_j(t, np.array([100.0, 200.0, 200.0]), 0, 2 * S) == pytest.approx(150 + 200)
    assert power_energy_j(t, np.array([100.0, 100.0, 100.0]), 0.25 * S, 1.75 * S) == pytest.approx(150)
    assert power_energy_j(t, np.array([1.5, 1.5, 1.5]), 0, S) == pytest.approx(1.5)  # not whole joules


def test_peak_from_readings_in_the_window_else_from_counter_intervals():
    t = np.array([0, 1, 2, 3]) * S
    power = np.array([500.0, 120.0, 180.0, 900.0])
    assert peak_power_w(t, power, np.zeros(4), 0.5 * S, 2.5 * S) == 180.0
    joules = np.array([0.0, 10.0, 30.0, 60.0])
    assert peak_power_w(t, np.full(4, np.nan), joules, 0.5 * S, 2.5 * S) == pytest.approx(30.0)
    # An interval after the window, at 100 W, is not the window's peak.
    later = np.array([0, 1, 2, 3, 4]) * S
    assert peak_power_w(later, np.full(5, np.nan), np.array([0.0, 10.0, 30.0, 60.0, 160.0]),
                        0.5 * S, 2.5 * S) == pytest.approx(30.0)


def _samples(rows):
    return pd.DataFrame(rows, columns=["t_ns", "sensor", "energy_raw", "power_w"])


def test_run_figures_per_domain_on_recorded_samples():
    """A GPU at a steady 300 W (counter in mJ) and a CPU package at 50 W whose RAPL counter wraps
    mid-run; 2 s window, 600 output tokens."""
    rows = []
    for i in range(5):  # t = 0 .. 2 s, every 0.5 s
        t = i * S // 2
        rows.append((t, "nvml:0", 1e9 + 300e3 * i / 2, 300.0 + (10 if i == 2 else 0)))
        rows.append((t, "rapl:intel-rapl:0", (990e6 + 25e6 * i) % 1000e6, None))
    values = energy_values(_samples(rows), [GPU, RAPL], 0, 2 * S, output_tokens=600)
    assert values["gpu_energy_j"] == pytest.approx(600)
    assert values["gpu_energy_per_output_token_j"] == pytest.approx(1.0)
    assert values["gpu_output_tokens_per_j"] == pytest.approx(1.0)
    assert values["gpu_power_mean_w"] == pytest.approx(300)
    assert values["gpu_power_peak_w"] == 310.0
    assert values["cpu_package_energy_j"] == pytest.approx(100)
    assert values["cpu_package_power_mean_w"] == pytest.approx(50)
    assert values["cpu_package_power_peak_w"] == pytest.approx(50)


def test_domain_without_sensor_is_not_measured():
    rows = [(0, "nvml:0", 0.0, 100.0), (S, "nvml:0", 100e3, 100.0)]
    values = energy_values(_samples(rows), [GPU], 0, S, output_tokens=10)
    assert values["gpu_energy_j"] == pytest.approx(100)
    assert all(math.isnan(v) for k, v in values.items() if k.startswith("cpu_package"))
    silent = energy_values(_samples([]), [GPU], 0, S, output_tokens=10)  # a sensor that recorded nothing
    assert all(math.isnan(v) for v in silent.values())


def test_run_energy_uses_the_request_span_and_server_token_counts():
    requests = pd.DataFrame({"sent_ns": [S, 2 * S], "end_ns": [2 * S, 3 * S], "completion_tokens": [100, 100]})
    rows = [(t * S, "nvml:0", t * 200e3, 200.0) for t in range(5)]
    values = run_energy(requests, _samples(rows), [GPU])
    assert values["gpu_energy_j"] == pytest.approx(400)
    assert values["gpu_energy_per_output_token_j"] == pytest.approx(2.0)
    assert values["gpu_power_mean_w"] == pytest.approx(200)  # 400 J over the 2 s from 1 s to 3 s
    assert all(math.isnan(v) for v in run_energy(requests, _samples([]), []).values())


class FakeSensor:
    def __init__(self, name: str, watts: float) -> None:
        self.info = SensorInfo(sensor=name, domain="gpu", device="fake", method="fake", energy_unit_j=1.0, wrap=None)
        self.watts, self.energy = watts, 0.0

    def read(self):
        self.energy += self.watts
        return self.energy, self.watts


def test_sampler_writes_one_line_per_sensor_per_tick(tmp_path):
    ticks = iter(range(0, 10**12, S))
    sampler = PowerSampler([FakeSensor("a", 1.0), FakeSensor("b", 2.0)], tmp_path / POWER_NAME, 3600,
                           clock=lambda: next(ticks))
    sampler.start()
    sampler.stop()  # one reading at start, one at stop: the interval never elapses
    samples = load_power_samples(tmp_path)
    assert sampler.samples == 2
    assert samples["sensor"].tolist() == ["a", "b", "a", "b"]
    assert samples["energy_raw"].tolist() == [1.0, 2.0, 2.0, 4.0]


def test_sampling_records_the_sensors_and_the_sample_count(tmp_path):
    with power_sampling(tmp_path, 0.001, find=lambda: ([FakeSensor("a", 5.0)], [])) as entry:
        pass
    assert entry["status"] == "measured"
    assert entry["sensors"][0]["sensor"] == "a"
    assert entry["samples"] == len(load_power_samples(tmp_path)) >= 2


def test_no_sensor_means_not_measured_and_no_file(tmp_path):
    why = ["NVML: nvidia-ml-py is not installed", "RAPL: no powercap zone on this machine"]
    with power_sampling(tmp_path, 0.1, find=lambda: ([], why)) as entry:
        pass
    assert entry["status"] == "not measured" and entry["not_available"] == why
    assert not (tmp_path / POWER_NAME).exists()
    with power_sampling(tmp_path, 0, find=lambda: pytest.fail("no discovery when off")) as entry:
        pass
    assert entry["status"] == "off"


def test_rapl_zone_read_from_powercap_files(tmp_path):
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("123456\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    sensors, why = rapl_sensors(str(tmp_path / "intel-rapl:[0-9]*"))
    assert why is None and sensors[0].info.wrap == 262143328850.0
    assert sensors[0].read() == (123456.0, None)
    assert rapl_sensors(str(tmp_path / "nothing*"))[0] == []


def test_torn_last_sample_line_is_dropped(tmp_path):
    line = json.dumps({"t_ns": 1, "sensor": "a", "energy_raw": 1.0, "power_w": None})
    (tmp_path / POWER_NAME).write_text(line + "\n" + line[:10])
    assert len(load_power_samples(tmp_path)) == 1
