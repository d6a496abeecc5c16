"""Wall time of `sparkbench ... --help` for every command, best of N processes. Prints figures; not a test.

    .venv/bin/python scripts/help_times.py [--repeats 3]

Start-up is what a user waits for before anything is asked of a server; the commands are read from
the application object (every group and command), each timed as a whole process of the console
script. Run it with nothing else running and quote the load average it prints beside the figures.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import click
import typer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.cli import app as sparkbench_app  # noqa: E402  (the package registers every command on it)


def command_paths(command: click.Command, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group below `command`, as the words a user types."""
    paths = [prefix]
    for name, child in getattr(command, "commands", {}).items():
        paths += command_paths(child, (*prefix, name))
    return paths


def best_wall_s(argv: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, cwd=REPO)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="processes per command; the best is printed [3]")
    repeats = parser.parse_args().repeats
    script = Path(sys.executable).parent / "sparkbench"
    console = [str(script)] if script.exists() else [sys.executable, "-m", "harness.cli"]
    before = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {socket.gethostname()}, {os.cpu_count()} CPUs, "
          f"load average {before}, best of {repeats}")
    for path in command_paths(typer.main.get_command(sparkbench_app)):
        print(f"{' '.join(['sparkbench', *path, '--help']):45} {best_wall_s([*console, *path, '--help'], repeats):.2f} s",
              flush=True)
    print("load average after " + " ".join(f"{value:.2f}" for value in os.getloadavg()))


if __name__ == "__main__":
    main()
