"""Energy per output token from the power samples recorded beside the requests (`power.jsonl`).

Samples: one row per sensor reading, `t_ns` on the client's monotonic clock, `energy_raw` (the
device's cumulative counter in its own unit) and `power_w` (None where the device reports none).
The window is the run span, first request sent to last `[DONE]` (`run_span_s`): energy in it
includes prefill and the short gaps between requests, so J per output token is the whole cost of
serving the run divided by what it produced.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

DOMAINS = ("gpu", "cpu_package")
# Per domain, metric suffix and unit; the metric name is f"{domain}_{suffix}".
ENERGY_UNITS = {"energy_j": "J", "energy_per_output_token_j": "J/token", "output_tokens_per_j": "tokens/J",
                "power_mean_w": "W", "power_peak_w": "W"}


def counter_joules(raw: np.ndarray, unit_j: float, wrap: float | None) -> np.ndarray:
    """Cumulative energy in J from a raw counter: `unit_j * (raw - raw[0] + wrap * wraps so far)`.

    A reading below the previous one is a wrap-around when the counter wraps (`wrap`, e.g. RAPL's
    max_energy_range_uj): `wrap` is added from there on. Without `wrap` a drop is a reset, and the
    readings from it on are NaN rather than a guess.
    """
    raw = np.asarray(raw, dtype=float)
    if raw.size == 0:
        return raw
    steps = np.diff(raw)
    dropped = steps < 0
    steps = np.where(dropped, steps + (wrap if wrap else math.nan), steps)
    return unit_j * np.concatenate([[0.0], np.cumsum(steps)])


def value_at(t_ns: np.ndarray, values: np.ndarray, at_ns: float) -> float:
    """Linear interpolation of `values` at `at_ns`; NaN outside the sampled span."""
    if t_ns.size == 0 or not (t_ns[0] <= at_ns <= t_ns[-1]):
        return math.nan
    return float(np.interp(at_ns, t_ns, values))


def window_energy_j(t_ns: np.ndarray, joules: np.ndarray, start_ns: float, end_ns: float) -> float:
    """Energy in [start, end], J: cumulative counter interpolated at the window's ends,
    `E(end) - E(start)`. NaN unless the samples cover the whole window."""
    return value_at(t_ns, joules, end_ns) - value_at(t_ns, joules, start_ns)


def power_energy_j(t_ns: np.ndarray, power_w: np.ndarray, start_ns: float, end_ns: float) -> float:
    """Energy in [start, end] from power readings alone, J: trapezoid rule over the readings,
    interpolated at the window's ends (`sum((P_i + P_i+1) / 2 * dt)`). NaN unless covered."""
    if not all(np.isfinite(value_at(t_ns, power_w, at)) for at in (start_ns, end_ns)):
        return math.nan
    inside = (t_ns > start_ns) & (t_ns < end_ns)
    times = np.concatenate([[start_ns], t_ns[inside], [end_ns]])
    watts = np.interp(times, t_ns, power_w)
    return float(np.sum((watts[1:] + watts[:-1]) / 2 * np.diff(times)) / 1e9)


def peak_power_w(t_ns: np.ndarray, power_w: np.ndarray, joules: np.ndarray, start_ns: float, end_ns: float) -> float:
    """Highest power in the window, W: the largest reading taken in [start, end], or, where the
    device reports no power, the largest mean power of one sampling interval, `dE / dt`."""
    inside = (t_ns >= start_ns) & (t_ns <= end_ns) & np.isfinite(power_w)
    if inside.any():
        return float(power_w[inside].max())
    overlapping = (t_ns[1:] > start_ns) & (t_ns[:-1] < end_ns)
    rates = np.diff(joules) / (np.diff(t_ns) / 1e9)
    rates = rates[overlapping & np.isfinite(rates)]
    return float(rates.max()) if rates.size else math.nan


def sensor_energy(samples: pd.DataFrame, info: dict[str, Any], start_ns: float, end_ns: float) -> tuple[float, float]:
    """(energy J, peak W) of one sensor in the window: from its energy counter where it has one,
    else from its power readings."""
    rows = samples.sort_values("t_ns")
    t_ns = rows["t_ns"].to_numpy(dtype=float)
    raw = pd.to_numeric(rows["energy_raw"], errors="coerce").to_numpy(dtype=float)
    power = pd.to_numeric(rows["power_w"], errors="coerce").to_numpy(dtype=float)
    if np.isfinite(raw).all() and raw.size:
        joules = counter_joules(raw, info["energy_unit_j"], info.get("wrap"))
        energy = window_energy_j(t_ns, joules, start_ns, end_ns)
    else:
        joules = np.full(t_ns.shape, math.nan)
        energy = power_energy_j(t_ns, power, start_ns, end_ns) if np.isfinite(power).all() else math.nan
    return energy, peak_power_w(t_ns, power, joules, start_ns, end_ns)


def domain_values(energy_j: float, peak_w: float, window_s: float, output_tokens: float) -> dict[str, float]:
    """The ENERGY_UNITS figures of one domain: energy_j; energy_per_output_token_j =
    `energy_j / output_tokens`; output_tokens_per_j = `output_tokens / energy_j`; power_mean_w =
    `energy_j / window_s`; power_peak_w. NaN wherever an input is missing or zero."""
    def div(a: float, b: float) -> float:
        return a / b if b > 0 and math.isfinite(a) and math.isfinite(b) else math.nan

    return {"energy_j": energy_j, "energy_per_output_token_j": div(energy_j, output_tokens),
            "output_tokens_per_j": div(output_tokens, energy_j), "power_mean_w": div(energy_j, window_s),
            "power_peak_w": peak_w}


def energy_values(samples: pd.DataFrame, sensors: Sequence[dict[str, Any]], start_ns: float, end_ns: float,
                  output_tokens: float) -> dict[str, float]:
    """Every `{domain}_{suffix}` metric (DOMAINS x ENERGY_UNITS) of a run, NaN where not measured.

    A domain's energy is the sum over its sensors (every GPU, every CPU package) and its peak the
    sum of their peaks (an upper bound: the peaks need not coincide). A domain is not measured when
    it has no sensor or any of its sensors fails to cover the window.
    """
    values: dict[str, float] = {}
    for domain in DOMAINS:
        infos = [s for s in sensors if s["domain"] == domain]
        parts = [sensor_energy(samples[samples["sensor"] == s["sensor"]], s, start_ns, end_ns) for s in infos]
        energy = sum(e for e, _ in parts) if parts else math.nan
        peak = sum(p for _, p in parts) if parts else math.nan
        figures = domain_values(energy, peak, (end_ns - start_ns) / 1e9, output_tokens)
        values |= {f"{domain}_{suffix}": value for suffix, value in figures.items()}
    return values


def energy_units() -> dict[str, str]:
    """Unit of every energy metric, by name."""
    return {f"{domain}_{suffix}": unit for domain in DOMAINS for suffix, unit in ENERGY_UNITS.items()}


def run_energy(requests: pd.DataFrame, samples: pd.DataFrame, sensors: Sequence[dict[str, Any]]) -> dict[str, float]:
    """`energy_values` over the run span (first `sent_ns` to last `end_ns`) and the run's output
    tokens (`sum(completion_tokens)`); every figure NaN when nothing was recorded."""
    if requests.empty or samples.empty:
        return dict.fromkeys(energy_units(), math.nan)
    start, end = float(requests["sent_ns"].min()), float(requests["end_ns"].max())
    tokens = float(pd.to_numeric(requests["completion_tokens"], errors="coerce").sum())
    return energy_values(samples, sensors, start, end, tokens)
