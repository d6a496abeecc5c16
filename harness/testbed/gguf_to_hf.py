"""Convert a Llama GGUF file into a bf16 Hugging Face checkpoint that SGLang and vLLM serve.

Run with the Python of a server environment (it needs torch, transformers, gguf and accelerate,
which the harness itself never imports):  python gguf_to_hf.py GGUF_FILE OUT_DIR

transformers' GGUF loader dequantizes the tensors (undoing llama.cpp's Q/K row permutation) and
rebuilds the tokenizer and chat template from the GGUF metadata. Its `save_pretrained` refuses a
GGUF-loaded model, so the state dict is written with safetensors and the config without its
`quantization_config`. Two facts the loader leaves out are put back from the GGUF's own metadata:
`architectures` (empty in transformers 5, and SGLang picks its model class by it) and `rope_theta`
(transformers 5 nests it under `rope_parameters`, which SGLang 0.5.23 does not read). With tied
embeddings the LM head is the embedding matrix, so `lm_head.weight` is not written twice.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WEIGHTS = "model.safetensors"


def gguf_rope_theta(gguf_file: Path) -> float:
    from gguf import GGUFReader

    field = GGUFReader(str(gguf_file)).fields["llama.rope.freq_base"]
    return float(field.parts[field.data[0]][0])


def main(gguf_file: str, out_dir: str) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, out = Path(gguf_file), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    tied = bool(model.config.tie_word_embeddings)
    tensors = {name: t.to(torch.bfloat16).contiguous() for name, t in model.state_dict().items()
               if not (tied and name == "lm_head.weight")}
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config.update(architectures=["LlamaForCausalLM"], rope_theta=gguf_rope_theta(source), torch_dtype="bfloat16")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    model.generation_config.to_json_file(str(out / "generation_config.json"))
    tokenizer.save_pretrained(str(out))
    print(f"wrote {len(tensors)} tensors ({sum(t.numel() for t in tensors.values()):,} weights) to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
