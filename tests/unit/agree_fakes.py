"""Fake SGLang and vLLM servers that score token sequences, for the agreement unit tests.

The "model" is a deterministic function of the last three tokens: seeded random logits over a
small vocabulary, plus `noise` times a second seeded draw (noise 0: the reference model). Both
fakes answer in the shapes the real servers were seen to use (see test_agree_engines.py).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import NamedTuple

import httpx
import numpy as np

VOCAB = 300


class Scores(NamedTuple):
    logprobs: np.ndarray  # over the vocabulary
    order: np.ndarray  # token ids, most likely first (ties in vocabulary order)
    ranks: np.ndarray  # each token's 1-based place in `order`


def scores(prefix: list[int], noise: float) -> Scores:
    return _scores(tuple(int(t) for t in prefix[-3:]), noise)


@functools.lru_cache(maxsize=None)
def _scores(key: tuple[int, ...], noise: float) -> Scores:
    """Cached: every scored prompt repeats the same five shots, so the same contexts recur."""
    logits = np.random.default_rng([7, *key]).normal(size=VOCAB) * 2.0
    logits = logits + noise * np.random.default_rng([8, *key]).normal(size=VOCAB)
    lp = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
    order = np.argsort(-lp, kind="stable")
    ranks = np.empty(VOCAB, dtype=int)
    ranks[order] = np.arange(1, VOCAB + 1)
    for array in (lp, order, ranks):
        array.flags.writeable = False
    return Scores(lp, order, ranks)


def _top(scored: Scores, k: int) -> list[int]:
    return [int(i) for i in scored.order[:k]]


class FakeSGLang:
    def __init__(self, noise: float = 0.0, model_path: str = "/nonexistent") -> None:
        self.noise, self.model_path, self.bodies = noise, model_path, []

    def generate(self, body: dict) -> dict:
        ids = list(body["input_ids"])
        if not body.get("return_logprob"):
            out = []
            for _ in range(body["sampling_params"]["max_new_tokens"]):
                out.append(_top(scores(ids + out, self.noise), 1)[0])
            return {"text": "", "output_ids": out, "meta_info": {}}
        start, k = body["logprob_start_len"], body["top_logprobs_num"]
        targets, tops = [[None, ids[start], None]], [None]  # as SGLang 0.5.23: token `start` is taken as given
        for i in range(start + 1, len(ids)):
            scored = scores(ids[:i], self.noise)
            lp = scored.logprobs
            targets.append([float(lp[ids[i]]), ids[i], None])
            tops.append([[float(lp[t]), t, None] for t in _top(scored, k)])
        return {"text": "", "output_ids": [0], "meta_info": {"input_token_logprobs": targets,
                                                             "input_top_logprobs": tops}}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path in ("/server_info", "/model_info"):
            return httpx.Response(200, json={"model_path": self.model_path, "version": "fake"})
        if path == "/generate":
            body = json.loads(request.content)
            self.bodies.append(body)
            return httpx.Response(200, json=self.generate(body))
        return httpx.Response(404, json={"detail": "Not Found"})


class FakeVLLM:
    def __init__(self, noise: float = 0.0, prompt_logprobs: bool = True, owner: str = "vllm") -> None:
        self.noise, self.prompt_logprobs, self.owner, self.bodies = noise, prompt_logprobs, owner, []

    def completion(self, body: dict) -> dict:
        ids, k = list(body["prompt"]), body.get("prompt_logprobs")
        choice: dict = {"text": "", "index": 0, "logprobs": None}
        if k is not None and self.prompt_logprobs:
            entries: list = [None]
            for i in range(1, len(ids)):
                scored = scores(ids[:i], self.noise)
                chosen = dict.fromkeys([*_top(scored, k), ids[i]])
                entries.append({str(t): {"logprob": float(scored.logprobs[t]), "rank": int(scored.ranks[t]),
                                         "decoded_token": "x"} for t in chosen})
            choice["prompt_logprobs"] = entries
        return {"choices": [choice], "usage": {"prompt_tokens": len(ids), "completion_tokens": 1}}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny", "root": "/nonexistent", "owned_by": self.owner}]})
        if path == "/v1/completions":
            body = json.loads(request.content)
            self.bodies.append(body)
            return httpx.Response(200, json=self.completion(body))
        return httpx.Response(404, json={"detail": "Not Found"})


class Hosts:
    """One transport for several fake servers, routed by host name (http://NAME)."""

    def __init__(self, servers: dict) -> None:
        self.servers = servers

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return self.servers[request.url.host](request)


def write_tokenizer(folder: Path) -> Path:
    """A small byte-level BPE tokenizer (tokenizer.json) trained on a few GSM8K questions."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from workloads.gsm8k import load_vendored_split

    questions = [row["question"] for row in load_vendored_split("test")[:200]]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(questions, trainer=trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder
