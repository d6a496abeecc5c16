"""The end-to-end tier's servers: each started once, ahead of the first test that needs it, and
stopped after the last one.

Start-up is most of what a server costs on this 2-core host (20-60 s of both cores for SGLang or
vLLM), so the pool starts the collected tests' servers in the order the tests will want them,
while the unit tier runs, `AHEAD` at a time and at most `HEAVY_ALIVE` SGLang or vLLM servers alive
at once (a few GB each). A test that wants a server the pool has not reached starts it at once
itself, past the cap, so no test waits on another's server to stop.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.engines.prometheus import metric_total, parse_metrics
from harness.engines.registry import engine_named
from harness.engines.series import GENERATION_TOKENS, by_role
from harness.guard.profiles import load_profile
from harness.run.embedded import ready_server
from harness.run.server import ManagedServer
from tests.e2e.budget import POOL_LOG_PREFIX

AHEAD = 2  # servers starting at once: one per core
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
    def heavy(self) -> bool:
        return load_profile(self.profile).engine not in LIGHT_ENGINES


def generation_tokens(served: Served, base_url: str) -> float | None:
    """The server's own count of the output tokens it has generated (None: not exported or not read)."""
    engine = engine_named(load_profile(served.profile).engine)
    series = by_role(engine.server_series)[GENERATION_TOKENS]
    try:
        text = httpx.get(f"{base_url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    return metric_total(parse_metrics(text, [series.metric]), series.metric)


def launch(name: str, served: Served) -> tuple[ManagedServer, LiveServer]:
    """A healthy server of `served`."""
    managed, server = ready_server(served.profile, served.model() if served.model else None, f"{POOL_LOG_PREFIX}{name}")
    return managed, LiveServer(server.base_url, server.model_dir)


class ServerPool:
    def __init__(self, served: dict[str, Served], order: Iterable[str], uses: Counter) -> None:
        self._served = served
        self._pending = deque(order)
        self._uses = uses
        self._ready: dict[str, Future] = {}
        self._managed: dict[str, ManagedServer] = {}
        self._final: dict[str, float] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._threads = [threading.Thread(target=self._start_ahead, daemon=True) for _ in range(AHEAD)]
        for thread in self._threads:
            thread.start()

    def take(self, name: str) -> LiveServer:
        """The server `name`, healthy: the one started ahead, else one started now."""
        with self._cond:
            future = self._ready.get(name)
            mine = future is None
            if mine:
                if name in self._pending:
                    self._pending.remove(name)
                future = self._ready[name] = Future()
        if mine:
            self._bring_up(name, future)
        return future.result()

    def used(self, names: Iterable[str]) -> None:
        """A test that used `names` is done: stop each whose last test it was."""
        for name in names:
            if name in self._uses:
                self._uses[name] -= 1
                if self._uses[name] == 0:
                    self._stop(name)

    def generated(self) -> dict[str, float]:
        """Output tokens each pooled server has generated so far, by its own counter (a stopped
        server: its last count; a server whose counter cannot be read is left out)."""
        with self._cond:
            live = {name: self._ready[name].result().base_url for name in self._managed}
            counts = dict(self._final)
        counts.update({name: generation_tokens(self._served[name], url) for name, url in live.items()})
        return {name: count for name, count in counts.items() if count is not None}

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()
        for name in list(self._managed):
            self._stop(name)

    def _heavy_alive(self) -> int:
        return sum(self._served[name].heavy for name in self._managed)

    def _start_ahead(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or not self._pending or self._heavy_alive() < HEAVY_ALIVE
                                    or not self._served[self._pending[0]].heavy)
                if self._closed or not self._pending:
                    return
                name = self._pending.popleft()
                future = self._ready[name] = Future()
            self._bring_up(name, future)

    def _bring_up(self, name: str, future: Future) -> None:
        try:
            managed, server = launch(name, self._served[name])
        except BaseException as error:  # the test that takes it reports it, with the server's log
            future.set_exception(error)
            return
        with self._cond:
            self._managed[name] = managed
            closed = self._closed
        future.set_result(server)
        if closed:
            self._stop(name)

    def _stop(self, name: str) -> None:
        with self._cond:
            managed = self._managed.get(name)
        if managed is None:
            return
        final = generation_tokens(self._served[name], managed.base_url)
        with self._cond:
            self._managed.pop(name, None)
            if final is not None:
                self._final[name] = final
        managed.stop()
        with self._cond:
            self._cond.notify_all()
