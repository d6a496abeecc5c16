"""Where a run's requests go: a server attached by URL, or one started from a profile for the run,
and the API client that speaks to it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.engines.base import Backend, ServerHTTPError
from harness.engines.detect import AUTO, detect_engine, make_backend
from harness.errors import SparkbenchError
from harness.guard.profiles import Profile, load_profile
from harness.records.rundir import SCALE_LABEL
from harness.run.embedded import EmbeddedServer, default_profile, embedded_server
from harness.secrets import redact, remember_url


@dataclass(frozen=True)
class Target:
    """Where requests go: an attached server, or one this process started from a profile."""

    base_url: str
    profile: Profile | None = None
    embedded: EmbeddedServer | None = None

    @property
    def reduced(self) -> bool:
        return self.embedded is not None and self.embedded.testbed_model

    @property
    def scale(self) -> str:
        return SCALE_LABEL if self.reduced else "as configured"

    @property
    def model_dir(self) -> Path | None:
        return self.embedded.model_dir if self.embedded else None


@contextmanager
def target_server(server_url: str | None, profile_name: str | None = None,
                  model_dir: Path | None = None, workload: str | None = None) -> Iterator[Target]:
    """Attach to `server_url`, or start (and always stop) a server from a profile.

    No server and no profile: the embedded default of `workload` (`harness.run.embedded.default_profile`:
    the real model on llama.cpp for GSM8K and Spec-Bench, the tiny random model on SGLang otherwise).
    A profile with `server_url` starts nothing; it only states what that server must be running.
    """
    profile = load_profile(profile_name) if profile_name else None
    if server_url:
        yield Target(base_url=checked_url(server_url), profile=profile)
        return
    profile = profile or load_profile(default_profile(workload, model_dir))
    if model_dir is None:
        print(f"no --server given: starting profile {profile.name} with the test-bed model ({SCALE_LABEL})",
              file=sys.stderr, flush=True)
    with embedded_server(profile.name, model_dir=model_dir) as embedded:
        yield Target(base_url=embedded.base_url, profile=profile, embedded=embedded)


def checked_url(url: str) -> str:
    """`url` without a trailing slash, or a one-line error when it is not an http(s) URL."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise SparkbenchError(f"--server {redact(url)} is not a valid URL ({exc})") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise SparkbenchError(f"--server {redact(url)} is not an http(s) URL with a host")
    if parsed.port is not None and not 0 < parsed.port < 2**16:
        raise SparkbenchError(f"--server {redact(url)}: port {parsed.port} is not a TCP port (1 to 65535)")
    remember_url(url)
    return url.rstrip("/")


def backend_for(target: Target, name: str, chat: bool = False, model: str | None = None,
                headers: dict[str, str] | None = None) -> Backend:
    """The client of API `name` (`auto`: the engine's native one) for the target's engine: the
    launched profile's, else the one the server is recognised as, asked with `headers`."""
    engine = (target.embedded.engine if target.embedded is not None
              else _detected_engine(target.base_url, name, headers))
    return make_backend(name, target.base_url, chat=chat, model=model, engine=engine, headers=headers)


def _detected_engine(base_url: str, api: str, headers: dict[str, str] | None) -> str | None:
    """The engine the server runs. None when an API was named and no adapter recognises the
    server: that API's client then says, in one line, what the server does not serve."""
    try:
        return detect_engine(base_url, headers=headers).name
    except ServerHTTPError:
        if api == AUTO:
            raise
        return None
