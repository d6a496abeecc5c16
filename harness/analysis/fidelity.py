"""Did speculation change an answer? Greedy outputs of a plain run and a speculative run, paired by
prompt, told apart into numerics and defects.

Greedy speculative decoding is meant to emit exactly the plain server's tokens. Two correct servers
still part where the plain model is nearly tied between two tokens: a verify pass over four tokens
takes another kernel path than a one-token decode (and llama.cpp's plain decoding changes with its
prompt-cache state), which can swap a near tie. A defect (accepted draft tokens corrupted, a
verifier comparing against the wrong distribution) emits tokens the plain model does not consider
close. So, per pair, at the first output token where they part, the plain server is asked for its
top-k next tokens given the prompt and the common prefix, and:
- `margin`: its top-1 minus top-2 log-probability (nats): how close the tie was;
- `deficit`: its top-1 minus the speculative token's log-probability (nats; infinite when that
  token is outside the top-k): how far from the plain choice the speculative run went.
A pair is `numerics` when the deficit is at most NEAR_TIE_NATS, `defect` otherwise; `identical`
when the outputs agree; `unmeasured` when the plain server cannot score or a side has no token ids.
The check needs only the plain server the baseline ran on, never the speculative one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pandas as pd

# Numerics swapped tokens 0.11 and 0.45 nats apart on llama.cpp CPU (the real model's Q4_1 GGUF, plain
# against its own draft, 4 parallel slots; docs/fidelity.md); a token the plain model puts a whole nat
# below its choice is more than e times less likely than it, which no kernel path explains.
NEAR_TIE_NATS = 1.0
TOP_K = 10
CHECKS_FILE = "fidelity.csv"  # one row per pair, in the speculative run's folder
SUMMARY_FILE = "fidelity.json"  # counts, margins, verdict (the report reads it)
VERDICTS = ("identical", "numerics", "defect", "unmeasured")

# (prompt text, common output prefix ids, k) -> the plain server's top-k [(token id, logprob)]
TopNext = Callable[[str, list[int], int], list[tuple[int, float]]]


@dataclass(frozen=True)
class PairCheck:
    prompt_id: str
    position: int | None  # first output token where the two part; None when identical
    plain_token: int | None  # None: that side ended there
    spec_token: int | None
    margin: float
    deficit: float
    verdict: str


def first_divergence(plain: list[int], spec: list[int]) -> int | None:
    """Index of the first output token where the two differ (or where the shorter one ended)."""
    for i, (a, b) in enumerate(zip(plain, spec)):
        if a != b:
            return i
    return None if len(plain) == len(spec) else min(len(plain), len(spec))


def margin_and_deficit(top: list[tuple[int, float]], spec_token: int | None) -> tuple[float, float]:
    """(top-1 - top-2, top-1 - logprob of the speculative token) from the plain server's top-k."""
    logprobs = sorted((lp for _, lp in top), reverse=True)
    margin = logprobs[0] - logprobs[1] if len(logprobs) > 1 else math.inf
    found = dict(top)
    deficit = logprobs[0] - found[spec_token] if spec_token in found else math.inf
    return margin, deficit


def verdict_of(deficit: float, near_tie: float) -> str:
    return "numerics" if deficit <= near_tie else "defect"


def check_pair(prompt_id: str, prompt: str | None, plain: list[int], spec: list[int], top_next: TopNext | None,
               near_tie: float = NEAR_TIE_NATS) -> PairCheck:
    position = first_divergence(plain, spec)
    if position is None:
        return PairCheck(prompt_id, None, None, None, math.nan, math.nan, "identical")
    plain_token = plain[position] if position < len(plain) else None
    spec_token = spec[position] if position < len(spec) else None
    if top_next is None or prompt is None or not plain or not spec:
        return PairCheck(prompt_id, position, plain_token, spec_token, math.nan, math.nan, "unmeasured")
    margin, deficit = margin_and_deficit(top_next(prompt, plain[:position], TOP_K), spec_token)
    if spec_token is None:  # the speculative run stopped where plain went on: judged by the tie alone
        deficit = margin
    return PairCheck(prompt_id, position, plain_token, spec_token, margin, deficit, verdict_of(deficit, near_tie))


def greedy_pairs(plain: pd.DataFrame, spec: pd.DataFrame) -> pd.DataFrame:
    """Records of both runs with the same prompt, each greedy (temperature 0 or unset) and answered."""
    keep = ["prompt_id", "prompt_text", "output_ids"]

    def usable(frame: pd.DataFrame) -> pd.DataFrame:
        greedy = frame["sampling_json"].map(lambda text: not json.loads(text).get("temperature"))
        return frame[(frame["status"] == "ok") & greedy][keep]

    return usable(plain).merge(usable(spec), on=["prompt_id", "prompt_text"], suffixes=("_plain", "_spec"))


def ids(values) -> list[int]:
    """Token ids as Python ints (a records table holds numpy arrays of them)."""
    return [int(i) for i in values]


def check_runs(plain: pd.DataFrame, spec: pd.DataFrame, top_next: TopNext | None,
               near_tie: float = NEAR_TIE_NATS) -> pd.DataFrame:
    """One row per greedy pair (`PairCheck`'s fields)."""
    rows = [asdict(check_pair(row.prompt_id, row.prompt_text, ids(row.output_ids_plain), ids(row.output_ids_spec),
                              top_next, near_tie))
            for row in greedy_pairs(plain, spec).itertuples(index=False)]
    return pd.DataFrame(rows, columns=list(PairCheck.__dataclass_fields__))


def summary(checks: pd.DataFrame, near_tie: float = NEAR_TIE_NATS) -> dict:
    """Counts by verdict, the margin distribution where the pairs parted, and the run's verdict."""
    counts = {v: int((checks["verdict"] == v).sum()) for v in VERDICTS}
    parted = checks[checks["verdict"].isin(["numerics", "defect"])]
    margins = parted["margin"].replace(math.inf, math.nan).dropna()
    quantiles = {f"margin_p{q}": float(margins.quantile(q / 100)) for q in (50, 90)} if len(margins) else {}
    if counts["defect"]:
        verdict = f"CHANGED: {counts['defect']} of {len(checks)} answers parted from plain on a token it does not tie"
    elif counts["numerics"] or counts["identical"]:
        verdict = (f"unchanged: {counts['identical']} identical, {counts['numerics']} parted at a near tie "
                   f"(within {near_tie} nats)")
    else:
        verdict = "not measured: no greedy pair could be checked"
    return {"pairs": len(checks), **counts, **quantiles, "near_tie_nats": near_tie, "verdict": verdict}
