"""`make test`'s suite: the unit tier and the end-to-end tier at once, in two pytest processes.

The unit tier mostly waits (on fake servers' deadlines and stalls), and the end-to-end tier's first
minutes are server start-ups, so running them side by side costs little more than the end-to-end
tier alone. The unit tier runs in pytest-xdist workers and its output is kept in a file, printed
whole once it ends, so the two tiers' lines do not interleave; the end-to-end tier prints as it
goes. Exit status: the first non-zero of (unit, end-to-end), else 0. Extra arguments go to both.

    python scripts/test_tiers.py [PYTEST_ARGS...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

UNIT_WORKERS = "4"  # the unit tier waits more than it computes: more workers than cores
DURATIONS = "--durations=15"


def _pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", DURATIONS, *args]


def main(extra: list[str]) -> int:
    started = time.monotonic()
    # The suite's own work (both tiers, the servers they start) is the nights' setup, not foreign load
    # (harness/nightly/foreign.py): the end-to-end nights add their own pid to this one.
    os.environ["SPARKBENCH_NIGHTLY_SETUP_PIDS"] = str(os.getpid())
    with tempfile.NamedTemporaryFile("w+", prefix="unit-tier-", suffix=".log", delete=False) as log:
        unit = subprocess.Popen(_pytest("tests/unit", "-n", UNIT_WORKERS, "-p", "no:cacheprovider", *extra),
                                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        ended: dict[str, float] = {}
        waiter = threading.Thread(target=lambda: (unit.wait(), ended.setdefault("unit", time.monotonic())))
        waiter.start()
        e2e_status = subprocess.call(_pytest("tests/e2e", *extra))
        e2e_s = time.monotonic() - started
        waiter.join()
        unit_status, unit_s = unit.returncode, ended["unit"] - started
    print(f"\n===== unit tier ({UNIT_WORKERS} workers, beside the end-to-end tier) =====", flush=True)
    print(Path(log.name).read_text(encoding="utf-8", errors="replace"), flush=True)
    Path(log.name).unlink()
    print(f"tiers: unit exit {unit_status} after {unit_s:.0f} s, end-to-end exit {e2e_status} after {e2e_s:.0f} s",
          flush=True)
    return unit_status or e2e_status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
