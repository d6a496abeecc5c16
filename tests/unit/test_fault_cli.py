"""The command line when things go wrong: a killed run resumed to the same request set, credentials
that never reach a file, and one-line errors for bad input (real CLI processes, fake server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.records.requests import load_requests
from harness.records.rundir import load_manifest, load_record
from tests.fakes.broken_server import HELD, NONE, Breakage, breaking

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`

GSM8K = ["run", "gsm8k", "--limit", "6", "--max-new-tokens", "16", "--warmup", "0", "--no-progress",
         "--power-sample-ms", "0"]
KILLED_AT = 2  # the measured request a held server never answers: the run is killed while it waits


def sparkbench(*args: str, cwd: Path, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300, **kwargs)


def only_run(results: Path) -> Path:
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    return run


@contextmanager
def held_after(records: int) -> Iterator[tuple[str, list]]:
    """A server that answers the first `records` generate requests and holds the next one, so that a
    run is still under way when `kill_after_records` kills it, however slow or fast the host. Yields
    its URL and the list of requests it has received."""
    received: list = []
    with breaking(Breakage(HELD, frozenset({records})), received=received) as url:
        yield url, received


def kill_after_records(args: list[str], results: Path, received: list, records: int) -> Path:
    """Start a run, kill -9 it once `records` requests are on disk and the server has received the
    one it holds (`held_after`), and return its directory. Killed any earlier, a run that had not yet
    sent that request would leave it to the next run against the server, which would then wait on it."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=Path.cwd(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        files = list(results.glob("*/requests.jsonl"))
        if len(received) > records and files and len(files[0].read_text().splitlines()) >= records:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before {records} records were on disk"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return only_run(results)


def test_kill_9_then_resume_gives_the_clean_runs_request_set(tmp_path):
    with held_after(KILLED_AT) as (url, received):
        results = tmp_path / "killed"
        run = kill_after_records([*GSM8K, "--server", url, "--results", str(results)], results, received,
                                 records=KILLED_AT)
        assert load_record(run).seen_status == "stale"  # never "running" forever
        resumed = sparkbench(*GSM8K, "--server", url, "--results", str(results), "--resume", str(run),
                             cwd=Path.cwd())
        clean = sparkbench(*GSM8K, "--server", url, "--results", str(tmp_path / "clean"), cwd=Path.cwd())
    assert resumed.returncode == 0, resumed.stderr
    assert clean.returncode == 0, clean.stderr
    table = load_requests(run)
    assert sorted(table["prompt_id"]) == sorted(load_requests(only_run(tmp_path / "clean"))["prompt_id"])
    assert not table["prompt_id"].duplicated().any() and (table["status"] == "ok").all()
    manifest = load_manifest(run)
    assert manifest["status"] == "complete" and manifest["resumed"][0]["previous_status"] == "running"
    assert manifest["requests_recorded"] == len(table)  # the whole file, not the resumed part alone


def test_resume_refuses_a_command_that_changes_the_workload(tmp_path):
    with breaking(Breakage(NONE)) as url:
        first = sparkbench(*GSM8K, "--server", url, "--results", str(tmp_path), cwd=Path.cwd())
        assert first.returncode == 0, first.stderr
        again = sparkbench(*GSM8K[:3], "5", *GSM8K[4:], "--server", url, "--results", str(tmp_path),
                           "--resume", str(only_run(tmp_path)), cwd=Path.cwd())
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [again.stderr.strip()]
    assert "changes the workload: limit (6 -> 5)" in again.stderr


def test_resume_with_a_relative_tokenizer_from_another_folder(tmp_path):
    from tokenizers import Tokenizer, models

    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    (here / "tok").mkdir(parents=True)
    elsewhere.mkdir()
    Tokenizer(models.WordLevel({f"w{i}": i for i in range(64)}, unk_token="w0")).save(str(here / "tok" / "tokenizer.json"))
    args = ["run", "synthetic", "--num-prompts", "4", "--input-tokens", "8", "--output-tokens", "4", "--warmup", "0",
            "--no-progress", "--power-sample-ms", "0", "--max-errors", "4"]
    repo = {"PYTHONPATH": str(Path.cwd())}
    with breaking(Breakage("http_503", frozenset({1, 2}))) as url:
        first = sparkbench(*args, "--server", url, "--tokenizer", "tok", "--results", "r", cwd=here, env=repo)
        assert first.returncode == 0, first.stderr
        run = only_run(here / "r")
        again = sparkbench(*args, "--server", url, "--tokenizer", "tok", "--resume", str(run), cwd=here, env=repo)
        assert again.returncode == 0, again.stderr
        moved = sparkbench(*args, "--server", url, "--tokenizer", "../here/tok", "--resume", str(run), cwd=elsewhere,
                           env=repo)
    assert moved.returncode == 0, moved.stderr
    assert (load_requests(run)["status"] == "ok").all() and len(load_requests(run)) == 4


def test_credentials_are_sent_and_never_written(tmp_path):
    received: list[dict] = []
    with breaking(Breakage(NONE), received=received) as url:
        secret_url = url.replace("http://", "http://alice:pw-in-the-url@")
        with_password = sparkbench(*GSM8K, "--server", secret_url, "--results", str(tmp_path), cwd=Path.cwd())
        sent_basic = [r["authorization"] for r in received]
        with_key = sparkbench(*GSM8K, "--server", url, "--results", str(tmp_path), "--api-key", "sk-test-key-123",
                              cwd=Path.cwd())
        sent_bearer = [r["authorization"] for r in received[len(sent_basic):]]
    assert with_password.returncode == 0 and with_key.returncode == 0, with_password.stderr + with_key.stderr
    assert sent_basic and set(sent_basic) == {"Basic YWxpY2U6cHctaW4tdGhlLXVybA=="}  # alice:pw-in-the-url
    assert sent_bearer and set(sent_bearer) == {"Bearer sk-test-key-123"}
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len({p.parent for p in written}) >= 2
    for path in written:
        data = path.read_bytes()
        assert b"pw-in-the-url" not in data and b"sk-test-key-123" not in data, path
    printed = with_password.stdout + with_password.stderr + with_key.stdout + with_key.stderr
    assert "pw-in-the-url" not in printed and "sk-test-key-123" not in printed


def test_the_key_can_come_from_the_environment(tmp_path):
    received: list[dict] = []
    with breaking(Breakage(NONE), received=received) as url:
        done = sparkbench(*GSM8K, "--server", url, "--results", str(tmp_path), cwd=Path.cwd(),
                          env={"SPARKBENCH_API_KEY": "sk-from-env"})
    assert done.returncode == 0, done.stderr
    assert received[-1]["authorization"] == "Bearer sk-from-env"


def one_line_error(done: subprocess.CompletedProcess, code: int = 2) -> str:
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sparkbench: "), done.stderr
    return lines[0]


def test_a_malformed_url_is_one_line(tmp_path):
    assert "not a valid URL" in one_line_error(sparkbench(*GSM8K, "--server", "http://[::1", cwd=Path.cwd()))


@pytest.mark.parametrize("content", [b'["not", "a", "manifest"]', b"\xff\xfe\x00garbage", b'{"run_id": 3}'])
def test_a_corrupt_manifest_is_one_line(tmp_path, content):
    (tmp_path / "manifest.json").write_bytes(content)
    assert "corrupt" in one_line_error(sparkbench("summarize", str(tmp_path), cwd=Path.cwd()))


def test_records_with_wrong_types_or_bytes_are_one_line(tmp_path):
    with breaking(Breakage(NONE)) as url:
        assert sparkbench(*GSM8K, "--server", url, "--results", str(tmp_path), cwd=Path.cwd()).returncode == 0
    run = only_run(tmp_path)
    (run / "requests.parquet").unlink()
    (run / "requests.jsonl").write_bytes(b'[1, 2]\n{"seq": 0}\n')
    assert "not a JSON object" in one_line_error(sparkbench("summarize", str(run), cwd=Path.cwd()))
    (run / "requests.jsonl").write_bytes(b"\xff\xfe\n")
    assert "not UTF-8" in one_line_error(sparkbench("summarize", str(run), cwd=Path.cwd()))


def test_an_invalid_tokenizer_is_one_line(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{ this is not a tokenizer")
    with breaking(Breakage(NONE)) as url:
        done = sparkbench("run", "synthetic", "--server", url, "--tokenizer", str(tmp_path), "--num-prompts", "1",
                          "--input-tokens", "8", "--output-tokens", "4", "--results", str(tmp_path / "r"),
                          cwd=Path.cwd())
    assert "not a valid tokenizer file" in one_line_error(done)


def test_report_into_a_folder_that_cannot_be_made_is_one_line(tmp_path):
    with breaking(Breakage(NONE)) as url:
        assert sparkbench(*GSM8K, "--server", url, "--results", str(tmp_path / "r"), cwd=Path.cwd()).returncode == 0
    run = only_run(tmp_path / "r")
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the report folder would go")
    line = one_line_error(sparkbench("report", str(run), "--out", str(blocker / "out"), cwd=Path.cwd()))
    assert "a-file" in line or "Not a directory" in line


def test_report_on_a_run_with_no_records(tmp_path):
    with breaking(Breakage(NONE)) as url:
        assert sparkbench(*GSM8K, "--server", url, "--results", str(tmp_path / "r"), cwd=Path.cwd()).returncode == 0
    run = only_run(tmp_path / "r")
    (run / "requests.parquet").unlink()
    (run / "requests.jsonl").write_text("")
    done = sparkbench("report", str(run), "--out", str(tmp_path / "out"), cwd=Path.cwd())
    assert done.returncode in (0, 2), done.stderr
    if done.returncode == 2:
        one_line_error(done)
