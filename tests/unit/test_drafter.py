"""The learned drafter's pure parts: round simulation, training prompts kept apart from evaluated
ones, the EAGLE-3 config every engine reads, and the pinned weights."""

from __future__ import annotations

import hashlib
import json

import pytest

from harness.testbed.drafter import artifact, prompts
from harness.testbed.drafter.rounds import round_lengths, tokens_per_round
from workloads.gsm8k import load_vendored_split

REAL_CONFIG = {"hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9, "num_key_value_heads": 3,
               "num_hidden_layers": 30, "rms_norm_eps": 1e-5, "vocab_size": 49152, "rope_theta": 100000.0,
               "max_position_embeddings": 8192, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}


def test_every_draft_accepted_gives_rounds_of_four_tokens():
    matches = [[True] * 20 for _ in range(3)]
    assert round_lengths(matches, first=0, last=17) == [4, 4, 4, 4]


def test_no_draft_accepted_gives_one_token_a_round():
    matches = [[False] * 20 for _ in range(3)]
    assert round_lengths(matches, first=4, last=10) == [1, 1, 1, 1, 1]
    assert tokens_per_round(matches, first=4, last=10) == 1.0


def test_a_round_stops_at_the_first_rejected_step_and_the_next_starts_after_its_tokens():
    first, second, third = [False] * 12, [False] * 12, [False] * 12
    first[0] = second[0] = True  # round at 0: steps 0 and 1 land, step 2 does not -> 3 tokens
    first[3] = True              # round at 3: step 0 lands -> 2 tokens
    assert round_lengths([first, second, third], first=0, last=8) == [3, 2, 1, 1]


def test_the_last_round_yields_only_the_tokens_left():
    matches = [[True] * 20 for _ in range(3)]
    assert round_lengths(matches, first=0, last=4) == [3]


def test_training_questions_are_train_rows_never_test_rows():
    test_questions = {row["question"] for row in load_vendored_split("test")}
    texts = prompts.gsm8k_texts("train", 300)
    asked = [t[prompts.gsm8k_question_start(t):] for t in texts]
    assert len(texts) == 300
    assert not any(q.removeprefix("Question: ").removesuffix("\nAnswer:") in test_questions for q in asked)


def test_a_shot_is_never_asked_as_a_training_question():
    texts = prompts.gsm8k_texts("train", None)
    shared = texts[0][:prompts.gsm8k_question_start(texts[0])]
    assert len(texts) == len(load_vendored_split("train")) - 5
    assert all(t.startswith(shared) for t in texts)
    assert not any(t[len(shared):] in shared for t in texts)


def test_random_training_prompts_are_drawn_apart_from_the_workloads_and_the_heldout_ones(tmp_path, monkeypatch):
    class Vocab:
        ordinary_array = list(range(1000))

    monkeypatch.setattr(prompts, "load_vocabulary", lambda folder: Vocab)
    train = prompts.random_token_prompts(tmp_path, 3, 64, prompts.TRAIN_STREAM)
    heldout = prompts.random_token_prompts(tmp_path, 3, 64, prompts.HELDOUT_STREAM)
    workload = prompts.random_token_prompts(tmp_path, 3, 64, 0)  # the workload's default seed's stream
    assert train == prompts.random_token_prompts(tmp_path, 3, 64, prompts.TRAIN_STREAM)
    assert not {tuple(p) for p in train} & ({tuple(p) for p in heldout} | {tuple(p) for p in workload})


def test_the_draft_config_is_what_llama_cpp_recognises_as_eagle3():
    config = artifact.draft_config(REAL_CONFIG, 8192)
    assert config["draft_vocab_size"] == 8192 and config["num_hidden_layers"] == 1  # the converter's test
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["target_hidden_size"] == 576 and config["head_dim"] == 64
    # left to the engines' shared default (inputs of layers 2, n/2, n-3): SGLang adds one to explicit ids
    assert "eagle_aux_hidden_state_layer_ids" not in config
    json.dumps(config)


def test_the_kept_weights_match_their_pin():
    digest = hashlib.sha256(artifact.WEIGHTS.read_bytes()).hexdigest()
    assert digest == artifact.pinned_sha256()


def test_weights_that_do_not_match_the_pin_are_refused(tmp_path, monkeypatch):
    fake = tmp_path / "drafter.safetensors"
    fake.write_bytes(b"tampered")
    (tmp_path / "SHA256SUMS").write_text(f"{'0' * 64}  drafter.safetensors\n")
    monkeypatch.setattr(artifact, "WEIGHTS", fake)
    monkeypatch.setattr(artifact, "CHECKSUMS", tmp_path / "SHA256SUMS")
    with pytest.raises(SystemExit, match="does not match its pinned sha256"):
        artifact.check_pin(fake)
