"""Running one night: guard, workloads, comparison with the pinned baseline, verdict, history, report."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from harness.analysis.run import Run
from harness.errors import SparkbenchError
from harness.nightly.config import NightlyConfig
from harness.nightly.gate import append_history, night_id, pin_baseline, pinned_baseline, verdicts

PASS, REGRESSION, COULD_NOT_RUN = 0, 1, 2


def run_workloads(config: NightlyConfig) -> dict[str, Path]:
    """Run every configured workload on one server (guarded when a profile is named)."""
    from harness.run.bench import backend_for, run_workload, target_server
    from harness.run.runner import RunOptions
    from workloads.registry import build

    runs: dict[str, Path] = {}
    with target_server(config.server, config.profile, config.model) as target:
        backend = backend_for(target, config.backend)
        for spec in config.workloads:
            chosen = build(spec.name, spec.options, target.reduced, target.model_dir)
            options = RunOptions(base_url=target.base_url, warmup=config.warmup, show_progress=False)
            runs[spec.name] = run_workload(target, backend, chosen, options, config.runs_dir).path
    return runs


def loaded_pairs(baseline: dict[str, str], runs: dict[str, Path]) -> list[tuple[Run, Run]]:
    """(pinned baseline, tonight's run) of each workload, each run loaded once."""
    missing = [workload for workload in runs if workload not in baseline]
    if missing:
        raise SparkbenchError(f"no pinned baseline for workload {missing[0]}; re-pin with --pin-baseline")
    return [(Run.load(baseline[workload]), Run.load(run_dir)) for workload, run_dir in runs.items()]


def judge(config: NightlyConfig, night: str, pairs: list[tuple[Run, Run]]) -> pd.DataFrame:
    """Compare each workload's run with its baseline; gate it; record the night in the history."""
    from harness.analysis.compare import compare_loaded

    tables = []
    for base, tonight in pairs:
        comparison = compare_loaded([base, tonight], base.run_id)
        table = verdicts(comparison, config)
        append_history(config, night, comparison, table)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def write_report(config: NightlyConfig, night: str, pairs: list[tuple[Run, Run]]) -> Path:
    from harness.nightly.trend import trend_plot
    from harness.report.report import build_report

    out = config.state_dir / "reports" / night
    trend = trend_plot(pd.read_csv(config.history_file), out)
    runs = [base for base, _ in pairs] + [tonight for _, tonight in pairs]
    html, _ = build_report(runs, out, baseline=pairs[0][0].run_id, extra_images=trend)
    return html


def run_night(config: NightlyConfig, pin: bool = False) -> int:
    """One night end to end; returns the exit code (0 pass, 1 regression, 2 could not run)."""
    night = night_id()
    try:
        baseline = pinned_baseline(config)
        runs = run_workloads(config)
        if pin or not baseline:
            pin_baseline(config, runs)
            print(f"baseline pinned for {', '.join(runs)}: {config.baseline_file}")
            return PASS
        pairs = loaded_pairs(baseline, runs)
        table = judge(config, night, pairs)
        report = write_report(config, night, pairs)
    except SparkbenchError as exc:
        print(f"sparkbench nightly: could not run: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    regressed = table["verdict"].str.startswith("regressed")
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
    names = ", ".join(f"{r.workload}:{r.metric}" for r in table[regressed].itertuples())
    print(f"verdict: {'REGRESSION in ' + names if regressed.any() else 'pass'}; report {report}")
    return REGRESSION if regressed.any() else PASS
