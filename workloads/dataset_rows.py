"""A prompt file's rows as conversations: each row checked against the fields it may give, and the
rows of one multi-turn conversation put together.

A row gives its prompt in one of three forms: text (`prompt`), OpenAI chat messages (`messages`), or
ShareGPT's layout as it is (`conversations`: `{"from": "human" | "gpt" | "system", "value": ...}`;
the recorded replies give each turn's output length). It may give its output length, its sampling
(an object of `temperature`, `top_p`, `top_k`, `seed`, `stop`, `ignore_eos`), a category, and a
conversation id with a turn number: the rows of one id are the turns of one conversation, numbered
1, 2, ... Each field is read from the column the options name (`Columns`); a CSV cell may hold an
object or a list as JSON text. The first row that does not fit is refused in one line naming the
row (its 0-based index in the file) and the column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.errors import SparkbenchError

USER_ROLES = frozenset({"human", "user"})
ASSISTANT_ROLES = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})
ID_COLUMN = "id"  # a row's own identifier (ShareGPT's layout gives each conversation one), kept in its record
FIELDS = ("prompt", "messages", "conversations", "output_tokens", "sampling", "category", "conversation_id", "turn")


class Columns(BaseModel):
    """Which column gives each field (a dataset workload option per field)."""

    model_config = ConfigDict(frozen=True)

    prompt: str = "prompt"
    messages: str = "messages"
    conversations: str = "conversations"
    output_tokens: str = "output_tokens"
    sampling: str = "sampling"
    category: str = "category"
    conversation_id: str = "conversation_id"
    turn: str = "turn"


class RowSampling(BaseModel):
    """A row's own sampling; what it leaves out takes the workload's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(None, ge=0.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)
    seed: int | None = Field(None, ge=0)
    stop: list[str] | None = None
    ignore_eos: bool | None = None

    def given(self) -> dict[str, Any]:
        found = {key: value for key, value in self.model_dump().items() if value is not None}
        return found | ({"stop": tuple(self.stop)} if self.stop is not None else {})


class Message(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    role: str = Field(pattern="^(system|user|assistant)$")
    content: str


class ShareGPTTurn(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    speaker: str = Field(alias="from")
    value: str


class Row(BaseModel):
    """One row, its fields under their own names (read from the columns the options name)."""

    model_config = ConfigDict(frozen=True)

    prompt: str | None = Field(None, min_length=1)
    messages: list[Message] | None = Field(None, min_length=1)
    conversations: list[ShareGPTTurn] | None = Field(None, min_length=1)
    output_tokens: int | None = Field(None, ge=1)
    sampling: RowSampling | None = None
    category: str | None = None
    conversation_id: str | None = None
    turn: int | None = Field(None, ge=1)
    source_id: str | None = None  # the row's own `id` (ShareGPT's), kept in the record's item

    @field_validator("messages", "conversations", "sampling", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        """A CSV cell holds an object or a list as JSON text."""
        return json.loads(value) if isinstance(value, str) and value.strip()[:1] in ("[", "{") else value

    @field_validator("conversation_id", "category", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


@dataclass(frozen=True)
class Turn:
    """A user turn and its output length (None: the row gives none)."""

    text: str
    output_tokens: int | None = None
    reply: str | None = None  # ShareGPT's recorded answer, whose length is the output length


@dataclass(frozen=True)
class Conversation:
    row: int  # the 0-based index of its first row in the file
    opening: tuple[dict[str, str], ...]  # messages before the first user turn's text (system, earlier turns)
    turns: tuple[Turn, ...]
    sampling: dict[str, Any]
    category: str | None
    source_id: str | None  # the conversation id the file gives
    form: str  # the field its first prompt came from: prompt, messages or conversations

    def is_chat(self, max_turns: int | None) -> bool:
        """Whether it is sent as a conversation (rendered by a chat template on text endpoints): chat
        messages, or several of its first `max_turns` turns; one text prompt goes as it is."""
        return self.form != "prompt" or len(self.turns[:max_turns]) > 1


def checked_row(raw: dict[str, Any], index: int, columns: Columns, where: str) -> Row:
    """Row `index` validated, its problems named by column; one line for the first problem."""
    data = {name: raw.get(getattr(columns, name)) for name in FIELDS}
    data = {name: value for name, value in data.items() if value is not None}
    try:
        row = Row.model_validate(data)
    except (ValidationError, json.JSONDecodeError) as exc:
        raise SparkbenchError(f"{where} row {index}: {_problem(exc, columns)}") from None
    forms = [name for name in ("prompt", "messages", "conversations") if getattr(row, name) is not None]
    if len(forms) != 1:
        raise SparkbenchError(f"{where} row {index}: {columns.prompt}: give exactly one of the columns "
                              f"{columns.prompt}, {columns.messages}, {columns.conversations} (found "
                              f"{', '.join(getattr(columns, f) for f in forms) or 'none'})")
    if (row.conversation_id is None) != (row.turn is None):
        missing = columns.turn if row.turn is None else columns.conversation_id
        raise SparkbenchError(f"{where} row {index}: {missing}: a multi-turn row gives both "
                              f"{columns.conversation_id} and {columns.turn}")
    own = raw.get(ID_COLUMN)  # ShareGPT's conversation id; a value of another type is left out
    own_id = str(own) if isinstance(own, str | int) and not isinstance(own, bool) else None
    return row.model_copy(update={"source_id": own_id}) if own_id else row


def _problem(exc: Exception, columns: Columns) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg})"
    problem = exc.errors()[0]
    loc = [str(part) for part in problem["loc"]]
    loc[0] = getattr(columns, loc[0], loc[0])
    return f"{'.'.join(loc)}: {problem['msg'].removeprefix('Value error, ')}"


def conversations(raw_rows: list[dict[str, Any]], columns: Columns, where: str) -> list[Conversation]:
    """The file's conversations in the order of their first rows."""
    if not raw_rows:
        raise SparkbenchError(f"{where}: has no rows")
    order: list[Conversation | str] = []  # a conversation id: its rows are put together once all are read
    grouped: dict[str, list[tuple[int, Row]]] = {}
    for index, raw in enumerate(raw_rows):
        row = checked_row(raw, index, columns, where)
        if row.conversation_id is None:
            order.append(_single(row, index, columns, where))
            continue
        if row.conversation_id not in grouped:
            order.append(row.conversation_id)
        grouped.setdefault(row.conversation_id, []).append((index, row))
    return [_multi_turn(grouped[entry], columns, where) if isinstance(entry, str) else entry for entry in order]


def _single(row: Row, index: int, columns: Columns, where: str) -> Conversation:
    sampling, category = row.sampling.given() if row.sampling else {}, row.category
    if row.prompt is not None:
        return Conversation(index, (), (Turn(row.prompt, row.output_tokens),), sampling, category, row.source_id,
                            "prompt")
    if row.messages is not None:
        opening, last = _split_messages(row.messages, index, columns.messages, where)
        return Conversation(index, opening, (Turn(last, row.output_tokens),), sampling, category, row.source_id,
                            "messages")
    opening, turns = _sharegpt(row.conversations, index, columns.conversations, where)
    if row.output_tokens is not None:  # the row's own length wins over the recorded reply's, for its first turn
        turns = (Turn(turns[0].text, row.output_tokens), *turns[1:])
    return Conversation(index, opening, turns, sampling, category, row.source_id, "conversations")


def _split_messages(messages: list[Message], index: int, column: str, where: str) -> tuple[tuple[dict, ...], str]:
    """The messages before the last, and the last one's text, which must be the user's."""
    if messages[-1].role != "user":
        raise SparkbenchError(f"{where} row {index}: {column}: the last message is the {messages[-1].role}'s; "
                              "a prompt ends with the user's")
    return tuple({"role": m.role, "content": m.content} for m in messages[:-1]), messages[-1].content


def _sharegpt(turns: list[ShareGPTTurn], index: int, column: str, where: str) -> tuple[tuple[dict, ...], tuple[Turn, ...]]:
    """ShareGPT's turns: a leading system message, then user turns each with its recorded reply."""
    opening = tuple({"role": "system", "content": t.value} for t in turns[:1] if t.speaker == "system")
    users: list[Turn] = []
    for offset, turn in enumerate(turns[len(opening):]):
        user_turn = offset % 2 == 0  # user, assistant, user, ... after the system message
        if turn.speaker not in (USER_ROLES if user_turn else ASSISTANT_ROLES):
            raise SparkbenchError(f"{where} row {index}: {column}.{offset + len(opening)}.from: {turn.speaker!r} "
                                  f"where a{' user' if user_turn else 'n assistant'} turn belongs")
        if user_turn:
            users.append(Turn(turn.value))
        else:
            users[-1] = Turn(users[-1].text, reply=turn.value)
    if not users:
        raise SparkbenchError(f"{where} row {index}: {column}: no user turn")
    return opening, tuple(users)


def _multi_turn(rows: list[tuple[int, Row]], columns: Columns, where: str) -> Conversation:
    """The rows of one conversation id in turn order: 1, 2, ... each once; later turns are text."""
    ordered = sorted(rows, key=lambda pair: pair[1].turn)
    for number, (index, row) in enumerate(ordered, start=1):
        if row.turn != number:
            raise SparkbenchError(f"{where} row {index}: {columns.turn}: turn {row.turn} of conversation "
                                  f"{row.conversation_id!r} where turn {number} belongs (turns are 1, 2, ... once each)")
        if number > 1 and row.prompt is None:
            raise SparkbenchError(f"{where} row {index}: {columns.prompt}: a later turn is one user message as text "
                                  "(the conversation so far is the model's own answers)")
    first_index, first = ordered[0]
    opening = ()
    turns = [Turn(row.prompt, row.output_tokens) for _, row in ordered[1:]]
    if first.messages is not None:
        opening, text = _split_messages(first.messages, first_index, columns.messages, where)
    elif first.conversations is not None:
        raise SparkbenchError(f"{where} row {first_index}: {columns.conversations}: a ShareGPT conversation is "
                              f"one row; leave out {columns.conversation_id} and {columns.turn}")
    else:
        text = first.prompt
    sampling = first.sampling.given() if first.sampling else {}
    return Conversation(min(index for index, _ in rows), opening, (Turn(text, first.output_tokens), *turns),
                        sampling, first.category, first.conversation_id,
                        "messages" if first.messages is not None else "prompt")
