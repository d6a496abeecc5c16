"""Runs against a server that fails the way real servers and networks do: every failed request is a
record with its kind, the run goes on, and the good records are intact (both stream shapes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.engines.openai import OpenAIBackend
from harness.engines.sglang import SGLangBackend
from harness.records.requests import load_requests
from harness.records.rundir import RunDir
from harness.run.runner import RunAborted, RunOptions, execute
from harness.spec import Prompt, SamplingParams
from tests.fakes.broken_server import BREAKAGES, Breakage, breaking

TOKENS = 16
EXPECTED_KIND = {"truncated_json": "malformed_chunk", "no_done": "no_done", "disconnect": "disconnected",
                 "http_503": "http_status", "html_200": "malformed_chunk", "keepalive": "first_token_timeout",
                 "short": "short_output", "lying_count": "impossible_count", "echo_key": "http_status",
                 "gzip": "malformed_chunk", "deep_json": "malformed_chunk", "nan_json": "malformed_chunk",
                 "redirect_307": "redirect", "text_count": "impossible_count"}
CLIENTS = {"sglang": SGLangBackend, "openai": lambda: OpenAIBackend(model="fake-model", engine="vllm")}


class FixedLength:
    """`count` fixed-length greedy prompts, as the synthetic workload sends them."""

    name = "synthetic"

    def __init__(self, count: int) -> None:
        self.count = count

    def prompts(self):
        sampling = SamplingParams(max_new_tokens=TOKENS, ignore_eos=True)
        return [Prompt(f"p{i}", sampling, text=f"prompt {i}") for i in range(self.count)]

    def warmup_prompts(self, count):
        return []

    def spec(self):
        return {"name": self.name}


# A stalled stream (the keepalive fault: comments, never a token) is caught by the first-token
# deadline; a healthy request from the local fake must never reach either deadline, also when the
# host is loaded (a 1 s total deadline was reached by healthy requests at load 9).
DEADLINES = {"request_timeout_s": 30.0, "first_token_timeout_s": 3.0}


def run_against(url: str, client: str, tmp_path, count: int = 4, **options) -> RunDir:
    run = RunDir.create(tmp_path, f"run-{client}", {"workload": {"name": "synthetic"}})
    settings = RunOptions(base_url=url, warmup=0, show_progress=False, power_sample_ms=0, **{**DEADLINES, **options})
    execute(CLIENTS[client](), settings, FixedLength(count), run)
    return run


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("kind", BREAKAGES)
def test_each_fault_is_recorded_and_the_run_finishes(kind, client, tmp_path):
    with breaking(Breakage(kind, frozenset({1})), ) as url:
        run = run_against(url, client, tmp_path)
    table = load_requests(run.path)
    assert table["prompt_id"].tolist() == ["p0", "p1", "p2", "p3"]
    assert table["status"].tolist() == ["ok", "error", "ok", "ok"]
    assert table.loc[1, "error_kind"] == EXPECTED_KIND[kind]
    assert "\n" not in table.loc[1, "error_message"]
    good = table[table["status"] == "ok"]
    assert (good["completion_tokens"] == TOKENS).all() and good["chunk_ns"].map(len).eq(TOKENS).all()
    assert json.loads((run.path / "manifest.json").read_text())["status"] == "complete"


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_one_503_at_concurrency_4_cancels_no_healthy_request(client, tmp_path):
    with breaking(Breakage("http_503", frozenset({2}))) as url:
        run = run_against(url, client, tmp_path, count=8, concurrency=4)
    table = load_requests(run.path)
    assert len(table) == 8 and (table["status"] == "ok").sum() == 7


def test_a_stream_of_keep_alive_comments_ends_at_the_first_token_deadline(tmp_path):
    with breaking(Breakage("keepalive")) as url:
        run = run_against(url, "sglang", tmp_path, count=1, request_timeout_s=30.0, first_token_timeout_s=0.5)
    row = load_requests(run.path).iloc[0]
    assert row["error_kind"] == "first_token_timeout" and "no first token within 0.5 s" in row["error_message"]


def test_outcomes_the_record_judges_count_against_the_error_budget(tmp_path):
    with breaking(Breakage("short")) as url, pytest.raises(RunAborted, match="short_output 3"):
        run_against(url, "sglang", tmp_path, count=8, max_errors=2)
    (run,) = tmp_path.glob("run-*")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "more than --max-errors 2" in manifest["error"]
    assert len(load_requests(run)) == 3


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_server_claiming_a_billion_tokens_costs_no_memory(client, tmp_path):
    """The lie is recorded as its own kind, and the tables are derived in a process limited to
    1 GiB of address space above what it has already mapped (spreading 10^9 tokens takes 7.45 GiB)."""
    with breaking(Breakage("lying_count", frozenset({0}))) as url:
        run = run_against(url, client, tmp_path, count=2)
    row = load_requests(run.path).iloc[0]
    assert row["error_kind"] == "impossible_count" and "more than the 16 asked for" in row["error_message"]
    derived = subprocess.run([sys.executable, "-c", LIMITED_SUMMARY, str(run.path)], capture_output=True, text=True,
                             timeout=120)
    assert derived.returncode == 0, derived.stderr[-2000:]
    assert "requests_ok 1.0" in derived.stdout


LIMITED_SUMMARY = """
import resource, sys
from pathlib import Path
from harness.analysis.run import Run
run = Run.load(Path(sys.argv[1]))
run.requests
soft = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize() + 2**30
resource.setrlimit(resource.RLIMIT_AS, (soft, resource.RLIM_INFINITY))
summary = run.summary.set_index(['metric', 'stat'])['value']
print('requests_ok', summary['requests_ok', 'value'])
"""
