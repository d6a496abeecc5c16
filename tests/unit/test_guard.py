"""The configuration guard against a real SGLang /server_info and copies of it broken one
expectation at a time; the LM-head dtype derivation; the accept-length canary; the prefix cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.engines.vllm import vllm_server_facts
from harness.errors import SparkbenchError
from harness.guard.checks import (
    Finding,
    GuardReport,
    check_canary,
    check_contradictions,
    check_lm_head,
    check_prefix_cache,
    check_server_info,
    check_startup,
    lm_head_dtype,
)
from harness.guard.profiles import list_profiles, load_profile

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sglang_0.5.23_cpu_server_info.json"
TINY_MODEL_CONFIG = {"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16", "vocab_size": 4096}
# As in the published model: an FP4 checkpoint that leaves the LM head unquantized.
QUANTIZED_CONFIG = {"torch_dtype": "bfloat16", "quantization_config": {
    "quant_method": "modelopt", "modules_to_not_convert": ["model.embed_tokens", "lm_head"]}}
MTP_SERVER_FACTS = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                    "speculative_num_draft_tokens": 4, "speculative_eagle_topk": 1}
FP8_ENV = {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}


@pytest.fixture(scope="module")
def server_info() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def failures(findings: list[Finding]) -> list[Finding]:
    return [finding for finding in findings if not finding.ok]


def test_real_server_info_passes_the_cpu_testbed_profile(server_info):
    profile = load_profile("cpu-testbed")
    report = check_startup(profile, server_info, dict(profile.launch.env), TINY_MODEL_CONFIG)
    assert report.ok, report.format_lines()
    checked = {finding.check for finding in report.findings}
    assert checked == {"speculative_algorithm", "speculative_num_steps", "speculative_num_draft_tokens",
                       "speculative_eagle_topk", "enable_fp32_lm_head", "moe_runner_backend", "quantization",
                       "attention_backend", "version", "lm_head_precision_switches", "lm_head_dtype"}


@pytest.mark.parametrize("key, value, message", [
    ("speculative_algorithm", "EAGLE", "speculative_algorithm: expected None, server reports 'EAGLE'"),
    ("speculative_num_steps", 3, "speculative_num_steps: expected None, server reports 3"),
    ("speculative_num_draft_tokens", 4, "speculative_num_draft_tokens: expected None, server reports 4"),
    ("speculative_eagle_topk", 1, "speculative_eagle_topk: expected None, server reports 1"),
    ("enable_fp32_lm_head", True, "enable_fp32_lm_head: expected False, server reports True"),
    ("moe_runner_backend", "humming", "moe_runner_backend: expected 'auto', server reports 'humming'"),
    ("quantization", "fp8", "quantization: expected None, server reports 'fp8'"),
    ("attention_backend", "triton", "attention_backend: expected 'torch_native', server reports 'triton'"),
    ("version", "0.5.22", "version: expected sglang 0.5.23, server reports '0.5.22'"),
])
def test_each_broken_expectation_fails_with_its_own_message(server_info, key, value, message):
    broken = {**server_info, key: value}
    report = GuardReport(check_server_info(load_profile("cpu-testbed"), broken))
    assert report.format_lines().count(f"FAIL {message}") == 1, report.format_lines()
    assert len(report.failures) == 1


@pytest.mark.parametrize("key, value, message", [
    ("speculative_algorithm", "NGRAM", "speculative_algorithm: expected 'NEXTN', server reports 'NGRAM'"),
    ("speculative_num_steps", 2, "speculative_num_steps: expected 3, server reports 2"),
    ("speculative_num_draft_tokens", 8, "speculative_num_draft_tokens: expected 4, server reports 8"),
    ("speculative_eagle_topk", 4, "speculative_eagle_topk: expected 1, server reports 4"),
])
def test_each_broken_speculative_setting_fails_against_the_mtp_profile(server_info, key, value, message):
    profile = load_profile("spark-mtp")
    running = {**server_info, **MTP_SERVER_FACTS, "moe_runner_backend": "humming"}
    assert GuardReport(check_server_info(profile, running)).ok
    report = GuardReport(check_server_info(profile, {**running, key: value}))
    assert [f"{f.check}: {f.message}" for f in report.failures] == [message]


def test_nextn_is_accepted_under_sglangs_resolved_name_eagle(server_info):
    profile = load_profile("spark-mtp")
    for reported in ("EAGLE", "NEXTN", "nextn"):
        findings = check_server_info(profile, {**server_info, **MTP_SERVER_FACTS,
                                               "speculative_algorithm": reported})
        assert next(f for f in findings if f.check == "speculative_algorithm").ok, reported


def test_speculation_expected_but_off_is_refused(server_info):
    findings = failures(check_server_info(load_profile("spark-mtp"), server_info))
    assert "speculative_algorithm: expected 'NEXTN', server reports None" in [
        f"{f.check}: {f.message}" for f in findings]


def test_a_key_the_server_does_not_report_fails(server_info):
    missing = {key: value for key, value in server_info.items() if key != "attention_backend"}
    [finding] = failures(check_server_info(load_profile("cpu-testbed"), missing))
    assert finding.message == "expected 'torch_native', but the server did not report attention_backend"


@pytest.mark.parametrize("reported, ok", [("0.5.23", True), ("0.5.23+cpu", True), ("0.5.230", False),
                                          ("0.5.2", False), (None, False)])
def test_version_must_match_the_release(server_info, reported, ok):
    findings = check_server_info(load_profile("cpu-testbed"), {**server_info, "version": reported})
    assert next(f for f in findings if f.check == "version").ok is ok


def test_omitted_expectations_are_not_checked(server_info):
    # spark-baseline states nothing about the MoE backend, quantization, attention or version.
    findings = check_server_info(load_profile("spark-baseline"), {**server_info, "enable_fp32_lm_head": True})
    assert {f.check for f in findings} == {"speculative_algorithm", "speculative_num_steps",
                                           "speculative_num_draft_tokens", "speculative_eagle_topk",
                                           "enable_fp32_lm_head"}
    assert all(f.ok for f in findings)


def test_fp8_head_with_fp32_head_is_refused(server_info):
    profile = load_profile("spark-fp8-head")
    [finding] = check_contradictions(profile, {**server_info, "enable_fp32_lm_head": True}, FP8_ENV)
    assert not finding.ok
    assert finding.message.startswith("SGLANG_ENABLE_FP8_LM_HEAD=1 and enable_fp32_lm_head are both set; "
                                      "they are mutually exclusive")


def test_contradiction_is_caught_before_launch_from_the_profile_args():
    baseline = load_profile("spark-baseline")
    [finding] = check_contradictions(baseline, {}, {**baseline.launch.env, "SGLANG_ENABLE_FP8_LM_HEAD": "true"})
    assert not finding.ok


def test_no_shipped_profile_contradicts_itself():
    for profile in list_profiles():
        [finding] = check_contradictions(profile, {}, profile.launch.env)
        assert finding.ok, profile.name


def test_head_listed_in_modules_to_not_convert_stays_bf16():
    dtype, reason = lm_head_dtype(QUANTIZED_CONFIG, env={}, server_info={})
    assert dtype == "bf16"
    assert reason == "checkpoint quantization_config (modelopt) lists lm_head in modules_to_not_convert: head stays bf16"


@pytest.mark.parametrize("quant_config", [
    {"quant_method": "compressed-tensors", "ignore": ["re:.*lm_head"]},
    {"quant_method": "fp8", "ignored_layers": ["lm_head"]},
    {"quant_method": "modelopt", "exclude_modules": ["model.layers.0.mlp.gate", "lm_head*"]},
    {"quant_method": "gptq", "bits": 4, "lm_head": False},
])
def test_other_spellings_of_an_excluded_head(quant_config):
    dtype, _ = lm_head_dtype({"dtype": "bfloat16", "quantization_config": quant_config}, {}, {})
    assert dtype == "bf16"


def test_head_not_excluded_from_quantization_is_unknown():
    config = {"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "ignored_layers": []}}
    assert lm_head_dtype(config, {}, {}) == (
        "unknown", "checkpoint quantization_config (fp8) does not exclude lm_head; "
                   "whether the head is quantized depends on the model code")


def test_switches_override_the_checkpoint():
    assert lm_head_dtype(QUANTIZED_CONFIG, FP8_ENV, {"enable_fp32_lm_head": False})[0] == "fp8"
    assert lm_head_dtype(QUANTIZED_CONFIG, {}, {"enable_fp32_lm_head": True})[0] == "fp32"
    assert lm_head_dtype({**TINY_MODEL_CONFIG, "enable_lm_head_fp32": True}, {}, {})[0] == "fp32"
    assert lm_head_dtype(QUANTIZED_CONFIG, {"SGLANG_ENABLE_FP8_LM_HEAD": "0"}, {})[0] == "bf16"
    assert lm_head_dtype({}, {}, {}) == ("unknown", "no checkpoint config to read")


def test_lm_head_dtype_is_compared_with_the_profile():
    profile = load_profile("spark-fp8-head")
    assert check_lm_head(profile, QUANTIZED_CONFIG, FP8_ENV, {})[0].ok
    [finding] = check_lm_head(profile, QUANTIZED_CONFIG, {}, {"enable_fp32_lm_head": False})
    assert not finding.ok
    assert finding.message == ("expected fp8, found bf16 (checkpoint quantization_config (modelopt) lists lm_head "
                               "in modules_to_not_convert: head stays bf16)")


@pytest.mark.parametrize("accept_length, shown", [(1.0, "1.00"), (1.004, "1.00"), (0.992, "0.99")])
def test_canary_names_the_known_cause_of_unit_accept_length(accept_length, shown):
    [finding] = check_canary(load_profile("spark-mtp"), accept_length)
    assert not finding.ok
    assert finding.message.startswith(
        f"drafts never accepted: accept length {shown} is the signature of the FP8-LM-head + MTP weight-sharing "
        "bug (draft reads FP8 weights as BF16)")
    assert "\n" not in finding.message


def test_canary_passes_a_working_draft():
    [finding] = check_canary(load_profile("spark-mtp"), 1.2)
    assert finding.ok
    assert finding.message == "accept length 1.20 exceeds 1.05"


def test_canary_refuses_an_accept_length_at_or_below_the_threshold():
    [finding] = check_canary(load_profile("vllm-cpu-ngram"), 1.03)
    assert not finding.ok
    assert finding.message.startswith("accept length 1.03 does not exceed the canary's minimum 1.05")


def test_canary_refuses_missing_statistics():
    [finding] = check_canary(load_profile("spark-mtp"), None)
    assert not finding.ok
    assert finding.message == ("no verify round: the server reported no speculative statistics, or its drafter "
                               "proposed nothing, but the profile expects NEXTN")


def test_canary_has_nothing_to_check_without_speculation():
    assert check_canary(load_profile("cpu-testbed"), None) == []
    assert check_canary(load_profile("cpu-testbed"), 1.0) == []


def test_prefix_cache_clean_run_passes():
    [finding] = check_prefix_cache([0, 0, None, 0])
    assert finding.ok
    assert finding.message == "0 cached tokens across 3 requests (1 requests did not report)"


def test_prefix_cache_hits_fail_with_the_count():
    [finding] = check_prefix_cache([0, 512, None, 8])
    assert not finding.ok
    assert finding.message == ("prefix cache served 520 tokens of the synthetic prompts (2 of 4 requests): "
                               "prefill was not measured in full")


@pytest.mark.parametrize("cached", [[None, None], []])
def test_prefix_cache_unreported_cannot_pass(cached):
    [finding] = check_prefix_cache(cached)
    assert not finding.ok
    assert finding.message.startswith(f"no cached_tokens reported for any of {len(cached)} requests")


def test_report_aggregates_and_serializes():
    report = GuardReport().extend([Finding("a", True, "fine"), Finding("b", False, "expected 1, server reports 2")])
    assert not report.ok
    assert report.failures == [Finding("b", False, "expected 1, server reports 2")]
    assert report.format_lines() == ["ok   a: fine", "FAIL b: expected 1, server reports 2"]
    assert json.loads(json.dumps(report.to_dict())) == {
        "ok": False, "failures": 1,
        "findings": [{"check": "a", "ok": True, "message": "fine"},
                     {"check": "b", "ok": False, "message": "expected 1, server reports 2"}]}
    assert GuardReport().ok


def test_startup_report_collects_every_failure(server_info):
    profile = load_profile("spark-mtp")
    report = check_startup(profile, {**server_info, "enable_fp32_lm_head": True}, FP8_ENV, QUANTIZED_CONFIG)
    failed = {finding.check for finding in report.failures}
    assert {"speculative_algorithm", "enable_fp32_lm_head", "moe_runner_backend",
            "lm_head_precision_switches"} <= failed
    assert "lm_head_dtype" not in failed


def test_vllm_facts_from_launch_arguments_satisfy_the_vllm_profiles():
    for name in ("vllm-cpu", "vllm-cpu-ngram", "vllm-cpu-never-accept"):
        profile = load_profile(name)
        facts = vllm_server_facts(profile.launch.args, version="0.32.0")
        report = check_startup(profile, facts, profile.launch.env, TINY_MODEL_CONFIG)
        assert report.ok, (name, report.format_lines())


def test_vllm_facts_map_the_speculative_config():
    args = ["--speculative-config", '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}']
    assert vllm_server_facts(args, "0.32.0") == {
        "speculative_algorithm": "ngram", "speculative_num_steps": 3, "speculative_num_draft_tokens": 4,
        "speculative_eagle_topk": None, "version": "0.32.0"}
    assert vllm_server_facts(["--speculative-config={\"method\":\"ngram\"}"], None)["speculative_algorithm"] == "ngram"
    assert "version" not in vllm_server_facts([], None)


def test_vllm_facts_refuse_a_malformed_speculative_config():
    with pytest.raises(SparkbenchError, match="--speculative-config is not valid JSON"):
        vllm_server_facts(["--speculative-config", "{method: ngram}"], None)


def test_vllm_profile_with_unknown_version_fails_the_version_check():
    profile = load_profile("vllm-cpu")
    [finding] = failures(check_server_info(profile, vllm_server_facts(profile.launch.args, None)))
    assert finding.message == "expected vllm 0.32.0, but the server did not report its version"


def test_canary_counts_zero_accepted_drafts_as_never_accepted():
    # SGLang counts the prefill token: 64 tokens in 63 rounds read 1.02, yet no draft landed.
    [finding] = check_canary(load_profile("spark-mtp"), 64 / 63, accepted_drafts=0, proposed_drafts=189)
    assert not finding.ok
    assert finding.message.startswith("drafts never accepted: accept length 1.02 (0 of 189 draft tokens accepted) "
                                      "is the signature of the FP8-LM-head + MTP weight-sharing bug")
    [landed] = check_canary(load_profile("spark-mtp"), 1.5, accepted_drafts=30, proposed_drafts=90)
    assert landed.ok
