"""The Run object: a run directory read once, computed lazily once, used by compare and report;
its derived tables are written when the run ends, whatever stopped it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import harness.analysis.run as run_module
from harness.analysis.compare import compare_loaded
from harness.analysis.run import Run, counter_rows, mean_decode_context, tell_apart
from harness.records.entries import ServerCounters
from harness.records.rundir import SCALE_LABEL
from harness.request import RunSwitches
from harness.run.runner import RunAborted, RunOptions
from harness.run.target import Target
from harness.session import run_planned
from tests.unit.test_report import SYNTHETIC, synthetic_records, write_run
from tests.unit.test_runner import ListWorkload, ScriptedBackend
from workloads import Plan
from workloads.synthetic import SyntheticConfig

DERIVE = run_module.derive_requests


@pytest.fixture
def two_runs(tmp_path):
    return [write_run(tmp_path, f"2026010{i}T000000Z-synthetic", synthetic_records(10.0 + i), SYNTHETIC)
            for i in (1, 2)]


def test_each_run_is_derived_once_whatever_uses_it(two_runs, monkeypatch):
    calls = []
    monkeypatch.setattr(run_module, "derive_requests", lambda df: calls.append(1) or DERIVE(df))
    runs = [Run.load(d) for d in two_runs]
    compare_loaded(runs)
    for run in runs:
        assert not run.summary.empty and run.derived is run.derived
    assert len(calls) == 2


def test_a_folder_that_is_no_run_fails_on_load(tmp_path):
    with pytest.raises(Exception, match="no manifest.json"):
        Run.load(tmp_path)


@pytest.mark.parametrize("manifest, reduced", [
    ({"reduced_scale": True, "scale": SCALE_LABEL}, True),
    ({"reduced_scale": False, "scale": "as configured"}, False),
    ({"scale": SCALE_LABEL}, True),  # written before the flag existed
    ({"scale": "as configured"}, False),
    ({}, False),
])
def test_reduced_scale_is_a_flag_and_old_labels_still_count(manifest, reduced):
    run = Run("/nowhere", {"run_id": "r", "workload": {"name": "synthetic"}, **manifest})
    assert run.reduced_scale is reduced
    assert ("REDUCED SCALE" in run.caption) is reduced


def _plan(count: int) -> Plan:
    return Plan(SyntheticConfig(), lambda snapshot: ListWorkload(count))


def test_a_finished_run_leaves_its_summary_and_says_its_scale(tmp_path):
    options = RunOptions(base_url="http://x", warmup=0, show_progress=False, power_sample_ms=0)
    run = run_planned(Target(base_url="http://x"), ScriptedBackend(), _plan(3), options, RunSwitches(results=tmp_path))
    summary = pd.read_csv(run.path / "summary.csv")
    assert summary.loc[summary["metric"] == "requests", "value"].item() == 3
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["reduced_scale"] is False and manifest["workload_config"]["num_prompts"] is None


def test_an_interrupted_run_still_leaves_its_summary(tmp_path):
    options = RunOptions(base_url="http://x", warmup=0, show_progress=False, power_sample_ms=0)
    backend = ScriptedBackend({"p2": KeyboardInterrupt()})  # Ctrl-C during the third request
    with pytest.raises(RunAborted):
        run_planned(Target(base_url="http://x"), backend, _plan(4), options, RunSwitches(results=tmp_path))
    [run_dir] = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = pd.read_csv(run_dir / "summary.csv")
    assert summary.loc[summary["metric"] == "requests", "value"].item() == 2
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"


def test_a_decode_step_attends_on_average_to_the_prompt_and_half_the_answer():
    requests = pd.DataFrame({"prompt_tokens": [100, 300], "completion_tokens": [10, 30]})
    assert mean_decode_context(requests) == pytest.approx((105 + 315) / 2)


def test_runs_sharing_a_label_are_numbered_in_order_and_a_lone_one_is_not():
    class Shown:
        def __init__(self, label: str) -> None:
            self.label, self.ordinal = label, "unset"

    runs = tell_apart([Shown("a"), Shown("b"), Shown("a"), Shown("a")])
    assert [run.ordinal for run in runs] == [" #1", "", " #2", " #3"]


def test_the_servers_counters_give_one_accept_length_row_or_none():
    assert counter_rows(ServerCounters()).empty
    rows = counter_rows(ServerCounters(accept_length=2.5))
    assert rows[["metric", "stat", "value"]].values.tolist() == [["accept_length_server_counters", "value", 2.5]]


@pytest.mark.parametrize(("label", "shown"), [("cpu c=4", "cpu c=4 · complete"), ("c=4", "c=4 · complete"),
                                              ("cpu", "cpu · c=4 · complete")])
def test_a_caption_names_the_load_unless_the_label_already_does(tmp_path, label, shown):
    run_dir = write_run(tmp_path, "20260101T000000Z-x", synthetic_records(10.0), SYNTHETIC)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest |= {"label": label, "options": {"concurrency": 4}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    run = Run.load(run_dir)
    assert run.caption == shown and isinstance(run.scale_note, str)
