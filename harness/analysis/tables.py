"""Tables for people: the run summary printed at the end of a run and by `sparkbench summarize`.

The long summary table (`run_id, workload, metric, stat, value, unit`) is written beside the
records as `summary.csv` (and GSM8K's per-question table as `questions.parquet`); the printed view
picks the headline rows out of the summary.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.analysis.roofline import RooflineInputs, roofline_values, run_roofline
from harness.metrics import SUMMARY_COLUMNS, summarize
from harness.metrics.catalogue import CATALOGUE, headline_stats
from harness.metrics.energy import energy_units, run_energy
from harness.metrics.integrity import FLAGS, integrity_warning
from harness.metrics.roofline import ROOFLINE_UNITS, Roofline
from harness.metrics.values import floats
from harness.power.sampler import load_power_samples
from harness.records.requests import load_requests
from harness.records.rundir import load_manifest
from workloads.gsm8k_scoring import accuracy_summary, score_table

SUMMARY_NAME = "summary.csv"
QUESTIONS_NAME = "questions.parquet"  # GSM8K: prompt, output, gold, both predictions and flags per question
HEADLINE = headline_stats()  # (metric, stats) shown by the headline view, from the catalogue


def scored_questions(requests: pd.DataFrame) -> pd.DataFrame:
    """Per-question GSM8K scoring of a run's records (gold, predictions, correctness flags)."""
    return score_table(requests[["prompt_id", "output_text", "item_json"]])


def with_correctness(requests: pd.DataFrame, scored: pd.DataFrame) -> pd.DataFrame:
    """The records with a boolean `correct` column (strict match), which per-correct metrics read."""
    flags = scored[["prompt_id", "correct_strict"]].rename(columns={"correct_strict": "correct"})
    return requests.merge(flags, on="prompt_id", how="left")


def run_tables(run_dir: Path, inputs: RooflineInputs = RooflineInputs()) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The long summary of one run and, for GSM8K, its per-question table, from the stored records.

    For GSM8K the accuracy rows (strict and flexible, Wilson intervals) join the speed rows, and
    tokens and seconds per correct answer are computed from the same requests.
    """
    manifest = load_manifest(run_dir)
    run_id, workload = manifest["run_id"], manifest["workload"]["name"]
    requests = load_requests(run_dir)
    parts, questions = [counter_rows(manifest), energy_rows(run_dir, manifest, requests)], None
    if workload == "gsm8k" and not requests.empty:
        scored = scored_questions(requests)
        requests = with_correctness(requests, scored)
        parts.append(accuracy_summary(scored))
        questions = scored.merge(requests[["prompt_id", "prompt_text", "output_text"]], on="prompt_id")
    speed = summarize(requests, run_id, workload)
    parts.append(roofline_rows(roofline_of(manifest, requests, speed, inputs)[0]))
    labelled = [part.assign(run_id=run_id, workload=workload)[list(SUMMARY_COLUMNS)] for part in parts]
    return pd.concat([speed, *labelled], ignore_index=True), questions


def run_summary(run_dir: Path, inputs: RooflineInputs = RooflineInputs()) -> pd.DataFrame:
    """The long summary of one run (see run_tables)."""
    return run_tables(run_dir, inputs)[0]


def roofline_of(manifest: dict, requests: pd.DataFrame, summary: pd.DataFrame,
                inputs: RooflineInputs) -> tuple[Roofline | None, str]:
    """The run's decode roofline (harness.analysis.roofline) at its mean decode context,
    `mean(prompt_tokens + completion_tokens / 2)` tokens, or None and why not."""
    values = summary[summary["stat"] == "value"].set_index("metric")["value"]
    context = (floats(requests["prompt_tokens"]) + floats(requests["completion_tokens"]) / 2).mean()
    return run_roofline(manifest, values.to_dict(), float(context), inputs)


def roofline_rows(roofline: Roofline | None) -> pd.DataFrame:
    """ROOFLINE_UNITS rows; NaN when the run has no roofline."""
    return pd.DataFrame([(metric, "value", value, ROOFLINE_UNITS[metric])
                         for metric, value in roofline_values(roofline).items()],
                        columns=["metric", "stat", "value", "unit"])


def counter_rows(manifest: dict) -> pd.DataFrame:
    """Run-level accept length from the server's own counters (delta over the measured requests),
    set beside the per-request figures as a cross-check; empty when the server keeps none."""
    value = (manifest.get("server_counters") or {}).get("accept_length")
    metric = CATALOGUE["accept_length_server_counters"]
    rows = [] if value is None else [(metric.name, "value", value, metric.unit)]
    return pd.DataFrame(rows, columns=["metric", "stat", "value", "unit"])


def energy_rows(run_dir: Path, manifest: dict, requests: pd.DataFrame) -> pd.DataFrame:
    """Energy per output token and power (harness.metrics.energy) from the run's power samples;
    every figure NaN ("not measured") when no sensor answered."""
    sensors = (manifest.get("power") or {}).get("sensors") or []
    values = run_energy(requests, load_power_samples(run_dir), sensors)
    units = energy_units()
    return pd.DataFrame([(metric, "value", value, units[metric]) for metric, value in values.items()],
                        columns=["metric", "stat", "value", "unit"])


def power_note(manifest: dict) -> str:
    """How energy was measured (sensors, method, interval), or why it was not."""
    power = manifest.get("power") or {}
    if power.get("status") != "measured":
        reasons = power.get("not_available") or [power.get("reason") or "the run recorded no power entry"]
        return "not measured (" + "; ".join(reasons) + ")"
    sensors = ", ".join(f"{s['sensor']} {s['device']}" for s in power["sensors"])
    methods = "; ".join(dict.fromkeys(s["method"] for s in power["sensors"]))
    return f"{sensors}: {methods}; every {power['interval_ms']:g} ms, {power.get('samples', 0)} samples"


def stream_warning(summary: pd.DataFrame) -> str | None:
    """The stream integrity warning of a run summary (how many requests were flagged, and why)."""
    values = summary[summary["stat"] == "value"].set_index("metric")["value"]
    counts = {name: values.get(name, 0.0) for name in ("requests_flagged", *(f"requests_{f}" for f in FLAGS))}
    return integrity_warning(counts, values.get("requests", 0.0))


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """Metric rows with the chosen stats as columns, in HEADLINE order (a view for reading)."""
    rows = []
    for metric, stats in HEADLINE:
        part = summary[(summary["metric"] == metric) & summary["stat"].isin(stats)].dropna(subset=["value"])
        if part.empty:
            continue
        row = {"metric": metric, "unit": part["unit"].iloc[0]}
        row.update({s: v for s, v in zip(part["stat"], part["value"])})
        rows.append(row)
    return pd.DataFrame(rows).set_index("metric")


def print_run_summary(run_dir: Path, full: bool = False, inputs: RooflineInputs = RooflineInputs()) -> None:
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir)
    summary, questions = run_tables(run_dir, inputs)
    summary.to_csv(run_dir / SUMMARY_NAME, index=False)
    if questions is not None:
        questions.to_parquet(run_dir / QUESTIONS_NAME, index=False)
    print(f"\nrun {manifest['run_id']}  status={manifest['status']}  "
          f"requests={manifest.get('requests_recorded')}  workload={manifest['workload']['name']}")
    warning = stream_warning(summary)
    if warning:
        print(warning)
    print(f"scale: {manifest.get('scale')}")
    print(f"energy: {power_note(manifest)}")
    roofline, why = roofline_of(manifest, load_requests(run_dir), summary, inputs)
    print("\n".join(["roofline (config: " + why + ")", *roofline.lines()]) if roofline else f"roofline: not computed ({why})")
    with pd.option_context("display.width", 160, "display.max_rows", 500, "display.float_format", "{:.3f}".format):
        print(summary.to_string(index=False) if full else headline(summary).to_string(na_rep=""))
    print(f"records: {run_dir}")
