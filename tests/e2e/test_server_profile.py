"""`--profile-server` against the real servers: SGLang's torch profiler records exactly the measured
requests into the folder the manifest and the report name; llama.cpp, which has no profiler
endpoint, is refused in one line before anything is sent.

SGLang marks each engine step in its trace (`step[EXTEND bs=1 toks=32]`, `step[DECODE bs=1]`), so
the trace itself says which requests it holds: one prefill per measured request (the warm-up's is
left out) over the prompt tokens the server counted, and one decode step per later output token.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pandas as pd
import pytest

from tests.e2e.conftest import only_run_dir, report_facts, sparkbench, synthetic_args

PROMPTS, INPUT_TOKENS, OUTPUT_TOKENS = 3, 32, 16
STEP = re.compile(r"step\[(EXTEND|DECODE) bs=(\d+)(?: toks=(\d+))?\]")


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
