"""The open-loop pool: sends at the scheduled times, keeps them in each result, never lets a late
send push the later ones back; the cap, a refused connection, the error budget and a stop.

Each check compares the pool's own stamps with each other, never with a wall-clock constant: the
host may be busy with other servers."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import replace

import pytest

from harness.engines.base import ConnectFailed, StreamResult
from harness.metrics import derive_requests
from harness.metrics.load import lag_warning
from harness.records.requests import RequestRecord
from harness.run.openloop import OpenLoopPool
from harness.run.pool import StopRules
from harness.spec import Prompt, SamplingParams
from tests.unit.conftest import to_frame

MS = 1_000_000
GATHER_LIMIT_S = 30.0  # a closed loop never gathers: it fails after this, whatever the host's speed


def prompt(n: int) -> Prompt:
    return Prompt(f"p{n}", SamplingParams(max_new_tokens=4), input_ids=(1, 2, 3))


class FakeServer:
    """A send function: stamps the send, holds the request `hold_s` (or, with `gather`, until that many
    are in flight at once, for at most GATHER_LIMIT_S), counts requests in flight."""

    def __init__(self, hold_s: float = 0.0, block_first_s: float = 0.0, fail: set[str] = frozenset(),
                 refuse_first: int = 0, gather: int = 0) -> None:
        self.hold_s, self.block_first_s, self.fail, self.refuse_left = hold_s, block_first_s, fail, refuse_first
        self.gather = gather
        self.in_flight = self.most_in_flight = 0
        self.sent: list[str] = []

    async def send(self, p: Prompt) -> StreamResult:
        if self.refuse_left:
            self.refuse_left -= 1
            raise ConnectFailed("refused")
        result = StreamResult(sent_unix_s=time.time(), sent_ns=time.perf_counter_ns())
        if self.block_first_s and not self.sent:
            time.sleep(self.block_first_s)  # the client's own loop stalls (e.g. a slow callback)
        self.sent.append(p.prompt_id)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(self.hold_s)
        waited = 0.0
        while self.most_in_flight < self.gather and waited < GATHER_LIMIT_S:  # no answer before the others
            await asyncio.sleep(0.01)
            waited += 0.01
        self.in_flight -= 1
        result.end_ns = time.perf_counter_ns()
        if p.prompt_id in self.fail:
            result.error_kind, result.error_message = "timeout", "made up"
        return result


def keeping(records: dict[int, StreamResult]):
    """A pool's record step that keeps each result by its seq."""
    async def record(seq: int, p: Prompt, result: StreamResult) -> None:
        records[seq] = result

    return record


async def discard(*_) -> None:
    """A pool's record step that keeps nothing."""


def run_pool(server: FakeServer, offsets_ms: list[float], **extra) -> tuple[OpenLoopPool, dict]:
    records: dict[int, StreamResult] = {}
    rules = extra.pop("rules", StopRules(max_errors=100, unreachable_grace_s=60.0))
    pool = OpenLoopPool(send=server.send, record=keeping(records), rules=rules,
                        offsets_ns=[round(o * MS) for o in offsets_ms], **extra)
    asyncio.run(pool.run([(n, prompt(n)) for n in range(len(offsets_ms))]))
    return pool, records


def test_each_request_keeps_its_scheduled_time_exactly_and_is_never_sent_early():
    offsets = [0.0, 5.0, 5.0, 12.5, 40.0]
    _, records = run_pool(FakeServer(), offsets)
    start = records[0].scheduled_ns
    assert [records[n].scheduled_ns - start for n in range(5)] == [round(o * MS) for o in offsets]
    assert all(r.sent_ns >= r.scheduled_ns for r in records.values())


def test_a_replayed_schedule_is_sent_in_its_order_and_at_its_offsets():
    offsets = [0.0, 3.0, 3.0, 3.0, 20.0, 21.0]  # simultaneous arrivals, as a production log has
    server = FakeServer(gather=4)  # answers nothing until four are in flight: only an open loop gets there
    _, records = run_pool(server, offsets)
    assert server.sent == [f"p{n}" for n in range(6)]
    start = records[0].scheduled_ns
    assert [(records[n].scheduled_ns - start) / MS for n in range(6)] == offsets
    assert server.most_in_flight >= 4  # an open loop does not wait for answers


def test_a_late_send_does_not_push_the_later_ones_back():
    # The first send stalls the client's loop for 1 s: the request due at 10 ms goes out late, the one
    # due at 2 s does not inherit that delay (offsets are absolute, not gaps slept after each send).
    # Only a stall of the host longer than the planted one could make the two lags meet.
    _, records = run_pool(FakeServer(block_first_s=1.0), [0.0, 10.0, 2000.0])
    lag = [records[n].sent_ns - records[n].scheduled_ns for n in range(3)]
    assert lag[1] >= 990 * MS
    assert lag[2] < lag[1]


def test_the_cap_holds_due_requests_back_and_their_wait_is_lag():
    server = FakeServer(hold_s=0.05)
    _, records = run_pool(server, [0.0, 0.0, 0.0, 0.0], max_concurrency=1)
    assert server.most_in_flight == 1
    sends = sorted(records[n].sent_ns for n in range(4))
    ends = sorted(records[n].end_ns for n in range(4))
    assert all(sent >= end for sent, end in zip(sends[1:], ends[:-1]))  # each waited for a slot
    assert all(r.scheduled_ns == records[0].scheduled_ns for r in records.values())  # due times kept


def test_a_refused_connection_is_sent_again_with_its_due_time():
    _, records = run_pool(FakeServer(refuse_first=1), [0.0, 5.0])
    assert sorted(records) == [0, 1]
    assert records[1].scheduled_ns - records[0].scheduled_ns == 5 * MS


def test_past_the_error_budget_no_new_request_is_sent():
    server = FakeServer(fail={"p0", "p1"})
    pool, records = run_pool(server, [0.0, 1.0, 200.0, 400.0], rules=StopRules(max_errors=1))
    assert pool.stop_reason and "more than --max-errors 1" in pool.stop_reason
    assert sorted(records) == [0, 1] and server.sent == ["p0", "p1"]


def test_a_stop_keeps_the_requests_in_flight_and_sends_no_more():
    server = FakeServer(hold_s=0.1)
    records: dict[int, StreamResult] = {}
    pool = OpenLoopPool(send=server.send, record=keeping(records),
                        rules=StopRules(max_errors=10), offsets_ns=[0, 1 * MS, 5000 * MS])

    async def main() -> None:
        task = asyncio.create_task(pool.run([(n, prompt(n)) for n in range(3)]))
        while len(server.sent) < 2:
            await asyncio.sleep(0.001)
        pool.stop("stop asked (SIGINT)")
        await task

    asyncio.run(main())
    assert sorted(records) == [0, 1] and server.sent == ["p0", "p1"]


def test_a_schedule_of_another_length_is_refused():
    pool = OpenLoopPool(send=FakeServer().send, record=discard, rules=StopRules(max_errors=1),
                        offsets_ns=[0])
    with pytest.raises(ValueError, match="2 requests but 1 scheduled"):
        asyncio.run(pool.run([(0, prompt(0)), (1, prompt(1))]))


def test_a_server_too_slow_for_the_rate_shows_as_lag_and_as_response_over_service_time():
    # One request admitted at a time, each held 50 ms, six due within 5 ms: five of them wait.
    _, records = run_pool(FakeServer(hold_s=0.05), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], max_concurrency=1)
    rows = [RequestRecord.build(run_id="r", seq=seq, workload="w", engine="sglang", api="sglang", prompt=prompt(seq),
                                result=replace(result, first_token_ns=result.end_ns, completion_tokens=1))
            for seq, result in records.items()]
    derived = derive_requests(to_frame(rows))
    warning = lag_warning(derived)
    late_count = re.search(r"(\d) of 6 requests sent more than 10 ms late", warning or "")
    assert late_count and int(late_count.group(1)) >= 5  # the first may be late too on a busy host
    late = derived["send_lag_ms"] > 10
    assert (derived.loc[late, "response_e2e_ms"] > derived.loc[late, "e2e_ms"] + 10).all()
