"""Client for SGLang's native streaming endpoint, `POST /generate`.

SGLang streams `data: {"text", "output_ids", "meta_info"}` lines and then `data: [DONE]`. By default
every chunk repeats ALL text and ids so far (cumulative); with `--incremental-streaming-output` each
chunk carries only the new ones. `meta_info.completion_tokens` is the server's count so far in both
modes, so it decides per chunk which mode is in use: a chunk whose id list is as long as the count
is the whole output so far.

The SGLang adapter reads its per-request `meta_info` (server timings, speculative statistics),
its `/server_info` as the guard's facts, and launches it with `--model-path`.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

import httpx

from harness.engines.base import MalformedStream, ServerHTTPError, ServerUnreachable, StreamResult, answers_json
from harness.engines.fields import reason
from harness.engines.meta import NO_SPECULATION, count_list, first_number, number, speculation_columns
from harness.engines.profiler import ServerProfiler
from harness.engines.registry import Engine, register, register_api
from harness.engines.scoring import CannotScore, ScoredTokens, post_json, read_answer
from harness.engines.series import (
    GEN_THROUGHPUT,
    GENERATION_TOKENS,
    KV_USAGE,
    PREEMPTIONS,
    PREFIX_CACHE_HIT_RATE,
    QUEUED,
    RUNNING,
    SPEC_ACCEPT_LENGTH,
    Series,
)
from harness.engines.sglang_stream import ChunkReader
from harness.engines.sse import Session, post_sse
from harness.engines.stream import NO_DEADLINES, Deadlines, collect
from harness.errors import SparkbenchError
from harness.spec import Prompt, sampling_fields

SERVER_INFO_PATHS = ("/server_info", "/get_server_info")  # newer name first
MS_PER_S = 1000.0
SGLANG_SAMPLING = {"seed": "sampling_seed"}  # its `sampling_params` names where they differ from ours
# A flush refused while the last request is still being freed is retried (see flush_prefix_cache).
FLUSH_ATTEMPTS, FLUSH_RETRY_S = 20, 0.25


def request_body(prompt: Prompt) -> dict[str, Any]:
    body: dict[str, Any] = {"sampling_params": sampling_fields(prompt.sampling, SGLANG_SAMPLING), "stream": True}
    if prompt.input_ids is not None:
        body["input_ids"] = list(prompt.input_ids)
    else:
        body["text"] = prompt.text
    return body


async def generate(http: Session, base_url: str, prompt: Prompt,
                   deadlines: Deadlines = NO_DEADLINES) -> StreamResult:
    """Stream one prompt through `/generate` and return the raw, time-stamped result (a failed
    request's result carries its error kind and message; see `harness.engines.stream.collect`)."""
    url = f"{base_url}/generate"
    result = StreamResult(sent_unix_s=time.time(), sent_ns=time.perf_counter_ns())
    chunks = ChunkReader()
    await collect(post_sse(http, url, request_body(prompt), chunks.decode, tally=result), result, chunks.absorb, url, deadlines)
    chunks.finish(result, url)
    _take_counts(result)
    return result


def _take_counts(result: StreamResult) -> None:
    """Copy the server's own counts out of the final meta_info."""
    meta = result.meta
    result.prompt_tokens = meta.get("prompt_tokens")
    result.completion_tokens = meta.get("completion_tokens")
    result.cached_tokens = meta.get("cached_tokens")
    result.finish_reason = reason(meta.get("finish_reason"), "meta_info.finish_reason")  # checked per chunk


@register_api("sglang")
class SGLangBackend:
    """SGLang's native API: `/generate` for requests, `/server_info` and `/model_info` for facts."""

    name = "sglang"

    def __init__(self, model: str | None = None, chat: bool = False, engine: str = "sglang") -> None:
        if chat:
            # /generate takes no messages; SGLang's OpenAI routes do, through the other client.
            raise SparkbenchError("chat requests go through the OpenAI API; SGLang serves it too: "
                                  "use --backend openai")
        self.engine = engine

    async def send(self, http: Session, base_url: str, prompt: Prompt,
                   deadlines: Deadlines = NO_DEADLINES) -> StreamResult:
        return await generate(http, base_url, prompt, deadlines)

    def body(self, prompt: Prompt) -> dict[str, Any]:
        return request_body(prompt)

    def snapshot(self, http: httpx.Client, base_url: str) -> dict[str, Any]:
        """The server's resolved arguments and model facts, for the manifest and the guard."""
        return {"server_info": _get_json(http, base_url, *SERVER_INFO_PATHS),
                "model_info": _get_json(http, base_url, "/model_info", "/get_model_info")}

    async def flush_prefix_cache(self, http: Session, base_url: str) -> str:
        """Empty the radix cache. Any earlier prompt that began with the same token would otherwise
        serve that token from the cache; only the server can forget what it has seen.

        SGLang refuses to flush (HTTP 400) while a request is still in its running batch, and it
        streams a request's last chunk before its next scheduling step frees it: right after the
        warm-up that window is open, so a refusal is retried for a few seconds before it counts.
        """
        for attempt in range(FLUSH_ATTEMPTS):
            try:
                resp = await http.post(f"{base_url}/flush_cache")
            except httpx.HTTPError as exc:
                raise ServerUnreachable(f"{base_url}/flush_cache stopped answering ({type(exc).__name__})") from exc
            if resp.status_code != 400 or attempt == FLUSH_ATTEMPTS - 1:
                break
            await asyncio.sleep(FLUSH_RETRY_S)
        if resp.status_code != 200:
            raise ServerHTTPError(f"{base_url}/flush_cache answered HTTP {resp.status_code}: "
                                  f"{resp.text.strip()[:200]} (use --keep-prefix-cache to skip the flush)")
        return "flushed (POST /flush_cache)"

    async def counters(self, http: Session, base_url: str) -> None:
        """None: SGLang reports speculative statistics per request in meta_info, which is what we use
        (its running average in /server_info includes warm-up and earlier runs)."""
        return None


def _get_json(http: httpx.Client, base_url: str, *paths: str) -> dict[str, Any]:
    """GET the first of `paths` that the server serves (newer names first, then older ones)."""
    for path in paths:
        resp = http.get(base_url + path)
        if resp.status_code == 404:
            continue
        if resp.status_code >= 400:
            raise ServerHTTPError(f"{base_url}{path} answered HTTP {resp.status_code}")
        try:
            return resp.json()
        except ValueError as exc:
            raise MalformedStream(f"{base_url}{path} did not return JSON; is this an SGLang server?") from exc
    raise ServerHTTPError(f"{base_url} serves none of {', '.join(paths)}; is this an SGLang server?")


def sglang_server_times_ms(meta: dict[str, Any]) -> tuple[float, float]:
    """(TTFT, e2e) in ms from SGLang meta_info `first_token_latency`, `e2e_latency` (both in SECONDS).

    `first_token_latency` is present only when the server runs with `--enable-metrics`.
    """
    return number(meta.get("first_token_latency")) * MS_PER_S, number(meta.get("e2e_latency")) * MS_PER_S


def sglang_speculation(meta: dict[str, Any], completion_tokens: float) -> dict[str, float]:
    """Speculation columns from SGLang meta_info.

    accept_length (tokens per verify round) = `spec_accept_length`, else
    `completion_tokens / spec_verify_ct` (SGLang's own definition: it counts the bonus token and the
    first token from prefill). Draft counts: `spec_num_correct_drafts` / `spec_num_proposed_drafts`,
    else the names of earlier releases, `spec_accepted_drafts` / `spec_proposed_drafts` and before
    them `spec_accept_token_num` / `spec_draft_token_num`.
    """
    rounds = number(meta.get("spec_verify_ct"))
    reported_length = number(meta.get("spec_accept_length"))
    if rounds == 0 or not (rounds > 0 or reported_length > 0):
        return dict(NO_SPECULATION)
    length = reported_length if reported_length > 0 else completion_tokens / rounds
    return speculation_columns(
        length,
        rounds,
        first_number(meta, "spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num"),
        first_number(meta, "spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num"),
        number(meta.get("spec_accept_rate")),
    )


def sglang_draft_histogram(meta: dict[str, Any]) -> list[int] | None:
    """`spec_correct_drafts_histogram` (0.5.23): entry k counts the verify rounds with exactly k
    correct drafts. SGLang grows the list only up to the largest count seen (a draft never accepted
    gives `[rounds]`), so it is padded with zeros to drafts-per-round + 1 entries, drafts per round
    being `spec_num_proposed_drafts / spec_verify_ct` when that is whole (a chain of drafts; a tree
    proposes more drafts than its depth, and its deeper positions then read "never reached")."""
    counts = count_list(meta.get("spec_correct_drafts_histogram"))
    if counts is None:
        return None
    rounds = number(meta.get("spec_verify_ct"))
    per_round = first_number(meta, "spec_num_proposed_drafts", "spec_proposed_drafts") / rounds if rounds > 0 else math.nan
    if math.isfinite(per_round) and per_round == int(per_round):  # unknown or fractional: as sent
        counts += [0] * (int(per_round) + 1 - len(counts))
    return counts


@register
class SGLangEngine(Engine):
    """SGLang: native `/generate`, per-request facts in `meta_info`, resolved arguments in `/server_info`."""

    name = "sglang"
    native_api = "sglang"
    model_flag = "--model-path"
    detect_order = 10  # its /server_info is its own; other engines' probes read /v1/models, which it serves too
    profiler = ServerProfiler()
    # Exported with `--enable-metrics`. The scheduler's gauges are refreshed when it logs a prefill
    # batch and every `--decode-log-interval` decode steps (40 by default), not at every step.
    server_series = (
        Series(RUNNING, "sglang:num_running_reqs"), Series(QUEUED, "sglang:num_queue_reqs"),
        Series(KV_USAGE, "sglang:token_usage"), Series(GEN_THROUGHPUT, "sglang:gen_throughput"),
        Series(GENERATION_TOKENS, "sglang:generation_tokens_total", counter=True),
        Series(PREEMPTIONS, "sglang:num_retracted_reqs"), Series(PREFIX_CACHE_HIT_RATE, "sglang:cache_hit_rate"),
        Series(SPEC_ACCEPT_LENGTH, "sglang:spec_accept_length"),
    )

    def detect(self, http: httpx.Client, base_url: str) -> bool:
        """SGLang also serves `/v1/models`, so its own `/server_info` is what names it."""
        return any(answers_json(http, base_url + path) for path in SERVER_INFO_PATHS)

    def server_times_ms(self, meta: dict[str, Any]) -> tuple[float, float]:
        return sglang_server_times_ms(meta)

    def speculation(self, meta: dict[str, Any], completion_tokens: float) -> dict[str, float]:
        return sglang_speculation(meta, completion_tokens)

    def draft_histogram(self, meta: dict[str, Any]) -> list[int] | None:
        return sglang_draft_histogram(meta)

    def engine_steps(self, meta: dict[str, Any]) -> float:
        """With speculation: one prefill step plus `spec_verify_ct` verify rounds (every decode step
        verifies); NaN without it."""
        rounds = number(meta.get("spec_verify_ct"))
        return rounds + 1 if rounds > 0 else math.nan

    def server_facts(self, snapshot: dict[str, Any], launch_args: tuple[str, ...]) -> dict[str, Any]:
        """`/server_info` as it is: the guard's vocabulary is SGLang's."""
        return snapshot.get("server_info", {})

    def launch_env(self, cache_root: Path) -> dict[str, str]:
        """SGLang's JIT cache, where NGRAM compiles its C++ n-gram corpus on first start."""
        return {"SGLANG_JIT_CACHE_DIR": str(cache_root / "sglang-jit-cache")}

    def score_tokens(self, http: httpx.Client, base_url: str, token_ids: list[int], start: int,
                     k: int) -> ScoredTokens:
        """`/generate` with `return_logprob`, `top_logprobs_num` k and `logprob_start_len` start - 1:
        entry j of `input_token_logprobs` / `input_top_logprobs` is `[logprob, id, text]` (top: a list
        of them) of token start - 1 + j, and entry 0 is always null (0.5.23 takes that token as given)."""
        url = f"{base_url}/generate"
        body = {"input_ids": token_ids, "stream": False, "return_logprob": True, "logprob_start_len": start - 1,
                "top_logprobs_num": k, "sampling_params": {"temperature": 0.0, "max_new_tokens": 1}}
        meta = post_json(http, url, body).get("meta_info") or {}
        targets, tops = meta.get("input_token_logprobs"), meta.get("input_top_logprobs")
        if targets is None or tops is None:
            raise CannotScore(f"{url} returned no input_token_logprobs / input_top_logprobs")
        return read_answer(url, len(token_ids) - start, lambda: ScoredTokens(
            target_logprobs=[float(entry[0]) for entry in targets[1:]],
            top_ids=[[int(e[1]) for e in top] for top in tops[1:]],
            top_logprobs=[[float(e[0]) for e in top] for top in tops[1:]]))

    def greedy_ids(self, http: httpx.Client, base_url: str, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        body = {"input_ids": prompt_ids, "stream": False,
                "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens}}
        return [int(i) for i in post_json(http, f"{base_url}/generate", body)["output_ids"]]
