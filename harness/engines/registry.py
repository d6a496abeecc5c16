"""Engine adapters and API clients, registered by name.

An engine adapter (`Engine`) holds everything sparkbench knows about one inference engine: how to
recognise it at a URL, which API it speaks natively, how to read its per-request meta object
(server timings, speculative counters), the flat server facts the guard checks, and how to
launch it (model flag, extra arguments, environment, test-bed install). An API client (see
`Backend`) speaks one protocol (SGLang's native `/generate`, the OpenAI API) to any engine that
serves it; records name both, as `engine` and `api`.

Adding an engine is one module in this package with an `Engine` subclass decorated with
`@register` (and a `@register_api` client if it brings a protocol of its own), plus its profiles:
the package's modules are imported on first lookup, so nothing else needs to name it.
"""

from __future__ import annotations

import functools
import importlib
import math
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx

from harness.engines.base import Backend, ServerHTTPError
from harness.engines.meta import NO_SPECULATION
from harness.engines.profiler import ServerProfiler
from harness.engines.scoring import ScoredTokens, cannot_score
from harness.engines.series import Series
from harness.errors import SparkbenchError
from harness.facts import EngineFacts

PACKAGE_DIR = Path(__file__).resolve().parent
ENGINES: dict[str, Engine] = {}
API_CLIENTS: dict[str, Callable[..., Backend]] = {}


class Engine:
    """One inference engine. The defaults describe an engine that reports nothing beyond the API."""

    name: ClassVar[str] = ""
    native_api: ClassVar[str] = "openai"  # what `--backend auto` speaks to it
    # Adapters are asked in this order (then by name): an engine whose probe another engine's
    # server would also pass asks later; a generic fallback asks last.
    detect_order: ClassVar[int] = 50
    launchable: ClassVar[bool] = True  # profiles may launch it (a generic server has no launcher)
    model_flag: ClassVar[str] = "--model"  # how its launcher is told the checkpoint folder
    testbed_remove_after_install: ClassVar[tuple[str, ...]] = ()  # packages that break its test-bed env
    # The prefix of its Prometheus metric names, where it exports the speculative counters
    # (`harness.engines.prometheus.SPEC_COUNTERS`); None: it exports none.
    metrics_prefix: ClassVar[str | None] = None
    # The `/metrics` series sampled during a run, by role (`harness.engines.series`).
    server_series: ClassVar[tuple[Series, ...]] = ()
    # Its own profiler's HTTP endpoints (`harness.engines.profiler`); None: it has none.
    profiler: ClassVar[ServerProfiler | None] = None

    def detect(self, http: httpx.Client, base_url: str) -> bool:
        """Whether the server at `base_url` runs this engine (asked through `http`)."""
        return False

    def server_times_ms(self, meta: dict[str, Any]) -> tuple[float, float]:
        """(server TTFT, server e2e) in ms from one request's meta object; NaN where not reported."""
        return math.nan, math.nan

    def speculation(self, meta: dict[str, Any], completion_tokens: float) -> dict[str, float]:
        """The SPEC_COLUMNS of one request (`harness.engines.meta`); NaN without speculation."""
        return dict(NO_SPECULATION)

    def draft_histogram(self, meta: dict[str, Any]) -> list[int] | None:
        """One request's verify steps by accepted drafts: entry k counts the steps that accepted
        exactly k draft tokens. None where the engine exports no such count per request."""
        return None

    def engine_steps(self, meta: dict[str, Any]) -> float:
        """Engine steps the server reports for one request; NaN where it reports none."""
        return math.nan

    def server_facts(self, snapshot: dict[str, Any], launch_args: tuple[str, ...]) -> dict[str, Any]:
        """The flat facts the guard checks (SGLang's /server_info vocabulary), from the server's
        snapshot and the profile's launch arguments."""
        return {}

    def facts(self, snapshot: dict[str, Any], launch_args: tuple[str, ...] = ()) -> EngineFacts:
        """The server's normalised facts (`harness.facts`) for the manifest: what `server_facts`
        says, and where that is silent, what an OpenAI API snapshot lists (`/version`, the first
        model's folder or name). What neither says stays None: not exported."""
        facts = EngineFacts.from_flat(self.name, self.server_facts(snapshot, launch_args))
        listed = ((snapshot.get("models") or {}).get("data") or [{}])[0]
        version = snapshot.get("version")
        version = version.get("version") if isinstance(version, dict) else None
        return facts.model_copy(update={"model": facts.model or listed.get("root") or listed.get("id"),
                                        "version": facts.version or (None if version is None else str(version))})

    def launcher(self, program: Path, module: str) -> list[str]:
        """The start of the server's command line: `program -m module`, where `program` is the
        engine's test-bed Python (or the Python of the user's install)."""
        return [str(program), "-m", module]

    def model_args(self, model: Path) -> list[str]:
        """How its launcher is told what to serve: `model_flag MODEL`."""
        return [self.model_flag, str(model)]

    def launch_args(self, model_dir: Path, served_model_name: str | None = None) -> list[str]:
        """Launcher arguments of its own after `model_args`, `--host H --port P`, before the profile's."""
        return []

    def launch_env(self, cache_root: Path) -> dict[str, str]:
        """Environment that keeps a launched server's caches under `cache_root`."""
        return {}

    def score_tokens(self, http: httpx.Client, base_url: str, token_ids: list[int], start: int,
                     k: int) -> ScoredTokens:
        """Teacher-forced top-k at every position from `start` (`harness.engines.scoring`)."""
        raise cannot_score(self.name, base_url)

    def greedy_ids(self, http: httpx.Client, base_url: str, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        """The token ids of the server's greedy continuation of `prompt_ids`."""
        raise cannot_score(self.name, base_url)

    def top_next(self, http: httpx.Client, base_url: str, prompt: str, prefix_ids: list[int],
                 k: int) -> list[tuple[int, float]]:
        """The server's top-k next tokens (id, log-probability in nats) after the prompt text and
        the output ids `prefix_ids` (`harness.analysis.fidelity`)."""
        raise cannot_score(self.name, base_url)


def register(cls: type[Engine]) -> type[Engine]:
    """Class decorator: make the adapter findable by its `name`."""
    ENGINES[cls.name] = cls()
    return cls


def register_api(name: str) -> Callable[[type], type]:
    """Class decorator for an API client: `cls(model=..., chat=..., engine=...)` speaks API `name`."""
    def decorate(cls: type) -> type:
        API_CLIENTS[name] = cls
        return cls
    return decorate


@functools.cache
def _discover() -> None:
    """Import every module of this package (once), so that each registers what it defines."""
    for module in pkgutil.iter_modules([str(PACKAGE_DIR)]):
        importlib.import_module(f"harness.engines.{module.name}")


def engines() -> dict[str, Engine]:
    """Every registered adapter by name, in detection order."""
    _discover()
    return dict(sorted(ENGINES.items(), key=lambda item: (item[1].detect_order, item[0])))


def apis() -> tuple[str, ...]:
    """Every registered API by name."""
    engines()
    return tuple(API_CLIENTS)


def api_client(api: str, *, model: str | None, chat: bool, engine: str) -> Backend:
    """A client of API `api` for a server of engine `engine` (`model`, `chat`: OpenAI API options)."""
    engines()
    return API_CLIENTS[api](model=model, chat=chat, engine=engine)


def launchable_engines() -> tuple[str, ...]:
    """Names of the engines a profile may launch."""
    return tuple(name for name, engine in engines().items() if engine.launchable)


def engine_named(name: str) -> Engine:
    """The adapter called `name`; a one-line error lists the known ones."""
    known = engines()
    if name not in known:
        raise SparkbenchError(f"unknown engine {name!r}; known engines: {', '.join(known)}")
    return known[name]


def meta_reader(name: object) -> Engine:
    """The adapter that reads the meta objects of records written by engine `name`. A record of an
    engine this installation does not know is read as reporting nothing (NaN), not refused."""
    return engines().get(str(name), Engine())


def detect(http: httpx.Client, base_url: str) -> Engine:
    """The engine the server at `base_url` runs, asked through `http`."""
    for engine in engines().values():
        if engine.detect(http, base_url):
            return engine
    # Every probe refused: say it is the credentials, not that this is no inference server.
    status = http.get(base_url + "/v1/models").status_code
    if status in (401, 403):
        raise ServerHTTPError(f"{base_url} refused sparkbench's requests (HTTP {status}); it wants credentials "
                              "(--api-key, or --header NAME:VALUE)")
    raise ServerHTTPError(f"{base_url} answers neither SGLang's /server_info nor the OpenAI API's "
                          "/v1/models; is it an inference server?")
