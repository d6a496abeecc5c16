"""The conversion proof's pieces on made-up numbers: the planted breaks, the KL over a support,
the agreement figures, and the tokenizer repair."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.testbed import conversion_check as cc
from harness.testbed.gguf_to_hf import split_each_numeric
from harness.testbed.planted_breaks import WEIGHTS, gguf_permute, plant_break, read_safetensors, write_safetensors


def reverse_permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """transformers' GGUF loader's undoing of llama.cpp's Q/K order (`_reverse_permute_weights`)."""
    dim = weight.shape[0] // n_head // 2
    return weight.reshape(n_head, dim, 2, *weight.shape[1:]).swapaxes(2, 1).reshape(weight.shape)


def test_the_planted_qk_order_is_the_one_a_correct_conversion_undoes():
    weight = np.arange(3 * 8 * 5).reshape(24, 5)  # 3 heads of 8 rows
    permuted = gguf_permute(weight, 3)
    assert not np.array_equal(permuted, weight)
    assert np.array_equal(reverse_permute(permuted, 3), weight)
    assert sorted(permuted[:8, 0] // 5) == list(range(8))  # rows stay inside their head
    assert list(permuted[:8, 0] // 5) == [0, 4, 1, 5, 2, 6, 3, 7]


def _checkpoint(folder):
    folder.mkdir()
    config = {"num_attention_heads": 2, "num_key_value_heads": 1, "rope_theta": 100000.0,
              "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text("{}")
    tensors = {"model.embed_tokens.weight": np.arange(12, dtype=np.uint16).reshape(6, 2),
               "model.layers.0.self_attn.q_proj.weight": np.arange(8, dtype=np.uint16).reshape(8, 1),
               "model.layers.0.self_attn.k_proj.weight": np.arange(4, dtype=np.uint16).reshape(4, 1),
               "model.layers.0.self_attn.v_proj.weight": np.arange(4, dtype=np.uint16).reshape(4, 1)}
    header, data, offset = {"__metadata__": {"format": "pt"}}, bytearray(), 0
    for name, t in tensors.items():
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        data += t.tobytes()
        offset += t.nbytes
    write_safetensors(folder / WEIGHTS, header, data)
    return tensors


def _tensors(folder):
    header, data = read_safetensors(folder / WEIGHTS)
    return {name: np.frombuffer(data[e["data_offsets"][0]:e["data_offsets"][1]], dtype=np.uint16).reshape(e["shape"])
            for name, e in header.items() if name != "__metadata__"}


@pytest.mark.parametrize("kind, changed", [
    ("vocab-shifted", {"model.embed_tokens.weight"}),
    ("qk-permuted", {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"}),
    ("rope-base", set()),
])
def test_each_planted_break_changes_exactly_what_it_names(tmp_path, kind, changed):
    original = _checkpoint(tmp_path / "hf")
    out = plant_break(kind, tmp_path / "hf", tmp_path / kind)
    found = _tensors(out)
    assert {name for name in original if not np.array_equal(found[name], original[name])} == changed
    config = json.loads((out / "config.json").read_text())
    assert config["rope_theta"] == config["rope_parameters"]["rope_theta"] == (10000.0 if kind == "rope-base" else 100000.0)
    assert (out / "tokenizer.json").read_text() == "{}"
    if kind == "vocab-shifted":
        assert np.array_equal(found["model.embed_tokens.weight"][1], original["model.embed_tokens.weight"][0])
    if kind == "qk-permuted":  # q with 2 heads, k with its 1 key-value head
        assert list(found["model.layers.0.self_attn.q_proj.weight"][:, 0]) == [0, 2, 1, 3, 4, 6, 5, 7]
        assert list(found["model.layers.0.self_attn.k_proj.weight"][:, 0]) == [0, 2, 1, 3]


def test_kl_over_the_support_is_renormalized_on_both_sides():
    p = np.log(np.array([[0.5, 0.3], [0.2, 0.2]]))
    q = np.log(np.array([[0.25, 0.25], [0.1, 0.1]]))
    # row 0: P = (5/8, 3/8), Q = (1/2, 1/2); row 1: both uniform after renormalizing
    expected = 5 / 8 * np.log(5 / 4) + 3 / 8 * np.log(3 / 4)
    assert cc.support_kl(p, q) == pytest.approx([expected, 0.0])
    assert cc.support_kl(q, p)[0] != pytest.approx(expected)  # the direction is stated: KL(llama.cpp || checkpoint)


def test_agreement_counts_top1_against_llamacpps_first_token_and_splits_by_sequence():
    sequences = [cc.Sequence([1, 2, 3], [1, 2]), cc.Sequence([4, 5], [1])]
    top_ids = np.array([[7, 8], [9, 7], [5, 6]])
    top_logprobs = np.log(np.array([[0.6, 0.4], [0.6, 0.4], [0.6, 0.4]]))
    same = (top_logprobs, np.array([7, 7, 5]))
    found = cc.next_token_agreement(top_ids, top_logprobs, same, sequences)
    assert list(found.top1) == [True, False, True]
    assert found.kl == pytest.approx([0, 0, 0])
    assert found.per_sequence() == [(0.5, pytest.approx(0.0)), (1.0, pytest.approx(0.0))]


def test_the_thresholds_pass_the_correct_copy_and_fail_the_nearest_break_on_either_figure():
    """Pooled figures measured on 8 answers (docs/real-model.md): the correct copy top-1 0.986 and
    KL 0.0033; the wrong RoPE base 0.857 and 0.151. Each figure alone must fail the break."""
    def passes(top1_rate, kl):
        hits = round(top1_rate * 1000)
        return cc.NextToken(np.array([True] * hits + [False] * (1000 - hits)), np.full(1000, kl), np.zeros(1000)).passes()

    assert passes(0.986, 0.0033)
    assert not passes(0.857, 0.151)
    assert not passes(0.857, 0.0033)
    assert not passes(0.986, 0.151)


def test_the_tokenizer_repair_splits_every_numeric_character(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import ByteLevel

    tokenizer = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = ByteLevel(add_prefix_space=False)
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    pieces = lambda: [p for p, _ in Tokenizer.from_file(str(path)).pre_tokenizer.pre_tokenize_str(" 12½x")]  # noqa: E731
    assert pieces() == ["Ġ12Â½", "x"]
    split_each_numeric(path)
    assert pieces() == ["Ġ", "1", "2", "Â½", "x"]


def test_the_tokenizer_kept_beside_the_gguf_follows_the_converted_one(tmp_path, monkeypatch):
    from harness.testbed import real_model

    hf, served = tmp_path / "hf", tmp_path / "gguf"
    hf.mkdir(), served.mkdir()
    (hf / "tokenizer.json").write_text('{"repaired": true}')
    (hf / "model.safetensors").write_text("weights")
    (served / "tokenizer.json").write_text('{"repaired": false}')
    monkeypatch.setattr(real_model, "_ensure_gguf_file", lambda: served)
    monkeypatch.setattr(real_model, "ensure_real_hf", lambda: hf)
    assert real_model.ensure_real_gguf() == served
    assert (served / "tokenizer.json").read_text() == '{"repaired": true}'
    assert not (served / "model.safetensors").exists()
