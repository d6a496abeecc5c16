"""The run spine: every entry point builds a `RunRequest`, its options come from the models once, and
a workload registered in one place flows through the command line and a run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

import harness.session as session
import workloads.registry as registry
from harness.cli import app
from harness.cli.binding import flag
from harness.cli.run import add_run_command, request_of
from harness.config import validated
from harness.errors import SparkbenchError
from harness.nightly.config import NightlyConfig
from harness.request import RunRequest, RunSwitches, TargetSpec
from harness.run.options import RunSettings
from harness.run.target import Target
from harness.sweep.config import SweepConfig
from tests.unit.test_runner import ListWorkload, ScriptedBackend
from workloads import WorkloadConfig
from workloads.registry import WORKLOADS, WorkloadEntry

SHARED_MODELS = (TargetSpec, RunSettings, RunSwitches)


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_every_run_command_offers_every_shared_option_and_its_workloads_own(workload):
    shown = _help("run", workload)
    for model in (*SHARED_MODELS, WORKLOADS[workload].config):
        for name, field in model.model_fields.items():
            assert flag(name, field) in shown, f"{flag(name, field)} missing from run {workload}"


def test_flags_follow_the_documented_rule():
    fields = RunSettings.model_fields
    assert flag("request_timeout_s", fields["request_timeout_s"]) == "--request-timeout"
    assert flag("power_sample_ms", fields["power_sample_ms"]) == "--power-sample-ms"
    assert flag("show_progress", fields["show_progress"]) == "--progress"  # the field names its own


def test_more_processes_than_concurrency_is_refused_by_the_model_wherever_it_is_set(tmp_path):
    with pytest.raises(SparkbenchError, match="--processes 3 is more than --concurrency 2"):
        validated(RunSettings, {"concurrency": 2, "processes": 3}, "run")
    with pytest.raises(SparkbenchError, match="--processes 3 is more than --concurrency 2"):
        validated(NightlyConfig, {"concurrency": 2, "processes": 3}, "nightly config")
    sweep = {"configurations": [{"server": "http://h:1"}], "workloads": [{"name": "synthetic"}]}
    with pytest.raises(SparkbenchError, match="--processes 2 is more than --concurrency 1"):
        validated(SweepConfig, {**sweep, "concurrency": [1, 4], "processes": 2}, "sweep config")
    assert validated(SweepConfig, {**sweep, "concurrency": [2, 4], "processes": 2}, "sweep").processes == 2


def test_the_command_line_refuses_too_many_processes_in_one_line_before_any_server_starts():
    result = CliRunner().invoke(app, ["run", "synthetic", "--server", "http://127.0.0.1:9", "--concurrency", "2",
                                      "--processes", "3"])
    assert isinstance(result.exception, SparkbenchError)
    assert "--processes 3 is more than --concurrency 2" in str(result.exception)


def _captured_requests(monkeypatch) -> list[RunRequest]:
    """session.open_target and session.run replaced: each request is kept, its run a fake."""
    from contextlib import contextmanager

    requests: list[RunRequest] = []

    @contextmanager
    def open_target(spec):
        yield SimpleNamespace(base_url="http://h:1")

    def run(request, target=None):
        requests.append(request)
        manifest = {"label": "x c=1", "status": "complete"}
        return SimpleNamespace(path=request.results / f"run{len(requests)}", manifest=manifest, derived=None,
                               label=manifest["label"], status=manifest["status"])

    monkeypatch.setattr(session, "open_target", open_target)
    monkeypatch.setattr(session, "run", run)
    return requests


def test_the_nightly_runs_with_the_concurrency_processes_deadlines_and_key_it_is_given(tmp_path, monkeypatch):
    import harness.nightly.job as job

    requests = _captured_requests(monkeypatch)
    monkeypatch.setattr(job, "HostLoadMeter", lambda url: SimpleNamespace(
        start=lambda: None, stop=lambda: SimpleNamespace(to_dict=lambda: {})))
    monkeypatch.setattr(job, "tpot_gap", lambda derived: None)
    monkeypatch.setattr("harness.records.rundir.RunDir", lambda path, manifest: SimpleNamespace(
        update=lambda **fields: None))
    config = validated(NightlyConfig, {"state_dir": str(tmp_path), "server": "http://h:1", "concurrency": 4,
                                       "processes": 2, "request_deadline_s": 60.0, "api_key": "k-1",
                                       "workloads": [{"name": "synthetic", "options": {"num_prompts": 4}}]},
                       "nightly config")
    job.run_workloads(config)
    [request] = requests
    assert (request.options.concurrency, request.options.processes, request.options.request_deadline_s) == (4, 2, 60.0)
    assert request.options.headers == {"Authorization": "Bearer k-1"}
    assert request.target.server == "http://h:1" and request.results == tmp_path / "runs"


def test_a_sweep_cell_runs_with_the_processes_deadlines_and_key_of_the_sweep(tmp_path, monkeypatch):
    from harness.sweep.cells import run_cell
    from harness.sweep.sweepdir import SweepDir

    requests = _captured_requests(monkeypatch)
    config = validated(SweepConfig, {"results": str(tmp_path), "concurrency": [2], "processes": 2,
                                     "first_token_timeout_s": 30.0, "api_key": "k-2",
                                     "configurations": [{"name": "base", "server": "http://h:1"}],
                                     "workloads": [{"name": "synthetic", "options": {"num_prompts": 2}}]}, "sweep")
    sweep = SweepDir.create(config)
    cell = sweep.unfinished()[0]
    run_cell(object(), config.configurations[0], cell, sweep.cell_root(cell), config)
    [request] = requests
    assert (request.options.concurrency, request.options.processes) == (2, 2)
    assert request.options.first_token_timeout_s == 30.0 and request.options.headers == {"Authorization": "Bearer k-2"}
    assert request.target.server == "http://h:1" and request.label == cell.label


def test_the_key_comes_from_the_environment_when_the_request_gives_none(monkeypatch):
    monkeypatch.setenv("SPARKBENCH_API_KEY", "from-env")
    request = RunRequest(workload={"name": "synthetic"})
    assert session.run_options(request, "http://h:1").headers == {"Authorization": "Bearer from-env"}
    assert "from-env" not in json.dumps(session.run_options(request, "http://h:1").model_dump(mode="json"))


class EchoConfig(WorkloadConfig):
    """A made-up workload's options."""

    prompts: int = Field(3, ge=1, le=9, description="Prompts to send, made up for this test.")


def _echo_entry() -> WorkloadEntry:
    return WorkloadEntry(EchoConfig, lambda config, model_dir: lambda snapshot: _Echo(config.prompts),
                         "Echo: a made-up workload.")


class _Echo(ListWorkload):
    name = "echo"


def test_a_registered_workload_gets_its_command_and_runs_through_the_one_builder(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.WORKLOADS, "echo", _echo_entry())
    commands = typer.Typer(rich_markup_mode=None)
    add_run_command(commands, "echo", registry.WORKLOADS["echo"])
    add_run_command(commands, "synthetic", registry.WORKLOADS["synthetic"])  # a second command: a group
    shown = " ".join(CliRunner().invoke(commands, ["echo", "--help"]).output.split())
    assert "Prompts to send, made up for this test." in shown and "1<=x<=9" in shown and "--concurrency" in shown

    request = request_of("echo", {"prompts": 4}, {"server": "http://h:1"}, {"warmup": 0, "show_progress": False,
                                                                             "power_sample_ms": 0},
                         {"results": tmp_path, "label": "echo run"})
    monkeypatch.setattr(session, "backend_for", lambda target, name, **_: ScriptedBackend())
    run = session.run(request, Target(base_url="http://h:1"))
    assert run.manifest["workload"]["name"] == "echo" and run.manifest["label"] == "echo run"
    assert (run.requests["status"] == "ok").sum() == 4 and run.manifest["workload_config"] == {"prompts": 4}


def test_a_bad_workload_option_fails_when_the_request_is_made():
    with pytest.raises(SparkbenchError, match="synthetic options: num_prompts"):
        request_of("synthetic", {"num_prompts": 0}, {}, {}, {})


def test_one_place_builds_a_run():
    """Only harness/session.py calls the runner's `execute` and creates run directories."""
    root = Path(__file__).resolve().parents[2] / "harness"
    builders = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                      if "RunDir.create(" in path.read_text() and path.parts[-2] != "agree")
    assert builders == ["session.py"]
