"""Server profiles: every shipped file loads and is coherent, bad files fail in one line, and the
launch command is built as the engines expect."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
import yaml

from harness.errors import SparkbenchError
from harness.guard.profiles import (
    PROFILES_DIR,
    Profile,
    list_profiles,
    load_profile,
    profile_from_dict,
)
from harness.run.embedded import launch_spec

LADDER = ("spark-baseline", "spark-humming", "spark-fp8-head", "spark-mtp")
TESTBED = ("cpu-testbed", "vllm-cpu", "vllm-cpu-ngram", "vllm-cpu-never-accept", "llamacpp-cpu",
           "llamacpp-cpu-draft", "llamacpp-cpu-synth-2", "llamacpp-cpu-synth-3", "llamacpp-cpu-synth-near-one")
SGLANG_SPECULATIVE = ("cpu-testbed-standalone", "cpu-testbed-wrong-draft", "cpu-testbed-ngram")
PYTHON = Path("/envs/engine/bin/python")
MODEL = Path("/models/tiny-llama")
STANDIN = Path("/repo/harness/testbed/sgl_kernel_cpu")


def flag_value(args: tuple[str, ...] | list[str], flag: str) -> str:
    return args[list(args).index(flag) + 1]


def write_profile(tmp_path: Path, data: dict, name: str = "custom.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


MINIMAL = {"name": "custom", "engine": "sglang", "launch": {"module": "sglang.launch_server"}}


def test_every_shipped_profile_loads_under_its_file_name():
    profiles = list_profiles()
    assert [p.name for p in profiles] == sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
    assert set(LADDER + TESTBED + SGLANG_SPECULATIVE) <= {p.name for p in profiles}
    for profile in profiles:
        assert profile.source.stem == profile.name
        assert profile.description, profile.name
        assert profile.engine in ("sglang", "vllm", "llamacpp")


@pytest.mark.parametrize("name", LADDER + TESTBED + SGLANG_SPECULATIVE)
def test_speculative_profiles_and_only_they_carry_a_canary(name):
    profile = load_profile(name)
    if profile.expects_speculation:
        assert profile.canary.min_accept_length == pytest.approx(1.05)
    else:
        assert profile.canary is None


def test_ladder_switches_one_mechanism_per_step():
    baseline, humming, fp8_head, mtp = (load_profile(name) for name in LADDER)
    assert baseline.launch.args == ("--enable-fp32-lm-head",)
    assert humming.launch.args == ("--enable-fp32-lm-head", "--moe-runner-backend", "humming")
    assert "--enable-fp32-lm-head" not in fp8_head.launch.args
    assert fp8_head.launch.env == {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    assert mtp.launch.args[: len(fp8_head.launch.args)] == fp8_head.launch.args
    assert mtp.launch.args[len(fp8_head.launch.args):] == (
        "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
    assert mtp.launch.env == fp8_head.launch.env
    assert [p.expect["lm_head_dtype"] for p in (baseline, humming, fp8_head, mtp)] == ["fp32", "fp32", "fp8", "fp8"]
    assert dict(mtp.expect["speculative"]) == {"algorithm": "NEXTN", "num_steps": 3, "num_draft_tokens": 4,
                                               "eagle_topk": 1}


def test_cpu_testbed_profile_states_the_test_bed_configuration():
    profile = load_profile("cpu-testbed")
    assert profile.engine == "sglang"
    assert profile.launch.args == ("--device", "cpu", "--disable-overlap-schedule", "--max-total-tokens", "40960",
                                   "--enable-metrics", "--attention-backend", "torch_native", "--sleep-on-idle")
    assert profile.launch.env == {"SGLANG_USE_CPU_ENGINE": "1"}
    assert profile.launch.model is None and profile.launch.draft_model is None
    assert profile.launch.cpu_kernel_standin is True
    assert profile.expect["speculative"] is None
    assert profile.expect["attention_backend"] == "torch_native"
    assert profile.expect["version"] == "0.5.23"


def test_vllm_speculative_metrics_flag_only_where_speculation_is_configured():
    # vLLM refuses --per-request-spec-decode-metrics without --speculative-config.
    for name in ("vllm-cpu", "vllm-cpu-ngram", "vllm-cpu-never-accept"):
        args = load_profile(name).launch.args
        assert ("--per-request-spec-decode-metrics" in args) == ("--speculative-config" in args), name
        assert "--enable-per-request-metrics" in args
        assert load_profile(name).launch.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    ngram = json.loads(flag_value(load_profile("vllm-cpu-ngram").launch.args, "--speculative-config"))
    assert ngram == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def test_never_accept_profile_can_never_find_an_ngram_match():
    args = load_profile("vllm-cpu-never-accept").launch.args
    config = json.loads(flag_value(args, "--speculative-config"))
    max_model_len = int(flag_value(args, "--max-model-len"))
    assert config["method"] == "ngram"
    # The proposer needs a context at least prompt_lookup_min long; the server never holds one.
    assert config["prompt_lookup_min"] > max_model_len
    assert config["prompt_lookup_min"] <= config["prompt_lookup_max"]


def test_unknown_profile_names_the_known_ones():
    with pytest.raises(SparkbenchError) as err:
        load_profile("spark-turbo")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("unknown profile 'spark-turbo'; known profiles: cpu-real, cpu-real-eagle3, cpu-real-ngram")
    assert "vllm-cpu-ngram" in message


def test_a_profile_file_loads_by_path(tmp_path):
    data = {**MINIMAL, "expect": {"speculative": {"algorithm": "EAGLE", "num_steps": 2}},
            "canary": {"min_accept_length": 1.5}}
    profile = load_profile(write_profile(tmp_path, data))
    assert profile.name == "custom"
    assert profile.canary.min_accept_length == 1.5
    assert profile.launch.args == ()


def test_speculation_without_canary_block_gets_the_default_threshold(tmp_path):
    profile = load_profile(write_profile(tmp_path, {**MINIMAL, "expect": {"speculative": {"algorithm": "EAGLE"}}}))
    assert profile.canary.min_accept_length == pytest.approx(1.05)


def test_unquoted_numbers_in_args_become_text(tmp_path):
    data = {**MINIMAL, "launch": {"module": "m", "args": ["--max-total-tokens", 40960], "env": {"N": 1}}}
    profile = load_profile(write_profile(tmp_path, data))
    assert profile.launch.args == ("--max-total-tokens", "40960")
    assert profile.launch.env == {"N": "1"}


@pytest.mark.parametrize("change, message", [
    ({"colour": "blue"}, "unknown keys colour"),
    ({"engine": "tgi"}, "engine must be one of sglang, llamacpp, vllm, not 'tgi'"),
    ({"expect": {"lm_head_dtype": "int4"}}, "expect.lm_head_dtype: Input should be 'bf16', 'fp16', 'fp32' or 'fp8'"),
    ({"expect": {"speculative": {"algorithm": "EAGLE", "depth": 3}}}, "expect.speculative: unknown keys depth"),
    ({"expect": {"speculative": None}, "canary": {"min_accept_length": 1.1}}, "a canary needs expect.speculative"),
    ({"expect": {"speculative": {"algorithm": "EAGLE"}}, "canary": {"min_accept_length": 0.5}},
     "canary.min_accept_length: Input should be greater than or equal to 1"),
    ({"launch": {"module": "m", "env": {"SGLANG_ENABLE_FP8_LM_HEAD": True}}}, "must be a string (quote it)"),
    ({"engine": "vllm", "launch": {"module": "m", "cpu_kernel_standin": True}}, "applies to sglang only"),
    ({"engine": "vllm", "launch": {"module": "m", "draft_model": "bigram"}}, "draft_model applies to sglang only"),
    ({"launch": {"module": "m", "draft_model": True}}, "must be a string"),
    ({"launch": {"args": []}}, "launch.module: Field required"),
])
def test_bad_profiles_fail_in_one_line_naming_the_file(tmp_path, change, message):
    path = write_profile(tmp_path, {**MINIMAL, **change})
    with pytest.raises(SparkbenchError) as err:
        load_profile(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_invalid_yaml_is_one_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(SparkbenchError, match="is not valid YAML") as err:
        load_profile(path)
    assert "\n" not in str(err.value)


def test_to_dict_is_json_and_round_trips():
    for profile in list_profiles():
        data = json.loads(json.dumps(profile.to_dict()))
        assert data["source"] == str(profile.source)
        rebuilt = profile_from_dict({k: v for k, v in data.items() if k != "source"}, profile.source)
        assert rebuilt == profile, profile.name


def test_sglang_launch_spec_puts_the_standin_first(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    spec = launch_spec(load_profile("cpu-testbed"), model_dir=MODEL, port=30111, env_python=PYTHON,
                       standin_dir=STANDIN)
    assert list(spec.argv) == [str(PYTHON), "-m", "sglang.launch_server", "--model-path", str(MODEL),
                               "--host", "127.0.0.1", "--port", "30111", "--device", "cpu",
                               "--disable-overlap-schedule", "--max-total-tokens", "40960", "--enable-metrics",
                               "--attention-backend", "torch_native", "--sleep-on-idle"]
    assert spec.env == {"SGLANG_USE_CPU_ENGINE": "1", "PYTHONPATH": f"{STANDIN}{os.pathsep}/elsewhere"}


@pytest.mark.parametrize("name", SGLANG_SPECULATIVE)
def test_sglang_speculative_profiles_run_on_the_stand_in_with_intel_amx(name):
    profile = load_profile(name)
    assert profile.launch.cpu_kernel_standin is True
    assert flag_value(profile.launch.args, "--attention-backend") == "intel_amx"
    assert profile.expect["attention_backend"] == "intel_amx"
    assert profile.expect["speculative"]["num_draft_tokens"] == 4
    assert flag_value(profile.launch.args, "--speculative-algorithm") == profile.expect["speculative"]["algorithm"]


def test_standalone_pair_serves_the_bigram_model_with_the_stated_drafts():
    standalone, wrong = load_profile("cpu-testbed-standalone"), load_profile("cpu-testbed-wrong-draft")
    assert (standalone.launch.model, standalone.launch.draft_model) == ("bigram", "bigram")
    assert (wrong.launch.model, wrong.launch.draft_model) == ("bigram", "wrong-draft")
    assert standalone.launch.args == wrong.launch.args  # the draft is the only difference
    assert load_profile("cpu-testbed-ngram").launch.draft_model is None


def test_launch_spec_passes_the_draft_model_folder():
    draft = Path("/models/bigram-llama")
    spec = launch_spec(load_profile("cpu-testbed-standalone"), model_dir=MODEL, port=1, env_python=PYTHON,
                       standin_dir=STANDIN, draft_model_dir=draft)
    assert flag_value(spec.argv, "--speculative-draft-model-path") == str(draft)
    with pytest.raises(SparkbenchError, match="cpu-testbed-standalone needs its draft model folder"):
        launch_spec(load_profile("cpu-testbed-standalone"), model_dir=MODEL, port=1, env_python=PYTHON,
                    standin_dir=STANDIN)


def test_standin_profile_without_standin_dir_is_refused():
    with pytest.raises(SparkbenchError, match="cpu-testbed needs the sgl_kernel stand-in folder"):
        launch_spec(load_profile("cpu-testbed"), model_dir=MODEL, port=1, env_python=PYTHON)


def test_vllm_launch_spec_names_the_served_model_and_skips_the_standin():
    profile = load_profile("vllm-cpu-ngram")
    spec = launch_spec(profile, model_dir=MODEL, port=8000, env_python=PYTHON, standin_dir=STANDIN)
    argv = list(spec.argv)
    assert argv[:12] == [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL),
                         "--host", "127.0.0.1", "--port", "8000", "--served-model-name", "tiny-llama",
                         "--max-model-len"]
    assert argv[11:] == list(profile.launch.args)
    assert spec.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    named = launch_spec(profile, model_dir=MODEL, port=8000, env_python=PYTHON, served_model_name="tiny")
    assert flag_value(named.argv, "--served-model-name") == "tiny"


def test_llamacpp_launch_spec_runs_the_binary_on_the_folders_gguf_and_its_draft():
    binary, folder = Path("/cache/llamacpp/bin/llama-server"), Path("/cache/models/tiny-gguf")
    spec = launch_spec(load_profile("llamacpp-cpu-draft"), model_dir=folder, port=8081, env_python=binary)
    argv = list(spec.argv)
    assert argv[:7] == [str(binary), "-m", str(folder / "model.gguf"), "--host", "127.0.0.1", "--port", "8081"]
    assert flag_value(argv, "--spec-draft-model") == str(folder / "draft.gguf")
    gguf = Path("/elsewhere/big.gguf")  # a single file is served as given
    assert list(launch_spec(load_profile("llamacpp-cpu"), model_dir=gguf, port=1, env_python=binary).argv)[1:3] == [
        "-m", str(gguf)]


def test_launch_spec_json_argument_survives_as_one_word():
    spec = launch_spec(load_profile("vllm-cpu-ngram"), model_dir=MODEL, port=8000, env_python=PYTHON)
    assert shlex.split(shlex.join(spec.argv)) == list(spec.argv)
    assert json.loads(flag_value(spec.argv, "--speculative-config"))["method"] == "ngram"


def test_profile_is_immutable():
    profile: Profile = load_profile("cpu-testbed")
    with pytest.raises(TypeError):
        profile.expect["version"] = "9.9"
    with pytest.raises(TypeError):
        profile.launch.env["X"] = "1"
