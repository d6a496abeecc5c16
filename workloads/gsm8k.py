"""GSM8K workload: all 1,319 test questions, five-shot chain-of-thought, sampled as published.

Prompt (the lm-evaluation-harness layout): five worked examples drawn from the TRAIN split with a
recorded seed, each `Question: {q}\\nAnswer: {full rationale ending #### N}`, joined by a blank
line, then `Question: {q}\\nAnswer:` for the test question. The same five shots precede every
question, so the prompts are byte-for-byte reproducible from (shot seed, question index) and no
test question ever appears as a shot (SGLang's own script takes its shots from the test rows).

Data: a vendored copy of the published JSONL files (MIT, see data/gsm8k/), verified against the
sha256 sums below on every load; `source="hub"` reads `openai/gsm8k` through `datasets` instead
and records the digest of the same JSONL serialization, so the two sources can be compared.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from harness.config import validated
from harness.errors import SparkbenchError
from harness.spec import Prompt, SamplingParams
from workloads import MAX_CONTEXT_TOKENS, WorkloadConfig

DATA_DIR = Path(__file__).parent / "data" / "gsm8k"
SPLITS = ("test", "train")
EXPECTED_SHA256 = {
    "test": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    "train": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
}
HUB_DATASET = "openai/gsm8k"
HUB_CONFIG = "main"
SOURCES = ("vendored", "hub")

NUM_SHOTS = 5
DEFAULT_SHOT_SEED = 1234
SHOT_TEMPLATE = "Question: {question}\nAnswer: {answer}"
QUESTION_TEMPLATE = "Question: {question}\nAnswer:"
SHOT_SEPARATOR = "\n\n"
STOP_STRINGS = ("Question:", "</s>", "<|im_end|>", "<|endoftext|>")
ANSWER_MARKER = "####"

PUBLISHED_TEMPERATURE = 0.6
PUBLISHED_TOP_P = 0.95
PUBLISHED_TOP_K = 29
PUBLISHED_MAX_NEW_TOKENS = 32_768


class GSM8KConfig(WorkloadConfig):
    """Options of the GSM8K workload (None: the default at the target's scale)."""

    published = {"limit": None, "max_new_tokens": PUBLISHED_MAX_NEW_TOKENS}
    reduced = {"limit": 20, "max_new_tokens": 128}

    limit: int | None = Field(None, ge=0, description="Questions to send.")
    offset: int = Field(0, ge=0, description="First test question to send.")
    shuffle: bool = Field(False, description="Send the questions in a seeded random order.")
    shuffle_seed: int = Field(0, description="Seed of --shuffle.")
    shot_seed: int = Field(DEFAULT_SHOT_SEED, description="Seed that draws the five shots from the TRAIN split.")
    chat: bool = Field(False, description="Send the prompt as one chat user message (OpenAI chat API).")
    source: Literal["vendored", "hub"] = Field("vendored", description="vendored (offline copy) or hub "
                                                                      "(openai/gsm8k via datasets).")
    temperature: float = Field(PUBLISHED_TEMPERATURE, ge=0.0, description="Sampling temperature (published).")
    top_p: float = Field(PUBLISHED_TOP_P, ge=0.0, le=1.0, description="Nucleus sampling (published).")
    top_k: int = Field(PUBLISHED_TOP_K, description="Top-k sampling, -1 off (published).")
    max_new_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT_TOKENS, description="Token cap per answer.")
    base_seed: int = Field(0, description="Request seed = base seed + question index.")


@dataclass(frozen=True)
class GSM8KData:
    """Both splits as lists of {"question", "answer"} rows, with the sha256 of each split's JSONL."""

    test: list[dict[str, str]]
    train: list[dict[str, str]]
    sha256: dict[str, str]


def sha256_of_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def jsonl_sha256(rows: list[dict[str, str]]) -> str:
    """Digest of rows written one `json.dumps` per line: exactly the bytes of the vendored files."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update((json.dumps({"question": row["question"], "answer": row["answer"]}) + "\n").encode())
    return digest.hexdigest()


def load_vendored_split(split: str, data_dir: Path = DATA_DIR) -> list[dict[str, str]]:
    """Read one vendored split after checking its sha256; any mismatch is a SparkbenchError."""
    path = data_dir / f"{split}.jsonl"
    if not path.is_file():
        raise SparkbenchError(f"GSM8K data file missing: {path}")
    actual = sha256_of_file(path)
    if actual != EXPECTED_SHA256[split]:
        raise SparkbenchError(
            f"GSM8K {split} data at {path} has sha256 {actual}, expected {EXPECTED_SHA256[split]}"
        )
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def load_vendored(data_dir: Path = DATA_DIR) -> GSM8KData:
    splits = {split: load_vendored_split(split, data_dir) for split in SPLITS}
    return GSM8KData(test=splits["test"], train=splits["train"], sha256=dict(EXPECTED_SHA256))


def load_hub() -> GSM8KData:
    """Load `openai/gsm8k` (config `main`) through `datasets`; imported here so offline use never needs it."""
    try:
        import datasets

        loaded = datasets.load_dataset(HUB_DATASET, HUB_CONFIG)
        splits = {split: [{"question": r["question"], "answer": r["answer"]} for r in loaded[split]]
                  for split in SPLITS}
    except Exception as exc:  # network, auth, cache and import failures all end the same way
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise SparkbenchError(
            f"could not load {HUB_DATASET} ({HUB_CONFIG}) from the Hugging Face hub: "
            f"{type(exc).__name__}: {first_line}"
        ) from exc
    return GSM8KData(test=splits["test"], train=splits["train"],
                     sha256={split: jsonl_sha256(rows) for split, rows in splits.items()})


def load_gsm8k(source: str = "vendored") -> GSM8KData:
    if source == "vendored":
        return load_vendored()
    if source == "hub":
        return load_hub()
    raise SparkbenchError(f"unknown GSM8K source {source!r}; choose one of {', '.join(SOURCES)}")


def gold_answer(answer: str) -> str:
    """The gold number as written after the last `####` of a reference answer ("1,450,000", "18")."""
    return answer.rsplit(ANSWER_MARKER, 1)[-1].strip()


def draw_shot_ids(train_size: int, seed: int, count: int = NUM_SHOTS) -> list[int]:
    """Train row indices of the shots, in prompt order (a pinned test guards the draw against drift)."""
    return random.Random(seed).sample(range(train_size), count)


def few_shot_prefix(train: list[dict[str, str]], shot_ids: list[int]) -> str:
    """The worked examples, each ending `#### N`, joined by blank lines (no trailing separator)."""
    return SHOT_SEPARATOR.join(
        SHOT_TEMPLATE.format(question=train[i]["question"], answer=train[i]["answer"]) for i in shot_ids
    )


def build_prompt_text(prefix: str, question: str) -> str:
    return prefix + SHOT_SEPARATOR + QUESTION_TEMPLATE.format(question=question)


def ordered_question_indices(total: int, offset: int, limit: int | None,
                             shuffle: bool, shuffle_seed: int) -> list[int]:
    """Test indices to send: optionally shuffled with `shuffle_seed`, then `[offset : offset + limit]`."""
    indices = list(range(total))
    if shuffle:
        random.Random(shuffle_seed).shuffle(indices)
    end = None if limit is None else offset + limit
    return indices[offset:end]


class GSM8KWorkload:
    """GSM8K prompts of one `GSM8KConfig` (its options; a left-out scale option takes the published
    value). `ignore_eos` and `stop` belong to the prompt format: code may change them, options do not."""

    name = "gsm8k"

    def __init__(self, ignore_eos: bool = False, stop: tuple[str, ...] = STOP_STRINGS, **options: Any) -> None:
        self.config = validated(GSM8KConfig, options, "gsm8k options").at_scale(reduced=False)
        self.ignore_eos, self.stop = ignore_eos, tuple(stop)

    @cached_property
    def data(self) -> GSM8KData:
        return load_gsm8k(self.config.source)

    @cached_property
    def shot_ids(self) -> list[int]:
        return draw_shot_ids(len(self.data.train), self.config.shot_seed)

    @cached_property
    def prefix(self) -> str:
        return few_shot_prefix(self.data.train, self.shot_ids)

    def question_indices(self) -> list[int]:
        total = len(self.data.test)
        if self.config.offset >= total:
            raise SparkbenchError(f"GSM8K offset {self.config.offset} is past the last of {total} test questions")
        return ordered_question_indices(total, self.config.offset, self.config.limit, self.config.shuffle, self.config.shuffle_seed)

    def sampling(self, seed: int | None) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.config.max_new_tokens, temperature=self.config.temperature,
                              top_p=self.config.top_p, top_k=self.config.top_k, ignore_eos=self.ignore_eos,
                              stop=tuple(self.stop), seed=seed)

    def _prompt(self, prompt_id: str, row: dict[str, str], index: int, item: dict) -> Prompt:
        text = build_prompt_text(self.prefix, row["question"])
        item = {**item, "gold": gold_answer(row["answer"])}
        if self.config.chat:
            item["chat_messages"] = [{"role": "user", "content": text}]
        return Prompt(prompt_id=prompt_id, sampling=self.sampling(self.config.base_seed + index), text=text, item=item)

    def prompts(self) -> list[Prompt]:
        return [self._prompt(f"gsm8k-{i}", self.data.test[i], i, {"question_index": i})
                for i in self.question_indices()]

    def warmup_prompts(self, count: int) -> list[Prompt]:
        """The first `count` train questions that are not shots: never a test question, never a shot."""
        shots = set(self.shot_ids)
        train_ids = [i for i in range(len(self.data.train)) if i not in shots][:count]
        return [self._prompt(f"gsm8k-warmup-{i}", self.data.train[i], i, {"train_index": i})
                for i in train_ids]

    def spec(self) -> dict:
        return {
            "name": self.name,
            "source": self.config.source,
            "hub_dataset": f"{HUB_DATASET}:{HUB_CONFIG}" if self.config.source == "hub" else None,
            "data_sha256": dict(self.data.sha256),
            "num_test_questions": len(self.data.test),
            "shot_seed": self.config.shot_seed,
            "shot_ids": list(self.shot_ids),
            "templates": {"shot": SHOT_TEMPLATE, "question": QUESTION_TEMPLATE, "separator": SHOT_SEPARATOR},
            "chat": self.config.chat,
            "limit": self.config.limit,
            "offset": self.config.offset,
            "shuffle": self.config.shuffle,
            "shuffle_seed": self.config.shuffle_seed,
            "num_prompts": len(self.question_indices()),
            "sampling": self.sampling(seed=None).to_dict(),
            "base_seed": self.config.base_seed,
            "seed_rule": "base_seed + question_index",
        }
