"""Dataset workload: the user's own prompts, from a file, a `datasets` folder or a cached dataset.

Rows (`workloads.dataset_rows`) give a prompt as text, as OpenAI chat messages or in ShareGPT's
layout, and may give their output length, sampling, category and, for multi-turn conversations, a
conversation id and turn number; the runner sends each next turn after the model's own answer
(`harness.chat`). A single text prompt goes as it is (through the chat API as one user message); a
conversation is rendered by the model's chat template for text endpoints, or sent as messages with
`--chat`.

Lengths are counted with the served model's tokenizer (`--tokenizer`, else the folder the server
names): ShareGPT's recorded replies give each turn's output length, as SGLang's and vLLM's bench
read it, and each first prompt is counted so a row that cannot fit in the server's context is
refused before any request. The spec records the data's sha256, its row count and the options, so
runs on different data are never compared as one workload.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from harness.chat import NoTemplate, load_template, messages_prompt, render
from harness.config import AbsolutePathText
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.spec import Prompt, SamplingParams
from workloads import MAX_CONTEXT_TOKENS, WorkloadConfig
from workloads.dataset_rows import Columns, Conversation, conversations
from workloads.dataset_source import Source, read_source
from workloads.specbench import WARMUP_TEXT, tokenizer_folder

COLUMN_OPTIONS = {f"{name}_column": name for name in Columns.model_fields}


class DatasetConfig(WorkloadConfig):
    """Options of the dataset workload (None: the default at the target's scale)."""

    published = {"num_prompts": None, "output_tokens": 256, "max_output_tokens": None}
    reduced = {"num_prompts": 8, "output_tokens": 16, "max_output_tokens": 32}

    path: str | None = Field(None, validate_default=True, description="JSONL, JSON, CSV or Parquet file, a datasets "
                             "folder, or the name of a dataset in the local Hugging Face cache (never downloaded).")
    split: str = Field("train", description="Split of a dataset that has several.")
    num_prompts: int | None = Field(None, ge=1, description="Conversations to send (the first ones of the file).")
    output_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT_TOKENS,
                                      description="Output length of a turn whose row gives none.")
    max_output_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT_TOKENS,
                                          description="Cap on every turn's output length.")
    max_turns: int | None = Field(None, ge=1, description="Turns sent per conversation (default: all; 1 = the "
                                  "first, as SGLang's and vLLM's bench read ShareGPT).")
    temperature: float = Field(0.0, ge=0.0, description="Sampling temperature of a row that sets none.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling of a row that sets none.")
    top_k: int = Field(-1, ge=-1, description="Top-k of a row that sets none (-1: off).")
    ignore_eos: bool = Field(True, description="Decode every output length in full, as SGLang's bench sends a "
                             "dataset (--no-ignore-eos: stop at the model's end of text).")
    chat: bool = Field(False, description="Send the prompts through the OpenAI chat API (the server's template).")
    tokenizer: AbsolutePathText | None = Field(None, description="Tokenizer folder of the served model, which counts the "
                                                         "lengths (default: the server's).")
    prompt_column: str = Field("prompt", description="Column of a text prompt.")
    messages_column: str = Field("messages", description="Column of OpenAI chat messages.")
    conversations_column: str = Field("conversations", description="Column of a ShareGPT conversation.")
    output_tokens_column: str = Field("output_tokens", description="Column of a row's output length.")
    sampling_column: str = Field("sampling", description="Column of a row's sampling (temperature, top_p, top_k, "
                                 "seed, stop, ignore_eos).")
    category_column: str = Field("category", description="Column of a row's category.")
    conversation_id_column: str = Field("conversation_id", description="Column of a multi-turn row's "
                                        "conversation id.")
    turn_column: str = Field("turn", description="Column of a multi-turn row's turn number (1, 2, ...).")

    @field_validator("path", mode="before")
    @classmethod
    def _given(cls, where: object) -> object:
        """Refused before any server starts when left out (a config file's options, or the command line)."""
        if where is None or (isinstance(where, str) and not where.strip()):
            raise ValueError("give --path FILE (a JSONL, JSON, CSV or Parquet file, a datasets folder, or a cached "
                             "dataset's name)")
        return where

    @field_validator("path")
    @classmethod
    def _absolute(cls, where: str) -> str:
        """A path is stored absolute (a resumed run may start elsewhere); a name stays as it is."""
        path = Path(where).expanduser()
        return str(path.resolve()) if path.exists() else where


    def columns(self) -> Columns:
        return Columns(**{field: getattr(self, option) for option, field in COLUMN_OPTIONS.items()})


@dataclass
class DatasetWorkload:
    config: DatasetConfig
    source: Source
    chosen: list[Conversation]
    total: int  # conversations in the file
    counter: Any  # the served model's tokenizer (`tokenizers.Tokenizer`)
    template: dict[str, str] | None  # the model's chat template; None where none was found
    name: str = "dataset"

    def sampling(self, own: dict[str, Any] | None = None) -> SamplingParams:
        """The workload's sampling, with what a row sets itself."""
        default = SamplingParams(max_new_tokens=self.config.output_tokens, temperature=self.config.temperature,
                                 top_p=self.config.top_p, top_k=self.config.top_k, ignore_eos=self.config.ignore_eos)
        return replace(default, **(own or {}))

    def output_lengths(self, conversation: Conversation) -> list[int]:
        """Each turn's output length: the row's, else the recorded reply's, else the default; capped."""
        lengths = [turn.output_tokens or (max(1, len(self.counter.encode(turn.reply, add_special_tokens=False).ids))
                                          if turn.reply is not None else self.config.output_tokens)
                   for turn in conversation.turns[:self.config.max_turns]]
        cap = self.config.max_output_tokens
        return [min(length, cap) if cap else length for length in lengths]

    def counted_tokens(self, prompt: Prompt) -> int | None:
        """The first prompt's length in the model's tokens, as the server reads it; None through the chat
        API without the model's template (the server renders what cannot be counted here)."""
        if not self.config.chat:
            return len(self.counter.encode(prompt.text).ids)
        messages = prompt.item.get("chat_messages") or [{"role": "user", "content": prompt.text}]
        return len(self.counter.encode(render(self.template, messages)).ids) if self.template else None

    def build(self, conversation: Conversation) -> Prompt:
        turns = conversation.turns[:self.config.max_turns]
        lengths = self.output_lengths(conversation)
        sampling = replace(self.sampling(conversation.sampling), max_new_tokens=lengths[0])
        item = {"row": conversation.row} | ({"category": conversation.category} if conversation.category else {}) \
            | ({"source_id": conversation.source_id} if conversation.source_id else {})
        prompt_id = f"dataset-{conversation.row}"
        if not conversation.is_chat(self.config.max_turns):
            prompt = Prompt(prompt_id=prompt_id, sampling=sampling, text=turns[0].text, item=item)
        else:
            messages = [*conversation.opening, {"role": "user", "content": turns[0].text}]
            prompt = messages_prompt(prompt_id, sampling, messages, [turn.text for turn in turns[1:]],
                                     None if self.config.chat else self.template, item, tuple(lengths[1:]))
        return replace(prompt, item={**prompt.item, "counted_input_tokens": self.counted_tokens(prompt)})

    @cached_property
    def built(self) -> list[Prompt]:
        return [self.build(conversation) for conversation in self.chosen]

    def prompts(self) -> list[Prompt]:
        return list(self.built)

    def warmup_prompts(self, count: int) -> list[Prompt]:
        return [Prompt(prompt_id=f"dataset-warmup-{i}", sampling=self.sampling(), text=WARMUP_TEXT.format(index=i),
                       item={"category": "warmup"}) for i in range(count)]

    def check_fits(self, context: int | None) -> None:
        """A one-line error naming the first row whose prompt and output cannot fit in `context`
        (the server's, in tokens; None: it states none)."""
        columns = self.config.columns()
        for conversation, prompt in zip(self.chosen, self.built):
            counted = prompt.item["counted_input_tokens"]
            asked = prompt.sampling.max_new_tokens
            if context is not None and counted is not None and counted + asked > context:
                raise SparkbenchError(f"{self.config.path} row {conversation.row}: {getattr(columns, conversation.form)}: "
                                      f"{counted:,} prompt tokens + {asked:,} new tokens are more than the "
                                      f"{context:,}-token context the server states")

    def spec(self) -> dict:
        own_sampling = sum(bool(conversation.sampling) for conversation in self.chosen)
        return {
            "name": self.name, "source": self.config.path, "split": self.config.split, "form": self.source.form,
            "data_sha256": self.source.sha256, "num_rows": len(self.source.rows), "num_conversations": self.total,
            "num_prompts": len(self.chosen), "num_turns": sum(len(p.followups) + 1 for p in self.built),
            "columns": self.config.columns().model_dump(), "max_turns": self.config.max_turns,
            "default_output_tokens": self.config.output_tokens, "max_output_tokens": self.config.max_output_tokens,
            "output_lengths": "per row", "rows_with_own_sampling": own_sampling, "chat": self.config.chat,
            "chat_template": ("the server's (OpenAI chat API)" if self.config.chat else
                              self.template["source"] if self.template else None),
            "vocabulary_size": self.counter.get_vocab_size(with_added_tokens=True),
            # Output lengths are per row (`output_lengths`): the sampling recorded is the rest.
            "sampling": {k: v for k, v in self.sampling().to_dict().items() if k != "max_new_tokens"},
        }


def _tokenizer(folder: Path | None):
    """The served model's tokenizer, which counts every length; a one-line error without one."""
    path = Path(folder) / "tokenizer.json" if folder is not None else None
    if path is None or not path.is_file():
        raise SparkbenchError(f"dataset needs the served model's tokenizer to count lengths: no tokenizer.json in "
                              f"{folder or 'the folder the server names'}; pass --tokenizer DIR")
    from tokenizers import Tokenizer  # imported here: only workloads that count tokens need it

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the tokenizers library raises its own exception type for a bad file
        raise SparkbenchError(f"{path} is not a valid tokenizer file ({str(exc).splitlines()[0][:120]})") from exc


def _template(folder: Path, needed: Conversation | None, chat: bool) -> dict[str, str] | None:
    """The model's chat template where the folder has one; a one-line error where a conversation
    must be rendered here (text endpoints) and it has none."""
    try:
        return load_template(folder)
    except SparkbenchError as exc:
        if needed is None or chat:
            return None
        if not isinstance(exc, NoTemplate):  # there, but it cannot render a conversation
            raise
        raise SparkbenchError(f"dataset row {needed.row} is a conversation ({needed.form}, {len(needed.turns)} "
                              f"turns): rendering it needs the model's chat template, and {folder} has none; pass "
                              "--tokenizer DIR with one, or --chat") from None


def make_dataset(config: DatasetConfig, model_dir: Path | None):
    """Read and check the rows now (before any request); the factory the run builder calls with the
    server's facts loads the tokenizer that counts them."""
    source = read_source(config.path, config.split)
    found = conversations(source.rows, config.columns(), config.path)
    chosen = found[:config.num_prompts]

    def build(facts: EngineFacts) -> DatasetWorkload:
        folder = config.tokenizer or tokenizer_folder(facts, model_dir)
        counter = _tokenizer(folder)
        needed = next((c for c in chosen if c.is_chat(config.max_turns)), None)
        return DatasetWorkload(config, source, chosen, len(found), counter, _template(folder, needed, config.chat))

    return build
