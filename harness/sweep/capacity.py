"""The capacity under an SLO: the highest arrival rate whose SLO attainment stays at or above a
target, found by bisection over open-loop runs.

`search(measure, ...)` is the whole procedure, given `measure(rate, role) -> Trial` (one run asked
for that rate, each on an arrival schedule of its own: `harness.sweep.capacity_dir`):
1. the floor must pass (else the capacity is below it) and the ceiling must fail (else it is at
   least the ceiling): each is one trial;
2. bisection on the geometric mean of the asked rates (rates span orders of magnitude; rounded to
   RATE_DIGITS significant digits) until `high / low <= 1 + tolerance`;
3. `confirmations` runs at the low end, each on a schedule not used before. If one fails
   (attainment near the target is noisy), that rate becomes the high end, the highest lower rate
   that passed the low end, and step 2 continues from there, its first rate one tolerance below
   the one that failed (most often the capacity is just below it).
At most `max_trials` runs in all; a search that runs out says so instead of claiming a capacity.
A trial passes when its attainment (point estimate) is at least the target and the server kept up
with it (no overload: `harness.metrics.overload`); each trial keeps its 95% interval.

The search bisects on the rate each trial offers, and confirms there: a trial's drawn schedule
offers exactly the rate asked over its measured requests (`harness.run.arrivals`: the gaps are
scaled to the rate, stretch by stretch of the trial's windows), where a plain draw strayed by about
1 / sqrt(requests) (11.57 to 14.34 req/s offered for one asked 11.35), so that trials at one asked
rate were judged at different loads and confirmations passed or failed by luck. The outcome is
still read from the runs' offered rates (a replayed or hand-made schedule may offer another): the
capacity is the lowest rate offered by the runs that passed at the low end (the search's and the
confirmations'), and the bracket runs from there to the highest rate offered by a failing run at
the high end; the spread of the confirmations' attainments is the uncertainty the schedules leave.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

RATE_DIGITS = 4  # significant digits of a bisected rate: readable in folder names and tables


@dataclass(frozen=True)
class Trial:
    """One run asked for `rate`: the rate its schedule offered, its SLO attainment (with a 95%
    interval), whether the server kept up, the arrival seed it was drawn with, and where it lies."""

    rate: float
    attainment: float
    ci95_low: float = math.nan
    ci95_high: float = math.nan
    run_dir: str | None = None
    role: str = "search"  # floor, ceiling, search or confirmation
    offered_rps: float = math.nan  # NaN: not measured, the asked rate stands for it
    overloaded: bool = False
    arrival_seed: int | None = None
    service_ms: float = math.nan  # E2E p50 from the send: how long the server took per request

    def passes(self, target: float) -> bool:
        return self.attainment >= target and not self.overloaded

    @property
    def offered(self) -> float:
        return self.offered_rps if math.isfinite(self.offered_rps) else self.rate


@dataclass
class Capacity:
    """The outcome: the capacity (None when even the floor failed) with its bracket, whether the
    confirmation run held, and every trial in the order run."""

    target: float
    tolerance: float
    capacity_rps: float | None = None  # offered
    bracket: tuple[float, float] = (math.nan, math.nan)  # offered
    status: str = "searching"  # confirmed, at least the ceiling, below the floor, out of trials
    trials: list[Trial] = field(default_factory=list)
    asked_rps: float | None = None  # the asked rate of the runs that hold the capacity

    def holding(self) -> list[Trial]:
        """The passing runs at the asked rate of the capacity: the search's and the confirmations'."""
        return [t for t in self.trials if t.rate == self.asked_rps and t.passes(self.target)]

    def spread(self) -> str:
        """The confirmations' spread: how many runs, their offered rates and attainments."""
        held = self.holding()
        offered, attained = [t.offered for t in held], [t.attainment for t in held]
        return (f"{len(held)} runs on schedules of their own offered {min(offered):.3g}-{max(offered):.3g} req/s, "
                f"attainment {min(attained):.1%}-{max(attained):.1%}")

    def sentence(self) -> str:
        """The outcome in words, in rates offered."""
        low, high = self.bracket
        rule = f"SLO attainment >= {self.target:.1%}, tolerance {self.tolerance:.0%}"
        if self.status == "below the floor":
            return f"capacity below the lowest rate tried, {high:.3g} req/s offered ({rule})"
        if self.status == "at least the ceiling":
            return f"capacity at least the highest rate tried, {low:.3g} req/s offered ({rule})"
        if self.status != "confirmed":
            return (f"capacity NOT confirmed: ran out of trials, bracket [{low:.3g}, {high:.3g}] req/s offered "
                    f"({rule})")
        return (f"capacity {low:.3g} req/s offered (asked {self.asked_rps:g}: {self.spread()}), bracket "
                f"[{low:.3g}, {high:.3g}] req/s offered, confirmed by runs on unseen schedules ({rule})")


def search(measure: Callable[[float, str], Trial], floor: float, ceiling: float, target: float = 0.99,
           tolerance: float = 0.10, max_trials: int = 12, confirmations: int = 1) -> Capacity:
    """Bisect the highest rate in [floor, ceiling] whose attainment meets `target` (module docstring);
    `measure(rate, role)` runs one trial."""
    if not 0 < floor < ceiling:
        raise ValueError("the rates need 0 < floor < ceiling")
    found = Capacity(target=target, tolerance=tolerance)

    def trial(rate: float, role: str) -> bool:
        found.trials.append(measure(rate, role))
        return found.trials[-1].passes(target)

    if not trial(floor, "floor"):
        return _ended(found, "below the floor", None, floor)
    if trial(ceiling, "ceiling"):
        return _ended(found, "at least the ceiling", ceiling, None)
    low, high, stepped = floor, ceiling, False
    while len(found.trials) < max_trials:
        middle = _next_rate(low, high, tolerance, stepped)
        if high / low > 1 + tolerance and low < middle < high:
            low, high = (middle, high) if trial(middle, "search") else (low, middle)
            stepped = False
            continue
        held = _confirm(trial, low, confirmations, max_trials - len(found.trials))
        if held is None:
            break
        if held:
            return _ended(found, "confirmed", low, high)
        high, stepped = low, True
        low = max((t.rate for t in found.trials if t.rate < high and t.passes(target)), default=None)
        if low is None:
            return _ended(found, "below the floor", None, high)
    return _ended(found, "out of trials", low, high)


def _next_rate(low: float, high: float, tolerance: float, stepped: bool) -> float:
    """The next rate to try: the geometric middle of the bracket, or, just after a confirmation failed
    at `high`, one tolerance below it (the capacity is most likely just below a rate that passed once
    and then failed; bisecting down from the last lower pass, often the floor, costs several trials)."""
    if stepped:
        step = float(f"{high / (1 + tolerance):.{RATE_DIGITS}g}")
        if low < step < high:
            return step
    return float(f"{math.sqrt(low * high):.{RATE_DIGITS}g}")


def _confirm(trial: Callable[[float, str], bool], rate: float, runs: int, left: int) -> bool | None:
    """`runs` confirmations at `rate`, stopping at the first that fails (False); None when the trials
    left run out first."""
    for _ in range(runs):
        if left <= 0:
            return None
        left -= 1
        if not trial(rate, "confirmation"):
            return False
    return True


def _ended(found: Capacity, status: str, low: float | None, high: float | None) -> Capacity:
    """The outcome in rates offered: the low end is the lowest rate offered by the passing runs asked
    for `low`, the high end the highest offered by the failing runs asked for `high` (0 and infinity
    for an open end); the capacity is the low end, unless the search ended without one."""
    def offered(rate: float | None, passed: bool, pick: Callable, default: float) -> float:
        runs = [t.offered for t in found.trials if t.rate == rate and t.passes(found.target) == passed]
        return pick(runs) if runs else default

    found.status, found.asked_rps = status, low
    found.bracket = (offered(low, True, min, 0.0), offered(high, False, max, math.inf))
    if status in ("confirmed", "at least the ceiling"):
        found.capacity_rps = found.bracket[0]
    return found
