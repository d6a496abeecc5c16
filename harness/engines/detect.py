"""Which API a server speaks, and the backend object that talks to it.

SGLang also serves `/v1/models`, so its own `/server_info` is asked first: a server that answers it
is SGLang, and gets the native client with its richer per-request facts.
"""

from __future__ import annotations

import httpx

from harness.engines.base import ServerHTTPError, ServerUnreachable
from harness.engines.openai import OpenAIBackend
from harness.engines.sglang import SGLangBackend
from harness.errors import SparkbenchError

BACKENDS = ("sglang", "openai", "auto")
SGLANG_PROBES = ("/server_info", "/get_server_info")  # newer name first
OPENAI_PROBE = "/v1/models"


def _answers_json(http: httpx.Client, url: str) -> bool:
    """True when `url` answers 200 with a JSON body."""
    resp = http.get(url)
    if resp.status_code != 200:
        return False
    try:
        resp.json()
    except ValueError:
        return False
    return True


def probe(http: httpx.Client, base_url: str) -> str:
    """Name the API ("sglang" or "openai") from the routes the server answers through `http`."""
    if any(_answers_json(http, base_url + path) for path in SGLANG_PROBES):
        return "sglang"
    if _answers_json(http, base_url + OPENAI_PROBE):
        return "openai"
    raise ServerHTTPError(f"{base_url} answers neither SGLang's /server_info nor the OpenAI API's "
                          "/v1/models; is it an inference server?")


def detect_backend(base_url: str, timeout_s: float = 10.0) -> str:
    """Name the API ("sglang" or "openai") of the server at `base_url`; one-line errors otherwise."""
    base_url = base_url.rstrip("/")
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout_s, connect=5.0)) as http:
            return probe(http, base_url)
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"cannot reach {base_url} ({type(exc).__name__}: {exc})") from exc


def make_backend(name: str, base_url: str, chat: bool = False,
                 model: str | None = None) -> SGLangBackend | OpenAIBackend:
    """The backend called `name` ("sglang", "openai", or "auto" to ask the server).

    `chat` and `model` apply to the OpenAI API (`model` None: the first one the server lists).
    """
    if name not in BACKENDS:
        raise SparkbenchError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    resolved = detect_backend(base_url) if name == "auto" else name
    if resolved == "openai":
        return OpenAIBackend(model=model, chat=chat)
    if chat:
        # SGLang's native /generate takes no messages; its OpenAI routes do, through the other client.
        raise SparkbenchError(f"chat requests go through the OpenAI API; {base_url} is SGLang, which "
                              "serves it too: use --backend openai")
    return SGLangBackend()
