"""The venue's run-to-run noise, measured when the baseline is pinned, that scales the thresholds.

Pinning runs each workload `baseline_repeats` times back to back on the same server (the first
run is the baseline). For every gated (metric, stat) the spread of the run-level values is

    spread = (max - min) / median        over the repeats (a fraction; 0.04 = 4%)

and the gate's threshold for that metric is max(configured floor, noise_multiplier x spread)
(`harness.nightly.gate.threshold_of`). The spread of a few repeats understates the spread of
many, which is why the multiplier is 2 by default and the floor stays. Kept in `noise.json` beside
`baseline.json`, written through a temporary file and a rename; re-pinning measures it afresh.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from harness.analysis.compare import baseline_rows
from harness.analysis.run import Run
from harness.errors import SparkbenchError
from harness.records.atomic import write_text_atomically

NOISE_NAME = "noise.json"


def spread(values: list[float]) -> float | None:
    """(max - min) / median of the finite values; None for fewer than two or a zero median."""
    finite = sorted(v for v in values if v is not None and math.isfinite(v))
    if len(finite) < 2:
        return None
    middle = statistics.median(finite)
    return (finite[-1] - finite[0]) / abs(middle) if middle else None


def measure_noise(repeats: list[Run], pairs: list[tuple[str, str]]) -> dict[str, float]:
    """The spread of each (metric, stat) of `pairs` over repeated runs of one workload, by
    "metric stat"; a pair with no spread (one repeat, unmeasured) is left out."""
    values: dict[str, list[float]] = {}
    for run in repeats:
        for row in baseline_rows(run):
            if (row["metric"], row["stat"]) in pairs:
                values.setdefault(f"{row['metric']} {row['stat']}", []).append(row["value"])
    return {name: s for name, vs in values.items() if (s := spread(vs)) is not None}


def write_noise(state_dir: Path, noise: dict[str, dict[str, float]]) -> None:
    """noise.json: workload -> {"metric stat": spread}, whole or not at all."""
    path = Path(state_dir) / NOISE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(noise, indent=2, sort_keys=True))


def read_noise(state_dir: Path) -> dict[str, dict[str, float]]:
    """The spreads measured at the last pin ({} when none were: the floors apply alone)."""
    path = Path(state_dir) / NOISE_NAME
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SparkbenchError(f"{path} is corrupt: {exc}; re-pin with --pin-baseline") from exc
