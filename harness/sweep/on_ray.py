"""Cells as Ray tasks (`sparkbench sweep --ray ADDRESS`); Ray is imported only here.

Each unfinished cell is one task that asks Ray for the resources the config names (`ray:` with
`num_cpus`, `num_gpus`, custom `resources`), attaches to or launches its configuration's server,
and runs the cell through the ordinary run path (`harness.sweep.cells.run_configuration`). The
task writes the cell's run directory into the sweep folder itself, so every node must see that
folder at the same path (a shared filesystem); it returns only the small `CellOutcome`, and the
driver alone writes the sweep manifest, as each task ends.

Cells attached to one running server must not overlap (their requests would share it), so each
such cell's task waits for the previous cell on that server: Ray runs them one after another.
Cells that launch their server from a profile are independent and run as resources allow.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from harness.sweep.cells import run_configuration
from harness.sweep.config import RayOptions, SweepConfig
from harness.sweep.sweepdir import Cell, CellOutcome, SweepDir

LOCAL = "local"  # --ray local: a private single-node cluster started for this sweep


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise SparkbenchError("--ray needs Ray: install the `ray` extra (pip install 'sparkbench[ray]', "
                              "or `make setup-ray` in a clone)") from exc
    return ray


def connect(ray: Any, address: str, options: RayOptions) -> None:
    """Join the cluster at `address`; `local` starts a private one on loopback with `local_cpus` CPUs."""
    try:
        if address == LOCAL:
            ray.init(address="local", num_cpus=options.local_cpus, include_dashboard=False,
                     _node_ip_address="127.0.0.1", logging_level="warning")
        else:
            ray.init(address=address, logging_level="warning")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise SparkbenchError(f"--ray {address}: cannot join the Ray cluster ({str(exc).splitlines()[0]})") from exc


def run_cell_task(cell: Cell, root: str, settings: SweepConfig, runner, after: Any = None) -> CellOutcome:
    """The body of one cell's task: the cell through `runner` (run_configuration); `after` is the
    previous cell on the same server, which Ray has waited for before calling this."""
    outcomes: list[CellOutcome] = []
    try:
        runner(cell.configuration, [(cell, Path(root))], settings, outcomes.append)
    except Exception as exc:  # the task reports, never raises: the driver records every cell
        return CellOutcome(cell.cell_id, "failed", None, f"{type(exc).__name__}: {exc}")
    return outcomes[0] if outcomes else CellOutcome(cell.cell_id, "failed", None, "the cell reported nothing")


def submit(ray: Any, sweep: SweepDir, runner) -> dict[Any, Cell]:
    """One task per unfinished cell, chained per attached server; {object ref: cell}."""
    options = sweep.config.ray
    task = ray.remote(run_cell_task).options(num_cpus=options.num_cpus, num_gpus=options.num_gpus,
                                             resources=dict(options.resources), max_retries=0)
    pending, last_on_server = {}, {}
    for cell in sweep.unfinished():
        server = cell.configuration.server if cell.configuration.attached else None
        ref = task.remote(cell, str(sweep.cell_root(cell)), sweep.config, runner, last_on_server.get(server))
        if server is not None:
            last_on_server[server] = ref
        pending[ref] = cell
    return pending


def collect(ray: Any, sweep: SweepDir, pending: dict[Any, Cell]) -> None:
    """Record each cell's outcome as its task ends; a task Ray itself lost is a failed cell."""
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        cell = pending.pop(done[0])
        try:
            outcome = ray.get(done[0])
        except Exception as exc:  # a worker that died, a task Ray could not run
            outcome = CellOutcome(cell.cell_id, "failed", None, f"Ray task: {str(exc).splitlines()[0]}")
        print(f"sweep: cell {cell.cell_id} {outcome.status}", file=sys.stderr, flush=True)
        sweep.record_outcome(outcome)


def run_on_ray(sweep: SweepDir, address: str, runner=run_configuration) -> None:
    """Every unfinished cell as a Ray task on the cluster at `address`; returns once all have ended."""
    ray = import_ray()
    connect(ray, address, sweep.config.ray)
    try:
        sweep.begin({"kind": "ray", "address": address, **sweep.config.ray.model_dump(exclude={"address"})})
        collect(ray, sweep, submit(ray, sweep, runner))
    finally:
        ray.shutdown()
