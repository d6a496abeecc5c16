"""Copy a model with its LM head rounded to a low-precision float format and stored back in BF16.

Run with the Python of a server environment (it needs torch and safetensors, which the harness
itself never imports):  python build_rounded_head.py SOURCE_DIR OUT_DIR MANTISSA_BITS

Each row of `lm_head.weight` (one vocabulary token) gets its own scale, amax / FMAX, so that its
largest weight lands on the format's largest finite value; the scaled row is rounded (to nearest,
ties to even) onto the grid of an OCP-style float with 4 exponent bits (bias 7, subnormals below
2^-6) and MANTISSA_BITS mantissa bits, scaled back, and stored as BF16 in an otherwise identical
checkpoint. MANTISSA_BITS = 3 is FP8 e4m3 (E4M3FN: FMAX 448, checked against torch's own cast);
fewer bits give a coarser copy (2: FMAX 384, 1: FMAX 256), for a monotone test.
Only the rounding grid is emulated; the server still runs a BF16 head. A model whose head is tied
to its input embeddings (the real test-bed model) is untied first, so that only the head is rounded.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

MIN_NORMAL_EXPONENT = -6  # 4 exponent bits, bias 7
MAX_EXPONENT = 8
HEAD = "lm_head.weight"
EMBEDDINGS = "model.embed_tokens.weight"
CONFIG = "config.json"
WEIGHTS = "model.safetensors"


def format_max(mantissa_bits: int) -> float:
    """Largest finite value: the top binade without its all-ones mantissa (reserved for NaN in E4M3FN)."""
    return (2.0 - 2.0 ** (1 - mantissa_bits)) * 2.0**MAX_EXPONENT


def round_to_grid(x: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """Round values already within +-format_max onto the float grid (nearest, ties to even)."""
    x = np.asarray(x, dtype=np.float64)
    _, exponent = np.frexp(np.abs(x))  # |x| = m * 2^exponent with m in [0.5, 1)
    binade = np.maximum(exponent - 1, MIN_NORMAL_EXPONENT)  # subnormals share the lowest spacing
    step = np.exp2(binade - mantissa_bits)
    return np.clip(np.round(x / step) * step, -format_max(mantissa_bits), format_max(mantissa_bits))


def row_scales(weight: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """float32 scale per row, amax / format_max (1 for an all-zero row)."""
    amax = np.abs(weight).max(axis=1, keepdims=True)
    return np.where(amax > 0, amax / np.float32(format_max(mantissa_bits)), np.float32(1.0)).astype(np.float32)


def round_rows(weight: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """Per-row scaled rounding of a 2-D weight (rows = output units), in float32 as a quantizer
    computes it: scale, divide and multiply back in float32, round exactly in between."""
    if not 1 <= mantissa_bits <= 3:
        raise ValueError(f"mantissa bits must be 1, 2 or 3, not {mantissa_bits}")
    w = np.asarray(weight, dtype=np.float32)
    scale = row_scales(w, mantissa_bits)
    return (round_to_grid(w / scale, mantissa_bits).astype(np.float32) * scale).astype(np.float32)


def _check_against_torch(head, mantissa_bits: int) -> None:
    """For e4m3, the emulated grid must equal torch's float8_e4m3fn cast of the same scaled rows."""
    import torch

    if mantissa_bits != 3 or not hasattr(torch, "float8_e4m3fn"):
        return
    w = head.float()
    scaled = w / torch.from_numpy(row_scales(w.numpy(), 3))
    theirs = scaled.to(torch.float8_e4m3fn).double().numpy()
    ours = round_to_grid(scaled.numpy(), 3)
    if not np.array_equal(ours, theirs):
        raise SystemExit(f"e4m3 emulation differs from torch.float8_e4m3fn at {(ours != theirs).sum()} weights")


def _untie(tensors: dict, config_path: Path) -> None:
    """Give a tied model a head of its own (a copy of its embeddings) and say so in its config."""
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if not config.get("tie_word_embeddings"):
        raise SystemExit(f"{config_path}: no {HEAD} and the embeddings are not tied")
    tensors[HEAD] = tensors[EMBEDDINGS].clone()
    config["tie_word_embeddings"] = False
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def main(source: str, out_dir: str, mantissa_bits: str) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    bits, src, out = int(mantissa_bits), Path(source), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        if path.is_file() and path.name not in (WEIGHTS, ".complete"):
            shutil.copy2(path, out / path.name)
    tensors = load_file(str(src / WEIGHTS))
    if HEAD not in tensors:
        _untie(tensors, out / CONFIG)
    head = tensors[HEAD].float()
    _check_against_torch(head, bits)
    rounded = torch.from_numpy(round_rows(head.numpy(), bits)).to(torch.bfloat16)
    changed = int((rounded != tensors[HEAD]).sum())
    tensors[HEAD] = rounded.contiguous()
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
    facts = {"source": str(src), "tensor": HEAD, "exponent_bits": 4, "mantissa_bits": bits,
             "format_max": format_max(bits), "scale": "per row: amax / format_max", "stored_as": "bfloat16",
             "weights_changed": changed, "weights_total": rounded.numel()}
    (out / "rounded_head.json").write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
