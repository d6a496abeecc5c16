"""The nightly gate: which metrics regressed between a pinned baseline run and tonight's run.

A metric regresses only when its change is worse than its threshold AND its 95% interval excludes
zero on the bad side. The threshold is the larger of the configured floor and `noise_multiplier`
times the run-to-run spread measured when the baseline was pinned (`harness.nightly.noise`). A
statistic over fewer than `min_requests` requests is shown ungated: a 95% interval from a handful
of requests is not one. A tail percentile is gated only when the sample is large enough to certify
it (`harness.metrics.tail_certified`: 130 requests for P95); below that it is reported, marked
ungated, and its metric's mean is gated in its place. Every gated accuracy regresses when it fell by
more than its threshold (a difference in fraction of questions) AND McNemar's exact test rejects
"no change" at `alpha`. A gated metric that the comparison never produces is refused, never skipped.
Confirmation and host load are the job's (`harness.nightly.job`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd

from harness.errors import SparkbenchError
from harness.metrics.catalogue import ACCURACY as ACCURACY_KIND
from harness.metrics.catalogue import compared_stats, gated
from harness.metrics.stats import tail_certified
from harness.nightly.config import NightlyConfig
from harness.records.atomic import write_text_atomically

# From the metric catalogue: (metric, stat, +1 when higher is better / -1 when lower is better) of
# the metrics gated on their interval, and the accuracies gated on McNemar's test (each of them).
GATED = [(m.name, m.gate_stat, m.direction) for m in gated() if m.kind != ACCURACY_KIND]
ACCURACIES = [(m.name, m.gate_stat) for m in gated() if m.kind == ACCURACY_KIND]
TAIL_QUANTILES = {"p95": 0.95, "p99": 0.99}
TAIL_FALLBACK = "mean"  # gated in place of a tail percentile the sample cannot certify


def check_gates_produced(gates: list[tuple[str, str, int]], accuracies: list[tuple[str, str]]) -> None:
    """Refuse, in one line, a gated (metric, stat) that the comparison does not produce: a gate that
    reads nothing would pass every night without a word."""
    produced = set(compared_stats())
    missing = [f"{m} {s}" for m, s, _ in gates
               if (m, s) not in produced or (s in TAIL_QUANTILES and (m, TAIL_FALLBACK) not in produced)]
    missing += [f"{m} {s}" for m, s in accuracies if s != "mean"]  # compare gives an accuracy's mean only
    if missing:
        raise SparkbenchError(f"gated but never compared: {', '.join(missing)} (metric catalogue)")
VERDICT_COLUMNS = ["workload", "metric", "stat", "baseline_value", "value", "change", "ci95_low", "ci95_high",
                   "threshold", "p_value", "verdict"]


def pinned_baseline(config: NightlyConfig) -> dict[str, str]:
    """workload name -> run directory of the pinned baseline ({} when none is pinned yet)."""
    if not config.baseline_file.exists():
        return {}
    try:
        return json.loads(config.baseline_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SparkbenchError(f"{config.baseline_file} is corrupt: {exc}") from exc


def pin_baseline(config: NightlyConfig, runs: dict[str, Path]) -> None:
    """Write baseline.json whole or not at all (a full disk leaves the last pin as it was)."""
    config.baseline_file.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(config.baseline_file, json.dumps({k: str(v) for k, v in runs.items()}, indent=2))


def _regressed(direction: int, change: float, low: float, high: float, threshold: float) -> bool:
    """Worse than the threshold AND the interval excludes zero on the bad side."""
    if direction > 0:
        return change < -threshold and high < 0
    return change > threshold and low > 0


def gate_metric(row: pd.Series, direction: int, threshold: float) -> str:
    """The verdict of one interval-gated row (`_regressed`), or why it has none."""
    if pd.isna(row["baseline_value"]):
        return "not measured"
    if pd.isna(row["value"]):
        return "regressed (missing in candidate)"  # e.g. speculation switched off
    if pd.isna(row["change"]) or pd.isna(row["ci95_low"]):
        return "no interval"
    return "regressed" if _regressed(direction, row["change"], row["ci95_low"], row["ci95_high"], threshold) else "pass"


def gate_accuracy(row: pd.Series, threshold: float, alpha: float) -> str:
    """Accuracy regresses when it fell by more than `threshold` (fraction of questions) and
    McNemar's exact test rejects 'no change' at `alpha`."""
    return "regressed" if row["change"] < -threshold and row["p_value"] < alpha else "pass"


@functools.cache
def certified_minimum(q: float) -> int:
    """The fewest requests whose q-quantile `tail_certified` accepts (130 for P95)."""
    return next(n for n in range(2, 100_000) if tail_certified(n, q))


def _sample_size(comparison: pd.DataFrame, row: pd.Series) -> int:
    """The smaller of the candidate's and the baseline's request counts for this metric."""
    same = comparison[(comparison["metric"] == row["metric"]) & (comparison["stat"] == row["stat"])]
    return int(same["n"].dropna().min()) if same["n"].notna().any() else 0


def _pick(rows: pd.DataFrame, metric: str, stat: str) -> pd.Series | None:
    match = rows[(rows["metric"] == metric) & (rows["stat"] == stat)]
    return None if match.empty else match.iloc[0]


def _too_few(n: int, stat: str, minimum: int) -> str:
    return f"ungated: {stat} needs {minimum} requests, has {n}" if n < minimum else ""


def gated_rows(comparison: pd.DataFrame, min_requests: int) -> list[tuple[pd.Series, int, str]]:
    """(candidate row, direction, verdict when ungated else "") for every metric the gate shows.

    A tail percentile the sample cannot certify is shown ungated and its mean gated in its place;
    any statistic over fewer than `min_requests` requests is shown ungated.
    """
    candidate = comparison[comparison["run_id"] != comparison["baseline_run_id"]]
    chosen = []
    for metric, stat, direction in GATED:
        row = _pick(candidate, metric, stat)
        if row is None:
            continue
        n, q = _sample_size(comparison, row), TAIL_QUANTILES.get(stat)
        if q is None or tail_certified(n, q):
            chosen.append((row, direction, _too_few(n, stat, min_requests)))
            continue
        chosen.append((row, direction, f"ungated: {stat} needs {certified_minimum(q)} requests, has {n}"))
        fallback = _pick(candidate, metric, TAIL_FALLBACK)
        if fallback is not None:
            chosen.append((fallback, direction, _too_few(n, TAIL_FALLBACK, min_requests)))
    return chosen


def threshold_of(config: NightlyConfig, noise: dict[str, float], metric: str, stat: str) -> float:
    """The configured floor, raised to `noise_multiplier` x the measured run-to-run spread."""
    spread = noise.get(f"{metric} {stat}")
    floor = config.thresholds.get(metric, 0.0)
    return floor if spread is None else max(floor, config.noise_multiplier * spread)


def verdicts(comparison: pd.DataFrame, config: NightlyConfig, noise: dict[str, float] | None = None) -> pd.DataFrame:
    """One verdict row per gated metric of the candidate rows of a comparison table; `noise` is the
    workload's measured spread by "metric stat" (`harness.nightly.noise`), none when not measured."""
    check_gates_produced(GATED, ACCURACIES)
    noise = noise or {}
    rows = []
    for row, direction, ungated in gated_rows(comparison, config.min_requests):
        threshold = threshold_of(config, noise, row["metric"], row["stat"])
        verdict = ungated or gate_metric(row, direction, threshold)
        rows.append({**{c: row.get(c) for c in VERDICT_COLUMNS if c in row}, "threshold": threshold,
                     "verdict": verdict})
    candidate = comparison[comparison["run_id"] != comparison["baseline_run_id"]]
    for metric, stat in ACCURACIES:
        accuracy = _pick(candidate, metric, stat)
        if accuracy is not None:
            threshold = config.thresholds.get(metric, 0.0)
            rows.append({**{c: accuracy.get(c) for c in VERDICT_COLUMNS if c in accuracy}, "threshold": threshold,
                         "verdict": gate_accuracy(accuracy, threshold, config.alpha)})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def history_rows(night: str, comparison: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Tonight's candidate values (and the baseline's, marked) as history rows, with the verdicts."""
    verdict_of = {(r.metric, r.stat): r.verdict for r in table.itertuples()}
    rows = comparison.assign(night=night, role=lambda d: d["run_id"].eq(d["baseline_run_id"]).map(
        {True: "baseline", False: "candidate"}))
    rows = rows[["night", "role", "run_id", "workload", "metric", "stat", "value", "unit"]].copy()
    rows["verdict"] = [verdict_of.get((m, s), "") if role == "candidate" else ""
                       for m, s, role in zip(rows["metric"], rows["stat"], rows["role"])]
    return rows
