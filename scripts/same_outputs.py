"""How many answers of each run are the same text as the baseline run's, prompt by prompt.

`python scripts/same_outputs.py BASE_RUN RUN...`: for greedy runs of one workload (the fidelity
check's negative controls, docs/fidelity.md), the ok answers both runs have, and how many of them
are identical. Sending nothing: it reads the runs' records.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from harness.records.requests import load_requests


def answers(run: Path) -> pd.Series:
    """The last ok answer of each prompt (a resumed run may hold an earlier failed try)."""
    table = load_requests(run)
    ok = table[table["status"] == "ok"]
    return ok.drop_duplicates("prompt_id", keep="last").set_index("prompt_id")["output_text"]


def main(base: Path, runs: list[Path]) -> None:
    reference = answers(base)
    for run in runs:
        other = answers(run)
        shared = reference.index.intersection(other.index)
        same = int((reference[shared] == other[shared]).sum())
        print(f"{run}: {same} of {len(shared)} answers identical to {base.name}'s")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: same_outputs.py BASE_RUN RUN...")
    main(Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])
