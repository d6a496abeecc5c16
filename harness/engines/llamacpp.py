"""The llama.cpp adapter: its native `/completion` stream, the `timings` reader, facts from `/props`.

The native stream sends one chunk per token made visible, each with the token's id (`tokens`) and
the server's running count (`tokens_predicted`); that count stamps the arrivals, so a token whose
text is empty (a control token, or bytes held back until a UTF-8 character completes: llama.cpp
then sends no chunk at all, and the next one jumps the count) is still counted. The stream ends
with a chunk that has `stop: true` and `timings`; there is no `data: [DONE]`, so that chunk ends it.

`timings` (also in the last chunk of llama.cpp's OpenAI routes) holds `prompt_ms` (prompt start to
the first token), `predicted_ms` (first to last token), `predicted_n`, `cache_n` (prompt tokens
reused from the cache) and, with speculation, `draft_n` (tokens drafted) and `draft_n_accepted`.
It does not count rounds, so they are derived: every target decode step after the first token
emits its accepted drafts plus one token of its own, hence
    rounds = predicted_n - 1 - draft_n_accepted        (decode steps, drafting or not)
    accept_length = 1 + draft_n_accepted / rounds = (predicted_n - 1) / rounds.
This counts steps without a draft too (llama.cpp drafts nothing when one token is left to make),
where the server's own log and its `/metrics` counter `spec_decode_num_drafts_total` count drafting
steps only; the run's counter delta is recorded beside it (`accept_length_server_counters`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from harness.engines.base import MalformedStream, ServerHTTPError, ServerUnreachable, StreamResult, error_excerpt
from harness.engines.fields import optional_object, optional_text, token_ids
from harness.engines.meta import NO_SPECULATION, lookup, number, speculation_columns
from harness.engines.prometheus import spec_decode_counters
from harness.engines.registry import Engine, register, register_api
from harness.engines.scoring import ScoredTokens, post_json, read_answer
from harness.engines.series import (
    GENERATION_TOKENS,
    KV_USAGE,
    QUEUED,
    RUNNING,
    SPEC_ACCEPTED_TOKENS,
    SPEC_DRAFTS,
    Series,
)
from harness.engines.sse import DONE, Session, post_sse
from harness.engines.stream import NO_DEADLINES, Deadlines, collect
from harness.facts import SPECULATIVE_FACT_KEYS
from harness.launch_flags import flag_value
from harness.spec import Prompt, sampling_fields

COMPLETION = "/completion"
PROPS = "/props"
SLOTS = "/slots"
METRICS_PREFIX = "llamacpp:"
# llama.cpp's `stop_type` -> the OpenAI finish reasons the other clients record.
FINISH_REASONS = {"limit": "length", "eos": "stop", "word": "stop"}
# Launch flags that set the speculative configuration, llama.cpp's default draft length, and the
# guard facts they fill.
SPEC_TYPE_FLAG = "--spec-type"
DRAFT_MAX_FLAGS = ("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n")
DEFAULT_DRAFT_MAX = 3
LLAMACPP_SAMPLING = {"max_new_tokens": "n_predict"}  # its names where they differ from ours (`sampling_fields`)
MODEL_FILE = "model.gguf"  # in a GGUF model folder (see `model_args`)


def request_body(prompt: Prompt) -> dict[str, Any]:
    """The streaming `/completion` request: every sampler the workload names is explicit, and
    llama.cpp's own default min-p (0.05) is switched off, which the other engines do not apply."""
    return {"prompt": list(prompt.input_ids) if prompt.input_ids is not None else prompt.text,
            "stream": True, **sampling_fields(prompt.sampling, LLAMACPP_SAMPLING), "min_p": 0.0,
            "return_tokens": True}


def absorb_chunk(result: StreamResult, chunk: dict[str, Any], now: int) -> None:
    """Fold one chunk into the result, stamping it if the server's count grew; the last chunk
    (`stop: true`) brings the counts, the finish reason and `timings`."""
    if not isinstance(chunk, dict):
        raise MalformedStream("llama.cpp sent a chunk that is not a JSON object")
    if chunk.get("error") is not None:
        error = chunk["error"]
        raise ServerHTTPError(f"server reported an error mid-stream: {error_excerpt(str(lookup(error, 'message') or error))}")
    result.text += optional_text(chunk, "content") or ""
    ids = token_ids(chunk, "tokens")
    result.output_ids.extend(ids)
    count = chunk.get("tokens_predicted")
    result.stamp_tokens(result.tokens_so_far + len(ids) if count is None else count, now)
    if chunk.get("stop"):
        _take_final(result, chunk)


def _take_final(result: StreamResult, chunk: dict[str, Any]) -> None:
    optional_object(chunk, "timings")
    optional_text(chunk, "stop_type")
    result.meta = {key: chunk.get(key) for key in ("timings", "stop_type", "truncated", "tokens_predicted",
                                                   "tokens_evaluated", "tokens_cached", "id_slot")}
    result.finish_reason = FINISH_REASONS.get(chunk.get("stop_type"), chunk.get("stop_type"))
    result.completion_tokens = chunk.get("tokens_predicted")
    result.prompt_tokens = chunk.get("tokens_evaluated")
    cached = lookup(chunk, "timings", "cache_n")
    result.cached_tokens = int(cached) if isinstance(cached, (int, float)) else None


async def events(http: Session, url: str, body: dict[str, Any], result: StreamResult) -> AsyncIterator[tuple[int, Any]]:
    """The stream's chunks, then DONE right after the `stop: true` chunk: llama.cpp's native stream
    sends no `data: [DONE]`, its last chunk is the end."""
    async with contextlib.aclosing(post_sse(http, url, body, tally=result)) as chunks:
        async for now, payload in chunks:
            yield now, payload
            if isinstance(payload, dict) and payload.get("stop"):
                yield now, DONE
                return


async def stream(http: Session, base_url: str, body: dict[str, Any],
                 deadlines: Deadlines = NO_DEADLINES) -> StreamResult:
    """Stream one `/completion` request and return the raw, time-stamped result (a failure is
    recorded on it: `harness.engines.stream.collect`)."""
    url = base_url + COMPLETION
    result = StreamResult(sent_unix_s=time.time(), sent_ns=time.perf_counter_ns(), stream_mode="incremental")
    return await collect(events(http, url, body, result), result, absorb_chunk, url, deadlines)


def _get_json(http: httpx.Client, url: str) -> Any:
    """A JSON answer, or None where the route is off (`--no-slots`) or missing."""
    resp = http.get(url)
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


@register_api("llamacpp")
class LlamaCppBackend:
    """llama.cpp's native API: `/completion` for requests; `/props`, `/slots`, `/metrics` for facts."""

    name = "llamacpp"

    def __init__(self, model: str | None = None, chat: bool = False, engine: str = "llamacpp") -> None:
        self.engine = engine  # `model` and `chat` belong to the OpenAI API; the native one has neither

    async def send(self, http: Session, base_url: str, prompt: Prompt,
                   deadlines: Deadlines = NO_DEADLINES) -> StreamResult:
        return await stream(http, base_url, request_body(prompt), deadlines)

    def body(self, prompt: Prompt) -> dict[str, Any]:
        return request_body(prompt)

    def snapshot(self, http: httpx.Client, base_url: str) -> dict[str, Any]:
        """`/props` (build, model, slots, default sampling) and `/slots`, for the manifest."""
        props = _get_json(http, base_url + PROPS)
        if not isinstance(props, dict):
            raise ServerHTTPError(f"{base_url}{PROPS} did not answer with JSON; is this a llama.cpp server?")
        return {"props": props, "slots": _get_json(http, base_url + SLOTS)}

    async def flush_prefix_cache(self, http: Session, base_url: str) -> str:
        """Nothing to do: llama.cpp reuses a cached prompt only from its first token on, so prompts
        whose first tokens differ reuse nothing (each request's `cache_n` says so)."""
        return "not flushed (prefix reuse starts at the first token; distinct first tokens defeat it)"

    async def counters(self, http: Session, base_url: str) -> dict[str, float] | None:
        """Speculative totals from `/metrics` (drafts, draft_tokens, accepted_tokens); None
        unless the server runs with `--metrics`."""
        try:
            resp = await http.get(f"{base_url}/metrics")
        except httpx.HTTPError as exc:
            raise ServerUnreachable(f"{base_url}/metrics stopped answering ({type(exc).__name__})") from exc
        return spec_decode_counters(resp.text, METRICS_PREFIX) if resp.status_code == 200 else None


def llamacpp_server_times_ms(meta: dict[str, Any]) -> tuple[float, float]:
    """(TTFT, e2e) in ms: `prompt_ms` (prompt processing start to the first token; queueing and the
    HTTP parse are outside it) and `prompt_ms + predicted_ms` (first token to last)."""
    prompt_ms = number(lookup(meta, "timings", "prompt_ms"))
    return prompt_ms, prompt_ms + number(lookup(meta, "timings", "predicted_ms"))


def llamacpp_speculation(meta: dict[str, Any]) -> dict[str, float]:
    """Speculation columns from `timings`; rounds and accept length as the module docstring derives
    them. `draft_n` appears only once something was drafted."""
    timings = meta.get("timings")
    drafted = number(lookup(timings, "draft_n"))
    if not drafted > 0:
        return dict(NO_SPECULATION)
    accepted = number(lookup(timings, "draft_n_accepted"))
    rounds = number(lookup(timings, "predicted_n")) - 1 - accepted
    if not rounds > 0:
        return dict(NO_SPECULATION)
    return speculation_columns(1 + accepted / rounds, rounds, accepted, drafted, math.nan)


def llamacpp_server_facts(props: dict[str, Any], slots: Any, launch_args: Sequence[str]) -> dict[str, Any]:
    """Guard facts in SGLang's vocabulary.

    Whether the server speculates is its own word: each `/slots` entry says `speculative`
    (`/props` does not tell). The algorithm (`--spec-type`) and the draft length (`--spec-draft-n-max`,
    default 3; the verification window is drafts + 1) come from the launch flags. Without `/slots`
    (`--no-slots`) the speculative facts are left out, so checks of them fail: silence is not agreement.
    """
    facts: dict[str, Any] = {"version": props.get("build_info"), "quantization": props.get("model_ftype"),
                             "model_path": props.get("model_path"), "total_slots": props.get("total_slots")}
    if not isinstance(slots, list) or not slots:
        return facts
    if not any(isinstance(slot, dict) and slot.get("speculative") for slot in slots):
        return {**facts, **dict.fromkeys(SPECULATIVE_FACT_KEYS)}
    drafts = int(flag_value(launch_args, *DRAFT_MAX_FLAGS) or DEFAULT_DRAFT_MAX)
    return {**facts, "speculative_algorithm": flag_value(launch_args, SPEC_TYPE_FLAG) or "draft",
            "speculative_num_steps": drafts, "speculative_num_draft_tokens": drafts + 1,
            "speculative_eagle_topk": None}


@register
class LlamaCppEngine(Engine):
    """llama.cpp's `llama-server`: a native binary serving a GGUF file."""

    name = "llamacpp"
    native_api = "llamacpp"
    metrics_prefix = METRICS_PREFIX
    model_flag = "-m"
    detect_order = 40  # its /props is its own; it serves /v1/models too, as every OpenAI server does
    # Exported with `--metrics`. `kv_cache_usage_ratio` is gone from recent builds (then "not
    # exported"). Its `predicted_tokens_seconds` is no live rate (it covers the generations finished
    # since the last scrape, 0 in between), so none is named: the rate is the token counter's.
    server_series = (
        Series(RUNNING, "llamacpp:requests_processing"), Series(QUEUED, "llamacpp:requests_deferred"),
        Series(KV_USAGE, "llamacpp:kv_cache_usage_ratio"),
        Series(GENERATION_TOKENS, "llamacpp:tokens_predicted_total", counter=True),
        Series(SPEC_DRAFTS, "llamacpp:spec_decode_num_drafts_total", counter=True),
        Series(SPEC_ACCEPTED_TOKENS, "llamacpp:spec_decode_num_accepted_tokens_total", counter=True),
    )

    def detect(self, http: httpx.Client, base_url: str) -> bool:
        """llama.cpp answers `GET /props` with its build and default generation settings."""
        props = _get_json(http, base_url + PROPS)
        return isinstance(props, dict) and "default_generation_settings" in props and "build_info" in props

    def server_times_ms(self, meta: dict[str, Any]) -> tuple[float, float]:
        return llamacpp_server_times_ms(meta)

    def speculation(self, meta: dict[str, Any], completion_tokens: float) -> dict[str, float]:
        return llamacpp_speculation(meta)

    def engine_steps(self, meta: dict[str, Any]) -> float:
        """With speculation: the prompt step (which makes the first token) plus the decode rounds."""
        rounds = self.speculation(meta, math.nan)["verify_rounds"]
        return rounds + 1 if rounds > 0 else math.nan

    def greedy_ids(self, http: httpx.Client, base_url: str, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        """Greedy `/completion` of the ids, its tokens as ids (`return_tokens`); the prompt cache is
        off so that every answer is computed from its own prompt alone."""
        body = {"prompt": prompt_ids, "n_predict": max_new_tokens, "temperature": 0.0, "top_k": 1,
                "return_tokens": True, "cache_prompt": False, "stream": False}
        return [int(i) for i in post_json(http, base_url + COMPLETION, body).get("tokens") or []]

    def top_next(self, http: httpx.Client, base_url: str, prompt: str, prefix_ids: list[int],
                 k: int) -> list[tuple[int, float]]:
        """One `/completion` step with `n_probs`: the prompt given as text and ids together (the
        server tokenizes the text as the benchmark request did), the prompt cache off so the answer
        depends on this prompt alone; log-probabilities of the full distribution, before sampling."""
        body = {"prompt": [prompt, *prefix_ids], "n_predict": 1, "temperature": 0.0, "n_probs": k,
                "cache_prompt": False, "stream": False}
        answer = post_json(http, base_url + COMPLETION, body)
        top = read_answer(base_url, 1, lambda: _top_of(answer))
        return list(zip(top.top_ids[0], top.top_logprobs[0]))

    def server_facts(self, snapshot: dict[str, Any], launch_args: tuple[str, ...]) -> dict[str, Any]:
        return llamacpp_server_facts(snapshot.get("props") or {}, snapshot.get("slots"), launch_args)

    def launcher(self, program: Path, module: str) -> list[str]:
        """The server is the built binary itself; the profile's `module` names it (`llama-server`)."""
        return [str(program)]

    def model_args(self, model: Path) -> list[str]:
        """`-m FILE`: a `.gguf` file as given, else a GGUF model folder's `model.gguf` (the test
        bed's folder also holds `draft.gguf` and the tokenizer that synthetic prompts are drawn from)."""
        model = Path(model)
        return [self.model_flag, str(model if model.suffix == ".gguf" else model / MODEL_FILE)]


def _top_of(answer: dict[str, Any]) -> ScoredTokens:
    """The first generated position's `top_logprobs` as a one-position `ScoredTokens`."""
    first = answer["completion_probabilities"][0]
    top = first["top_logprobs"]
    return ScoredTokens([float(first["logprob"])], [[int(t["id"]) for t in top]], [[float(t["logprob"]) for t in top]])
