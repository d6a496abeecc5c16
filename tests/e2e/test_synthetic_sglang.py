"""The synthetic workload end to end against a real SGLang server (the CPU test bed), and `sparkbench serve`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest

from tests.e2e.conftest import LiveServer, only_run_dir, processes_serving_port, sparkbench, synthetic_args

INPUT, OUTPUT, PROMPTS = 1024, 24, 3


def _run_args(server, results) -> list[str]:
    return synthetic_args(server, results, PROMPTS, INPUT, OUTPUT)


@pytest.fixture(scope="module")
def synthetic_run(sglang_server, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    done = sparkbench(*_run_args(sglang_server, results))
    assert done.returncode == 0, done.stderr
    return only_run_dir(results), done


def test_server_counts_match_the_request(synthetic_run):
    run_dir, _ = synthetic_run
    table = pd.read_parquet(run_dir / "requests.parquet")
    assert len(table) == PROMPTS
    assert (table["prompt_tokens"] == INPUT).all()
    assert (table["completion_tokens"] == OUTPUT).all()
    assert (table["cached_tokens"] == 0).all()
    assert (table["finish_reason"] == "length").all()
    assert table["prompt_id"].is_unique


def test_timestamps_are_ordered(synthetic_run):
    table = pd.read_parquet(synthetic_run[0] / "requests.parquet")
    for row in table.itertuples():
        assert row.sent_ns < row.first_token_ns <= row.last_token_ns <= row.end_ns
        assert list(row.chunk_ns) == sorted(row.chunk_ns)
        assert row.chunk_tokens[-1] == OUTPUT
        assert len(row.output_ids) == OUTPUT


def test_manifest_holds_provenance_and_server_snapshot(synthetic_run):
    manifest = json.loads((synthetic_run[0] / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["requests_recorded"] == PROMPTS
    assert manifest["server"]["server_info"]["version"] == "0.5.23"
    assert "model_path" in manifest["server"]["model_info"]
    assert manifest["stream_mode"] == "cumulative"  # SGLang's default stream
    assert manifest["workload"]["input_tokens"] == INPUT and "salt" in manifest["workload"]
    assert manifest["sampling"]["temperature"] == 0.0 and manifest["sampling"]["ignore_eos"] is True
    assert manifest["prefix_cache_hits"] == 0
    assert manifest["prefix_cache_flush"] == "flushed (POST /flush_cache)"  # after warm-up, before measuring
    assert set(manifest["host"]) >= {"hostname", "python", "cpu_count"}
    assert manifest["git"]["commit"] is None or len(manifest["git"]["commit"]) == 40


def test_summary_is_printed(synthetic_run):
    _, done = synthetic_run
    for metric in ("ttft_ms", "tpot_ms", "e2e_ms", "decode_throughput_aggregate"):
        assert metric in done.stdout


def test_energy_is_measured_or_said_not_to_be(synthetic_run):
    """Where a sensor answers, energy per token is a positive figure; where none does (this CPU
    host without readable RAPL), the run says "not measured" and its energy rows are empty."""
    run_dir, done = synthetic_run
    power = json.loads((run_dir / "manifest.json").read_text())["power"]
    summary = pd.read_csv(run_dir / "summary.csv").set_index("metric")["value"]
    domains = {sensor["domain"] for sensor in power["sensors"]}
    for domain in ("gpu", "cpu_package"):
        figure = summary[f"{domain}_energy_per_output_token_j"]
        assert figure > 0 if domain in domains else pd.isna(figure)
    if power["status"] == "not measured":
        assert power["not_available"] and not (run_dir / "power.jsonl").exists()
        assert "energy: not measured (" in done.stdout
    else:
        assert power["status"] == "measured" and power["samples"] >= 2


def test_unreachable_server_is_one_line_and_exit_2(tmp_path):
    done = sparkbench("run", "synthetic", "--server", "http://127.0.0.1:9", "--results", str(tmp_path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sparkbench: cannot reach http://127.0.0.1:9")
    assert not any(tmp_path.iterdir())


def _wait_for_records(run_parent, count: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        files = list(run_parent.glob("*/requests.jsonl"))
        if files and len(files[0].read_text().splitlines()) >= count:
            return
        time.sleep(0.2)
    raise AssertionError("records did not appear")


def _start_long_run(server, results, prompts: int = 40) -> subprocess.Popen:
    args = _run_args(server, results)
    args[args.index("--num-prompts") + 1] = str(prompts)
    args[args.index("--output-tokens") + 1] = "64"
    args += ["--unreachable-grace", "3"]  # a server that is gone stops the run after a short wait
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _assert_interrupted_with_records(results) -> pd.DataFrame:
    """The run is marked interrupted, every record is in the table, and each finished request is whole."""
    run_dir = only_run_dir(results)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    table = pd.read_parquet(run_dir / "requests.parquet")
    assert manifest["status"] == "interrupted"
    assert manifest["requests_recorded"] == len(table) >= 2
    finished = table[table["status"] == "ok"]
    assert len(finished) >= 2 and (finished["completion_tokens"] == 64).all()
    return table


def test_ctrl_c_keeps_finished_requests(sglang_server, tmp_path):
    proc = _start_long_run(sglang_server, tmp_path)
    _wait_for_records(tmp_path, 2)
    proc.send_signal(2)  # SIGINT, as Ctrl-C
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    assert "interrupted" in stderr.strip().splitlines()[-1]
    _assert_interrupted_with_records(tmp_path)


@pytest.fixture(scope="module")
def served_then_stopped_mid_run(tmp_path_factory):
    """`sparkbench serve` launches the test bed; a long run goes against it, and Ctrl-C to serve takes
    the server's whole process group down while requests are running (one server for two tests)."""
    results = tmp_path_factory.mktemp("killed")
    serve = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--profile", "cpu-testbed"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = serve.stdout.readline()  # printed once the server is healthy
        url, model_dir = re.search(r"serving (\S+) at (http://127\.0\.0\.1:\d+)", line).group(2, 1)
        seen = {"health": httpx.get(url + "/health", timeout=10).status_code,
                "device": httpx.get(url + "/server_info", timeout=10).json()["device"]}
        run = _start_long_run(LiveServer(url, Path(model_dir)), results)
        _wait_for_records(results, 2)
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=60)
    _, run_stderr = run.communicate(timeout=120)
    return {**seen, "url": url, "serve": serve, "run": run, "run_stderr": run_stderr, "results": results}


def test_serve_starts_the_profile_and_ctrl_c_stops_everything(served_then_stopped_mid_run):
    served = served_then_stopped_mid_run
    assert served["health"] == 200 and served["device"] == "cpu"
    assert served["serve"].returncode == 0, served["serve"].stderr.read()
    port = served["url"].rsplit(":", 1)[1]
    assert processes_serving_port(port) == ""


def test_server_killed_mid_run_marks_run_interrupted(served_then_stopped_mid_run):
    run, stderr = served_then_stopped_mid_run["run"], served_then_stopped_mid_run["run_stderr"]
    assert run.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    # The request in flight is recorded as failed; the next ones cannot connect, past the grace period.
    assert last.startswith("sparkbench: run interrupted after") and "server unreachable" in last
    table = _assert_interrupted_with_records(served_then_stopped_mid_run["results"])
    failed = table[table["status"] != "ok"]
    assert len(failed) >= 1 and failed["error_kind"].notna().all()


def test_embedded_default_runs_labelled_and_leaves_no_server(tmp_path):
    done = sparkbench("run", "synthetic", "--num-prompts", "2", "--input-tokens", "256", "--output-tokens", "8",
                      "--results", str(tmp_path), "--no-progress")
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["scale"].startswith("REDUCED SCALE")
    assert "REDUCED SCALE" in done.stdout and "REDUCED SCALE" in done.stderr
    assert (run_dir / "server.log").stat().st_size > 0
    port = manifest["server_url"].rsplit(":", 1)[1]
    assert processes_serving_port(port) == ""
