"""`sparkbench run specbench` on real SGLang servers: two-turn conversations through the chat
template, acceptance per draft position against answers known in advance, and the report of a
speculative run beside a plain one.

The speculative servers are the test bed's STANDALONE pair (docs/speculative-testbed.md): the bigram
target with a copy of itself as draft accepts every draft (histogram `[0, 0, 0, rounds]`), and with
a draft of other weights almost none. With 129 new tokens a turn (32 rounds of 4 after the prefill
token) SGLang's accept length is 129 / 32 and the histogram's 4.0: within 1% of each other.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.analysis.run import Run
from harness.metrics.acceptance import histogram_accept_length
from tests.e2e.conftest import only_run_dir, sparkbench

QUESTIONS = ("--categories", "writing,qa", "--per-task", "1")
TOKENS = 129  # 32 full rounds after the prefill token


def _specbench(server, results, *extra: str) -> Run:
    done = sparkbench("run", "specbench", "--server", server.base_url, "--tokenizer", str(server.model_dir),
                      *QUESTIONS, "--max-new-tokens", str(TOKENS), "--results", str(results), "--no-progress", *extra)
    assert done.returncode == 0, done.stderr
    return Run.load(only_run_dir(results))


@pytest.fixture(scope="module")
def runs(sglang_standalone_server, sglang_wrong_draft_server, sglang_server, tmp_path_factory):
    """The same questions on the matching draft, the wrong draft (guard off: its canary would refuse
    it) and plain decoding."""
    return {"matching": _specbench(sglang_standalone_server, tmp_path_factory.mktemp("matching"), "--profile",
                                   "cpu-testbed-standalone"),
            "wrong": _specbench(sglang_wrong_draft_server, tmp_path_factory.mktemp("wrong"), "--no-guard"),
            "plain": _specbench(sglang_server, tmp_path_factory.mktemp("plain"), "--profile", "cpu-testbed")}


def test_the_second_turn_follows_the_models_own_first_answer(runs):
    records = runs["plain"].requests.set_index("prompt_id")
    assert list(records.index) == ["specbench-81", "specbench-321", "specbench-81/turn2"]
    second = json.loads(records.loc["specbench-81/turn2", "item_json"])
    first_answer = records.loc["specbench-81", "output_text"]
    assert second["previous_prompt_id"] == "specbench-81" and second["turn"] == 2
    assert second["chat_messages"][1] == {"role": "assistant", "content": first_answer}
    # Rendered through the model's template: the whole conversation, the assistant's turn open.
    text = records.loc["specbench-81/turn2", "prompt_text"]
    assert first_answer in text and text.endswith("<|assistant|>\n")
    assert records.loc["specbench-81/turn2", "prompt_tokens"] > records.loc["specbench-81", "prompt_tokens"]
    assert (records["status"] == "ok").all()


def test_sglang_reports_a_histogram_of_the_known_shape_per_request(runs):
    for raw in runs["matching"].requests["meta_info_json"]:
        meta = json.loads(raw)
        rounds = meta["spec_verify_ct"]
        assert meta["spec_correct_drafts_histogram"] == [0, 0, 0, rounds]


def test_a_matching_draft_accepts_every_position(runs):
    run = runs["matching"]
    summary = run.summary.set_index(["metric", "stat"])["value"]
    assert [summary[("acceptance_at_position", f"position_{k}")] for k in (1, 2, 3)] == [1.0, 1.0, 1.0]
    assert summary[("tokens_per_step_share", "tokens_4")] == 1.0
    # The histogram's accept length against the one read from spec_verify_ct, within 1%.
    assert histogram_accept_length(run.histogram.counts) == 4.0
    assert summary[("accept_length_token_weighted", "value")] == pytest.approx(4.0, rel=0.01)


def test_a_wrong_draft_accepts_almost_nothing(runs):
    run = runs["wrong"]
    summary = run.summary.set_index(["metric", "stat"])["value"]
    assert summary[("acceptance_at_position", "position_1")] < 0.05
    assert summary[("tokens_per_step_share", "tokens_1")] > 0.95
    assert histogram_accept_length(run.histogram.counts) == pytest.approx(
        summary[("accept_length_token_weighted", "value")], rel=0.01)


def test_plain_decoding_has_no_histogram_and_says_so(runs):
    assert runs["plain"].histogram.source == "not exported"
    assert pd.isna(runs["plain"].summary.set_index(["metric", "stat"])["value"][("accept_length_histogram", "value")])


def test_the_report_sets_the_speculative_run_beside_the_plain_one(runs, tmp_path):
    done = sparkbench("report", str(runs["plain"].path), str(runs["matching"].path), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "speed-up per category against" in page and "speed-up (Spec-Bench: mean request tok/s)" in page
    for figure in ("task_speedup", "acceptance_by_position", "accept_length_along_output"):
        assert list((tmp_path / "plots").rglob(f"{figure}.png")), figure
    compared = sparkbench("compare", str(runs["plain"].path), str(runs["matching"].path))
    assert compared.returncode == 0 and "speed-up per category" in compared.stdout
