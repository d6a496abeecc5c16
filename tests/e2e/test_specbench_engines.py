"""`sparkbench run specbench` through the vLLM and llama.cpp adapters: the conversation's second turn,
and acceptance per draft position from each server's per-position counters (neither reports it per
request), checked against the same server's own totals."""

from __future__ import annotations

import json

import pytest

from harness.analysis.run import Run
from harness.metrics.acceptance import histogram_accept_length
from harness.testbed.envs import ensure_model
from tests.e2e.conftest import only_run_dir, sparkbench

QUESTIONS = ("--categories", "writing,qa", "--per-task", "1", "--max-new-tokens", "48")


def _specbench(server, results, *extra: str) -> Run:
    done = sparkbench("run", "specbench", "--server", server.base_url, *QUESTIONS, "--results", str(results),
                      "--no-progress", *extra)
    assert done.returncode == 0, done.stderr
    return Run.load(only_run_dir(results))


def _turns_are_linked(run: Run) -> None:
    records = run.requests.set_index("prompt_id")
    assert list(records.index) == ["specbench-81", "specbench-321", "specbench-81/turn2"]
    second = json.loads(records.loc["specbench-81/turn2", "item_json"])
    assert second["chat_messages"][1]["content"] == records.loc["specbench-81", "output_text"]
    assert (records["status"] == "ok").all()


def _histogram_matches_the_counters(run: Run) -> None:
    """The histogram from the per-position counter deltas gives the server's own accept length,
    `1 + accepted_tokens / drafts`, and every accepted token at one position."""
    delta = run.manifest["server_counters"]["delta"]
    positions = [value for key, value in delta.items() if key.startswith("accepted_tokens_pos_")]
    assert positions and sum(positions) == delta["accepted_tokens"]
    assert run.histogram.source == "server counters over the measured requests"
    assert histogram_accept_length(run.histogram.counts) == pytest.approx(
        run.manifest["server_counters"]["accept_length"], rel=1e-12)
    rates = run.summary[run.summary["metric"] == "acceptance_at_position"]["value"].dropna()
    assert len(rates) and ((rates >= 0) & (rates <= 1)).all()


@pytest.fixture(scope="module")
def vllm_run(vllm_ngram_server, tmp_path_factory):
    """Through the OpenAI chat API: the messages as they are, vLLM applies the model's template."""
    return _specbench(vllm_ngram_server, tmp_path_factory.mktemp("vllm"), "--chat")


@pytest.fixture(scope="module")
def llamacpp_run(llamacpp_draft_server, tmp_path_factory):
    """Through llama.cpp's native /completion: the conversation rendered here, through the template
    of the model its GGUF files were made from."""
    return _specbench(llamacpp_draft_server, tmp_path_factory.mktemp("llamacpp"), "--tokenizer", str(ensure_model()))


def test_vllm_conversation_and_acceptance_by_position(vllm_run):
    _turns_are_linked(vllm_run)
    assert vllm_run.engine_and_api == ("vllm", "openai")
    _histogram_matches_the_counters(vllm_run)


def test_llamacpp_conversation_and_acceptance_by_position(llamacpp_run):
    _turns_are_linked(llamacpp_run)
    prompt = llamacpp_run.requests.set_index("prompt_id").loc["specbench-81/turn2", "prompt_text"]
    assert prompt.endswith("<|assistant|>\n")
    _histogram_matches_the_counters(llamacpp_run)
