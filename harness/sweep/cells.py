"""Running cells through the ordinary run path (`harness.session`), wherever they execute.

`run_configuration` attaches to (or launches) one configuration's server once and runs the given
cells on it in order; each cell is one `RunRequest` run by `harness.session.run`, whose run directory
lands in the cell's own folder. A cell that already has an unfinished run there is continued (`--resume` of single
runs), never started afresh. A failing cell becomes a `CellOutcome` and the next cell runs.
The same function runs locally and inside a Ray task (`harness.sweep.on_ray`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from harness.errors import SparkbenchError
from harness.records.manifest import RunRecord
from harness.records.rundir import load_record
from harness.run.signals import ended_by_signal
from harness.sweep.config import Configuration, SweepConfig
from harness.sweep.sweepdir import COMPLETE, Cell, CellOutcome

Report = Callable[[CellOutcome], None]


class SweepStopped(SparkbenchError):
    """Ctrl-C or SIGTERM ended a cell: the sweep stops too (`--resume` continues it)."""

    exit_code = 1


def run_configuration(configuration: Configuration, cells: list[tuple[Cell, Path]], settings: SweepConfig,
                      report: Report) -> None:
    """Run `cells` (each with the folder of its run directory) on the configuration's server.

    A server that cannot be reached or launched fails every cell given, each recorded.
    """
    from harness.session import open_target

    remaining = list(cells)
    try:
        with open_target(configuration) as target:
            while remaining:
                cell, root = remaining.pop(0)
                outcome = run_cell(target, configuration, cell, root, settings)
                report(outcome)
                if outcome.status != COMPLETE and ended_by_signal(outcome.error):
                    raise SweepStopped(f"cell {cell.cell_id}: {outcome.error}")
    except SweepStopped:
        raise
    except (SparkbenchError, OSError) as exc:
        for cell, root in remaining:
            report(CellOutcome(cell.cell_id, "failed", _run_dir(root), f"server {configuration.name}: {exc}"))


def run_cell(target, configuration: Configuration, cell: Cell, root: Path, settings: SweepConfig) -> CellOutcome:
    """One cell: a new run in `root`, or the continuation of the unfinished run there (a complete
    run that the guard failed afterwards is measured again, as a new run beside it)."""
    from harness import session
    from harness.request import RunRequest, TargetSpec

    existing = _run_dir(root)
    record = load_record(Path(existing)) if existing else None
    if record is not None and _finished(record):
        return CellOutcome(cell.cell_id, COMPLETE, existing)
    resume = Path(existing) if record is not None and record.seen_status != COMPLETE else None
    print(f"sweep: cell {cell.cell_id}{' (resumed)' if resume else ''}", file=sys.stderr, flush=True)
    try:
        request = RunRequest(target=TargetSpec.part_of(configuration), workload=cell.workload,
                             options=settings.cell_settings(cell.concurrency, cell.request_rate), guard=settings.guard,
                             label=cell.label, resume=resume, results=root)
        run = session.run(request, target)
    except (SparkbenchError, OSError) as exc:
        return CellOutcome(cell.cell_id, _failed_status(root), _run_dir(root), str(exc).splitlines()[0])
    return CellOutcome(cell.cell_id, run.status, str(run.path))


def _finished(record: RunRecord) -> bool:
    """Whether a cell's run is done for good: complete, and not failed by the guard after the fact
    (a synthetic run whose prompts hit the prefix cache); such a run is measured again, afresh."""
    return record.seen_status == COMPLETE and record.post_run_ok


def _run_dir(root: Path) -> str | None:
    """The run directory in a cell's folder (the latest, should there be several), or None."""
    found = sorted(path.parent for path in Path(root).glob("*/manifest.json"))
    return str(found[-1]) if found else None


def _failed_status(root: Path) -> str:
    """How a cell that raised ended: `interrupted` when its run says so (stopped, server gone),
    else `failed` (no run began, or the run failed, or it ended and then failed the guard)."""
    existing = _run_dir(root)
    seen = None if existing is None else load_record(Path(existing)).seen_status
    return "interrupted" if seen in ("interrupted", "stale") else "failed"
