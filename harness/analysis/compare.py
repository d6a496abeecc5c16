"""Comparing runs against a baseline run: relative changes with 95% bootstrap intervals.

`compare_runs` returns a long table, one row per (run, metric, stat), COMPARISON_COLUMNS:
- caption: how the run is named (`Run.caption`: label, concurrency, scale, status);
- value, unit: the run's statistic over the requests the comparison uses (n of them);
- baseline_value: the baseline's statistic over the same prompts (paired) or all its requests;
- change: `value / baseline_value - 1` (change_kind "relative", 0.10 = +10%), or for accuracy the
  difference `value - baseline_value` (change_kind "difference", fraction of questions);
- ci95_low, ci95_high: 95% interval of the change (harness.analysis.stats); p_value: exact McNemar (accuracy);
- paired: whether the requests were paired by prompt_id (see `pairable`);
- verdict: better / worse / no clear change (see `verdict`), empty on the baseline's rows.
Beside the raw aggregate decode throughput, stat `length_matched` holds the candidate reweighted to
the baseline's output-length mix (`length_matched_throughput`; its change is against the baseline's
raw aggregate) and `length_match_coverage` the share of baseline requests whose lengths it covers.
A speculative candidate against a non-speculative baseline of the same workload and model also
gets the verification-cost rows (`harness.analysis.verify_pair`; no change, no interval).
The baseline's own rows carry its full-run values and no change.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.run import Run
from harness.analysis.stats import (
    accuracy_change,
    bootstrap_change,
    bootstrap_ratio_of_sums_change,
    bootstrap_relative_change,
    discordant_counts,
    mcnemar_exact,
)
from harness.analysis.verify_pair import verify_cost_rows
from harness.errors import SparkbenchError
from harness.metrics import length_match_weights, length_matched_throughput
from harness.metrics.catalogue import CATALOGUE, compared_stats
from harness.metrics.slo import attainment_parts, goodput_parts
from harness.metrics.speculative import accept_length_parts
from harness.metrics.summary import decode_throughput_parts

COMPARISON_COLUMNS = ["run_id", "caption", "workload", "metric", "stat", "value", "unit", "baseline_run_id",
                      "baseline_value", "change", "change_kind", "ci95_low", "ci95_high", "paired", "n",
                      "p_value", "verdict"]
STAT_FNS = {"mean": np.nanmean, "p50": lambda x, axis=-1: np.nanpercentile(x, 50, axis=axis),
            "p95": lambda x, axis=-1: np.nanpercentile(x, 95, axis=axis)}
# Workload spec keys that may differ between runs without changing which prompt a prompt_id names:
# the synthetic salt only replaces the first tokens (to defeat the prefix cache), a dataset's
# `source` is where its file lay (its sha256 says what it held), the rest select or sample questions.
PER_RUN_KEYS = {"salt", "num_prompts", "limit", "offset", "shuffle", "shuffle_seed", "base_seed",
                "seed_rule", "sampling", "source"}
LENGTH_BINS = 10
VERDICT_ALPHA = 0.05  # a McNemar p-value below it makes an accuracy change clear


# Run-level ratios of sums: each metric's numerator and denominator per request, from harness.metrics.
RATIO_METRICS = {"decode_throughput_aggregate": decode_throughput_parts,
                 "accept_length_token_weighted": accept_length_parts,
                 "slo_attainment": attainment_parts, "goodput_rps": goodput_parts}
# Judged over every request of the measured window, failed ones included (they missed the SLO), and
# compared unpaired: the other metrics use the ok requests only.
JUDGED_METRICS = {"slo_attainment", "goodput_rps"}


def pairable(base: Run, cand: Run) -> bool:
    """Whether prompt_ids name the same prompts in both runs: same workload spec apart from
    PER_RUN_KEYS (so the same workload and the same seed), and at least one prompt_id in common."""
    def key(run: Run) -> dict:
        return {k: v for k, v in run.record.workload.as_recorded().items() if k not in PER_RUN_KEYS}
    shared = set(base.measured["prompt_id"]) & set(cand.measured["prompt_id"])
    return key(base) == key(cand) and bool(shared)


def aligned(base: Run, cand: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two runs' derived rows of their shared prompt_ids, in the same order (baseline's)."""
    shared = base.measured[base.measured["prompt_id"].isin(set(cand.measured["prompt_id"]))]
    cand_rows = cand.measured.set_index("prompt_id").loc[shared["prompt_id"]].reset_index()
    return shared.reset_index(drop=True), cand_rows


def _quiet(fn, *args):
    """fn(*args) without numpy's warnings about all-NaN slices (those give NaN, as documented)."""
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def _value(derived: pd.DataFrame, metric: str, stat: str) -> float:
    """One run's statistic: a ratio of sums for RATIO_METRICS, else STAT_FNS of the column."""
    if metric in RATIO_METRICS:
        num, den = RATIO_METRICS[metric](derived)
        return float(num.sum() / den.sum()) if den.sum() > 0 else math.nan
    return float(_quiet(STAT_FNS[stat], derived[metric].to_numpy(dtype=float)))


def _change(base: pd.DataFrame, cand: pd.DataFrame, metric: str, stat: str, paired: bool):
    """(point, low, high) of the relative change of one metric."""
    if metric in RATIO_METRICS:
        parts = (*RATIO_METRICS[metric](base), *RATIO_METRICS[metric](cand))
        return _quiet(bootstrap_ratio_of_sums_change, *parts, paired)
    samples = [frame[metric].to_numpy(dtype=float) for frame in (base, cand)]
    return _quiet(lambda: bootstrap_relative_change(*samples, paired, stat=STAT_FNS[stat]))


def length_edges(base_tokens: np.ndarray, cand_tokens: np.ndarray, bins: int = LENGTH_BINS) -> list[float]:
    """Output-length bin edges: the deciles (for bins = 10) of each run's completion_tokens, merged,
    the last edge one token past the longest output so that every request falls inside. Taking
    each run's own quantiles keeps runs whose lengths do not overlap in separate bins (coverage 0)."""
    runs = [t[np.isfinite(t)] for t in (base_tokens, cand_tokens)]
    if not any(t.size for t in runs):
        return [0.0, 1.0]
    levels = np.linspace(0, 1, bins + 1)
    quantiles = np.unique(np.concatenate([np.quantile(t, levels) for t in runs if t.size]))
    return [*quantiles.tolist(), float(quantiles[-1]) + 1]


def _length_matched_row(base: pd.DataFrame, cand: pd.DataFrame, paired: bool) -> dict:
    """Candidate's aggregate decode throughput reweighted to the baseline's output-length mix
    (`length_matched_throughput`), and its change against the baseline's raw aggregate, with a
    bootstrap interval that recomputes the weights in every resample."""
    base_tokens, cand_tokens = (f["completion_tokens"].to_numpy(dtype=float) for f in (base, cand))
    edges = length_edges(base_tokens, cand_tokens)
    matched = length_matched_throughput(cand, base, edges).set_index("metric")["value"]
    (bn, bd), (cn, cd) = decode_throughput_parts(base), decode_throughput_parts(cand)

    def change(ib: np.ndarray, ic: np.ndarray) -> np.ndarray:
        out = np.empty(len(ib))
        for row, (i, j) in enumerate(zip(ib, ic)):
            w, _ = length_match_weights(cand_tokens[j], base_tokens[i], edges)
            out[row] = (w * cn[j]).sum() / (w * cd[j]).sum() / (bn[i].sum() / bd[i].sum()) - 1
        return out

    point, low, high = _quiet(bootstrap_change, len(base), len(cand), change, paired)
    return {"metric": "decode_throughput_aggregate", "stat": "length_matched",
            "value": float(matched["decode_throughput_aggregate"]), "unit": "tok/s",
            "baseline_value": _value(base, "decode_throughput_aggregate", "value"), "change": point,
            "ci95_low": low, "ci95_high": high, "coverage": float(matched["target_coverage"])}


def _accuracy_rows(base: Run, cand: Run | None) -> list[dict]:
    """The scored workload's accuracy (its scorer's `correct` flag): the run's own (cand None), or
    the paired change by question index with its Agresti-Min interval and exact McNemar p-value."""
    flag, metric = base.scorer.correct, base.scorer.accuracy_metric
    if cand is None:
        flags = base.scores[flag].to_numpy(dtype=bool)
        return [{"metric": metric, "stat": "mean", "value": flags.mean() if flags.size else math.nan,
                 "unit": "fraction", "n": flags.size}]
    both = base.scores.merge(cand.scores, on="question_index", suffixes=("_base", "_cand"))
    flags_b = both[f"{flag}_base"].to_numpy(dtype=bool)
    flags_c = both[f"{flag}_cand"].to_numpy(dtype=bool)
    point, low, high = accuracy_change(flags_b, flags_c)
    return [{"metric": metric, "stat": "mean", "value": flags_c.mean() if flags_c.size else math.nan,
             "unit": "fraction", "baseline_value": flags_b.mean() if flags_b.size else math.nan,
             "change": point, "change_kind": "difference", "ci95_low": low, "ci95_high": high,
             "paired": True, "n": flags_c.size, "p_value": mcnemar_exact(*discordant_counts(flags_b, flags_c))}]


def _rows_of(run: Run, measured: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows a metric is compared over: every judged request for JUDGED_METRICS, else `measured`."""
    return run.judged if metric in JUDGED_METRICS else measured


def compared_rows(run: Run, metric: str) -> pd.DataFrame:
    """The rows of one run that compare reads `metric` over (`_rows_of`)."""
    return _rows_of(run, run.measured, metric)


def run_statistic(run: Run, metric: str, stat: str) -> float:
    """One run's figure of `metric` and `stat`, read as compare reads it."""
    return _value(compared_rows(run, metric), metric, stat)


def _metric_unit(metric: str) -> str:
    return CATALOGUE[metric].unit


def headline_metrics() -> list[tuple[str, str]]:
    """(metric, stat) pairs compared, in catalogue order: a statistic of a per-request column's
    finite values, or for RATIO_METRICS a ratio of sums over the requests."""
    return compared_stats()


def baseline_rows(run: Run) -> list[dict]:
    """The baseline's own rows: full-run values, no change."""
    rows = [{"metric": m, "stat": s, "value": _value(_rows_of(run, run.measured, m), m, s), "unit": _metric_unit(m),
             "n": len(run.measured)} for m, s in headline_metrics()]
    return rows + (_accuracy_rows(run, None) if run.scores is not None else [])


def candidate_rows(base: Run, cand: Run) -> list[dict]:
    """A candidate's rows against the baseline: values, changes and intervals."""
    paired = pairable(base, cand)
    base_rows, cand_rows = aligned(base, cand) if paired else (base.measured, cand.measured)
    rows = []
    for metric, stat in headline_metrics():
        base_of, cand_of = _rows_of(base, base_rows, metric), _rows_of(cand, cand_rows, metric)
        point, low, high = _change(base_of, cand_of, metric, stat, paired and metric not in JUDGED_METRICS)
        rows.append({"metric": metric, "stat": stat, "value": _value(cand_of, metric, stat),
                     "unit": _metric_unit(metric), "baseline_value": _value(base_of, metric, stat),
                     "change": point, "ci95_low": low, "ci95_high": high})
    matched = _length_matched_row(base_rows, cand_rows, paired)
    after = 1 + next(i for i, row in enumerate(rows) if row["metric"] == matched["metric"])
    rows[after:after] = [{k: v for k, v in matched.items() if k != "coverage"},
                         {"metric": "length_match_coverage", "stat": "value", "value": matched["coverage"],
                          "unit": "fraction"}]
    rows += verify_cost_rows(base, cand)
    for row in rows:
        row |= {"paired": paired, "n": len(cand_rows)}
    if base.scores is not None and cand.scores is not None and base.scorer == cand.scorer:
        rows += _accuracy_rows(base, cand)
    return rows


def pick_baseline(runs: Sequence[Run], baseline: str | None = None) -> Run:
    """The run whose run_id is `baseline` (default: the first run); a one-line error when none is."""
    base = next((r for r in runs if r.run_id == baseline), None) if baseline else runs[0]
    if base is None:
        raise SparkbenchError(f"baseline {baseline!r} is none of the runs compared")
    return base


def verdict(row: pd.Series) -> str:
    """`better` or `worse` when the change is clear: its 95% interval excludes zero (accuracy:
    exact McNemar p < VERDICT_ALPHA), judged by the metric's direction (`higher` or `lower` for a
    metric that is neither better nor worse); `no clear change` otherwise; empty without a change."""
    if pd.isna(row["change"]):
        return ""
    if row["change_kind"] == "difference":
        clear = pd.notna(row["p_value"]) and row["p_value"] < VERDICT_ALPHA
    elif pd.isna(row["ci95_low"]):
        return "no interval"
    else:
        clear = row["ci95_low"] > 0 or row["ci95_high"] < 0
    if not clear or row["change"] == 0:
        return "no clear change"
    direction = CATALOGUE[row["metric"]].direction if row["metric"] in CATALOGUE else 0
    if direction == 0:
        return "higher" if row["change"] > 0 else "lower"
    return "better" if (row["change"] > 0) == (direction > 0) else "worse"


def compare_loaded(runs: Sequence[Run], baseline: str | None = None) -> pd.DataFrame:
    """compare_runs on runs already loaded; `baseline` is a run_id (default: the first run)."""
    base = pick_baseline(runs, baseline)
    records = []
    for run in runs:
        rows = baseline_rows(run) if run is base else candidate_rows(base, run)
        for row in rows:
            records.append({"run_id": run.run_id, "caption": run.caption, "workload": run.workload,
                            "baseline_run_id": base.run_id,
                            "change_kind": "relative", **row})
    table = pd.DataFrame(records).reindex(columns=COMPARISON_COLUMNS)
    table["verdict"] = [verdict(row) for _, row in table.iterrows()]
    return table.astype({"n": "Int64"})


def compare_runs(run_dirs: Sequence[Path | str], baseline: Path | str | None = None) -> pd.DataFrame:
    """Compare run directories against a baseline (a run directory or run_id; default the first).

    Pairs requests by prompt_id when both runs share the workload spec and seed (`pairable`).
    """
    return compare_loaded([Run.load(d) for d in run_dirs], baseline_run_id(baseline))


def baseline_run_id(baseline: Path | str | None) -> str | None:
    """The run_id a `--baseline` names: a run directory's, or the text itself (None: the first run)."""
    if baseline is not None and Path(baseline).is_dir():
        return Run.load(baseline).run_id
    return None if baseline is None else str(baseline)


def _format_change(row: pd.Series) -> tuple[str, str]:
    """('+12.3%', '[+10.1%, +14.0%]') for relative changes, percentage points for differences."""
    if pd.isna(row["change"]):
        return "", ""
    unit = "%" if row["change_kind"] == "relative" else " pp"
    text = f"{row['change'] * 100:+.1f}{unit}"
    if pd.isna(row["ci95_low"]):
        return text, ""
    return text, f"[{row['ci95_low'] * 100:+.1f}, {row['ci95_high'] * 100:+.1f}]{unit}"


def format_comparison(df: pd.DataFrame) -> str:
    """The comparison as text for a terminal: one block per run, baseline first."""
    blocks = []
    for run_id, part in df.groupby("run_id", sort=False):
        is_base = run_id == part["baseline_run_id"].iloc[0]
        lines = pd.DataFrame({
            "metric": part["metric"] + " " + part["stat"],
            "value": [f"{v:.4g} {u}" if pd.notna(v) else "n/a" for v, u in zip(part["value"], part["unit"])],
            "baseline": ["" if pd.isna(v) else f"{v:.4g}" for v in part["baseline_value"]],
        })
        changes = [_format_change(row) for _, row in part.iterrows()]
        lines["change"] = [c for c, _ in changes]
        lines["95% CI"] = [i for _, i in changes]
        lines["p"] = ["" if pd.isna(p) else f"{p:.3g}" for p in part["p_value"]]
        lines["verdict"] = part["verdict"].to_numpy()
        paired = part["paired"].dropna()
        how = "baseline" if is_base else ("paired by prompt_id" if paired.any() else "unpaired")
        judged = sorted(set(part.get("interval", pd.Series(dtype=str)).dropna()) - {"bootstrap"})
        how += "".join(f"; changes and intervals from {source}" for source in judged)
        head = f"{part['caption'].iloc[0]} [{run_id}] ({how}, n={part['n'].max()}, workload {part['workload'].iloc[0]})"
        blocks.append(head + "\n" + lines.to_string(index=False))
    return "\n\n".join(blocks)
