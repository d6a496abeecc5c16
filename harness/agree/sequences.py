"""The token sequences both servers score: GSM8K prompts, each followed by a continuation.

Two sources of continuation:
- `greedy`: the reference server's own greedy continuation of the prompt (`max_new_tokens`);
- `answers`: the question's reference answer from the GSM8K test set (rationale and `#### N`).
Prompts are the GSM8K workload's five-shot prompts (shots from the TRAIN split), tokenized here
with the served model's tokenizer, so both servers receive the very same token ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from workloads.gsm8k import GSM8KWorkload

SOURCES = ("greedy", "answers")
Generate = Callable[[list[int], int], list[int]]  # (prompt ids, max new tokens) -> continuation ids


@dataclass(frozen=True)
class ForcedSequence:
    """Prompt ids, then the continuation ids whose every position is scored."""

    prompt_id: str
    prompt_ids: list[int]
    continuation_ids: list[int]
    item: dict[str, Any] = field(default_factory=dict)

    @property
    def token_ids(self) -> list[int]:
        return [*self.prompt_ids, *self.continuation_ids]

    @property
    def start(self) -> int:
        """Index of the first scored token (the first continuation token)."""
        return len(self.prompt_ids)

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class Tokenizer:
    """The served model's tokenizer (`tokenizer.json` of a local model folder)."""

    def __init__(self, folder: Path) -> None:
        path = Path(folder) / "tokenizer.json"
        if not path.is_file():
            raise SparkbenchError(f"no tokenizer.json in {folder}; pass --tokenizer DIR (the served model's folder)")
        from tokenizers import Tokenizer as HFTokenizer  # only the answers source and prompts need it

        self.folder = Path(folder)
        self._tokenizer = HFTokenizer.from_file(str(path))

    def prompt_ids(self, text: str) -> list[int]:
        """A prompt as the model expects it (special tokens such as BOS added by the tokenizer)."""
        return self._tokenizer.encode(text).ids

    def continuation_ids(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids


def build_sequences(workload: GSM8KWorkload, tokenizer: Tokenizer, source: str,
                    generate: Generate, max_new_tokens: int) -> list[ForcedSequence]:
    """One forced sequence per GSM8K question of `workload`, continued from `source`."""
    sequences = []
    for prompt in workload.prompts():
        prompt_ids = tokenizer.prompt_ids(prompt.text)
        if source == "greedy":
            continuation = generate(prompt_ids, max_new_tokens)
        else:
            answer = workload.data.test[prompt.item["question_index"]]["answer"]
            continuation = tokenizer.continuation_ids(" " + answer)
        if not continuation:
            raise SparkbenchError(f"{prompt.prompt_id}: empty continuation; nothing to score")
        sequences.append(ForcedSequence(prompt.prompt_id, prompt_ids, continuation, dict(prompt.item)))
    return sequences


def load_sequences(path: Path) -> list[ForcedSequence]:
    try:
        return [ForcedSequence(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, ValueError, TypeError) as exc:
        raise SparkbenchError(f"{path}: unreadable sequences file ({type(exc).__name__})") from exc
