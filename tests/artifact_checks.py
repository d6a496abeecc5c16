"""Checks over what a command wrote, shared by the end-to-end tests (on real servers) and the unit
tests (on made-up runs and planted defects): each returns the list of what is wrong, empty when
nothing is, so every outcome a command may end with is checked, none waved through."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

STATUSES = ("confirmed", "below the floor", "at least the ceiling", "out of trials")


def capacity_problems(manifest: dict, target: float) -> list[str]:
    """What is wrong with a capacity search's `capacity.json`: whatever it ended with, its bracket
    must be what its own trials say, in rates offered (the low end the lowest rate offered by the
    passing runs at the asked rate, or 0; the high end offered by a failing run, or open), its
    capacity the low end exactly when it has one, and a confirmed capacity must end on a passing
    confirmation at the asked rate."""
    status, trials = manifest["status"], manifest["trials"]
    if status not in STATUSES:
        return [f"unknown status {status!r}"]
    if not trials:
        return ["no trials"]
    problems = []

    def passes(t: dict) -> bool:
        return t["attainment"] >= target and not t["overloaded"]

    def offered(t: dict) -> float:
        return t["offered_rps"] if t["offered_rps"] is not None and math.isfinite(t["offered_rps"]) else t["rate"]

    low, high = manifest["bracket"]
    asked = manifest["asked_rps"]
    held = [offered(t) for t in trials if t["rate"] == asked and passes(t)]
    if asked is None:
        if low != 0:
            problems.append(f"no rate held, yet the bracket's low end is {low}")
    elif not held:
        problems.append(f"no passing run at the asked rate {asked}")
    elif low != min(held):
        problems.append(f"low end {low} is not the lowest offered by the passing runs at {asked}: {min(held)}")
    if high is None:
        if status != "at least the ceiling":
            problems.append(f"an open high end for status {status!r}")
    else:
        failed = [t for t in trials if not passes(t) and offered(t) == high]
        if not failed:
            problems.append(f"high end {high} is offered by no failing run")
        elif high != max(offered(t) for t in trials if not passes(t) and t["rate"] == failed[0]["rate"]):
            problems.append(f"high end {high} is not the highest offered by the failing runs at its rate")
    has_capacity = status in ("confirmed", "at least the ceiling")
    if has_capacity and manifest["capacity_rps"] != low:
        problems.append(f"capacity {manifest['capacity_rps']} is not the bracket's low end {low}")
    if not has_capacity and manifest["capacity_rps"] is not None:
        problems.append(f"a capacity {manifest['capacity_rps']} for status {status!r}")
    if status == "below the floor" and high is not None and any(passes(t) and offered(t) < high for t in trials):
        problems.append("below the floor, yet a run under the high end passed")
    if status == "at least the ceiling" and (asked is None or asked < max(t["rate"] for t in trials)):
        problems.append(f"at least the ceiling, yet asked {asked} is not the highest rate tried")
    if status == "confirmed":
        last = trials[-1]
        if last["role"] != "confirmation" or last["rate"] != asked or not passes(last):
            problems.append(f"confirmed, yet the last trial is not a passing confirmation at {asked}: {last}")
    return problems


def paired_change_problems(candidate: pd.DataFrame, untimed: Iterable[str] = ()) -> list[str]:
    """What is wrong with one candidate's rows of a paired comparison: every change has an
    interval that holds it; an interval may be missing (not finite) only for a metric named in
    `untimed`, one that some request of a run has no figure for (a resample may then hold none)."""
    untimed = set(untimed)
    problems = []
    for row in candidate[candidate["change"].notna()].itertuples():
        finite = math.isfinite(row.ci95_low) and math.isfinite(row.ci95_high)
        if not finite and row.metric not in untimed:
            problems.append(f"{row.metric} {row.stat}: no interval, though every request has the figure")
        elif finite and not row.ci95_low <= row.change <= row.ci95_high:
            problems.append(f"{row.metric} {row.stat}: change {row.change} outside [{row.ci95_low}, {row.ci95_high}]")
    return problems


def accept_length_problems(derived: pd.DataFrame) -> list[str]:
    """What is wrong with the accept lengths of a run's derived requests: each is what the request's
    own counters imply, not merely at least 1 (which any number of accepted drafts gives). SGLang
    counts every token over its verify rounds (`completion_tokens / verify_rounds`, the prefill
    token included); vLLM and llama.cpp count the accepted drafts and the bonus token a round
    (`1 + accepted / verify_rounds`), and llama.cpp's rounds are its decode steps after the first
    token (`rounds + accepted + 1 == completion_tokens`). No request accepts more than it was
    drafted, and a request without rounds has no accept length."""
    problems = []
    for row in derived.itertuples():
        rounds, length = row.verify_rounds, row.accept_length
        if not rounds > 0:
            if not math.isnan(length):
                problems.append(f"{row.prompt_id}: accept length {length} without verify rounds")
            continue
        implied = (row.completion_tokens / rounds if row.engine == "sglang"
                   else 1 + row.accepted_draft_tokens / rounds)
        if not math.isclose(length, implied, rel_tol=1e-3):
            problems.append(f"{row.prompt_id}: accept length {length}, its counters imply {implied}")
        if row.engine == "llamacpp" and rounds + row.accepted_draft_tokens + 1 != row.completion_tokens:
            problems.append(f"{row.prompt_id}: {rounds} rounds and {row.accepted_draft_tokens} accepted drafts "
                            f"do not make {row.completion_tokens} tokens")
        if row.proposed_draft_tokens >= 0 and row.accepted_draft_tokens > row.proposed_draft_tokens:
            problems.append(f"{row.prompt_id}: {row.accepted_draft_tokens} drafts accepted of "
                            f"{row.proposed_draft_tokens} proposed")
    return problems


def exact_mcnemar(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value, summed here term by term: twice the chance that a fair coin
    over the b + c discordant questions falls min(b, c) times or fewer, at most 1 (1 without any)."""
    n = b + c
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n) if n else 1.0


def accuracy_change_problems(row: pd.Series, base_correct: pd.Series, cand_correct: pd.Series) -> list[str]:
    """What is wrong with a paired accuracy comparison's row, given each run's correct flags indexed
    by question: it must pair the questions both runs answered, state the change in accuracy over
    them with an interval that holds it, and the exact McNemar p-value of their discordant ones."""
    both = pd.concat({"base": base_correct, "cand": cand_correct}, axis=1, join="inner").astype(bool)
    b = int((both["base"] & ~both["cand"]).sum())
    c = int((~both["base"] & both["cand"]).sum())
    change = both["cand"].mean() - both["base"].mean()
    problems = []
    if not row["paired"] or row["n"] != len(both):
        problems.append(f"not paired over the {len(both)} common questions: paired {row['paired']}, n {row['n']}")
    if not math.isclose(row["change"], change, abs_tol=1e-12):
        problems.append(f"change {row['change']}, the flags say {change}")
    if not row["ci95_low"] <= row["change"] <= row["ci95_high"]:
        problems.append(f"change {row['change']} outside [{row['ci95_low']}, {row['ci95_high']}]")
    expected = exact_mcnemar(b, c)
    if not math.isclose(row["p_value"], expected, rel_tol=1e-9):
        problems.append(f"p-value {row['p_value']}, exact McNemar over b = {b}, c = {c} is {expected}")
    return problems
