"""The nightly gate's detection curve, from the runs a proof recorded (`scripts/nightly_proof.py`).

A resampled night: a baseline run drawn from the base server's quiet runs and a candidate run drawn
from one model's runs, each cut to `n` requests drawn with replacement (so `n` may exceed a run's
own count; drawing whole runs first keeps the run-to-run part of the noise), gated by the real
rule (`harness.nightly.gate.verdicts` with the noise.json that the proof's pinning measured); a
first-pass regression is confirmed against a second candidate drawn the same way
(`harness.nightly.settle`). The share of nights that end in a confirmed regression is the curve:
for the base server itself it is the false-alarm rate, for a slower one the detection rate. The
slowdown of a model is its runs' mean server TPOT over the base runs', minus one.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pandas as pd

from harness.analysis.compare import compare_loaded
from harness.analysis.run import Run
from harness.nightly.config import NightlyConfig
from harness.nightly.gate import verdicts
from harness.nightly.noise import read_noise
from harness.nightly.settle import Attempt, night_outcome, settle, undecided
from harness.report.markup import as_text, md_table

SIZES = (20, 40, 80)  # requests per run; fewer than the default min_requests (20) are not gated


def quiet(run: Path, config: NightlyConfig) -> bool:
    from harness.nightly.settle import busy_reasons
    from harness.records.rundir import load_record

    return not busy_reasons(load_record(run).host_load, config.busy_limits)


def pools(work: Path, config: NightlyConfig) -> dict[str, list[Path]]:
    """Recorded runs by model: `base` (pinning runs and quiet unchanged nights), `slow` (the
    slower nights), then each curve model. Runs of a busy night and busy runs are left out."""
    rows = [json.loads(line) for line in (work / "nights.jsonl").read_text(encoding="utf-8").splitlines()]
    runs = work / "state" / "runs"
    in_nights = {name for row in rows for name in row.get("runs", [])}
    named = {"base": [runs / n for n in sorted(p.name for p in runs.iterdir()) if n not in in_nights], "slow": []}
    for row in rows:
        if row["added load"] == "none":
            named["base" if row["phase"] == "unchanged" else "slow"] += [runs / n for n in row.get("runs", [])]
    for folder in sorted((work / "curve").glob("*")) if (work / "curve").exists() else []:
        named[folder.name] = sorted(p for p in folder.iterdir() if (p / "manifest.json").exists())
    return {name: [r for r in found if quiet(r, config)] for name, found in named.items()}


def resampled(run: Path, n: int, rng: random.Random, out: Path, side: str) -> Run:
    """A copy of `run` holding `n` of its requests drawn with replacement, never paired by prompt."""
    lines = [line for line in (run / "requests.jsonl").read_text(encoding="utf-8").splitlines() if line]
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    run_id = f"{side}-{rng.getrandbits(48):012x}"
    manifest |= {"run_id": run_id, "workload": {**manifest["workload"], "seed": side}}
    folder = out / run_id
    folder.mkdir(parents=True)
    records = []
    for k in range(n):
        record = json.loads(rng.choice(lines))
        records.append(json.dumps(record | {"run_id": run_id, "prompt_id": f"{record['prompt_id']}-{k}"}))
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (folder / "requests.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    return Run.load(folder)


def night(base: list[Path], cand: list[Path], n: int, config: NightlyConfig, noise: dict,
          rng: random.Random, out: Path) -> str:
    """One resampled night's outcome (module docstring)."""
    baseline = resampled(rng.choice(base), n, rng, out, "base")

    def gated() -> pd.DataFrame:
        candidate = resampled(rng.choice(cand), n, rng, out, "cand")
        return verdicts(compare_loaded([baseline, candidate], baseline.run_id), config, noise)

    first = gated()
    attempts = [Attempt(runs=(), table=gated())] if undecided(first, []) else []
    return night_outcome(settle(first, attempts))


def server_tpot(runs: list[Path]) -> float:
    return pd.concat([Run.load(r).derived["server_tpot_ms"] for r in runs]).mean()


def curve_table(work: Path, trials: int = 40, seed: int = 0) -> str:
    """The curve as a Markdown table: per model, its slowdown and the share of resampled nights
    that alarm at each request count."""
    config = NightlyConfig(state_dir=work / "state")
    noise = read_noise(config.state_dir).get("synthetic", {})
    found = pools(work, config)
    base_tpot = server_tpot(found["base"])
    rows = []
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        for name, runs in found.items():
            if not runs:
                continue
            row = {"model": name, "runs": len(runs), "server TPOT ms": server_tpot(runs),
                   "slowdown": f"{server_tpot(runs) / base_tpot - 1:+.1%}"}
            for n in SIZES:
                outcomes = [night(found["base"], runs, n, config, noise, rng, Path(tmp)) for _ in range(trials)]
                row[f"alarms at n={n}"] = f"{outcomes.count('regression')}/{trials}"
            rows.append(row)
            print(row, flush=True)
    thresholds = ", ".join(f"{k} {v:.1%}" for k, v in noise.items())
    return (md_table(as_text(pd.DataFrame(rows), "{:.3f}"), str)
            + f"\n\nNoise measured at pinning (spread of the repeats): {thresholds or 'not measured'}.")
