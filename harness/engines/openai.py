"""Client for OpenAI-compatible streaming endpoints, `/v1/completions` and `/v1/chat/completions`.

Written against vLLM, and usable with any server that speaks the protocol (SGLang serves it too).
The stream is deltas: each `data:` chunk carries the new text of `choices[0]`, then a last chunk
with empty `choices` carries `usage`, then `data: [DONE]`. The request asks for usage on every
chunk (`continuous_usage_stats`), so each chunk says how many tokens the server has produced so far;
that count, never the number of chunks, stamps the arrivals. Under speculative decoding one chunk
carries several tokens, and a chunk can have empty text while tokens arrived (the server holds back
a partial UTF-8 character), which is why text cannot stand in for the count. A reasoning parser's
thinking (`delta.reasoning_content`, newer vLLM `delta.reasoning`) is kept apart from the answer
text, and its chunks are token arrivals like any other.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from harness.engines.base import (
    ASSUMED_ONE_PER_CHUNK,
    ServerHTTPError,
    ServerUnreachable,
    StreamResult,
    answers_json,
    error_excerpt,
)
from harness.engines.fields import optional_list, optional_object, optional_text, wrong_type
from harness.engines.prometheus import SPEC_COUNTER_PREFIX, parse_metrics, scrape, spec_decode_counters
from harness.engines.registry import Engine, meta_reader, register, register_api
from harness.engines.sse import Session, post_sse
from harness.engines.stream import NO_DEADLINES, Deadlines, collect
from harness.errors import SparkbenchError
from harness.spec import Prompt, sampling_fields

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
# The API's names where they differ from ours (`sampling_fields`); top_k and ignore_eos are the
# vLLM/SGLang extensions of the OpenAI API.
OPENAI_SAMPLING = {"max_new_tokens": "max_tokens"}


class NotOpenAIServer(ServerHTTPError):
    """The server does not speak the OpenAI API (missing routes, or answers that are not JSON)."""


def not_openai(base_url: str, why: str) -> NotOpenAIServer:
    """The one-line error for a server that answered, but not as an OpenAI server would."""
    return NotOpenAIServer(f"{base_url} does not serve the OpenAI API ({why}); try --backend sglang")


def chat_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """The workload's own messages, else the prompt text as one user message."""
    messages = prompt.item.get("chat_messages")
    if messages:
        return list(messages)
    if prompt.text is None:
        raise SparkbenchError(f"prompt {prompt.prompt_id}: chat requests need text or chat_messages, "
                              "not token ids")
    return [{"role": "user", "content": prompt.text}]


def request_body(prompt: Prompt, model: str, chat: bool) -> dict[str, Any]:
    """The streaming request for one prompt; token ids go as `prompt: [ids]` (completions only)."""
    body: dict[str, Any] = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        **sampling_fields(prompt.sampling, OPENAI_SAMPLING),
    }
    if chat:
        body["messages"] = chat_messages(prompt)
    elif prompt.input_ids is not None:
        body["prompt"] = list(prompt.input_ids)
    else:
        body["prompt"] = prompt.text
    return body


def _raise_if_error(chunk: dict[str, Any]) -> None:
    """vLLM reports a failure after the 200 status as `{"error": {...}}` (older: `"object": "error"`)."""
    if chunk.get("error") is not None or chunk.get("object") == "error":
        detail = chunk.get("error", chunk)
        message = detail.get("message", detail) if isinstance(detail, dict) else detail
        raise ServerHTTPError(f"server reported an error mid-stream: {error_excerpt(str(message))}")


def _choice_text(choice: dict[str, Any]) -> tuple[str, str]:
    """New (answer, reasoning) text of one choice: `text` for completions; `delta.content` and
    the reasoning parser's `delta.reasoning_content` (SGLang, vLLM; newer vLLM: `delta.reasoning`,
    the same text where both are sent) for chat."""
    if "delta" not in choice:
        return optional_text(choice, "text", "choices[0].") or "", ""
    delta = optional_object(choice, "delta", "choices[0].") or {}
    where = "choices[0].delta."
    reasoning = optional_text(delta, "reasoning_content", where) or optional_text(delta, "reasoning", where)
    return optional_text(delta, "content", where) or "", reasoning or ""


def _token_count(result: StreamResult, usage: dict[str, Any] | None, text: str) -> int:
    """The server's completion tokens so far; without running usage, one per text-bearing chunk
    (answer or reasoning text: thinking tokens are tokens).

    Only a chunk that is counted by assumption flags the result: SGLang's chat stream leaves usage
    off its role-only opening chunk and its closing finish_reason chunk, which bring no text.
    """
    if usage is not None and usage.get("completion_tokens") is not None:
        return usage["completion_tokens"]
    if not text:
        return result.tokens_so_far
    result.meta["chunk_token_counts"] = ASSUMED_ONE_PER_CHUNK
    return result.tokens_so_far + 1


def _usage(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """The chunk's `usage` object, its `prompt_tokens_details` checked to be an object too."""
    usage = optional_object(chunk, "usage")
    if usage is not None:
        optional_object(usage, "prompt_tokens_details", "usage.")
    return usage


def _absorb_chunk(result: StreamResult, chunk: dict[str, Any], now: int) -> None:
    """Fold one chunk into the result; stamp it if it brought tokens. Every field is read by its
    type (`harness.engines.fields`): a field of another type fails the request as malformed."""
    _raise_if_error(chunk)
    usage = _usage(chunk)
    if usage is not None:
        result.meta["usage"] = usage  # the last one seen is the final count
    for name in ("metrics", "timings"):  # vLLM's per-request metrics; llama.cpp's server timings
        if optional_object(chunk, name) is not None:
            result.meta[name] = chunk[name]
    choices = optional_list(chunk, "choices") or []
    if not choices:
        _usage_arrival(result, usage, now)
        return
    choice = choices[0]
    if type(choice) is not dict:
        raise wrong_type("choices[0]", choice, "an object")
    text, reasoning = _choice_text(choice)
    result.note_text(text, now)
    result.reasoning_text += reasoning
    finish_reason = optional_text(choice, "finish_reason", "choices[0].")
    if finish_reason is not None:
        result.finish_reason = finish_reason
    result.stamp_tokens(_token_count(result, usage, text + reasoning), now)


def _usage_arrival(result: StreamResult, usage: dict[str, Any] | None, now: int) -> None:
    """A chunk with usage and no choice (the closing usage chunk, or a server that streams counts
    apart from text) is a token arrival when its count is past the last: a chunk that advances the
    server's count brought tokens, text or none. Not where the count so far was assumed one per
    chunk: there the closing count is the server's first, not an arrival."""
    if usage is None or usage.get("completion_tokens") is None:
        return
    if result.meta.get("chunk_token_counts") == ASSUMED_ONE_PER_CHUNK:
        return
    result.stamp_tokens(usage["completion_tokens"], now)


def _take_counts(result: StreamResult) -> None:
    """Copy the server's own counts out of the final usage."""
    usage = result.meta.get("usage") or {}
    result.prompt_tokens = usage.get("prompt_tokens")
    result.completion_tokens = usage.get("completion_tokens")
    details = usage.get("prompt_tokens_details") or {}
    result.cached_tokens = details.get("cached_tokens")


def _is_missing_route(message: str, url: str) -> bool:
    """A 404 without an OpenAI error object: the route is missing, not the model.

    vLLM answers an unknown model name with 404 and `{"error": {"message": "The model ... does not
    exist"}}`; a server without the route answers 404 with anything else (`{"detail": "Not Found"}`).
    post_sse puts the status and the start of the body in its message, which is all there is to read.
    """
    return message.startswith(f"{url} answered HTTP 404") and '"error"' not in message


async def stream(http: Session, base_url: str, body: dict[str, Any], path: str,
                 deadlines: Deadlines = NO_DEADLINES) -> StreamResult:
    """Stream one request body to `path` and return the raw, time-stamped result (a failed
    request's result carries its error kind and message; see `harness.engines.stream.collect`).

    A missing route is not a failed request but the wrong server: that one is raised.
    """
    url = base_url + path
    result = StreamResult(sent_unix_s=time.time(), sent_ns=time.perf_counter_ns(), stream_mode="incremental")
    await collect(post_sse(http, url, body, tally=result), result, _absorb_chunk, url, deadlines)
    if result.error_kind == ServerHTTPError.kind and _is_missing_route(result.error_message or "", url):
        raise not_openai(base_url, f"{path} answered 404")
    _take_counts(result)
    return result


def _models(resp: httpx.Response, base_url: str) -> dict[str, Any]:
    """The `/v1/models` answer, or a one-line error saying this is not an OpenAI server."""
    if resp.status_code == 404:
        raise not_openai(base_url, "/v1/models answered 404")
    if resp.status_code >= 400:
        raise ServerHTTPError(f"{base_url}/v1/models answered HTTP {resp.status_code}")
    try:
        models = resp.json()
    except ValueError as exc:
        raise not_openai(base_url, "/v1/models did not return JSON") from exc
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        raise not_openai(base_url, "/v1/models has no `data` list")
    return models


def first_model_id(models: dict[str, Any], base_url: str) -> str:
    """The id of the first model `/v1/models` lists: the one a single-model server serves."""
    if not models["data"]:
        raise ServerHTTPError(f"{base_url}/v1/models lists no model")
    return models["data"][0]["id"]


def spec_counter_names(metrics_text: str) -> list[str]:
    """Names of the `vllm:spec_decode_*_total` counters in a `/metrics` text (none without speculation)."""
    return sorted({name for name, _ in parse_metrics(metrics_text)
                   if name.startswith(SPEC_COUNTER_PREFIX) and name.endswith("_total")})


@register_api("openai")
class OpenAIBackend:
    """OpenAI API: `/v1/completions` or chat for requests; `/v1/models`, `/version`, `/metrics` for facts."""

    name = "openai"

    def __init__(self, model: str | None = None, chat: bool = False, engine: str = "openai") -> None:
        self.model = model  # None: the first model the server lists, looked up once
        self.chat = chat
        self.engine = engine  # whose meta objects the records will hold

    @property
    def path(self) -> str:
        return CHAT if self.chat else COMPLETIONS

    async def send(self, http: Session, base_url: str, prompt: Prompt,
                   deadlines: Deadlines = NO_DEADLINES) -> StreamResult:
        if self.model is None:
            models = _models(await http.get(f"{base_url}/v1/models"), base_url)
            self.model = first_model_id(models, base_url)
        return await stream(http, base_url, self.body(prompt), self.path, deadlines)

    def body(self, prompt: Prompt) -> dict[str, Any]:
        return request_body(prompt, self.model, self.chat)

    def snapshot(self, http: httpx.Client, base_url: str) -> dict[str, Any]:
        """Served models, engine version and speculative counters on offer, for the manifest."""
        models = _models(http.get(f"{base_url}/v1/models"), base_url)
        if self.model is None:
            self.model = first_model_id(models, base_url)
        facts: dict[str, Any] = {"models": models}
        version = http.get(f"{base_url}/version")
        if version.status_code == 200 and "json" in version.headers.get("content-type", ""):
            facts["version"] = version.json()
        metrics_text = scrape(http, base_url)
        facts["metrics_text_keys"] = spec_counter_names(metrics_text) if metrics_text is not None else []
        return facts

    async def flush_prefix_cache(self, http: Session, base_url: str) -> str:
        """Nothing to do: vLLM caches whole blocks chained from the first, so prompts whose first
        tokens differ share no cached block (and the OpenAI API has no flush)."""
        return "not flushed (block-level prefix cache; distinct first tokens defeat it)"

    async def counters(self, http: Session, base_url: str) -> dict[str, float] | None:
        """The engine's speculative counters now (drafts, draft_tokens, accepted_tokens), under its
        adapter's metric prefix; None when it exports none (no /metrics, or not these counters)."""
        prefix = meta_reader(self.engine).metrics_prefix
        if prefix is None:
            return None
        try:
            resp = await http.get(f"{base_url}/metrics")
        except httpx.HTTPError as exc:
            raise ServerUnreachable(f"{base_url}/metrics stopped answering ({type(exc).__name__})") from exc
        return spec_decode_counters(resp.text, prefix) if resp.status_code == 200 else None


@register
class OpenAICompatibleEngine(Engine):
    """Any server that speaks the OpenAI API and is not recognised as a specific engine: requests
    and the server's token counts only (no server timings, no speculative statistics)."""

    name = "openai"
    detect_order = 100  # every OpenAI-compatible server passes its probe
    launchable = False

    def detect(self, http: httpx.Client, base_url: str) -> bool:
        return answers_json(http, base_url + MODELS_PATH)
