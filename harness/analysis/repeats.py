"""Repeated runs (`--repeat N`): the same request set run N times, each repetition a run of its own.

Each repetition's manifest holds `repeat: {group, index, count}` (the group is the first
repetition's run_id) and its records stay in its own folder; the repetitions of a group are found
beside each other. Across repetitions, each compared figure gets its mean, standard deviation and
a 95% Student-t interval of the mean (`mean_interval`), set beside the within-run bootstrap
interval of each repetition: on a shared host the run-to-run spread is often the larger one, and
it is the one that decides whether a 3% change is real. Where both sides of a comparison have at
least two repetitions, `compare_repeated` (the compare command, the report, and the nightly gate
through `repetition_change`) judges the change by the repetitions (`welch_relative_change`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.compare import (
    RATIO_METRICS,
    STAT_FNS,
    compare_loaded,
    compared_rows,
    headline_metrics,
    run_statistic,
    verdict,
)
from harness.analysis.run import Run
from harness.analysis.stats import Interval, bootstrap_ci, bootstrap_ratio_of_sums, mean_interval, welch_relative_change
from harness.errors import SparkbenchError
from harness.records.rundir import MANIFEST_NAME, load_record

REPEAT = "repeat"  # the manifest key
REPETITION_COLUMNS = ["metric", "stat", "repetitions", "mean", "sd", "ci95_low", "ci95_high", "across_halfwidth_rel",
                      "within_halfwidth_rel"]


def repeat_entry(group: str, index: int, count: int) -> dict[str, object]:
    """The manifest's `repeat` record of repetition `index` (from 1) of `count` in `group`."""
    return {"group": group, "index": index, "count": count}


def repetitions(run: Run) -> list[Run]:
    """The runs of `run`'s repetition group found beside it, in order; `[run]` for a single run."""
    if run.record.repeat is None:
        return [run]
    group, found = run.record.repeat.group, {}
    for manifest_path in sorted(run.path.parent.glob(f"*/{MANIFEST_NAME}")):
        try:
            entry = load_record(manifest_path.parent).repeat
        except (SparkbenchError, OSError):
            continue
        if entry is not None and entry.group == group:
            found[entry.index] = run if manifest_path.parent == run.path else Run.load(manifest_path.parent)
    return [found[i] for i in sorted(found)]


def within_run_interval(run: Run, metric: str, stat: str) -> Interval:
    """One run's figure with its 95% bootstrap interval over its requests."""
    rows = compared_rows(run, metric)
    if metric in RATIO_METRICS:
        return bootstrap_ratio_of_sums(*RATIO_METRICS[metric](rows))
    values = rows[metric].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        return bootstrap_ci(values[np.isfinite(values)], STAT_FNS[stat])


def _halfwidth_rel(point: float, low: float, high: float) -> float:
    return (high - low) / 2 / abs(point) if point and math.isfinite(low) else math.nan


def repetition_table(runs: Sequence[Run]) -> pd.DataFrame:
    """Per compared figure: repetitions, mean, sd, the 95% interval of the mean, its half-width as a
    fraction of the mean, and the mean half-width of each repetition's own bootstrap interval."""
    rows = []
    for metric, stat in headline_metrics():
        values = np.array([run_statistic(run, metric, stat) for run in runs], dtype=float)
        if not np.isfinite(values).any():
            continue
        mean, low, high = mean_interval(values)
        within = [_halfwidth_rel(*within_run_interval(run, metric, stat)) for run in runs]
        finite = values[np.isfinite(values)]
        rows.append({"metric": metric, "stat": stat, "repetitions": int(finite.size), "mean": mean,
                     "sd": float(finite.std(ddof=1)) if finite.size > 1 else math.nan, "ci95_low": low,
                     "ci95_high": high, "across_halfwidth_rel": _halfwidth_rel(mean, low, high),
                     "within_halfwidth_rel": float(np.nanmean(within)) if np.isfinite(within).any() else math.nan})
    return pd.DataFrame(rows, columns=REPETITION_COLUMNS)


def repetition_change(base_runs: Sequence[Run], cand_runs: Sequence[Run], metric: str, stat: str) -> Interval:
    """Relative change of the repetitions' mean figure, with its 95% Welch interval (NaN bounds
    unless each side has two repetitions)."""
    base = [run_statistic(run, metric, stat) for run in base_runs]
    cand = [run_statistic(run, metric, stat) for run in cand_runs]
    return welch_relative_change(np.array(base, dtype=float), np.array(cand, dtype=float))


def _mean_of(runs: Sequence[Run], metric: str, stat: str) -> float:
    return mean_interval(np.array([run_statistic(run, metric, stat) for run in runs], dtype=float))[0]


def with_repetitions(table: pd.DataFrame, runs: Sequence[Run]) -> pd.DataFrame:
    """The comparison with each candidate row judged by the repetitions where the candidate and
    the baseline both belong to repetition groups of two or more (and not to the same one): value
    and baseline value become the repetitions' means, change and interval the Welch ones, and
    `interval` says which spread decided (`bootstrap` elsewhere)."""
    table = table.assign(interval="bootstrap")
    compared = set(headline_metrics())
    groups = {run.run_id: repetitions(run) for run in runs}
    for index, row in table.iterrows():
        base_group, cand_group = groups[row["baseline_run_id"]], groups[row["run_id"]]
        same = {r.run_id for r in base_group} & {r.run_id for r in cand_group}
        if row["run_id"] == row["baseline_run_id"] or same or min(len(base_group), len(cand_group)) < 2 \
                or (row["metric"], row["stat"]) not in compared:
            continue
        change, low, high = repetition_change(base_group, cand_group, row["metric"], row["stat"])
        table.loc[index, ["value", "baseline_value", "change", "ci95_low", "ci95_high", "interval"]] = [
            _mean_of(cand_group, row["metric"], row["stat"]), _mean_of(base_group, row["metric"], row["stat"]),
            change, low, high, f"repetitions {len(base_group)} vs {len(cand_group)}"]
    return table


def compare_repeated(runs: Sequence[Run], baseline: str | None = None) -> pd.DataFrame:
    """`compare_loaded`, then the repetition-level spread where it exists (`with_repetitions`),
    verdicts recomputed from the intervals that decided."""
    table = with_repetitions(compare_loaded(runs, baseline), runs)
    table["verdict"] = [verdict(row) for _, row in table.iterrows()]
    return table
