"""Benchmark: does the nightly gate cry wolf on a busy host, and does it catch a real slowdown?

Not a test: prints one row per night and the totals. Run from the repository root, with nothing
else running on the host if the figures are to be quoted (about 20 minutes on the 2-core test bed):

    .venv/bin/python -m tests.bench_nightly_gate [--nights 10] [--seed 0]

Phase "unchanged": the test-bed server (profile cpu-testbed). The first night pins the baseline,
then N nights run the same configuration; during each, a background process spins one core for a
random stretch (seeded: it starts within the first half of the night and lasts 30-60% of it).
Wanted: no alarm (every night exits 0 pass or 3 inconclusive).
Phase "slower": the same model served by `SLOW_PROFILE` (see its description: a real slowdown of
the server, not a different workload), N nights against the baseline pinned above, no added load.
Wanted: every night exits 1 (regression).
Each night is the real command, `sparkbench nightly --config ...`, at the default thresholds.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import yaml

from harness.run.embedded import embedded_server

SLOW_PROFILE = Path(__file__).resolve().parent / "fixtures" / "profiles" / "cpu-testbed-slower.yaml"
WORKLOAD = {"name": "synthetic", "options": {"num_prompts": 16, "input_tokens": 512, "output_tokens": 128, "seed": 0}}
SPIN = "while True:\n    pass\n"
OUTCOMES = {0: "pass", 1: "regression", 2: "could not run", 3: "inconclusive"}


@contextmanager
def spinner_during(night_s: float, rng: random.Random):
    """A process that spins one core for a random stretch of the coming night."""
    start, length = rng.uniform(0, 0.5) * night_s, rng.uniform(0.3, 0.6) * night_s
    spinner: list[subprocess.Popen] = []
    stop = threading.Event()

    def spin() -> None:
        if not stop.wait(start):
            spinner.append(subprocess.Popen([sys.executable, "-c", SPIN]))
            stop.wait(length)
            spinner[0].kill()
            spinner[0].wait()

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield f"core busy from {start:.0f} s for {length:.0f} s"
    finally:
        stop.set()
        thread.join()


def write_config(folder: Path, server: str, model_dir: Path) -> Path:
    workload = {**WORKLOAD, "options": {**WORKLOAD["options"], "tokenizer": str(model_dir)}}
    path = folder / f"nightly-{server.rsplit(':', 1)[1]}.yaml"
    path.write_text(yaml.safe_dump({"server": server, "state_dir": str(folder / "state"), "workloads": [workload]}))
    return path


def night(config: Path, state: Path) -> dict:
    """One real nightly; its exit code and what its report folder says."""
    before = set((state / "reports").glob("*")) if (state / "reports").exists() else set()
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness.cli", "nightly", "--config", str(config)],
                          capture_output=True, text=True)
    row = {"exit": done.returncode, "outcome": OUTCOMES.get(done.returncode, "?"),
           "seconds": round(time.monotonic() - began)}
    new = sorted(set((state / "reports").glob("*")) - before)
    if done.returncode == 2 or not new:
        return {**row, "detail": (done.stderr.strip().splitlines() or ["?"])[-1]}
    verdicts = pd.read_csv(new[-1] / "verdicts.csv").fillna("")
    flagged = verdicts[verdicts["confirmation"] != ""]
    load = pd.read_csv(new[-1] / "host_load.csv").fillna("")
    return {**row, "first pass regressed": ", ".join(f"{r.metric} {r.stat} {r.change:+.1%}" for r in flagged.itertuples()),
            "confirmations": " | ".join(str(c) for c in flagged["confirmation"]),
            "busy runs": f"{(load['busy'] != 'no').sum()} of {len(load)}"}


def unchanged_phase(folder: Path, nights: int, rng: random.Random) -> list[dict]:
    rows = []
    with embedded_server("cpu-testbed", log_name="bench-nightly") as server:
        config = write_config(folder, server.base_url, server.model_dir)
        began = time.monotonic()
        pinned = night(config, folder / "state")
        print(f"baseline pinned on {server.base_url} in {time.monotonic() - began:.0f} s: {pinned}", flush=True)
        night_s = time.monotonic() - began
        for index in range(nights):
            with spinner_during(night_s, rng) as load:
                rows.append({"phase": "unchanged", "night": index + 1, "added load": load,
                             **night(config, folder / "state")})
            print(rows[-1], flush=True)
    return rows


def slower_phase(folder: Path, nights: int) -> list[dict]:
    rows = []
    with embedded_server(str(SLOW_PROFILE), log_name="bench-nightly-slower") as server:
        config = write_config(folder, server.base_url, server.model_dir)
        for index in range(nights):
            rows.append({"phase": "slower", "night": index + 1, "added load": "none",
                         **night(config, folder / "state")})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-nightly-"))
    began = time.monotonic()
    rows = unchanged_phase(folder, args.nights, random.Random(args.seed)) + slower_phase(folder, args.nights)
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_colwidth", 120):
        print(table.to_string(index=False))
    unchanged, slower = table[table["phase"] == "unchanged"], table[table["phase"] == "slower"]
    print(f"\nunchanged configuration under added load: {(unchanged['exit'] == 1).sum()} alarms in {len(unchanged)} "
          f"nights ({(unchanged['exit'] == 3).sum()} inconclusive)")
    print(f"server really slower: {(slower['exit'] == 1).sum()} of {len(slower)} nights caught "
          f"({(slower['exit'] == 3).sum()} inconclusive)")
    print(f"total {time.monotonic() - began:.0f} s; state kept in {folder / 'state'}")


if __name__ == "__main__":
    main()
