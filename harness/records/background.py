"""Record lines made and written beside the event loop, so that a signal is answered while one is.

Making a record's line (its texts redacted, its JSON encoded) and writing it (write, fsync) take as
long as the record is large and the disk slow: a server that sends a field of megabytes, a disk
that stalls for seconds. Done on the event loop, that time held every signal unanswered (the loop
runs a signal's handler between callbacks only), and the next request could start before it was
answered. Here one thread makes and writes the lines, in the order asked, and the loop awaits each:
a record is still on disk before its request is counted, and the loop answers a signal meanwhile,
within the longest single step of the writer that holds the interpreter (one regular-expression
pass over the record's longest text: `tests/bench_signal_answer.py` measures it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from harness.records.requests import RecordWriter, RequestRecord


class BackgroundWriter:
    """`RecordWriter`'s appends, each made and written on one writer thread and awaited."""

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparkbench-records")

    @property
    def count(self) -> int:
        """Records written so far (a record counts once it is on disk)."""
        return self.writer.count

    @property
    def total(self) -> int:
        """Records in the file, a resumed run's earlier ones included."""
        return self.writer.total

    async def append(self, build: Callable[[], RequestRecord]) -> None:
        """Make the record (`build`) and write its line, off the event loop; return once it is synced."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self._append, build)

    def _append(self, build: Callable[[], RequestRecord]) -> None:
        self.writer.append(build())

    def close(self) -> None:
        """Let the line being written end (whole: a stopped run never leaves half a record), drop
        the records not begun (a second signal abandons them, as it abandons the requests in
        flight), and close the file."""
        self._thread.shutdown(wait=True, cancel_futures=True)
        self.writer.close()
