"""Acceptance for people: each speculative run's histogram of verify steps beside the acceptance at
each draft position (given the earlier ones, and over every step), per category or content, and
its acceptance under each engine's and tool's definition (terminal, HTML, Markdown).

The numbers are `harness.analysis.acceptance`'s; docs/metrics.md says whose definition each is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.acceptance import PER_REQUEST, positions_by_group, requests_histogram
from harness.analysis.categories import OVERALL, categories, has_categories
from harness.analysis.run import Run
from harness.analysis.shapes import ShapeGroup
from harness.report.markup import section_html, section_markdown

POSITION_COLUMNS = {"group": "category / content", "k": "accepted drafts k", "steps": "verify steps",
                    "share": "share of steps", "conditional": "P(draft k accepted | draft k-1 accepted)",
                    "unconditional": "P(draft k accepted)"}
DEFINITIONS = {  # metric: whose definition it is
    "mean_acceptance_length_request_weighted": "vLLM per request (mean_acceptance_length); AIPerf "
                                               "spec_decode_acceptance_length (mean)",
    "mean_acceptance_length_token_weighted": "vLLM log and counters; llama.cpp mean len; AIPerf "
                                             "spec_decode_token_weighted_acceptance_length; SGLang avg_spec_accept_length",
    "accepted_drafts_per_round": "any of the above without the bonus token",
    "draft_acceptance_rate_request_weighted": "AIPerf spec_decode_draft_acceptance_rate (mean); SGLang "
                                              "per-request spec_accept_rate (mean)",
    "draft_acceptance_rate_token_weighted": "vLLM draft acceptance rate; llama.cpp draft acceptance; AIPerf "
                                            "spec_decode_overall_draft_acceptance_rate",
    "accepted_per_verified_request_weighted": "AIPerf spec_decode_accepted_per_verified (mean)",
    "accept_length_request_weighted": "sparkbench: mean of each engine's own per-request accept length "
                                      "(SGLang's counts the prefill token)",
    "accept_length_token_weighted": "sparkbench: total tokens over total rounds",
    "accept_length_histogram": "Spec-Bench mean accepted tokens (from the histogram)",
}
LEGEND = ("Verify steps by the number k of draft tokens each accepted, beside the chance that draft k is "
          "accepted given that draft k-1 was (S(k)/S(k-1), S(k) the steps that accepted at least k) and "
          "over every step (S(k)/S(0), vLLM's and llama.cpp's per-position rate). Per category where "
          "the engine reports a histogram per request (SGLang); otherwise one for the run. Then the "
          "run's acceptance under each definition: which figure to set beside which tool's.")


def _speculative(run: Run) -> bool:
    return bool(np.isfinite(run.measured["accept_length"]).any()) if "accept_length" in run.measured else False


def position_view(run: Run) -> pd.DataFrame:
    """The run's histogram and position rates per category (then `overall`) where it has per-request
    histograms and categories, else one group named after its workload; numbers as strings."""
    groups = [(run.workload, run.histogram.counts)]
    if has_categories(run) and run.histogram.source == PER_REQUEST:
        names = categories(run.measured)
        groups = [(name, requests_histogram(run.measured[names == name])) for name in dict.fromkeys(names.dropna())]
        groups.append((OVERALL, run.histogram.counts))
    table = positions_by_group(groups)
    view = pd.DataFrame({"group": table["group"], "k": table["k"].astype(int).astype(str),
                         "steps": [f"{v:.0f}" for v in table["steps"]]})
    for column in ("share", "conditional", "unconditional"):
        view[column] = ["" if math.isnan(v) else f"{v:.3f}" for v in table[column].astype(float)]
    return view.rename(columns=POSITION_COLUMNS)


def definition_view(run: Run) -> pd.DataFrame:
    """One row per definition: the metric, its value over the run's requests, whose definition."""
    summary = run.summary[run.summary["stat"] == "value"].set_index("metric")["value"]
    rows = []
    for metric, whose in DEFINITIONS.items():
        value = summary.get(metric, math.nan)
        rows.append({"metric": metric, "value": "not measured" if pd.isna(value) else f"{value:.4g}",
                     "whose definition": whose})
    return pd.DataFrame(rows)


def acceptance_blocks(groups: Sequence[ShapeGroup]) -> list[tuple[str, pd.DataFrame]]:
    """(heading, table) for every speculative run: acceptance by position (when the engine exports a
    histogram), then acceptance under each definition."""
    blocks = []
    for group in groups:
        for run in group.runs:
            if not _speculative(run):
                continue
            if run.histogram.counts is not None:
                blocks.append((f"{run.caption}: acceptance by draft position ({run.histogram.source})",
                               position_view(run)))
            blocks.append((f"{run.caption}: acceptance by each definition", definition_view(run)))
    return blocks


def acceptance_html(blocks: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    return section_html("Acceptance", LEGEND, blocks)


def acceptance_markdown(blocks: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    return section_markdown("Acceptance", LEGEND, blocks)
