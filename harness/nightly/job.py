"""Running one night: guard, workloads, host load, gate, confirmation, history, report.

Every run is measured with the host's load beside it (`harness.run.hostload`, and the load of
foreign processes, `harness.nightly.foreign`: kept in the run's manifest as `host_load`). A workload that regresses is run again before anything alarms
(`harness.nightly.settle` states the rule): against a fresh run of the baseline's configuration,
interleaved, when the baseline's server was launched from a profile and tonight's job launches its
servers too; else as a plain rerun against the pinned baseline. A run is loaded once, as a `Run`,
and that object is what the gate, the settle step, the history and the report read.

Two nightly jobs never measure one server at the same time (`measuring`): each would be load on
the other's server that no host figure can see, since the server's CPU is the measured one.
"""

from __future__ import annotations

import fcntl
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pandas as pd

from harness.analysis.run import Run
from harness.errors import SparkbenchError
from harness.nightly.config import NightlyConfig
from harness.nightly.foreign import ForeignLoadMeter, describe
from harness.nightly.gate import (
    GATED,
    TAIL_FALLBACK,
    TAIL_QUANTILES,
    history_rows,
    pin_baseline,
    pinned_baseline,
    verdicts,
)
from harness.nightly.history import append_history, night_id, read_history
from harness.nightly.noise import measure_noise, read_noise, write_noise
from harness.nightly.settle import (
    CONFIRMED,
    INCONCLUSIVE,
    NOT_CONFIRMED,
    Attempt,
    busy_reasons,
    night_outcome,
    settle,
    tpot_gap,
    undecided,
)
from harness.records.entries import HostLoadEntry
from harness.request import RunRequest, TargetSpec
from harness.run.hostload import LOCAL_HOSTS, HostLoadMeter
from harness.run.options import RunSettings

if TYPE_CHECKING:
    from harness.run.target import Target

# Exit codes, named apart from the verdict texts of `settle` (INCONCLUSIVE there is a verdict).
EXIT_PASS, EXIT_REGRESSION, EXIT_COULD_NOT_RUN, EXIT_INCONCLUSIVE = 0, 1, 2, 3
EXIT_CODES = {"pass": EXIT_PASS, "regression": EXIT_REGRESSION, "inconclusive": EXIT_INCONCLUSIVE}
LOAD_METRICS = ("foreign_cpu_share", "other_cpu_share", "steal_share", "loadavg_1m", "tpot_client_server_gap")


@contextmanager
def measuring(base_url: str) -> Iterator[None]:
    """Hold the host-wide lock of the server at `base_url` while measuring it (see the module)."""
    parts = urlsplit(base_url)
    path = Path(tempfile.gettempdir()) / f"sparkbench-measuring-{parts.hostname}-{parts.port}.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def local_port(base_url: str) -> int | None:
    """The port of a server on this host (its listener is then the measured server), else None."""
    parts = urlsplit(base_url)
    return parts.port if parts.hostname in LOCAL_HOSTS else None


def measured(request: RunRequest, opened: Target, setup_pids: list[int]) -> tuple[Run, dict]:
    """`request` run on `opened` under the server's lock (`measuring`), and the host's load over
    the run with the foreign processes' part of it (`harness.nightly.foreign`)."""
    from harness.session import run

    host, foreign = HostLoadMeter(opened.base_url), ForeignLoadMeter(local_port(opened.base_url), setup_pids)
    with measuring(opened.base_url):
        host.start()
        foreign.start()
        done = run(request, opened)
        load, counted = host.stop().to_dict(), foreign.stop()
    return done, {**load, **(counted.to_dict() if counted else {})}


def run_workloads(config: NightlyConfig, names: list[str] | None = None,
                  launch: tuple[str, Path | None] | None = None, role: str = "nightly") -> dict[str, Run]:
    """Run the configured workloads (or those `names`) on one server, each with its host load.

    The server is config.server, else `launch` = (profile, model) launched for the call (default:
    the config's profile and model). Each run's label is its derived one and `role` (nightly,
    rerun, baseline config), so the night's report tells the runs apart.
    """
    from harness.records.rundir import RunDir
    from harness.session import open_target

    runs: dict[str, Run] = {}
    chosen = [w for w in config.workloads if names is None or w.name in names]
    profile, model = launch or (config.profile, config.model)
    target = TargetSpec.part_of(config, profile=profile, model=model)
    settings = RunSettings.part_of(config)
    with open_target(target) as opened:
        for spec in chosen:
            request = RunRequest(target=target, workload=spec, options=settings, results=config.runs_dir,
                                 allow_buffered=config.allow_buffered)
            done, load = measured(request, opened, config.setup_pids)
            # RunDir shares done's manifest: the Run handed on holds the host load and label too.
            RunDir(done.path, done.manifest).update(
                host_load={**load, "tpot_client_server_gap": tpot_gap(done.derived)},
                label=f"{done.label} {role}")
            runs[spec.name] = done
    return runs


def gate(config: NightlyConfig, baseline: Run, run: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(comparison, verdicts) of one run against a baseline run of the same workload, its thresholds
    scaled by the workload's measured noise."""
    from harness.analysis.compare import compare_loaded

    comparison = compare_loaded([baseline, run], baseline.run_id)
    return comparison, verdicts(comparison, config, read_noise(config.state_dir).get(run.workload))


def busy(config: NightlyConfig, *runs: Run) -> list[str]:
    """The busy reasons of every run named, each prefixed with its run directory's name."""
    return [f"{run.path.name}: {reason}" for run in runs
            for reason in busy_reasons(run.record.host_load, config.busy_limits)]


def relaunchable_baseline(config: NightlyConfig, baseline: Run) -> tuple[str, Path | None] | None:
    """(profile, model) that relaunches the baseline's server, when tonight's job launches servers and
    the baseline's was launched from a profile; None otherwise (a plain rerun then confirms)."""
    launched = baseline.record.launched_server
    if config.server or not launched:
        return None
    return launched.profile, None if baseline.reduced_scale else Path(launched.model_dir)


def confirmation_attempt(config: NightlyConfig, workload: str, baseline: Run) -> Callable[[], Attempt]:
    """A function that makes one confirmation attempt of `workload` (see the module docstring)."""
    relaunch = relaunchable_baseline(config, baseline)

    def attempt() -> Attempt:
        fresh = run_workloads(config, [workload], relaunch, "baseline config")[workload] if relaunch else None
        rerun = run_workloads(config, [workload], role="rerun")[workload]
        _, table = gate(config, fresh or baseline, rerun)
        runs = (fresh, rerun) if fresh else (rerun,)
        return Attempt(runs=runs, table=table, busy=busy(config, *runs))
    return attempt


def confirm(first: pd.DataFrame, attempt: Callable[[], Attempt], limit: int,
            first_busy: bool = False) -> list[Attempt]:
    """Attempts, one after another, while a first-pass row is unsettled (at most `limit`)."""
    attempts: list[Attempt] = []
    while len(attempts) < limit and undecided(first, attempts, first_busy):
        attempts.append(attempt())
    return attempts


def load_rows(night: str, run: Run, role: str) -> pd.DataFrame:
    """A run's host-load figures as history rows (metric host_<figure>, stat value)."""
    load = run.record.host_load or HostLoadEntry()
    return pd.DataFrame([{"night": night, "role": role, "run_id": run.run_id,
                          "workload": run.workload, "metric": f"host_{name}", "stat": "value",
                          "value": load.figure(name), "unit": "load average" if name == "loadavg_1m" else "fraction",
                          "verdict": ""} for name in LOAD_METRICS])


def night_row(night: str, outcome: str) -> pd.DataFrame:
    """The night's own verdict as a history row (value: its exit code)."""
    return pd.DataFrame([{"night": night, "role": "night", "run_id": "", "workload": "", "metric": "night_verdict",
                          "stat": "value", "value": EXIT_CODES[outcome], "unit": "exit code", "verdict": outcome}])


def judge_workload(config: NightlyConfig, night: str, baseline: Run,
                   run: Run) -> tuple[pd.DataFrame, list[Attempt], pd.DataFrame]:
    """Gate one workload's run, confirm what needs it: (settled verdicts, attempts, history rows)."""
    comparison, first = gate(config, baseline, run)
    first_busy = bool(busy(config, run))
    attempts = confirm(first, confirmation_attempt(config, run.workload, baseline), config.confirmations, first_busy)
    final = settle(first, attempts, first_busy)
    rows = [history_rows(night, comparison, final), load_rows(night, run, "candidate"),
            *(load_rows(night, r, "confirmation") for a in attempts for r in a.runs)]
    return final, attempts, pd.concat(rows, ignore_index=True)


def judge(config: NightlyConfig, night: str, baseline: dict[str, Run],
          runs: dict[str, Run]) -> tuple[pd.DataFrame, str, list[Run]]:
    """Gate and settle every workload; append the night to the history in one transaction.
    Returns (verdict table, night outcome, confirmation runs)."""
    tables, rows, evidence = [], [], []
    for workload, run in runs.items():
        if workload not in baseline:
            raise SparkbenchError(f"no pinned baseline for workload {workload}; re-pin with --pin-baseline")
        final, attempts, history = judge_workload(config, night, baseline[workload], run)
        tables.append(final)
        rows.append(history)
        evidence += [r for a in attempts for r in a.runs]
    table = pd.concat(tables, ignore_index=True)
    outcome = night_outcome(table)
    append_history(config.state_dir, pd.concat([*rows, night_row(night, outcome)], ignore_index=True))
    return table, outcome, evidence


def load_table(runs: list[Run], config: NightlyConfig) -> pd.DataFrame:
    """One row per run of the night: its host-load figures and why it counts as busy, if it does."""
    rows = []
    for run in runs:
        load = run.record.host_load or HostLoadEntry()
        rows.append({"run": run.path.name, "wall_s": load.wall_s,
                     **{name: load.figure(name) for name in LOAD_METRICS},
                     "foreign": describe(load) or "none",
                     "busy": "; ".join(busy_reasons(load, config.busy_limits)) or "no"})
    return pd.DataFrame(rows)


def write_report(config: NightlyConfig, night: str, baseline: dict[str, Run], runs: list[Run],
                 tables: dict[str, pd.DataFrame]) -> Path:
    """The night's own report folder: HTML report with the trend, and the verdict and load tables."""
    from harness.nightly.trend import trend_plot
    from harness.report.report import build_report

    out = config.state_dir / "reports" / night
    out.mkdir(parents=True, exist_ok=False)  # night ids are unique: a folder is never shared
    for name, table in tables.items():
        table.to_csv(out / f"{name}.csv", index=False)
    trend = trend_plot(read_history(config.state_dir), out)
    html, _ = build_report([*baseline.values(), *runs], out, baseline=next(iter(baseline.values())).run_id,
                           extra_images=trend)
    return html


def print_night(table: pd.DataFrame, load: pd.DataFrame, outcome: str, report: Path) -> None:
    with pd.option_context("display.width", 200, "display.max_colwidth", 90, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
        print("\nhost load per run:\n" + load.to_string(index=False))
    flagged = table[table["verdict"].isin([CONFIRMED, INCONCLUSIVE, NOT_CONFIRMED])]
    names = ", ".join(f"{r.workload}:{r.metric} {r.stat} {r.verdict}" for r in flagged.itertuples())
    headline = {"regression": "REGRESSION", "inconclusive": "INCONCLUSIVE", "pass": "pass"}[outcome]
    print(f"verdict: {headline}{' (' + names + ')' if names else ''}; report {report}")


def pin_with_noise(config: NightlyConfig, night: str, runs: dict[str, Run]) -> int:
    """Pin `runs` as the baseline; run each workload `baseline_repeats - 1` more times and keep the
    spread of the repeats as the venue's noise (`harness.nightly.noise`). The repeats are judged by
    a night's busy rule: one taken on a busy host would inflate every threshold scaled by the
    noise, so then nothing is pinned and the pin is inconclusive. Like a night, it prints the host
    load of every run and a verdict line, and writes its report. Returns the exit code."""
    repeats = [runs, *(run_workloads(config, role="noise repeat") for _ in range(config.baseline_repeats - 1))]
    every = [run for repeat in repeats for run in repeat.values()]
    load = load_table(every, config)
    reasons = busy(config, *every)
    report = write_report(config, night, runs, every[len(runs):], {"host_load": load})
    with pd.option_context("display.width", 200, "display.max_colwidth", 90, "display.float_format", "{:.4g}".format):
        print("host load per run:\n" + load.to_string(index=False))
    if reasons:
        print(f"verdict: NOT PINNED, the host was busy ({'; '.join(reasons)}); the baseline is as it was; "
              f"report {report}")
        return EXIT_INCONCLUSIVE
    pairs = [(m, s) for m, s, _ in GATED] + [(m, TAIL_FALLBACK) for m, s, _ in GATED if s in TAIL_QUANTILES]
    noise = {name: measure_noise([r[name] for r in repeats], pairs) for name in runs}
    pin_baseline(config, {name: run.path for name, run in runs.items()})
    write_noise(config.state_dir, noise)
    for name, spreads in noise.items():
        shown = ", ".join(f"{k} {v:.1%}" for k, v in spreads.items()) or "not measured (one repeat)"
        print(f"  {name}: run-to-run spread over {config.baseline_repeats} repeats: {shown}")
    print(f"verdict: pinned {', '.join(runs)} ({len(every)} runs on a quiet host): {config.baseline_file}; "
          f"report {report}")
    return EXIT_PASS


def run_night(config: NightlyConfig, pin: bool = False) -> int:
    """One night end to end; returns the exit code (0 pass, 1 regression, 2 could not run, 3 inconclusive)."""
    night = night_id()
    try:
        baseline = {name: Run.load(path) for name, path in pinned_baseline(config).items()}
        runs = run_workloads(config)
        if pin or not baseline:
            return pin_with_noise(config, night, runs)
        table, outcome, evidence = judge(config, night, baseline, runs)
        load = load_table([*runs.values(), *evidence], config)
        report = write_report(config, night, baseline, [*runs.values(), *evidence],
                              {"verdicts": table, "host_load": load})
    except SparkbenchError as exc:
        print(f"sparkbench nightly: could not run: {exc}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    print_night(table, load, outcome, report)
    return EXIT_CODES[outcome]
