"""Benchmark: does the nightly gate cry wolf on a busy host, and does it catch a real slowdown?

Not a test: prints one row per night and the totals. Run from the repository root, with nothing
else running on the host if the figures are to be quoted:

    .venv/bin/python -m tests.bench_nightly_gate [--nights 10] [--seed 0] [--layers 3]

or a few nights at a time (each call launches its server; state and rows are kept between calls):

    .venv/bin/python -m tests.bench_nightly_gate --state DIR --phase unchanged --first-night 1 --nights 5
    .venv/bin/python -m tests.bench_nightly_gate --state DIR --phase slower --first-night 1 --nights 5
    .venv/bin/python -m tests.bench_nightly_gate --state DIR --table

Phase "unchanged": the test-bed server (profile cpu-testbed, tiny model). The first night pins the
baseline, then each night runs the same configuration; during each, a background process spins one
core for a random stretch (seeded per night: it starts within the first half of the night and
lasts 30-60% of it, the night's length taken from the pinning night). Wanted: no alarm (every
night exits 0 pass or 3 inconclusive).
Phase "slower": the same server program and workload serving a deeper copy of the tiny model
(`--layers`, `harness.testbed.deeper`: the same layers repeated, so every decode step does more
work), against the baseline pinned above, no added load. Wanted: every night exits 1
(regression). The slowdown is measured, not assumed: the table prints the server's own mean TPOT
of each night against the baseline's.
Each night is the real command, `sparkbench nightly --config ...`, at the default thresholds.
"""

from __future__ import annotations

import argparse
import json
import math
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
from harness.testbed.deeper import deeper_model
from harness.testbed.envs import ensure_model

WORKLOAD = {"name": "synthetic", "options": {"num_prompts": 8, "input_tokens": 512, "output_tokens": 64, "seed": 0}}
LAYERS = 4  # the slower phase's model: the tiny model's 2 layers, each repeated once
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
            "busy runs": f"{(load['busy'] != 'no').sum()} of {len(load)}",
            "first run: other cpu, load avg": f"{load['other_cpu_share'].iloc[0]:.0%}, {load['loadavg_1m'].iloc[0]:.1f}"}


def nights_of(phase: str, config: Path, state: Path, numbers: range, load, results: Path, until: float) -> None:
    """The nights `numbers` in a row, each row printed and appended to `results` (JSON lines);
    `load(n)` gives a context manager (and its description) for night n. No night starts when the
    last one, taken again, would end after the monotonic time `until`."""
    last = 0.0
    for number in numbers:
        if time.monotonic() + last > until:
            print(f"stopped before night {number}: out of time", flush=True)
            return
        began = time.monotonic()
        with load(number) as added:
            row = {"phase": phase, "night": number, "added load": added, **night(config, state)}
        with results.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")
        print(row, flush=True)
        last = time.monotonic() - began


@contextmanager
def no_added_load(_night: int):
    yield "none"


def served_model(phase: str, state: Path, layers: int) -> Path | None:
    """The model the phase's server serves: the tiny one (None: the profile's), or its deeper copy."""
    if phase == "unchanged":
        return None
    copy = state / f"tiny-{layers}-layers"
    return copy if copy.exists() else deeper_model(ensure_model(), copy, layers)


def run_phase(state: Path, args: argparse.Namespace) -> None:
    """Launch the phase's server; pin the baseline when none is (unchanged only); run its nights."""
    state.mkdir(parents=True, exist_ok=True)
    pinning = state / "pinning_night_seconds"
    numbers = range(args.first_night, args.first_night + args.nights)
    with embedded_server("cpu-testbed", served_model(args.phase, state, args.layers), log_name="bench-nightly") as server:
        config = write_config(state, server.base_url, ensure_model(), args)
        if not (state / "state" / "baseline.json").exists():
            if args.phase != "unchanged":
                raise SystemExit("no baseline pinned yet: run phase unchanged first")
            began = time.monotonic()
            print(f"baseline pinned on {server.base_url}: {night(config, state / 'state')}", flush=True)
            pinning.write_text(f"{time.monotonic() - began:.0f}\n")
        if args.phase == "unchanged":
            night_s = float(pinning.read_text())
            load = lambda n: spinner_during(night_s, random.Random(f"{args.seed}-{n}"))  # noqa: E731
        else:
            load = no_added_load
        nights_of(args.phase, config, state / "state", numbers, load, state / "nights.jsonl", args.until)


def print_table(results: Path) -> None:
    """Every night recorded in `results`, and the totals of each phase."""
    table = pd.DataFrame([json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()])
    with pd.option_context("display.width", 250, "display.max_colwidth", 120):
        print(table.to_string(index=False))
    unchanged, slower = (table[table["phase"] == p] for p in ("unchanged", "slower"))
    print(f"\nunchanged configuration under added load: {(unchanged['exit'] == 1).sum()} alarms in {len(unchanged)} "
          f"nights ({(unchanged['exit'] == 3).sum()} inconclusive)")
    print(f"server really slower: {(slower['exit'] == 1).sum()} of {len(slower)} nights caught "
          f"({(slower['exit'] == 3).sum()} inconclusive)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=10)
    parser.add_argument("--first-night", type=int, default=1, help="number of the first night run (seeds its load)")
    parser.add_argument("--phase", choices=["unchanged", "slower", "both"], default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, default=LAYERS, help="decoder layers of the slower phase's model")
    parser.add_argument("--prompts", type=int, default=WORKLOAD["options"]["num_prompts"])
    parser.add_argument("--output-tokens", type=int, default=WORKLOAD["options"]["output_tokens"])
    parser.add_argument("--state", type=Path, help="folder kept between calls (default: a new temporary one)")
    parser.add_argument("--table", action="store_true", help="print the nights recorded in --state and stop")
    parser.add_argument("--budget-s", type=float, default=math.inf,
                        help="start no night that would end later than this many seconds after the call began")
    args = parser.parse_args()
    args.until = time.monotonic() + args.budget_s
    state = args.state or Path(tempfile.mkdtemp(prefix="bench-nightly-"))
    began = time.monotonic()
    if not args.table:
        for phase in (["unchanged", "slower"] if args.phase == "both" else [args.phase]):
            run_phase(state, argparse.Namespace(**{**vars(args), "phase": phase}))
    print_table(state / "nights.jsonl")
    print(f"{time.monotonic() - began:.0f} s; state kept in {state}")


if __name__ == "__main__":
    main()
