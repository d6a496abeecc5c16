"""Time the stages of a make run and print them as one table, so that a slow stage is seen.

`python3 scripts/stage_times.py LOG run NAME -- CMD...` runs CMD, appends `NAME<TAB>seconds<TAB>exit`
to LOG and exits with CMD's code; `... LOG reset` empties LOG; `... LOG table` prints the table
(with the load average now, since a busy host stretches every stage). Stages that make found
up to date never run, so they are absent: the table says so rather than showing a zero.
Only the standard library: it runs before any environment exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def run_stage(log: Path, name: str, command: list[str]) -> int:
    started = time.monotonic()
    code = subprocess.call(command)
    with log.open("a") as out:
        out.write(f"{name}\t{time.monotonic() - started:.1f}\t{code}\n")
    return code


def table(log: Path) -> str:
    rows = [line.split("\t") for line in log.read_text().splitlines()] if log.exists() else []
    lines = ["stage                 seconds  exit", *(f"{n:20s} {float(s):8.1f}  {c}" for n, s, c in rows)]
    total = sum(float(s) for _, s, _ in rows)
    lines.append(f"{'total':20s} {total:8.1f}   (stages not listed were up to date; "
                 f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "reset":
        Path(argv[0]).write_text("")
        return 0
    if len(argv) == 2 and argv[1] == "table":
        print(table(Path(argv[0])))
        return 0
    if len(argv) >= 5 and argv[1] == "run" and argv[3] == "--":
        return run_stage(Path(argv[0]), argv[2], argv[4:])
    print("usage: stage_times.py LOG (reset | table | run NAME -- CMD...)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
