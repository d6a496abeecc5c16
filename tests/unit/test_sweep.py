"""`sparkbench sweep`: the config, the local driver with a fake cell runner, resume, and the Ray
driver's task graph against a fake Ray module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.sweep import _ratio, curves, saturation_steps, speedups
from harness.config import validated
from harness.errors import SparkbenchError
from harness.sweep import on_ray
from harness.sweep.config import SweepConfig, config_from_flags
from harness.sweep.outputs import write_outputs
from harness.sweep.run import execute
from harness.sweep.sweepdir import SWEEP_MANIFEST, CellOutcome, SweepDir
from tests.fakes.full_disk import filling_at
from tests.fakes.ray_cluster import FakeRay

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`

SYNTHETIC = {"name": "synthetic", "options": {"num_prompts": 4, "input_tokens": 32, "output_tokens": 8}}


def _config(tmp_path: Path, **changes) -> SweepConfig:
    data = {"results": str(tmp_path), "concurrency": [1, 2, 4],
            "configurations": [{"name": "base", "server": "http://127.0.0.1:30000"},
                               {"name": "fast", "server": "http://127.0.0.1:30001"}],
            "workloads": [SYNTHETIC], **changes}
    return validated(SweepConfig, data, "sweep config")


def _fake_run(root: Path, cell, throughput: float, tpot: float) -> str:
    """A complete run directory as the run path leaves it: manifest and long summary."""
    path = root / f"run-{cell.cell_id}"
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"run_id": path.name, "workload": {"name": "synthetic"},
                                                    "status": "complete", "reduced_scale": False}))
    rows = [("output_throughput", "value", throughput, "tok/s"), ("tpot_ms", "p50", tpot, "ms"),
            ("e2e_ms", "p95", tpot * 10, "ms"), ("ttft_ms", "p50", 5.0, "ms")]
    pd.DataFrame([(path.name, "synthetic", *row) for row in rows],
                 columns=["run_id", "workload", "metric", "stat", "value", "unit"]).to_csv(path / "summary.csv",
                                                                                             index=False)
    return str(path)


class FakeRunner:
    """Runs nothing: each cell 'measures' throughput that flattens past concurrency 2 while TPOT
    climbs; the cells named in `failing` fail."""

    def __init__(self, failing: set[str] = frozenset()) -> None:
        self.failing, self.calls = set(failing), []

    def __call__(self, configuration, cells, settings, report) -> None:
        self.calls.append([cell.cell_id for cell, _ in cells])
        for cell, root in cells:
            if cell.cell_id in self.failing:
                report(CellOutcome(cell.cell_id, "failed", None, "cannot reach the server"))
                continue
            speed = 2.0 if configuration.name == "fast" else 1.0
            throughput = speed * 100 * min(cell.concurrency, 2) * (1.05 if cell.concurrency == 4 else 1.0)
            report(CellOutcome(cell.cell_id, "complete", _fake_run(root, cell, throughput, 10.0 * cell.concurrency)))


def test_config_names_each_problem_in_one_line(tmp_path):
    with pytest.raises(SparkbenchError) as bad:
        _config(tmp_path, concurrency=[2, 2], colour="red")
    lines = str(bad.value).splitlines()
    assert any("concurrency: concurrency levels must be distinct" in line for line in lines)
    assert any("unknown keys colour" in line for line in lines)
    with pytest.raises(SparkbenchError, match="baseline 'nope' is not a configuration"):
        _config(tmp_path, baseline="nope")
    with pytest.raises(SparkbenchError, match="configuration names must differ"):
        _config(tmp_path, configurations=[{"profile": "cpu-testbed"}, {"profile": "cpu-testbed"}])
    with pytest.raises(SparkbenchError, match="synthetic options: unknown keys limit"):
        _config(tmp_path, workloads=[{"name": "synthetic", "options": {"limit": 3}}])


def test_flags_pair_servers_with_profiles_and_name_configurations(tmp_path):
    config = config_from_flags(["http://10.0.0.1:30000", "http://10.0.0.2:30000"], ["spark-baseline", "spark-mtp"],
                               "synthetic", {"num_prompts": 4}, concurrency=[1, 8], results=tmp_path)
    assert [c.name for c in config.configurations] == ["spark-baseline", "spark-mtp"]
    assert config.configurations[1].server == "http://10.0.0.2:30000"
    assert config_from_flags(["http://10.0.0.1:30000"], [], "gsm8k", {}).configurations[0].name == "10.0.0.1_30000"
    with pytest.raises(SparkbenchError, match="give one profile per server"):
        config_from_flags(["http://h:1"], ["a", "b"], "synthetic", {})


def test_a_failing_cell_is_recorded_and_the_sweep_goes_on(tmp_path):
    sweep = SweepDir.create(_config(tmp_path))
    runner = FakeRunner(failing={"base.synthetic.c2"})
    assert execute(sweep, runner=runner) == "incomplete"
    assert runner.calls == [["base.synthetic.c1", "base.synthetic.c2", "base.synthetic.c4"],
                            ["fast.synthetic.c1", "fast.synthetic.c2", "fast.synthetic.c4"]]
    cells = SweepDir.load(sweep.path).record.cells
    failed = cells["base.synthetic.c2"]
    assert (failed.status, failed.run_dir, failed.error) == ("failed", None, "cannot reach the server")
    assert cells["fast.synthetic.c4"].run_dir == "cells/fast.synthetic.c4/run-fast.synthetic.c4"
    summary = pd.read_csv(sweep.path / "summary.csv")
    assert sorted(summary["cell_id"].unique()) == sorted(set(cells) - {"base.synthetic.c2"})


def test_resume_runs_only_the_unfinished_cells(tmp_path):
    sweep = SweepDir.create(_config(tmp_path))
    execute(sweep, runner=FakeRunner(failing={"base.synthetic.c2", "fast.synthetic.c1"}))
    again = FakeRunner()
    assert execute(SweepDir.load(sweep.path), runner=again) == "complete"
    assert again.calls == [["base.synthetic.c2"], ["fast.synthetic.c1"]]
    assert len(SweepDir.load(sweep.path).record.runs) == 2


def test_outputs_state_speedup_and_saturation(tmp_path):
    sweep = SweepDir.create(_config(tmp_path))
    execute(sweep, runner=FakeRunner())
    html, tables, sentences = write_outputs(sweep)
    speedup = tables["speedup"].set_index("concurrency")
    assert speedup["throughput_speedup"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert speedup["tpot_speedup"].tolist() == pytest.approx([0.0, 0.0, 0.0])
    assert sentences[0].startswith("base / synthetic: saturates at concurrency 2")
    assert (sweep.path / "plots" / "sweep_throughput_vs_tpot.png").exists()
    assert "saturates at concurrency 2" in html.read_text()


def test_a_disk_that_fills_while_sweep_json_is_saved_keeps_the_last_one_whole(tmp_path, monkeypatch):
    """The start and the first cell are saved; the disk fills writing the second cell's outcome:
    one line says so, and sweep.json is the one saved before it, with nothing left beside it."""
    sweep = SweepDir.create(_config(tmp_path))
    filling_at(monkeypatch, SWEEP_MANIFEST, room=2)
    with pytest.raises(SparkbenchError) as stopped:
        execute(sweep, runner=FakeRunner())
    monkeypatch.undo()
    assert str(stopped.value) == f"cannot write {sweep.path / SWEEP_MANIFEST}: disk full (no space left on device)"
    saved = SweepDir.load(sweep.path).record
    assert saved.status == "running" and [c.status for c in saved.cells.values()].count("complete") == 1
    assert not [p for p in sweep.path.rglob("*") if p.is_file() and SWEEP_MANIFEST in p.name and
                p.name != SWEEP_MANIFEST]


def test_ray_tasks_chain_the_cells_of_one_attached_server_and_record_lost_tasks(tmp_path, monkeypatch):
    monkeypatch.setattr(on_ray, "this_node", lambda: None)
    shared = {"name": "again", "server": "http://127.0.0.1:30000"}
    config = _config(tmp_path, concurrency=[1, 2], ray={"num_gpus": 1.0, "resources": {"h200": 1.0}},
                     configurations=[{"name": "base", "server": "http://127.0.0.1:30000"}, shared,
                                     {"name": "launched", "profile": "cpu-testbed"}])
    sweep = SweepDir.create(config)
    ray = FakeRay(broken={5})
    on_ray.collect(ray, sweep, on_ray.submit(ray, sweep, FakeRunner()))
    assert ray.options == {"num_cpus": 1.0, "num_gpus": 1.0, "resources": {"h200": 1.0}, "max_retries": 0}
    after = [args[-1] for _, args in ray.tasks]
    assert after == [None, 0, 1, 2, None, None]  # one server: one chain; launched cells are independent
    cells = SweepDir.load(sweep.path).record.cells
    assert cells["launched.synthetic.c2"].status == "failed"
    assert cells["launched.synthetic.c2"].error == "Ray task: worker died"
    assert cells["again.synthetic.c2"].status == "complete"


def test_a_task_whose_runner_raises_reports_a_failed_cell(tmp_path):
    def broken(configuration, cells, settings, report):
        raise ValueError("a bug")

    sweep = SweepDir.create(_config(tmp_path))
    cell = sweep.unfinished()[0]
    outcome = on_ray.run_cell_task(cell, str(sweep.cell_root(cell)), sweep.config, broken)
    assert outcome == CellOutcome(cell.cell_id, "failed", None, "ValueError: a bug")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "sweep", *args], capture_output=True, text=True,
                          timeout=60)


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text("configurations: [{server: 'http://h:1'}]\nworkloads: [{name: synthetic}]\nconcurrency: ['8']\n")
    done = _cli("--config", str(config))
    assert done.returncode == 2
    assert done.stderr.strip() == f"sparkbench: sweep config {config}: concurrency.0: Input should be a valid integer"
    done = _cli("--config", str(config), "--concurrency", "1,2")
    assert (done.returncode, done.stderr.strip()) == (2, "sparkbench: give the matrix in the --config file or "
                                                         "with flags, not both")
    done = _cli("--resume", str(tmp_path), "--concurrency", "1")
    assert done.returncode == 2 and "--resume continues a sweep as it was declared" in done.stderr


def test_cli_records_unreachable_servers_as_failed_cells_and_exits_1(tmp_path):
    done = _cli("--server", "http://127.0.0.1:9", "--concurrency", "1,2", "--num-prompts", "2",
                "--results", str(tmp_path))
    assert done.returncode == 1, done.stderr
    sweep = SweepDir.load(next(tmp_path.iterdir()))
    assert [c.status for c in sweep.record.cells.values()] == ["failed", "failed"]
    assert "cannot reach http://127.0.0.1:9" in done.stdout
    assert done.stdout.splitlines()[-1] == ("sweep: 2 of 2 cells did not complete; "
                                            f"continue with: sparkbench sweep --resume {sweep.path}")


def _fake_server(monkeypatch, outcomes: dict[str, CellOutcome] | None = None, refuse: str | None = None) -> list:
    """open_target replaced: the server 'starts' (or is refused with `refuse`);
    run_cell returns the given outcome per cell, complete otherwise. Returns the cells run."""
    from contextlib import contextmanager

    import harness.session as session
    from harness.sweep import cells as cells_module

    ran = []

    @contextmanager
    def open_target(spec):
        if refuse:
            raise SparkbenchError(refuse)
        yield object()

    def run_cell(target, configuration, cell, root, settings):
        ran.append(cell.cell_id)
        return (outcomes or {}).get(cell.cell_id, CellOutcome(cell.cell_id, "complete", None))

    monkeypatch.setattr(session, "open_target", open_target)
    monkeypatch.setattr(cells_module, "run_cell", run_cell)
    return ran


def test_ctrl_c_during_a_cell_stops_the_sweep_after_recording_it(tmp_path, monkeypatch):
    from harness.sweep.cells import SweepStopped

    stopped = CellOutcome("base.synthetic.c2", "interrupted", None,
                          "run interrupted after 1 of 4 requests (stop asked (SIGINT); the requests in flight "
                          "were recorded)")
    ran = _fake_server(monkeypatch, {"base.synthetic.c2": stopped})
    sweep = SweepDir.create(_config(tmp_path))
    with pytest.raises(SweepStopped):
        execute(sweep)
    assert ran == ["base.synthetic.c1", "base.synthetic.c2"]
    statuses = {k: v.status for k, v in SweepDir.load(sweep.path).record.cells.items()}
    assert statuses["base.synthetic.c2"] == "interrupted" and statuses["base.synthetic.c4"] == "pending"


def test_a_server_that_cannot_start_fails_its_cells_and_the_next_configuration_runs(tmp_path, monkeypatch):
    ran = _fake_server(monkeypatch, refuse="guard: speculative algorithm is None, expected NEXTN")
    sweep = SweepDir.create(_config(tmp_path, configurations=[{"name": "base", "profile": "cpu-testbed"},
                                                              {"name": "fast", "profile": "cpu-testbed-ngram"}]))
    assert execute(sweep) == "incomplete" and ran == []
    cells = SweepDir.load(sweep.path).record.cells
    assert {c.status for c in cells.values()} == {"failed"}
    assert cells["fast.synthetic.c4"].error == "server fast: guard: speculative algorithm is None, expected NEXTN"


def test_report_of_a_sweep_folder_writes_the_sweep_report_inside_it(tmp_path):
    sweep = SweepDir.create(_config(tmp_path))
    execute(sweep, runner=FakeRunner())
    done = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(sweep.path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"report: {sweep.path / 'report.html'}"
    assert "Speed-up over the baseline by concurrency" in (sweep.path / "report.md").read_text()


def _cell_run_dir(root: Path, status: str, post_run_ok: bool = True) -> Path:
    path = root / "20261130T000000.000000Z-synthetic-1"
    path.mkdir(parents=True)
    manifest = {"run_id": path.name, "workload": {"name": "synthetic", "salt": 77}, "status": status,
                "workload_config": {"num_prompts": 4, "input_tokens": 32, "output_tokens": 8, "seed": 0, "salt": None},
                "guard": {"post_run": {"ok": post_run_ok}}}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.mark.parametrize("status, post_run_ok, resumed, sent", [
    ("complete", True, False, False),  # done: nothing is sent again
    ("interrupted", True, True, True),  # continued with single-run resume, its salt kept
    ("complete", False, False, True),  # failed the guard afterwards: measured again, afresh
])
def test_a_cell_continues_or_redoes_the_run_in_its_folder(tmp_path, monkeypatch, status, post_run_ok, resumed, sent):
    import harness.session as session
    from harness.sweep.cells import run_cell

    calls = []
    monkeypatch.setattr(session, "run", lambda request, target:
                        calls.append((session.workload_config(request), request.resume, request.label)) or
                        type("Done", (), {"status": "complete", "path": request.results / "new"})())
    sweep = SweepDir.create(_config(tmp_path))
    cell = sweep.unfinished()[1]
    existing = _cell_run_dir(sweep.cell_root(cell), status, post_run_ok)
    target = type("Target", (), {"base_url": "http://h:1", "reduced": False, "model_dir": None})()
    outcome = run_cell(target, sweep.config.configurations[0], cell, sweep.cell_root(cell), sweep.config)
    assert outcome.status == "complete" and bool(calls) == sent
    if sent:
        config, resume, label = calls[0]
        assert resume == (existing if resumed else None) and label == "base c=2"
        assert config.salt == (77 if resumed else None)


def sweep_summary(cells: dict[tuple[str, int], tuple[float, float]]) -> pd.DataFrame:
    """A sweep's long summary: (configuration, concurrency) -> (output tok/s, TPOT p50 ms), one workload;
    the other stats of the same metrics sit beside them and must not be read."""
    rows = []
    for (configuration, concurrency), (tok_s, tpot) in cells.items():
        key = {"configuration": configuration, "workload": "w", "concurrency": concurrency}
        rows += [{**key, "metric": "output_throughput", "stat": "value", "value": tok_s},
                 {**key, "metric": "tpot_ms", "stat": "p50", "value": tpot},
                 {**key, "metric": "tpot_ms", "stat": "p95", "value": 10 * tpot},
                 {**key, "metric": "tpot_ms", "stat": "mean", "value": 5 * tpot}]
    return pd.DataFrame(rows)


def test_speedups_and_steps_are_exact_ratios_minus_one_per_curve_in_order():
    points = curves(sweep_summary({("spec", 1): (30.0, 4.0), ("plain", 1): (10.0, 10.0), ("plain", 2): (19.0, 12.5),
                                   ("plain", 4): (20.0, 20.0), ("alpha", 1): (5.0, 20.0)}))
    assert points["tpot_p50_ms"].tolist() == [20.0, 10.0, 12.5, 20.0, 4.0]  # the p50, not another stat
    faster = speedups(points, "plain").set_index("configuration")
    assert faster.loc["spec", "throughput_speedup"] == pytest.approx(2.0)
    assert faster.loc["spec", "tpot_speedup"] == pytest.approx(1.5)  # 10 ms / 4 ms - 1
    assert faster.loc["alpha", "tpot_speedup"] == pytest.approx(-0.5)
    assert "plain" not in faster.index
    steps = saturation_steps(points)
    assert list(zip(steps["configuration"], steps["from_concurrency"])) == [("plain", 1), ("plain", 2)]
    assert steps["throughput_gain"].tolist() == pytest.approx([0.9, 1 / 19])
    assert steps["tpot_rise"].tolist() == pytest.approx([0.25, 0.6])
    assert steps["saturated"].tolist() == [False, True]


def test_a_flat_throughput_without_a_latency_rise_is_not_saturation_and_ratios_need_a_positive_denominator():
    points = curves(sweep_summary({("c", 1): (10.0, 10.0), ("c", 2): (10.5, 11.0)}))
    assert saturation_steps(points)["saturated"].tolist() == [False]
    assert _ratio(1.0, 0.5) == 2.0 and _ratio(3.0, 2.0) == 1.5
    assert all(pd.isna(_ratio(n, d)) for n, d in ((1.0, 0.0), (1.0, -2.0), (None, 1.0), (1.0, None)))
