"""Reasoning models: the time to the first answer token, and the thinking tokens the server counts.

TTFT (`ttft_ms`) counts a thinking token as a token; `ttfat_ms` waits for the answer, past the
thinking streamed apart (`reasoning_text`) or left inline in the text (`harness.records.reasoning`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.metrics.values import NS_PER_MS, int_array
from harness.records.reasoning import answer_start


def first_answer_ns(text: object, reasoning: object, text_ns: object, text_chars: object,
                    first_token_ns: object) -> float:
    """When the answer's first character arrived (perf_counter ns; NaN: never, or not known).

    The first chunk whose running text length passes the answer's start (`answer_start`: after an
    inline `</think>`). A record without text stamps (a run recorded before they were kept, or a
    client that keeps none) has its answer from the first token when it shows no thinking at all.
    """
    text = text if isinstance(text, str) else ""
    stamps, chars = int_array(text_ns), int_array(text_chars)
    start = answer_start(text)
    if len(stamps):
        past = np.flatnonzero(chars > start)
        return float(stamps[past[0]]) if len(past) else np.nan  # running lengths never pass an unfinished think
    thinking = isinstance(reasoning, str) and reasoning != ""
    if thinking or start > 0 or pd.isna(first_token_ns):  # None, NaN and pd.NA alike
        return np.nan
    return float(first_token_ns)


def ttfat_ms(df: pd.DataFrame) -> np.ndarray:
    """Time to first answer token, ms: `first_answer_ns - sent_ns`, where first_answer_ns is the
    arrival of the first chunk of answer text past any thinking (`first_answer_ns`). Equal to
    ttft_ms for a model that does not think; NaN when no answer text arrived."""
    columns = ("output_text", "reasoning_text", "text_ns", "text_chars", "first_token_ns")
    answers = np.array([first_answer_ns(*row) for row in zip(*(df[c] for c in columns))], dtype=float)
    sent = df["sent_ns"].astype("Int64").to_numpy(dtype=float, na_value=np.nan)
    return (answers - sent) / NS_PER_MS


def reasoning_tokens(meta: dict[str, Any]) -> float:
    """Thinking tokens as the server counts them: `usage.completion_tokens_details.reasoning_tokens`
    (OpenAI API); NaN when the server reports none."""
    usage = meta.get("usage")
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    count = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return float(count) if isinstance(count, (int, float)) and not isinstance(count, bool) else np.nan


def reasoning_columns(df: pd.DataFrame, metas: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """`ttfat_ms` and `reasoning_tokens` of every request."""
    return {"ttfat_ms": ttfat_ms(df), "reasoning_tokens": np.array([reasoning_tokens(m) for m in metas], dtype=float)}
