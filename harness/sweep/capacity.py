"""The capacity under an SLO: the highest arrival rate whose SLO attainment stays at or above a
target, found by bisection over short open-loop runs.

`search(measure, ...)` is the whole procedure, given `measure(rate) -> Trial` (one run at that rate):
1. the floor must pass (else the capacity is below it) and the ceiling must fail (else it is at
   least the ceiling): each is one trial;
2. bisection on the geometric mean of the bracket (rates span orders of magnitude; rounded to
   RATE_DIGITS significant digits) until `high / low <= 1 + tolerance`: the bracket is [highest rate
   that passed, lowest that failed];
3. a confirmation run at the bracket's low end. If it fails (attainment near the target is noisy),
   that rate becomes the bracket's high end, the highest lower rate that passed its low end, and
   step 2 continues from there.
At most `max_trials` runs in all; a search that runs out says so instead of claiming a capacity.
A trial passes when its attainment (point estimate) is at least the target; each trial keeps its
95% interval, so a reader sees how sure each step was.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

RATE_DIGITS = 4  # significant digits of a bisected rate: readable in folder names and tables


@dataclass(frozen=True)
class Trial:
    """One run at an offered rate: its SLO attainment (with a 95% interval) and where it lies."""

    rate: float
    attainment: float
    ci95_low: float = math.nan
    ci95_high: float = math.nan
    run_dir: str | None = None
    role: str = "search"  # floor, ceiling, search or confirmation

    def passes(self, target: float) -> bool:
        return self.attainment >= target


@dataclass
class Capacity:
    """The outcome: the capacity (None when even the floor failed) with its bracket, whether the
    confirmation run held, and every trial in the order run."""

    target: float
    tolerance: float
    capacity_rps: float | None = None
    bracket: tuple[float, float] = (math.nan, math.nan)
    status: str = "searching"  # confirmed, at least the ceiling, below the floor, out of trials
    trials: list[Trial] = field(default_factory=list)

    def sentence(self) -> str:
        """The outcome in words."""
        low, high = self.bracket
        rule = f"SLO attainment >= {self.target:.1%}, tolerance {self.tolerance:.0%}"
        if self.status == "below the floor":
            return f"capacity below the lowest rate tried, {high:g} req/s ({rule})"
        if self.status == "at least the ceiling":
            return f"capacity at least the highest rate tried, {low:g} req/s ({rule})"
        told = "confirmed by a final run" if self.status == "confirmed" else "NOT confirmed: ran out of trials"
        return f"capacity {low:.3g} req/s, bracket [{low:.3g}, {high:.3g}] req/s, {told} ({rule})"


def search(measure: Callable[[float, str], Trial], floor: float, ceiling: float, target: float = 0.99,
           tolerance: float = 0.10, max_trials: int = 12) -> Capacity:
    """Bisect the highest rate in [floor, ceiling] whose attainment meets `target` (module docstring);
    `measure(rate, role)` runs one trial."""
    if not 0 < floor < ceiling:
        raise ValueError("the rates need 0 < floor < ceiling")
    found = Capacity(target=target, tolerance=tolerance)

    def trial(rate: float, role: str) -> bool:
        found.trials.append(measure(rate, role))
        return found.trials[-1].passes(target)

    if not trial(floor, "floor"):
        found.bracket, found.status = (0.0, floor), "below the floor"
        return found
    if trial(ceiling, "ceiling"):
        found.bracket, found.status, found.capacity_rps = (ceiling, math.inf), "at least the ceiling", ceiling
        return found
    low, high = floor, ceiling
    while len(found.trials) < max_trials:
        middle = float(f"{math.sqrt(low * high):.{RATE_DIGITS}g}")
        if high / low > 1 + tolerance and low < middle < high:
            low, high = (middle, high) if trial(middle, "search") else (low, middle)
            continue
        if trial(low, "confirmation"):
            found.bracket, found.status, found.capacity_rps = (low, high), "confirmed", low
            return found
        high = low
        low = max((t.rate for t in found.trials if t.rate < high and t.passes(target)), default=None)
        if low is None:
            found.bracket, found.status = (0.0, high), "below the floor"
            return found
    found.bracket, found.status = (low, high), "out of trials"
    return found
