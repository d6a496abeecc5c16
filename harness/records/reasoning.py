"""A request's thinking kept apart from its answer.

A server with a reasoning parser streams the thinking in its own field (`reasoning_text` of the
record). A server without one leaves it inline: `<think>...</think>` before the answer, or only the
closing `</think>` where the chat template opened the block in the prompt (DeepSeek-R1, Qwen3).
That block is split off here, when records are read, never in the client, which keeps the raw text.
"""

from __future__ import annotations

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def answer_start(text: str) -> int:
    """Where the answer begins in `text`: after an inline `</think>` and the whitespace after it;
    the end of the text when a `<think>` block opens and never closes (cut off while thinking);
    else 0 (no inline thinking)."""
    close = text.find(THINK_CLOSE)
    if close >= 0:
        start = close + len(THINK_CLOSE)
        return start + (len(text[start:]) - len(text[start:].lstrip()))
    return len(text) if text.lstrip().startswith(THINK_OPEN) else 0


def split_reasoning(text: str) -> tuple[str, str]:
    """(inline thinking, answer) of an output text; the tags and surrounding whitespace dropped."""
    start = answer_start(text)
    thinking = text[:start].strip().removeprefix(THINK_OPEN).removesuffix(THINK_CLOSE).strip()
    return thinking, text[start:]


def answer_text(text: object) -> str:
    """The answer alone of an output text (anything missing: "")."""
    return split_reasoning(text)[1] if isinstance(text, str) else ""
