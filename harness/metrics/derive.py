"""The per-request table with every derived column added (`derive_requests`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.engines.meta import SPEC_COLUMNS
from harness.metrics.integrity import first_token_stall_ms, integrity_columns, mask_stream_timings
from harness.metrics.latency import client_columns, counts_from_server
from harness.metrics.load import load_columns
from harness.metrics.reasoning import reasoning_columns
from harness.metrics.schema import DERIVED_COLUMNS
from harness.metrics.server import server_columns
from harness.metrics.speculative import engine_steps, speculation, tokens_per_step
from harness.metrics.values import elapsed_ms, floats, parse_meta


def first_token_stalls(df: pd.DataFrame) -> np.ndarray:
    """`first_token_stall_ms` of each request; NaN for all in a table without stall columns (imported)."""
    if "stall_late_ns" not in df:
        return np.full(len(df), np.nan)
    return np.array([first_token_stall_ms(first, at, late) for first, at, late in
                     zip(df["first_token_ns"], df["stall_ns"], df["stall_late_ns"])], dtype=float)


def derive_requests(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of the request table (from `load_requests`) with DERIVED_COLUMNS added or replaced.

    Pure: the same rows always give the same columns; missing server fields give NaN. Requests
    whose stream fails the integrity rules keep their flags and evidence, and lose their client
    stream timings (harness.metrics.integrity).
    """
    metas = [parse_meta(raw) for raw in df["meta_info_json"]]
    engines = df["engine"].astype(str).tolist()
    completion = floats(df["completion_tokens"])
    columns = client_columns(df, metas) | load_columns(df) | reasoning_columns(df, metas)
    columns |= server_columns(metas, engines, completion, columns["ttft_ms"], columns["e2e_ms"])
    spec = [speculation(m, e, c) for m, e, c in zip(metas, engines, completion)]
    for name in SPEC_COLUMNS:
        columns[name] = np.array([row[name] for row in spec], dtype=float)
    steps = np.array([engine_steps(m, e) for m, e in zip(metas, engines)], dtype=float)
    columns["tokens_per_step"], columns["tokens_per_step_source"] = tokens_per_step(
        completion, steps, columns["tokens_per_chunk"])
    from_server = np.array([counts_from_server(m) for m in metas], dtype=bool)
    columns |= integrity_columns(columns, list(df["chunk_ns"]), list(df["chunk_tokens"]), first_token_stalls(df), completion,
                                 elapsed_ms(df["last_token_ns"], df["first_token_ns"]), from_server)
    mask_stream_timings(columns, columns["stream_flagged"])
    out = df.copy()
    for name in DERIVED_COLUMNS:
        values = columns[name]
        # Per-request lists (and the source labels) go in object columns, one Python list per cell.
        out[name] = pd.Series(values, index=df.index, dtype=object) if isinstance(values, list) else values
    return out
