"""GSM8K end to end against the real SGLang server, checked at the wire by a recording proxy."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.e2e.conftest import only_run_dir, sparkbench
from tests.e2e.proxy import recording_proxy
from workloads.gsm8k import STOP_STRINGS

QUESTIONS, CAP = 4, 24


@pytest.fixture(scope="module")
def gsm8k_run(sglang_server, tmp_path_factory):
    results = tmp_path_factory.mktemp("gsm8k")
    with recording_proxy(sglang_server.base_url) as (proxy_url, bodies):
        done = sparkbench("run", "gsm8k", "--server", proxy_url, "--limit", str(QUESTIONS), "--offset", "10",
                          "--max-new-tokens", str(CAP), "--warmup", "1", "--results", str(results), "--no-progress")
    assert done.returncode == 0, done.stderr
    return only_run_dir(results), bodies, done


def test_every_request_carries_the_published_sampling_and_stops(gsm8k_run):
    _, bodies, _ = gsm8k_run
    generate = [b for b in bodies if "sampling_params" in b]
    assert len(generate) == QUESTIONS + 1  # one warm-up, then the questions
    seeds = []
    for body in generate:
        params = body["sampling_params"]
        seeds.append(params.pop("sampling_seed"))
        assert params == {"temperature": 0.6, "top_p": 0.95, "top_k": 29, "max_new_tokens": CAP,
                          "ignore_eos": False, "stop": list(STOP_STRINGS)}
        assert body["stream"] is True and body["text"].count("Question:") == 6
    assert seeds[1:] == [10, 11, 12, 13]  # base seed 0 + question index


def test_per_question_table_holds_prompts_outputs_predictions_and_flags(gsm8k_run):
    run_dir, bodies, _ = gsm8k_run
    questions = pd.read_parquet(run_dir / "questions.parquet")
    assert questions["question_index"].tolist() == [10, 11, 12, 13]
    for column in ("prompt_text", "output_text", "gold", "pred_strict", "pred_flexible",
                   "correct_strict", "correct_flexible", "no_answer_strict"):
        assert column in questions.columns
    assert questions["prompt_text"].tolist() == [b["text"] for b in bodies if "sampling_params" in b][1:]
    assert questions["gold"].notna().all()


def test_manifest_records_shots_template_and_sampling(gsm8k_run):
    run_dir, _, done = gsm8k_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    spec = manifest["workload"]
    assert len(spec["shot_ids"]) == 5
    assert "gsm8k_accuracy_strict" in done.stdout
