"""Synthetic decode workload: random-token prompts of exact length, exact output length, greedy.

The published shape is 32,768 input tokens and 2,048 output tokens with `ignore_eos`, so every
request decodes exactly as many tokens as asked. Lengths may instead be drawn per request from a
distribution (`--input-len-dist`, `--output-len-dist`: `workloads.lengths`), seeded, or replayed
from a `--schedule` trace that gives them; each prompt's item records its two lengths. The prompt body is drawn from the model's
ordinary (non-special) ids with `seed`; the FIRST token of every prompt is distinct, drawn with
`salt`, so no prompt shares a prefix with another, with the warm-up prompts, or (with a fresh salt)
with an earlier run on a warm server: the prefix cache cannot serve any of them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, field_validator, model_validator

from harness.config import AbsolutePathText
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.spec import Prompt, SamplingParams
from workloads import MAX_CONTEXT_TOKENS, WorkloadConfig
from workloads.lengths import LengthDist, draw_lengths, parse_length_dist
from workloads.vocab import Vocabulary, load_vocabulary

if TYPE_CHECKING:
    from harness.run.trace import Trace

INPUT, OUTPUT = "input_tokens", "output_tokens"  # the two lengths, as a trace and an item name them
LEAST = {INPUT: 2, OUTPUT: 1}  # the shortest drawn length of each
STREAM = {INPUT: 2, OUTPUT: 3}  # the seed stream each length is drawn from (0 and 1: bodies and first tokens)

PUBLISHED_INPUT_TOKENS = 32_768
PUBLISHED_OUTPUT_TOKENS = 2_048
WARMUP_FIRST_TOKENS = 64  # first tokens kept for warm-up prompts before those of further measured ones
MAX_PROMPTS = 1_000_000
# The prompts are made before the first request; past this many tokens they alone would take GBs.
MAX_PLANNED_PROMPT_TOKENS = 1 << 25


def seeded_rng(seed: list[int]):
    """numpy's generator, imported when prompts are drawn: the registry reads SyntheticConfig from
    this module for the command line's help, which must not load numpy."""
    import numpy as np

    return np.random.default_rng(seed)


class SyntheticConfig(WorkloadConfig):
    """Options of the synthetic workload (None: the default at the target's scale)."""

    published = {"num_prompts": 10, "input_tokens": PUBLISHED_INPUT_TOKENS, "output_tokens": PUBLISHED_OUTPUT_TOKENS}
    # Sized by what the embedded run must show (every per-request figure, REDUCED SCALE): at the test
    # bed's CPU decode speed 4 x 256 tokens take seconds, where 8 x 512 took most of a cold run's time.
    reduced = {"num_prompts": 4, "input_tokens": 8_192, "output_tokens": 256}
    trace_columns = frozenset({INPUT, OUTPUT})

    num_prompts: int | None = Field(None, ge=1, le=MAX_PROMPTS, description="Measured requests.")
    input_tokens: int | None = Field(None, ge=2, le=MAX_CONTEXT_TOKENS, description="Prompt length in tokens.")
    output_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT_TOKENS, description="Generated tokens per request.")
    input_len_dist: str | None = Field(None, description="Prompt lengths drawn per request instead of "
                                       "--input-tokens: fixed:N, uniform:MIN,MAX, normal:MEAN,SD, "
                                       "lognormal:MEAN,SD or empirical:FILE[#COLUMN].")
    output_len_dist: str | None = Field(None, description="Output lengths drawn per request instead of "
                                        "--output-tokens (the same forms).")
    seed: int = Field(0, ge=0, description="Seed of the prompt bodies and the drawn lengths.")
    salt: int | None = Field(None, ge=0, description="Seed of the distinct first tokens (default: fresh per run, "
                                                     "recorded).")
    tokenizer: AbsolutePathText | None = Field(None, description="Local tokenizer folder of the served model "
                                                         "(default: the server's).")

    @field_validator("input_len_dist", "output_len_dist")
    @classmethod
    def _a_length_spec(cls, spec: str | None, info) -> str | None:
        """Kept as parsed (an empirical file's path absolute): a resumed run reads the same file."""
        return None if spec is None else str(parse_length_dist(spec, info.field_name.removesuffix("_len_dist") +
                                                                "_tokens"))

    @model_validator(mode="after")
    def _a_length_or_a_distribution(self) -> SyntheticConfig:
        for fixed, drawn in ((INPUT, "input_len_dist"), (OUTPUT, "output_len_dist")):
            if getattr(self, fixed) is not None and getattr(self, drawn) is not None:
                raise ValueError(f"give {fixed} or {drawn}, not both")
        return self

    def at_scale(self, reduced: bool) -> SyntheticConfig:
        """The scale's defaults, but no fixed length where a distribution draws it."""
        scaled = super().at_scale(reduced)
        drawn = {fixed: None for fixed, dist in ((INPUT, self.input_len_dist), (OUTPUT, self.output_len_dist)) if dist}
        return scaled.model_copy(update=drawn)

    @model_validator(mode="after")
    def _prompts_fit_in_memory(self) -> SyntheticConfig:
        planned = (self.num_prompts or 0) * (self.input_tokens or 0)
        if planned > MAX_PLANNED_PROMPT_TOKENS:
            raise ValueError(f"{self.num_prompts} prompts of {self.input_tokens} tokens are {planned:,} prompt tokens, "
                             f"more than the {MAX_PLANNED_PROMPT_TOKENS:,} a run holds in memory")
        return self



@dataclass
class SyntheticWorkload:
    vocabulary: Vocabulary
    num_prompts: int
    input_tokens: int = PUBLISHED_INPUT_TOKENS
    output_tokens: int = PUBLISHED_OUTPUT_TOKENS
    seed: int = 0
    salt: int = 0
    name: str = "synthetic"
    dists: dict[str, LengthDist] = field(default_factory=dict)  # length -> its distribution, where drawn
    trace: Trace | None = None  # a replayed trace's lengths, where it gives them
    _drawn: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def sampling(self, new_tokens: int | None = None) -> SamplingParams:
        return SamplingParams(max_new_tokens=new_tokens or self.output_tokens, temperature=0.0, top_p=1.0,
                              top_k=-1, ignore_eos=True)

    def lengths(self, which: str, start: int, stop: int) -> list[int]:
        """The `which` length (INPUT or OUTPUT) of prompts start..stop-1: the trace's (cycled), else
        drawn (one seeded draw, so a longer run's first lengths are a shorter one's), else fixed."""
        given = self.trace.columns.get(which) if self.trace is not None else None
        if given:
            return [given[i % len(given)] for i in range(start, stop)]
        if which not in self.dists:
            return [getattr(self, which)] * (stop - start)
        if len(self._drawn.get(which, ())) < stop:
            self._drawn[which] = draw_lengths(self.dists[which], stop, [self.seed, STREAM[which]], LEAST[which])
        return self._drawn[which][start:stop]

    def _warmup_lengths(self, which: str, count: int) -> list[int]:
        """Warm-up lengths: a trace's first ones, else drawn apart from the measured ones, else fixed."""
        if which in self.dists and not (self.trace is not None and which in self.trace.columns):
            return draw_lengths(self.dists[which], count, [self.seed, STREAM[which], 1], LEAST[which])
        return self.lengths(which, 0, count)

    def _first_tokens(self, total: int) -> list[int]:
        ids = self.vocabulary.ordinary_array
        if total > len(ids):
            raise SparkbenchError(f"{total} prompts (with warm-up) need {total} distinct first tokens; the "
                                  f"vocabulary has {len(ids)} ordinary tokens")
        # One fixed permutation, cut to length: the first k tokens never depend on `total`, so the
        # warm-up draw (taken after the measured ones) cannot repeat a measured first token.
        order = seeded_rng([self.salt, 1]).permutation(self.vocabulary.ordinary_array)
        return [int(i) for i in order[:total]]

    def _body(self, index: int, length: int) -> list[int]:
        return [int(i) for i in seeded_rng([self.seed, index]).choice(self.vocabulary.ordinary_array,
                                                                      size=length - 1, replace=True)]

    def _build(self, first_tokens: list[int], bodies: range, label: str, inputs: list[int],
               outputs: list[int]) -> list[Prompt]:
        return [
            Prompt(prompt_id=f"{label}{body}", sampling=self.sampling(new_tokens),
                   input_ids=tuple([first, *self._body(body, length)]),
                   item={"body_index": body, INPUT: length, OUTPUT: new_tokens})
            for first, body, length, new_tokens in zip(first_tokens, bodies, inputs, outputs)
        ]

    def _measured(self, start: int, stop: int, first: list[int]) -> list[Prompt]:
        return self._build(first, range(start, stop), "syn-", self.lengths(INPUT, start, stop),
                           self.lengths(OUTPUT, start, stop))

    def prompts(self) -> list[Prompt]:
        return self._measured(0, self.num_prompts, self._first_tokens(self.num_prompts))

    def more_prompts(self, count: int) -> list[Prompt]:
        """`count` prompts past the measured ones (an open loop run for a duration): the next bodies,
        and first tokens from the same draw past those the warm-up may take, so still all distinct."""
        start = self.num_prompts + WARMUP_FIRST_TOKENS
        first = self._first_tokens(start + count)[start:]
        return self._measured(self.num_prompts, self.num_prompts + count, first)

    def warmup_prompts(self, count: int) -> list[Prompt]:
        # Warm-up first tokens come after the measured ones in the same draw: never shared.
        first = self._first_tokens(self.num_prompts + count)[self.num_prompts:]
        return self._build(first, range(10_000_000, 10_000_000 + count), "warmup-",
                           self._warmup_lengths(INPUT, count), self._warmup_lengths(OUTPUT, count))

    def replaying(self, trace: Trace) -> SyntheticWorkload:
        """This workload sending one prompt per row of `trace`, of the lengths the trace gives."""
        return replace(self, num_prompts=len(trace.offsets), trace=trace, _drawn={})

    def varies(self, which: str) -> bool:
        """Whether the `which` length differs from prompt to prompt (drawn, or given by the trace)."""
        return which in self.dists or (self.trace is not None and which in self.trace.columns)

    def check_fits(self, context: int | None) -> None:
        """A one-line error naming the first prompt whose lengths cannot fit in `context` (the
        server's, in tokens; None: it states none), and for prompts past what a run holds in memory."""
        inputs, outputs = self.lengths(INPUT, 0, self.num_prompts), self.lengths(OUTPUT, 0, self.num_prompts)
        if sum(inputs) > MAX_PLANNED_PROMPT_TOKENS:
            raise SparkbenchError(f"{self.num_prompts} prompts of {sum(inputs):,} tokens in all are more than the "
                                  f"{MAX_PLANNED_PROMPT_TOKENS:,} a run holds in memory")
        for index, (length, new_tokens) in enumerate(zip(inputs, outputs)):
            if context is not None and length + new_tokens > context:
                raise SparkbenchError(f"prompt syn-{index} ({self._source(index)}): {length:,} prompt tokens + "
                                      f"{new_tokens:,} new tokens are more than the {context:,}-token context the "
                                      "server states")

    def _source(self, index: int) -> str:
        if self.trace is not None and self.trace.columns:
            return f"request {index} of the --schedule trace"
        return ", ".join(f"{which} {dist}" for which, dist in self.dists.items()) or "fixed lengths"

    def spec(self) -> dict:
        outputs = self.lengths(OUTPUT, 0, self.num_prompts)
        return {
            "name": self.name, "num_prompts": self.num_prompts,
            INPUT: None if self.varies(INPUT) else self.input_tokens,
            OUTPUT: None if self.varies(OUTPUT) else self.output_tokens,
            **{f"{which.removesuffix('_tokens')}_len_dist": str(dist) for which, dist in self.dists.items()},
            **({"trace_sha256": self.trace.sha256} if self.trace is not None else {}),
            "seed": self.seed, "salt": self.salt,
            "vocabulary_size": self.vocabulary.size, "special_ids_excluded": len(self.vocabulary.special_ids),
            "sampling": self.sampling(max(outputs, default=None)).to_dict(),  # a mix: its longest output
            "requires_uncached_prompts": True,  # the whole 32K prefill must be measured
        }


def make_synthetic(*, num_prompts: int, input_tokens: int | None, output_tokens: int | None, seed: int,
                   salt: int | None, tokenizer: Path | None, input_len_dist: str | None = None,
                   output_len_dist: str | None = None):
    """A factory the run builder calls with the server's facts, which name the tokenizer to read."""
    dists = {which: parse_length_dist(spec, which)
             for which, spec in ((INPUT, input_len_dist), (OUTPUT, output_len_dist)) if spec is not None}

    def build(facts: EngineFacts) -> SyntheticWorkload:
        folder = tokenizer or facts.tokenizer_path or ""
        vocabulary = load_vocabulary(folder)
        if num_prompts > len(vocabulary.ordinary_ids()):  # each prompt needs a first token of its own
            raise SparkbenchError(f"--num-prompts {num_prompts} is more than the {len(vocabulary.ordinary_ids())} "
                                  "ordinary tokens of the vocabulary (each prompt starts with a distinct one)")
        return SyntheticWorkload(
            vocabulary=vocabulary, num_prompts=num_prompts, input_tokens=input_tokens or 0,
            output_tokens=output_tokens or 0, seed=seed,
            salt=salt if salt is not None else secrets.randbelow(2**31), dists=dists,
        )

    return build
