"""Ctrl-C and SIGTERM during the measured requests: stop issuing, let those in flight end.

A four-hour run stopped by hand (or by a scheduler's SIGTERM) should keep every request that was
already under way: the first signal stops new requests and the run ends once those in flight are
recorded; a second signal abandons them at once (they are not recorded, and `--resume` sends them
again).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP_ASKED = "stop asked"  # opens the reason of a run the first signal ended (on_signal below)
ABANDONED = "stopped by Ctrl-C"  # opens the reason of a run the second signal abandoned (harness/run/runner.py)


def ended_by_signal(error: str | None) -> bool:
    """Whether a run's error says that Ctrl-C or SIGTERM ended it: whoever drives several runs
    (a sweep, a gap design) stops there too rather than starting the next one."""
    return any(mark in (error or "") for mark in (STOP_ASKED, ABANDONED))


class Stoppable(Protocol):
    def stop(self, reason: str) -> None: ...


@contextmanager
def stop_signals(pool: Stoppable) -> Iterator[None]:
    """Within the block, the first SIGINT/SIGTERM stops `pool`, the second raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only: a run driven from another thread keeps the default
        return
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    received: list[int] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig)
        if len(received) > 1:
            raise KeyboardInterrupt
        pool.stop(f"{STOP_ASKED} ({sig.name}); the requests in flight were recorded")
        print(f"\nsparkbench: {sig.name}: finishing the requests in flight; again to abandon them",
              file=sys.stderr, flush=True)

    for sig in SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous[sig])
