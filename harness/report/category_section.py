"""Results by category for people: each run's figures per category, and each speculative run's
speed-up per category against its group's baseline, as tables (terminal, HTML, Markdown).

Shown for runs whose prompts carry a category (Spec-Bench's six tasks); the numbers are
`harness.analysis.categories`'.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from harness.analysis.acceptance import NOT_EXPORTED
from harness.analysis.categories import category_speedups, category_table, has_categories
from harness.analysis.shapes import ShapeGroup
from harness.report.markup import section_html, section_markdown

FIGURES = {"requests_ok": "requests", "accept_length_token_weighted": "accept length (token-weighted)",
           "accept_length_request_weighted": "accept length (request-weighted)",
           "accept_length_histogram": "accept length (histogram)",
           "decode_throughput_aggregate": "decode tok/s (aggregate)",
           "decode_throughput_mean_of_requests": "decode tok/s (mean of requests)", "tpot_ms": "TPOT ms (mean)",
           "request_tok_s": "request tok/s (mean)"}
SPEEDUPS = {"speedup_mean_of_requests": "speed-up (Spec-Bench: mean request tok/s)",
            "speedup_aggregate": "speed-up (aggregate tok/s)"}
LEGEND = ("Speed-up against the group's baseline on the same questions (paired by prompt_id): Spec-Bench's, "
          "mean of per-request tok/s (tokens over the whole request time) over the baseline's mean; and the "
          "ratio of aggregate tok/s (total tokens over total request time). 95% paired bootstrap interval in "
          "brackets. Outputs differ: pairs whose answers are not the same tokens (greedy plain and "
          "speculative decoding should agree; a pair that does not times two different answers). Accept "
          "length: tokens per verify round (histogram: per verify step), not measured where the run "
          "did not speculate.")


def category_view(table: pd.DataFrame, histogram_source: str) -> pd.DataFrame:
    """One row per category, one column per figure (FIGURES), numbers as strings; a figure the run
    has not is "not measured" (the histogram's, "not exported" where the engine reports none)."""
    wide = table.pivot_table(index="category", columns="metric", values="value", sort=False, dropna=False)
    wide = wide.reindex(index=list(dict.fromkeys(table["category"])), columns=list(FIGURES))
    missing = {metric: "not measured" for metric in FIGURES}
    if histogram_source == NOT_EXPORTED:
        missing["accept_length_histogram"] = NOT_EXPORTED
    view = pd.DataFrame({metric: [missing[metric] if pd.isna(v) else f"{v:.4g}" for v in wide[metric]]
                         for metric in FIGURES}, index=wide.index).rename(columns=FIGURES)
    return view.reset_index()


def speedup_view(speedups: pd.DataFrame) -> pd.DataFrame:
    """One row per category: questions paired, then each speed-up as `1.23x [1.10, 1.35]`."""
    rows = []
    for category, part in speedups.groupby("category", sort=False):
        row = {"category": category, "paired questions": str(int(part["n"].iloc[0])),
               "outputs differ": str(int(part["outputs_differ"].iloc[0]))}
        for metric, name in SPEEDUPS.items():
            found = part[part["metric"] == metric].iloc[0]
            interval = "" if pd.isna(found["ci95_low"]) else f" [{found['ci95_low']:.3g}, {found['ci95_high']:.3g}]"
            row[name] = "not measured" if pd.isna(found["value"]) else f"{found['value']:.3g}x{interval}"
        rows.append(row)
    return pd.DataFrame(rows)


def category_blocks(groups: Sequence[ShapeGroup]) -> list[tuple[str, pd.DataFrame]]:
    """(heading, table) for every run with categories: its figures, then its speed-ups against its
    group's baseline (when it is not the baseline and the two ran the same questions)."""
    blocks = []
    for group in groups:
        for run in group.runs:
            if not has_categories(run):
                continue
            blocks.append((f"{run.caption}: figures per category",
                           category_view(category_table(run), run.histogram.source)))
            speedups = category_speedups(group.baseline, run) if run is not group.baseline else pd.DataFrame()
            if not speedups.empty:
                blocks.append((f"{run.caption}: speed-up per category against {group.baseline.caption}",
                               speedup_view(speedups)))
    return blocks


def categories_html(blocks: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    return section_html("By category", LEGEND, blocks)


def categories_markdown(blocks: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    return section_markdown("By category", LEGEND, blocks)


def format_categories(blocks: Sequence[tuple[str, pd.DataFrame]]) -> str:
    """The blocks as text for a terminal (empty when no run has categories)."""
    return "\n\n".join(f"{heading}\n{table.to_string(index=False)}" for heading, table in blocks)
