"""The end-to-end tier's servers: each started once, ahead of the first test that needs it, and
stopped after the last one.

Start-up is most of what a server costs on this 2-core host (20-60 s of both cores for SGLang or
vLLM), so the pool starts the collected tests' servers in the order the tests will want them, while
the unit tier and the earlier tests run: at most `AHEAD` started and not yet taken by a test, and
at most `HEAVY_ALIVE` SGLang or vLLM servers alive at once (a few GB each). A test that wants a
server the pool has not reached starts it at once itself, past the cap.

Every server is started from the thread that runs the tests: the kernel's parent-death signal
(`harness.run.server._die_with_parent`) fires when the thread that started a child ends, so a
server started from a helper thread would be stopped as soon as that thread finished. Starting is
`Popen` and returns at once; only a test that takes a server waits for it to be healthy.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.engines.prometheus import metric_total, parse_metrics
from harness.engines.registry import engine_named
from harness.engines.series import GENERATION_TOKENS, by_role
from harness.guard.profiles import load_profile
from harness.run.embedded import embedded_launch
from harness.run.server import ManagedServer, PortTaken
from tests.e2e.budget import POOL_LOG_PREFIX

AHEAD = 2  # servers started and not yet taken: start-ups share both cores with the running tests
HEAVY_ALIVE = 4  # 2.5-3 GB each on this 24 GB host (RSS of an idle SGLang test bed, its three processes)
LIGHT_ENGINES = {"llamacpp"}  # a few hundred MB each: not counted against HEAVY_ALIVE


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    model_dir: Path


@dataclass(frozen=True)
class Served:
    """What a session server serves: a profile, and another model than the profile's own."""

    profile: str
    model: Callable[[], Path] | None = None

    @property
    def engine(self) -> str:
        return load_profile(self.profile).engine

    @property
    def heavy(self) -> bool:
        return self.engine not in LIGHT_ENGINES


def generation_tokens(served: Served, base_url: str) -> float | None:
    """The server's own count of the output tokens it has generated (None: not exported or not read)."""
    engine = engine_named(served.engine)
    series = by_role(engine.server_series)[GENERATION_TOKENS]
    try:
        text = httpx.get(f"{base_url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    return metric_total(parse_metrics(text, [series.metric]), series.metric)


class ServerPool:
    def __init__(self, served: dict[str, Served], order: Iterable[str], last_test: dict[str, str]) -> None:
        """`order`: the servers in the order of their first test; `last_test`: server -> the id of the
        test after which it is stopped."""
        self._served = served
        self._pending = deque(order)
        self._last_test = last_test
        self._started: dict[str, tuple[ManagedServer, LiveServer]] = {}
        self._healthy: set[str] = set()
        self._failed: dict[str, BaseException] = {}
        self._final: dict[str, float] = {}

    def start_ahead(self) -> None:
        """Start the next servers the tests will want, without waiting for them."""
        while self._pending and len(self._started.keys() - self._healthy) < AHEAD and self._fits(self._pending[0]):
            self._start(self._pending.popleft())

    def take(self, name: str) -> LiveServer:
        """The server `name`, healthy: the one started ahead, else one started now."""
        if name not in self._started and name not in self._failed:
            if name in self._pending:
                self._pending.remove(name)
            self._start(name)
        if name in self._failed:
            raise self._failed[name]
        if name not in self._healthy:
            self._wait_healthy(name)
        self.start_ahead()
        return self._started[name][1]

    def done(self, test_id: str) -> None:
        """The test `test_id` is done: stop each server whose last test it was."""
        for name, last in self._last_test.items():
            if last == test_id:
                self._stop(name)
        self.start_ahead()

    def generated(self) -> dict[str, float]:
        """Output tokens each pooled server has generated so far, by its own counter (a stopped
        server: its last count; a server whose counter cannot be read is left out)."""
        counts = dict(self._final)
        for name in self._healthy:
            counts[name] = generation_tokens(self._served[name], self._started[name][1].base_url)
        return {name: count for name, count in counts.items() if count is not None}

    def close(self) -> None:
        self._pending.clear()
        for name in list(self._started):
            self._stop(name)

    def _fits(self, name: str) -> bool:
        heavy_alive = sum(self._served[alive].heavy for alive in self._started)
        return not self._served[name].heavy or heavy_alive < HEAVY_ALIVE

    def _start(self, name: str) -> None:
        served = self._served[name]
        try:
            managed, server = embedded_launch(served.profile, served.model() if served.model else None,
                                              f"{POOL_LOG_PREFIX}{name}")
            managed.start()
        except BaseException as error:  # the tests that take it report it, with the server's log
            self._failed[name] = error
            return
        self._started[name] = (managed, LiveServer(server.base_url, server.model_dir))

    def _wait_healthy(self, name: str) -> None:
        managed = self._started[name][0]
        try:
            managed.ready()  # started already: waits, and stops a server that does not get healthy
        except PortTaken:  # another process took its port while it started: once more, on a new one
            del self._started[name]
            self._start(name)
            if name in self._failed:
                raise self._failed[name] from None
            self._wait_healthy(name)
            return
        except BaseException as error:
            del self._started[name]
            self._failed[name] = error
            raise
        self._healthy.add(name)

    def _stop(self, name: str) -> None:
        started = self._started.pop(name, None)
        if started is None:
            return
        managed, server = started
        if name in self._healthy:
            final = generation_tokens(self._served[name], server.base_url)
            if final is not None:
                self._final[name] = final
            self._healthy.discard(name)
        managed.stop()
