"""Running one night: guard, workloads, comparison with the pinned baseline, verdict, history, report."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

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


def judge(config: NightlyConfig, night: str, baseline: dict[str, str], runs: dict[str, Path]) -> pd.DataFrame:
    """Compare each workload's run with its baseline; gate it; record the night in the history."""
    from harness.analysis.compare import compare_runs

    tables = []
    for workload, run_dir in runs.items():
        if workload not in baseline:
            raise SparkbenchError(f"no pinned baseline for workload {workload}; re-pin with --pin-baseline")
        comparison = compare_runs([baseline[workload], run_dir], baseline=baseline[workload])
        table = verdicts(comparison, config)
        append_history(config, night, comparison, table)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def write_report(config: NightlyConfig, night: str, baseline: dict[str, str], runs: dict[str, Path]) -> Path:
    from harness.nightly.trend import trend_plot
    from harness.report.report import build_report

    out = config.state_dir / "reports" / night
    trend = trend_plot(pd.read_csv(config.history_file), out)
    html, _ = build_report([*[Path(p) for p in baseline.values()], *runs.values()], out,
                           baseline=next(iter(baseline.values())), extra_images=trend)
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
        table = judge(config, night, baseline, runs)
        report = write_report(config, night, baseline, runs)
    except SparkbenchError as exc:
        print(f"sparkbench nightly: could not run: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    regressed = table["verdict"].str.startswith("regressed")
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
    names = ", ".join(f"{r.workload}:{r.metric}" for r in table[regressed].itertuples())
    print(f"verdict: {'REGRESSION in ' + names if regressed.any() else 'pass'}; report {report}")
    return REGRESSION if regressed.any() else PASS
