"""A server of known capacity, in the client's process: K slots, a fixed delay per token, a FIFO queue.

Test equipment for the open loop and the capacity search. It is a backend (`send`, as the engines'
clients have), so the runner drives it like any server without sockets: a request waits for one of
`slots` (asyncio's semaphore hands them out first come, first served), holds it for `per_token_s`
per output token, and its record carries the times it was served at. Each service is logged as it
was really held (`served_s`), so a loaded host that stretches the sleeps stretches the model with it.

Its model (`attainment`, `capacity`) is the queue it is: Poisson arrivals at a rate, FIFO over K
servers (the Kiefer-Wolfowitz recursion), the services those the fake really held and the send
lags those the client really had, in the order they came (a stall of the host stretches a run of
them, and stays a run), a request meeting the SLO when its response time (lag, queue wait and
service) is within the limit. An M/D/K queue when the sleeps are exact and the sends on time;
simulated for long enough that its answer is the steady state.
"""

from __future__ import annotations

import asyncio
import heapq
import time

import numpy as np

from harness.engines.base import StreamResult

MODEL_ARRIVALS = 20_000  # simulated arrivals per rate: the steady state, far past the fill
MODEL_SKIP = 2_000  # the first arrivals meet an empty queue: left out
NO_LAG = np.zeros(1)
MODEL_STEPS = 20  # bisection steps of the model's capacity (a millionth of the throughput)


class SlotServer:
    """Serves `max_new_tokens` tokens per request, `per_token_s` each, `slots` requests at a time."""

    name = "sglang"
    engine = "sglang"

    def __init__(self, slots: int, per_token_s: float) -> None:
        self.slots, self.per_token_s = slots, per_token_s
        self.served_s: list[float] = []
        self._free: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}  # each run has a loop of its own

    async def send(self, http, base_url, prompt, deadlines=None) -> StreamResult:
        sent_ns = time.perf_counter_ns()
        free = self._free.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(self.slots))
        tokens = prompt.sampling.max_new_tokens
        async with free:
            start_ns, chunk_ns = time.perf_counter_ns(), []
            for _ in range(tokens):
                await asyncio.sleep(self.per_token_s)
                chunk_ns.append(time.perf_counter_ns())
            self.served_s.append((chunk_ns[-1] - start_ns) / 1e9)
        return StreamResult(sent_unix_s=time.time(), sent_ns=sent_ns, end_ns=chunk_ns[-1], first_token_ns=chunk_ns[0],
                            last_token_ns=chunk_ns[-1], chunk_ns=chunk_ns, chunk_tokens=list(range(1, tokens + 1)),
                            completion_tokens=tokens, prompt_tokens=len(prompt.input_ids or ()), cached_tokens=0,
                            finish_reason="length", stream_mode="incremental", received_bytes=64 * tokens)

    def snapshot(self, http, base_url) -> dict:
        return {}

    async def counters(self, http, base_url) -> dict:
        return {}

    async def flush_prefix_cache(self, http, base_url) -> str:
        return "flushed"


def attainment(rate: float, slo_s: float, slots: int, service_s: np.ndarray, lag_s: np.ndarray = NO_LAG,
               seed: int = 0) -> float:
    """Steady-state share of requests whose response time (from the due time: send lag, FIFO wait
    and service) is within `slo_s`, for Poisson arrivals at `rate` to `slots` servers, the services
    and send lags taken in turn from `service_s` and `lag_s` (as measured, in the order measured)."""
    rng = np.random.default_rng(seed)
    due = np.cumsum(rng.exponential(1.0 / rate, MODEL_ARRIVALS))
    sent = due + np.resize(lag_s, MODEL_ARRIVALS)  # in the order they came: a host's stall stays a run
    services = np.resize(service_s, MODEL_ARRIVALS)
    order = np.argsort(sent, kind="stable")  # the server queues requests as they reach it
    free, met = [0.0] * slots, 0
    for index, was_due, reached, service in zip(order.tolist(), due[order].tolist(), sent[order].tolist(),
                                                services[order].tolist()):
        end = max(reached, heapq.heappop(free)) + service
        heapq.heappush(free, end)
        met += index >= MODEL_SKIP and end - was_due <= slo_s
    return met / (MODEL_ARRIVALS - MODEL_SKIP)


def capacity(target: float, slo_s: float, slots: int, service_s: np.ndarray, lag_s: np.ndarray = NO_LAG) -> float:
    """The highest rate whose steady-state attainment is at least `target` (bisection between no
    load and the servers' throughput, on one arrival draw: attainment falls as the rate rises)."""
    low, high = 0.0, slots / float(np.mean(service_s))
    for _ in range(MODEL_STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if attainment(middle, slo_s, slots, service_s, lag_s) >= target else (low, middle)
    return low
