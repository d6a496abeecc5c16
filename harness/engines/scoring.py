"""Teacher-forced scoring: what a server says about a given token sequence, position by position.

The whole sequence goes in as the prompt; from position `start` on, the server returns its top-k
next tokens and the log-probability of the token that actually follows. Nothing is sampled and
nothing is timed. Engine adapters implement `Engine.score_tokens` (and `Engine.greedy_ids`, the
continuation the reference would write) with the helpers here; an engine that cannot is refused
with `CannotScore`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from harness.engines.base import ServerHTTPError, ServerUnreachable, error_excerpt
from harness.errors import SparkbenchError


@dataclass(frozen=True)
class ScoredTokens:
    """One server's answer for one sequence. Per scored position i: the forced token's
    log-probability (nats), and the top-k token ids in rank order with their log-probabilities."""

    target_logprobs: list[float]
    top_ids: list[list[int]]
    top_logprobs: list[list[float]]


class CannotScore(SparkbenchError):
    """The server cannot return top-k log-probabilities of a given token sequence."""


def post_json(http: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST `body`, return the JSON answer; transport and HTTP failures become one-line errors."""
    try:
        resp = http.post(url, json=body)
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"{url} stopped answering ({type(exc).__name__}: {exc})") from exc
    if resp.status_code >= 400:
        detail = error_excerpt(resp.text.strip().replace("\n", " "))
        raise ServerHTTPError(f"{url} answered HTTP {resp.status_code}: {detail}")
    try:
        return resp.json()
    except ValueError as exc:
        raise ServerHTTPError(f"{url} did not return JSON") from exc


def read_answer(url: str, expected: int, parse: Callable[[], ScoredTokens]) -> ScoredTokens:
    """Run `parse` over a server's answer: an answer of another shape, or with another number of
    positions than `expected`, is a one-line error instead of a traceback."""
    try:
        scored = parse()
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise CannotScore(f"{url} answered in an unexpected shape ({type(exc).__name__}: {exc})") from exc
    lengths = {len(scored.target_logprobs), len(scored.top_ids), len(scored.top_logprobs)}
    if lengths != {expected}:
        raise CannotScore(f"{url} returned {sorted(lengths)} scored positions, expected {expected}")
    return scored


def cannot_score(engine: str, base_url: str) -> CannotScore:
    return CannotScore(f"{base_url} ({engine}) cannot return top-k log-probabilities of given tokens; "
                       "agreement needs SGLang's native API or vLLM's prompt_logprobs")
