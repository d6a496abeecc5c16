"""Run a command while bursts of CPU load come and go on every core, as another job's work would.

The nightly's proof that two nights at once keep their rows depends on the guard's canary coming
through a burst of load (another night rendering its report). This reproduces such bursts on
demand, so the e2e test can be run under them on any host:

    .venv/bin/python scripts/burst_load.py -- .venv/bin/python -m pytest -q tests/e2e/test_nightly.py

Prints the load average before and after, and exits with the command's exit code.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time


def spin(on_s: float, off_s: float) -> None:
    """Busy for on_s, idle for off_s, forever (the parent terminates it)."""
    while True:
        until = time.monotonic() + on_s
        while time.monotonic() < until:
            pass
        time.sleep(off_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--on", type=float, default=2.0, help="seconds of each burst [2]")
    parser.add_argument("--off", type=float, default=4.0, help="quiet seconds between bursts [4]")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="busy processes [one per core]")
    parser.add_argument("command", nargs="+", help="the command to run under the bursts (after --)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.workers} workers, {args.on:g} s on, "
          f"{args.off:g} s off", flush=True)
    workers = [multiprocessing.Process(target=spin, args=(args.on, args.off), daemon=True)
               for _ in range(args.workers)]
    for worker in workers:
        worker.start()
    try:
        code = subprocess.run(args.command).returncode
    finally:
        for worker in workers:
            worker.terminate()
    print(f"load average after: {os.getloadavg()[0]:.2f}; exit {code}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
