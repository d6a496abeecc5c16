"""Conversations: a model's chat template, and the next turn built from the previous answer.

A prompt that opens a conversation carries its later user turns (`Prompt.followups`) and its
messages so far (`item["chat_messages"]`). When a turn's answer arrives, `next_turn` appends that
answer as the assistant's message and the next user turn, and renders the whole conversation again:
through the OpenAI chat API the messages go as they are; for a text endpoint (SGLang's `/generate`,
llama.cpp's `/completion`, `/v1/completions`) the model's own chat template renders them
(`Prompt.template`). Any workload gets multi-turn conversations this way; the runner sends each
next turn as soon as the previous one has been recorded.

Templates are rendered as Hugging Face tokenizers render them: Jinja2 in a sandbox, with
`trim_blocks` and `lstrip_blocks`, the tokenizer's `bos_token` and `eos_token`, and
`raise_exception` for templates that refuse a conversation.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from harness.spec import Prompt, SamplingParams

TEMPLATE_FILE = "chat_template.jinja"
TOKENIZER_CONFIG = "tokenizer_config.json"
TURN_SEPARATOR = "/turn"  # prompt ids of later turns: `<first turn's id>/turn2`, `/turn3`, ...
# A rendered conversation longer than this is a template gone wrong (a loop over a huge range),
# not a prompt: rendering stops there instead of filling memory.
MAX_RENDERED_CHARS = 4 * 2**20
# The conversation a template is tried on when it is read: a first turn, then a second.
PROBE_MESSAGES = ({"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hello to you."},
                  {"role": "user", "content": "Go on."})


@lru_cache(maxsize=8)
def _compiled(source: str):
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise SparkbenchError(f"the chat template refused the conversation: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(source)
    except TemplateSyntaxError as exc:
        raise SparkbenchError(f"the chat template is not valid Jinja: {exc.message} (line {exc.lineno})") from exc


def _token_text(value: Any) -> str:
    """A tokenizer_config special token: a string, or an added-token object with `content`."""
    return value.get("content", "") if isinstance(value, dict) else (value or "")


class NoTemplate(SparkbenchError):
    """The tokenizer folder has no chat template."""


def load_template(folder: str | Path) -> dict[str, str]:
    """The chat template of a tokenizer folder, `{"source", "bos_token", "eos_token"}`: the template
    from `chat_template.jinja`, else `tokenizer_config.json`'s `chat_template`, once it renders a
    first turn and a later one (`checked_template`). A one-line error when the folder has neither
    (NoTemplate) or the template cannot render."""
    return checked_template(_read_template(folder))


def checked_template(template: dict[str, str]) -> dict[str, str]:
    """`template`, once it has rendered a first turn and a second (user, assistant, user): a template
    that cannot is refused where it is read, before any request, instead of at a run's first
    request or at its first second turn (a failed run)."""
    for turns in (1, len(PROBE_MESSAGES)):
        try:
            render(template, list(PROBE_MESSAGES[:turns]))
        except SparkbenchError as exc:
            raise SparkbenchError(f"{exc} (tried on a {'first' if turns == 1 else 'second'} turn before any "
                                  "request)") from exc
    return template


def _read_template(folder: str | Path) -> dict[str, str]:
    folder = Path(folder)
    config_path = folder / TOKENIZER_CONFIG
    try:
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    except (OSError, json.JSONDecodeError) as exc:
        raise SparkbenchError(f"{config_path} cannot be read as JSON ({type(exc).__name__})") from exc
    template_path = folder / TEMPLATE_FILE
    source = template_path.read_text(encoding="utf-8") if template_path.is_file() else config.get("chat_template")
    if isinstance(source, list):  # several named templates: the default one
        source = next((t.get("template") for t in source if t.get("name") == "default"), None)
    if not isinstance(source, str) or not source:
        raise NoTemplate(f"no chat template in {folder} ({TEMPLATE_FILE} or {TOKENIZER_CONFIG}); pass "
                              "--tokenizer DIR with the model's tokenizer, or --chat to use the OpenAI chat API")
    return {"source": source, "bos_token": _token_text(config.get("bos_token")),
            "eos_token": _token_text(config.get("eos_token"))}


def render(template: dict[str, str], messages: list[dict[str, str]]) -> str:
    """The conversation as the model reads it, ending with the assistant's turn opened; a template
    that fails as it renders (an undefined call, a range the sandbox refuses, more than
    MAX_RENDERED_CHARS of text) is a one-line error."""
    from jinja2 import TemplateError

    pieces = _compiled(template["source"]).generate(messages=messages, add_generation_prompt=True,
                                                    bos_token=template["bos_token"], eos_token=template["eos_token"])
    rendered, length = [], 0
    try:
        for piece in pieces:
            length += len(piece)
            if length > MAX_RENDERED_CHARS:
                raise SparkbenchError(f"the chat template renders more than {MAX_RENDERED_CHARS} characters "
                                      "for one conversation")
            rendered.append(piece)
    except (TemplateError, OverflowError, TypeError, ValueError) as exc:
        raise SparkbenchError(f"the chat template failed to render: {type(exc).__name__}: {exc}") from exc
    return "".join(rendered)


def conversation_prompt(prompt_id: str, sampling: SamplingParams, turns: list[str], template: dict[str, str] | None,
                        item: dict[str, Any]) -> Prompt:
    """The first turn of a conversation of user `turns`: its text rendered by `template` (None: the
    user turn as it is, for the chat API, which applies the server's own template)."""
    return messages_prompt(prompt_id, sampling, [{"role": "user", "content": turns[0]}], turns[1:], template, item)


def messages_prompt(prompt_id: str, sampling: SamplingParams, messages: list[dict[str, str]], followups: list[str],
                    template: dict[str, str] | None, item: dict[str, Any],
                    followup_new_tokens: tuple[int, ...] = ()) -> Prompt:
    """The first turn of a conversation that opens with `messages` (a system message, earlier turns,
    the user's last) and goes on with the user turns `followups`: rendered by `template`, else the
    last message's text for the chat API, which sends the messages as they are."""
    text = render(template, messages) if template else messages[-1]["content"]
    item = {**item, "chat_messages": messages, "conversation_id": prompt_id, "turn": 1,
            "turns": len(followups) + 1}
    return Prompt(prompt_id=prompt_id, sampling=sampling, text=text, item=item, followups=tuple(followups),
                  followup_new_tokens=followup_new_tokens, template=template)


def next_turn(prompt: Prompt, answer: str) -> Prompt | None:
    """The conversation's next turn after `answer` to `prompt`; None when `prompt` was its last."""
    if not prompt.followups:
        return None
    messages = [*prompt.item["chat_messages"], {"role": "assistant", "content": answer},
                {"role": "user", "content": prompt.followups[0]}]
    turn = prompt.item["turn"] + 1
    conversation = prompt.item["conversation_id"]
    text = render(prompt.template, messages) if prompt.template else prompt.followups[0]
    item = {**prompt.item, "chat_messages": messages, "turn": turn, "previous_prompt_id": prompt.prompt_id}
    caps = prompt.followup_new_tokens
    sampling = replace(prompt.sampling, max_new_tokens=caps[0]) if caps else prompt.sampling
    return replace(prompt, prompt_id=f"{conversation}{TURN_SEPARATOR}{turn}", text=text, item=item, sampling=sampling,
                   followups=prompt.followups[1:], followup_new_tokens=caps[1:])


def turn_ids(prompt: Prompt) -> list[str]:
    """The prompt ids of every turn of the conversation `prompt` opens (itself first)."""
    return [prompt.prompt_id, *(f"{prompt.prompt_id}{TURN_SEPARATOR}{turn}"
                                for turn in range(2, len(prompt.followups) + 2))]
