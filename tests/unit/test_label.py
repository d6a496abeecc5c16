"""Run labels: given with --label, else derived from profile (or engine) and concurrency (an open
loop: its rate and cap), for new runs and for runs recorded before labels existed."""

from __future__ import annotations

import json

import pytest

from harness.analysis.run import Run
from harness.errors import SparkbenchError
from harness.records.manifest import RunRecord
from harness.records.rundir import SCALE_LABEL
from harness.request import RunSwitches
from harness.run.label import checked_label, default_label
from harness.run.runner import RunOptions
from harness.run.target import Target
from harness.session import run_planned
from tests.unit.test_run import _plan
from tests.unit.test_runner import ScriptedBackend

RUN = {"run_id": "r1", "workload": {"name": "synthetic"}}


@pytest.mark.parametrize("manifest, label", [
    ({"profile": {"name": "spark-mtp"}, "engine": "sglang", "options": {"concurrency": 16}}, "spark-mtp c=16"),
    ({"launched_server": {"profile": "cpu-testbed"}, "options": {"concurrency": 1}}, "cpu-testbed c=1"),
    ({"engine": "vllm", "options": {"concurrency": 4}}, "vllm c=4"),
    ({"launched_server": {"profile": "cpu-testbed"}, "options": {"concurrency": 1, "request_rate": 4.0}},
     "cpu-testbed r=4/s"),
    ({"engine": "openai", "options": {"concurrency": 1, "request_rate": 0.5, "max_concurrency": 8}},
     "openai r=0.5/s cap=8"),
    ({"engine": "vllm", "options": {"concurrency": 1, "schedule": "traces/day1.csv"}}, "vllm schedule=day1.csv"),
    ({"backend": "sglang"}, "sglang"),  # an old manifest: API only, no options
    ({}, "unknown server"),
])
def test_the_default_label_names_the_profile_or_engine_and_the_concurrency(manifest, label):
    assert default_label(RunRecord.of({**RUN, **manifest})) == label


def test_an_old_run_gets_the_default_label_and_a_caption_with_concurrency_scale_and_status():
    run = Run("/nowhere", RUN | {"engine": "sglang", "options": {"concurrency": 2}, "status": "failed",
                                 "scale": SCALE_LABEL})
    assert run.label == "sglang c=2"
    assert run.caption == "sglang c=2 · REDUCED SCALE · failed"


def test_an_open_loop_caption_names_its_rate_not_the_unused_concurrency():
    run = Run("/nowhere", RUN | {"engine": "sglang", "options": {"concurrency": 1, "request_rate": 4.0},
                                 "status": "complete", "reduced_scale": False})
    assert run.caption == "sglang r=4/s · complete"
    named = Run("/nowhere", RUN | {"label": "mtp", "options": {"concurrency": 1, "request_rate": 4.0},
                                   "status": "complete", "reduced_scale": False})
    assert named.caption == "mtp · r=4/s · complete"


def test_a_given_label_wins_and_the_caption_adds_what_it_leaves_out():
    run = Run("/nowhere", RUN | {"label": "fp8 head", "options": {"concurrency": 8}, "status": "complete",
                                 "reduced_scale": False})
    assert run.label == "fp8 head" and run.caption == "fp8 head · c=8 · complete"


def test_a_new_run_stores_its_label_in_the_manifest(tmp_path):
    options = RunOptions(base_url="http://x", warmup=0, concurrency=3, show_progress=False, power_sample_ms=0)
    named = run_planned(Target(base_url="http://x"), ScriptedBackend(), _plan(2), options,
                        RunSwitches(results=tmp_path / "a", label="mine"))
    derived = run_planned(Target(base_url="http://x"), ScriptedBackend(), _plan(2), options,
                          RunSwitches(results=tmp_path / "b"))
    assert json.loads((named.path / "manifest.json").read_text())["label"] == "mine"
    assert json.loads((derived.path / "manifest.json").read_text())["label"].endswith(" c=3")


@pytest.mark.parametrize("text", ["", "   ", "two\nlines", "x" * 81])
def test_a_bad_label_is_one_line(text):
    with pytest.raises(SparkbenchError, match="--label"):
        checked_label(text)


def test_a_label_is_stripped():
    assert checked_label("  spark-mtp c=16 ") == "spark-mtp c=16" and checked_label(None) is None
