"""Typed configuration: workload options, run options and the nightly config are strict models;
bad input is one line per problem (exit 2), scale defaults fill what was left out, and the
command line and the manifest follow the models."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import SparkbenchError
from harness.nightly.config import load_config
from harness.run.runner import RunOptions
from harness.run.target import Target
from harness.session import run_manifest
from workloads.gsm8k import GSM8KConfig
from workloads.registry import build, config_of
from workloads.synthetic import SyntheticConfig


def test_every_bad_option_is_its_own_line():
    with pytest.raises(SparkbenchError) as caught:
        config_of("synthetic", {"num_prompts": 0, "input_tokens": "8", "colour": "blue"})
    lines = str(caught.value).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("synthetic options: num_prompts: Input should be greater than or equal to 1")
    assert lines[1].startswith("synthetic options: input_tokens: Input should be a valid integer")
    assert lines[2] == "synthetic options: unknown keys colour"


def test_left_out_options_take_the_scale_default():
    published = build("synthetic", {"seed": 3}, reduced=False, model_dir=None).config
    reduced = build("synthetic", {"seed": 3, "num_prompts": 2}, reduced=True, model_dir=None).config
    assert (published.num_prompts, published.input_tokens, published.output_tokens) == (10, 32_768, 2_048)
    assert (reduced.num_prompts, reduced.input_tokens, reduced.output_tokens, reduced.seed) == (2, 8_192, 256, 3)
    everything = build("gsm8k", {}, reduced=False, model_dir=None).config
    assert (everything.limit, everything.max_new_tokens, everything.temperature) == (None, 32_768, 0.6)
    assert build("gsm8k", {}, reduced=True, model_dir=None).config.limit == 20


def test_the_command_line_states_the_models_defaults_and_bounds():
    help_text = " ".join(CliRunner().invoke(app, ["run", "synthetic", "--help"]).output.split())
    assert "Measured requests. [published: 10; embedded test bed: 4]" in help_text
    help_text = " ".join(CliRunner().invoke(app, ["run", "gsm8k", "--help"]).output.split())
    assert f"[default: {GSM8KConfig.model_fields['top_k'].default}]" in help_text
    assert "0.0<=x<=1.0" in help_text  # --top-p bounds, from the model


def test_the_manifest_records_the_resolved_config():
    plan = build("synthetic", {"num_prompts": 2}, reduced=True, model_dir=Path("/models/tiny"))
    backend = SimpleNamespace(engine="sglang", name="sglang")
    manifest = run_manifest(Target(base_url="http://x"), backend, {}, {"name": "synthetic"}, plan,
                            RunOptions(base_url="http://x", warmup=0))
    assert manifest["workload_config"] == {"num_prompts": 2, "input_tokens": 8_192, "output_tokens": 256,
                                           "input_len_dist": None, "output_len_dist": None, "seed": 0,
                                           "salt": None, "tokenizer": None}
    assert manifest["options"] == {"warmup": 0, "concurrency": 1, "processes": 1, "request_timeout_s": 900.0,
                                   "first_token_timeout_s": None, "request_deadline_s": None, "max_errors": None,
                                   "unreachable_grace_s": 120.0, "request_rate": None, "burstiness": 1.0,
                                   "arrival_seed": 0, "schedule": None, "max_concurrency": None, "duration_s": None,
                                   "warmup_window_s": 0.0, "cooldown_window_s": 0.0, "slo": None,
                                   "header": [], "extra_body": None}
    assert SyntheticConfig.model_validate(manifest["workload_config"]) == plan.config


def test_nightly_config_checks_each_workloads_options_before_running(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text("workloads:\n  - {name: gsm8k, options: {limit: -1}}\n")
    with pytest.raises(SparkbenchError, match="gsm8k options: limit: Input should be greater than or equal to 0"):
        load_config(path)
    path.write_text("warmup: '1'\nthresholds: {tpot_mss: 0.1}\n")
    with pytest.raises(SparkbenchError) as caught:
        load_config(path)
    assert len(str(caught.value).splitlines()) == 2
    assert "warmup: Input should be a valid integer" in str(caught.value)
    assert "not catalogue metrics: tpot_mss" in str(caught.value)


def test_nightly_cli_says_could_not_run_for_a_bad_config(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text("alpha: 2\n")
    result = CliRunner().invoke(app, ["nightly", "--config", str(path)])
    assert result.exit_code == 2


def test_a_profile_with_several_problems_names_each_in_its_own_line(tmp_path):
    from harness.guard.profiles import profile_from_dict

    with pytest.raises(SparkbenchError) as caught:
        profile_from_dict({"name": "x", "engine": "tgi", "launch": {}, "colour": 1}, tmp_path / "p.yaml")
    lines = str(caught.value).splitlines()
    assert len(lines) == 3 and all(line.startswith(f"profile {tmp_path / 'p.yaml'}: ") for line in lines)
    assert any("engine must be one of sglang, llamacpp, vllm, not 'tgi'" in line for line in lines)
    assert any(line.endswith("launch.module: Field required") for line in lines)
    assert any(line.endswith("unknown keys colour") for line in lines)
