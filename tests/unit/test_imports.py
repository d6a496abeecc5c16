"""`sparkbench import` on small hand-written files of each tool's format: the figures land per request
in the tool's own definitions where the tool kept them, as the tool's aggregates where it did not, and
bad files fail in one line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.imported import (
    imported_summary,
    load_imported_aggregates,
    load_imported_requests,
    provenance_line,
)
from harness.analysis.run import Run
from harness.errors import SparkbenchError
from harness.imports.detect import read_runs
from harness.imports.folder import write_import
from harness.records.imported import AGGREGATES_NAME, REQUESTS_NAME

LATENCY_AGGREGATES = {"mean_ttft_ms": 15.0, "median_ttft_ms": 15.0, "std_ttft_ms": 5.0, "p99_ttft_ms": 19.9,
                      "mean_tpot_ms": 4.17, "median_tpot_ms": 4.17, "mean_itl_ms": 4.17, "median_itl_ms": 4.5,
                      "mean_e2el_ms": 27.5, "median_e2el_ms": 27.5, "p99_e2el_ms": 34.85}
VLLM_PLAIN = {"date": "20261207-053000", "endpoint_type": "openai", "backend": "openai", "model_id": "tiny",
              "tokenizer_id": "/models/tiny", "num_prompts": 3, "request_rate": "inf", "max_concurrency": 1,
              "duration": 1.5, "completed": 2, "failed": 1, "total_input_tokens": 64, "total_output_tokens": 8,
              "request_throughput": 1.33, "request_goodput": None, "output_throughput": 5.3,
              "latencies": [0.020, 0.035, 0.0], **LATENCY_AGGREGATES}
# --save-detailed adds the per-request lists; the last two failed (vLLM's placeholders 0 and []), the
# fourth with the empty reason of an HTTP error that gave none.
VLLM_DETAILED = {**VLLM_PLAIN, "num_prompts": 4, "failed": 2, "latencies": [0.020, 0.035, 0.0, 0.0],
                 "input_lens": [32, 32, 32, 32], "output_lens": [4, 3, 0, 0], "ttfts": [0.010, 0.020, 0.0, 0.0],
                 "itls": [[0.003, 0.003, 0.004], [0.005, 0.005], [], []], "start_times": [1.0, 2.0, 3.0, 4.0],
                 "generated_texts": ["a b", "c", "", ""], "errors": ["", "", "Bad Request", ""]}
SGLANG_AGGREGATES = {"backend": "vllm", "dataset_name": "random", "request_rate": math.inf, "max_concurrency": 1,
                     "random_input_len": 32, "random_output_len": 4, "server_info": None, "duration": 1.0,
                     "completed": 2, "total_output_tokens": 8, "total_output_tokens_retokenized": 8,
                     "output_throughput": 8.0, "mean_e2e_latency_ms": 30.0, "median_e2e_latency_ms": 30.0,
                     "p99_e2e_latency_ms": 34.9, "mean_ttft_ms": 12.0, "median_ttft_ms": 12.0,
                     "mean_tpot_ms": 6.0, "mean_itl_ms": 6.0, "accept_length": None}
SGLANG_DETAILED = {**SGLANG_AGGREGATES, "input_lens": [32, 32], "output_lens": [4, 4], "ttfts": [0.010, 0.014],
                   "itls": [[0.005, 0.006, 0.007], [0.005, 0.006, 0.007]], "generated_texts": ["a", "b"],
                   "errors": ["", ""]}


def aiperf_record(number: int, phase: str = "profiling", error: dict | None = None) -> dict:
    metadata = {"session_num": number, "x_request_id": f"r{number}", "request_start_ns": 1759813207532900363,
                "request_end_ns": 1759813207838764604, "benchmark_phase": phase, "was_cancelled": False}
    if error:
        return {"metadata": metadata, "metrics": {"error_isl": {"value": 32, "unit": "tokens"}}, "error": error}
    metrics = {"input_sequence_length": {"value": 32, "unit": "tokens"},
               "time_to_first_token": {"value": 10.0 + number, "unit": "ms"},
               "request_latency": {"value": 25.0 + number, "unit": "ms"},
               "inter_token_latency": {"value": 5.0, "unit": "ms"},
               "inter_chunk_latency": {"value": [4.0, 5.0, 6.0], "unit": "ms"},
               "output_sequence_length": {"value": 4, "unit": "tokens"},
               "output_token_count": {"value": 4, "unit": "tokens"}}
    return {"metadata": metadata, "metrics": metrics, "error": None}


AIPERF_AGGREGATES = {"schema_version": "1.3", "aiperf_version": "0.5.0", "benchmark_id": "b",
                     "request_latency": {"unit": "ms", "avg": 25.5, "p50": 25.5, "p99": 26.0, "std": 0.5, "count": 2},
                     "time_to_first_token": {"unit": "ms", "avg": 10.5, "p50": 10.5},
                     "inter_token_latency": {"unit": "ms", "avg": 5.0},
                     "inter_chunk_latency": {"unit": "ms", "avg": 4.8},
                     "request_throughput": {"unit": "requests/sec", "avg": 3.2},
                     "input_config": {"endpoint": {"model_names": ["tiny"]}}, "was_cancelled": False}


def written(tmp_path: Path, name: str, *objs: dict) -> Path:
    path = tmp_path / name
    text = json.dumps(objs[0]) if name.endswith(".json") else "".join(json.dumps(o) + "\n" for o in objs)
    path.write_text(text, encoding="utf-8")
    return path


def imported_runs(path: Path, results: Path) -> list[Run]:
    runs = read_runs(path)
    return [Run.load(write_import(run, path, results, part if len(runs) > 1 else None))
            for part, run in enumerate(runs, start=1)]


def summary_value(run: Run, metric: str, stat: str) -> float:
    rows = run.summary[(run.summary["metric"] == metric) & (run.summary["stat"] == stat)]
    assert len(rows) == 1, (metric, stat, rows)
    return float(rows["value"].iloc[0])


def test_vllm_detailed_is_imported_per_request_in_its_definitions(tmp_path):
    (run,) = imported_runs(written(tmp_path, "vllm.json", VLLM_DETAILED), tmp_path / "results")
    rows = run.requests.set_index("prompt_id")
    assert list(rows["status"]) == ["ok", "ok", "error", "error"]
    assert rows.loc["0", "ttft_ms"] == pytest.approx(10.0) and rows.loc["1", "ttft_ms"] == pytest.approx(20.0)
    assert rows.loc["1", "e2e_ms"] == pytest.approx(35.0)
    assert rows.loc["1", "tpot_ms"] == pytest.approx((35.0 - 20.0) / (3 - 1))  # vLLM's (latency - ttft) / (n - 1)
    assert rows.loc["0", "itl_ms"] == pytest.approx([3.0, 3.0, 4.0])
    assert list(rows["completion_tokens"].iloc[:2]) == [4, 3]
    failed = rows.loc["2"]  # vLLM's placeholders (0, 0.0, []) are no figures: absent, not zero
    assert pd.isna(failed["ttft_ms"]) and pd.isna(failed["e2e_ms"]) and pd.isna(failed["completion_tokens"])
    assert failed["error_message"] == "Bad Request"
    assert run.record.imported.per_request and run.record.imported.tool == "vllm bench serve"
    assert set(run.record.imported.definitions) == {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}
    assert rows.loc["3", "error_message"] == "no chunk received" and pd.isna(rows.loc["3", "ttft_ms"])
    assert summary_value(run, "requests_failed", "value") == 2
    assert summary_value(run, "e2e_ms", "tool_p50") == 27.5  # the tool's median, as it computed it
    assert summary_value(run, "e2e_ms", "tool_p99") == 34.85
    assert summary_value(run, "ttft_ms", "tool_mean") == 15.0


def test_vllm_without_detail_holds_only_the_tools_aggregates(tmp_path):
    (run,) = imported_runs(written(tmp_path, "vllm.json", VLLM_PLAIN), tmp_path / "results")
    assert not run.record.imported.per_request
    assert "aggregates only" in run.record.imported.note
    assert not (run.path / REQUESTS_NAME).exists() and run.requests.empty
    stats = set(run.summary["stat"])
    assert stats <= {"tool_value", "tool_mean", "tool_p50", "tool_std", "tool_p99"}  # no per-request figure made up
    assert "request_goodput" not in set(run.summary["metric"])  # None in the file: not measured, absent
    assert summary_value(run, "output_throughput", "tool_value") == 5.3


def test_sglang_details_have_no_per_request_latency(tmp_path):
    (run,) = imported_runs(written(tmp_path, "sglang.jsonl", SGLANG_DETAILED), tmp_path / "results")
    rows = run.requests
    assert list(rows["ttft_ms"]) == pytest.approx([10.0, 14.0])
    assert rows["e2e_ms"].isna().all() and rows["tpot_ms"].isna().all()  # bench_serving keeps neither per request
    assert list(rows["itl_ms"].iloc[1]) == pytest.approx([5.0, 6.0, 7.0])
    assert "e2e_ms" not in set(run.summary.loc[run.summary["stat"] == "mean", "metric"])
    assert summary_value(run, "e2e_ms", "tool_p99") == 34.9
    assert summary_value(run, "tpot_ms", "tool_mean") == 6.0
    assert run.record.workload.input_tokens == 32 and run.record.workload.output_tokens == 4


def test_each_line_of_an_sglang_file_is_a_run_of_its_own(tmp_path):
    runs = imported_runs(written(tmp_path, "sglang.jsonl", SGLANG_DETAILED, SGLANG_AGGREGATES), tmp_path / "results")
    assert [run.record.imported.per_request for run in runs] == [True, False]
    assert len({run.run_id for run in runs}) == 2


def test_aiperf_records_with_their_aggregates_beside(tmp_path):
    written(tmp_path, "profile_export_aiperf.json", AIPERF_AGGREGATES)
    records = [aiperf_record(0, phase="warmup"), aiperf_record(0), aiperf_record(1),
               aiperf_record(2, error={"code": 499, "type": "RequestCancellationError", "message": "cancelled"})]
    (run,) = imported_runs(written(tmp_path, "profile_export.jsonl", *records), tmp_path / "results")
    assert run.record.imported.tool_version == "0.5.0"
    rows = run.requests
    assert list(rows["status"]) == ["ok", "ok", "error"]  # the warm-up record is left out
    assert list(rows["ttft_ms"].iloc[:2]) == pytest.approx([10.0, 11.0])
    assert list(rows["e2e_ms"].iloc[:2]) == pytest.approx([25.0, 26.0])
    assert list(rows["tpot_ms"].iloc[:2]) == pytest.approx([5.0, 5.0])  # AIPerf's "inter_token_latency"
    assert list(rows["itl_ms"].iloc[0]) == pytest.approx([4.0, 5.0, 6.0])  # its inter_chunk_latency
    assert summary_value(run, "e2e_ms", "tool_mean") == 25.5
    assert summary_value(run, "tpot_ms", "tool_mean") == 5.0  # its inter_token_latency
    assert summary_value(run, "itl_ms", "tool_mean") == 4.8  # its inter_chunk_latency
    assert summary_value(run, "request_throughput", "tool_mean") == 3.2


def test_aiperf_times_in_other_units_become_milliseconds(tmp_path):
    record = aiperf_record(0)
    record["metrics"]["time_to_first_token"] = {"value": 10_000_000, "unit": "ns"}
    (run,) = imported_runs(written(tmp_path, "profile_export.jsonl", record), tmp_path / "results")
    assert run.requests["ttft_ms"].iloc[0] == pytest.approx(10.0)


def test_aiperf_aggregates_alone_are_aggregates_only(tmp_path):
    (run,) = imported_runs(written(tmp_path, "profile_export_aiperf.json", AIPERF_AGGREGATES), tmp_path / "results")
    assert not run.record.imported.per_request and run.requests.empty
    assert summary_value(run, "ttft_ms", "tool_p50") == 10.5


@pytest.mark.parametrize(("name", "text", "says"), [
    ("bad.jsonl", '{"backend": "vllm"}\n{not json\n', "line 2 is not valid JSON"),
    ("bad.json", json.dumps({**VLLM_PLAIN, "completed": "two"}), "completed"),
    ("bad.json", json.dumps({"hello": 1}), "not a results file this import knows"),
    ("bad.json", json.dumps({**VLLM_DETAILED, "ttfts": [0.01]}), "per-request lists of different lengths"),
    ("bad.json", "[1, 2]", "is not a JSON object"),
    ("bad.json", "", "empty"),
    ("profile_export.jsonl", json.dumps({"metadata": {}, "metrics": {
        "time_to_first_token": {"value": 1.0, "unit": "fortnights"}}, "error": None}), "fortnights"),
])
def test_a_bad_file_is_refused_in_one_line(tmp_path, name, text, says):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SparkbenchError, match=says) as caught:
        read_runs(path)
    assert "\n" not in str(caught.value)


def sparkbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.cli
def test_the_command_line_imports_summarizes_compares_and_refuses(tmp_path):
    results = tmp_path / "results"
    done = sparkbench("import", str(written(tmp_path, "vllm.json", VLLM_DETAILED)), "--results", str(results))
    assert done.returncode == 0, done.stderr
    (folder,) = results.iterdir()
    summary = sparkbench("summarize", str(folder))
    assert summary.returncode == 0, summary.stderr
    assert "imported from vllm bench serve" in summary.stdout and "ttft_ms: request sent to the first" in summary.stdout
    compared = sparkbench("compare", str(folder), str(folder))
    assert compared.returncode == 0, compared.stderr
    bad = sparkbench("import", str(written(tmp_path, "bad.json", {"hello": 1})), "--results", str(results))
    assert bad.returncode == 2 and bad.stderr.startswith("sparkbench: ") and bad.stderr.count("\n") == 1
    torn = written(tmp_path, "two.jsonl", SGLANG_DETAILED, {"hello": 1})  # a good run, then a bad line
    assert sparkbench("import", str(torn), "--results", str(results)).returncode == 2
    assert list(results.iterdir()) == [folder]  # nothing of a refused file is written


AIPERF_REAL = Path(__file__).parents[1] / "fixtures" / "aiperf_0.13.0_llamacpp_smollm2"


def test_a_real_aiperf_export_reads_as_the_tool_wrote_it(tmp_path):
    """AIPerf 0.13.0's own files (`aiperf profile --streaming --isl 32 --osl 16 --request-count 4
    --warmup-request-count 1` against llama.cpp serving SmolLM2-135M, 2026-12-07)."""
    (run,) = imported_runs(AIPERF_REAL / "profile_export.jsonl", tmp_path / "results")
    aggregates = json.loads((AIPERF_REAL / "profile_export_aiperf.json").read_text(encoding="utf-8"))
    assert run.record.imported.tool_version == "0.13.0"
    assert len(run.requests) == 4 and (run.requests["status"] == "ok").all()  # its warm-up record left out
    assert [len(cell) for cell in run.requests["itl_ms"]] == [15] * 4  # 16 tokens, one per chunk
    for metric, tag in (("ttft_ms", "time_to_first_token"), ("tpot_ms", "inter_token_latency"),
                        ("e2e_ms", "request_latency"), ("itl_ms", "inter_chunk_latency")):
        assert summary_value(run, metric, "mean") == pytest.approx(aggregates[tag]["avg"])
        assert summary_value(run, metric, "tool_mean") == pytest.approx(aggregates[tag]["avg"])
    assert summary_value(run, "benchmark_duration", "tool_mean") == pytest.approx(aggregates["benchmark_duration"]["avg"] * 1000)


def test_the_provenance_line_names_the_tools_version_or_says_it_was_not_recorded(tmp_path):
    (run,) = imported_runs(written(tmp_path, "vllm.json", VLLM_DETAILED), tmp_path / "results")
    entry = run.record.imported
    stated = provenance_line(entry.model_copy(update={"tool_version": "0.11.0"}))
    assert stated.startswith("imported from vllm bench serve (0.11.0): ")
    unstated = provenance_line(entry.model_copy(update={"tool_version": None}))
    assert unstated.startswith("imported from vllm bench serve (version not recorded in the file): ")
    assert "  ttft_ms: " in unstated


def test_a_damaged_or_incomplete_import_folder_is_refused_in_one_line(tmp_path):
    (run,) = imported_runs(written(tmp_path, "vllm.json", VLLM_DETAILED), tmp_path / "results")
    assert list(imported_summary(run.path, run.record.imported, "r", "w").columns[:2]) == ["run_id", "workload"]
    (run.path / REQUESTS_NAME).write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(SparkbenchError, match="cannot be read as Parquet"):
        load_imported_requests(run.path)
    (run.path / AGGREGATES_NAME).unlink()
    with pytest.raises(SparkbenchError, match="the imported run is incomplete"):
        load_imported_aggregates(run.path)
