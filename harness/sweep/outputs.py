"""What a sweep leaves beside its cells: analysis tables as CSV, figures, its report, and the
lines printed at the end.

`curves.csv` (one row per complete cell; a sweep over arrival rates has `rates.csv` instead, and
no speed-up or saturation tables), `speedup.csv` (each configuration against the baseline,
per workload and concurrency), `saturation.csv` (every step between consecutive levels and whether
it meets the rule), `cells.csv` (every cell and how it ended), `plots/`, `report.html`, `report.md`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.analysis.rates import rate_points
from harness.analysis.sweep import curves, saturation_points, saturation_sentences, saturation_steps, speedups
from harness.records.rundir import SCALE_LABEL, load_record
from harness.report.rate_plots import plot_rates
from harness.report.sweep_plots import plot_sweep
from harness.report.sweep_report import write_sweep_report
from harness.sweep.config import SweepConfig
from harness.sweep.run import SWEEP_SUMMARY, sweep_summary
from harness.sweep.sweepdir import COMPLETE, SWEEP_MANIFEST, SweepDir


def cells_table(sweep: SweepDir) -> pd.DataFrame:
    """Every cell in matrix order: coordinates, status, run directory (relative) and error."""
    rows = [{"cell_id": cell_id, **entry.model_dump(include={"configuration", "workload", "concurrency", "request_rate",
                                                             "status", "run_dir", "error"})}
            for cell_id, entry in sweep.record.cells.items()]
    return pd.DataFrame(rows).fillna("")


def reduced_scale(sweep: SweepDir) -> bool:
    """Whether any cell ran on the embedded test bed (its figures are then REDUCED SCALE)."""
    return any(load_record(path).reduced_scale for path in sweep.run_dirs().values()
               if (path / "manifest.json").exists())


def analyse(sweep: SweepDir) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The sweep's tables (cells, curves, speedup, saturation) and its saturation sentences; of a
    sweep over arrival rates, its cells and its points by rate (`rates`)."""
    summary_file = sweep.path / SWEEP_SUMMARY
    summary = pd.read_csv(summary_file) if summary_file.exists() else sweep_summary(sweep)
    if sweep.config.request_rate is not None:
        return {"cells": cells_table(sweep), "rates": rate_points(summary)}, [shared_draw_sentence(sweep.config)]
    points = curves(summary)
    steps = saturation_steps(points)
    tables = {"cells": cells_table(sweep), "curves": points, "speedup": speedups(points, sweep.config.baseline_name),
              "saturation": steps}
    return tables, saturation_sentences(saturation_points(steps))


def shared_draw_sentence(config: SweepConfig) -> str:
    """What a rate sweep's arrivals are: one draw, the same for every rate and configuration."""
    if config.schedule is not None:
        return f"every cell replays the schedule {config.schedule}"
    return (f"every rate cell sends one arrival draw (seed {config.arrival_seed}, burstiness {config.burstiness:g}) "
            "scaled to its rate: the cells are comparable with one another (the same gaps, in proportion), "
            "but they share that draw's luck, and each cell offered its offered_rps, not exactly the rate asked")


def write_outputs(sweep: SweepDir) -> tuple[Path, dict[str, pd.DataFrame], list[str]]:
    """Write the tables, figures and report into the sweep folder; return (report.html, tables,
    saturation sentences)."""
    tables, sentences = analyse(sweep)
    for name, table in tables.items():
        table.to_csv(sweep.path / f"{name}.csv", index=False)
    reduced = reduced_scale(sweep)
    figures = (plot_rates(tables["rates"], sweep.path / "plots", reduced) if "rates" in tables
               else plot_sweep(tables["curves"], tables["speedup"], sweep.path / "plots", reduced))
    html, _ = write_sweep_report(sweep.path, sweep.record.sweep_id, tables, sentences, figures, reduced,
                                 sweep.config.baseline_name)
    return html, tables, sentences


def is_sweep(folder: Path) -> bool:
    return (Path(folder) / SWEEP_MANIFEST).exists()


def sweep_report(folder: Path) -> tuple[Path, Path]:
    """The sweep folder's tables, figures and report written again (`sparkbench report SWEEP_DIR`)."""
    html, _, _ = write_outputs(SweepDir.load(folder))
    return html, html.with_suffix(".md")


def print_sweep(sweep: SweepDir) -> None:
    """The cells and how each ended, the curve points and saturation, where the report is, and how to
    continue a sweep whose cells did not all complete."""
    html, tables, sentences = write_outputs(sweep)
    with pd.option_context("display.width", 200, "display.max_colwidth", 80, "display.float_format", "{:.4g}".format):
        print(tables["cells"].drop(columns=["run_dir"]).to_string(index=False))
        points = tables["rates"] if "rates" in tables else tables["curves"]
        if not points.empty:
            print("\n" + points.to_string(index=False))
    if reduced_scale(sweep):
        print(SCALE_LABEL)
    print("\n".join(sentences))
    print(f"sweep: {sweep.path}\nreport: {html}")
    unfinished = [entry for entry in sweep.record.cells.values() if entry.status != COMPLETE]
    if unfinished:
        print(f"sweep: {len(unfinished)} of {len(sweep.record.cells)} cells did not complete; "
              f"continue with: sparkbench sweep --resume {sweep.path}")
