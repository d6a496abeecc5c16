"""The model's context length as the server states it, read from the facts a client recorded.

Each API states it in its own place: the OpenAI API lists `max_model_len` with each model (vLLM,
SGLang), SGLang's `/server_info` has the resolved `context_length`, llama.cpp's `/props` has the
slot's `n_ctx`. A server that states none gives None: the options are then bounded by the
harness's own limits only.
"""

from __future__ import annotations

from typing import Any

from harness.errors import SparkbenchError


def context_tokens(snapshot: dict[str, Any]) -> int | None:
    """The largest prompt plus completion, in tokens, the server accepts; None when not stated."""
    models = (snapshot.get("models") or {}).get("data") or [{}]
    settings = (snapshot.get("props") or {}).get("default_generation_settings") or {}
    found = [models[0].get("max_model_len") if isinstance(models[0], dict) else None,
             (snapshot.get("server_info") or {}).get("context_length"), settings.get("n_ctx")]
    stated = [int(value) for value in found if isinstance(value, int) and not isinstance(value, bool) and value > 0]
    return min(stated) if stated else None


def check_fits_context(snapshot: dict[str, Any], prompt_tokens: int, new_tokens: int) -> None:
    """A one-line error when a request of `prompt_tokens` asking for `new_tokens` cannot fit in the
    context the server states (nothing to check when it states none)."""
    context = context_tokens(snapshot)
    if context is not None and prompt_tokens + new_tokens > context:
        raise SparkbenchError(f"{prompt_tokens:,} prompt tokens + {new_tokens:,} new tokens are more than the "
                              f"{context:,}-token context the server states for its model")
