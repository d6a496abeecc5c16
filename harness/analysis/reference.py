"""The published DGX Spark figures (results/reference/), in the run-summary schema.

The gains the sources quote are recomputed here from the stored figures, so a typo in the CSV shows
up as a gain that no longer matches the publication (tests/unit/test_reference.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from harness.metrics.model_bytes import WeightDtypes
from harness.metrics.roofline import Roofline, ceiling, decode_roofline
from harness.metrics.schema import SUMMARY_COLUMNS
from harness.records.rundir import REPO_ROOT

REFERENCE_CSV = REPO_ROOT / "results" / "reference" / "published_dgx_spark.csv"
# The ablation ladder on the synthetic workload: each step adds one mechanism to the one before.
LADDER = [
    ("published-baseline", "baseline\n(FlashInfer MoE, FP32 head)"),
    ("published-humming", "+ Humming\nMoE kernels"),
    ("published-humming-fp8head", "+ FP8\nLM head"),
    ("published-all-three", "+ MTP (NEXTN)\nspeculation"),
]
THROUGHPUT = ("decode_throughput_aggregate", "value")
LING_FACTS = REFERENCE_CSV.parent / "ling-3.0-flash-facts.json"
# Weights each non-speculative step reads: the W4A8 checkpoint's MXFP4 weights, and the LM head the
# checkpoint keeps in BF16 (computed in FP32 in the first two steps), then FP8 online.
LADDER_DTYPES = {"published-baseline": WeightDtypes("mxfp4", "bf16"),
                 "published-humming": WeightDtypes("mxfp4", "bf16"),
                 "published-humming-fp8head": WeightDtypes("mxfp4", "fp8")}
SYNTHETIC_CONTEXT = 32768 + 2048 / 2  # mean context of a decode step: 32K prompt, 2K output
REFERENCE_COLUMNS = (*SUMMARY_COLUMNS, "provenance")
QUOTED = "quoted"
KEYS = ["workload", "metric", "stat", "unit"]


def load_reference(path: Path = REFERENCE_CSV) -> pd.DataFrame:
    """The published figures: columns REFERENCE_COLUMNS (the summary's, then `provenance`: "quoted",
    or how the figure was derived or qualified), one row per figure."""
    table = pd.read_csv(path)
    if list(table.columns) != list(REFERENCE_COLUMNS):
        raise ValueError(f"{path}: columns {list(table.columns)}, expected {list(REFERENCE_COLUMNS)}")
    return table


def published(reference: pd.DataFrame, run_id: str, workload: str, metric: str, stat: str) -> float:
    """One stored figure; KeyError when the sources give none."""
    rows = reference[(reference["run_id"] == run_id) & (reference["workload"] == workload)
                     & (reference["metric"] == metric) & (reference["stat"] == stat)]
    if len(rows) != 1:
        raise KeyError(f"no single published {metric}/{stat} for {run_id} on {workload}")
    return float(rows["value"].iloc[0])


def ladder(reference: pd.DataFrame | None = None) -> list[tuple[str, str, float]]:
    """(run_id, step label, synthetic decode throughput in tok/s) for each step of the ladder."""
    reference = load_reference() if reference is None else reference
    return [(run_id, label, published(reference, run_id, "synthetic", *THROUGHPUT)) for run_id, label in LADDER]


def ladder_provenance(reference: pd.DataFrame | None = None) -> dict[str, str]:
    """Provenance of each ladder step's synthetic decode throughput, by run_id."""
    reference = load_reference() if reference is None else reference
    rows = reference[(reference["workload"] == "synthetic") & (reference["metric"] == THROUGHPUT[0])
                     & (reference["stat"] == THROUGHPUT[1])]
    return dict(zip(rows["run_id"], rows["provenance"]))


def ladder_step_ms(reference: pd.DataFrame, run_id: str) -> float:
    """Synthetic decode step of a ladder step, ms: its published TPOT, else `1000 / throughput`."""
    try:
        return published(reference, run_id, "synthetic", "tpot_ms", "mean")
    except KeyError:
        return 1000 / published(reference, run_id, "synthetic", *THROUGHPUT)


def ladder_rooflines(reference: pd.DataFrame | None = None) -> list[tuple[str, str, Roofline]]:
    """(run_id, step label, roofline) of each non-speculative ladder step on one DGX Spark, from the
    model facts the sources state (LING_FACTS) and LADDER_DTYPES. The MTP step is left out: how many
    distinct experts its 4-position verification reads is not published."""
    reference = load_reference() if reference is None else reference
    facts = json.loads(LING_FACTS.read_text(encoding="utf-8"))
    fp32_note = "baseline and Humming compute the head in FP32: counted as one BF16 read of its weights"
    return [(run_id, label, decode_roofline(facts, LADDER_DTYPES[run_id], ladder_step_ms(reference, run_id),
                                            SYNTHETIC_CONTEXT, "bf16", ceiling("GB10"),
                                            [fp32_note] if LADDER_DTYPES[run_id].lm_head == "bf16" else []))
            for run_id, label in LADDER if run_id in LADDER_DTYPES]


def published_gains(reference: pd.DataFrame | None = None) -> dict[str, float]:
    """The quoted gains, in percent, recomputed from the stored figures as `(new / old - 1) * 100`:

    - synthetic_all_three: decode throughput, all three vs baseline (quoted 185.1%);
    - gsm8k_all_three: decode throughput, all three vs baseline on GSM8K (quoted 42.5%);
    - humming: synthetic TPOT, baseline over Humming, `27.71 / 25.35` (quoted 9.3%);
    - fp8_head: synthetic decode throughput, FP8 head on Humming vs Humming alone (quoted 11.4%);
    - mtp: synthetic decode throughput, MTP on top of Humming and FP8 head (not quoted).
    """
    ref = load_reference() if reference is None else reference

    def gain(new: float, old: float) -> float:
        return (new / old - 1) * 100

    def tput(run_id: str, workload: str = "synthetic") -> float:
        return published(ref, run_id, workload, *THROUGHPUT)

    return {
        "synthetic_all_three": gain(tput("published-all-three"), tput("published-baseline")),
        "gsm8k_all_three": gain(tput("published-all-three", "gsm8k"), tput("published-baseline", "gsm8k")),
        "humming": gain(published(ref, "published-baseline", "synthetic", "tpot_ms", "mean"),
                        published(ref, "published-humming", "synthetic", "tpot_ms", "mean")),
        "fp8_head": gain(tput("published-humming-fp8head"), tput("published-humming")),
        "mtp": gain(tput("published-all-three"), tput("published-humming-fp8head")),
    }


def reference_table(run_summaries: Sequence[pd.DataFrame], reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """Measured runs beside the published figures.

    One row per published (workload, metric, stat, unit) of the workloads the runs measured (all
    workloads when no run is given); one column per published configuration, then one per run
    (its run summary's value for the same metric and stat; empty where the run has none).
    """
    ref = load_reference() if reference is None else reference
    runs = pd.concat(list(run_summaries), ignore_index=True) if run_summaries else ref.iloc[:0]
    workloads = set(runs["workload"]) or set(ref["workload"])
    ref = ref[ref["workload"].isin(workloads)]
    measured = runs.merge(ref[KEYS].drop_duplicates(), on=KEYS)
    both = pd.concat([ref, measured], ignore_index=True)
    table = both.pivot_table(index=KEYS, columns="run_id", values="value", aggfunc="first", sort=False)
    order = list(dict.fromkeys(ref["run_id"])) + list(dict.fromkeys(measured["run_id"]))
    return table.reindex(columns=order)


def not_quoted(reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """The stored figures that the sources do not state as such, with their provenance."""
    reference = load_reference() if reference is None else reference
    return reference[reference["provenance"] != QUOTED]


def reference_text(table: pd.DataFrame, reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """reference_table as strings (6 significant digits, blanks where no figure), each figure that
    is not quoted marked ` *` (see `not_quoted`)."""
    text = table.apply(lambda column: column.map(lambda v: "" if pd.isna(v) else f"{v:.6g}"))
    for row in not_quoted(reference).itertuples(index=False):
        key = tuple(getattr(row, k) for k in KEYS)
        if key in text.index and row.run_id in text.columns:
            text.loc[key, row.run_id] += " *"
    return text


def provenance_notes(reference: pd.DataFrame | None = None) -> list[str]:
    """One line per figure marked `*`: which it is and how it was derived or qualified."""
    return [f"* {r.run_id} {r.workload} {r.metric} {r.stat} = {r.value:g}: {r.provenance}"
            for r in not_quoted(reference).itertuples(index=False)]


def format_reference_table(table: pd.DataFrame, reference: pd.DataFrame | None = None) -> str:
    """reference_table as text for a terminal (`reference_text`), then the provenance notes."""
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        return "\n".join([reference_text(table, reference).to_string(), "", *provenance_notes(reference)])
