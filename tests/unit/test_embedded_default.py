"""The embedded default is per workload: with no --server and no --profile, GSM8K and Spec-Bench
start the real model on llama.cpp, every other workload the tiny random model on SGLang; no
server is started here (embedded_server is replaced by a fake that records what it would start).
A sweep from flags launches the same default for its one workload."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness.run.target as target_module
import harness.session as session
from harness.cli import app
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.guard.profiles import load_profile
from harness.records.rundir import SCALE_LABEL
from harness.request import RunRequest, TargetSpec
from harness.run.embedded import DEFAULT_PROFILE, REAL_TEXT_PROFILE, WORKLOAD_PROFILES, EmbeddedServer
from harness.sweep.setup import open_sweep
from workloads.registry import WORKLOADS, config_of, plan

EXPECTED_DEFAULTS = {"gsm8k": REAL_TEXT_PROFILE, "specbench": REAL_TEXT_PROFILE, "synthetic": DEFAULT_PROFILE,
                     "dataset": DEFAULT_PROFILE, "shared-prefix": DEFAULT_PROFILE}


@pytest.fixture
def launches(monkeypatch, tmp_path) -> list[tuple[str, Path | None]]:
    """embedded_server replaced: each launch is kept as (profile, model_dir given); the 'server'
    serves `tmp_path/<profile>`, its test-bed model when no model folder was given."""
    started: list[tuple[str, Path | None]] = []

    @contextmanager
    def fake_embedded_server(profile_name, model_dir=None, log_name="server"):
        started.append((profile_name, model_dir))
        yield EmbeddedServer(base_url="http://127.0.0.1:1", profile=profile_name,
                             engine=load_profile(profile_name).engine, model_dir=model_dir or tmp_path / profile_name,
                             log_path=tmp_path / "server.log", testbed_model=model_dir is None)

    monkeypatch.setattr(target_module, "embedded_server", fake_embedded_server)
    return started


def test_every_registered_workload_has_its_expected_embedded_default():
    assert set(EXPECTED_DEFAULTS) == set(WORKLOADS)  # a new workload states its default here
    assert set(WORKLOAD_PROFILES) <= set(WORKLOADS)  # a renamed workload leaves no stale entry
    for profile in {*WORKLOAD_PROFILES.values(), DEFAULT_PROFILE}:
        assert load_profile(profile).name == profile


@pytest.mark.parametrize("workload", sorted(EXPECTED_DEFAULTS))
def test_no_server_and_no_profile_starts_the_workloads_default_and_says_which(workload, launches, capsys):
    with session.open_target(TargetSpec(), workload) as target:
        assert target.profile.name == EXPECTED_DEFAULTS[workload]
        assert target.reduced and target.scale == SCALE_LABEL
    assert launches == [(EXPECTED_DEFAULTS[workload], None)]
    assert f"starting profile {EXPECTED_DEFAULTS[workload]} with the test-bed model" in capsys.readouterr().err


@pytest.mark.parametrize(("workload", "profile"), [("gsm8k", DEFAULT_PROFILE), ("synthetic", REAL_TEXT_PROFILE)])
def test_an_explicit_profile_wins_over_the_workloads_default(workload, profile, launches, capsys):
    with session.open_target(TargetSpec(profile=profile), workload) as target:
        assert target.profile.name == profile
    assert launches == [(profile, None)]
    assert f"starting profile {profile} " in capsys.readouterr().err


@pytest.mark.parametrize("workload", ["gsm8k", "specbench", "synthetic"])
def test_a_server_url_starts_nothing(workload, launches):
    with session.open_target(TargetSpec(server="http://127.0.0.1:30000"), workload) as target:
        assert target.embedded is None and not target.reduced
    assert launches == []


def test_a_model_folder_without_a_profile_is_served_by_the_sglang_default(launches, tmp_path):
    """llama.cpp reads only GGUF folders: a model the user gives stays on SGLang's cpu-testbed."""
    with session.open_target(TargetSpec(model=str(tmp_path / "checkpoint")), "gsm8k") as target:
        assert target.profile.name == DEFAULT_PROFILE and not target.reduced
    assert launches == [(DEFAULT_PROFILE, tmp_path / "checkpoint")]


def _stop_before_any_request(*args, **kwargs):
    raise SparkbenchError("stopped before any request")


@pytest.mark.parametrize("workload", ["gsm8k", "specbench", "synthetic"])
def test_the_run_command_starts_the_workloads_default(workload, launches, monkeypatch):
    monkeypatch.setattr(session, "backend_for", _stop_before_any_request)
    done = CliRunner().invoke(app, ["run", workload, "--no-progress"])
    assert "stopped before any request" in str(done.exception)
    assert launches == [(EXPECTED_DEFAULTS[workload], None)]


def test_repeated_runs_share_one_server_of_the_workloads_default(launches, monkeypatch, tmp_path):
    monkeypatch.setattr(session, "backend_for", _stop_before_any_request)
    request = RunRequest(workload={"name": "gsm8k", "options": {}}, results=tmp_path, repeat=2)
    with pytest.raises(SparkbenchError, match="stopped before any request"):
        session.run_repeated(request)
    assert launches == [(REAL_TEXT_PROFILE, None)]


def test_specbench_reads_the_chat_template_of_the_model_the_default_serves(launches, tmp_path):
    served = tmp_path / REAL_TEXT_PROFILE  # the folder the fake server serves
    served.mkdir()
    (served / "chat_template.jinja").write_text("{{ messages[0]['content'] }}|served", encoding="utf-8")
    with session.open_target(TargetSpec(), "specbench") as target:
        chosen = plan("specbench", config_of("specbench", {}), target.reduced, target.model_dir)
    workload = chosen.make(EngineFacts(engine="llamacpp"))
    assert workload.template["source"].endswith("|served")
    assert (chosen.config.per_task, chosen.config.max_new_tokens) == (2, 64)  # reduced scale


@pytest.mark.parametrize(("workload", "given", "expected"), [
    ("gsm8k", {}, [REAL_TEXT_PROFILE]), ("specbench", {}, [REAL_TEXT_PROFILE]), ("synthetic", {}, [DEFAULT_PROFILE]),
    ("gsm8k", {"profile": [DEFAULT_PROFILE]}, [DEFAULT_PROFILE]), ("gsm8k", {"server": ["http://h:1"]}, [None])])
def test_a_sweep_from_flags_launches_the_workloads_default(workload, given, expected, tmp_path):
    matrix = {"concurrency": "1", "server": None, "profile": None, "workload": workload,
              "options": {"limit": None}, **given}
    sweep, _ = open_sweep(None, None, matrix, {"results": tmp_path}, None)
    assert [configuration.profile for configuration in sweep.config.configurations] == expected


def test_a_capacity_search_launches_and_names_the_workloads_default(launches, monkeypatch):
    import harness.sweep.capacity_dir as capacity_dir
    from harness.cli.capacity import find_capacity

    searched = []
    monkeypatch.setattr(capacity_dir, "run_search", lambda settings, run_trial, facts, options: searched.append(facts))
    request = RunRequest(workload={"name": "gsm8k", "options": {}}, options={"slo": "e2e=30s", "request_rate": 1.0})
    find_capacity(request, None)
    assert launches == [(REAL_TEXT_PROFILE, None)]
    assert searched[0]["configuration"] == REAL_TEXT_PROFILE


def test_started_servers_log_where_the_tier_says(monkeypatch, tmp_path):
    """The e2e tier counts launches by the log files in its own folder (tests/e2e/budget.py): an
    embedded server must log into SPARKBENCH_SERVER_LOGS when it is set, the cache's folder else."""
    from harness.run.embedded import embedded_launch
    from harness.testbed.envs import cache_root

    monkeypatch.setenv("SPARKBENCH_SERVER_LOGS", str(tmp_path / "tier"))
    assert embedded_launch(DEFAULT_PROFILE, tmp_path, "probe")[1].log_path.parent == tmp_path / "tier"
    monkeypatch.delenv("SPARKBENCH_SERVER_LOGS")
    assert embedded_launch(DEFAULT_PROFILE, tmp_path, "probe")[1].log_path.parent == cache_root() / "logs"
