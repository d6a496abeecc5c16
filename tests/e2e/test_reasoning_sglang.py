"""A reasoning stream split by the real server: SGLang's own `--reasoning-parser deepseek-r1`
(profile cpu-testbed-reasoning) streams the thinking as `delta.reasoning_content` and the answer as
`delta.content`, with its running token count on every chunk.

The tiny model's output is shaped by a regex the server enforces from the first token: the thinking
states the question's gold answer (`#### 18`), the server's parser takes `</think>` away, and the
answer is letters only. So a GSM8K scorer that read the thinking would call the question right; one
that reads the answer alone finds no number. Times are checked against the records' own stamps and
the server's counts, never against wall-clock constants.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness.analysis.run import Run
from tests.e2e.conftest import only_run_dir, sparkbench
from workloads.gsm8k import gold_answer
from workloads.gsm8k_scoring import extract_strict

QUESTION = 0  # the first test question


def _gold() -> str:
    with open("workloads/data/gsm8k/test.jsonl", encoding="utf-8") as rows:
        return gold_answer(json.loads(rows.readline())["answer"])


@pytest.fixture(scope="module")
def reasoning_run(sglang_reasoning_server, tmp_path_factory):
    results = tmp_path_factory.mktemp("reasoning")
    shaped = {"regex": f"#### {_gold()}</think>\n[a-z ]{{4,16}}",
              "custom_params": {"__sglang_reasoning_in_grammar": True}}
    done = sparkbench("run", "gsm8k", "--server", sglang_reasoning_server.base_url, "--chat", "--backend", "openai",
                      "--limit", "1", "--offset", str(QUESTION), "--temperature", "0", "--max-new-tokens", "48",
                      "--extra-body", json.dumps(shaped), "--results", str(results), "--no-progress")
    assert done.returncode == 0, done.stderr
    run = Run.load(only_run_dir(results))
    return run, run.derived.iloc[0]


def _usage(row: pd.Series) -> dict:
    return json.loads(row["meta_info_json"])["usage"]


def _first_answer_chunk(row: pd.Series) -> int:
    """Index, among the token-bearing chunks, of the first that brought answer text."""
    return int(np.flatnonzero(np.asarray(row["chunk_ns"]) == row["text_ns"][0])[0])


def test_the_server_split_the_thinking_from_the_answer(reasoning_run):
    _, row = reasoning_run
    assert row["reasoning_text"] == f"#### {_gold()}"  # the parser took `</think>` itself
    assert row["output_text"].strip() and "####" not in row["output_text"] and "think" not in row["output_text"]


def test_thinking_tokens_are_stamped_and_counted_by_the_servers_running_count(reasoning_run):
    _, row = reasoning_run
    tokens, answer = list(row["chunk_tokens"]), _first_answer_chunk(row)
    assert tokens[0] == 1 and row["first_token_ns"] == row["chunk_ns"][0]  # the first thinking token
    assert answer > 0 and tokens[answer - 1] >= len("#### ")  # thinking tokens arrived, each one stamped
    assert tokens == sorted(set(tokens))  # the server's count, never one per chunk assumed
    assert tokens[-1] == row["completion_tokens"] == _usage(row)["completion_tokens"]
    assert "chunk_token_counts" not in json.loads(row["meta_info_json"])


def test_ttft_is_to_the_first_thinking_token_and_ttfat_to_the_first_answer_token(reasoning_run):
    _, row = reasoning_run
    assert row["ttft_ms"] == pytest.approx((row["chunk_ns"][0] - row["sent_ns"]) / 1e6)
    assert row["ttfat_ms"] == pytest.approx((row["chunk_ns"][_first_answer_chunk(row)] - row["sent_ns"]) / 1e6)
    assert row["ttfat_ms"] > row["ttft_ms"]


def test_reasoning_tokens_are_the_servers_own_figure(reasoning_run):
    _, row = reasoning_run
    assert row["reasoning_tokens"] == _usage(row)["completion_tokens_details"]["reasoning_tokens"]
    assert row["reasoning_tokens"] >= row["chunk_tokens"][_first_answer_chunk(row) - 1]


def test_gsm8k_scores_the_answer_only(reasoning_run):
    run, row = reasoning_run
    assert extract_strict(row["reasoning_text"]) == _gold()  # the thinking would have scored right
    question = pd.read_parquet(run.path / "questions.parquet").iloc[0]
    assert question["gold"] == _gold()
    assert question["pred_strict"] is None and question["pred_flexible"] is None
    assert not question["correct_strict"] and not question["correct_flexible"]


def test_the_report_shows_ttft_beside_the_time_to_the_first_answer_token(reasoning_run, tmp_path):
    run, row = reasoning_run
    done = sparkbench("report", str(run.path), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "report.md").read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| run | concurrency |"))
    headline = dict(zip(*(line.strip("|").split(" | ") for line in (lines[at], lines[at + 2]))))
    # From 1,000 ms on a figure has thousands separators (a loaded host gets there).
    assert float(headline["TTFT mean ms"].replace(",", "")) == pytest.approx(row["ttft_ms"], rel=1e-3)
    assert float(headline["TTFAT mean ms"].replace(",", "")) == pytest.approx(row["ttfat_ms"], rel=1e-3)
