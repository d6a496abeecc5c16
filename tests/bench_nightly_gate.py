"""Benchmark: does the nightly gate cry wolf on a busy host, and does it catch a real slowdown?

Not a test: prints one row per night and the totals. Run from the repository root, with nothing
else running on the host if the figures are to be quoted (it prints its own duration at the end):

    .venv/bin/python -m tests.bench_nightly_gate [--nights 10] [--seed 0] [--server URL --model-dir DIR]

It launches the test-bed server itself, or attaches to a test-bed server already running on this
host (`--server`, with the tiny model's folder as `--model-dir`).

Phase "unchanged": the test-bed server (profile cpu-testbed). The first night pins the baseline,
then N nights run the same configuration; during each, a background process spins one core for a
random stretch (seeded: it starts within the first half of the night and lasts 30-60% of it).
Wanted: no alarm (every night exits 0 pass or 3 inconclusive).
Phase "slower": the same server, its processes then confined to one of the host's cores
(`sched_setaffinity` on every thread of the server's process group): a real slowdown of the server,
not a different workload or model. N nights against the baseline pinned above, no added load.
Wanted: every night exits 1 (regression). The slowdown is measured, not assumed: the table prints
the server's own mean TPOT of each night against the baseline's.
Each night is the real command, `sparkbench nightly --config ...`, at the default thresholds.
"""

from __future__ import annotations

import argparse
import json
import os
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

from harness.analysis.run import Run
from harness.run.embedded import embedded_server
from harness.run.hostload import server_processes

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


def write_config(folder: Path, server: str, model_dir: Path, args: argparse.Namespace) -> Path:
    shape = {"num_prompts": args.prompts, "output_tokens": args.output_tokens, "tokenizer": str(model_dir)}
    workload = {**WORKLOAD, "options": {**WORKLOAD["options"], **shape}}
    path = folder / f"nightly-{server.rsplit(':', 1)[1]}.yaml"
    path.write_text(yaml.safe_dump({"server": server, "state_dir": str(folder / "state"), "workloads": [workload]}))
    return path


def server_tpot_change(state: Path, run_name: str) -> str:
    """The server's own mean TPOT of a run against the pinned baseline's, as a relative change."""
    baseline = json.loads((state / "baseline.json").read_text())["synthetic"]
    base, run = (Run.load(d).derived["server_tpot_ms"].mean() for d in (baseline, state / "runs" / run_name))
    return f"{run / base - 1:+.1%}"


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
    return {**row, "server tpot": server_tpot_change(state, load["run"].iloc[0]),
            "first pass regressed": ", ".join(f"{r.metric} {r.stat} {r.change:+.1%}" for r in flagged.itertuples()),
            "confirmations": " | ".join(str(c) for c in flagged["confirmation"]),
            "busy runs": f"{(load['busy'] != 'no').sum()} of {len(load)}"}


def confine_to_one_core(base_url: str) -> int:
    """Pin every thread of the server's processes to one core (the slowdown); returns that core."""
    core = min(os.sched_getaffinity(0))
    for pid in server_processes(base_url):
        for task in Path(f"/proc/{pid}/task").iterdir():
            os.sched_setaffinity(int(task.name), {core})
    return core


def nights_of(phase: str, config: Path, state: Path, nights: int, load) -> list[dict]:
    """`nights` nights in a row; `load()` gives a context manager (and its description) per night."""
    rows = []
    for index in range(nights):
        with load() as added:
            rows.append({"phase": phase, "night": index + 1, "added load": added, **night(config, state)})
        print(rows[-1], flush=True)
    return rows


@contextmanager
def no_added_load():
    yield "none"


@contextmanager
def test_bed_server(url: str | None, model_dir: Path | None):
    """(base URL, model folder) of the server under test: attached, or launched and stopped."""
    if url:
        yield url, model_dir
        return
    with embedded_server("cpu-testbed", log_name="bench-nightly") as server:
        yield server.base_url, server.model_dir


def run_phases(folder: Path, args: argparse.Namespace) -> list[dict]:
    """Pin the baseline, the unchanged nights under added load, then the slower nights."""
    state, rng = folder / "state", random.Random(args.seed)
    with test_bed_server(args.server, args.model_dir) as (base_url, model_dir):
        config = write_config(folder, base_url, model_dir, args)
        began = time.monotonic()
        print(f"baseline pinned on {base_url}: {night(config, state)}", flush=True)
        night_s = time.monotonic() - began
        rows = nights_of("unchanged", config, state, args.nights, lambda: spinner_during(night_s, rng))
        print(f"server confined to core {confine_to_one_core(base_url)}", flush=True)
        rows += nights_of("slower", config, state, args.nights, no_added_load)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", type=int, default=WORKLOAD["options"]["num_prompts"])
    parser.add_argument("--output-tokens", type=int, default=WORKLOAD["options"]["output_tokens"])
    parser.add_argument("--server", help="attach to this running test-bed server instead of launching one")
    parser.add_argument("--model-dir", type=Path, help="the attached server's model folder (its tokenizer)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-nightly-"))
    began = time.monotonic()
    rows = run_phases(folder, args)
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
