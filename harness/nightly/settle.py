"""Settling a night: a first-pass regression alarms only when a confirmation on a quiet host agrees.

The rule, per metric that regressed in the first pass (`harness.nightly.gate.verdicts`):
- a confirmation attempt reruns the workload (`harness.nightly.job`) and gates the rerun again;
- the first attempt on a quiet host settles it: `not confirmed` if the metric does not regress there,
  `regressed (confirmed)` if it does; for metrics the host's load cannot move (accuracy, accept
  length) any attempt settles it the same way;
- an attempt on a busy host (`busy_reasons`) settles nothing, whether it agrees or not (load can
  hide a slowdown as well as make one): another attempt is made, up to the configured number; if
  none settles it, the metric is `inconclusive (host busy)`.
A `pass` drawn from a busy first pass is no more evidence than a regression drawn from one: when
the first pass ran on a busy host, every load-sensitive metric that passed is settled the same way
(a quiet attempt says `pass` or `regressed (confirmed)`; none, `inconclusive (host busy)`).
The night is a regression if any metric is confirmed, else inconclusive if any is inconclusive,
else a pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.nightly.foreign import describe
from harness.records.entries import HostLoadEntry

CONFIRMED, NOT_CONFIRMED, INCONCLUSIVE = "regressed (confirmed)", "not confirmed", "inconclusive (host busy)"
# Metrics whose value does not depend on how fast the host ran the requests.
LOAD_INSENSITIVE = {"accept_length_token_weighted", "gsm8k_accuracy_strict"}
# Judged by the load of foreign processes (`harness.nightly.foreign`), not the setup's; the host's
# whole remainder (`other_cpu_share`, the setup's servers in it) is kept and may be given a limit too.
DEFAULT_BUSY_LIMITS = {"foreign_cpu_share": 0.10, "steal_share": 0.05, "tpot_client_server_gap": 0.10}
BUSY_WORDING = {"foreign_cpu_share": "foreign processes took {:.0%} of the host's CPU",
                "other_cpu_share": "processes other than the client and server took {:.0%} of the host's CPU",
                "steal_share": "the hypervisor stole {:.0%} of the CPU time",
                "tpot_client_server_gap": "the client's TPOT exceeded the server's by {:.0%}"}


@dataclass(frozen=True)
class Attempt:
    """One confirmation: its run directories ([fresh baseline,] rerun) and the rerun's verdicts."""

    runs: tuple[Path, ...]
    table: pd.DataFrame
    busy: list[str] = field(default_factory=list)  # why the host was too busy, empty when quiet


def tpot_gap(derived: pd.DataFrame) -> float:
    """Client-over-server TPOT gap: mean(tpot_ms) / mean(server_tpot_ms) - 1 over the requests that
    have both (fraction; NaN when the server reports no timings). A client starved of CPU stamps
    its chunks late, so its TPOT drifts above the server's own."""
    client, server = (derived[c].to_numpy(dtype=float) for c in ("tpot_ms", "server_tpot_ms"))
    both = np.isfinite(client) & np.isfinite(server)
    return float(client[both].mean() / server[both].mean() - 1) if both.any() else math.nan


def busy_reasons(host_load: HostLoadEntry | None, limits: Mapping[str, float]) -> list[str]:
    """Why a run's host was too busy for its timings to mean anything: each figure of `host_load`
    (a run record's `host_load`) above its limit, in words; the foreign share names its processes.
    Unreadable figures are skipped."""
    reasons = []
    for name, limit in limits.items():
        value = host_load.figure(name) if host_load else None
        if value is not None and math.isfinite(value) and value > limit:
            named = describe(host_load) if name == "foreign_cpu_share" else ""
            reasons.append(f"{BUSY_WORDING[name].format(value)} (limit {limit:.0%}){': ' + named if named else ''}")
    return reasons


def _regressed(verdict: object) -> bool:
    return str(verdict).startswith("regressed")


def _settle_metric(metric: str, stat: str, attempts: list[Attempt], refuted: str = NOT_CONFIRMED) -> str:
    """CONFIRMED, `refuted` or INCONCLUSIVE from the first attempt that can settle the metric."""
    for attempt in attempts:
        match = attempt.table[(attempt.table["metric"] == metric) & (attempt.table["stat"] == stat)]
        if attempt.busy and metric not in LOAD_INSENSITIVE:
            continue  # a busy host can hide a slowdown as well as make one: it settles nothing
        if match.empty or not _regressed(match["verdict"].iloc[0]):
            return refuted
        return CONFIRMED
    return INCONCLUSIVE


def _unsettled(row: object, first_busy: bool) -> str | None:
    """What a quiet attempt that does not regress makes of this first-pass row, or None when the
    row needs no attempt: a regression is refuted (`not confirmed`); a pass on a busy host stands."""
    if _regressed(row.verdict):
        return NOT_CONFIRMED
    if first_busy and row.verdict == "pass" and row.metric not in LOAD_INSENSITIVE:
        return "pass"
    return None


def settle(first: pd.DataFrame, attempts: list[Attempt], first_busy: bool = False) -> pd.DataFrame:
    """The first-pass verdict table with each regression (and, after a busy first pass, each
    load-sensitive pass) settled by the attempts (module rule), and a `confirmation` column listing
    each attempt's verdict for that metric."""
    final = first.copy()
    seen = []
    for index, row in zip(first.index, first.itertuples()):
        refuted = _unsettled(row, first_busy)
        if refuted is None:
            seen.append("")
            continue
        final.loc[index, "verdict"] = _settle_metric(row.metric, row.stat, attempts, refuted)
        seen.append("; ".join(_attempt_note(a, row.metric, row.stat) for a in attempts))
    return final.assign(confirmation=seen)


def _attempt_note(attempt: Attempt, metric: str, stat: str) -> str:
    match = attempt.table[(attempt.table["metric"] == metric) & (attempt.table["stat"] == stat)]
    if match.empty:
        return "not measured"
    change = match["change"].iloc[0]
    text = f"{match['verdict'].iloc[0]} ({change:+.1%})" if pd.notna(change) else str(match["verdict"].iloc[0])
    return text + (" on a busy host" if attempt.busy else "")


def undecided(first: pd.DataFrame, attempts: list[Attempt], first_busy: bool = False) -> bool:
    """Whether a first-pass row that needs settling (`_unsettled`) is still unsettled."""
    return any(_settle_metric(r.metric, r.stat, attempts) == INCONCLUSIVE
               for r in first.itertuples() if _unsettled(r, first_busy) is not None)


def night_outcome(final: pd.DataFrame) -> str:
    """`regression`, `inconclusive` or `pass` for a settled verdict table (module rule)."""
    verdicts = set(final["verdict"])
    if any(_regressed(v) for v in verdicts):
        return "regression"
    return "inconclusive" if INCONCLUSIVE in verdicts else "pass"
