"""What a workload asks a server to do: the prompt and its sampling parameters.

Workloads build these; clients translate them into each engine's request body. Nothing here
knows about HTTP or timing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class SamplingParams:
    """Engine-neutral sampling parameters, always sent explicitly (never left to server defaults)."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1  # -1: no top-k truncation (the convention of both SGLang and vLLM)
    ignore_eos: bool = False
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


def sampling_fields(s: SamplingParams, names: Mapping[str, str]) -> dict[str, Any]:
    """The sampling parameters as an engine's request fields: every one explicit, each under the
    engine's name for it (`names`: ours -> the engine's, where they differ); the seed only when set."""
    return {names.get(key, key): value for key, value in s.to_dict().items() if key != "seed" or value is not None}


@dataclass(frozen=True)
class Prompt:
    """One request of a workload: token ids or text, plus workload facts kept with its record.

    `item` holds what later stages need to interpret the answer (a GSM8K gold answer, say);
    it travels into the request's record untouched. A prompt that opens a conversation carries
    its later user turns in `followups` and, for text endpoints, the model's chat `template`
    (`harness.chat` builds each next turn from the previous answer); `followup_new_tokens`, when
    given, is each later turn's token cap (a dataset's own output lengths), else they keep this one's.
    """

    prompt_id: str
    sampling: SamplingParams
    input_ids: tuple[int, ...] | None = None
    text: str | None = None
    item: dict[str, Any] = field(default_factory=dict)
    followups: tuple[str, ...] = ()
    followup_new_tokens: tuple[int, ...] = ()
    template: dict[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.input_ids is None) == (self.text is None):
            raise ValueError(f"prompt {self.prompt_id}: give exactly one of input_ids or text")
