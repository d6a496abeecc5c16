"""Assemble the pinned drafter weights into an EAGLE-3 checkpoint folder and a llama.cpp GGUF.

The repository keeps only what training changed (`weights/drafter.safetensors.xz`, 7.3 MB, xz-compressed
by Python's lzma at preset 9e from the recipe's 10.2 MB output, pinned by sha256 in `weights/SHA256SUMS`): the fusion `fc`, the one decoder layer, the final norm and `d2t`. The
draft head is frozen rows of the target's tied embedding, so it is rebuilt here from the target's
checkpoint instead of being stored twice. The folder is what SGLang's and vLLM's `llama_eagle3`
read (`LlamaForCausalLMEagle3`, `draft_vocab_size`, `d2t`/`t2d`); llama.cpp's converter turns it
into GGUF with the target's folder for its vocabulary. Run with a Python that has torch:

    python -m harness.testbed.drafter.artifact TARGET_HF_DIR OUT_DIR [WEIGHTS]
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

WEIGHTS = Path(__file__).parent / "weights" / "drafter.safetensors.xz"
CHECKSUMS = WEIGHTS.parent / "SHA256SUMS"
ARCHITECTURE = "LlamaForCausalLMEagle3"


def pinned_sha256(weights: Path = WEIGHTS) -> str:
    for line in CHECKSUMS.read_text().splitlines():
        digest, name = line.split()
        if name == weights.name:
            return digest
    raise SystemExit(f"sparkbench: {weights.name} has no line in {CHECKSUMS}")


def check_pin(weights: Path) -> None:
    actual = hashlib.sha256(weights.read_bytes()).hexdigest()
    if weights == WEIGHTS and actual != pinned_sha256(weights):
        raise SystemExit(f"sparkbench: {weights} does not match its pinned sha256 in {CHECKSUMS}")


def read_tensors(weights: Path) -> dict:
    """The tensors of a recipe's output, or of its xz-compressed copy (`.xz`)."""
    import lzma

    from safetensors.torch import load

    data = weights.read_bytes()
    return load(lzma.decompress(data) if weights.suffix == ".xz" else data)


def draft_config(target: dict, draft_vocab: int) -> dict:
    """The target's block shape, one layer, the reduced vocabulary; the feature layers are left to
    each engine's default (inputs of layers 2, n/2, n-3), which SGLang and llama.cpp read alike."""
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
            "max_position_embeddings", "vocab_size", "hidden_act", "bos_token_id", "eos_token_id", "rope_theta")
    config = {k: target[k] for k in keep if k in target}
    config.update(architectures=[ARCHITECTURE], model_type="llama", num_hidden_layers=1,
                  head_dim=target["hidden_size"] // target["num_attention_heads"], draft_vocab_size=draft_vocab,
                  target_hidden_size=target["hidden_size"], tie_word_embeddings=False, torch_dtype="bfloat16")
    return config


def assemble(target_dir: Path, out: Path, weights: Path = WEIGHTS) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    check_pin(weights)
    tensors = read_tensors(weights)
    embed = load_file(str(target_dir / "model.safetensors"))["model.embed_tokens.weight"]
    d2t = tensors["d2t"].long()
    target_ids = d2t + torch.arange(len(d2t))
    tensors["lm_head.weight"] = embed[target_ids].to(torch.bfloat16).contiguous()
    t2d = torch.zeros(embed.shape[0], dtype=torch.bool)
    t2d[target_ids] = True
    tensors["t2d"] = t2d
    target = json.loads((target_dir / "config.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(draft_config(target, len(d2t)), indent=2) + "\n")
    return out


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    print(assemble(Path(sys.argv[1]), Path(sys.argv[2]), *(Path(a) for a in sys.argv[3:])))
