"""A run's decode roofline: the served model's config, the dtypes it runs in, the measured step.

Inputs, in order of preference: the config.json given (`--model-config`), else the checkpoint
folder the run's server reported (launched model folder, SGLang `model_path`, vLLM model `root`)
when it is on this machine. Dtypes come from the engine's normalised facts (`EngineFacts`:
`quantization`, `dtype`, `kv_cache_dtype`, `fp32_lm_head`; the profile's launch flags and
environment) and the checkpoint's `quantization_config`. The ceiling: `--peak-gbps`, else the
device NVML named during the run (`harness.metrics.roofline.DEVICES`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from harness.guard.checks import TORCH_DTYPE_NAMES, lm_head_dtype
from harness.launch_flags import flag_value
from harness.metrics.model_bytes import DTYPE_BYTES, WeightDtypes
from harness.metrics.roofline import ROOFLINE_UNITS, Roofline, ceiling, decode_roofline
from harness.records.entries import LaunchEntry
from harness.records.manifest import RunRecord

# Quantization method names (SGLang/vLLM `--quantization`, checkpoint `quant_method`/`quant_algo`).
QUANT_DTYPES = {"fp8": "fp8", "w8a8_fp8": "fp8", "modelopt_fp8": "fp8", "fbgemm_fp8": "fp8", "mxfp4": "mxfp4",
                "modelopt_fp4": "nvfp4", "nvfp4": "nvfp4", "awq": "int4", "awq_marlin": "int4", "gptq": "int4",
                "gptq_marlin": "int4", "w4afp8": "int4", "w8a8_int8": "int8"}
KV_DTYPES = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bfloat16": "bf16", "bf16": "bf16",
             "float16": "fp16", "fp16": "fp16"}


@dataclass(frozen=True)
class RooflineInputs:
    """What the operator adds to a run's own facts."""

    model_config: Path | None = None
    peak_gbps: float | None = None


def served_facts(record: RunRecord) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(dtype facts, launch environment, launch args) of a run: the engine's normalised facts
    (`EngineFacts.dtypes`), and the profile's environment and flags where a profile was used."""
    launch = (record.profile.launch if record.profile else None) or LaunchEntry()
    return record.facts.dtypes(), dict(launch.env), list(launch.args)


def model_dir(record: RunRecord) -> str | None:
    """The checkpoint folder the run's server serves, as recorded: the launched folder, else the
    model the engine's facts name."""
    return (record.launched_server.model_dir if record.launched_server else None) or record.facts.model


def load_model_config(record: RunRecord, given: Path | None) -> tuple[dict[str, Any], str]:
    """The model's config.json and where it was read; ({}, why not) when none is on this machine."""
    folder = model_dir(record)
    path = Path(given) if given else (Path(folder) / "config.json" if folder else None)
    if path is None or not path.is_file():
        return {}, f"no config.json on this machine ({path or 'the run names no model folder'}; pass --model-config)"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SparkbenchError(f"{path}: not a model config.json (not JSON text)") from exc
    if not isinstance(config, dict):
        raise SparkbenchError(f"{path}: not a model config.json (not a JSON object)")
    return config, str(path)


def quantized_dtype(name: Any) -> str | None:
    return QUANT_DTYPES.get(str(name).lower()) if name else None


def weight_dtypes(config: Mapping[str, Any], info: Mapping[str, Any], env: Mapping[str, str],
                  args: list[str]) -> tuple[WeightDtypes, list[str]]:
    """The dtypes one decode step reads, and a note for every one that had to be assumed."""
    checkpoint = config.get("quantization_config") or {}
    unquantized = TORCH_DTYPE_NAMES.get(str(info.get("dtype") or flag_value(args, "--dtype") or ""),
                                        TORCH_DTYPE_NAMES.get(str(config.get("torch_dtype") or config.get("dtype")), "bf16"))
    body = (quantized_dtype(info.get("quantization") or flag_value(args, "--quantization"))
            or quantized_dtype(checkpoint.get("quant_algo")) or quantized_dtype(checkpoint.get("quant_method")))
    notes = [] if body or not checkpoint else [f"checkpoint quantization {checkpoint.get('quant_method')!r}: "
                                               f"bytes per weight unknown, assumed {unquantized}"]
    head, why = lm_head_dtype(config, env, info)
    if head == "fp32":
        notes.append(f"LM head in FP32 ({why}): weights read once as {unquantized}; an engine that casts the "
                     f"weight to FP32 every step moves 5x the head's bytes")
        head = unquantized
    elif head not in DTYPE_BYTES:
        notes.append(f"LM head dtype {head} ({why}): assumed {unquantized}")
        head = unquantized
    return WeightDtypes(body=body or unquantized, lm_head=head, unquantized=unquantized), notes


def kv_dtype(info: Mapping[str, Any], args: list[str], unquantized: str) -> str:
    name = str(info.get("kv_cache_dtype") or flag_value(args, "--kv-cache-dtype") or "auto").lower()
    return KV_DTYPES.get(name, unquantized)


def power_device(record: RunRecord) -> str | None:
    """The device NVML named during the run (the first GPU sensor), else None."""
    sensors = record.power.sensors if record.power else []
    return next((s.device for s in sensors if s.domain == "gpu"), None)


def run_roofline(record: RunRecord, summary: Mapping[str, float], context_tokens: float,
                 inputs: RooflineInputs = RooflineInputs()) -> tuple[Roofline | None, str]:
    """The run's roofline and where its config came from, or (None, why not).

    summary: the run's `decode_throughput_aggregate` and `accept_length_token_weighted` values.
    Step time = `1000 / decode_throughput_aggregate` ms, for runs that decode one token per step:
    a speculative round reads the experts of every position it verifies (see verify_cost_ratio).
    """
    if math.isfinite(summary.get("accept_length_token_weighted", math.nan)):
        return None, "speculative run: one round verifies several positions; see verify_cost_ratio"
    config, source = load_model_config(record, inputs.model_config)
    if not config:
        return None, source
    info, env, args = served_facts(record)
    dtypes, notes = weight_dtypes(config, info, env, args)
    step_ms = 1000 / summary.get("decode_throughput_aggregate", math.nan)
    peak = ceiling(power_device(record), inputs.peak_gbps)
    return decode_roofline(config, dtypes, step_ms, context_tokens, kv_dtype(info, args, dtypes.unquantized), peak,
                           notes), source


def roofline_values(roofline: Roofline | None) -> dict[str, float]:
    """The ROOFLINE_UNITS figures, NaN without a roofline."""
    return roofline.values() if roofline else dict.fromkeys(ROOFLINE_UNITS, math.nan)
