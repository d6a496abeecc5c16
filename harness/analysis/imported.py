"""An imported run (`sparkbench import`) read as a run: the tool's figures, never sparkbench's.

Its derived table has sparkbench's columns so that every reader of runs can take it, but only
the figures the tool measured hold values (in the tool's definitions, named in the manifest); every
other column is NaN, "not measured". Its summary is the tool's per-request figures summarized
(where it kept them) and the aggregates the tool computed itself (stats `tool_*`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.errors import SparkbenchError
from harness.metrics import SUMMARY_COLUMNS
from harness.metrics.schema import DERIVED_COLUMNS
from harness.metrics.summary import POOLED, distribution_rows, distribution_samples, ok_requests, outcome_values
from harness.records.imported import AGGREGATES_NAME, REQUEST_COLUMNS, REQUESTS_NAME, ImportEntry
from harness.records.requests import COLUMNS

MEASURED = {"ttft_ms": "ms", "tpot_ms": "ms", "e2e_ms": "ms", "itl_ms": "ms", "completion_tokens": "tokens",
            "prompt_tokens": "tokens"}
OUTCOMES = ("requests", "requests_ok", "requests_failed", "error_rate")
OUTCOME_UNITS = {"requests": "count", "requests_ok": "count", "requests_failed": "count", "error_rate": "fraction"}
JSON_COLUMNS = ("sampling_json", "item_json", "meta_info_json")  # the tool kept none: empty objects
LIST_COLUMNS = {"itl_ms", "chunk_gaps_ms", "chunk_gap_tokens", "chunk_ns", "chunk_tokens", "output_ids",
                "text_ns", "text_chars"}


def imported_table(run_dir: Path) -> pd.DataFrame:
    """The tool's per-request rows with every record and derived column: NaN where it measured nothing."""
    table = load_imported_requests(run_dir)
    wanted = list(dict.fromkeys([*COLUMNS, *DERIVED_COLUMNS]))
    out = table.reindex(columns=[*wanted, *[c for c in REQUEST_COLUMNS if c not in wanted]])
    for column in LIST_COLUMNS & set(out.columns) - set(REQUEST_COLUMNS):
        out[column] = pd.Series([[] for _ in range(len(out))], index=out.index, dtype=object)
    for column in JSON_COLUMNS:
        out[column] = "{}"
    out["itl_ms"] = pd.Series([list(cell) for cell in table["itl_ms"]], index=out.index, dtype=object)
    return out


def imported_summary(run_dir: Path, entry: ImportEntry, run_id: str, workload: str) -> pd.DataFrame:
    """The tool's per-request figures summarized where it kept them, then its own aggregates."""
    rows = per_request_rows(imported_table(run_dir)) if entry.per_request else []
    aggregates = load_imported_aggregates(run_dir)
    rows += list(aggregates[["metric", "stat", "value", "unit"]].itertuples(index=False, name=None))
    table = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS[2:]))
    table.insert(0, "workload", workload)
    table.insert(0, "run_id", run_id)
    return table


def per_request_rows(table: pd.DataFrame) -> list[tuple[str, str, float, str]]:
    """Outcomes of every request, and the distribution of each figure the tool measured over the ok ones."""
    outcomes = outcome_values(table)
    rows = [(name, "value", outcomes[name], OUTCOME_UNITS[name]) for name in OUTCOMES]
    ok = ok_requests(table)
    for metric, unit in MEASURED.items():
        samples = distribution_samples(ok, metric) if metric in POOLED else ok[metric].to_numpy(dtype=float)
        if np.isfinite(samples).any():  # a figure the tool never measured is absent, not a row of NaN
            rows += distribution_rows(metric, samples, unit)
    return rows


def provenance_line(entry: ImportEntry) -> str:
    """Who measured an imported run, whether per request, and each figure's definition in that tool."""
    version = entry.tool_version or "version not recorded in the file"
    lines = [f"imported from {entry.tool} ({version}): {entry.note}"]
    lines += [f"  {metric}: {definition}" for metric, definition in entry.definitions.items()]
    return "\n".join(lines)


def load_imported_requests(run_dir: Path) -> pd.DataFrame:
    """The tool's per-request table; an empty one (REQUEST_COLUMNS) where it kept only aggregates."""
    path = Path(run_dir) / REQUESTS_NAME
    if not path.exists():
        return pd.DataFrame(columns=REQUEST_COLUMNS)
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a damaged file
        raise SparkbenchError(f"{path}: cannot be read as Parquet ({type(exc).__name__})") from exc


def load_imported_aggregates(run_dir: Path) -> pd.DataFrame:
    path = Path(run_dir) / AGGREGATES_NAME
    try:
        return pd.read_csv(path)
    except FileNotFoundError as exc:
        raise SparkbenchError(f"{run_dir}: no {AGGREGATES_NAME}; the imported run is incomplete") from exc
