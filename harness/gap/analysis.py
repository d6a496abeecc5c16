"""Per cell: accept length and decode speed-up with paired intervals; the gap attributed to its causes.

Figures of a cell (its plain run P and speculative run S, the same prompts, aligned by prompt id):
- decode speed-up = R(S) / R(P), R = sum(completion_tokens - 1) / sum(decode seconds): the
  aggregate decode throughput, each request weighted by its decode time. Decode seconds are the
  server's own (`server_tpot_ms * (completion_tokens - 1)`) when every request of both runs has
  them, else the client's `decode_ms`; the table says which.
- accept length, both weightings: token-weighted `sum(tokens) / sum(rounds)` and the mean of the
  per-request accept lengths (`harness.metrics.speculative`).
A failed request adds nothing to either sum. A request of the speculative server that reports no
speculation figures drafted nothing (llama.cpp leaves `draft_n` out then): each of its decode steps
made one token, so it counts with accept length 1 over `completion_tokens - 1` rounds.

Intervals: 95% percentile bootstrap over prompts, paired: one resample of prompt positions is
applied to both runs of a cell and to every cell of the same content (whose prompts are the same),
so the attribution's intervals carry the prompt-to-prompt spread the cells share.

Attribution. Along each factor the published evaluation moved from its synthetic corner
(synthetic, greedy, fixed) to its GSM8K corner (gsm8k, published sampling, natural length); the
change in a figure between the corners, delta = v(GSM8K corner) - v(synthetic corner), is split
two ways over the 2^3 cube of those levels:
- one at a time: the change along one factor with the other two held at the synthetic corner;
  what the three leave over is the interaction;
- Shapley: each factor's change averaged over the six orders of moving the factors one by one
  (weights 1/3, 1/6, 1/6, 1/3 over the subsets of the others already moved); the three shares add
  up to delta exactly, the interaction shared out among them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.run import Run
from harness.analysis.stats import CONFIDENCE, N_RESAMPLES
from harness.gap.design import FACTORS, GSM8K_CORNER, SYNTHETIC_CORNER
from harness.metrics.speculative import accept_length_parts

FIGURES = ("speedup", "accept_length_token_weighted", "accept_length_request_weighted")


@dataclass(frozen=True)
class CellArrays:
    """A cell's per-prompt sums, aligned by prompt position (0 where a request failed)."""

    plain_tokens: np.ndarray
    plain_seconds: np.ndarray
    spec_tokens: np.ndarray
    spec_seconds: np.ndarray
    accepted_tokens: np.ndarray  # accept_length * rounds
    rounds: np.ndarray
    accept_length: np.ndarray  # per request, NaN without speculation
    timing: str


def _decode(frame: pd.DataFrame, timing: str) -> tuple[np.ndarray, np.ndarray]:
    tokens = frame["completion_tokens"].to_numpy(dtype=float) - 1
    if timing == "server":
        seconds = frame["server_tpot_ms"].to_numpy(dtype=float) * tokens / 1000
    else:
        seconds = frame["decode_ms"].to_numpy(dtype=float) / 1000
    ok = (frame["status"] == "ok").to_numpy() & np.isfinite(tokens) & np.isfinite(seconds) & (tokens > 0) & (seconds > 0)
    return np.where(ok, tokens, 0.0), np.where(ok, seconds, 0.0)


def _timing(*frames: pd.DataFrame) -> str:
    """"server" when every successful request of the runs has the server's own decode time."""
    for frame in frames:
        ok = frame[(frame["status"] == "ok") & (frame["completion_tokens"] > 1)]
        if ok.empty or not np.isfinite(ok["server_tpot_ms"].to_numpy(dtype=float)).all():
            return "client"
    return "server"


def _undrafted_as_rounds(frame: pd.DataFrame) -> pd.DataFrame:
    """Successful requests without speculation figures as rounds of one token each (module docstring)."""
    missing = (frame["status"] == "ok") & frame["accept_length"].isna() & (frame["completion_tokens"] > 1)
    return frame.assign(accept_length=frame["accept_length"].mask(missing, 1.0),
                        verify_rounds=frame["verify_rounds"].mask(missing, frame["completion_tokens"] - 1))


def cell_arrays(plain: pd.DataFrame, spec: pd.DataFrame, order: list[str]) -> CellArrays:
    """The two runs' derived tables aligned on `order` (prompt ids); a prompt missing from a run counts
    as a failed request."""
    def aligned(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.drop_duplicates("prompt_id", keep="last").set_index("prompt_id").reindex(order)
        frame["status"] = frame["status"].fillna("missing")
        return frame.reset_index()

    p, s = aligned(plain), _undrafted_as_rounds(aligned(spec))
    timing = _timing(plain, spec)
    accepted, rounds = accept_length_parts(s.assign(verify_rounds=s["verify_rounds"].where(s["status"] == "ok")))
    per_request = s["accept_length"].to_numpy(dtype=float)
    return CellArrays(*_decode(p, timing), *_decode(s, timing), accepted, rounds,
                      np.where(s["status"] == "ok", per_request, math.nan), timing)


def cell_figures(a: CellArrays, idx: np.ndarray) -> dict[str, np.ndarray]:
    """Each figure at every row of prompt positions `idx` (shape (R, n)): one value per row."""
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = a.plain_tokens[idx].sum(-1) / a.plain_seconds[idx].sum(-1)
        spec = a.spec_tokens[idx].sum(-1) / a.spec_seconds[idx].sum(-1)
        lengths = a.accept_length[idx]
        counted = np.isfinite(lengths).sum(-1)
        return {"speedup": spec / plain,
                "accept_length_token_weighted": a.accepted_tokens[idx].sum(-1) / a.rounds[idx].sum(-1),
                "accept_length_request_weighted": np.where(counted > 0, np.nansum(lengths, -1) / counted, math.nan),
                "plain_decode_tok_s": plain, "spec_decode_tok_s": spec}


def shapley_weights(k: int) -> float:
    """Weight of a subset of size k of the other two factors in a 3-factor Shapley share."""
    return math.factorial(k) * math.factorial(len(FACTORS) - k - 1) / math.factorial(len(FACTORS))


def attribute(value: Callable[[tuple[str, str, str]], np.ndarray]) -> dict[str, np.ndarray]:
    """Split v(GSM8K corner) - v(synthetic corner) over the factors (module docstring): `value`
    gives a figure (an array of resamples) at any levels of the cube between the two corners."""
    def at(moved: frozenset[int]) -> np.ndarray:
        return value(tuple(GSM8K_CORNER[i] if i in moved else SYNTHETIC_CORNER[i] for i in range(len(FACTORS))))

    base = at(frozenset())
    out = {"delta": at(frozenset(range(len(FACTORS)))) - base}
    for i, factor in enumerate(FACTORS):
        others = [j for j in range(len(FACTORS)) if j != i]
        out[f"one_at_a_time:{factor}"] = at(frozenset({i})) - base
        out[f"shapley:{factor}"] = sum(
            shapley_weights(len(subset)) * (at(frozenset({*subset, i})) - at(frozenset(subset)))
            for k in range(len(others) + 1) for subset in itertools.combinations(others, k))
    out["one_at_a_time:interaction"] = out["delta"] - sum(out[f"one_at_a_time:{f}"] for f in FACTORS)
    return out


def _interval(draws: np.ndarray) -> tuple[float, float]:
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return math.nan, math.nan
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class LoadedCell:
    levels: tuple[str, str, str]
    arrays: CellArrays
    plain: Run
    spec: Run


def load_cells(folder: Path, design: dict) -> list[LoadedCell]:
    """The cells of a design folder whose two runs both exist."""
    loaded = []
    for entry in design["cells"]:
        runs = entry.get("runs", {})
        if set(runs) != {"plain", "speculative"}:
            continue
        plain, spec = (Run.load(folder / "runs" / runs[role]) for role in ("plain", "speculative"))
        order = list(dict.fromkeys(plain.requests["prompt_id"]))
        loaded.append(LoadedCell((entry["content"], entry["sampling"], entry["length"]),
                                 cell_arrays(plain.derived, spec.derived, order), plain, spec))
    return loaded


def analyse_cells(cells: list[LoadedCell], n_resamples: int = N_RESAMPLES, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cell table, attribution table): one row per cell with each figure's point and interval;
    one row per (figure, share) of the attribution, where the cube between the corners was run."""
    figures = {c.levels: cell_figures(c.arrays, resample_positions(len(c.arrays.plain_tokens), n_resamples, seed))
               for c in cells}
    rows = [_cell_row(c, figures[c.levels]) for c in cells]
    return pd.DataFrame(rows), _attribution(figures)


def resample_positions(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Row 0 the prompts as sent, then `n_resamples` bootstrap rows; the same rows for every cell of
    n prompts, which pairs the cells of one content (and contents of one size)."""
    rng = np.random.default_rng([seed, n])
    return np.vstack([np.arange(n)[None, :], rng.integers(0, max(n, 1), size=(n_resamples, n))])


def _cell_row(cell: LoadedCell, figures: dict[str, np.ndarray]) -> dict:
    row = dict(zip(FACTORS, cell.levels))
    for name, draws in figures.items():
        row[name] = float(draws[0])
        if name in FIGURES:
            row[f"{name}_low"], row[f"{name}_high"] = _interval(draws[1:])
    for role, run in (("plain", cell.plain), ("spec", cell.spec)):
        ok = run.derived[run.derived["status"] == "ok"]
        row[f"{role}_requests_ok"] = len(ok)
        row[f"{role}_mean_output_tokens"] = float(ok["completion_tokens"].mean()) if len(ok) else math.nan
        if "correct" in ok:
            row[f"{role}_accuracy"] = float(ok["correct"].astype(float).mean())
    row["timing"] = cell.arrays.timing
    return row


def _attribution(figures: dict[tuple[str, str, str], dict[str, np.ndarray]]) -> pd.DataFrame:
    cube = list(itertools.product(*zip(SYNTHETIC_CORNER, GSM8K_CORNER)))
    if any(levels not in figures for levels in cube):
        return pd.DataFrame(columns=["figure", "share", "value", "low", "high"])
    rows = []
    for figure in FIGURES:
        for share, draws in attribute(lambda levels, f=figure: figures[levels][f]).items():
            rows.append({"figure": figure, "share": share, "value": float(draws[0]), **dict(zip(("low", "high"),
                                                                                               _interval(draws[1:])))})
    return pd.DataFrame(rows)
