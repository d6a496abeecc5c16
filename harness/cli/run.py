"""`sparkbench run NAME` for every registered workload, and `sparkbench check`: each builds a
`RunRequest` from its options and hands it to `harness.session`.

The shared options come from the models once (`TargetSpec`, `RunSettings`, `RunSwitches`); each
workload's own options come from its config model. A workload registered in `workloads.registry`
gets its command here without a line of its own.
"""

from __future__ import annotations

from typing import Any

import typer

from harness.cli.app import app, run_app
from harness.cli.binding import Group, bind, given
from harness.config import validated
from harness.request import RunRequest, RunSwitches, TargetSpec
from harness.run.options import RunSettings
from workloads.registry import WORKLOADS, WorkloadEntry

SHARED = {"target": Group(TargetSpec), "options": Group(RunSettings), "switches": Group(RunSwitches)}


def request_of(workload: str, options: dict[str, Any], target: dict[str, Any], run_options: dict[str, Any],
               switches: dict[str, Any]) -> RunRequest:
    """The request the options state; bad input is one line per problem, before any server starts."""
    data = {**switches, "target": target, "options": given(run_options),
            "workload": {"name": workload, "options": given(options)}}
    return validated(RunRequest, data, "run")


def add_run_command(commands: typer.Typer, name: str, registered: WorkloadEntry) -> None:
    """`sparkbench run NAME`: the workload's own options (its config's fields) and the shared ones."""

    @bind(workload=Group(registered.config), **SHARED)
    def command(workload: dict, target: dict, options: dict, switches: dict) -> None:
        from harness.analysis.shapes import compare_by_shape
        from harness.analysis.tables import format_repetitions, format_run_summary
        from harness.report.category_section import category_blocks, format_categories
        from harness.session import run_repeated

        runs = run_repeated(request_of(name, workload, target, options, switches))
        print("\n".join(format_run_summary(run) for run in runs))
        if len(runs) > 1:
            print(format_repetitions(runs))
        by_category = format_categories(category_blocks(compare_by_shape(runs)))  # Spec-Bench's tasks
        if by_category:
            print(f"\n{by_category}\nspeed-ups per category against a plain run: sparkbench compare PLAIN_RUN "
                  f"{runs[-1].path}")

    command.__doc__ = registered.description
    commands.command(name)(command)


for _name, _entry in WORKLOADS.items():
    add_run_command(run_app, _name, _entry)


@app.command("check")
@bind(target=Group(TargetSpec, skip=frozenset({"served_model"})),
      options=Group(RunSettings, skip=frozenset(RunSettings.model_fields) - {"api_key"}),
      switches=Group(RunSwitches, skip=frozenset(RunSwitches.model_fields) - {"allow_buffered"}))
def check(target: dict, options: dict, switches: dict) -> None:
    """Run the configuration guard alone against a running server; exit 0 only if every check passes."""
    from harness.errors import SparkbenchError
    from harness.session import check as guard_only

    if not target.get("profile") or not target.get("server"):
        raise SparkbenchError("check: give --profile (what the server must run) and --server (where it runs)")
    request = validated(RunRequest, {**switches, "target": target, "options": given(options)}, "check")
    print("\n".join(guard_only(request).format_lines()))
