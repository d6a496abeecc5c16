"""Tidy tables of an agreement run, derived from the recorded sequences and scores only.

- `positions`: one row per scored position (the source of every figure below);
- `summary`: long form `metric, stat, value, unit`;
- `bands`: the same agreement metrics per token-frequency band;
- `shifts`: the positions where the forced token's log-probability moved most.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from harness.agree.metrics import (
    BANDS,
    TopK,
    first_tokens,
    frequency_bands,
    token_counts,
    top1_agrees,
    top1_margin,
    topk_recall,
    union_kl,
)
from harness.agree.sequences import ForcedSequence
from harness.analysis.stats import bootstrap_ratio_of_sums
from harness.engines.scoring import ScoredTokens
from harness.metrics.stats import describe

SHIFTS_SHOWN = 20
UNITS = {"top1_agreement": "fraction", "topk_recall": "fraction", "ref_top1_tied": "fraction", "kl_union_nats": "nats",
         "target_logprob_shift": "nats", "abs_target_logprob_shift": "nats"}


def _tops(scored: ScoredTokens) -> list[TopK]:
    return [TopK(tuple(ids), tuple(logprobs)) for ids, logprobs in zip(scored.top_ids, scored.top_logprobs)]


def _position_rows(seq: ForcedSequence, ref: ScoredTokens, cand: ScoredTokens, bands: Mapping[int, str]) -> list[dict]:
    rows = []
    for offset, (target, r, c) in enumerate(zip(seq.continuation_ids, _tops(ref), _tops(cand))):
        ref_lp, cand_lp = ref.target_logprobs[offset], cand.target_logprobs[offset]
        rows.append({
            "prompt_id": seq.prompt_id, "position": seq.start + offset, "offset": offset, "target_id": target,
            "band": bands.get(target, "unseen"), "ref_top1_id": r.ids[0], "cand_top1_id": c.ids[0],
            "top1_agreement": top1_agrees(r, c), "topk_recall": topk_recall(r, c), "kl_union_nats": union_kl(r, c),
            "ref_target_logprob": ref_lp, "cand_target_logprob": cand_lp, "ref_top1_logprob": r.logprobs[0],
            "target_logprob_shift": cand_lp - ref_lp, "ref_top1_margin_nats": top1_margin(r),
            "ref_top1_tied": len(first_tokens(r)) > 1,
        })
    return rows


def positions_table(sequences: Sequence[ForcedSequence], reference: Mapping[str, ScoredTokens],
                    candidate: Mapping[str, ScoredTokens]) -> pd.DataFrame:
    """One row per scored position of every sequence both servers scored.

    `band` is the forced token's frequency band in the run's scored text (`frequency_bands` over
    all continuations); `target_logprob_shift` = candidate - reference log-probability of the
    forced token (nats); `ref_top1_margin_nats` = how far the reference's first token leads its second
    (0 when `ref_top1_tied`: several tokens share the reference's highest log-probability).
    """
    scored = [s for s in sequences if s.prompt_id in reference and s.prompt_id in candidate]
    bands = frequency_bands(token_counts(s.continuation_ids for s in scored))
    rows = [row for s in scored for row in _position_rows(s, reference[s.prompt_id], candidate[s.prompt_id], bands)]
    return pd.DataFrame(rows)


def _per_sequence_ci(positions: pd.DataFrame, column: str) -> tuple[float, float, float]:
    """Mean of `column` over positions with a 95% interval that resamples whole sequences (positions of
    one sequence are not independent)."""
    grouped = positions.groupby("prompt_id")[column].agg(["sum", "count"])
    return bootstrap_ratio_of_sums(grouped["sum"].to_numpy(), grouped["count"].to_numpy())


def summary_table(positions: pd.DataFrame) -> pd.DataFrame:
    """Long summary: counts, agreement means with sequence-bootstrap intervals, KL and shift distributions."""
    rows = [("sequences", "value", float(positions["prompt_id"].nunique()), "count"),
            ("positions", "value", float(len(positions)), "count")]
    for column in ("top1_agreement", "topk_recall", "ref_top1_tied"):
        point, low, high = _per_sequence_ci(positions.astype({column: float}), column)
        rows += [(column, "mean", point, UNITS[column]), (column, "ci95_low", low, UNITS[column]),
                 (column, "ci95_high", high, UNITS[column])]
    columns = {"kl_union_nats": positions["kl_union_nats"],
               "abs_target_logprob_shift": positions["target_logprob_shift"].abs()}
    for name, values in columns.items():
        rows += [(name, stat, value, UNITS[name]) for stat, value in describe(values).items() if stat != "n"]
    return pd.DataFrame(rows, columns=["metric", "stat", "value", "unit"])


def bands_table(positions: pd.DataFrame) -> pd.DataFrame:
    """Per frequency band: positions, top-1 agreement, top-k recall, mean union KL, mean |shift|."""
    order = [*BANDS, "unseen"]
    grouped = positions.assign(abs_shift=positions["target_logprob_shift"].abs()).groupby("band")
    table = grouped.agg(positions=("position", "size"), top1_agreement=("top1_agreement", "mean"),
                        topk_recall=("topk_recall", "mean"), kl_union_nats_mean=("kl_union_nats", "mean"),
                        abs_target_logprob_shift_mean=("abs_shift", "mean"))
    return table.reindex([b for b in order if b in table.index]).reset_index()


def shifts_table(positions: pd.DataFrame, count: int = SHIFTS_SHOWN) -> pd.DataFrame:
    """The `count` positions with the largest |target_logprob_shift|, largest first."""
    order = positions["target_logprob_shift"].abs().sort_values(ascending=False, kind="stable").index
    columns = ["prompt_id", "position", "target_id", "band", "ref_target_logprob", "cand_target_logprob",
               "target_logprob_shift", "top1_agreement", "ref_top1_margin_nats"]
    return positions.loc[order[:count], columns].reset_index(drop=True)


def agreement_by_margin(positions: pd.DataFrame, bins: int = 5) -> pd.DataFrame:
    """Top-1 agreement per quantile bin of the reference's top-1 margin: where the head's rounding
    matters, the margin is small and the ranking flips first."""
    finite = positions[np.isfinite(positions["ref_top1_margin_nats"])]
    if finite.empty:
        return pd.DataFrame(columns=["margin_low", "margin_high", "positions", "top1_agreement"])
    labels = pd.qcut(finite["ref_top1_margin_nats"], q=bins, duplicates="drop")
    grouped = finite.groupby(labels, observed=True)
    return pd.DataFrame({
        "margin_low": [interval.left for interval in grouped.groups], "margin_high": [i.right for i in grouped.groups],
        "positions": grouped.size().to_numpy(), "top1_agreement": grouped["top1_agreement"].mean().to_numpy(),
    })


def summary_value(summary: pd.DataFrame, metric: str, stat: str = "mean") -> float:
    rows = summary[(summary["metric"] == metric) & (summary["stat"] == stat)]
    return float(rows["value"].iloc[0]) if len(rows) else math.nan
