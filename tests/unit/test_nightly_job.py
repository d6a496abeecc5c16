"""How a night confirms a regression: interleaved with a relaunched baseline, or a plain rerun."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pandas as pd
import pytest

import harness.nightly.job as job
import harness.session
from harness.analysis.run import Run
from harness.nightly.config import NightlyConfig


def _run_dir(folder: Path, name: str, launched: dict | None = None, scale: str = "as configured",
             host_load: dict | None = None) -> Run:
    path = folder / name
    path.mkdir()
    manifest = {"run_id": name, "workload": {"name": "synthetic"}, "launched_server": launched, "scale": scale,
                "host_load": host_load or {"foreign_cpu_share": 0.01}}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return Run.load(path)


def _fake_night(monkeypatch, tmp_path):
    """run_workloads and gate replaced by fakes that record what they were asked to do."""
    calls = []

    def run_workloads(config, names=None, launch=None, role="nightly"):
        calls.append(("run", launch))
        return {"synthetic": _run_dir(tmp_path, f"run{len(calls)}", host_load={"foreign_cpu_share": 0.5})}

    def gate(config, baseline, run):
        calls.append(("gate", baseline.path.name, run.path.name))
        return None, pd.DataFrame([{"metric": "tpot_ms", "stat": "mean", "change": 0.2, "verdict": "regressed"}])

    monkeypatch.setattr(job, "run_workloads", run_workloads)
    monkeypatch.setattr(job, "gate", gate)
    return calls


def test_a_baseline_launched_from_a_profile_is_relaunched_when_the_job_launches_servers(tmp_path):
    launched = {"profile": "spark-baseline", "model_dir": "/models/ling"}
    base = _run_dir(tmp_path, "base", launched)
    assert job.relaunchable_baseline(NightlyConfig(state_dir=tmp_path), base) == ("spark-baseline", Path("/models/ling"))
    reduced = _run_dir(tmp_path, "reduced", launched, scale="REDUCED SCALE: embedded CPU test bed")
    assert job.relaunchable_baseline(NightlyConfig(state_dir=tmp_path), reduced) == ("spark-baseline", None)


def test_an_attached_server_or_baseline_means_a_plain_rerun(tmp_path):
    launched = _run_dir(tmp_path, "base", {"profile": "cpu-testbed", "model_dir": "/m"})
    assert job.relaunchable_baseline(NightlyConfig(state_dir=tmp_path, server="http://h:1"), launched) is None
    attached = _run_dir(tmp_path, "attached")
    assert job.relaunchable_baseline(NightlyConfig(state_dir=tmp_path), attached) is None


def test_interleaved_confirmation_runs_the_baseline_configuration_then_the_candidate(tmp_path, monkeypatch):
    calls = _fake_night(monkeypatch, tmp_path)
    base = _run_dir(tmp_path, "base", {"profile": "cpu-testbed", "model_dir": "/m"})
    attempt = job.confirmation_attempt(NightlyConfig(state_dir=tmp_path, profile="cpu-slow"), "synthetic", base)()
    assert calls == [("run", ("cpu-testbed", Path("/m"))), ("run", None), ("gate", "run1", "run2")]
    assert [r.path.name for r in attempt.runs] == ["run1", "run2"]
    assert attempt.busy == ["run1: foreign processes took 50% of the host's CPU (limit 10%)",
                            "run2: foreign processes took 50% of the host's CPU (limit 10%)"]


def test_plain_confirmation_reruns_against_the_pinned_baseline(tmp_path, monkeypatch):
    calls = _fake_night(monkeypatch, tmp_path)
    base = _run_dir(tmp_path, "base")
    attempt = job.confirmation_attempt(NightlyConfig(state_dir=tmp_path, server="http://h:1"), "synthetic", base)()
    assert calls == [("run", None), ("gate", "base", "run1")]
    assert [r.path.name for r in attempt.runs] == ["run1"]


def test_the_inconclusive_line_names_the_metrics_it_could_not_settle(capsys):
    from harness.nightly.settle import INCONCLUSIVE

    table = pd.DataFrame([{"workload": "gsm8k", "metric": "tpot_ms", "stat": "p50", "verdict": INCONCLUSIVE},
                          {"workload": "gsm8k", "metric": "ttft_ms", "stat": "p50", "verdict": "ok"}])
    job.print_night(table, pd.DataFrame([{"run": "r"}]), "inconclusive", Path("report.html"))
    verdict = capsys.readouterr().out.strip().splitlines()[-1]
    assert verdict.startswith("verdict: INCONCLUSIVE (gsm8k:tpot_ms p50 inconclusive")
    assert "ttft_ms" not in verdict


def _fake_pin(monkeypatch, tmp_path, host_load: dict):
    """Repeats of one workload whose runs read `host_load`; pinning and the report recorded."""
    made, pinned, reports = [], [], []

    def run_workloads(config, names=None, launch=None, role="nightly"):
        made.append(_run_dir(tmp_path, f"repeat{len(made)}", host_load=host_load))
        return {"synthetic": made[-1]}

    monkeypatch.setattr(job, "run_workloads", run_workloads)
    monkeypatch.setattr(job, "measure_noise", lambda runs, pairs: {"tpot_ms mean": 0.02})
    monkeypatch.setattr(job, "pin_baseline", lambda config, paths: pinned.append(paths))
    monkeypatch.setattr(job, "write_report", lambda config, night, baseline, runs, tables:
                        reports.append(tables) or Path("report.html"))
    config = NightlyConfig(server="http://x", state_dir=tmp_path / "state", workloads=[{"name": "synthetic"}],
                           baseline_repeats=3)
    return job.pin_with_noise(config, "night", run_workloads(config)), pinned, reports


def test_a_pin_on_a_busy_host_pins_nothing_and_says_so(monkeypatch, tmp_path, capsys):
    spinner = {"pid": 4242, "name": "python3", "cpu_s": 3.0, "share": 0.45}
    load = {"foreign_cpu_share": 0.5, "unseen_cpu_share": 0.05, "foreign_processes": [spinner]}
    code, pinned, reports = _fake_pin(monkeypatch, tmp_path, load)
    out = capsys.readouterr().out
    assert code == job.EXIT_INCONCLUSIVE and pinned == []
    assert out.strip().splitlines()[-1].startswith(
        "verdict: NOT PINNED, the host was busy (repeat0: foreign processes took 50% of the host's CPU "
        "(limit 10%): 4242 python3 45%, unseen 5%;")
    assert "host load per run" in out and len(reports[0]["host_load"]) == 3
    assert set(reports[0]["host_load"]["foreign"]) == {"4242 python3 45%, unseen 5%"}


def test_the_setups_load_is_no_reason_not_to_pin(monkeypatch, tmp_path, capsys):
    """The host's remainder past the client and server (other_cpu_share) holds the setup's servers:
    at 60% it is shown, but only the foreign share is judged by default."""
    code, pinned, _ = _fake_pin(monkeypatch, tmp_path, {"foreign_cpu_share": 0.02, "other_cpu_share": 0.6})
    assert code == job.EXIT_PASS and list(pinned[0]) == ["synthetic"]


def test_a_pin_on_a_quiet_host_pins_and_prints_its_verdict(monkeypatch, tmp_path, capsys):
    code, pinned, reports = _fake_pin(monkeypatch, tmp_path, {"foreign_cpu_share": 0.01})
    out = capsys.readouterr().out
    assert code == job.EXIT_PASS and list(pinned[0]) == ["synthetic"]
    assert out.strip().splitlines()[-1].startswith("verdict: pinned synthetic (3 runs on a quiet host)")
    assert set(reports[0]["host_load"]["busy"]) == {"no"} and set(reports[0]["host_load"]["foreign"]) == {"none"}


def test_a_night_measures_a_held_back_stream_only_when_its_config_allows(monkeypatch):
    asked = []

    class Asked(Exception):
        """Ends the night at its first run: what matters is the request it was asked to make."""

    def measured(request, opened, setup_pids):
        asked.append(request.allow_buffered)
        raise Asked

    monkeypatch.setattr(harness.session, "open_target", lambda target: nullcontext(None))
    monkeypatch.setattr(job, "measured", measured)
    for allow in (False, True):
        config = NightlyConfig(server="http://127.0.0.1:9", workloads=[{"name": "synthetic"}], allow_buffered=allow)
        with pytest.raises(Asked):
            job.run_workloads(config)
    assert asked == [False, True]
