"""`sparkbench fidelity`: pair two recorded runs, ask the plain server where they parted, save the checks.

The analysis (`harness.analysis.fidelity`) is pure; this module binds it to a live plain server
(its engine's `top_next`) and writes `fidelity.csv` (one row per greedy pair) and `fidelity.json`
(counts, margin quantiles, the verdict, both run ids) into the speculative run's folder, which the
report reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from harness.agree.servers import connect
from harness.analysis import fidelity
from harness.analysis.run import Run
from harness.records.atomic import write_text_atomically


def check_run_pair(plain_dir: Path, spec_dir: Path, server_url: str, near_tie: float) -> dict:
    plain, spec = Run.load(plain_dir), Run.load(spec_dir)
    with httpx.Client(timeout=120.0) as http:
        server = connect(http, server_url)

        def top_next(prompt: str, prefix: list[int], k: int) -> list[tuple[int, float]]:
            return server.engine.top_next(http, server.url, prompt, prefix, k)

        checks = fidelity.check_runs(plain.requests, spec.requests, top_next, near_tie)
    outcome = {**fidelity.summary(checks, near_tie), "plain_run": plain_dir.name, "spec_run": spec_dir.name,
               "server": server_url}
    write_text_atomically(spec_dir / fidelity.CHECKS_FILE, checks.to_csv(index=False))
    write_text_atomically(spec_dir / fidelity.SUMMARY_FILE, json.dumps(outcome, indent=1) + "\n")
    return outcome
