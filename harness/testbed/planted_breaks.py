"""Copies of a Llama checkpoint with one known conversion error, the negative controls of the
conversion proof (`conversion_check`, docs/real-model.md).

- `qk-permuted`: the q_proj and k_proj rows left in llama.cpp's GGUF order (the permutation that
  `convert_hf_to_gguf.py` applies and a correct conversion undoes, applied once more);
- `rope-base`: `rope_theta` 10,000 (the Llama default) instead of the GGUF's `llama.rope.freq_base`;
- `vocab-shifted`: the embedding rows rolled by one (token i reads row i-1; with tied embeddings
  the LM head shifts with them).

Each is a plain byte rearrangement of the safetensors file (its 8-byte header length, JSON header,
then raw tensors), so numpy does it on bf16 weights seen as 16-bit words; nothing here needs torch.
Files the break does not touch are linked, not copied.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
BREAKS = ("qk-permuted", "rope-base", "vocab-shifted")
WRONG_ROPE_THETA = 10000.0
WORD = {"BF16": np.uint16, "F16": np.uint16, "F32": np.uint32}


def gguf_permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's Q/K row order: within each head, the two rotary halves interleaved."""
    return (weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def read_safetensors(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + size]), raw[8 + size:]


def write_safetensors(path: Path, header: dict, data: bytearray) -> None:
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))


def _rewrite(header: dict, data: bytearray, name: str, change) -> None:
    entry = header[name]
    start, end = entry["data_offsets"]
    tensor = np.frombuffer(bytes(data[start:end]), dtype=WORD[entry["dtype"]]).reshape(entry["shape"])
    data[start:end] = np.ascontiguousarray(change(tensor)).tobytes()


def plant_break(kind: str, source: Path, out: Path) -> Path:
    """A copy of the checkpoint at `source` with the conversion error `kind`, written to `out`."""
    if kind not in BREAKS:
        raise ValueError(f"unknown break {kind!r}; one of {', '.join(BREAKS)}")
    source, out = Path(source), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((source / CONFIG).read_text(encoding="utf-8"))
    changed = {CONFIG, WEIGHTS} if kind != "rope-base" else {CONFIG}
    for path in source.iterdir():
        if path.is_file() and path.name not in changed:
            os.symlink(path.resolve(), out / path.name)
    if kind == "rope-base":
        config["rope_theta"] = WRONG_ROPE_THETA
        config.setdefault("rope_parameters", {})["rope_theta"] = WRONG_ROPE_THETA
    else:
        header, raw = read_safetensors(source / WEIGHTS)
        data = bytearray(raw)
        for name in header:
            if kind == "vocab-shifted" and name == "model.embed_tokens.weight":
                _rewrite(header, data, name, lambda w: np.roll(w, 1, axis=0))
            elif kind == "qk-permuted" and name.endswith("self_attn.q_proj.weight"):
                _rewrite(header, data, name, lambda w: gguf_permute(w, config["num_attention_heads"]))
            elif kind == "qk-permuted" and name.endswith("self_attn.k_proj.weight"):
                _rewrite(header, data, name, lambda w: gguf_permute(w, config["num_key_value_heads"]))
        write_safetensors(out / WEIGHTS, header, data)
    (out / CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return out
