"""Time each profile's server from launch to healthy: wall-clock and CPU seconds, memory, idle CPU.

Not a test: run it from the repository root with nothing else heavy on the host, e.g.
`.venv/bin/python -m tests.bench_server_start cpu-testbed vllm-cpu cpu-testbed-ngram`. Server
start-up is most of the end-to-end tier's time; the CPU seconds (every process of the server's
group) say how much of it a busy host stretches and how much two start-ups at once can overlap.
"""

from __future__ import annotations

import argparse
import os
import time

from harness.run.embedded import embedded_launch

IDLE_WINDOW_S = 10.0


def group_usage(pgid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and proportional resident memory (GiB) of a process group."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu = pss_kib = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # fields[2] is the process group (field 5 of stat)
                continue
            cpu += (int(fields[11]) + int(fields[12])) / tick
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                pss_kib += sum(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))
        except (OSError, IndexError, ValueError):
            continue  # the process ended while being read
    return cpu, pss_kib / 2**20


def time_start(profile: str) -> str:
    load = os.getloadavg()[0]
    start = time.monotonic()
    managed, _ = embedded_launch(profile, log_name=f"bench-start-{profile}")
    with managed:
        ready_s = time.monotonic() - start
        cpu, pss = group_usage(managed.process.pid)  # the leader's pid is its group's id
        time.sleep(IDLE_WINDOW_S)
        idle = (group_usage(managed.process.pid)[0] - cpu) / IDLE_WINDOW_S
    return (f"{profile}: healthy after {ready_s:.1f} s, {cpu:.1f} s CPU, {pss:.2f} GiB PSS, "
            f"idle {idle:.2f} cores; load average {load:.1f} -> {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", help="profile names (sparkbench profiles lists them)")
    for profile in parser.parse_args().profiles:
        print(time_start(profile), flush=True)


if __name__ == "__main__":
    main()
