"""Ray's task API as the sweep driver uses it (`harness.sweep.on_ray`), on a made-up cluster.

A task runs, in-process, the first time the driver waits while some live node has everything the
task asks for (Ray's feasibility: totals, busy or not); a task that no live node can hold stays
pending and each wait that returns nothing moves the fake clock on by its timeout. `events` change
the nodes at given clock times (a worker that dies, one that joins). A task's result ref is its
index; `broken` indexes raise on get (a worker that died).
"""

from __future__ import annotations

from typing import Any

WORKER = {"NodeID": "w1", "Alive": True, "Resources": {"CPU": 8.0, "GPU": 8.0, "h200": 8.0}}


class FakeRay:
    def __init__(self, broken: set[int] = frozenset(), nodes: list[dict] | None = None,
                 events: dict[float, list[dict]] | None = None) -> None:
        self.tasks, self.asks, self.results, self.options = [], [], {}, None
        self.broken, self.cancelled, self.now = set(broken), [], 0.0
        self.current_nodes = [WORKER] if nodes is None else nodes
        self.events = dict(events or {})

    def remote(self, function):
        fake = self

        class Task:
            def options(self, **options):
                fake.options = options
                return self

            def remote(self, *args):
                fake.tasks.append((function, args))
                fake.asks.append({"CPU": fake.options["num_cpus"], "GPU": fake.options["num_gpus"],
                                  **fake.options["resources"]})
                return len(fake.tasks) - 1
        return Task()

    def clock(self) -> float:
        return self.now

    def nodes(self) -> list[dict]:
        return list(self.current_nodes)

    def _runnable(self, ref: int) -> bool:
        asks = {name: amount for name, amount in self.asks[ref].items() if amount > 0}
        return any(node["Alive"] and all(node["Resources"].get(k, 0.0) >= v for k, v in asks.items())
                   for node in self.current_nodes)

    def wait(self, refs: list[int], num_returns: int, timeout: float | None = None) -> tuple[list, list]:
        ready = [ref for ref in sorted(refs) if ref in self.results or self._runnable(ref)][:num_returns]
        if not ready:
            if timeout is None:
                raise AssertionError("ray.wait without a timeout on tasks no node can place: blocks for ever")
            self.now += timeout
            for at in sorted(self.events):
                if at <= self.now:
                    self.current_nodes = self.events.pop(at)
            return [], list(refs)
        for ref in ready:
            if ref not in self.results:
                function, args = self.tasks[ref]
                self.results[ref] = function(*args)
        return ready, [ref for ref in refs if ref not in ready]

    def get(self, ref: int) -> Any:
        if ref in self.broken:
            raise RuntimeError("worker died\ntraceback")
        return self.results[ref]

    def cancel(self, ref: int, force: bool = False) -> None:
        self.cancelled.append(ref)
