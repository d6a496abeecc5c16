"""The promises of docs/faults.md, checked across every fault case: each request the server saw is
exactly one record, ok or failed (records + errors = requests sent), every file of each fault case's
run directory reads back (and the run summarizes), and no file a failing run writes, nor its report,
holds a credential."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import harness.records.requests as records_module
from harness.analysis.run import Run
from harness.analysis.tables import format_run_summary
from harness.errors import SparkbenchError
from harness.records.requests import JSONL_NAME, json_lines, load_requests
from harness.records.rundir import load_record
from tests.fakes.broken_server import BREAKAGES, HUGE_FIELD_CHARS, NONE, Breakage, breaking
from tests.unit.test_crash_consistency import Disk, filling
from tests.unit.test_fault_cli import held_after, kill_after_records
from tests.unit.test_fault_tolerance import EXPECTED_KIND, run_against

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`

FAULTY = frozenset({1, 4, 5})  # arrival indices that break, of 8
PASSWORD, KEY = "pw-in-the-url-7", "sk-test-key-9876"


@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("client", ["sglang", "openai"])
@pytest.mark.parametrize("kind", (NONE, *BREAKAGES))
def test_every_request_sent_is_one_record(kind, client, concurrency, tmp_path):
    received: list[dict] = []
    with breaking(Breakage(kind, FAULTY), received=received) as url:
        run = run_against(url, client, tmp_path, count=8, concurrency=concurrency, max_errors=8)
    lines = json_lines(run.path / JSONL_NAME)
    table = load_requests(run.path)
    sent = [r for r in received if r["path"] != "/flush_cache"]
    assert len(lines) == len(sent) == 8  # every request sent is recorded once, and only once
    errors = table[table["status"] == "error"]
    assert (table["status"] == "ok").sum() + len(errors) == len(sent)
    assert set(errors["error_kind"]) == ({EXPECTED_KIND[kind]} if kind != NONE else set())
    assert len(errors) == (0 if kind == NONE else len(FAULTY))


def sparkbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "SPARKBENCH_API_KEY": KEY}, timeout=300)


def test_no_output_of_a_failing_run_holds_a_credential(tmp_path):
    """A server that echoes the Authorization header in its errors, on a URL with a password:
    records, manifest, tables, report and printed lines never show either credential."""
    secrets = [PASSWORD.encode(), KEY.encode(), base64.b64encode(f"alice:{PASSWORD}".encode())]
    results = tmp_path / "results"
    with breaking(Breakage("echo_key", frozenset({0, 2, 3}))) as url:
        secret_url = url.replace("http://", f"http://alice:{PASSWORD}@")
        run = sparkbench("run", "gsm8k", "--limit", "6", "--max-new-tokens", "8", "--warmup", "0", "--no-progress",
                         "--power-sample-ms", "0", "--max-errors", "2", "--server", secret_url,
                         "--results", str(results), cwd=Path.cwd())
    assert run.returncode == 1, run.stderr  # the third echo spends the error budget
    (run_dir,) = results.iterdir()
    table = load_requests(run_dir)
    assert (table["error_kind"] == "http_status").sum() == 3 and "invalid credentials" in table["error_message"].iloc[0]
    report = sparkbench("report", str(run_dir), "--out", str(tmp_path / "report"), cwd=Path.cwd())
    summary = sparkbench("summarize", str(run_dir), cwd=Path.cwd())
    assert report.returncode == 0 and summary.returncode == 0, report.stderr + summary.stderr
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert {p.name for p in written} >= {"requests.jsonl", "requests.parquet", "manifest.json", "report.html"}
    for path in written:
        data = path.read_bytes()
        assert not [secret for secret in secrets if secret in data], path
    printed = "".join(done.stdout + done.stderr for done in (run, report, summary)).encode()
    assert not [secret for secret in secrets if secret in printed]


# How each file of a run directory is read back, by its suffix; a file with none fails the test.
READERS: dict[str, Callable[[Path], object]] = {
    ".json": lambda path: json.loads(path.read_text(encoding="utf-8")), ".jsonl": json_lines,
    ".parquet": pd.read_parquet, ".csv": pd.read_csv, ".log": lambda path: path.read_text(encoding="utf-8"),
}
SCRAPE_S = 0.05  # telemetry on, so its series are among the files read back


def _stream_fault(kind: str, client: str) -> Callable[[Path], None]:
    def run(folder: Path) -> None:
        with breaking(Breakage(kind, FAULTY)) as url:
            run_against(url, client, folder, count=8, max_errors=8, scrape_interval_s=SCRAPE_S)
    return run


def _over_the_error_budget(folder: Path) -> None:
    with breaking(Breakage("http_503")) as url:
        run_against(url, "sglang", folder, max_errors=1, scrape_interval_s=SCRAPE_S)


def _server_unreachable(folder: Path) -> None:
    run_against("http://127.0.0.1:1", "openai", folder, unreachable_grace_s=0.0, scrape_interval_s=SCRAPE_S)


def _signal_while_writing(folder: Path, monkeypatch) -> None:
    real = records_module.write_at

    def signalled(fd, data, offset):
        if len(data) >= HUGE_FIELD_CHARS:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(fd, data, offset)

    monkeypatch.setattr(records_module, "write_at", signalled)
    with breaking(Breakage("huge_field", frozenset({1}))) as url:
        run_against(url, "sglang", folder, scrape_interval_s=SCRAPE_S)


def _disk_full(folder: Path, monkeypatch) -> None:
    with breaking(Breakage(NONE)) as url, monkeypatch.context() as patch:
        filling(patch, Disk(7))  # a few records, then the disk is full
        run_against(url, "sglang", folder, scrape_interval_s=SCRAPE_S)


def _killed(folder: Path) -> None:
    with held_after(2) as (url, received):
        kill_after_records(["run", "gsm8k", "--limit", "6", "--max-new-tokens", "16", "--warmup", "0",
                            "--no-progress", "--power-sample-ms", "0", "--server", url, "--results", str(folder)],
                           folder, received, records=2)


RUN_FAULTS: dict[str, Callable] = {
    **{f"{kind}-{client}": _stream_fault(kind, client) for kind in (*BREAKAGES, "huge_field")
       for client in ("sglang", "openai")},
    "more failed requests than --max-errors": _over_the_error_budget,
    "server unreachable": _server_unreachable,
    "SIGTERM while a record is written": _signal_while_writing,
    "disk full while recording": _disk_full,
    "kill -9 mid-run": _killed,
}


def read_back(run_dir: Path) -> None:
    """Every file of `run_dir` read by its reader, the manifest as its typed record, the request
    table, and the summary that `sparkbench summarize` prints (with the tables it writes)."""
    load_record(run_dir)
    load_requests(run_dir)
    run = Run.load(run_dir)
    run.write_tables()
    format_run_summary(run, full=True)
    assert list(run.server_metrics.columns) and list(run.device_samples.columns)
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        assert path.suffix in READERS, f"{path.name}: no reader for this file"
        READERS[path.suffix](path)


@pytest.mark.parametrize("fault", RUN_FAULTS)
def test_every_file_of_a_fault_cases_run_directory_reads_back(fault, tmp_path, monkeypatch):
    case = RUN_FAULTS[fault]
    try:
        case(tmp_path, monkeypatch) if "monkeypatch" in case.__code__.co_varnames else case(tmp_path)
    except SparkbenchError as stopped:  # the run stopped, or (disk full) its manifest kept its last state
        assert "\n" not in str(stopped)
    (run_dir,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    read_back(run_dir)
