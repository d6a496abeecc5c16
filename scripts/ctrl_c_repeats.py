"""Repeat `test_startup_noise.py`'s Ctrl-C-after-an-import check N times and count how each ended.

    PYTHONPATH=. python3 scripts/burst_load.py --workers 6 --on 3600 --off 0 -- \
        .venv/bin/python scripts/ctrl_c_repeats.py 100

Prints the date, host, load and the count of repetitions that ended in the one line and exit 1;
each other one is printed with what its check said.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket

from tests.unit.test_startup_noise import _ctrl_c_after_import, silent_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repeats", type=int)
    parser.add_argument("--module", default="harness.cli", help="the import after which Ctrl-C is sent")
    args = parser.parse_args()
    right = 0
    for repeat in range(args.repeats):
        with silent_server() as url:
            try:
                _ctrl_c_after_import(args.module, url)
                right += 1
            except AssertionError as exc:
                print(f"repetition {repeat + 1}: {exc}".splitlines()[0], flush=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{now}, {socket.gethostname()}, load {os.getloadavg()[0]:.1f}: {right} of {args.repeats} "
          f"ended in one line and exit 1")


if __name__ == "__main__":
    main()
