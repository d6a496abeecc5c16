"""The deeper copy of a test-bed model: layers repeated byte for byte, everything else unchanged."""

from __future__ import annotations

import json
import struct

import pytest

from harness.errors import SparkbenchError
from harness.testbed.deeper import deeper_model, read_safetensors, write_safetensors


def tensor(fill: int, size: int = 8) -> tuple[dict, bytes]:
    return {"dtype": "BF16", "shape": [size // 2]}, bytes([fill]) * size


@pytest.fixture
def source(tmp_path):
    folder = tmp_path / "tiny"
    folder.mkdir()
    tensors = {"model.embed_tokens.weight": tensor(1, 16), "lm_head.weight": tensor(2),
               "model.layers.0.mlp.up_proj.weight": tensor(10), "model.layers.0.input_layernorm.weight": tensor(11),
               "model.layers.1.mlp.up_proj.weight": tensor(20), "model.layers.1.input_layernorm.weight": tensor(21)}
    write_safetensors(folder / "model.safetensors", {"format": "pt"}, tensors)
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 4}))
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_layer_k_is_a_copy_of_source_layer_k_mod_n(source, tmp_path):
    out = deeper_model(source, tmp_path / "deep", 5)
    _, tensors = read_safetensors(out / "model.safetensors")
    for k in range(5):
        assert tensors[f"model.layers.{k}.mlp.up_proj.weight"][1] == bytes([10 + 10 * (k % 2)]) * 8
        assert tensors[f"model.layers.{k}.input_layernorm.weight"][1] == bytes([11 + 10 * (k % 2)]) * 8
    assert "model.layers.5.mlp.up_proj.weight" not in tensors
    assert tensors["model.embed_tokens.weight"][1] == bytes([1]) * 16


def test_config_says_the_new_depth_and_the_rest_is_copied(source, tmp_path):
    out = deeper_model(source, tmp_path / "deep", 3)
    assert json.loads((out / "config.json").read_text()) == {"num_hidden_layers": 3, "hidden_size": 4}
    assert (out / "tokenizer.json").read_text() == "{}"
    metadata, _ = read_safetensors(out / "model.safetensors")
    assert metadata == {"format": "pt"}


def test_written_file_keeps_the_format_header_padding_and_offsets(source, tmp_path):
    out = deeper_model(source, tmp_path / "deep", 4)
    blob = (out / "model.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    assert size % 8 == 0
    header = json.loads(blob[8:8 + size])
    ends = sorted(entry["data_offsets"] for name, entry in header.items() if name != "__metadata__")
    assert ends[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:]))
    assert ends[-1][1] == len(blob) - 8 - size


def test_fewer_layers_than_the_source_is_refused(source, tmp_path):
    with pytest.raises(SparkbenchError, match="at least the source's 2 layers"):
        deeper_model(source, tmp_path / "deep", 1)
