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

Each task reports the node it ran on (Ray's node id, its address, the host), kept in the cell's
entry of `sweep.json`. A task that Ray loses (its node died) is a failed cell. Tasks that no live
node can place (`harness.sweep.placement`) fail once that has lasted `ray.placement_timeout_s`,
all of them together: they ask for the same resources.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from harness.sweep.cells import run_configuration
from harness.sweep.config import RayOptions, SweepConfig
from harness.sweep.placement import PlacementWatch
from harness.sweep.record import NodeEntry
from harness.sweep.sweepdir import Cell, CellOutcome, SweepDir

LOCAL = "local"  # --ray local: a private single-node cluster started for this sweep
POLL_S = 1.0  # how often the driver looks at the nodes while no task ends
TOKEN_HINT = ("the cluster asks for its token: set RAY_AUTH_MODE=token and give the token "
              "(~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN); docs/sweeps.md")


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
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.AuthenticationError) as exc:
        hint = f"; {TOKEN_HINT}" if _token_refused(exc) else ""
        raise SparkbenchError(f"--ray {address}: cannot join the Ray cluster "
                              f"({str(exc).splitlines()[0]}){hint}") from exc


def _token_refused(exc: BaseException | None) -> bool:
    """Whether joining failed on token authentication: Ray wraps that error (AuthenticationError,
    InvalidAuthToken) in a ConnectionError that names only the address, so its chain is read."""
    while exc is not None:
        if type(exc).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def run_cell_task(cell: Cell, root: str, settings: SweepConfig, runner, after: Any = None) -> CellOutcome:
    """The body of one cell's task: the cell through `runner` (run_configuration); `after` is the
    previous cell on the same server, which Ray has waited for before calling this."""
    outcomes: list[CellOutcome] = []
    try:
        runner(cell.configuration, [(cell, Path(root))], settings, outcomes.append)
    except Exception as exc:  # the task reports, never raises: the driver records every cell
        return CellOutcome(cell.cell_id, "failed", None, f"{type(exc).__name__}: {exc}")
    return outcomes[0] if outcomes else CellOutcome(cell.cell_id, "failed", None, "the cell reported nothing")


def this_node() -> NodeEntry:
    """The Ray node this task runs on: its id, the address it joined with, the host's name."""
    ray = import_ray()
    return NodeEntry(ray_node_id=ray.get_runtime_context().get_node_id(), ip=ray.util.get_node_ip_address(),
                     hostname=socket.gethostname())


def cell_task(cell: Cell, root: str, settings: SweepConfig, runner, after: Any = None) -> CellOutcome:
    """One cell's Ray task: `run_cell_task`, its outcome naming the node it ran on."""
    return replace(run_cell_task(cell, root, settings, runner, after), node=this_node())


def submit(ray: Any, sweep: SweepDir, runner) -> dict[Any, Cell]:
    """One task per unfinished cell, chained per attached server; {object ref: cell}."""
    options = sweep.config.ray
    task = ray.remote(cell_task).options(num_cpus=options.num_cpus, num_gpus=options.num_gpus,
                                             resources=dict(options.resources), max_retries=0)
    pending, last_on_server = {}, {}
    for cell in sweep.unfinished():
        server = cell.configuration.server if cell.configuration.attached else None
        ref = task.remote(cell, str(sweep.cell_root(cell)), sweep.config, runner, last_on_server.get(server))
        if server is not None:
            last_on_server[server] = ref
        pending[ref] = cell
    return pending


def collect(ray: Any, sweep: SweepDir, pending: dict[Any, Cell], clock: Callable[[], float] = time.monotonic) -> None:
    """Record each cell's outcome as its task ends; a task Ray itself lost is a failed cell. While no
    task ends the driver looks at the nodes: once no live node could place a task for the whole
    `ray.placement_timeout_s`, every cell still waiting fails with that reason and its task is cancelled."""
    watch = PlacementWatch(sweep.config.ray, clock)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
        if done:
            cell = pending.pop(done[0])
            _record(sweep, _outcome(ray, cell, done[0]))
        elif watch.expired(ray.nodes()):
            print(f"sweep: {watch.reason()}", file=sys.stderr, flush=True)
            for ref, cell in list(pending.items()):
                ray.cancel(ref, force=True)
                _record(sweep, CellOutcome(cell.cell_id, "failed", None, watch.reason()))
            pending.clear()


def _outcome(ray: Any, cell: Cell, ref: Any) -> CellOutcome:
    try:
        return ray.get(ref)
    except Exception as exc:  # a worker that died, a task Ray could not run
        return CellOutcome(cell.cell_id, "failed", None, f"Ray task: {str(exc).splitlines()[0]}")


def _record(sweep: SweepDir, outcome: CellOutcome) -> None:
    print(f"sweep: cell {outcome.cell_id} {outcome.status}", file=sys.stderr, flush=True)
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
