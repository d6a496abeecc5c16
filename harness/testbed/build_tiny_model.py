"""Build the test bed's tiny Llama models, deterministically and offline.

Run with the Python of a server environment (it needs torch and transformers, which the harness
itself never imports):  python build_tiny_model.py CORPUS.jsonl OUT_DIR [VARIANT]

- tokenizer: byte-level BPE trained on the GSM8K questions (vocabulary 4,096), with `</s>` as
  end-of-sequence and a minimal chat template;
- model: a 2-layer Llama (hidden 128, 4 heads, 2 KV heads), random weights from seed 0, bf16,
  with room for a 32,768-token prompt plus 2,048 generated tokens.
The weights are random, so the text it writes is noise and it rarely stops early by itself.

Variants (same tokenizer and config; speculative decoding's known answers rest on them):
- `tiny`: the model above;
- `bigram`: the tiny model with every attention output projection zeroed, so attention adds
  nothing to the residual stream and the next token depends on the current token alone. A draft
  that is a copy of it predicts exactly what it predicts whatever context the draft is shown;
- `wrong-draft`: a bigram model with other random weights (seed 1): as a draft for `bigram` its
  guesses (almost) never match.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB_SIZE = 4096
MAX_POSITIONS = 40_960  # 32,768 in + 2,048 out, with headroom
# variant -> (weight seed, zero the attention output projections)
VARIANTS = {"tiny": (0, False), "bigram": (0, True), "wrong-draft": (1, True)}
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def train_tokenizer(corpus: Path, out_dir: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    questions = [json.loads(line)["question"] for line in corpus.read_text(encoding="utf-8").splitlines()]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tokenizer.train_from_iterator(questions, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out_dir)
    return fast.vocab_size


def build_model(vocab_size: int, out_dir: Path, eos_id: int, bos_id: int, variant: str) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    seed, zero_attention_output = VARIANTS[variant]
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS,
        bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=eos_id, tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    if zero_attention_output:
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.o_proj.weight.zero_()
    model.save_pretrained(out_dir, safe_serialization=True)
    GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id).save_pretrained(out_dir)


def main(corpus: str, out_dir: str, variant: str = "tiny") -> None:
    if variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab_size = train_tokenizer(Path(corpus), out)
    special = json.loads((out / "tokenizer.json").read_text())["added_tokens"]
    ids = {t["content"]: t["id"] for t in special}
    build_model(vocab_size, out, eos_id=ids["</s>"], bos_id=ids["<s>"], variant=variant)


if __name__ == "__main__":
    main(*sys.argv[1:])
