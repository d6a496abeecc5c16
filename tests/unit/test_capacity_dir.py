"""A capacity search over made-up trial runs: the folder, capacity.json after every trial, the
tables, figures and report; a run without SLO targets is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.errors import SparkbenchError
from harness.run.load_options import LoadOptions
from harness.sweep.capacity_dir import CAPACITY_MANIFEST, CapacitySettings, run_search
from tests.fakes.full_disk import filling_at
from tests.unit.test_report import SYNTHETIC, write_run
from tests.unit.test_slo_metrics import open_loop_records

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`

CAPACITY = 6.0  # req/s: above it every request waits 300 ms in the queue


def trial_runner(slo: str | None = "ttft=100ms", plans: list | None = None):
    def run_trial(plan, folder):
        rate = plan.rate
        if plans is not None:
            plans.append(plan)
        lag = 0.0 if rate <= CAPACITY else 300.0
        path = write_run(folder, f"20260101T000000Z-r{rate:g}", open_loop_records([lag] * 20, gap_ms=1000 / rate),
                         SYNTHETIC)
        manifest = json.loads((path / "manifest.json").read_text())
        manifest["options"] = {"request_rate": rate, "slo": slo, "arrival_seed": plan.arrival_seed}
        (path / "manifest.json").write_text(json.dumps(manifest))
        return path

    return run_trial


def test_the_search_leaves_its_folder_tables_figures_and_report(tmp_path):
    settings = CapacitySettings(results=tmp_path, floor_rps=1.0, ceiling_rps=20.0, tolerance=0.1)
    folder, found = run_search(settings, trial_runner(), {"configuration": "cpu", "slo": "ttft=100ms"})
    assert found.status == "confirmed" and found.bracket[0] <= CAPACITY < found.bracket[1]
    manifest = json.loads((folder / CAPACITY_MANIFEST).read_text())
    assert manifest["capacity_rps"] == found.capacity_rps and len(manifest["trials"]) == len(found.trials)
    assert all((folder / t["run_dir"] / "manifest.json").exists() for t in manifest["trials"])
    assert (folder / "trials.csv").exists() and (folder / "points.csv").exists()
    assert {p.name for p in (folder / "plots").glob("*.png")} == {"capacity_trials.png", "rate_achieved.png",
                                                                  "rate_latency.png", "rate_goodput.png"}
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "confirmed by runs on unseen schedules" in page and page.count("data:image/png;base64,") == 4


def test_a_trial_without_slo_targets_is_refused(tmp_path):
    settings = CapacitySettings(results=tmp_path, floor_rps=1.0, ceiling_rps=20.0)
    with pytest.raises(SparkbenchError, match="needs SLO targets"):
        run_search(settings, trial_runner(slo=None), {})


def test_a_disk_that_fills_while_capacity_json_is_saved_keeps_the_last_one_whole(tmp_path, monkeypatch):
    """The first trial is saved; the disk fills writing the second: one line says so, and
    capacity.json holds the first trial, with nothing left beside it."""
    settings = CapacitySettings(results=tmp_path, floor_rps=1.0, ceiling_rps=20.0, tolerance=0.1)
    filling_at(monkeypatch, CAPACITY_MANIFEST, room=1)
    with pytest.raises(SparkbenchError) as stopped:
        run_search(settings, trial_runner(), {"configuration": "cpu", "slo": "ttft=100ms"})
    monkeypatch.undo()
    folder = next(tmp_path.iterdir())
    assert str(stopped.value) == f"cannot write {folder / CAPACITY_MANIFEST}: disk full (no space left on device)"
    assert len(json.loads((folder / CAPACITY_MANIFEST).read_text())["trials"]) == 1
    assert sorted(path.name for path in folder.iterdir()) == [CAPACITY_MANIFEST, "trials"]


@pytest.mark.parametrize("args, message", [
    ([], "capacity: give the SLO targets to keep"),
    (["--slo", "e2e=1s", "--floor-rps", "5", "--ceiling-rps", "2"], "--floor must be below --ceiling"),
    (["--slo", "e2e=1s", "--tolerance", "0"], "tolerance: Input should be greater than 0"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_server(args, message):
    done = subprocess.run([sys.executable, "-m", "harness.cli", "capacity", "synthetic", "--server",
                           "http://127.0.0.1:9", *args], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_each_trial_has_a_schedule_of_its_own_long_enough_for_the_target(tmp_path):
    plans = []
    settings = CapacitySettings(results=tmp_path, floor_rps=1.0, ceiling_rps=20.0, attainment=0.99)
    folder, found = run_search(settings, trial_runner(plans=plans), {"slo": "ttft=100ms"},
                               LoadOptions(arrival_seed=5, warmup_window_s=30.0))
    seeds = [plan.arrival_seed for plan in plans]
    assert len(set(seeds)) == len(seeds)  # no draw reused for another rate
    manifest = json.loads((folder / CAPACITY_MANIFEST).read_text())
    assert [t["arrival_seed"] for t in manifest["trials"]] == seeds  # recorded, as each run recorded it
    for plan in plans:  # 1,000 measured requests at 99% (10 misses), after a warm-up of at least 30 s
        assert plan.warmup_window_s >= 30.0 and plan.duration_s - plan.warmup_window_s == pytest.approx(1000 / plan.rate)
    other, _ = run_search(settings, trial_runner(), {"slo": "ttft=100ms"}, LoadOptions(arrival_seed=6))
    assert not set(seeds) & {t["arrival_seed"] for t in json.loads((other / CAPACITY_MANIFEST).read_text())["trials"]}
