"""Spec-Bench workload: 480 questions in six tasks, greedy, as the published evaluation sends them.

Data: the vendored `question.jsonl` (Apache-2.0, see data/specbench/), verified against its sha256 on
every load. Each question is a conversation through the model's chat template: the 80 MT-bench
questions have two user turns, the second sent after the model's own first answer
(`harness.chat`); the other 400 have one. Greedy, at most 1,024 new tokens a turn (the published
settings). Each record's item names its task (`category`: mt_bench, translation, summarization,
qa, math_reasoning, rag) and the question's own category (`subcategory`: writing, ... for
MT-bench), so every table can be grouped by task.

Through the OpenAI chat API (`chat`) the messages go as they are and the server applies its own
template; for text endpoints the model's template is read from its tokenizer folder (`tokenizer`,
else the served model's folder) and the conversation is rendered here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from harness.chat import conversation_prompt, load_template
from harness.config import PathText
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.spec import Prompt, SamplingParams
from workloads import WorkloadConfig

DATA_FILE = Path(__file__).parent / "data" / "specbench" / "question.jsonl"
EXPECTED_SHA256 = "4b6d33e79484f9841c487ee87d1cf6aa8c6066f61d5d482ff09e5a007fafdf04"
MT_BENCH = "mt_bench"
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
TASKS = (MT_BENCH, "translation", "summarization", "qa", "math_reasoning", "rag")
PUBLISHED_MAX_NEW_TOKENS = 1_024
# Warm-up conversations: never a measured question (Spec-Bench warms up once before measuring).
WARMUP_TEXT = "Write two sentences about the number {index}."


def task_of(category: str) -> str:
    """The reported task of a question's category: MT-bench's eight categories are one task."""
    return MT_BENCH if category in MT_BENCH_CATEGORIES else category


class SpecBenchConfig(WorkloadConfig):
    """Options of the Spec-Bench workload (None: the default at the target's scale)."""

    published = {"per_task": None, "max_new_tokens": PUBLISHED_MAX_NEW_TOKENS}
    reduced = {"per_task": 2, "max_new_tokens": 64}

    categories: Annotated[tuple[str, ...] | None, Field(strict=False)] = Field(
        None, description=f"Tasks (or MT-bench categories) to send, comma-separated (default: all six, "
                          f"{', '.join(TASKS)}).")
    per_task: int | None = Field(None, ge=1, description="Questions per task (the first ones of each).")
    max_new_tokens: int | None = Field(None, ge=1, description="Token cap per turn.")
    chat: bool = Field(False, description="Send the messages through the OpenAI chat API (the server's template).")
    tokenizer: PathText | None = Field(None, description="Tokenizer folder with the model's chat template "
                                                         "(default: the served model's).")

    def check_before_server(self) -> None:
        """The chat template of `--tokenizer`, read and tried now (`harness.chat.load_template`): a
        template that cannot render is refused before any server is asked, not in a failed run."""
        if self.tokenizer is not None and not self.chat:
            load_template(self.tokenizer)

    @field_validator("categories", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        """The command line gives them comma-separated."""
        return tuple(name.strip() for name in value.split(",") if name.strip()) if isinstance(value, str) else value

    @field_validator("categories")
    @classmethod
    def _known(cls, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if names is None:
            return None
        unknown = [name for name in names if name not in TASKS and name not in MT_BENCH_CATEGORIES]
        if unknown or not names:
            raise ValueError(f"unknown categories {', '.join(unknown) or '(none given)'}; choose from "
                             f"{', '.join(TASKS)} or the MT-bench categories {', '.join(MT_BENCH_CATEGORIES)}")
        return names


def load_questions(path: Path = DATA_FILE) -> list[dict]:
    """The vendored questions after checking the file's sha256; a mismatch is a SparkbenchError."""
    if not path.is_file():
        raise SparkbenchError(f"Spec-Bench data file missing: {path}")
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual != EXPECTED_SHA256:
        raise SparkbenchError(f"Spec-Bench data at {path} has sha256 {actual}, expected {EXPECTED_SHA256}")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def select(questions: list[dict], categories: tuple[str, ...], per_task: int | None) -> list[dict]:
    """The questions of the chosen tasks or categories, in file order, the first `per_task` of each task."""
    taken: dict[str, int] = {}
    chosen = []
    for question in questions:
        task = task_of(question["category"])
        if task not in categories and question["category"] not in categories:
            continue
        if per_task is not None and taken.get(task, 0) >= per_task:
            continue
        taken[task] = taken.get(task, 0) + 1
        chosen.append(question)
    return chosen


@dataclass
class SpecBenchWorkload:
    template: dict[str, str] | None  # the model's chat template; None: the chat API applies the server's
    categories: tuple[str, ...] = TASKS
    per_task: int | None = None
    max_new_tokens: int = PUBLISHED_MAX_NEW_TOKENS
    chat: bool = False
    name: str = "specbench"

    @cached_property
    def questions(self) -> list[dict]:
        return select(load_questions(), self.categories, self.per_task)

    def sampling(self) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.max_new_tokens, temperature=0.0, top_p=1.0, top_k=-1)

    def prompts(self) -> list[Prompt]:
        return [conversation_prompt(f"specbench-{q['question_id']}", self.sampling(), q["turns"], self.template,
                                    {"question_id": q["question_id"], "category": task_of(q["category"]),
                                     "subcategory": q["category"]})
                for q in self.questions]

    def warmup_prompts(self, count: int) -> list[Prompt]:
        return [conversation_prompt(f"specbench-warmup-{i}", self.sampling(), [WARMUP_TEXT.format(index=i)],
                                    self.template, {"category": "warmup"}) for i in range(count)]

    def spec(self) -> dict:
        return {
            "name": self.name, "data_sha256": EXPECTED_SHA256, "categories": list(self.categories),
            "per_task": self.per_task, "num_prompts": len(self.questions),
            "num_turns": sum(len(q["turns"]) for q in self.questions), "chat": self.chat,
            "chat_template": self.template["source"] if self.template else "the server's (OpenAI chat API)",
            "sampling": self.sampling().to_dict(),
        }


def tokenizer_folder(facts: EngineFacts, model_dir: Path | None) -> Path | None:
    """Where the served model's tokenizer is: the launched model folder, else what the server's facts
    say (its tokenizer path: SGLang's `tokenizer_path`, vLLM's model `root`), else the folder of the
    GGUF file it serves (llama.cpp)."""
    if model_dir is not None:
        return Path(model_dir)
    if facts.tokenizer_path:
        return Path(facts.tokenizer_path)
    return Path(facts.model).parent if facts.model and facts.model.endswith(".gguf") else None


def make_specbench(config: SpecBenchConfig, model_dir: Path | None):
    """A factory the run builder calls with the server's facts, which name the tokenizer to read."""
    def build(facts: EngineFacts) -> SpecBenchWorkload:
        folder = config.tokenizer or tokenizer_folder(facts, model_dir)
        if not config.chat and folder is None:
            raise SparkbenchError("specbench needs the model's chat template: pass --tokenizer DIR, or --chat")
        template = None if config.chat else load_template(folder)
        return SpecBenchWorkload(template=template, categories=config.categories or TASKS, per_task=config.per_task,
                                 max_new_tokens=config.max_new_tokens, chat=config.chat)

    return build
