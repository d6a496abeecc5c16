"""Whether Ray can place a sweep's cell tasks at all, and for how long it has not been able to.

Ray keeps a task that no live node could ever run (infeasible: no node has, in total, every
resource it asks for) pending without end, and says so only in a log line. Every cell of a sweep
asks for the same resources (`ray:` in the config), so when one task is infeasible all the waiting
ones are. `PlacementWatch` measures, from the nodes Ray lists, how long that has lasted; the
driver (`harness.sweep.on_ray`) fails the waiting cells once it passes the deadline. Pure: it is
given the node list and a clock, and never imports Ray.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.sweep.config import RayOptions


def requested(options: RayOptions) -> dict[str, float]:
    """The resources each cell's task asks for, named as Ray counts them; zero amounts are no demand."""
    asked = {"CPU": options.num_cpus, "GPU": options.num_gpus, **options.resources}
    return {name: amount for name, amount in asked.items() if amount > 0}


def placeable(nodes: list[dict[str, Any]], wanted: dict[str, float]) -> bool:
    """Whether some live node has, in total (busy or not), every resource in `wanted`: Ray's test of a
    feasible task. `nodes` as `ray.nodes()` gives them (`Alive`, `Resources`)."""
    return any(node.get("Alive") and all(node.get("Resources", {}).get(name, 0.0) >= amount
                                         for name, amount in wanted.items())
               for node in nodes)


def describe(wanted: dict[str, float]) -> str:
    """`CPU=1, workernode=1`: the demand as a message names it."""
    return ", ".join(f"{name}={amount:g}" for name, amount in sorted(wanted.items())) or "nothing"


class PlacementWatch:
    """Since when no live node can place a cell's task; `expired` once that has lasted the deadline.
    A node that joins in time (a restarted worker) resets it."""

    def __init__(self, options: RayOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self.wanted, self.deadline_s, self.clock = requested(options), options.placement_timeout_s, clock
        self.unplaceable_since: float | None = None

    def expired(self, nodes: list[dict[str, Any]]) -> bool:
        """Whether, given the nodes now, the cells have been unplaceable for the whole deadline."""
        if placeable(nodes, self.wanted):
            self.unplaceable_since = None
            return False
        now = self.clock()
        if self.unplaceable_since is None:
            self.unplaceable_since = now
        return now - self.unplaceable_since >= self.deadline_s

    def reason(self) -> str:
        """Why the waiting cells failed, in one line."""
        return (f"Ray could not place the cell's task: no live node has {describe(self.wanted)} "
                f"(waited {self.deadline_s:g} s, ray.placement_timeout_s)")
