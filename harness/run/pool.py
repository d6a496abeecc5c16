"""The measured requests: a pool of workers that records every request, whatever its outcome.

A failed request is a record, not the end of the run. The pool stops issuing new requests only
when the run cannot usefully go on: more failed requests than the error budget, the server
unreachable for longer than the grace period, or a stop asked for (Ctrl-C / SIGTERM). Requests in
flight then still end, ok or failed, and are recorded; nothing is cancelled half-way.

A connection that is refused before the request was sent is not a failed request (the server
never saw it): the prompt goes back in the queue and the pool waits for the server to return.
A prompt that opens a conversation is followed, on the same worker, by each next turn built from
the answer just recorded.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from harness.chat import next_turn
from harness.engines.base import ConnectFailed, RequestFailed, StreamResult
from harness.records.requests import outcome
from harness.spec import Prompt

Send = Callable[[Prompt], Awaitable[StreamResult]]
Record = Callable[[int, Prompt, StreamResult], Awaitable[None]]  # returns once the record is on disk
RETRY_WAIT_S = (0.5, 1.0, 2.0, 5.0)  # waits between tries of an unreachable server, then the last again


def default_max_errors(requests: int) -> int:
    """Error budget when none is given: 10 requests plus 5% of the run."""
    return 10 + math.ceil(0.05 * requests)


def charge_error(errors: Counter, rules: StopRules, prompt: Prompt, result: StreamResult) -> str | None:
    """Count a failed request in `errors`; the reason to stop once they are more than the budget.
    Failed as its record says (`outcome`, with the engine whose meta object holds the draft
    counts): the outcomes the record judges (short output, no tokens, impossible counts) are
    failures like the client's own."""
    judged = outcome(result, prompt.sampling, rules.engine)
    if judged["error_kind"] is None:
        return None
    errors[judged["error_kind"]] += 1
    failed = sum(errors.values())
    if failed <= rules.max_errors:
        return None
    kinds = ", ".join(f"{kind} {n}" for kind, n in errors.most_common())
    return (f"{failed} failed requests, more than --max-errors {rules.max_errors} ({kinds}); "
            f"last: {judged['error_message']}")


@dataclass(frozen=True)
class StopRules:
    max_errors: int
    unreachable_grace_s: float = 120.0
    engine: str | None = None  # whose meta objects the results hold (None: their draft counts are not judged)


@dataclass
class Pool:
    """Sends `(seq, prompt)` pairs with `concurrency` workers; `record` is called for every outcome."""

    send: Send
    record: Record
    rules: StopRules
    concurrency: int = 1
    turn_stride: int = 0  # seq distance between the turns of a conversation (the run's prompt count)
    stop_reason: str | None = None
    errors: Counter = field(default_factory=Counter)
    _unreachable_since: float | None = None

    def stop(self, reason: str) -> None:
        """Issue no new request; those in flight still end and are recorded."""
        self.stop_reason = self.stop_reason or reason

    async def run(self, work: list[tuple[int, Prompt]]) -> None:
        queue: asyncio.Queue[tuple[int, Prompt]] = asyncio.Queue()
        for item in work:
            queue.put_nowait(item)
        workers = [asyncio.create_task(self._worker(queue)) for _ in range(min(self.concurrency, len(work)))]
        await asyncio.gather(*workers)

    async def _worker(self, queue: asyncio.Queue[tuple[int, Prompt]]) -> None:
        while self.stop_reason is None and not queue.empty():
            seq, prompt = queue.get_nowait()
            await self._conversation(queue, seq, prompt)

    async def _conversation(self, queue: asyncio.Queue[tuple[int, Prompt]], seq: int, prompt: Prompt | None) -> None:
        """Send `prompt` and, while each turn succeeds, the turns of its conversation that follow
        (`harness.chat.next_turn`), one after the other on this worker. Turn k of the prompt issued
        as `seq` is recorded as `seq + (k - 1) * turn_stride`."""
        while prompt is not None and self.stop_reason is None:
            result = await self.attempt(prompt)
            if result is None:
                queue.put_nowait((seq, prompt))  # never sent: try it again once the server is back
                return
            await self.record(seq, prompt, result)
            self._count(prompt, result)
            # A failed turn ends its conversation: the next turn would be built on no answer.
            prompt = next_turn(prompt, result.text) if result.error_kind is None else None
            seq += self.turn_stride

    async def attempt(self, prompt: Prompt) -> StreamResult | None:
        """One try at `prompt`: its result (failed ones too), or None when the connection was refused
        before it was sent (after waiting for the server, or stopping once it stayed away)."""
        try:
            result = await self.send(prompt)
        except ConnectFailed as exc:
            await self._wait_for_server(exc)
            return None
        except RequestFailed as exc:  # a failure before the stream began (e.g. model lookup)
            result = StreamResult(sent_unix_s=time.time(), sent_ns=time.perf_counter_ns())
            result.fail(exc, time.perf_counter_ns())
        self._unreachable_since = None
        return result

    def _count(self, prompt: Prompt, result: StreamResult) -> None:
        """Charge a failed request to the error budget; stop once it is spent."""
        reason = charge_error(self.errors, self.rules, prompt, result)
        if reason:
            self.stop(reason)

    async def _wait_for_server(self, exc: ConnectFailed) -> None:
        """Wait before the next try; stop once the server has been unreachable past the grace period."""
        now = time.monotonic()
        self._unreachable_since = self._unreachable_since if self._unreachable_since is not None else now
        waited, grace = now - self._unreachable_since, self.rules.unreachable_grace_s
        if waited > 0 and waited >= grace:  # tried again at least once, and the grace is spent
            self.stop(f"server unreachable for {waited:.0f} s (grace {grace:g} s): {exc}")
            return
        tries = int(waited > 0) + int(waited > 1) + int(waited > 3)
        # The last wait ends at the grace, not past it: the run stops when the grace is spent.
        await asyncio.sleep(min(RETRY_WAIT_S[min(tries, len(RETRY_WAIT_S) - 1)], grace - waited))
