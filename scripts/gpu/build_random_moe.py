"""Build a random Qwen3-MoE checkpoint (bf16 safetensors) that uses an existing tokenizer.

    python build_random_moe.py TOKENIZER_DIR OUT_DIR [--layers N] [--experts N] [--device cuda]

The shape follows the published Qwen3-30B-A3B layer (hidden 2048, 32 query / 4 KV heads of 128,
expert width 768, top-8 routing) with 32 experts and 24 layers: about 4.1 B parameters, 1.4 B active
per token (`--experts` changes the experts' count only: each token's work stays the same, the
model's size follows). The vocabulary is the tokenizer's (the test bed's 4,096), so a small draft model built on
the same tokenizer can serve speculative decoding. Weights are random (seed 0, normal with std 0.02,
norms at 1): the text is noise, the decode cost is that of a real model of this shape.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
INIT_STD = 0.02


def moe_config(vocab_size: int, layers: int, bos_id: int, eos_id: int, experts: int = 32):
    from transformers import Qwen3MoeConfig

    return Qwen3MoeConfig(
        vocab_size=vocab_size, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
        num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
        num_experts=experts, num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], max_position_embeddings=40_960, rope_theta=1_000_000.0,
        tie_word_embeddings=False, bos_token_id=bos_id, eos_token_id=eos_id,
    )


def randomize(model, seed: int = 0) -> None:
    """Every weight drawn afresh: whatever the library's own initialisation leaves, no tensor is
    left uninitialised. Vectors (the RMS norms) are set to 1."""
    import torch

    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 1:
                param.fill_(1.0)
            else:
                param.normal_(0.0, INIT_STD, generator=generator)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokenizer_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--experts", type=int, default=32)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer, Qwen3MoeForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    config = moe_config(len(tokenizer), args.layers, tokenizer.bos_token_id, tokenizer.eos_token_id, args.experts)
    with torch.device(args.device):
        model = Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    randomize(model)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out_dir, safe_serialization=True, max_shard_size="4GB")
    for name in TOKENIZER_FILES:
        if (args.tokenizer_dir / name).exists():
            shutil.copy2(args.tokenizer_dir / name, args.out_dir / name)
    params = sum(p.numel() for p in model.parameters())
    print(f"random Qwen3-MoE: {params / 1e9:.2f} B parameters, {args.layers} layers, {args.experts} experts, "
          f"written to {args.out_dir}")


if __name__ == "__main__":
    main()
