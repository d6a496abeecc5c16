"""GSM8K accuracy of the real model on two engines, and on a damaged copy, compared question by question.

    .venv/bin/python scripts/real_model_mcnemar.py [--questions 40] [--tokens 256] [--damage e4m1]

Launches `llamacpp-cpu-real` (the Q4_1 GGUF as shipped), `vllm-cpu-real` (the bf16 checkpoint
converted from it) and `vllm-cpu-real` again on a copy whose LM head was rounded to `--damage`
(harness/testbed/variants.py), runs the same greedy GSM8K questions on each with `sparkbench run
gsm8k`, and prints the paired accuracy changes against llama.cpp (`sparkbench compare`: the
Agresti-Min interval and the exact McNemar p-value of the discordant questions), with the date,
host and load: the figures docs/real-model.md quotes.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.analysis.compare import compare_runs
from harness.run.embedded import embedded_server
from harness.testbed.variants import ensure_rounded_head_model

ARMS = (("llamacpp", "llamacpp-cpu-real", None), ("vllm", "vllm-cpu-real", None), ("vllm-damaged", "vllm-cpu-real", "damage"))


def gsm8k_run(base_url: str, results: Path, questions: int, tokens: int) -> Path:
    subprocess.run([sys.executable, "-m", "harness.cli", "run", "gsm8k", "--server", base_url, "--limit", str(questions),
                    "--max-new-tokens", str(tokens), "--temperature", "0", "--results", str(results), "--no-progress"],
                   check=True, stdout=subprocess.DEVNULL)
    return next(p for p in results.iterdir() if p.is_dir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--damage", default="e4m1", help="LM-head rounding of the damaged copy (variants.ROUNDINGS)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    runs: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="mcnemar-") as scratch:
        for name, profile, damaged in ARMS:
            model = ensure_rounded_head_model(args.damage, engine="vllm", real=True) if damaged else None
            with embedded_server(profile, model_dir=model, log_name=f"mcnemar-{name}") as server:
                runs[name] = gsm8k_run(server.base_url, Path(scratch) / name, args.questions, args.tokens)
        table = compare_runs(list(runs.values()))
    print(f"{datetime.date.today()} {platform.node()} load before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    print(f"{args.questions} GSM8K questions, greedy, {args.tokens}-token cap; baseline llamacpp-cpu-real; "
          f"damaged: vllm-cpu-real with the LM head rounded to {args.damage}")
    names = {path.name: name for name, path in runs.items()}
    accuracy = table[table["metric"].str.startswith("gsm8k_accuracy")].assign(arm=lambda t: t["run_id"].map(names))
    columns = [c for c in ("arm", "metric", "value", "baseline_value", "change", "ci95_low", "ci95_high", "n",
                           "p_value") if c in accuracy.columns]
    print(accuracy[columns].to_string(index=False))


if __name__ == "__main__":
    main()
