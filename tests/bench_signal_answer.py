"""Benchmark: how long a SIGTERM waits for its answer while the record writer is busy.

Not a test: runs against the fake server of `tests.fakes.broken_server` whose second answer carries
one word of letters and digits of each size asked in its meta object, sends SIGTERM to this process
when that record reaches the writer (as it starts redacting the line, or as it starts a write that a
stalled disk holds for `--stall` seconds), and prints how long the run took to answer it (the pool
stopped) beside how long the writer was busy with that record. Run from the repository root:
`.venv/bin/python -m tests.bench_signal_answer [--sizes 1,16,64] [--stall 3]`.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from pathlib import Path

import harness.records.requests as records_module
import tests.fakes.broken_server as broken_server
from harness.run.pool import Pool
from harness.run.runner import RunAborted
from tests.unit.test_fault_tolerance import run_against


def measure(stage: str, size: int, stall_s: float) -> tuple[float, float]:
    """Seconds from SIGTERM to its answer, and seconds the writer spent on the huge record's `stage`."""
    broken_server.HUGE_WORD = "a1" * (size // 2)
    marks: dict[str, float] = {}
    real, stop = getattr(records_module, stage), Pool.stop

    def busy(*args):
        if not any(isinstance(arg, (str, bytes)) and len(arg) >= size for arg in args) or "sent" in marks:
            return real(*args)
        marks["sent"] = time.perf_counter()
        os.kill(os.getpid(), signal.SIGTERM)
        if stage == "write_at":
            time.sleep(stall_s)  # the stalled disk
        done = real(*args)
        marks["writer"] = time.perf_counter() - marks["sent"]
        return done

    def answered(pool, reason):
        marks.setdefault("answered", time.perf_counter())
        stop(pool, reason)

    setattr(records_module, stage, busy)
    Pool.stop = answered
    try:
        with broken_server.breaking(broken_server.Breakage("huge_field", frozenset({1}))) as url, \
                tempfile.TemporaryDirectory() as folder:
            try:
                run_against(url, "sglang", Path(folder), request_timeout_s=60.0)
            except RunAborted:
                pass
    finally:
        setattr(records_module, stage, real)
        Pool.stop = stop
    return marks["answered"] - marks["sent"], marks["writer"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,16,64", help="comma-separated field sizes in MiB")
    parser.add_argument("--stall", type=float, default=3.0, help="seconds the stalled disk holds the write")
    arguments = parser.parse_args()
    print(f"{'writer busy':<28}{'field MiB':>10}{'answer s':>10}{'writer s':>10}")
    for stage, what in (("redact", "redacting the record"), ("write_at", "on a stalled disk")):
        for mib in (int(size) for size in arguments.sizes.split(",")):
            answer_s, writer_s = measure(stage, mib * 2**20, arguments.stall)
            print(f"{what:<28}{mib:>10}{answer_s:>10.3f}{writer_s:>10.3f}")


if __name__ == "__main__":
    main()
