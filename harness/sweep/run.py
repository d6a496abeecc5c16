"""Driving a sweep: its unfinished cells run locally in order, or as Ray tasks; then its tables.

Locally, each configuration's server is attached to (or launched) once and its cells run one after
another; Ray is never imported. With a Ray address the cells are Ray tasks (`harness.sweep.on_ray`).
Either way the driver alone writes the sweep manifest, after each cell, and a failed cell is
recorded while the others go on. When the cells are done the sweep folder gets `summary.csv` (the
cells' long summaries, one block per cell) and the analysis tables and report
(`harness.sweep.outputs`).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import groupby
from pathlib import Path

import pandas as pd

from harness.analysis.run import SUMMARY_NAME, Run
from harness.sweep.cells import run_configuration
from harness.sweep.sweepdir import COMPLETE, SweepDir

CELL_COLUMNS = ["cell_id", "configuration", "workload", "concurrency", "request_rate"]
SWEEP_SUMMARY = "summary.csv"
Runner = Callable  # run_configuration's signature: (configuration, [(cell, folder)], settings, report)


def run_local(sweep: SweepDir, runner: Runner = run_configuration) -> None:
    """Every unfinished cell in matrix order, each configuration's server started (or attached) once."""
    sweep.begin({"kind": "local"})
    for _, group in groupby(sweep.unfinished(), key=lambda cell: cell.configuration.name):
        cells = list(group)
        runner(cells[0].configuration, [(cell, sweep.cell_root(cell)) for cell in cells], sweep.config, sweep.record_outcome)


def execute(sweep: SweepDir, ray_address: str | None = None, runner: Runner = run_configuration) -> str:
    """Run the sweep's unfinished cells (locally, or on the Ray cluster at `ray_address`), write its
    summary table, and return its status (`complete`, or `incomplete` when a cell did not complete)."""
    try:
        if ray_address is None:
            run_local(sweep, runner)
        else:
            from harness.sweep.on_ray import run_on_ray

            run_on_ray(sweep, ray_address, runner)
    finally:
        status = sweep.finish()
        summary = sweep_summary(sweep)
        summary.to_csv(sweep.path / SWEEP_SUMMARY, index=False)
    return status


def cell_summary(run_dir: Path) -> pd.DataFrame:
    """A cell run's long summary: its summary.csv, else derived from its records."""
    written = Path(run_dir) / SUMMARY_NAME
    return pd.read_csv(written) if written.exists() else Run.load(run_dir).summary


def sweep_summary(sweep: SweepDir) -> pd.DataFrame:
    """The long summaries of the complete cells, each row led by the cell's coordinates."""
    frames = []
    for cell_id, run_dir in sweep.run_dirs().items():
        entry = sweep.record.cells[cell_id]
        if entry.status != COMPLETE:
            continue
        frames.append(cell_summary(run_dir).assign(cell_id=cell_id, configuration=entry.configuration,
                                                   workload=entry.workload, concurrency=entry.concurrency,
                                                   request_rate=entry.request_rate))
    if not frames:
        return pd.DataFrame(columns=[*CELL_COLUMNS, "run_id", "metric", "stat", "value", "unit"])
    summary = pd.concat(frames, ignore_index=True)
    return summary[[*CELL_COLUMNS, *[c for c in summary.columns if c not in CELL_COLUMNS and c != "workload"]]]
