"""Is the converted checkpoint the model the GGUF holds? Greedy continuations on two servers, compared.

The real model reaches SGLang and vLLM as a bf16 checkpoint dequantized from its Q4_1 GGUF, and
llama.cpp as the GGUF itself. If the conversion were wrong (a Q/K permutation left in, a tokenizer
or RoPE base off) the two would part within a token or two; if it is right, they agree until a
near-tie between the two top tokens meets the numerical differences of the engines (bf16
weights and activations on one side, Q4_1 weights with 8-bit activations on the other).

`leading_agreement` sends the same token ids to both servers (greedy, no prompt cache) and counts,
per prompt, how many leading tokens the two continuations share.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from harness.chat import load_template, render
from harness.engines.registry import engine_named


@dataclass(frozen=True)
class Agreement:
    leading: list[int]  # per prompt, the tokens the two continuations share from the start
    max_new_tokens: int

    @property
    def median(self) -> float:
        return float(np.median(self.leading))

    def share_at_least(self, tokens: int) -> float:
        return float(np.mean([n >= tokens for n in self.leading]))


def chat_prompt_ids(model_dir: Path, questions: list[str]) -> list[list[int]]:
    """Each question as one user turn through the model's chat template, as token ids."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    template = load_template(model_dir)
    texts = [render(template, [{"role": "user", "content": q}]) for q in questions]
    return [tokenizer.encode(text, add_special_tokens=False).ids for text in texts]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def leading_agreement(first: tuple[str, str], second: tuple[str, str], prompts: list[list[int]],
                      max_new_tokens: int, timeout_s: float = 600.0) -> Agreement:
    """Greedy continuations of every prompt on two servers, each given as (engine, base URL)."""
    with httpx.Client(timeout=timeout_s) as http:
        leading = []
        for ids in prompts:
            a, b = (engine_named(engine).greedy_ids(http, url, ids, max_new_tokens) for engine, url in (first, second))
            leading.append(common_prefix(a, b))
    return Agreement(leading, max_new_tokens)
