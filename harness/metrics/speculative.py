"""Speculative decoding per request, and the run's accept length weighted two ways.

Only per-request fields are read. SGLang's `/server_info` `avg_spec_accept_length` is a running
average since server start (warm-up and earlier runs included), so it is never used.
A request without speculation gets NaN in every column, never 1.0 or 0: "no drafts" is not
"drafts that were all rejected".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from harness.metrics.values import first_number, lookup, number

SPEC_COLUMNS = ("accept_length", "verify_rounds", "accepted_draft_tokens", "proposed_draft_tokens",
                "accept_rate")
NO_SPECULATION = dict.fromkeys(SPEC_COLUMNS, math.nan)


def _speculation(accept_length: float, rounds: float, accepted: float, proposed: float,
                 reported_rate: float) -> dict[str, float]:
    """The five columns; accept_rate = accepted / proposed, else the server's per-request rate."""
    rate = accepted / proposed if proposed > 0 else reported_rate
    return {"accept_length": accept_length, "verify_rounds": rounds, "accepted_draft_tokens": accepted,
            "proposed_draft_tokens": proposed, "accept_rate": rate}


def sglang_speculation(meta: dict[str, Any], completion_tokens: float) -> dict[str, float]:
    """Speculation columns from SGLang meta_info.

    accept_length (tokens per verify round) = `spec_accept_length`, else
    `completion_tokens / spec_verify_ct` (SGLang's own definition: it counts the bonus token and the
    first token from prefill). Draft counts: `spec_num_correct_drafts` / `spec_num_proposed_drafts`,
    or the older `spec_accept_token_num` / `spec_draft_token_num`.
    """
    rounds = number(meta.get("spec_verify_ct"))
    reported_length = number(meta.get("spec_accept_length"))
    if rounds == 0 or not (rounds > 0 or reported_length > 0):
        return dict(NO_SPECULATION)
    length = reported_length if reported_length > 0 else completion_tokens / rounds
    return _speculation(
        length,
        rounds,
        first_number(meta, "spec_num_correct_drafts", "spec_accept_token_num"),
        first_number(meta, "spec_num_proposed_drafts", "spec_draft_token_num"),
        number(meta.get("spec_accept_rate")),
    )


def vllm_speculation(meta: dict[str, Any]) -> dict[str, float]:
    """Speculation columns from vLLM `metrics.speculative_decoding`.

    accept_length = `mean_acceptance_length`, else `1 + num_accepted_draft_tokens / num_spec_steps`.
    vLLM counts only the steps that had a draft (an n-gram drafter often has none), so its rounds
    are fewer than its engine steps. The object exists only when speculation is configured: with
    no draft at all (zero rounds) vLLM reports 1.0, one token per step, and so do we, since a
    drafter that never lands a token is exactly what the canary must see.
    """
    spec = lookup(meta, "metrics", "speculative_decoding")
    if not isinstance(spec, dict):
        return dict(NO_SPECULATION)
    rounds = number(spec.get("num_spec_steps"))
    accepted = number(spec.get("num_accepted_draft_tokens"))
    reported_length = number(spec.get("mean_acceptance_length"))
    if not (rounds >= 0 or reported_length > 0):
        return dict(NO_SPECULATION)
    if reported_length > 0:
        length = reported_length
    else:
        length = 1 + accepted / rounds if rounds > 0 else 1.0
    return _speculation(length, rounds, accepted, number(spec.get("num_draft_tokens")),
                        number(spec.get("draft_acceptance_rate")))


def speculation(meta: dict[str, Any], backend: str, completion_tokens: float) -> dict[str, float]:
    """Speculation columns of one request, read according to its backend's meta shape."""
    if backend == "sglang":
        return sglang_speculation(meta, completion_tokens)
    if backend == "openai":
        return vllm_speculation(meta)
    return dict(NO_SPECULATION)


def engine_steps(meta: dict[str, Any], backend: str) -> float:
    """Engine steps the server reports for one request; NaN where it reports none.

    SGLang with speculation: one prefill step plus `spec_verify_ct` verify rounds (every decode step
    verifies). vLLM's `num_spec_steps` counts only drafting steps, so it is not a step count.
    """
    rounds = number(meta.get("spec_verify_ct")) if backend == "sglang" else math.nan
    return rounds + 1 if rounds > 0 else math.nan


def tokens_per_step(completion_tokens: np.ndarray, steps: np.ndarray,
                    per_chunk: np.ndarray) -> tuple[np.ndarray, list[str | None]]:
    """Output tokens per engine step, and where the step count came from.

    `completion_tokens / engine steps` where the server reports steps ("server_steps"), else
    tokens per token-bearing streamed chunk ("stream_chunks"; one chunk per step unless the server
    batches its stream), else NaN (None).
    """
    from_server = steps > 0
    values = np.where(from_server, completion_tokens / np.where(from_server, steps, 1.0), per_chunk)
    sources = ["server_steps" if s else ("stream_chunks" if not math.isnan(c) else None)
               for s, c in zip(from_server, per_chunk)]
    return values, sources


def accept_length_request_weighted(derived: pd.DataFrame) -> float:
    """Mean of per-request accept_length, tokens/round; NaN when no request speculated."""
    lengths = derived["accept_length"].dropna()
    return float(lengths.mean()) if len(lengths) else math.nan


def accept_length_token_weighted(derived: pd.DataFrame) -> float:
    """Run accept length, tokens/round: `sum(accept_length * verify_rounds) / sum(verify_rounds)`.

    That is total tokens over total rounds (for SGLang the numerator is the completion tokens), so
    long requests weigh in proportion to their rounds. NaN when no request reports rounds.
    """
    rows = derived[["accept_length", "verify_rounds"]].dropna()
    rounds = rows["verify_rounds"].sum()
    return float((rows["accept_length"] * rows["verify_rounds"]).sum() / rounds) if rounds > 0 else math.nan
