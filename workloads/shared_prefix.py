"""Shared-prefix workload: G groups of M prompts, each group's prompts opening with the same P tokens.

SGLang's generated-shared-prefix dataset (`bench_serving --dataset-name generated-shared-prefix`:
`--gsp-num-groups`, `--gsp-prompts-per-group`, `--gsp-system-prompt-len`, `--gsp-question-len`,
`--gsp-output-len`), in token ids: a prompt is its group's prefix (P tokens) and a question of its
own (Q tokens), the G x M prompts sent in a seeded shuffle, each decoding O tokens with
`ignore_eos`. The prefix cache is left on, so a server that caches serves the prefix of every
prompt but the first of its group; the run's hit figures come from the server's own counts.

Each group's prefix starts with a token no other group's does (drawn with `salt`, fresh per run
unless given), and within a group each question starts with a token no other question's does, so
two prompts share exactly their group's P tokens: with another group, the warm-up prompts or an
earlier run on a warm server they share nothing. A `--schedule` trace may give each request's
prefix group (any label; rows with one label share a prefix), input length (prefix plus question)
and output length.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from harness.config import AbsolutePathText
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.spec import Prompt, SamplingParams
from workloads import MAX_CONTEXT_TOKENS, WorkloadConfig
from workloads.synthetic import MAX_PLANNED_PROMPT_TOKENS, seeded_rng
from workloads.vocab import Vocabulary, load_vocabulary

if TYPE_CHECKING:
    from harness.run.trace import Trace

INPUT, OUTPUT, GROUP = "input_tokens", "output_tokens", "prefix_group"
WARMUP_BODY = 10_000_000  # seed index of the warm-up prompts' tokens, past any group's


class SharedPrefixConfig(WorkloadConfig):
    """Options of the shared-prefix workload (None: the default at the target's scale)."""

    published = {"num_groups": 64, "prompts_per_group": 16, "prefix_tokens": 2048, "question_tokens": 128,
                 "output_tokens": 256}  # SGLang bench_serving's generated-shared-prefix defaults
    reduced = {"num_groups": 2, "prompts_per_group": 4, "prefix_tokens": 512, "question_tokens": 32,
               "output_tokens": 16}
    trace_columns = frozenset({INPUT, OUTPUT, GROUP})
    headline_metrics = ("prefix_cache_hit_rate", "prefix_cache_hit_rate_server")  # the figures it exists for

    num_groups: int | None = Field(None, ge=1, le=100_000, description="Groups of prompts sharing a prefix.")
    prompts_per_group: int | None = Field(None, ge=1, le=100_000, description="Prompts in each group.")
    prefix_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT_TOKENS, description="Tokens of each group's "
                                      "shared prefix (SGLang's system prompt length).")
    question_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT_TOKENS, description="Tokens of each "
                                        "prompt's own part after the prefix.")
    output_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT_TOKENS, description="Generated tokens per request.")
    seed: int = Field(0, ge=0, description="Seed of the prompt tokens and of the order they are sent in.")
    salt: int | None = Field(None, ge=0, description="Seed of the groups' distinct first tokens (default: fresh "
                                                     "per run, recorded).")
    tokenizer: AbsolutePathText | None = Field(None, description="Local tokenizer folder of the served model "
                                                         "(default: the server's).")



@dataclass(frozen=True)
class Slot:
    """One measured prompt: its group, its place in the group, its question and output lengths."""

    group: int
    member: int
    question_tokens: int
    output_tokens: int


@dataclass
class SharedPrefixWorkload:
    vocabulary: Vocabulary
    num_groups: int
    prompts_per_group: int
    prefix_tokens: int
    question_tokens: int
    output_tokens: int
    seed: int = 0
    salt: int = 0
    trace: Trace | None = None
    name: str = "shared-prefix"

    def _ids(self, seeds: list[int], size: int) -> list[int]:
        return [int(i) for i in seeded_rng(seeds).choice(self.vocabulary.ordinary_array, size=size, replace=True)]

    def _distinct(self, stream: int, total: int) -> list[int]:
        """`total` distinct ordinary ids, one fixed seeded permutation cut to length."""
        ids = self.vocabulary.ordinary_array
        if total > len(ids):
            raise SparkbenchError(f"{total} distinct opening tokens are needed; the vocabulary has {len(ids)} "
                                  "ordinary tokens")
        return [int(i) for i in seeded_rng([self.salt, stream]).permutation(ids)[:total]]

    def slots(self) -> list[Slot]:
        """The measured prompts in send order: a seeded shuffle of every group's members, or the
        trace's rows in its order (a label's group by first appearance, else row i in group i mod G)."""
        if self.trace is None:
            order = seeded_rng([self.seed, 3]).permutation(self.num_groups * self.prompts_per_group)
            return [Slot(int(i) // self.prompts_per_group, int(i) % self.prompts_per_group, self.question_tokens,
                         self.output_tokens) for i in order]
        rows = len(self.trace.offsets)
        labels = self.trace.columns.get(GROUP) or [str(i % self.num_groups) for i in range(rows)]
        groups = {label: index for index, label in enumerate(dict.fromkeys(labels))}
        inputs = self.trace.columns.get(INPUT) or [self.prefix_tokens + self.question_tokens] * rows
        outputs = self.trace.columns.get(OUTPUT) or [self.output_tokens] * rows
        seen: dict[int, int] = {}
        found = []
        for row, (label, length, new_tokens) in enumerate(zip(labels, inputs, outputs)):
            if length <= self.prefix_tokens:
                raise SparkbenchError(f"--schedule request {row}: input_tokens {length} leaves no question after "
                                      f"the {self.prefix_tokens}-token shared prefix (--prefix-tokens)")
            group = groups[label]
            seen[group] = seen.get(group, -1) + 1
            found.append(Slot(group, seen[group], length - self.prefix_tokens, new_tokens))
        return found

    def prompts(self) -> list[Prompt]:
        return self._prompts(self.slots())

    def more_prompts(self, count: int) -> list[Prompt]:
        """`count` prompts past the measured ones (an open loop run for a duration): further members
        of the groups in turn, so each still shares its group's prefix and nothing more."""
        groups, members = self.num_groups, self.prompts_per_group
        return self._prompts([Slot(i % groups, members + i // groups, self.question_tokens, self.output_tokens)
                              for i in range(count)])

    def _prompts(self, slots: list[Slot]) -> list[Prompt]:
        groups = 1 + max(slot.group for slot in self.slots())
        openings = self._distinct(1, groups + 1)  # the last one opens the warm-up prompts
        members = self._distinct(2, 1 + max(slot.member for slot in slots))
        prefixes = {group: [openings[group], *self._ids([self.seed, group], self.prefix_tokens - 1)]
                    for group in {slot.group for slot in slots}}
        return [Prompt(prompt_id=f"gsp-{slot.group}-{slot.member}", sampling=self.sampling(slot.output_tokens),
                       input_ids=tuple([*prefixes[slot.group], members[slot.member],
                                        *self._ids([self.seed, slot.group, slot.member], slot.question_tokens - 1)]),
                       item={GROUP: slot.group, "member": slot.member, INPUT: self.prefix_tokens + slot.question_tokens,
                             OUTPUT: slot.output_tokens, "prefix_tokens": self.prefix_tokens})
                for slot in slots]

    def warmup_prompts(self, count: int) -> list[Prompt]:
        """Prompts of the measured length that open with a token no group's prefix opens with."""
        groups = 1 + max(slot.group for slot in self.slots())
        opening = self._distinct(1, groups + 1)[-1]
        length = self.prefix_tokens + self.question_tokens
        return [Prompt(prompt_id=f"warmup-{i}", sampling=self.sampling(self.output_tokens),
                       input_ids=tuple([opening, *self._ids([self.seed, WARMUP_BODY + i], length - 1)]))
                for i in range(count)]

    def sampling(self, new_tokens: int) -> SamplingParams:
        return SamplingParams(max_new_tokens=new_tokens, temperature=0.0, top_p=1.0, top_k=-1, ignore_eos=True)

    def replaying(self, trace: Trace) -> SharedPrefixWorkload:
        """This workload sending one prompt per row of `trace`, in its groups and of its lengths."""
        return replace(self, trace=trace)

    def check_fits(self, context: int | None) -> None:
        """A one-line error naming the first prompt that cannot fit in `context` (the server's; None:
        it states none), and for prompts past what a run holds in memory."""
        slots = self.slots()
        if sum(self.prefix_tokens + slot.question_tokens for slot in slots) > MAX_PLANNED_PROMPT_TOKENS:
            raise SparkbenchError(f"{len(slots)} prompts are more than the {MAX_PLANNED_PROMPT_TOKENS:,} prompt "
                                  "tokens a run holds in memory")
        for slot in slots:
            length = self.prefix_tokens + slot.question_tokens
            if context is not None and length + slot.output_tokens > context:
                raise SparkbenchError(f"prompt gsp-{slot.group}-{slot.member}: {length:,} prompt tokens + "
                                      f"{slot.output_tokens:,} new tokens are more than the {context:,}-token "
                                      "context the server states")

    def spec(self) -> dict:
        slots = self.slots()
        return {
            "name": self.name, "num_prompts": len(slots), "num_groups": 1 + max(slot.group for slot in slots),
            "prompts_per_group": self.prompts_per_group, "prefix_tokens": self.prefix_tokens,
            "question_tokens": self.question_tokens, "output_tokens": self.output_tokens,
            INPUT: None if self.trace is not None else self.prefix_tokens + self.question_tokens,
            **({"trace_sha256": self.trace.sha256} if self.trace is not None else {}),
            "seed": self.seed, "salt": self.salt, "vocabulary_size": self.vocabulary.size,
            "sampling": self.sampling(max(slot.output_tokens for slot in slots)).to_dict(),
            "requires_uncached_prompts": False,  # the shared prefixes are meant to be served from the cache
        }


def make_shared_prefix(config: SharedPrefixConfig, model_dir: Path | None):
    """A factory the run builder calls with the server's facts, which name the tokenizer to read."""
    options = config.model_dump(exclude={"tokenizer", "salt"})
    salt = config.salt if config.salt is not None else secrets.randbelow(2**31)

    def build(facts: EngineFacts) -> SharedPrefixWorkload:
        vocabulary = load_vocabulary(config.tokenizer or model_dir or facts.tokenizer_path or "")
        return SharedPrefixWorkload(vocabulary=vocabulary, salt=salt, **options)

    return build
