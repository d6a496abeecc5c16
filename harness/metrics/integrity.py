"""Stream integrity: does a request's stream show its decode, or did something hold tokens back?

Client TTFT, TPOT, ITL and decode rates mean something only if the server sends each token when it
is made. A proxy, a starved output process or a stream interval can hold tokens and release them
in one burst; the client then sees a decode of a few ms and reports absurd speeds. Each request is
judged from its chunk arrivals and, where the engine reports it, the server's own timing. A flagged
request is counted and left out of every client stream timing (see `mask_stream_timings`); its
end-to-end latency and its answer do not depend on the stream and stay. docs/metrics.md states the
rules; every threshold is named here once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.engines.stalls import PERIOD_NS
from harness.metrics.values import int_array, ratio

# Stream rules judge only requests at least this long: in shorter ones a single speculative chunk
# is a large share of the answer.
MIN_STREAM_TOKENS = 16
# buffered (stream): at least BURST_TOKEN_SHARE of the tokens arrived within a window of
# BURST_WINDOW_SHARE of the decode span. A steady stream puts about 1% of its tokens (plus one
# chunk) in such a window; a held-back answer puts most of them there.
BURST_WINDOW_SHARE = 0.01
BURST_TOKEN_SHARE = 0.5
# buffered (server): the client saw the tokens over less than DECODE_SHARE of the server's decode.
DECODE_SHARE = 0.5
# Differences smaller than the noise floor are scheduling noise, never evidence: SLACK_MS plus the
# stall of the client's own loop that held the first token's stamp (`harness.engines.stalls`),
# measured; SLACK_MS alone where none was measured. A first token the client itself stamped more
# than SLACK_MS late is `client_stalled`: its timings are the busy host's, not the server's.
SLACK_MS = 20.0
# sparse: more than SPARSE_FACTOR times the tokens per chunk that the engine's steps explain
# (one without speculation, the server's accept length with it).
SPARSE_FACTOR = 4.0

FLAGS = ("buffered", "late_first_token", "sparse", "client_stalled")
EVIDENCE = ("burst_share", "client_decode_share", "ttft_excess_ms", "first_token_stall_ms", "noise_floor_ms")
INTEGRITY_COLUMNS = (*EVIDENCE, *FLAGS, "stream_flagged")
# Client columns that depend on when chunks arrived; left out (NaN, empty list) for flagged requests.
STREAM_TIMING_COLUMNS = ("ttft_ms", "ttfat_ms", "decode_ms", "tpot_ms", "decode_tok_s", "chunk_gaps_ms",
                         "chunk_gap_tokens", "itl_ms", "response_ttft_ms")


def burst_share(chunk_ns: object, chunk_tokens: object, window_ns: float) -> float:
    """Largest share of the tokens that arrived within any window of `window_ns`, fraction.

    `max over chunks i of (tokens of the chunks arriving in [t_i, t_i + window_ns]) / chunk_tokens[-1]`,
    where a chunk's tokens are the step of the server's running count. NaN without tokens.
    """
    times, counts = int_array(chunk_ns), int_array(chunk_tokens)
    if len(counts) == 0 or counts[-1] <= 0 or not np.isfinite(window_ns):
        return float("nan")
    ends = np.searchsorted(times, times + window_ns, side="right") - 1
    before = np.concatenate(([0], counts[:-1]))  # running count before each chunk arrived
    return float((counts[ends] - before).max() / counts[-1])


def burst_shares(chunk_ns: list, chunk_tokens: list, decode_span_ms: np.ndarray) -> np.ndarray:
    """`burst_share` of each request with a window of BURST_WINDOW_SHARE of its decode span (ms)."""
    windows = decode_span_ms * BURST_WINDOW_SHARE * 1e6
    return np.array([burst_share(t, c, w) for t, c, w in zip(chunk_ns, chunk_tokens, windows)], dtype=float)


def decode_span_ms(token_span_ms: np.ndarray, server_decode_ms: np.ndarray) -> np.ndarray:
    """The decode time a burst is measured against, ms: the longer of the client's token span
    (`last_token_ns - first_token_ns`) and the server's decode time, where it reports one."""
    return np.fmax(token_span_ms, server_decode_ms)


def ttft_excess_ms(ttft: np.ndarray, server_ttft: np.ndarray, e2e: np.ndarray,
                   server_e2e: np.ndarray) -> np.ndarray:
    """How much later the first token reached the client than the whole request did, ms:
    `(ttft_ms - server_ttft_ms) - (e2e_ms - server_e2e_ms)`.

    Whatever delays the request as a whole (queueing before the server's clock starts, transport)
    is in both differences and cancels; only a first token held back after it was made remains.
    """
    return (ttft - server_ttft) - (e2e - server_e2e)


def first_token_stall_ms(first_token_ns: object, stall_ns: object, stall_late_ns: object) -> float:
    """How long the client's own loop stalled where it stamped the first token, ms: the longest
    stall whose span `[at - late, at + PERIOD_NS]` holds `first_token_ns` (a chunk that waited
    through a stall is stamped in the loop turn that ends it), 0 without one; NaN where no probe ran
    or no token came."""
    if stall_late_ns is None or (isinstance(stall_late_ns, float) and np.isnan(stall_late_ns)):
        return float("nan")
    if first_token_ns is None or first_token_ns is pd.NA or (isinstance(first_token_ns, float) and np.isnan(first_token_ns)):
        return float("nan")
    at, late = int_array(stall_ns), int_array(stall_late_ns)
    holding = (at - late <= int(first_token_ns)) & (int(first_token_ns) <= at + PERIOD_NS)
    return float(late[holding].max(initial=0)) / 1e6


def noise_floor_ms(stall_ms: np.ndarray) -> np.ndarray:
    """The difference below which a request's timings are noise, ms: `SLACK_MS + first_token_stall_ms`
    (the stall taken as 0 where it was not measured)."""
    return SLACK_MS + np.nan_to_num(stall_ms, nan=0.0)


def client_stalled(stall_ms: np.ndarray) -> np.ndarray:
    """The client itself stamped the first token more than SLACK_MS late (NaN, not measured: no)."""
    return stall_ms > SLACK_MS


def buffered(burst: np.ndarray, client_decode_share: np.ndarray, token_span_ms: np.ndarray,
             server_decode_ms: np.ndarray, judged: np.ndarray, floor_ms: np.ndarray) -> np.ndarray:
    """Most tokens arrived in one burst (judged requests), or the client saw the decode over less
    than DECODE_SHARE of the server's decode time, by more than the noise floor."""
    burst_rule = judged & (burst >= BURST_TOKEN_SHARE)
    server_rule = (client_decode_share < DECODE_SHARE) & (server_decode_ms - token_span_ms > floor_ms)
    return burst_rule | server_rule


def late_first_token(excess_ms: np.ndarray, server_ttft: np.ndarray, floor_ms: np.ndarray) -> np.ndarray:
    """The first token was held back longer than the server took to make it, and by more than the
    noise floor."""
    return excess_ms > np.fmax(server_ttft, floor_ms)


def sparse(tokens_per_chunk: np.ndarray, accept_length: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """Far fewer token-bearing chunks than tokens: `tokens_per_chunk > SPARSE_FACTOR * max(1,
    accept_length)`, accept length counting only where the server reports speculation."""
    per_step = np.fmax(np.nan_to_num(accept_length, nan=1.0), 1.0)
    return judged & (tokens_per_chunk > SPARSE_FACTOR * per_step)


def integrity_columns(columns: dict[str, object], chunk_ns: list, chunk_tokens: list, stall_ms: np.ndarray,
                      completion_tokens: np.ndarray, token_span_ms: np.ndarray,
                      counts_from_server: np.ndarray) -> dict[str, np.ndarray]:
    """The evidence and flag columns of every request, from the derived client, server and
    speculation columns (`columns`, unmasked), the raw chunk stamps and each request's
    `first_token_stall_ms`.

    The burst rule needs the server's running counts; the sparse rule counts chunks only.
    """
    server_decode = columns["server_e2e_ms"] - columns["server_ttft_ms"]
    long_enough = completion_tokens >= MIN_STREAM_TOKENS
    burst = burst_shares(chunk_ns, chunk_tokens, decode_span_ms(token_span_ms, server_decode))
    decode_share = ratio(token_span_ms, server_decode)
    excess = ttft_excess_ms(columns["ttft_ms"], columns["server_ttft_ms"], columns["e2e_ms"],
                            columns["server_e2e_ms"])
    floor = noise_floor_ms(stall_ms)
    flags = {
        "buffered": buffered(burst, decode_share, token_span_ms, server_decode, long_enough & counts_from_server,
                             floor),
        "late_first_token": late_first_token(excess, columns["server_ttft_ms"], floor),
        "sparse": sparse(columns["tokens_per_chunk"], columns["accept_length"], long_enough),
        "client_stalled": client_stalled(stall_ms),
    }
    flagged = np.logical_or.reduce([flags[flag] for flag in FLAGS])
    return {"burst_share": burst, "client_decode_share": decode_share, "ttft_excess_ms": excess,
            "first_token_stall_ms": stall_ms, "noise_floor_ms": floor, **flags, "stream_flagged": flagged}


def mask_stream_timings(columns: dict[str, object], flagged: np.ndarray) -> None:
    """Leave flagged requests out of the client stream timings: NaN, or an empty list for list
    columns; tokens per step counted from chunks too. Changes `columns` in place."""
    for name in STREAM_TIMING_COLUMNS:
        values = columns[name]
        if isinstance(values, list):
            columns[name] = [[] if bad else cell for cell, bad in zip(values, flagged)]
        else:
            columns[name] = np.where(flagged, np.nan, values)
    from_chunks = np.array([source == "stream_chunks" for source in columns["tokens_per_step_source"]], dtype=bool)
    drop = flagged & from_chunks
    columns["tokens_per_step"] = np.where(drop, np.nan, columns["tokens_per_step"])
    columns["tokens_per_step_source"] = [None if bad else s for s, bad in zip(columns["tokens_per_step_source"], drop)]


def flag_counts(derived: pd.DataFrame) -> dict[str, float]:
    """Requests flagged in all (`requests_flagged`) and per rule (`requests_<flag>`), count."""
    counts = {"requests_flagged": float(derived["stream_flagged"].astype(bool).sum())}
    return counts | {f"requests_{flag}": float(derived[flag].astype(bool).sum()) for flag in FLAGS}


def integrity_warning(counts: dict[str, float], requests: float) -> str | None:
    """One line naming how many requests the integrity rules flagged and why; None when none was."""
    flagged = int(counts.get("requests_flagged") or 0)
    if flagged == 0:
        return None
    why = ", ".join(f"{flag.replace('_', ' ')} {int(counts[f'requests_{flag}'])}" for flag in FLAGS
                    if counts.get(f"requests_{flag}"))
    return (f"WARNING: {flagged} of {int(requests)} requests were not seen streaming their decode ({why}): "
            f"left out of client TTFT, TPOT, ITL and decode rates (docs/metrics.md, stream integrity)")
