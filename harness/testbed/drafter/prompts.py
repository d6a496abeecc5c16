"""The drafter's training and held-out prompts, disjoint from every prompt sparkbench evaluates.

- GSM8K: the TRAIN split's questions in the workload's own five-shot layout (same shots, so the
  drafter sees the context it will draft in), the five shot rows left out; held out: TEST questions
  (which the recipe only scores, never trains on).
- Synthetic: random ordinary token ids, drawn from a seed stream of their own (`TRAIN_STREAM`,
  `HELDOUT_STREAM`): the synthetic workload draws its bodies from `[seed, index]` with small seeds.
- No Spec-Bench question is used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workloads.gsm8k import (
    DEFAULT_SHOT_SEED,
    QUESTION_TEMPLATE,
    build_prompt_text,
    draw_shot_ids,
    few_shot_prefix,
    load_vendored_split,
)
from workloads.vocab import load_vocabulary

TRAIN_STREAM = 7_410_001
HELDOUT_STREAM = 7_410_002


def gsm8k_texts(split: str, count: int | None, five_shot: bool = True) -> list[str]:
    """Prompts for the first `count` questions of `split` (train: the shots left out), five-shot as
    the workload sends them, or the question alone (a machine without a GPU cannot afford the
    shared five shots in front of every training sequence)."""
    train = load_vendored_split("train")
    shots = draw_shot_ids(len(train), DEFAULT_SHOT_SEED)
    rows = train if split == "train" else load_vendored_split(split)
    skip = set(shots) if split == "train" else set()
    questions = [row["question"] for i, row in enumerate(rows) if i not in skip]
    if not five_shot:
        return [QUESTION_TEMPLATE.format(question=q) for q in questions[:count]]
    prefix = few_shot_prefix(train, shots)
    return [build_prompt_text(prefix, q) for q in questions[:count]]


def gsm8k_question_start(text: str) -> int:
    """Character offset of the asked question (the loss skips the shared five-shot prefix)."""
    return text.rfind("Question:")


def random_token_prompts(tokenizer_dir: Path, count: int, length: int, stream: int) -> list[list[int]]:
    """`count` prompts of `length` ordinary ids, prompt i drawn from the seed `[stream, i]`."""
    ordinary = load_vocabulary(tokenizer_dir).ordinary_array
    return [np.random.default_rng([stream, i]).choice(ordinary, size=length).tolist() for i in range(count)]
