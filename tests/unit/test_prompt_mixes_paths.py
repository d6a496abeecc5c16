"""Length mixes and shared prefixes through the other entry points: a sweep config's cells run
them against the scripted server, compare and report read those runs, the nightly config and the
capacity search take them by name."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from harness.analysis.run import Run
from harness.cli import app
from harness.nightly.config import load_config
from tests.fakes.stream_server import Script, serving
from tests.unit.test_prompt_mixes_run import tokenizer

MIXED = {"num_prompts": 4, "input_len_dist": "uniform:16,40", "output_len_dist": "fixed:4"}
SHARED = {"num_groups": 2, "prompts_per_group": 2, "prefix_tokens": 24, "question_tokens": 4, "output_tokens": 4}


def test_sweep_cells_run_both_workloads_and_compare_and_report_read_them(tmp_path):
    folder = str(tokenizer(tmp_path / "tok"))
    with serving(Script(prefix_cache=True)) as url:
        config = {"name": "mixes", "results": str(tmp_path / "sweeps"), "concurrency": [1, 2], "guard": False,
                  "warmup": 0, "configurations": [{"name": "fake", "server": url}],
                  "workloads": [{"name": "synthetic", "options": {**MIXED, "tokenizer": folder}},
                                {"name": "shared-prefix", "options": {**SHARED, "tokenizer": folder}}]}
        (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        done = CliRunner().invoke(app, ["sweep", "--config", str(tmp_path / "sweep.yaml")])
    assert done.exit_code == 0, done.output
    runs = [Run.load(manifest.parent) for manifest in sorted((tmp_path / "sweeps").rglob("manifest.json"))]
    by_workload = {name: [run for run in runs if run.workload == name] for name in ("synthetic", "shared-prefix")}
    assert [len(found) for found in by_workload.values()] == [2, 2]  # one cell per concurrency level
    for run in by_workload["shared-prefix"]:
        assert run.requests["cached_tokens"].tolist().count(24) >= 2  # each group's later prompts
    for run in by_workload["synthetic"]:
        lengths = [json.loads(item)["input_tokens"] for item in run.requests["item_json"]]
        assert run.requests["prompt_tokens"].tolist() == lengths
    paths = [str(run.path) for run in by_workload["shared-prefix"]]
    compared = CliRunner().invoke(app, ["compare", *paths])
    assert compared.exit_code == 0 and "prefix" in compared.output, compared.output
    reported = CliRunner().invoke(app, ["report", *paths, str(by_workload["synthetic"][0].path),
                                        "--out", str(tmp_path / "report")])
    assert reported.exit_code == 0, reported.output
    page = next((tmp_path / "report").glob("*.md")).read_text(encoding="utf-8")
    assert "uniform:16,40 in" in page and "2 groups sharing a 24-token prefix" in page


def test_the_nightly_config_and_the_capacity_search_take_them_by_name(tmp_path):
    path = tmp_path / "nightly.yaml"
    path.write_text(yaml.safe_dump({"server": "http://127.0.0.1:9", "workloads": [
        {"name": "synthetic", "options": MIXED}, {"name": "shared-prefix", "options": SHARED}]}), encoding="utf-8")
    config = load_config(path)
    assert [w.name for w in config.workloads] == ["synthetic", "shared-prefix"]
    assert config.workloads[0].options["input_len_dist"] == "uniform:16,40"
    helped = CliRunner().invoke(app, ["capacity", "shared-prefix", "--help"])
    assert helped.exit_code == 0 and "--prefix-tokens" in helped.output
    assert "--input-len-dist" in CliRunner().invoke(app, ["capacity", "synthetic", "--help"]).output
