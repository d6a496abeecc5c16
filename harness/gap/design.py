"""The factorial design: three factors, their levels, and the workload each cell sends.

The published evaluation ran speculation on two workloads that differ in three ways at once, and
named all three as reasons its synthetic gain flatters: the content (random tokens vs GSM8K
five-shot prompts), the sampling (greedy vs temperature 0.6 / top_p 0.95 / top_k 29) and the
length (a fixed output with `ignore_eos` vs the natural length). Each cell here fixes one level of
each factor. Content comes from the registered workloads (synthetic, GSM8K, and each single-turn
Spec-Bench task); a cell keeps the content's prompts and replaces their sampling, so the same
prompts are sent in every sampling and length cell of that content.

Synthetic prompts are short (`--synthetic-input-tokens`) and five-shot GSM8K prompts long (about
1,000 tokens), so the synthetic -> GSM8K content change also changes prompt length. The content
`synthetic-matched` holds length equal: random-token prompts whose lengths are the GSM8K prompts'
token lengths one by one (`LengthMatchedWorkload`); the attribution from its corner
(`MATCHED_CORNER`) measures content at equal prompt length, and synthetic -> synthetic-matched
measures prompt length alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from harness.spec import Prompt, SamplingParams
from workloads.gsm8k import PUBLISHED_TEMPERATURE, PUBLISHED_TOP_K, PUBLISHED_TOP_P

SYNTHETIC, GSM8K = "synthetic", "gsm8k"
# Random-token prompts of the GSM8K prompts' token lengths, one by one: content at equal prompt length.
SYNTHETIC_MATCHED = "synthetic-matched"
SPECBENCH_PREFIX = "specbench:"
# Spec-Bench's multi-turn MT-bench needs the model's own first answer for its second turn, which
# differs between the plain and the speculative server under sampling: its single-turn tasks only.
SPECBENCH_TASKS = ("translation", "summarization", "qa", "math_reasoning", "rag")
CONTENTS = (SYNTHETIC, SYNTHETIC_MATCHED, GSM8K, *(SPECBENCH_PREFIX + task for task in SPECBENCH_TASKS))
GREEDY, PUBLISHED = "greedy", "published"
FIXED, NATURAL = "fixed", "natural"
SAMPLINGS = (GREEDY, PUBLISHED)
LENGTHS = (FIXED, NATURAL)
# The two corners the published evaluation measured: its synthetic workload and its GSM8K one.
SYNTHETIC_CORNER = (SYNTHETIC, GREEDY, FIXED)
GSM8K_CORNER = (GSM8K, PUBLISHED, NATURAL)
# The attribution's starting corners: the published synthetic workload, and the same at the GSM8K
# prompts' lengths (its content share is content at equal prompt length).
MATCHED_CORNER = (SYNTHETIC_MATCHED, GREEDY, FIXED)
BASE_CORNERS = (SYNTHETIC_CORNER, MATCHED_CORNER)
FACTORS = ("content", "sampling", "length")


@dataclass(frozen=True)
class Lengths:
    """Output lengths: `fixed` tokens exactly (ignore_eos), or the natural length up to `natural_cap`."""

    fixed: int
    natural_cap: int


@dataclass(frozen=True)
class Cell:
    content: str
    sampling: str
    length: str

    @property
    def levels(self) -> tuple[str, str, str]:
        return (self.content, self.sampling, self.length)

    @property
    def name(self) -> str:
        return f"{self.content}/{self.sampling}/{self.length}"

    def to_dict(self) -> dict[str, str]:
        return {"content": self.content, "sampling": self.sampling, "length": self.length}


def cells(contents: tuple[str, ...]) -> list[Cell]:
    """Every (content, sampling, length) cell of the chosen contents, content by content."""
    return [Cell(*levels) for levels in itertools.product(contents, SAMPLINGS, LENGTHS)]


def cell_sampling(cell: Cell, original: SamplingParams, lengths: Lengths, seed: int) -> SamplingParams:
    """The sampling a cell sends instead of the content's own. Greedy is temperature 0 with no
    truncation; published is the GSM8K setting, seeded per prompt. A fixed length ignores EOS and
    every stop string (either would end it early); a natural one keeps the content's stop strings."""
    sampled = cell.sampling == PUBLISHED
    fixed = cell.length == FIXED
    return SamplingParams(
        max_new_tokens=lengths.fixed if fixed else lengths.natural_cap,
        temperature=PUBLISHED_TEMPERATURE if sampled else 0.0, top_p=PUBLISHED_TOP_P if sampled else 1.0,
        top_k=PUBLISHED_TOP_K if sampled else -1, ignore_eos=fixed, stop=() if fixed else original.stop,
        seed=seed if sampled else None)


class CellWorkload:
    """A content's workload with each prompt's sampling replaced by its cell's (`cell_sampling`);
    it keeps the content's name, so a GSM8K cell is scored like any GSM8K run."""

    def __init__(self, inner: Any, cell: Cell, lengths: Lengths, base_seed: int = 0) -> None:
        self.inner, self.cell, self.lengths, self.base_seed = inner, cell, lengths, base_seed
        self.name = inner.name

    def _recast(self, prompts: list[Prompt]) -> list[Prompt]:
        return [replace(p, sampling=cell_sampling(self.cell, p.sampling, self.lengths, self.base_seed + i),
                        followups=()) for i, p in enumerate(prompts)]

    def prompts(self) -> list[Prompt]:
        return self._recast(self.inner.prompts())

    def warmup_prompts(self, count: int) -> list[Prompt]:
        return self._recast(self.inner.warmup_prompts(count))

    def spec(self) -> dict[str, Any]:
        """The content's spec with the cell's sampling (per-prompt seeds: base seed + index). Its
        prompts recur in four cells, so a prompt served from the cache is expected: prefill is not
        what the design measures."""
        inner = self.inner.spec()
        stop = tuple((inner.get("sampling") or {}).get("stop") or ())
        sampling = cell_sampling(self.cell, SamplingParams(max_new_tokens=1, stop=stop), self.lengths, self.base_seed)
        return {**inner, "sampling": {**sampling.to_dict(), "seed": None}, "base_seed": self.base_seed,
                "requires_uncached_prompts": False, "gap_cell": self.cell.to_dict(),
                "gap_lengths": {"fixed": self.lengths.fixed, "natural_cap": self.lengths.natural_cap}}


class LengthMatchedWorkload:
    """Random-token prompts whose lengths are a reference workload's prompt lengths, one by one: the
    synthetic workload replaying a trace of the reference prompts' token counts (`count(prompt)`,
    what the server counts for it). Prompt i of this content stands against prompt i of the
    reference at the same length; the outputs keep the synthetic workload's."""

    def __init__(self, synthetic: Any, reference: Any, count: Callable[[Prompt], int]) -> None:
        import numpy as np

        from harness.run.trace import Trace

        self.reference_name = reference.name
        self.input_tokens = [count(p) for p in reference.prompts()]
        offsets = np.zeros(len(self.input_tokens))
        self.inner = synthetic.replaying(Trace(offsets, {"input_tokens": tuple(self.input_tokens)}))
        self.name = self.inner.name

    def prompts(self) -> list[Prompt]:
        return self.inner.prompts()

    def warmup_prompts(self, count: int) -> list[Prompt]:
        return self.inner.warmup_prompts(count)

    def check_fits(self, context: int | None) -> None:
        self.inner.check_fits(context)

    def spec(self) -> dict[str, Any]:
        return {**self.inner.spec(), "length_matched_to": self.reference_name, "input_tokens_each": self.input_tokens}
