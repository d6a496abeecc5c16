"""The nightly gate's proof on one venue: unchanged nights, nights of a really slower server, busy
first passes, and the detection curve. Prints figures and writes tables; not a test.

    python scripts/nightly_proof.py run --venue gpu --work DIR --llama-server BIN --tokenizer DIR \\
        --model base=A.gguf --model slow=B.gguf [--model NAME=C.gguf ...]
    python scripts/nightly_proof.py run --venue cpu --work DIR [--slow-layers 4] [--curve-layers 3]
    python scripts/nightly_proof.py table --work DIR

`run`, on the `base` server: pins the baseline with the real `sparkbench nightly --pin-baseline`
(its repeats measure the venue's noise, `harness.nightly.noise`), runs `--nights` unchanged nights
and one night whose first pass meets a CPU hog (one spinning process per core, started by this
script and stopped as soon as the first pass's run is recorded, so that the confirmation meets a
quiet host). Then on the `slow` server: `--nights` nights and one busy night. Then each further
model serves `--curve-runs` plain runs of the same workload (`sparkbench run synthetic`), the
recorded data of the detection curve. Every night is the real command at the default settings;
its row (exit code, the server's own mean TPOT against the baseline's, what the first pass and the
confirmations said, the host load) goes to DIR/nights.jsonl. `--budget-s` starts no step that the
last one, taken again, would carry past the budget.

`table` writes DIR/nights.md (night by night, and the totals) and DIR/curve.md (the detection
curve, `scripts/nightly_curve.py`). The venues: `gpu`, llama.cpp serving random Qwen3-MoE GGUFs
(scripts/gpu/h200.sh `nightly`: models of 24 and 27 layers, and 25 and 26 for the curve); `cpu`,
the SGLang test bed (profile cpu-testbed) serving the tiny model and deeper copies of it
(`harness.testbed.deeper`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.analysis.run import Run  # noqa: E402
from harness.run.server import LaunchSpec, ManagedServer, free_port  # noqa: E402

OUTCOMES = {0: "pass", 1: "regression", 2: "could not run", 3: "inconclusive"}
SPIN = "while True:\n    pass\n"


def workload(args: argparse.Namespace) -> dict:
    return {"name": "synthetic", "options": {"num_prompts": args.requests, "input_tokens": args.input_tokens,
                                             "output_tokens": args.output_tokens, "seed": 0,
                                             "tokenizer": str(args.tokenizer)}}


@contextmanager
def serving(args: argparse.Namespace, name: str):
    """The venue's server for model `name`, healthy; yields its base URL."""
    log = args.work / "logs" / f"server-{name}.log"
    if args.venue == "cpu":
        from harness.run.embedded import embedded_server

        with embedded_server("cpu-testbed", cpu_model(args, name), log_name=f"proof-{name}") as server:
            yield server.base_url
        return
    port = free_port()
    context = args.input_tokens + args.output_tokens + 256
    argv = [str(args.llama_server), "-m", str(args.models[name]), "--host", "127.0.0.1", "--port", str(port),
            "--metrics", "-ngl", "all", "-np", "1", "-c", str(context)]
    with ManagedServer(LaunchSpec(argv), f"http://127.0.0.1:{port}", log) as server:
        yield server.base_url


def cpu_model(args: argparse.Namespace, name: str) -> Path | None:
    """The test bed's tiny model (None: the profile's own) or a deeper copy of it."""
    from harness.testbed.deeper import deeper_model
    from harness.testbed.envs import ensure_model

    layers = args.models[name]
    if layers is None:
        return None
    copy = args.work / f"tiny-{layers}-layers"
    return copy if copy.exists() else deeper_model(ensure_model(), copy, layers)


def write_config(args: argparse.Namespace, url: str) -> Path:
    path = args.work / "nightly.yaml"
    path.write_text(yaml.safe_dump({"server": url, "state_dir": str(args.work / "state"),
                                    "workloads": [workload(args)]}), encoding="utf-8")
    return path


@contextmanager
def hog_first_pass(runs_dir: Path, on: bool):
    """With `on`: one spinning process per core until the next run recorded in `runs_dir` has its
    host load (the first pass is over), so that the confirmation meets a quiet host."""
    if not on:
        yield "none"
        return
    before = set(runs_dir.glob("*")) if runs_dir.exists() else set()
    hogs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(os.cpu_count() or 1)]
    stopped = False

    def first_pass_done() -> bool:
        for run in set(runs_dir.glob("*")) - before:
            manifest = run / "manifest.json"
            if manifest.exists() and "host_load" in json.loads(manifest.read_text(encoding="utf-8")):
                return True
        return False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            for hog in hogs:
                hog.kill()
                hog.wait()
            stopped = True

    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            if first_pass_done():
                stop()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield f"{len(hogs)} spinning processes during the first pass"
    finally:
        done.set()
        watcher.join()
        stop()


def nightly(config: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "nightly", "--config", str(config), *extra],
                          capture_output=True, text=True)


def night_row(state: Path, done: subprocess.CompletedProcess, before: set[Path]) -> dict:
    """What one night said: its exit, the server's TPOT against the baseline's, first pass and
    confirmations, and the host load of its runs (from the night's report folder)."""
    row = {"exit": done.returncode, "outcome": OUTCOMES.get(done.returncode, "?"),
           "verdict line": (done.stdout.strip().splitlines() or [""])[-1][:300]}
    new = sorted(set((state / "reports").glob("*")) - before)
    if done.returncode == 2 or not new:
        return {**row, "detail": (done.stderr.strip().splitlines() or ["?"])[-1]}
    verdicts = pd.read_csv(new[-1] / "verdicts.csv")
    verdicts[["verdict", "confirmation"]] = verdicts[["verdict", "confirmation"]].fillna("").astype(str)
    load = pd.read_csv(new[-1] / "host_load.csv")
    baseline = Run.load(json.loads((state / "baseline.json").read_text())["synthetic"])
    first = Run.load(state / "runs" / load["run"].iloc[0])
    gated = verdicts[~verdicts["verdict"].str.startswith("ungated")]
    return {**row, "runs": load["run"].tolist(),
            "server tpot": first.derived["server_tpot_ms"].mean() / baseline.derived["server_tpot_ms"].mean() - 1,
            "first pass": "; ".join(f"{r.metric} {r.stat} {float(r.change):+.1%} (threshold {float(r.threshold):.1%}) "
                                    f"{r.verdict}" for r in gated.itertuples()),
            "settled": "; ".join(f"{r.metric} {r.stat}: {r.verdict} [{r.confirmation}]"
                                 for r in verdicts.itertuples() if r.confirmation),
            "busy runs": int((load["busy"] != "no").sum()), "all runs": len(load),
            "first run other cpu": load["other_cpu_share"].iloc[0], "first run load avg": load["loadavg_1m"].iloc[0]}


class Budget:
    """Starts no step that the longest so far, taken again, would carry past the deadline."""

    def __init__(self, seconds: float) -> None:
        self.until, self.longest = time.monotonic() + seconds, 0.0

    def allows(self) -> bool:
        return time.monotonic() + self.longest <= self.until

    @contextmanager
    def step(self):
        began = time.monotonic()
        yield
        self.longest = max(self.longest, time.monotonic() - began)


def record(args: argparse.Namespace, row: dict) -> None:
    with (args.work / "nights.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(row, default=str) + "\n")
    print({k: v for k, v in row.items() if k != "runs"}, flush=True)


def nights(args: argparse.Namespace, budget: Budget, phase: str, url: str) -> None:
    """`--nights` nights then one with a busy first pass, against the server at `url`."""
    config, state = write_config(args, url), args.work / "state"
    for number in range(1, args.nights + 2):
        busy = number == args.nights + 1
        if not budget.allows():
            print(f"{phase}: out of time before night {number}", flush=True)
            return
        with budget.step(), hog_first_pass(state / "runs", busy) as added:
            before = set((state / "reports").glob("*"))
            began = time.monotonic()
            done = nightly(config)
            row = {"phase": phase, "night": number, "added load": added,
                   "seconds": round(time.monotonic() - began), **night_row(state, done, before)}
        record(args, row)


def curve_runs(args: argparse.Namespace, budget: Budget, name: str, url: str) -> None:
    """`--curve-runs` plain runs of the nightly's workload, kept under DIR/curve/NAME."""
    options = workload(args)["options"]
    for _ in range(args.curve_runs):
        if not budget.allows():
            print(f"curve {name}: out of time", flush=True)
            return
        with budget.step():
            subprocess.run([sys.executable, "-m", "harness.cli", "run", "synthetic", "--server", url,
                            "--tokenizer", options["tokenizer"], "--num-prompts", str(args.curve_requests),
                            "--input-tokens", str(args.input_tokens), "--output-tokens", str(args.output_tokens),
                            "--results", str(args.work / "curve" / name), "--no-progress"],
                           check=True, capture_output=True, text=True)
        print(f"curve {name}: run recorded", flush=True)


def run(args: argparse.Namespace) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget_s)
    print(f"host: {os.uname().nodename}, {os.cpu_count()} cpus; load average {os.getloadavg()}", flush=True)
    with serving(args, "base") as url:
        pinned = nightly(write_config(args, url), "--pin-baseline")
        print(pinned.stdout.strip() or pinned.stderr.strip(), flush=True)
        if pinned.returncode != 0:
            raise SystemExit("the baseline could not be pinned")
        nights(args, budget, "unchanged", url)
    with serving(args, "slow") as url:
        nights(args, budget, "slower", url)
    for name in [n for n in args.models if n not in ("base", "slow")]:
        if budget.allows():
            with serving(args, name) as url:
                curve_runs(args, budget, name, url)


def table(args: argparse.Namespace) -> None:
    from harness.report.markup import as_text, md_table
    from scripts.nightly_curve import curve_table

    rows = pd.DataFrame([json.loads(line) for line in (args.work / "nights.jsonl").read_text().splitlines()])
    shown = rows.drop(columns=["runs", "verdict line"], errors="ignore")
    lines = [md_table(as_text(shown, "{:.3f}"), str), ""]
    for phase in ("unchanged", "slower"):
        quiet = rows[(rows["phase"] == phase) & (rows["added load"] == "none")]
        busy = rows[(rows["phase"] == phase) & (rows["added load"] != "none")]
        lines.append(f"- {phase}: {len(quiet)} nights: {(quiet['exit'] == 1).sum()} REGRESSION, "
                     f"{(quiet['exit'] == 3).sum()} INCONCLUSIVE, {(quiet['exit'] == 0).sum()} pass; busy first "
                     f"pass: {', '.join(busy['outcome']) or 'not run'}")
    (args.work / "nights.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    curve = curve_table(args.work, trials=args.trials, seed=args.seed)
    (args.work / "curve.md").write_text(curve + "\n", encoding="utf-8")
    print(curve)


def parse_model(text: str) -> tuple[str, str]:
    name, _, path = text.partition("=")
    return name, path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run")
    go.add_argument("--venue", choices=("gpu", "cpu"), required=True)
    go.add_argument("--llama-server", type=Path, help="gpu: the llama-server binary")
    go.add_argument("--model", action="append", type=parse_model, default=[],
                    help="gpu: NAME=GGUF (base, slow, then curve models)")
    go.add_argument("--slow-layers", type=int, default=4, help="cpu: decoder layers of the slower copy")
    go.add_argument("--curve-layers", type=int, nargs="*", default=[3], help="cpu: curve copies' layers")
    go.add_argument("--tokenizer", type=Path, help="tokenizer of the synthetic prompts (cpu: the test bed's)")
    go.add_argument("--nights", type=int, default=10)
    go.add_argument("--requests", type=int, default=20)
    go.add_argument("--input-tokens", type=int, default=256)
    go.add_argument("--output-tokens", type=int, default=128)
    go.add_argument("--curve-runs", type=int, default=3)
    go.add_argument("--curve-requests", type=int, default=40)
    go.add_argument("--budget-s", type=float, default=float("inf"))
    for p in (go, sub.add_parser("table")):
        p.add_argument("--work", type=Path, required=True)
        p.add_argument("--trials", type=int, default=40, help="table: resampled nights per curve point")
        p.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.command == "table":
        table(args)
        return
    if args.venue == "gpu":
        args.models = {name: Path(path) for name, path in args.model}
    else:
        from harness.testbed.envs import ensure_model

        args.tokenizer = args.tokenizer or ensure_model()
        args.models = {"base": None, "slow": args.slow_layers, **{f"layers-{n}": n for n in args.curve_layers}}
    if {"base", "slow"} - set(args.models):
        raise SystemExit("sparkbench: the proof needs a base and a slow model")
    run(args)


if __name__ == "__main__":
    main()
