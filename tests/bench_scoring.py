"""Time GSM8K scoring of one full run (1,319 rows); prints seconds. Not a test: run it with
`python -m tests.bench_scoring` from the repository root.

Outputs are synthetic but long and adversarial: each recites the five shots (with their `####`
answers) and reasons at length before its own `#### N`, about the size of a real CoT answer.
"""

from __future__ import annotations

import json
import time

import pandas as pd

from workloads.gsm8k import GSM8KWorkload
from workloads.gsm8k_scoring import accuracy_summary, score_table


def synthetic_requests() -> pd.DataFrame:
    workload = GSM8KWorkload()
    prompts = workload.prompts()
    reasoning = "Step: 12 * 3 = 36, then 36 + 1,204 = 1,240 dollars. " * 40
    return pd.DataFrame({
        "prompt_id": [p.prompt_id for p in prompts],
        "output_text": [f"{workload.prefix}\n{reasoning}\n#### {p.item['gold']}" for p in prompts],
        "item_json": [json.dumps(p.item, sort_keys=True) for p in prompts],
    })


def main() -> None:
    requests = synthetic_requests()
    start = time.perf_counter()
    summary = accuracy_summary(score_table(requests))
    elapsed = time.perf_counter() - start
    strict = summary.query("metric == 'gsm8k_accuracy_strict' and stat == 'mean'")["value"].item()
    print(f"scored {len(requests)} rows in {elapsed:.3f} s (strict accuracy {strict:.4f})")


if __name__ == "__main__":
    main()
