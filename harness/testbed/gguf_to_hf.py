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

The tokenizer needs one repair: for a GGUF whose `tokenizer.ggml.pre` is `smollm`, llama.cpp splits
every numeric character (`\\p{N}`: digits, but also `½` or `²`) into a piece of its own before the
byte-level split, as SmolLM2's own tokenizer does with a `Digits` pre-tokenizer; transformers'
loader writes the byte-level split alone, so ` ½` became other ids than llama.cpp's. The `Digits`
step is put back in front (docs/real-model.md, the tokenizer check). The GGUF is read from a folder
of its own: with tokenizer files beside it, transformers reads those instead and writes no chat
template.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"
SPLITS_EACH_NUMERIC = {"smollm"}  # llama.cpp pre-tokenizers whose first rule is `\p{N}` alone


def gguf_string(gguf_file: Path, key: str) -> str | None:
    from gguf import GGUFReader

    field = GGUFReader(str(gguf_file)).fields.get(key)
    return None if field is None else bytes(field.parts[field.data[0]]).decode("utf-8")


def split_each_numeric(tokenizer_json: Path) -> None:
    """Put a `Digits(individual_digits)` pre-tokenizer in front of the byte-level one."""
    tokenizer = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    digits = {"type": "Digits", "individual_digits": True}
    tokenizer["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [digits, tokenizer["pre_tokenizer"]]}
    tokenizer_json.write_text(json.dumps(tokenizer, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


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
    with tempfile.TemporaryDirectory(prefix="gguf-") as alone:  # the GGUF alone: no tokenizer files beside it
        (Path(alone) / source.name).symlink_to(source.resolve())
        model = AutoModelForCausalLM.from_pretrained(alone, gguf_file=source.name, dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(alone, gguf_file=source.name)
    tied = bool(model.config.tie_word_embeddings)
    tensors = {name: t.to(torch.bfloat16).contiguous() for name, t in model.state_dict().items()
               if not (tied and name == "lm_head.weight")}
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_name_or_path", None)  # the temporary folder the GGUF was read from
    config.update(architectures=["LlamaForCausalLM"], rope_theta=gguf_rope_theta(source), torch_dtype="bfloat16")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    model.generation_config.to_json_file(str(out / "generation_config.json"))
    tokenizer.save_pretrained(str(out))
    if gguf_string(source, "tokenizer.ggml.pre") in SPLITS_EACH_NUMERIC:
        split_each_numeric(out / TOKENIZER)
    print(f"wrote {len(tensors)} tensors ({sum(t.numel() for t in tensors.values()):,} weights) to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
