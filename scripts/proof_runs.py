"""Run a command several times in a row under bursts of CPU load, and tabulate each run.

The suite must hold at any host speed (docs/testing.md). This is its proof: the command (the unit
tier, or `make test` in a fresh clone) N times in a row with scripts/burst_load.py's bursts beside
it (one busy process per core, 2 s on, 4 s off), optionally with one more process keeping a core
busy the whole time:

    python3 scripts/proof_runs.py --runs 10 -- .venv/bin/python -m pytest tests/unit -n 4 -p no:cacheprovider -q
    python3 scripts/proof_runs.py --runs 1 --busy-core -- make test
    python3 scripts/proof_runs.py --runs 3 --fresh-clone --cache-root /tmp/empty -- make test

`--fresh-clone` runs each time in a new clone of the commit checked out when the series began
(commits made meanwhile are not picked up); `--cache-root DIR` points every cache the project writes
at DIR, as scripts/cold_check.py does, so with an empty DIR the first run is a new user's cold one
and the next reuse what it filled.

Each run's output goes to LOGDIR/run-K.log; the table gives its exit status, wall time, pytest's
counts (summed over the summary lines it printed: `make test` prints one a tier) and the 1-minute
load average at its start, its end and its highest (sampled every 5 s). A failed run stops the
series (a failure is a defect to fix, not a run to repeat) unless --keep-going. Only the standard
library: it runs before any environment exists.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from burst_load import spin
from cold_check import CACHES, fresh_clone

# pytest's last line, framed by "=" or (with -q) bare: "3 failed, 1676 passed, 2 skipped, 2 warnings in 1161.01s".
SUMMARY = re.compile(r"^=* ?\d+ \w+(, \d+ \w+)* in [\d.]+s( \(\d+:\d+:\d+\))? ?=*$")
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?)")
LOAD_EVERY_S = 5.0


def pytest_counts(log: str) -> dict[str, int]:
    """passed/failed/skipped/error counts summed over every pytest summary line of the log."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    for line in log.splitlines():
        if SUMMARY.match(line):
            for number, kind in COUNT.findall(line):
                counts[kind.rstrip("s") if kind.startswith("error") else kind] += int(number)
    return counts


def timed_run(command: list[str], log_path: Path, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> dict[str, object]:
    """One run: its exit status, wall time, pytest counts and the load average it ran under."""
    peak = [os.getloadavg()[0]]
    start_load, done = peak[0], threading.Event()

    def sample() -> None:
        while not done.wait(LOAD_EVERY_S):
            peak[0] = max(peak[0], os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env).returncode
    wall_s = time.monotonic() - started
    done.set()
    sampler.join()
    return {"exit": code, "wall_s": wall_s, "load_start": start_load, "load_end": os.getloadavg()[0],
            "load_peak": peak[0], **pytest_counts(log_path.read_text(encoding="utf-8", errors="replace"))}


def table(rows: list[dict[str, object]]) -> list[str]:
    lines = ["| run | exit | wall s | passed | failed | errors | skipped | load start / end / highest |",
             "|---|---|---|---|---|---|---|---|"]
    for k, row in enumerate(rows, 1):
        lines.append(f"| {k} | {row['exit']} | {row['wall_s']:.0f} | {row['passed']} | {row['failed']} | "
                     f"{row['error']} | {row['skipped']} | {row['load_start']:.1f} / {row['load_end']:.1f} / "
                     f"{row['load_peak']:.1f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs in a row [10]")
    parser.add_argument("--on", type=float, default=2.0, help="seconds of each burst [2]")
    parser.add_argument("--off", type=float, default=4.0, help="quiet seconds between bursts [4]")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="bursting processes [one per core]")
    parser.add_argument("--busy-core", action="store_true", help="one more process busy the whole time")
    parser.add_argument("--keep-going", action="store_true", help="go on after a failed run")
    parser.add_argument("--log-dir", type=Path, default=None, help="where each run's output goes [a new temporary folder]")
    parser.add_argument("--fresh-clone", action="store_true", help="each run in a new clone of the commit at the start")
    parser.add_argument("--cache-root", type=Path, default=None, help="the project's caches under DIR [the user's own]")
    parser.add_argument("command", nargs="+", help="the command to run (after --)")
    args = parser.parse_args()
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="proof-runs-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    loads = [(args.on, args.off)] * args.workers + ([(1.0, 0.0)] if args.busy_core else [])
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()[:12]
    env = dict(os.environ)
    if args.cache_root:
        env.update({name: str(args.cache_root.resolve() / folder) for name, folder in CACHES.items()})
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{os.cpu_count()} cores, commit {commit or 'unknown'}; {args.workers} bursting processes "
          f"({args.on:g} s on, {args.off:g} s off){', one more always busy' if args.busy_core else ''}; "
          f"{'a fresh clone each run; ' if args.fresh_clone else ''}"
          f"{f'caches under {args.cache_root}; ' if args.cache_root else ''}"
          f"logs in {log_dir}", flush=True)
    workers = [multiprocessing.Process(target=spin, args=load, daemon=True) for load in loads]
    for worker in workers:
        worker.start()
    rows: list[dict[str, object]] = []
    try:
        for k in range(1, args.runs + 1):
            cwd = fresh_clone(commit, log_dir / f"clone-{k}") if args.fresh_clone else None
            rows.append(timed_run(args.command, log_dir / f"run-{k}.log", cwd, env))
            print(table(rows)[-1], flush=True)
            if rows[-1]["exit"] != 0 and not args.keep_going:
                break
    finally:
        for worker in workers:
            worker.terminate()
    print("\n".join(table(rows)))
    green = sum(row["exit"] == 0 for row in rows)
    print(f"{green} of {len(rows)} runs green (of {args.runs} asked)")
    return 0 if green == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
