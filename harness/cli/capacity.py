"""`sparkbench capacity NAME`: the highest arrival rate whose SLO attainment stays at or above a
target, for every registered workload. Each trial is an ordinary open-loop run (`harness.session`)
of the same request at another rate, on one server held open for the whole search
(`harness.sweep.capacity_dir`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from harness.cli.app import app
from harness.cli.binding import Group, bind, given
from harness.cli.run import SHARED, request_of
from harness.config import validated
from harness.errors import SparkbenchError
from harness.request import RunRequest, RunSwitches
from harness.run.options import RECORDED, RunSettings
from harness.sweep.capacity_settings import CapacitySettings
from workloads.registry import WORKLOADS, WorkloadEntry

capacity_app = typer.Typer(help="Search the highest arrival rate that keeps SLO attainment at a target.",
                           no_args_is_help=True, rich_markup_mode=None)
app.add_typer(capacity_app, name="capacity")
# The search sets the rate of each trial, and where its runs land.
GROUPS = {**SHARED, "options": Group(RunSettings, skip=frozenset({"request_rate", "schedule", "show_progress"})),
          "switches": Group(RunSwitches, skip=frozenset({"label", "resume", "results"})),
          "search": Group(CapacitySettings, overrides=True)}


def find_capacity(request: RunRequest, settings: CapacitySettings) -> tuple[Path, Any]:
    """Bisect over trial runs of `request` at each rate, on one server; (folder, outcome)."""
    from harness import session
    from harness.run.embedded import default_profile
    from harness.sweep.capacity_dir import run_search
    from harness.sweep.trial_plan import TrialPlan

    if not request.options.slo:
        raise SparkbenchError("capacity: give the SLO targets to keep, e.g. --slo ttft=500ms,tpot=50ms,e2e=30s")
    launched = default_profile(request.workload.name, request.target.model)  # with neither server nor profile
    facts = {"configuration": request.target.profile or request.target.server or launched,
             "workload": request.workload.name, "slo": request.options.slo,
             "options": request.options.model_dump(mode="json", include=set(RECORDED))}
    with session.open_target(request.target, request.workload.name) as target:
        def run_trial(plan: TrialPlan, folder: Path) -> Path:
            options = RunSettings.part_of(request.options, request_rate=plan.rate, arrival_seed=plan.arrival_seed,
                                          duration_s=plan.duration_s, warmup_window_s=plan.warmup_window_s)
            trial = request.model_copy(update={"options": options, "results": folder,
                                               "label": f"r={plan.rate:g}/s"})
            return session.run(trial, target).path

        return run_search(settings, run_trial, facts, request.options)


def add_capacity_command(commands: typer.Typer, name: str, registered: WorkloadEntry) -> None:
    @bind(workload=Group(registered.config), **GROUPS)
    def command(workload: dict, target: dict, options: dict, switches: dict, search: dict) -> None:
        settings = validated(CapacitySettings, given(search), "capacity")
        # Validated as an open loop at the floor's rate; each trial then sets its own.
        request = request_of(name, workload, target, {**options, "show_progress": False,
                                                      "request_rate": settings.floor_rps}, switches)
        folder, found = find_capacity(request, settings)
        print(f"{found.sentence()}\ncapacity: {folder}\nreport: {folder / 'report.html'}")
        raise typer.Exit(1 if found.status == "out of trials" else 0)

    command.__doc__ = (f"{registered.description} Trial runs at rates bisected between --floor-rps and "
                       "--ceiling-rps; exit 0 with a capacity (or its bound), 1 when the trials ran out. "
                       "The capacity is a rate offered (a drawn schedule offers its own rate, not exactly "
                       "the one asked) at which --confirmations runs, each on an arrival schedule of its own "
                       "(seeds derived from --arrival-seed), met --attainment with the server keeping up; it "
                       "depends on the SLO, the target, the workload's lengths, --burstiness, --max-concurrency "
                       "and the trial length (--trial-requests measured after a warm-up of 20 service "
                       "times), and is given with the spread of those runs and its bracket.")
    commands.command(name)(command)


for _name, _entry in WORKLOADS.items():
    add_capacity_command(capacity_app, _name, _entry)
