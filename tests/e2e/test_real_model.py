"""The real test-bed model (SmolLM2-135M-Instruct) on real servers: its conversion, its speculation
with an answer known in advance, and the gap design end to end.

The conversion proof (docs/real-model.md) has three parts, each with a planted defect it must catch:
the checkpoint's tokenizer gives llama.cpp's own ids on a fixed text set (a tokenizer with the
byte-level split alone does not); teacher forced along GSM8K answers, the checkpoint's next-token
distributions agree with llama.cpp's within thresholds set between the measured figures of the
correct copy and of planted breaks (`conversion_check.TOP1_AT_LEAST`, `MEAN_KL_AT_MOST`), and a
copy with a wrong RoPE base fails them; greedy continuations on SGLang and llama.cpp share their
first tokens (measured: a median of 22 of 24, never fewer than 9 on 12 questions).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.compare import compare_runs
from harness.analysis.run import Run
from harness.chat import load_template, render
from harness.gap.design import FACTORS
from harness.testbed import conversion_check as cc
from harness.testbed.conversion_check import chat_prompt_ids, leading_agreement
from harness.testbed.planted_breaks import plant_break
from harness.testbed.real_model import ensure_real_hf
from tests.artifact_checks import accept_length_problems, accuracy_change_problems
from tests.e2e.conftest import only_run_dir, sparkbench
from workloads.gsm8k import load_gsm8k

QUESTIONS = 4
TOKENS = 16
GSM8K_PAIRED = 4  # questions each engine answers for the paired comparison
FIXED = 16  # output tokens of the gap design's fixed-length cells
ANSWERS = 2  # GSM8K answers teacher forced for the next-token check (81 positions)
CHEAP_BREAK = "rope-base"  # its copy links the weights and changes the config only


def test_the_converted_tokenizer_gives_the_ggufs_own_ids(real_llamacpp_server, tmp_path):
    hf = ensure_real_hf()
    template = load_template(hf)
    chats = [render(template, [{"role": "user", "content": row["question"]}]) for row in load_gsm8k("vendored").test[:4]]
    texts = (*cc.TOKENIZER_TEXTS, *chats)
    assert cc.tokenizer_mismatches(hf / "tokenizer.json", real_llamacpp_server.base_url, texts) == []
    planted = cc.byte_level_only(hf / "tokenizer.json", tmp_path / "tokenizer.json")
    assert cc.tokenizer_mismatches(planted, real_llamacpp_server.base_url, texts), "the planted tokenizer break passed"


def test_next_token_distributions_agree_with_the_gguf_and_a_planted_break_does_not(real_llamacpp_server, tmp_path):
    hf = ensure_real_hf()
    rows = load_gsm8k("vendored").test[:ANSWERS]
    sequences = cc.teacher_forced(hf, [r["question"] for r in rows], [r["answer"] for r in rows])
    top_ids, top_logprobs = cc.llamacpp_top(real_llamacpp_server.base_url, sequences)
    references = cc.reference_logprobs([hf, plant_break(CHEAP_BREAK, hf, tmp_path / CHEAP_BREAK)], sequences, top_ids)
    correct, broken = (cc.next_token_agreement(top_ids, top_logprobs, r, sequences) for r in references)
    assert len(correct.kl) >= 80
    assert correct.passes(), (correct.top1_rate, correct.mean_kl)
    assert not broken.passes(), (broken.top1_rate, broken.mean_kl)


def test_the_converted_checkpoint_answers_as_the_gguf_does(real_sglang_server, real_llamacpp_server):
    questions = [row["question"] for row in load_gsm8k("vendored").test[:QUESTIONS]]
    prompts = chat_prompt_ids(real_sglang_server.model_dir, questions)
    found = leading_agreement(("sglang", real_sglang_server.base_url), ("llamacpp", real_llamacpp_server.base_url),
                              prompts, TOKENS)
    assert min(found.leading) >= 4, found.leading
    assert found.median >= 8, found.leading


def test_gsm8k_on_the_real_model_is_scored_from_real_answers(real_llamacpp_server, tmp_path):
    """Real text: the answers end in numbers the flexible extraction finds (random weights write noise)."""
    done = sparkbench("run", "gsm8k", "--server", real_llamacpp_server.base_url, "--limit", "3",
                      "--max-new-tokens", "160", "--temperature", "0", "--results", str(tmp_path), "--no-progress")
    assert done.returncode == 0, done.stderr
    scores = pd.read_parquet(only_run_dir(tmp_path) / "questions.parquet")
    assert len(scores) == 3
    assert (~scores["no_answer_flexible"]).sum() >= 2, scores[["gold", "pred_flexible", "output_text"]].to_dict("records")


def test_the_model_drafting_for_itself_lands_nearly_every_draft(real_llamacpp_draft_server, tmp_path):
    """llama.cpp with the same GGUF as its draft, greedy: every draft matches what the target makes
    (up to a near-tie between a one-token and a four-token pass), so about 4 tokens a round."""
    done = sparkbench("run", "gsm8k", "--server", real_llamacpp_draft_server.base_url, "--profile",
                      "llamacpp-cpu-real-draft", "--limit", "2", "--max-new-tokens", "64", "--temperature", "0",
                      "--results", str(tmp_path), "--no-progress")
    assert done.returncode == 0, done.stderr
    requests = Run.load(only_run_dir(tmp_path)).derived
    manifest = json.loads((only_run_dir(tmp_path) / "manifest.json").read_text())
    assert manifest["guard"]["ok"], manifest["guard"]
    accepted = (requests["accept_length"] * requests["verify_rounds"]).sum() / requests["verify_rounds"].sum()
    assert accepted >= 3.0, requests[["accept_length", "verify_rounds"]].to_dict("records")


def test_the_gap_design_runs_and_attributes_on_llamacpp(real_llamacpp_server, real_llamacpp_ngram_server, tmp_path):
    done = sparkbench("gap", "--plain", real_llamacpp_server.base_url, "--spec", real_llamacpp_ngram_server.base_url,
                      "--contents", "synthetic,gsm8k", "--prompts", "2", "--fixed-tokens", str(FIXED),
                      "--natural-cap", "32", "--synthetic-input-tokens", "64", "--tokenizer", str(real_llamacpp_server.model_dir),
                      "--plain-profile", "llamacpp-cpu-real", "--spec-profile", "llamacpp-cpu-real-ngram",
                      "--results", str(tmp_path))
    assert done.returncode == 0, done.stderr
    folder = only_run_dir(tmp_path)
    cells = pd.read_csv(folder / "gap_cells.csv")
    attribution = pd.read_csv(folder / "gap_attribution.csv")
    assert len(cells) == 8 and (folder / "gap.png").is_file() and (folder / "gap.md").is_file()
    assert (cells["speedup"] > 0).all()
    for run in filter(Path.is_dir, (folder / "runs").iterdir()):  # each accept length is what its counters imply
        assert accept_length_problems(Run.load(run).derived) == [], run.name
    for figure, shares in attribution.groupby("figure"):
        values = shares.set_index("share")["value"]
        assert sum(values[f"shapley:{f}"] for f in FACTORS) == pytest.approx(values["delta"]), figure
    design = json.loads((folder / "gap.json").read_text())
    assert all(set(cell["runs"]) == {"plain", "speculative"} for cell in design["cells"]), design["cells"]
    runs = [json.loads((folder / "runs" / cell["runs"]["speculative"] / "manifest.json").read_text())
            for cell in design["cells"]]
    assert all(run["guard"]["ok"] for run in runs)
    fixed = cells[cells["length"] == "fixed"]
    assert (fixed["plain_mean_output_tokens"] == FIXED).all() and (fixed["spec_mean_output_tokens"] == FIXED).all()


def _greedy_gsm8k(server, results, limit: int, profile: str) -> Path:
    done = sparkbench("run", "gsm8k", "--server", server.base_url, "--profile", profile, "--limit", str(limit),
                      "--max-new-tokens", "160", "--temperature", "0", "--results", str(results), "--no-progress")
    assert done.returncode == 0, done.stderr
    return only_run_dir(results)


def test_two_engines_on_the_same_weights_are_compared_question_by_question(
        real_llamacpp_server, real_vllm_server, tmp_path):
    """GSM8K on llama.cpp (the GGUF) and on plain vLLM (the checkpoint converted from it), each
    under its real-model profile, whose guard passes: the accuracy change is paired by question,
    with the exact McNemar p-value of its discordant questions."""
    served = (("llamacpp-cpu-real", real_llamacpp_server), ("vllm-cpu-real", real_vllm_server))
    runs = [_greedy_gsm8k(server, tmp_path / profile, GSM8K_PAIRED, profile) for profile, server in served]
    for run in runs:
        assert json.loads((run / "manifest.json").read_text())["guard"]["ok"], run
    flags = [pd.read_parquet(run / "questions.parquet").set_index("question_index")["correct_strict"] for run in runs]
    row = compare_runs(runs).query("metric == 'gsm8k_accuracy_strict' and p_value == p_value").iloc[0]
    # The check is proven on a comparison with discordant questions and planted defects in
    # tests/unit/test_artifact_checks.py; two engines on the same weights may disagree on none.
    assert row["n"] == GSM8K_PAIRED and accuracy_change_problems(row, *flags) == []
