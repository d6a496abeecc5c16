"""The Ray driver of a sweep against a made-up cluster (tests/fakes/ray_cluster.py): where each cell
ran, cells that no live node can place, a node that dies mid-cell, and joining a cluster that asks
for a token."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.config import validated
from harness.errors import SparkbenchError
from harness.sweep import on_ray
from harness.sweep.config import SweepConfig
from harness.sweep.placement import placeable
from harness.sweep.record import NodeEntry
from harness.sweep.sweepdir import CellOutcome, SweepDir
from tests.fakes.ray_cluster import FakeRay

HEAD = {"NodeID": "h", "Alive": True, "Resources": {"CPU": 1.0, "headnode": 1.0}}
WORKER = {"NodeID": "w", "Alive": True, "Resources": {"CPU": 2.0, "workernode": 2.0}}
DEAD_WORKER = {**WORKER, "Alive": False}
ON_WORKER = NodeEntry(ray_node_id="w", ip="127.0.0.3", hostname="bench-1")
REASON = ("Ray could not place the cell's task: no live node has CPU=1, workernode=1 "
          "(waited 30 s, ray.placement_timeout_s)")


@pytest.fixture(autouse=True)
def on_the_worker(monkeypatch):
    monkeypatch.setattr(on_ray, "this_node", lambda: ON_WORKER)


def _sweep(tmp_path: Path) -> SweepDir:
    config = validated(SweepConfig, {
        "results": str(tmp_path), "concurrency": [1, 2],
        "configurations": [{"name": "a", "profile": "cpu-testbed"}, {"name": "b", "profile": "cpu-testbed"}],
        "workloads": [{"name": "synthetic", "options": {"num_prompts": 2}}],
        "ray": {"resources": {"workernode": 1.0}, "placement_timeout_s": 30}}, "sweep config")
    return SweepDir.create(config)


def _complete(configuration, cells, settings, report) -> None:
    for cell, _ in cells:
        report(CellOutcome(cell.cell_id, "complete", None))


def _collect(ray: FakeRay, sweep: SweepDir, runner=_complete) -> dict:
    on_ray.collect(ray, sweep, on_ray.submit(ray, sweep, runner), clock=ray.clock)
    return SweepDir.load(sweep.path).record.cells


def test_each_cell_records_the_node_its_task_ran_on(tmp_path):
    cells = _collect(FakeRay(nodes=[HEAD, WORKER]), _sweep(tmp_path))
    assert {cell.status for cell in cells.values()} == {"complete"}
    assert {cell.node for cell in cells.values()} == {ON_WORKER}


def test_cells_that_no_live_node_can_place_fail_together_once_the_deadline_passes(tmp_path):
    sweep = _sweep(tmp_path)
    ray = FakeRay(nodes=[HEAD, DEAD_WORKER])  # the only node with `workernode` is dead
    cells = _collect(ray, sweep)
    assert [(cell.status, cell.error) for cell in cells.values()] == [("failed", REASON)] * 4
    assert 30 <= ray.now < 30 + 2 * on_ray.POLL_S  # failed at the deadline, not before, not much after
    assert sorted(ray.cancelled) == [0, 1, 2, 3]  # no task is left to start later
    assert sweep.finish() == "incomplete"


def test_a_node_that_joins_before_the_deadline_places_the_waiting_cells(tmp_path):
    ray = FakeRay(nodes=[HEAD], events={20.0: [HEAD, WORKER]})
    cells = _collect(ray, _sweep(tmp_path))
    assert {cell.status for cell in cells.values()} == {"complete"}
    assert ray.cancelled == []


def test_a_node_that_dies_mid_cell_fails_that_cell_with_rays_error_and_the_waiting_ones_at_the_deadline(tmp_path):
    ray = FakeRay(broken={0}, nodes=[HEAD, WORKER])

    def dies_during_the_first_cell(configuration, cells, settings, report):
        if cells[0][0].cell_id == "a.synthetic.c1":
            ray.current_nodes = [HEAD, DEAD_WORKER]
        _complete(configuration, cells, settings, report)

    cells = _collect(ray, _sweep(tmp_path), dies_during_the_first_cell)
    assert cells["a.synthetic.c1"].status == "failed"
    assert cells["a.synthetic.c1"].error == "Ray task: worker died"
    assert [cells[c].error for c in ("a.synthetic.c2", "b.synthetic.c1", "b.synthetic.c2")] == [REASON] * 3


def test_only_a_live_node_with_every_resource_in_total_can_place_a_task():
    wanted = {"CPU": 1.0, "workernode": 1.0}
    assert placeable([HEAD, WORKER], wanted)
    assert not placeable([HEAD, DEAD_WORKER], wanted)
    assert not placeable([{"Alive": True, "Resources": {"CPU": 0.5, "workernode": 4.0}}], wanted)


class AuthenticationError(Exception):
    pass


def _ray_refusing(error: Exception) -> SimpleNamespace:
    def init(**_):
        raise error
    return SimpleNamespace(init=init, exceptions=SimpleNamespace(AuthenticationError=AuthenticationError))


def _refused_by_token() -> ConnectionError:
    """As Ray 2.60 fails a driver without the token: a ConnectionError naming only the address."""
    try:
        raise RuntimeError("Failed to connect to GCS. Last connection error: ray.exceptions.AuthenticationError: "
                           "RPC error: InvalidAuthToken: Authentication token is missing or incorrect")
    except RuntimeError as exc:
        try:
            raise ConnectionError("Failed to connect to Ray cluster at 127.0.0.2:6379") from exc
        except ConnectionError as wrapped:
            return wrapped


@pytest.mark.parametrize("error, hinted", [
    (_refused_by_token(), True),
    (AuthenticationError("Token authentication is enabled but no authentication token was found"), True),
    (ConnectionError("Failed to connect to Ray cluster at 127.0.0.2:6379"), False),
])
def test_joining_a_cluster_that_asks_for_a_token_says_how_to_give_it(tmp_path, error, hinted):
    with pytest.raises(SparkbenchError) as failed:
        on_ray.connect(_ray_refusing(error), "127.0.0.2:6379", _sweep(tmp_path).config.ray)
    message = str(failed.value)
    assert message.startswith("--ray 127.0.0.2:6379: cannot join the Ray cluster (")
    assert ("set RAY_AUTH_MODE=token" in message) == hinted
