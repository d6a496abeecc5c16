"""The two servers of an agreement run: each one's engine adapter, facts, and scoring calls."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.engines.base import ServerUnreachable
from harness.engines.registry import Engine, api_client, detect
from harness.engines.scoring import ScoredTokens
from harness.errors import SparkbenchError


@dataclass(frozen=True)
class Server:
    """A server at `url` and the adapter of the engine it runs."""

    url: str
    engine: Engine

    def score(self, http: httpx.Client, token_ids: list[int], start: int, k: int) -> ScoredTokens:
        return self.engine.score_tokens(http, self.url, token_ids, start, k)

    def greedy(self, http: httpx.Client, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        return self.engine.greedy_ids(http, self.url, prompt_ids, max_new_tokens)

    def snapshot(self, http: httpx.Client) -> dict[str, Any]:
        """The server's facts for the manifest, through the benchmark client of its native API."""
        client = api_client(self.engine.native_api, model=None, chat=False, engine=self.engine.name)
        return _reachable(self.url, lambda: client.snapshot(http, self.url))

    def model_folder(self, http: httpx.Client) -> Path:
        """The local folder of the model it serves (its tokenizer is read from there)."""
        path = self.engine.facts(self.snapshot(http)).model
        if not path or not Path(path).is_dir():
            raise SparkbenchError(f"{self.url} serves {path!r}, which is not a local folder; pass --tokenizer DIR")
        return Path(path)


def _reachable(url: str, call):
    try:
        return call()
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"cannot reach {url} ({type(exc).__name__}: {exc})") from exc


def connect(http: httpx.Client, url: str) -> Server:
    """The server at `url`, its engine recognised by the registered adapters."""
    url = url.rstrip("/")
    return Server(url, _reachable(url, lambda: detect(http, url)))
