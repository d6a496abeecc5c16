"""What each engine is asked, and how its answer is read, to score a given token sequence.

Scoring is teacher-forced: the whole sequence goes in as the prompt and the server returns, at
every position from `start` on, its top-k next tokens and the log-probability of the token that
actually follows. The sequence is never sampled, so the two servers cannot drift apart.

- SGLang, native `/generate`: `return_logprob`, `logprob_start_len` (L), `top_logprobs_num` (k);
  `meta_info.input_token_logprobs[j]` is `[logprob, token_id, text]` of token L + j and
  `meta_info.input_top_logprobs[j]` the top-k `[logprob, token_id, text]` lists there, except that
  entry 0 is always null (SGLang 0.5.23 takes token L as given). So L = start - 1 and entry 0 is dropped.
- vLLM, `/v1/completions`: `prompt_logprobs: k`; `choices[0].prompt_logprobs[i]` maps token ids
  (as strings) to `{logprob, rank}` for the top-k and the actual token i (entry 0 is null).
  Greedy continuations come back as ids through `return_tokens_as_token_ids` ("token_id:N").
- Any other OpenAI-compatible server: refused with one line when its answer has no prompt_logprobs.

Requests are plain JSON (no stream): nothing is timed here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from harness.agree.metrics import TopK
from harness.engines.base import ServerHTTPError, ServerUnreachable
from harness.engines.detect import probe
from harness.errors import SparkbenchError

TOKEN_ID_PREFIX = "token_id:"


@dataclass(frozen=True)
class Scored:
    """One server's answer for one sequence: per scored position, the forced token's log-probability
    and the top-k."""

    target_logprobs: list[float]
    top: list[TopK]


class CannotScore(SparkbenchError):
    """The server cannot return top-k log-probabilities of a given token sequence."""


def post_json(http: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST `body`, return the JSON answer; transport and HTTP failures become one-line errors."""
    try:
        resp = http.post(url, json=body)
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"{url} stopped answering ({type(exc).__name__}: {exc})") from exc
    if resp.status_code >= 400:
        detail = resp.text.strip().replace("\n", " ")[:300]
        raise ServerHTTPError(f"{url} answered HTTP {resp.status_code}: {detail}")
    try:
        return resp.json()
    except ValueError as exc:
        raise ServerHTTPError(f"{url} did not return JSON") from exc


def read_answer(url: str, expected: int, parse: Callable[[], Scored]) -> Scored:
    """Run `parse` over a server's answer: an answer of another shape, or with another number of
    positions than `expected`, is a one-line error instead of a traceback."""
    try:
        scored = parse()
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise CannotScore(f"{url} answered in an unexpected shape ({type(exc).__name__}: {exc})") from exc
    if len(scored.top) != expected or len(scored.target_logprobs) != expected:
        raise CannotScore(f"{url} returned {len(scored.top)} scored positions, expected {expected}")
    return scored


class SGLangScorer:
    """SGLang's native API."""

    engine = "sglang"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.url = f"{base_url}/generate"

    def greedy(self, http: httpx.Client, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        body = {"input_ids": prompt_ids, "stream": False,
                "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens}}
        return list(post_json(http, self.url, body)["output_ids"])

    def score(self, http: httpx.Client, token_ids: list[int], start: int, k: int) -> Scored:
        body = {"input_ids": token_ids, "stream": False, "return_logprob": True,
                "logprob_start_len": start - 1, "top_logprobs_num": k,
                "sampling_params": {"temperature": 0.0, "max_new_tokens": 1}}
        meta = post_json(http, self.url, body).get("meta_info") or {}
        targets, tops = meta.get("input_token_logprobs"), meta.get("input_top_logprobs")
        if targets is None or tops is None:
            raise CannotScore(f"{self.url} returned no input_token_logprobs / input_top_logprobs")
        targets, tops = targets[1:], tops[1:]  # entry 0: token start - 1, taken as given (null)
        return read_answer(self.url, len(token_ids) - start, lambda: Scored(
            target_logprobs=[float(entry[0]) for entry in targets],
            top=[TopK(tuple(int(e[1]) for e in top), tuple(float(e[0]) for e in top)) for top in tops]))

    def model_path(self, http: httpx.Client) -> str | None:
        resp = http.get(f"{self.base_url}/server_info")
        return resp.json().get("model_path") if resp.status_code == 200 else None


def _prompt_topk(entry: dict[str, Any], k: int) -> TopK:
    """The top-k of one vLLM prompt_logprobs entry, by rank (the actual token may rank below k)."""
    ranked = sorted((item["rank"], int(token), float(item["logprob"])) for token, item in entry.items()
                    if item.get("rank") is not None and item["rank"] <= k)
    return TopK(tuple(token for _, token, _ in ranked), tuple(lp for _, _, lp in ranked))


class OpenAIScorer:
    """vLLM's OpenAI-compatible completions with its `prompt_logprobs` extension."""

    engine = "vllm"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.url = f"{base_url}/v1/completions"
        self.model: str | None = None

    def _body(self, http: httpx.Client, prompt_ids: list[int], max_tokens: int) -> dict[str, Any]:
        if self.model is None:
            self.model = http.get(f"{self.base_url}/v1/models").json()["data"][0]["id"]
        return {"model": self.model, "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0.0}

    def greedy(self, http: httpx.Client, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        body = {**self._body(http, prompt_ids, max_new_tokens), "logprobs": 1, "return_tokens_as_token_ids": True}
        tokens = (post_json(http, self.url, body)["choices"][0].get("logprobs") or {}).get("tokens") or []
        if not all(token.startswith(TOKEN_ID_PREFIX) for token in tokens):
            raise CannotScore(f"{self.url} does not return token ids (return_tokens_as_token_ids)")
        return [int(token[len(TOKEN_ID_PREFIX):]) for token in tokens]

    def score(self, http: httpx.Client, token_ids: list[int], start: int, k: int) -> Scored:
        body = {**self._body(http, token_ids, 1), "prompt_logprobs": k}
        entries = post_json(http, self.url, body)["choices"][0].get("prompt_logprobs")
        if entries is None:
            raise CannotScore(f"{self.url} returned no prompt_logprobs: this server cannot score a given "
                              "token sequence (needs SGLang, or vLLM's prompt_logprobs)")
        forced = entries[start:]
        return read_answer(self.url, len(token_ids) - start, lambda: Scored(
            target_logprobs=[float(e[str(t)]["logprob"]) for e, t in zip(forced, token_ids[start:])],
            top=[_prompt_topk(e, k) for e in forced]))

    def model_path(self, http: httpx.Client) -> str | None:
        resp = http.get(f"{self.base_url}/v1/models")
        return resp.json()["data"][0].get("root") if resp.status_code == 200 else None


def scorer_for(http: httpx.Client, base_url: str) -> SGLangScorer | OpenAIScorer:
    """The scorer of the server at `base_url`, by the API it answers (SGLang first)."""
    base_url = base_url.rstrip("/")
    try:
        api = probe(http, base_url)
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"cannot reach {base_url} ({type(exc).__name__}: {exc})") from exc
    return SGLangScorer(base_url) if api == "sglang" else OpenAIScorer(base_url)
