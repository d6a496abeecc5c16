"""Reading a chunk's fields by their JSON type, where the chunk is read.

A chunk is valid JSON from the server, but any field may hold another type than the protocol says
(a `usage` that is a string, `choices: [null]`, `"text": 5`, `output_ids` as text). Each client reads
its fields through these helpers: a field of the wrong type is a chunk that breaks the protocol
(`MalformedStream`, a failed request of kind `malformed_chunk`) named by its path, never an
AttributeError or TypeError later, and never a value the record could not hold.
"""

from __future__ import annotations

from typing import Any

from harness.engines.base import MalformedStream

MAX_TOKEN_ID = 2**63 - 1  # the typed id column holds 64-bit integers
JSON_TYPES = {dict: "an object", list: "a list", str: "text", bool: "a boolean", int: "a number",
              float: "a number"}


def json_type(value: Any) -> str:
    """The JSON type of `value` in words."""
    return JSON_TYPES.get(type(value), type(value).__name__)


def wrong_type(where: str, value: Any, wanted: str) -> MalformedStream:
    """The error for field `where` holding `value` where `wanted` belongs."""
    return MalformedStream(f"the chunk's {where} is {json_type(value)}, not {wanted}: {str(value)[:40]!r}")


def optional_object(chunk: dict[str, Any], name: str, where: str = "") -> dict[str, Any] | None:
    """`chunk[name]` when it is an object; None when absent or null; else MalformedStream."""
    value = chunk.get(name)
    if value is None or type(value) is dict:
        return value
    raise wrong_type(where + name, value, "an object")


def optional_text(chunk: dict[str, Any], name: str, where: str = "") -> str | None:
    """`chunk[name]` when it is text; None when absent or null; else MalformedStream."""
    value = chunk.get(name)
    if value is None or type(value) is str:
        return value
    raise wrong_type(where + name, value, "text")


def optional_list(chunk: dict[str, Any], name: str, where: str = "") -> list[Any] | None:
    """`chunk[name]` when it is a list; None when absent or null; else MalformedStream."""
    value = chunk.get(name)
    if value is None or type(value) is list:
        return value
    raise wrong_type(where + name, value, "a list")


def token_ids(chunk: dict[str, Any], name: str, where: str = "") -> list[int]:
    """`chunk[name]` as a list of token ids (whole numbers from 0 to MAX_TOKEN_ID); [] when absent
    or null; else MalformedStream."""
    ids = optional_list(chunk, name, where)
    if not ids:
        return []
    if not all(type(token) is int and 0 <= token <= MAX_TOKEN_ID for token in ids):
        bad = next(token for token in ids if not (type(token) is int and 0 <= token <= MAX_TOKEN_ID))
        raise wrong_type(f"{where}{name} entry", bad, f"a token id (a whole number from 0 to {MAX_TOKEN_ID})")
    return ids


def reason(value: Any, where: str) -> str | None:
    """A finish reason: text, or an object whose `type` is text (SGLang); None when absent."""
    if type(value) is dict:
        return optional_text(value, "type", f"{where}.")
    if value is None or type(value) is str:
        return value
    raise wrong_type(where, value, "text or an object")
