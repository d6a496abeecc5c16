"""The run record is typed end to end: every key a run writes into its manifest is a declared field
of `RunRecord` (a new undeclared key fails here), and manifests written before the record grew still
load, undeclared keys kept."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.analysis.run import Run
from harness.cli import app
from harness.records.entries import HostLoadEntry
from harness.records.manifest import MANIFEST_VERSION, RunRecord
from harness.records.rundir import load_record
from tests.fakes.broken_server import NONE, Breakage, breaking

GSM8K = ["run", "gsm8k", "--limit", "2", "--max-new-tokens", "8", "--warmup", "1", "--no-progress"]


def _manifests(results: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(results.glob("*/manifest.json"))]


def test_every_key_a_run_writes_is_a_declared_field_of_the_run_record(tmp_path):
    results = tmp_path / "runs"
    with breaking(Breakage(NONE)) as url:
        shared = [*GSM8K, "--server", url, "--results", str(results)]
        first = CliRunner().invoke(app, [*shared, "--slo", "ttft:1000", "--repeat", "2", "--label", "typed"])
        assert first.exit_code == 0, first.output
        run = sorted(results.iterdir())[0]
        resumed = CliRunner().invoke(app, [*shared, "--resume", str(run)])
        assert resumed.exit_code == 0, resumed.output
        pooled = CliRunner().invoke(app, [*shared, "--concurrency", "2", "--processes", "2"])
        assert pooled.exit_code == 0, pooled.output
    manifests = _manifests(results)
    written = set().union(*manifests)
    assert {"repeat", "resumed", "client_processes", "telemetry", "power", "guard"} <= written
    assert written - set(RunRecord.model_fields) == set()
    for manifest in manifests:
        record = RunRecord.of(manifest)
        assert record.manifest_version == MANIFEST_VERSION and not record.model_extra
        assert record.workload.as_recorded() == manifest["workload"]


def test_a_version_1_manifest_and_a_version_2_one_without_the_later_keys_still_load(tmp_path):
    old = {"run_id": "r1", "workload": {"name": "synthetic", "input_tokens": 8}, "backend": "sglang",
           "status": "complete", "options": {"concurrency": 4.0}, "scale": "REDUCED SCALE: old label",
           "server": {"server_info": {"version": "0.5.23"}}, "retired_key": {"kept": True}}
    record = RunRecord.of(old)
    assert (record.manifest_version, record.engine_and_api, record.facts.version) == (1, ("sglang", "sglang"), "0.5.23")
    assert record.model_extra == {"retired_key": {"kept": True}}
    assert record.telemetry is None and record.host_load is None and not record.server_counters.as_recorded()
    run = Run("/nowhere", old)
    assert (run.label, run.concurrency, run.reduced_scale, run.status) == ("sglang c=4", 4, True, "complete")
    v2 = {"manifest_version": 2, "run_id": "r2", "workload": {"name": "gsm8k"}, "engine": "vllm", "api": "openai",
          "engine_facts": {"engine": "vllm", "version": "0.32.0"}, "status": "interrupted"}
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "manifest.json").write_text(json.dumps(v2))
    loaded = load_record(tmp_path / "r2")
    assert (loaded.facts.version, loaded.seen_status, loaded.post_run_ok) == ("0.32.0", "interrupted", True)
    assert Run.load(tmp_path / "r2").label == "vllm"


def test_the_nightlys_host_load_is_typed_and_a_figure_it_did_not_read_is_absent():
    load = HostLoadEntry(wall_s=3.0, cpus=2, loadavg_1m=None, other_cpu_share=0.25, server_on_host=True)
    assert (load.figure("other_cpu_share"), load.figure("loadavg_1m"), load.figure("server_on_host")) == (0.25, None, None)
