"""A capacity search's folder `results/capacity/<name>-<time>/`: one ordinary open-loop run per trial
(`trials/<nn>-<role>-r<rate>/<run_id>/`), `capacity.json` (the settings, every trial, the outcome),
`trials.csv`, `points.csv` (the trials by offered rate, `harness.analysis.rates`), `plots/` and
`report.html` / `report.md`. `capacity.json` is a `CapacityRecord` (`harness.sweep.record`).

`run_search` drives the bisection (`harness.sweep.capacity.search`) with a function that runs one
trial as planned (`harness.sweep.trial_plan`: its rate, its own arrival seed, a duration long enough
for the queue's steady state) into a folder and returns its run directory; a trial's offered rate,
attainment and overload are read from its run, so every figure comes from the records like any run's.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from harness.analysis.rates import RATE_KEYS, rate_points
from harness.analysis.run import Run
from harness.analysis.telemetry import queue_growth
from harness.errors import SparkbenchError, describe_os_error
from harness.metrics.overload import overload_warning
from harness.records.atomic import write_text_atomically
from harness.records.rundir import git_commit, host_facts, utc_now, utc_stamp
from harness.report.markup import as_text
from harness.report.rate_plots import plot_capacity, plot_rates
from harness.report.sweep_report import render_html, render_markdown
from harness.run.load_options import LoadOptions
from harness.sweep.capacity import Capacity, Trial, search
from harness.sweep.capacity_settings import CapacitySettings
from harness.sweep.record import CAPACITY_RECORD_VERSION, CapacityRecord, TrialEntry
from harness.sweep.trial_plan import TrialPlan, measured_requests, plan_trial

CAPACITY_MANIFEST = "capacity.json"
RunTrial = Callable[[TrialPlan, Path], Path]  # (plan, folder) -> the run directory it made there


def trial_of(run_dir: Path, rate: float, role: str) -> Trial:
    """A trial from its run: SLO attainment and its interval, the rate its schedule offered, whether
    the server kept up, its arrival seed and service time (a run without targets is refused)."""
    run = Run.load(run_dir)
    if not run.slo_targets:
        raise SparkbenchError("sparkbench capacity needs SLO targets (--slo ttft=...,tpot=...,e2e=...)")
    summary = run.summary.set_index(["metric", "stat"])["value"]
    return Trial(rate=rate, attainment=float(summary[("slo_attainment", "mean")]),
                 ci95_low=float(summary[("slo_attainment", "ci95_low")]),
                 ci95_high=float(summary[("slo_attainment", "ci95_high")]), run_dir=str(run_dir), role=role,
                 offered_rps=float(summary[("offered_rate_rps", "value")]),
                 overloaded=overload_warning(run.judged, queue_growth(run)) is not None,
                 arrival_seed=run.record.options.arrival_seed, service_ms=float(summary[("e2e_ms", "p50")]))


def new_folder(settings: CapacitySettings) -> Path:
    path = Path(settings.results) / f"{settings.name}-{utc_stamp()}"
    try:
        (path / "trials").mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        raise SparkbenchError(f"cannot create {path}: {describe_os_error(exc)}") from exc
    return path


def run_search(settings: CapacitySettings, run_trial: RunTrial, facts: dict,
               load: LoadOptions | None = None) -> tuple[Path, Capacity]:
    """Create the folder, bisect with `run_trial`, save `capacity.json` after every trial (a search
    stopped half-way keeps what it measured), and write the outputs; `facts` (configuration,
    workload, SLO, the run options) go into the record as they are. Each trial is planned from
    `load` (the search's arrival seed, windows and duration; `harness.sweep.trial_plan`)."""
    load = load or LoadOptions()
    folder = new_folder(settings)
    record = CapacityRecord(record_version=CAPACITY_RECORD_VERSION, capacity_id=folder.name, git=git_commit(),
                            host=host_facts(), started_at=utc_now(), settings=settings.model_dump(mode="json"), **facts)
    requests = measured_requests(settings.attainment, settings.trial_requests)
    trials: list[Trial] = []

    def measure(rate: float, role: str) -> Trial:
        nonlocal record
        number = len(record.trials) + 1
        plan = plan_trial(rate, number, base_seed=load.arrival_seed, requests=requests,
                          service_ms=max((t.service_ms for t in trials if t.passes(settings.attainment)),
                                         default=math.nan),
                          warmup_window_s=load.warmup_window_s, cooldown_window_s=load.cooldown_window_s,
                          duration_s=load.duration_s)
        print(f"capacity: trial {number} ({role}) asked {rate:g} req/s, arrival seed {plan.arrival_seed}, "
              f"{plan.duration_s:.4g} s ({plan.warmup_window_s:.4g} s warm-up)", file=sys.stderr, flush=True)
        trial = trial_of(run_trial(plan, folder / "trials" / f"{number:02d}-{role}-r{rate:g}"), rate, role)
        trials.append(trial)
        verdict = "passes" if trial.passes(settings.attainment) else "fails"
        print(f"capacity: trial {number} offered {trial.offered:.4g} req/s, attainment {trial.attainment:.1%}"
              f"{', overloaded' if trial.overloaded else ''}: {verdict}", file=sys.stderr, flush=True)
        entry = TrialEntry(**asdict(trial) | {"run_dir": str(Path(trial.run_dir).relative_to(folder))})
        record = record.updated(trials=[*record.trials, entry])
        save(folder, record)
        return trial

    found = search(measure, settings.floor_rps, settings.ceiling_rps, settings.attainment, settings.tolerance,
                   settings.max_trials, settings.confirmations)
    record = record.updated(ended_at=utc_now(), status=found.status, capacity_rps=found.capacity_rps,
                            asked_rps=found.asked_rps,
                            bracket=tuple(_json_number(v) for v in found.bracket), sentence=found.sentence())
    save(folder, record)
    write_outputs(folder, record)
    return folder, found


def _json_number(value: float) -> float | None:
    return value if math.isfinite(value) else None  # JSON has no infinity: an open bracket end is null


def save(folder: Path, record: CapacityRecord) -> None:
    """Written whole or not at all: a save that fails (disk full) keeps the last `capacity.json`."""
    write_text_atomically(folder / CAPACITY_MANIFEST,
                          json.dumps(record.as_written(), indent=2, sort_keys=True, default=str))


def trial_points(folder: Path, record: CapacityRecord) -> pd.DataFrame:
    """The trials by offered rate (`rate_points` of their summaries; a rate tried twice, its last run)."""
    frames = [Run.load(folder / t.run_dir).summary.assign(configuration=record.configuration, request_rate=t.rate)
              for t in record.trials]
    if not frames:
        return rate_points(pd.DataFrame(columns=[*RATE_KEYS, "metric", "stat", "value"]))
    summary = pd.concat(frames, ignore_index=True).drop_duplicates([*RATE_KEYS, "metric", "stat"], keep="last")
    return rate_points(summary)


def write_outputs(folder: Path, record: CapacityRecord) -> tuple[Path, Path]:
    """trials.csv, points.csv, plots/ and the report, from capacity.json and the trials' runs."""
    trials = pd.DataFrame([t.model_dump() for t in record.trials], columns=list(TrialEntry.model_fields))
    points = trial_points(folder, record)
    trials.to_csv(folder / "trials.csv", index=False)
    points.to_csv(folder / "points.csv", index=False)
    attainment = record.settings["attainment"]
    reduced = any(Run.load(folder / t.run_dir).reduced_scale for t in record.trials)
    bracket = tuple(math.inf if v is None else v for v in record.bracket or (math.nan, math.nan))
    figures = [*plot_capacity(trials, bracket, attainment, folder / "plots", reduced),
               *plot_rates(points, folder / "plots", reduced, attainment)]
    title = f"sparkbench capacity {record.capacity_id}"
    notes = [record.sentence or "search not finished", *(["REDUCED SCALE CPU test bed"] if reduced else []),
             f"SLO targets: {record.slo}; each trial is an ordinary run directory under trials/, on an "
             "arrival schedule of its own (arrival_seed); rates are those offered (offered_rps), not asked"]
    parts = [("Trials, in the order run", as_text(trials.drop(columns=["run_dir"]), "{:.4g}")),
             ("Trials by offered rate", as_text(points, "{:.4g}"))]
    html_path, md_path = folder / "report.html", folder / "report.md"
    html_path.write_text(render_html(title, notes, parts, figures), encoding="utf-8")
    md_path.write_text(render_markdown(title, notes, parts, figures, folder), encoding="utf-8")
    return html_path, md_path
