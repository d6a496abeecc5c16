"""Synthetic decode workload: random-token prompts of exact length, fixed output length, greedy.

The published shape is 32,768 input tokens and 2,048 output tokens with `ignore_eos`, so every
request decodes exactly as many tokens as asked. The prompt body is drawn from the model's
ordinary (non-special) ids with `seed`; the FIRST token of every prompt is distinct, drawn with
`salt`, so no prompt shares a prefix with another, with the warm-up prompts, or (with a fresh salt)
with an earlier run on a warm server: the prefix cache cannot serve any of them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from harness.config import PathText
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.spec import Prompt, SamplingParams
from workloads import MAX_CONTEXT_TOKENS, WorkloadConfig
from workloads.vocab import Vocabulary, load_vocabulary

PUBLISHED_INPUT_TOKENS = 32_768
PUBLISHED_OUTPUT_TOKENS = 2_048
WARMUP_FIRST_TOKENS = 64  # first tokens kept for warm-up prompts before those of further measured ones
MAX_PROMPTS = 1_000_000
# The prompts are made before the first request; past this many tokens they alone would take GBs.
MAX_PLANNED_PROMPT_TOKENS = 1 << 25


def _rng(seed: list[int]):
    """numpy's generator, imported when prompts are drawn: the registry reads SyntheticConfig from
    this module for the command line's help, which must not load numpy."""
    import numpy as np

    return np.random.default_rng(seed)


class SyntheticConfig(WorkloadConfig):
    """Options of the synthetic workload (None: the default at the target's scale)."""

    published = {"num_prompts": 10, "input_tokens": PUBLISHED_INPUT_TOKENS, "output_tokens": PUBLISHED_OUTPUT_TOKENS}
    reduced = {"num_prompts": 8, "input_tokens": 8_192, "output_tokens": 512}

    num_prompts: int | None = Field(None, ge=1, le=MAX_PROMPTS, description="Measured requests.")
    input_tokens: int | None = Field(None, ge=2, le=MAX_CONTEXT_TOKENS, description="Prompt length in tokens.")
    output_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT_TOKENS, description="Generated tokens per request.")
    seed: int = Field(0, ge=0, description="Seed of the prompt bodies.")
    salt: int | None = Field(None, ge=0, description="Seed of the distinct first tokens (default: fresh per run, "
                                                     "recorded).")
    tokenizer: PathText | None = Field(None, description="Local tokenizer folder of the served model "
                                                         "(default: the server's).")

    @model_validator(mode="after")
    def _prompts_fit_in_memory(self) -> SyntheticConfig:
        planned = (self.num_prompts or 0) * (self.input_tokens or 0)
        if planned > MAX_PLANNED_PROMPT_TOKENS:
            raise ValueError(f"{self.num_prompts} prompts of {self.input_tokens} tokens are {planned:,} prompt tokens, "
                             f"more than the {MAX_PLANNED_PROMPT_TOKENS:,} a run holds in memory")
        return self

    @field_validator("tokenizer")
    @classmethod
    def _absolute(cls, folder: Path | None) -> Path | None:
        """Stored absolute: a resumed run may be started from another folder."""
        return folder.expanduser().resolve() if folder is not None else None


@dataclass
class SyntheticWorkload:
    vocabulary: Vocabulary
    num_prompts: int
    input_tokens: int = PUBLISHED_INPUT_TOKENS
    output_tokens: int = PUBLISHED_OUTPUT_TOKENS
    seed: int = 0
    salt: int = 0
    name: str = "synthetic"

    def sampling(self) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.output_tokens, temperature=0.0, top_p=1.0,
                              top_k=-1, ignore_eos=True)

    def _first_tokens(self, total: int) -> list[int]:
        ids = self.vocabulary.ordinary_ids()
        if total > len(ids):
            raise SparkbenchError(f"{total} prompts (with warm-up) need {total} distinct first tokens; the "
                                  f"vocabulary has {len(ids)} ordinary tokens")
        # One fixed permutation, cut to length: the first k tokens never depend on `total`, so the
        # warm-up draw (taken after the measured ones) cannot repeat a measured first token.
        order = _rng([self.salt, 1]).permutation(ids)
        return [int(i) for i in order[:total]]

    def _body(self, index: int) -> list[int]:
        return [int(i) for i in _rng([self.seed, index]).choice(self.vocabulary.ordinary_ids(),
                                                                size=self.input_tokens - 1, replace=True)]

    def _build(self, first_tokens: list[int], bodies: range, label: str) -> list[Prompt]:
        return [
            Prompt(prompt_id=f"{label}{body}", sampling=self.sampling(),
                   input_ids=tuple([first, *self._body(body)]), item={"body_index": body})
            for first, body in zip(first_tokens, bodies)
        ]

    def prompts(self) -> list[Prompt]:
        first = self._first_tokens(self.num_prompts)
        return self._build(first, range(self.num_prompts), "syn-")

    def more_prompts(self, count: int) -> list[Prompt]:
        """`count` prompts past the measured ones (an open loop run for a duration): the next bodies,
        and first tokens from the same draw past those the warm-up may take, so still all distinct."""
        start = self.num_prompts + WARMUP_FIRST_TOKENS
        first = self._first_tokens(start + count)[start:]
        return self._build(first, range(self.num_prompts, self.num_prompts + count), "syn-")

    def warmup_prompts(self, count: int) -> list[Prompt]:
        # Warm-up first tokens come after the measured ones in the same draw: never shared.
        first = self._first_tokens(self.num_prompts + count)[self.num_prompts:]
        return self._build(first, range(10_000_000, 10_000_000 + count), "warmup-")

    def spec(self) -> dict:
        return {
            "name": self.name, "num_prompts": self.num_prompts, "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens, "seed": self.seed, "salt": self.salt,
            "vocabulary_size": self.vocabulary.size, "special_ids_excluded": len(self.vocabulary.special_ids),
            "sampling": self.sampling().to_dict(),
            "requires_uncached_prompts": True,  # the whole 32K prefill must be measured
        }


def make_synthetic(*, num_prompts: int, input_tokens: int, output_tokens: int, seed: int,
                   salt: int | None, tokenizer: Path | None):
    """A factory the run builder calls with the server's facts, which name the tokenizer to read."""

    def build(facts: EngineFacts) -> SyntheticWorkload:
        folder = tokenizer or facts.tokenizer_path or ""
        vocabulary = load_vocabulary(folder)
        if num_prompts > len(vocabulary.ordinary_ids()):  # each prompt needs a first token of its own
            raise SparkbenchError(f"--num-prompts {num_prompts} is more than the {len(vocabulary.ordinary_ids())} "
                                  "ordinary tokens of the vocabulary (each prompt starts with a distinct one)")
        return SyntheticWorkload(
            vocabulary=vocabulary, num_prompts=num_prompts, input_tokens=input_tokens,
            output_tokens=output_tokens, seed=seed,
            salt=salt if salt is not None else secrets.randbelow(2**31),
        )

    return build
