"""How long each trial of a capacity search runs, and on which arrival schedule.

A trial must show the queue's steady state at its rate, and enough of it to judge attainment:
- measured requests: `trial_requests`, else enough for MIN_MISSES misses at the target (a 99%
  target is judged on the 1% that miss: 1,000 requests), from MIN_TRIAL_REQUESTS to
  MAX_TRIAL_REQUESTS;
- before them a warm-up window, in which the queue fills from empty: WARMUP_SERVICE_TIMES times the
  longest service time (E2E p50 from the send) of the earlier trials that passed (a queue that kept
  up; an overloaded one's times grow with its length), and at least WARMUP_SHARE of the measured
  stretch (the first trial has no service time to go by);
- an arrival seed of its own, derived from the search's `--arrival-seed` and the trial's number:
  no two trials send one draw scaled to their rates, so one lucky draw cannot carry the search.
The trial is then an open loop of that duration (`--duration`), the requests due in the warm-up
window left out of its figures; a longer `--duration` or `--warmup-window` given to the search wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_MISSES = 10  # misses expected at the target in a trial's measured requests
MIN_TRIAL_REQUESTS = 200
MAX_TRIAL_REQUESTS = 10_000
WARMUP_SERVICE_TIMES = 20  # a queue fed near its capacity takes tens of service times to settle
WARMUP_SHARE = 0.2


@dataclass(frozen=True)
class TrialPlan:
    """One trial's load: the rate asked, its arrival seed, how long it sends and its warm-up window."""

    rate: float
    arrival_seed: int
    duration_s: float
    warmup_window_s: float


def measured_requests(target: float, given: int | None) -> int:
    """Requests a trial measures: `given`, else MIN_MISSES / (1 - target) between MIN_TRIAL_REQUESTS
    and MAX_TRIAL_REQUESTS (a target of 100% has no miss to wait for: the most)."""
    if given is not None:
        return given
    needed = MAX_TRIAL_REQUESTS if target >= 1 else math.ceil(MIN_MISSES / (1 - target) - 1e-9)
    return min(MAX_TRIAL_REQUESTS, max(MIN_TRIAL_REQUESTS, needed))


def trial_seed(base: int, number: int) -> int:
    """The arrival seed of trial `number` of a search started with seed `base` (a 32-bit draw of
    both: searches from different seeds share no trial schedule)."""
    return int(np.random.SeedSequence([base % 2**32, number]).generate_state(1)[0])


def plan_trial(rate: float, number: int, *, base_seed: int, requests: int, service_ms: float,
               warmup_window_s: float = 0.0, cooldown_window_s: float = 0.0,
               duration_s: float | None = None) -> TrialPlan:
    """Trial `number` at `rate`: `requests` measured after a warm-up sized by `service_ms` (the
    longest E2E p50 measured so far; NaN before any), the given windows and duration as minimums."""
    measured_s = requests / rate
    settle_s = WARMUP_SERVICE_TIMES * service_ms / 1000 if math.isfinite(service_ms) else 0.0
    warmup = max(warmup_window_s, WARMUP_SHARE * measured_s, settle_s)
    duration = max(duration_s or 0.0, warmup + measured_s + cooldown_window_s)
    return TrialPlan(rate=rate, arrival_seed=trial_seed(base_seed, number), duration_s=duration,
                     warmup_window_s=warmup)
