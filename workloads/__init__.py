"""Workloads: data and generators that turn a workload spec into the prompts to send.

Each workload is a small class registered by name (`workloads.registry`) with a typed config of
its options; the runner asks it for warm-up prompts and the measured prompts and records its
`spec()` and resolved config in the run manifest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from harness.config import StrictModel
from harness.facts import EngineFacts
from harness.spec import Prompt


class Workload(Protocol):
    name: str

    def prompts(self) -> list[Prompt]:
        """The measured prompts, in the order they are sent."""

    def warmup_prompts(self, count: int) -> list[Prompt]:
        """Prompts that warm the server up; never recorded, never overlapping the measured ones."""

    def spec(self) -> dict:
        """Everything needed to regenerate the prompts exactly (recorded in the manifest)."""


# No served model reads more tokens than this (the longest contexts today are 1-2M): a token option
# past it is a typo, refused before anything is allocated for it (the server's own context, when it
# states one, bounds a run further: `harness.engines.limits`).
MAX_CONTEXT_TOKENS = 1 << 21


class WorkloadConfig(StrictModel):
    """A workload's options. A field left None takes its default at the target's scale: `published`
    (the published evaluation's shape) or `reduced` (the embedded CPU test bed)."""

    published: ClassVar[dict[str, Any]] = {}
    reduced: ClassVar[dict[str, Any]] = {}
    # The per-request columns of a `--schedule` trace it replays (`harness.run.trace`): a workload
    # that makes prompts of any length takes the lengths; none by default.
    trace_columns: ClassVar[frozenset[str]] = frozenset()
    # Summary metrics the workload exists for, shown after the run beside the headline's own (`value`).
    headline_metrics: ClassVar[tuple[str, ...]] = ()

    def at_scale(self, reduced: bool) -> WorkloadConfig:
        """This config with every None field that has a scale default filled in."""
        defaults = self.reduced if reduced else self.published
        return self.model_copy(update={key: value for key, value in defaults.items() if getattr(self, key) is None})

    def wants_chat(self) -> bool:
        """Whether its prompts go as chat messages (the OpenAI chat API): a workload's `chat` option."""
        return bool(getattr(self, "chat", False))

    @classmethod
    def help(cls, field: str) -> str:
        """The field's description with its published and reduced defaults, for `--help`."""
        description = cls.model_fields[field].description or field
        if field not in cls.published:
            return description
        published = cls.published[field]
        return f"{description} [published: {'all' if published is None else f'{published:,}'}; " \
               f"embedded test bed: {cls.reduced[field]:,}]"


@dataclass(frozen=True)
class Scorer:
    """How a scored workload judges its answers (registered with it in `workloads.registry`)."""

    score: Callable[[Any], Any]  # request records -> one row per question: prompt_id, flags, ...
    summary: Callable[[Any], Any]  # that table -> long rows `metric, stat, value, unit`
    correct: str  # the flag of that table that counts as a correct answer
    accuracy_metric: str  # the summary metric (stat "mean") of that flag


@dataclass(frozen=True)
class Plan:
    """A workload ready to build once the server is known: its resolved config, and the factory the
    run builder calls with the server's facts (`harness.facts.EngineFacts`)."""

    config: WorkloadConfig
    make: Callable[[EngineFacts], Workload]
