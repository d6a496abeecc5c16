"""An open-loop run through the runner with a scripted backend: the schedule is stored before the
first request, each record keeps its due time and window, prompts are drawn as the schedule needs,
and what cannot run in an open loop is refused in one line before anything is sent."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config import validated
from harness.errors import SparkbenchError
from harness.records.requests import load_requests
from harness.records.rundir import RunDir
from harness.run.arrivals import read_schedule
from harness.run.runner import RunOptions, execute
from tests.unit.test_runner import ListWorkload, ScriptedBackend


def open_run(tmp_path, count=4, done=frozenset(), **load):
    backend = ScriptedBackend()
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "list"}})
    options = RunOptions(base_url="http://x", warmup=1, show_progress=False, **load)
    execute(backend, options, ListWorkload(count), run, done)
    return backend, run


def test_a_replayed_schedule_is_stored_and_each_record_keeps_its_due_time(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("offset_s\n0\n0.01\n0.01\n0.05\n", encoding="utf-8")
    backend, run = open_run(tmp_path, schedule=trace)
    assert backend.sent == ["w0", "p0", "p1", "p2", "p3"]  # warm-up first, then in schedule order
    assert read_schedule(run.path / "schedule.csv").tolist() == [0.0, 0.01, 0.01, 0.05]
    table = load_requests(run.path)
    due = table["scheduled_ns"].astype("int64").to_numpy()
    assert (due - due[0]).tolist() == [0, 10_000_000, 10_000_000, 50_000_000]
    assert set(table["window"]) == {"measured"}


def test_a_schedule_longer_than_the_workload_cycles_its_prompts_with_ids_of_their_own(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(str(0.002 * i) for i in range(7)), encoding="utf-8")
    backend, run = open_run(tmp_path, count=3, schedule=trace)
    assert backend.sent[1:] == ["p0", "p1", "p2", "p0@1", "p1@1", "p2@1", "p0@2"]
    assert len(load_requests(run.path)) == 7  # no record replaced another


def test_a_duration_run_marks_its_windows_by_due_time(tmp_path):
    _, run = open_run(tmp_path, count=2, request_rate=400.0, arrival_seed=1, duration_s=0.25,
                      warmup_window_s=0.05, cooldown_window_s=0.05)
    offsets = read_schedule(run.path / "schedule.csv")
    table = load_requests(run.path)
    assert len(table) == len(offsets) > 2  # more requests than the workload's two prompts
    expected = np.where(offsets < 0.05, "warmup", np.where(offsets >= 0.2, "cooldown", "measured"))
    assert table.sort_values("seq")["window"].tolist() == expected.tolist()


@pytest.mark.parametrize("load, done, message", [
    ({"request_rate": 5.0}, frozenset({"p0"}), "cannot be resumed"),
])
def test_a_resumed_open_loop_is_refused_before_any_request(tmp_path, load, done, message):
    with pytest.raises(SparkbenchError, match=message):
        open_run(tmp_path, done=done, **load)
    assert not (tmp_path / "run" / "requests.jsonl").read_text()


def test_an_open_loop_from_several_processes_is_refused_as_bad_input():
    with pytest.raises(SparkbenchError, match="--processes needs a closed loop"):
        validated(RunOptions, {"base_url": "http://x", "request_rate": 5.0, "processes": 2, "concurrency": 2}, "run")
