"""Speculative decoding on the real model (SmolLM2-135M-Instruct), on SGLang and vLLM: each profile
passes its guard and canary, and a greedy GSM8K answer is recorded with the engine's own
acceptance. The llama.cpp profiles of the real model are in test_real_model.py.

Known in advance: STANDALONE with the model as its own draft, greedy, proposes exactly what the
target then makes, so nearly every round lands all 3 drafts (4 tokens a round, less only where a
near-tie flips between the draft's one-token pass and the target's four-token pass). n-gram
drafts come from earlier text, so they land only where the answer repeats: more than one token a
round on average over the canary's counting, with no bound known for a GSM8K answer.
"""

from __future__ import annotations

import json

import pytest

from harness.analysis.run import Run
from tests.artifact_checks import accept_length_problems
from tests.e2e.conftest import only_run_dir, sparkbench

PROFILES = {"real_sglang_ngram_server": "cpu-real-ngram", "real_sglang_standalone_server": "cpu-real-standalone",
            "real_vllm_ngram_server": "vllm-cpu-real-ngram"}
TOKENS = 24  # SGLang serves this model at a few tokens a second on 2 cores


@pytest.fixture(scope="module", params=sorted(PROFILES))
def served(request):
    return PROFILES[request.param], request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def answer(served, tmp_path_factory):
    profile, server = served
    results = tmp_path_factory.mktemp(profile)
    done = sparkbench("run", "gsm8k", "--server", server.base_url, "--profile", profile, "--limit", "1",
                      "--max-new-tokens", str(TOKENS), "--temperature", "0", "--results", str(results),
                      "--no-progress", "--allow-buffered")  # as in test_the_guard_and_canary_pass
    assert done.returncode == 0, done.stderr
    return profile, only_run_dir(results)


def test_the_guard_and_canary_pass(served):
    """The profile's settings and the canary's accept length pass. The stream check is not this
    test's subject (tests/e2e/test_guard.py's is): a busy CI host may hold back every canary of a
    healthy server, so it is recorded, not refused (--allow-buffered)."""
    profile, server = served
    done = sparkbench("check", "--profile", profile, "--server", server.base_url, "--allow-buffered")
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(line.startswith("ok   canary: accept length") for line in done.stdout.splitlines()), done.stdout


def test_a_greedy_answer_is_recorded_with_the_engines_acceptance(answer):
    profile, run_dir = answer
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["guard"]["ok"], manifest["guard"]
    derived = Run.load(run_dir).derived
    request = derived.iloc[0]
    assert request["status"] == "ok" and request["completion_tokens"] > 0
    assert request["verify_rounds"] >= 1 and accept_length_problems(derived) == []
    if profile == "cpu-real-standalone":
        assert request["accept_length"] >= 3.0, request[["accept_length", "verify_rounds", "completion_tokens"]].to_dict()
