"""The vLLM adapter: the OpenAI API, per-request metrics in each chunk, facts from its launch flags.

vLLM serves no `/server_info`; it lists itself as the owner of the models on `/v1/models`. With
`--enable-per-request-metrics` each chunk carries `metrics` (timings, and with
`--per-request-spec-decode-metrics summary` the speculative statistics), which the OpenAI client
keeps in the record's meta. The guard's facts come from the profile's launch arguments and
`GET /version`, translated into SGLang's `/server_info` names.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from harness.engines.meta import NO_SPECULATION, lookup, number, speculation_columns
from harness.engines.openai import MODELS_PATH, first_model_id
from harness.engines.profiler import ServerProfiler
from harness.engines.registry import Engine, register
from harness.engines.scoring import CannotScore, ScoredTokens, post_json, read_answer
from harness.engines.series import (
    GENERATION_TOKENS,
    KV_USAGE,
    PREEMPTIONS,
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    QUEUED,
    RUNNING,
    SPEC_ACCEPTED_TOKENS,
    SPEC_DRAFTS,
    Series,
)
from harness.errors import SparkbenchError
from harness.facts import SPECULATIVE_FACT_KEYS, EngineFacts
from harness.launch_flags import flag_value

TOKEN_ID_PREFIX = "token_id:"


def vllm_server_times_ms(meta: dict[str, Any]) -> tuple[float, float]:
    """(TTFT, e2e) in ms from vLLM per-request metrics: `time_to_first_token_ms` and
    `time_to_first_token_ms + generation_time_ms` (present with `--enable-per-request-metrics`)."""
    ttft = number(lookup(meta, "metrics", "time_to_first_token_ms"))
    return ttft, ttft + number(lookup(meta, "metrics", "generation_time_ms"))


def vllm_speculation(meta: dict[str, Any]) -> dict[str, float]:
    """Speculation columns from vLLM `metrics.speculative_decoding`.

    accept_length = `mean_acceptance_length`, else `1 + num_accepted_draft_tokens / num_spec_steps`.
    vLLM counts only the steps that had a draft (an n-gram drafter often has none), so its rounds
    are fewer than its engine steps. A request with no drafting step at all (num_spec_steps 0, for
    which vLLM still reports an acceptance length of 1.0) has no accept length: every column is
    NaN, as for a request without speculation, so it stays out of the request-weighted mean.
    """
    spec = lookup(meta, "metrics", "speculative_decoding")
    if not isinstance(spec, dict):
        return dict(NO_SPECULATION)
    rounds = number(spec.get("num_spec_steps"))
    accepted = number(spec.get("num_accepted_draft_tokens"))
    reported_length = number(spec.get("mean_acceptance_length"))
    if rounds == 0 or not (rounds > 0 or reported_length > 0):
        return dict(NO_SPECULATION)
    length = reported_length if reported_length > 0 else 1 + accepted / rounds
    return speculation_columns(length, rounds, accepted, number(spec.get("num_draft_tokens")),
                               number(spec.get("draft_acceptance_rate")))


def vllm_server_facts(launch_args: Sequence[str], version: str | None) -> dict[str, Any]:
    """Server facts for a vLLM server, in the flat /server_info vocabulary the checks read.

    `num_speculative_tokens` (draft tokens per round) maps to speculative_num_steps, and the
    verification window (drafts plus the bonus position) to speculative_num_draft_tokens, as SGLang
    counts them for a chain of drafts. `version` is what `GET /version` answered (None: unknown).
    """
    facts: dict[str, Any] = {key: None for key in SPECULATIVE_FACT_KEYS}
    if version is not None:
        facts["version"] = version
    raw = flag_value(launch_args, "--speculative-config")
    if raw is None:
        return facts
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SparkbenchError(f"--speculative-config is not valid JSON ({exc}): {raw}") from exc
    drafts = config.get("num_speculative_tokens")
    facts.update(speculative_algorithm=config.get("method"), speculative_num_steps=drafts,
                 speculative_num_draft_tokens=None if drafts is None else drafts + 1)
    return facts


@register
class VLLMEngine(Engine):
    """vLLM through its OpenAI API."""

    name = "vllm"
    metrics_prefix = "vllm:"
    profiler = ServerProfiler(names_folder=False, needs="a server started with --profiler-config "
                              "'{\"profiler\": \"torch\", \"torch_profiler_dir\": DIR}'")
    # Packages its CPU wheel pulls in that break beside its torch build and that it never uses.
    testbed_remove_after_install = ("torchvision", "torchaudio", "torchcodec")
    # `kv_cache_usage_perc` is a fraction (0..1) despite its name; vLLM has no throughput gauge, so
    # its output rate is the generation-token counter's increase.
    server_series = (
        Series(RUNNING, "vllm:num_requests_running"), Series(QUEUED, "vllm:num_requests_waiting"),
        Series(KV_USAGE, "vllm:kv_cache_usage_perc"),
        Series(GENERATION_TOKENS, "vllm:generation_tokens_total", counter=True),
        Series(PREEMPTIONS, "vllm:num_preemptions_total", counter=True),
        Series(PREFIX_CACHE_HITS, "vllm:prefix_cache_hits_total", counter=True),
        Series(PREFIX_CACHE_QUERIES, "vllm:prefix_cache_queries_total", counter=True),
        Series(SPEC_DRAFTS, "vllm:spec_decode_num_drafts_total", counter=True),
        Series(SPEC_ACCEPTED_TOKENS, "vllm:spec_decode_num_accepted_tokens_total", counter=True),
    )

    def detect(self, http: httpx.Client, base_url: str) -> bool:
        """vLLM names itself the owner of every model it lists on `/v1/models`."""
        resp = http.get(base_url + MODELS_PATH)
        try:
            models = resp.json().get("data") if resp.status_code == 200 else None
        except (ValueError, AttributeError):
            return False
        return bool(models) and all(isinstance(m, dict) and m.get("owned_by") == "vllm" for m in models)

    def server_times_ms(self, meta: dict[str, Any]) -> tuple[float, float]:
        return vllm_server_times_ms(meta)

    def speculation(self, meta: dict[str, Any], completion_tokens: float) -> dict[str, float]:
        return vllm_speculation(meta)

    def server_facts(self, snapshot: dict[str, Any], launch_args: tuple[str, ...]) -> dict[str, Any]:
        """Launch flags and `/version`; the checkpoint folder it serves is each model's `root`, and
        its tokenizer that folder unless `--tokenizer` names another."""
        version = (snapshot.get("version") or {}).get("version")
        root = ((snapshot.get("models") or {}).get("data") or [{}])[0].get("root")
        return {**vllm_server_facts(launch_args, version), "model_path": root,
                "tokenizer_path": flag_value(launch_args, "--tokenizer") or root}

    def facts(self, snapshot: dict[str, Any], launch_args: tuple[str, ...] = ()) -> EngineFacts:
        """As `server_facts`, but without launch flags its speculative settings are not exported:
        vLLM serves them nowhere, and no flags is not the same as no speculation."""
        facts = super().facts(snapshot, launch_args)
        return facts if launch_args else facts.model_copy(update={"speculative": None})

    def launch_args(self, model_dir: Path, served_model_name: str | None = None) -> list[str]:
        """`--served-model-name NAME` (default: the model folder's name), the name requests use."""
        return ["--served-model-name", served_model_name or Path(model_dir).name]

    def launch_env(self, cache_root: Path) -> dict[str, str]:
        return {"VLLM_CACHE_ROOT": str(cache_root / "vllm-compile-cache")}

    def score_tokens(self, http: httpx.Client, base_url: str, token_ids: list[int], start: int,
                     k: int) -> ScoredTokens:
        """`/v1/completions` with `prompt_logprobs` k: entry i of `choices[0].prompt_logprobs` maps
        token ids (strings) to `{logprob, rank}` for the top-k and the actual token i (entry 0 is null)."""
        url = f"{base_url}/v1/completions"
        body = {**_completion(http, base_url, token_ids, 1), "prompt_logprobs": k}
        entries = post_json(http, url, body)["choices"][0].get("prompt_logprobs")
        if entries is None:
            raise CannotScore(f"{url} returned no prompt_logprobs")
        forced = entries[start:]

        def parse() -> ScoredTokens:
            ranked = [_ranked(entry, k) for entry in forced]
            return ScoredTokens(
                target_logprobs=[float(e[str(t)]["logprob"]) for e, t in zip(forced, token_ids[start:])],
                top_ids=[[token for token, _ in r] for r in ranked], top_logprobs=[[lp for _, lp in r] for r in ranked])
        return read_answer(url, len(token_ids) - start, parse)

    def greedy_ids(self, http: httpx.Client, base_url: str, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        """Greedy, its tokens as ids through `return_tokens_as_token_ids` ("token_id:N")."""
        url = f"{base_url}/v1/completions"
        body = {**_completion(http, base_url, prompt_ids, max_new_tokens), "logprobs": 1,
                "return_tokens_as_token_ids": True}
        tokens = (post_json(http, url, body)["choices"][0].get("logprobs") or {}).get("tokens") or []
        if not all(token.startswith(TOKEN_ID_PREFIX) for token in tokens):
            raise CannotScore(f"{url} does not return token ids (return_tokens_as_token_ids)")
        return [int(token[len(TOKEN_ID_PREFIX):]) for token in tokens]


def _completion(http: httpx.Client, base_url: str, prompt_ids: list[int], max_tokens: int) -> dict[str, Any]:
    """A greedy, non-streamed completion body for the first model the server lists."""
    model = first_model_id(http.get(base_url + MODELS_PATH).json(), base_url)
    return {"model": model, "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0.0}


def _ranked(entry: dict[str, Any], k: int) -> list[tuple[int, float]]:
    """(id, logprob) of one prompt_logprobs entry's top-k by rank (the actual token may rank below k)."""
    ranked = sorted((item["rank"], int(token), float(item["logprob"])) for token, item in entry.items()
                    if item["rank"] <= k)
    return [(token, logprob) for _, token, logprob in ranked]
