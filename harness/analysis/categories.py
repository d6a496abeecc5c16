"""Results by category, for any workload whose prompts carry one (`item["category"]`).

`category_table(run)`: one long row per (category, metric) of the run's own figures: accept length
both ways, the histogram's accept length, decode throughput both ways, TPOT and the per-request
speed, with `overall` last. `category_speedups(base, cand)`: the candidate against a baseline run
on the same questions (paired by prompt_id), per category: the speed-up as Spec-Bench defines it
(mean request tok/s over the baseline's) and as the ratio of aggregate speeds, each with a paired
95% bootstrap interval, and how many of the pairs have differing outputs (`outputs_differ`). Both are long tables: `run_id, category, metric, value, unit` (+ interval).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from harness.analysis.acceptance import requests_histogram
from harness.analysis.compare import aligned, pairable
from harness.analysis.run import Run
from harness.analysis.stats import bootstrap_ratio_of_sums_change, bootstrap_relative_change
from harness.metrics.acceptance import histogram_accept_length
from harness.metrics.catalogue import CATALOGUE
from harness.metrics.speculative import accept_length_request_weighted, accept_length_token_weighted
from harness.metrics.speedup import (
    request_time_parts,
    request_tok_s,
    speedup_aggregate,
    speedup_mean_of_requests,
)
from harness.metrics.summary import decode_throughput_aggregate, decode_throughput_mean_of_requests

OVERALL = "overall"
TABLE_COLUMNS = ["run_id", "category", "metric", "value", "unit", "n"]
SPEEDUP_COLUMNS = [*TABLE_COLUMNS, "ci95_low", "ci95_high", "baseline_run_id", "outputs_differ"]


def categories(derived: pd.DataFrame) -> pd.Series:
    """Each request's category from its item (None where the prompt carries none)."""
    return pd.Series([json.loads(raw or "{}").get("category") for raw in derived["item_json"]],
                     index=derived.index, dtype=object)


def has_categories(run: Run) -> bool:
    return not run.measured.empty and categories(run.measured).notna().any()


def groups(derived: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(category, rows) in order of first appearance, then `overall` (every row)."""
    names = categories(derived)
    found = [(name, derived[names == name].reset_index(drop=True)) for name in dict.fromkeys(names.dropna())]
    return [*found, (OVERALL, derived)]


def _nanmean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else math.nan


def category_values(rows: pd.DataFrame) -> dict[str, float]:
    """The figures of one category's requests, by metric name (the catalogue's)."""
    histogram = requests_histogram(rows)
    return {
        "requests_ok": float(len(rows)),
        "accept_length_request_weighted": accept_length_request_weighted(rows),
        "accept_length_token_weighted": accept_length_token_weighted(rows),
        "accept_length_histogram": histogram_accept_length(histogram) if histogram else math.nan,
        "decode_throughput_aggregate": decode_throughput_aggregate(rows),
        "decode_throughput_mean_of_requests": decode_throughput_mean_of_requests(rows),
        "tpot_ms": _nanmean(rows["tpot_ms"].to_numpy(dtype=float)),
        "request_tok_s": _nanmean(request_tok_s(rows)),
    }


def category_table(run: Run) -> pd.DataFrame:
    """The run's figures per category (TABLE_COLUMNS), `overall` last; a run whose prompts carry no
    category has one row set, named after its workload. `tpot_ms` and `request_tok_s` are means
    over the category's requests."""
    if run.measured.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    named = has_categories(run)
    rows = [(run.run_id, name if named else run.workload, metric, value, CATALOGUE[metric].unit, len(part))
            for name, part in groups(run.measured) for metric, value in category_values(part).items()]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _speedups(base: pd.DataFrame, cand: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """Both speed-ups of aligned rows with their paired 95% intervals, (point, low, high)."""
    keep = np.isfinite(request_tok_s(base)) & np.isfinite(request_tok_s(cand))
    base, cand = base[keep].reset_index(drop=True), cand[keep].reset_index(drop=True)
    if base.empty:
        return {name: (math.nan, math.nan, math.nan) for name in ("speedup_mean_of_requests", "speedup_aggregate")}
    _, low, high = bootstrap_relative_change(request_tok_s(base), request_tok_s(cand), paired=True)
    _, agg_low, agg_high = bootstrap_ratio_of_sums_change(*request_time_parts(base), *request_time_parts(cand),
                                                          paired=True)
    return {"speedup_mean_of_requests": (speedup_mean_of_requests(base, cand), 1 + low, 1 + high),
            "speedup_aggregate": (speedup_aggregate(base, cand), 1 + agg_low, 1 + agg_high)}


def differing_outputs(base: pd.DataFrame, cand: pd.DataFrame) -> int:
    """Aligned pairs whose outputs differ: the token ids where both kept them, else the text. Greedy
    plain and speculative runs should agree; a pair that does not times different answers."""
    def output(row: pd.Series) -> tuple:
        ids = row.get("output_ids")
        return tuple(ids) if ids is not None and len(ids) else (row.get("output_text"),)

    return sum(output(b) != output(c) for (_, b), (_, c) in zip(base.iterrows(), cand.iterrows()))


def category_speedups(base: Run, cand: Run) -> pd.DataFrame:
    """The candidate's speed-ups against `base` per category (SPEEDUP_COLUMNS), on the questions
    both answered; a workload whose prompts carry no category has one, named after the workload
    (so GSM8K and synthetic runs stand beside the tasks). Empty when the runs are not of the same
    questions."""
    if base.measured.empty or not pairable(base, cand):
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
    base_rows, cand_rows = aligned(base, cand)
    names = categories(base_rows)
    rows = []
    for name, part in groups(base_rows):
        chosen = (names == name).to_numpy() if name != OVERALL else np.ones(len(base_rows), dtype=bool)
        label = name if has_categories(base) else base.workload
        paired = cand_rows[chosen].reset_index(drop=True)
        differ = differing_outputs(part, paired)
        for metric, (value, low, high) in _speedups(part, paired).items():
            rows.append((cand.run_id, label, metric, value, "ratio", len(part), low, high, base.run_id, differ))
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS)
