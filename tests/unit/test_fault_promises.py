"""The promises of docs/faults.md, checked across every fault case: each request the server saw is
exactly one record, ok or failed (records + errors = requests sent), and no file a failing run
writes, nor its report, holds a credential."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.records.requests import JSONL_NAME, json_lines, load_requests
from tests.fakes.broken_server import BREAKAGES, NONE, Breakage, breaking
from tests.unit.test_fault_tolerance import EXPECTED_KIND, run_against

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
