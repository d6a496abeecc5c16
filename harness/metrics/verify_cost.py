"""The verification-cost ratio: what one speculative round costs, in plain decode steps.

From a speculative run S and its non-speculative baseline B (same server, model and workload):
- plain_step_ms = `sum(B decode_ms) / sum(B completion_tokens - 1)`: one plain decode step, which
  yields one token (B's aggregate TPOT);
- verify_round_ms = `sum(S decode_ms) / sum(S decode rounds)`: one round, everything between two
  outputs: the draft passes (MTP/EAGLE forward passes, or the n-gram lookup), the verification
  forward pass and the acceptance. Draft time is inside the round, not apart from it;
- verify_cost_ratio = `verify_round_ms / plain_step_ms`;
- decode_tokens_per_round = `sum(S completion_tokens - 1) / sum(S decode rounds)`;
- break_even_tokens_per_round = verify_cost_ratio: speculation gains only where a round yields more
  tokens than it costs steps; speedup = `decode_tokens_per_round / verify_cost_ratio`, which is
  S's aggregate decode throughput over B's, over the requests counted.
Decode rounds per request: the server's own count where it reports one for every round (SGLang
`spec_verify_ct`, `tokens_per_step_source` "server_steps"), else the token-bearing streamed chunks
after the first (one chunk per engine step: vLLM counts only the rounds that had a draft, and a
round without one is a plain step that still belongs in the average). A request whose stream the
integrity rules flag (harness.metrics.integrity) counts in neither timing: its chunks may merge
steps. The plain step pools every baseline request that has the timing (the client's leaves out
the streams it could not time; the server's own times need no stream).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.metrics.values import floats, int_array

VERIFY_COST_UNITS = {"plain_step_ms": "ms", "verify_round_ms": "ms", "verify_cost_ratio": "ratio",
                     "decode_tokens_per_round": "tokens/round", "break_even_tokens_per_round": "tokens/round",
                     "speedup": "ratio"}


def decode_rounds(derived: pd.DataFrame) -> np.ndarray:
    """Rounds of each request after its first token: `verify_rounds` where the server counts every
    round (`tokens_per_step_source` "server_steps"), `len(chunk_ns) - 1` where the stream shows one
    chunk per step ("stream_chunks"), else NaN: a stream the integrity rules flag may have merged
    steps into one chunk, so its chunks do not count rounds."""
    chunks = np.array([len(int_array(cell)) - 1 for cell in derived["chunk_ns"]], dtype=float)
    source = derived["tokens_per_step_source"]
    rounds = np.where(source == "server_steps", floats(derived["verify_rounds"]),
                      np.where(source == "stream_chunks", chunks, math.nan))
    return np.where(rounds > 0, rounds, math.nan)


def decode_time_ms(derived: pd.DataFrame, timing: str) -> np.ndarray:
    """Decode time per request, ms: the client's `decode_ms` (first token to `[DONE]`), or with
    timing "server" the server's own `server_tpot_ms * (completion_tokens - 1)`."""
    if timing == "server":
        return floats(derived["server_tpot_ms"]) * (floats(derived["completion_tokens"]) - 1)
    return floats(derived["decode_ms"])


def pooled_ms(time_ms: np.ndarray, units: np.ndarray) -> float:
    """`sum(time_ms) / sum(units)` over requests where both are finite and units > 0."""
    keep = np.isfinite(time_ms) & np.isfinite(units) & (units > 0)
    return float(time_ms[keep].sum() / units[keep].sum()) if keep.any() else math.nan


def verify_cost(speculative: pd.DataFrame, baseline: pd.DataFrame, timing: str = "client") -> dict[str, float]:
    """VERIFY_COST_UNITS figures of a speculative run's derived table against its baseline's."""
    plain = pooled_ms(decode_time_ms(baseline, timing), floats(baseline["completion_tokens"]) - 1)
    rounds = decode_rounds(speculative)
    decode_tokens = floats(speculative["completion_tokens"]) - 1
    spec_time = decode_time_ms(speculative, timing)
    counted = np.isfinite(rounds) & np.isfinite(spec_time) & (decode_tokens > 0)
    round_ms = pooled_ms(spec_time[counted], rounds[counted])
    ratio = round_ms / plain if plain > 0 else math.nan
    per_round = float(decode_tokens[counted].sum() / rounds[counted].sum()) if counted.any() else math.nan
    return {"plain_step_ms": plain, "verify_round_ms": round_ms, "verify_cost_ratio": ratio,
            "decode_tokens_per_round": per_round, "break_even_tokens_per_round": ratio,
            "speedup": per_round / ratio if ratio > 0 else math.nan}
