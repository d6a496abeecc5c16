"""Decode roofline arithmetic: bytes per step from config.json (dense, MoE, MLA, linear attention),
the published statement about Ling-3.0-flash on DGX Spark, device ceilings, a run's dtypes."""

from __future__ import annotations

import dataclasses
import json
import math
from types import SimpleNamespace

import pytest

from harness.analysis.reference import LING_FACTS
from harness.analysis.roofline import (
    RooflineInputs,
    kv_dtype,
    load_model_config,
    power_device,
    roofline_values,
    run_roofline,
    weight_dtypes,
)
from harness.metrics.model_bytes import Part, WeightDtypes, attention_parameters, kv_cache_bytes, weight_parts
from harness.metrics.roofline import Roofline, ceiling, decode_roofline, find_device
from harness.records.entries import PowerEntry, PowerSensorEntry
from harness.records.manifest import RunRecord

LLAMA = {"num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 512, "vocab_size": 1000,
         "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
DEEPSEEK_LIKE = {"num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 256, "vocab_size": 100,
                 "num_attention_heads": 2, "q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 4,
                 "qk_rope_head_dim": 2, "v_head_dim": 4, "n_routed_experts": 16, "num_experts_per_tok": 2,
                 "n_shared_experts": 1, "moe_intermediate_size": 32, "first_k_dense_replace": 1}


def _by_name(parts):
    return {p.name.split(" (")[0]: p for p in parts}


def test_dense_llama_reads_every_weight_but_the_embedding_table():
    parts = _by_name(weight_parts(LLAMA, WeightDtypes("bf16", "bf16")))
    d = 128 // 4
    assert parts["attention, full"].parameters == 2 * (128 * 4 * d + 2 * 128 * 2 * d + 4 * d * 128)
    assert parts["dense FFN"].parameters == 2 * 3 * 128 * 512
    assert parts["LM head"].parameters == 1000 * 128
    assert parts["embedding"].parameters == 128  # one row
    assert sum(p.bytes for p in parts.values()) == 2 * sum(p.parameters for p in parts.values())


def test_moe_reads_only_the_routed_experts_and_counts_mla_and_dense_layers():
    parts = _by_name(weight_parts(DEEPSEEK_LIKE, WeightDtypes("fp8", "bf16")))
    assert parts["routed experts"].parameters == 3 * 2 * 3 * 64 * 32  # 3 MoE layers x 2 experts
    assert parts["shared experts"].parameters == 3 * 3 * 64 * 32
    assert parts["router"].parameters == 3 * 64 * 16 and parts["router"].dtype == "bf16"
    assert parts["dense FFN"].parameters == 3 * 64 * 256
    q = 64 * 16 + 16 * 2 * 6
    assert attention_parameters(DEEPSEEK_LIKE, "mla") == q + 64 * 10 + 8 * 2 * 8 + 2 * 4 * 64
    kv, _ = kv_cache_bytes(DEEPSEEK_LIKE, 1000, 2)
    assert kv == 4 * (8 + 2) * 1000 * 2


def test_kv_cache_of_full_attention_grows_with_context():
    kv, note = kv_cache_bytes(LLAMA, 4096, 2)
    assert kv == 2 * 2 * 2 * 32 * 4096 * 2
    assert "4096 tokens" in note


def test_linear_attention_layers_counted_only_where_the_config_gives_shapes():
    config = {**LLAMA, "layer_types": ["linear_attention", "full_attention"]}
    kv, note = kv_cache_bytes(config, 4096, 2)
    assert math.isnan(kv) and "linear" in note
    config["linear_attn_config"] = {"num_heads": 4, "head_dim": 16}
    kv, _ = kv_cache_bytes(config, 4096, 2)
    assert kv == 4 * 16 * 16 * 4 + 2 * 2 * 32 * 4096 * 2


def test_published_statement_2_5_to_3_gb_per_step_is_100_to_130_gbps_at_27_71_ms():
    """The commentary: 5.1 B active parameters at about 4 bits plus the 805 MB BF16 head stream
    2.5-3 GB per step; at 27.71 ms per token that is about 100-130 GB/s."""
    facts = json.loads(LING_FACTS.read_text())
    head = _by_name(weight_parts(facts, WeightDtypes("fp4", "bf16")))["LM head"]
    assert head.bytes == pytest.approx(805e6, rel=0.001)
    as_stated = decode_roofline(facts, WeightDtypes("fp4", "bf16", unquantized="fp4"), 27.71, 33792, "bf16",
                                ceiling("NVIDIA GB10"))
    assert 2.5e9 <= as_stated.bytes_per_step <= 3.0e9
    assert 100 <= as_stated.achieved_gbps <= 130
    # With MXFP4's block scales (4.25 bits) and a BF16 router, still inside the stated band.
    scaled = decode_roofline(facts, WeightDtypes("mxfp4", "bf16"), 27.71, 33792, "bf16", ceiling("GB10"))
    assert as_stated.bytes_per_step < scaled.bytes_per_step < 3.3e9
    assert 100 <= scaled.achieved_gbps <= 130
    assert scaled.values()["roofline_fraction_of_peak"] == pytest.approx(scaled.achieved_gbps / 273)


def test_every_assumption_is_printed_with_the_figure():
    roofline = decode_roofline(LLAMA, WeightDtypes("bf16", "bf16"), 2.0, 100, "bf16", (100.0, "--peak-gbps as given"))
    text = "\n".join(roofline.lines())
    for needed in ("LM head", "x 2 B (bf16)", "KV cache", "GB per step", "GB/s of 100 GB/s peak", "--peak-gbps"):
        assert needed in text


def test_a_device_without_a_known_ceiling_says_so_and_records_no_nan():
    roofline = decode_roofline(LLAMA, WeightDtypes("bf16", "bf16"), 2.0, 100, "bf16", ceiling(None))
    text = "\n".join(roofline.lines())
    assert "no known ceiling" in text and "nan" not in text
    assert "roofline_peak_gbps" not in roofline.values() and "roofline_fraction_of_peak" not in roofline.values()


def test_device_ceilings_and_the_operator_override():
    assert find_device("NVIDIA H200").peak_gbps == 4800
    assert find_device("NVIDIA H100 PCIe").peak_gbps == 2000 and find_device("NVIDIA H100 80GB HBM3").peak_gbps == 3350
    assert ceiling("NVIDIA GB10")[0] == 273
    assert find_device("NVIDIA A100-SXM4-80GB").peak_gbps == 2039 and find_device("NVIDIA B200").peak_gbps == 8000
    assert ceiling("NVIDIA H200", peak_gbps=4000)[0] == 4000
    peak, why = ceiling(None)
    assert math.isnan(peak) and "--peak-gbps" in why


def test_served_dtypes_from_server_facts_and_checkpoint():
    quantized = {**LLAMA, "quantization_config": {"quant_method": "fp8", "modules_to_not_convert": ["lm_head"]}}
    dtypes, notes = weight_dtypes(quantized, {"dtype": "auto"}, {}, [])
    assert dtypes == WeightDtypes("fp8", "bf16", "bf16") and not notes
    dtypes, notes = weight_dtypes(LLAMA, {"enable_fp32_lm_head": True, "quantization": "modelopt_fp4"}, {}, [])
    assert dtypes.body == "nvfp4" and dtypes.lm_head == "bf16" and "FP32" in notes[0]
    dtypes, _ = weight_dtypes(LLAMA, {}, {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}, [])
    assert dtypes.lm_head == "fp8"


def test_run_roofline_needs_a_config_and_a_plain_decode_step(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    manifest = RunRecord.of({"run_id": "r", "workload": {"name": "synthetic"}, "engine": "sglang",
                             "launched_server": {"model_dir": str(tmp_path)}, "server": {"server_info": {}}})
    summary = {"decode_throughput_aggregate": 500.0, "accept_length_token_weighted": math.nan}
    roofline, source = run_roofline(manifest, summary, 1000, RooflineInputs(peak_gbps=50))
    assert source.endswith("config.json") and roofline.step_ms == 2.0 and roofline.peak_gbps == 50
    slower, _ = run_roofline(manifest, {**summary, "decode_throughput_aggregate": 300.0}, 1000)
    assert slower.step_ms == pytest.approx(1000 / 300)  # not a whole millisecond
    speculative, why = run_roofline(manifest, {**summary, "accept_length_token_weighted": 3.0}, 1000)
    assert speculative is None and "verify_cost_ratio" in why
    missing, why = run_roofline(RunRecord.of({"run_id": "r", "workload": {"name": "synthetic"}}), summary, 1000)
    assert missing is None and "--model-config" in why


def _hand_made(kv_bytes: float = 500_000.0, step_ms: float = 2.5, peak_gbps: float = 10.0) -> Roofline:
    parts = [Part("embed", 1_500_000, "bf16", "config"), Part("head", 500_000, "fp8", "checkpoint")]
    return Roofline(parts, kv_bytes, "2 layers", step_ms, peak_gbps, "as given")


def test_the_printed_figures_are_the_arithmetic_of_the_parts():
    """3 MB + 0.5 MB of weights and 0.5 MB of KV cache in 2.5 ms: 1.6 GB/s, 16% of 10."""
    roofline = _hand_made()
    assert roofline.bytes_per_step == 4_000_000 and roofline.achieved_gbps == 1.6  # 1.6e6 / 1e6, exact
    assert roofline.values()["roofline_fraction_of_peak"] == pytest.approx(0.16)
    assert _hand_made(step_ms=0.5).achieved_gbps == pytest.approx(8.0)  # a step under 1 ms
    assert _hand_made(step_ms=3000.0).achieved_gbps == pytest.approx(4e6 / 3.0 / 1e9)  # 1,333.3 bytes a ms
    assert roofline.lines() == [
        "bytes one decode step reads at batch 1:",
        "  embed: 1,500,000 weights x 2 B (bf16) = 3.000 MB  [config]",
        "  head: 500,000 weights x 1 B (fp8) = 0.500 MB  [checkpoint]",
        "  KV cache: 0.5 MB  [2 layers]",
        "  total 0.004 GB per step; step 2.500 ms; achieved 1.6 GB/s of 10 GB/s peak (16%) [as given]"]


def test_large_parts_print_in_whole_megabytes():
    big = Roofline([Part("layers", 8e9, "bf16", "config")], 1e12, "long context", 1.0, 10.0, "as given")
    assert big.lines()[1:3] == ["  layers: 8,000,000,000 weights x 2 B (bf16) = 16,000.000 MB  [config]",
                                "  KV cache: 1,000,000.0 MB  [long context]"]


def test_an_uncounted_kv_cache_adds_nothing_and_a_step_of_zero_or_a_peak_of_zero_gives_no_figure():
    assert _hand_made(kv_bytes=math.nan).bytes_per_step == 3_500_000
    assert "  KV cache: not counted  [2 layers]" in _hand_made(kv_bytes=math.nan).lines()
    assert math.isnan(_hand_made(step_ms=0.0).achieved_gbps)
    assert not _hand_made(peak_gbps=0.0).has_ceiling and _hand_made(peak_gbps=0.5).has_ceiling


def test_a_device_entry_cannot_be_changed_by_a_reader():
    with pytest.raises(dataclasses.FrozenInstanceError):
        find_device("NVIDIA H200").peak_gbps = 1.0


def test_attention_projections_by_hand_with_and_without_a_query_low_rank():
    """Shapes whose sums carry (7*3 + 3*2*6 = 57, not 21 | 36 = 53), so each term is checked."""
    mla = {"hidden_size": 7, "num_attention_heads": 2, "q_lora_rank": 3, "kv_lora_rank": 6,
           "qk_nope_head_dim": 5, "qk_rope_head_dim": 1, "v_head_dim": 4}
    rest = 7 * (6 + 1) + 6 * 2 * (5 + 4) + 2 * 4 * 7  # kv down-projection, kv up-projection, output
    assert attention_parameters(mla, "mla") == 7 * 3 + 3 * 2 * 6 + rest == 270
    assert attention_parameters({**mla, "q_lora_rank": None}, "mla") == 7 * 2 * 6 + rest == 297
    linear = {"hidden_size": 7, "linear_attn_config": {"num_heads": 3, "head_dim": 5}}
    assert attention_parameters(linear, "linear") == 4 * 7 * 3 * 5
    assert math.isnan(attention_parameters(linear, "full"))  # no softmax heads given: no figure


def test_the_gpu_named_by_the_power_sensors_is_the_first_gpu_not_the_cpu():
    domains = json.loads('["cpu_package", "gpu", "gpu"]')  # read from a manifest: equal strings, other objects
    sensors = [PowerSensorEntry(sensor=f"s{i}", device=device, method="m", domain=domain)
               for i, (device, domain) in enumerate(zip(["EPYC", "GB10", "H100"], domains))]
    assert power_device(SimpleNamespace(power=PowerEntry(sensors=sensors))) == "GB10"
    assert power_device(SimpleNamespace(power=None)) is None


def test_dtypes_come_from_the_server_else_its_flags_else_the_checkpoint():
    plain = {"torch_dtype": "bfloat16"}
    assert weight_dtypes(plain, {}, {}, ["--dtype", "float16"])[0].unquantized == "fp16"
    assert weight_dtypes(plain, {"dtype": "float32"}, {}, ["--dtype", "float16"])[0].unquantized == "fp32"
    assert weight_dtypes(plain, {}, {}, [])[0].unquantized == "bf16"
    assert weight_dtypes(plain, {}, {}, [])[1] == []  # nothing assumed
    odd = {**plain, "quantization_config": {"quant_method": "exotic"}}
    assert "checkpoint quantization 'exotic'" in weight_dtypes(odd, {}, {}, [])[1][0]
    assert kv_dtype({}, ["--kv-cache-dtype", "fp8_e5m2"], "bf16") == "fp8"
    assert kv_dtype({"kv_cache_dtype": "float16"}, ["--kv-cache-dtype", "fp8"], "bf16") == "fp16"
    assert kv_dtype({}, [], "bf16") == "bf16"


def test_a_run_without_a_model_folder_or_roofline_says_so(tmp_path):
    record = SimpleNamespace(launched_server=None, facts=SimpleNamespace(model=None))
    assert load_model_config(record, None) == ({}, "no config.json on this machine (the run names no model folder; "
                                                   "pass --model-config)")
    assert all(math.isnan(v) for v in roofline_values(None).values()) and roofline_values(None)
