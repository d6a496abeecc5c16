"""Per cell: accept length and decode speed-up with bootstrap intervals; the gap attributed to its causes.

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

Intervals: 95% BCa bootstrap over prompts (`scipy.stats.bootstrap`, one sample per content). The
prompts of one content are resampled jointly across that content's cells (both runs of a cell and
all its sampling and length cells send the same prompts: those pairs are real) and independently of
every other content's. An interval is printed only where the design has as many prompts per content
as the coverage simulation (`scripts/gap_coverage.py`, docs/gap.md) found that kind of interval to
need for at least 90% coverage at nominal 95%; below that the table says how many it needs.

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
from harness.analysis.stats import N_RESAMPLES
from harness.gap.design import BASE_CORNERS, FACTORS, GSM8K_CORNER, SYNTHETIC_CORNER
from harness.gap.intervals import bootstrap_intervals, needed_prompts
from harness.metrics.speculative import accept_length_parts

FIGURES = ("speedup", "accept_length_token_weighted", "accept_length_request_weighted")
RATES = ("plain_decode_tok_s", "spec_decode_tok_s")  # shown without intervals
SHARES = ("delta", *(f"one_at_a_time:{f}" for f in FACTORS), "one_at_a_time:interaction",
          *(f"shapley:{f}" for f in FACTORS))
ATTRIBUTION_COLUMNS = ["base", "figure", "share", "value", "low", "high", "prompts", "needs_prompts"]


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


def attribute(value: Callable[[tuple[str, str, str]], np.ndarray],
              base: tuple[str, str, str] = SYNTHETIC_CORNER) -> dict[str, np.ndarray]:
    """Split v(GSM8K corner) - v(base corner) over the factors (module docstring): `value` gives a
    figure (an array) at any levels of the cube between the two corners."""
    def at(moved: frozenset[int]) -> np.ndarray:
        return value(tuple(GSM8K_CORNER[i] if i in moved else base[i] for i in range(len(FACTORS))))

    start = at(frozenset())
    out = {"delta": at(frozenset(range(len(FACTORS)))) - start}
    for i, factor in enumerate(FACTORS):
        others = [j for j in range(len(FACTORS)) if j != i]
        out[f"one_at_a_time:{factor}"] = at(frozenset({i})) - start
        out[f"shapley:{factor}"] = sum(
            shapley_weights(len(subset)) * (at(frozenset({*subset, i})) - at(frozenset(subset)))
            for k in range(len(others) + 1) for subset in itertools.combinations(others, k))
    out["one_at_a_time:interaction"] = out["delta"] - sum(out[f"one_at_a_time:{f}"] for f in FACTORS)
    return out


@dataclass(frozen=True)
class LoadedCell:
    levels: tuple[str, str, str]
    arrays: CellArrays
    plain: Run
    spec: Run


def load_cells(folder: Path, design: dict) -> list[LoadedCell]:
    """The cells of a design folder whose two runs both exist, each aligned on its content's prompt
    order (every prompt any of the content's plain runs sent, in order of first sending)."""
    runs = {}
    for entry in design["cells"]:
        if set(entry.get("runs", {})) == {"plain", "speculative"}:
            runs[(entry["content"], entry["sampling"], entry["length"])] = tuple(
                Run.load(folder / "runs" / entry["runs"][role]) for role in ("plain", "speculative"))
    order: dict[str, dict[str, None]] = {}
    for levels, (plain, _) in runs.items():
        order.setdefault(levels[0], {}).update(dict.fromkeys(plain.requests["prompt_id"]))
    return [LoadedCell(levels, cell_arrays(plain.derived, spec.derived, list(order[levels[0]])), plain, spec)
            for levels, (plain, spec) in runs.items()]


def analyse_cells(cells: list[LoadedCell], n_resamples: int = N_RESAMPLES, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cell table, attribution table): one row per cell with each figure's point and interval;
    one row per (base, figure, share) of the attribution, for each cube between a synthetic
    corner and the GSM8K corner that was run in full."""
    if not cells:
        return pd.DataFrame(), _attribution_frame([])
    keys, sizes, statistic = design_statistic([c.levels for c in cells], [c.arrays for c in cells])
    point, low, high = bootstrap_intervals(statistic, sizes, n_resamples, seed)
    shown = {key: (p, lo, hi) for key, p, lo, hi in zip(keys, point, low, high)}
    rows = [_cell_row(c, shown, sizes[c.levels[0]]) for c in cells]
    shares = [_share_row(key, shown[key], sizes) for key in keys if key[0] == "share"]
    return pd.DataFrame(rows), _attribution_frame(shares)


Key = tuple  # ("cell", levels, figure) or ("share", base, figure, share)


def design_statistic(levels: list[tuple[str, str, str]], arrays: list[CellArrays]
                     ) -> tuple[list[Key], dict[str, int], Callable[..., np.ndarray]]:
    """(keys, prompts per content, statistic): `statistic(*indices)` takes one array of prompt
    positions per content (in the order of `sizes`, any leading shape) and gives every figure of
    every cell and every attribution share, stacked on the first axis in the order of `keys`."""
    by_levels = dict(zip(levels, arrays))
    sizes = {content: len(a.plain_tokens) for (content, _, _), a in by_levels.items()}
    bases = [base for base in BASE_CORNERS if all(lv in by_levels for lv in cube(base))]
    cell_keys: list[Key] = [("cell", lv, f) for lv in by_levels for f in (*FIGURES, *RATES)]
    share_keys: list[Key] = [("share", base, f, share) for base in bases for f in FIGURES for share in SHARES]

    def statistic(*indices: np.ndarray, axis: int = -1) -> np.ndarray:
        at = dict(zip(sizes, indices))
        figures = {lv: cell_figures(a, at[lv[0]]) for lv, a in by_levels.items()}
        values = [figures[lv][f] for _, lv, f in cell_keys]
        for base in bases:
            for f in FIGURES:
                split = attribute(lambda lv, f=f: figures[lv][f], base)
                values += [split[share] for share in SHARES]
        return np.stack(np.broadcast_arrays(*values))

    return cell_keys + share_keys, sizes, statistic


def cube(base: tuple[str, str, str]) -> list[tuple[str, str, str]]:
    """The eight cells between `base` and the GSM8K corner."""
    return list(itertools.product(*zip(base, GSM8K_CORNER)))


def _cell_row(cell: LoadedCell, shown: dict[Key, tuple[float, float, float]], n: int) -> dict:
    row = dict(zip(FACTORS, cell.levels))
    for name in (*FIGURES, *RATES):
        point, low, high = shown[("cell", cell.levels, name)]
        row[name] = point
        if name in FIGURES:
            need = needed_prompts(name)
            row[f"{name}_low"], row[f"{name}_high"] = (low, high) if n >= need else (math.nan, math.nan)
            row[f"{name}_needs_prompts"] = need if n < need else 0
    for role, run in (("plain", cell.plain), ("spec", cell.spec)):
        ok = run.derived[run.derived["status"] == "ok"]
        row[f"{role}_requests_ok"] = len(ok)
        row[f"{role}_mean_output_tokens"] = float(ok["completion_tokens"].mean()) if len(ok) else math.nan
        if "correct" in ok:
            row[f"{role}_accuracy"] = float(ok["correct"].astype(float).mean())
    row["prompts"] = n
    row["timing"] = cell.arrays.timing
    return row


def _share_row(key: Key, interval: tuple[float, float, float], sizes: dict[str, int]) -> dict:
    _, base, figure, share = key
    n = min(sizes[base[0]], sizes[GSM8K_CORNER[0]])
    need = needed_prompts(figure, share)
    low, high = interval[1:] if n >= need else (math.nan, math.nan)
    return {"base": base[0], "figure": figure, "share": share, "value": interval[0], "low": low, "high": high,
            "prompts": n, "needs_prompts": need if n < need else 0}


def _attribution_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=ATTRIBUTION_COLUMNS)
