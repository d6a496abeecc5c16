"""Which engine a server runs, and the client that talks to it in the chosen API.

Each registered adapter is asked whether it recognises the server, specific engines first (SGLang
also serves `/v1/models`, so its own `/server_info` is asked before the generic OpenAI probe).
`--backend auto` then speaks the engine's native API; `sglang` or `openai` name the API outright.
"""

from __future__ import annotations

import httpx

from harness.engines.base import Backend, ServerUnreachable
from harness.engines.control import BoundedClient
from harness.engines.registry import Engine, api_client, apis, detect, engine_named
from harness.errors import SparkbenchError

AUTO = "auto"


def backends() -> tuple[str, ...]:
    """The `--backend` choices: every registered API, and `auto`."""
    return (*apis(), AUTO)


def probe(http: httpx.Client, base_url: str) -> str:
    """Name the API ("sglang" or "openai") that `auto` speaks to the server, asked through `http`."""
    return detect(http, base_url).native_api


def detect_engine(base_url: str, timeout_s: float = 10.0, headers: dict[str, str] | None = None) -> Engine:
    """The engine of the server at `base_url`; one-line errors when it cannot be reached or named.
    Each probe ends after `timeout_s`, whatever the server sends, and carries `headers` (the
    credentials and the user's own headers: a gateway in front of the server refuses a probe without them)."""
    base_url = base_url.rstrip("/")
    try:
        with BoundedClient(deadline_s=timeout_s, headers=headers) as http:
            return detect(http, base_url)
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"cannot reach {base_url} ({type(exc).__name__}: {exc})") from exc


def detect_backend(base_url: str, timeout_s: float = 10.0) -> str:
    """Name the API ("sglang" or "openai") that `auto` speaks to the server at `base_url`."""
    return detect_engine(base_url, timeout_s).native_api


def make_backend(name: str, base_url: str, chat: bool = False, model: str | None = None,
                 engine: str | None = None, headers: dict[str, str] | None = None) -> Backend:
    """The client for API `name` ("sglang", "openai", or "auto": the engine's native API).

    `engine` names whose meta objects the records will hold; None: asked from the server for
    `auto`, else the engine that defines the named API (SGLang for its native API, a generic
    OpenAI-compatible server for the OpenAI API). `chat` and `model` apply to the OpenAI API
    (`model` None: the first one the server lists); `headers` go with the detection probes.
    """
    if name not in backends():
        raise SparkbenchError(f"unknown backend {name!r}; choose one of {', '.join(backends())}")
    if engine is not None:
        adapter = engine_named(engine)
    else:
        adapter = detect_engine(base_url, headers=headers) if name == AUTO else engine_named(name)
    api = adapter.native_api if name == AUTO else name
    return api_client(api, model=model, chat=chat, engine=adapter.name)

