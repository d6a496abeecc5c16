"""Small faults: valid JSON that msgspec refuses, and a lost server stopping the run at its grace."""

from __future__ import annotations

import asyncio
import time
import types

import harness.run.pool as pool_module
from harness.engines.base import ConnectFailed
from harness.engines.sse import json_object
from harness.run.pool import Pool, StopRules
from harness.spec import Prompt, SamplingParams


def test_a_lone_surrogate_in_valid_json_is_json():
    assert json_object("u", b'{"text": "a\\ud800b", "ids": [1]}') == {"text": "a\ufffdb", "ids": [1]}


class FakeClock:
    """The pool's view of time: `monotonic` moves only when the pool sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def test_a_lost_server_stops_the_run_when_the_grace_is_spent_not_after(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(pool_module, "time", types.SimpleNamespace(**{**vars(time), "monotonic": clock.monotonic}))
    monkeypatch.setattr(pool_module, "asyncio", types.SimpleNamespace(**{**vars(asyncio), "sleep": clock.sleep}))

    async def refused(prompt: Prompt):
        raise ConnectFailed("connection refused")

    async def record(*_) -> None:
        pass

    pool = Pool(send=refused, record=record, rules=StopRules(max_errors=0, unreachable_grace_s=5.0))
    asyncio.run(pool.run([(0, Prompt("p0", SamplingParams(max_new_tokens=4), text="x"))]))
    assert pool.stop_reason.startswith("server unreachable for 5 s (grace 5 s)")
    assert clock.now == 5.0
