"""The configuration guard against a live server: facts, canary request, and post-run checks.

`harness.guard.checks` holds the pure checks; this module gathers what they read from the running server
(its snapshot, the checkpoint's config, one short greedy canary request) and runs them before any
measured request, so a server that is not running the configuration under test is refused. The
canary also shows whether the server streams its tokens as it makes them (harness.guard.stream).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from time import sleep
from typing import Any

from harness.engines.base import Backend, StreamResult
from harness.engines.registry import engine_named
from harness.engines.sse import Session, run_streams
from harness.errors import SparkbenchError
from harness.guard.checks import GuardReport, check_canary, check_prefix_cache, check_startup
from harness.guard.profiles import Profile
from harness.guard.stream import check_stream, held_back, stream_evidence
from harness.spec import Prompt, SamplingParams

# Counting repeats itself, so any working drafter (MTP, EAGLE, n-gram) gets drafts accepted on it.
CANARY_TEXT = " ".join(str(i % 10) for i in range(200))
CANARY_TOKENS = 64
# A busy host can hold one canary's tokens back (the server's output process not scheduled until its
# decode is over); a buffering server holds back every one. Refused only when each attempt is held.
# The attempts are spread out by these pauses, seconds: a burst of load from another process (say
# another job rendering its report on the same cores) is over by the next one; a buffering server
# is refused about 14 s later than at once.
STREAM_RETRY_PAUSES_S = (2.0, 4.0, 8.0)
STREAM_ATTEMPTS = len(STREAM_RETRY_PAUSES_S) + 1
CANARY_READ_TIMEOUT_S = 300.0  # longest silence inside the canary's stream


class GuardFailed(SparkbenchError):
    """The server does not run the configuration under test; nothing was measured."""


def server_facts(profile: Profile, snapshot: dict[str, Any]) -> dict[str, Any]:
    """The flat facts the checks read, as the profile's engine reports them (see `Engine.server_facts`)."""
    return engine_named(profile.engine).server_facts(snapshot, profile.launch.args)


def model_config(model_dir: str | Path | None) -> dict[str, Any]:
    """The checkpoint's config.json when the model folder is on this machine, else {}."""
    if not model_dir:
        return {}
    path = Path(model_dir) / "config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


CANARY = Prompt("canary", SamplingParams(max_new_tokens=CANARY_TOKENS, temperature=0.0, ignore_eos=True),
                text=CANARY_TEXT)


def send_canary(backend: Backend, base_url: str, headers: dict[str, str] | None = None) -> StreamResult:
    """Send the short greedy canary request and return what the client saw; a canary that fails
    is a one-line error (the checks cannot be made)."""
    async def send():
        async with Session(headers=headers, read_timeout_s=CANARY_READ_TIMEOUT_S) as http:
            return await http.watched(backend.send(http, base_url, CANARY))

    return run_streams(send()).raise_for_error()


def streamed_canary(backend: Backend, base_url: str, headers: dict[str, str] | None = None,
                    pauses_s: tuple[float, ...] = STREAM_RETRY_PAUSES_S) -> tuple[StreamResult, dict[str, Any], int]:
    """(canary, its stream evidence, attempts): canaries until one streams, at most one more than
    `pauses_s`, the next one sent after the pause it names."""
    def attempt() -> tuple[StreamResult, dict[str, Any]]:
        canary = send_canary(backend, base_url, headers)
        return canary, stream_evidence(canary, CANARY, backend.engine, backend.name)

    (canary, evidence), attempts = attempt(), 1
    for pause_s in pauses_s:
        if not held_back(evidence):
            break
        sleep(pause_s)
        (canary, evidence), attempts = attempt(), attempts + 1
    return canary, evidence, attempts


def canary_speculation(backend: Backend, result: StreamResult) -> dict[str, float]:
    """The canary's speculation columns (NaN: not reported)."""
    return engine_named(backend.engine).speculation(result.meta, float(result.completion_tokens or 0))


def _reported(value: float) -> float | None:
    return None if math.isnan(value) else value


def startup_guard(profile: Profile, backend: Backend, base_url: str, snapshot: dict[str, Any],
                  model_dir: str | Path | None, headers: dict[str, str] | None = None,
                  allow_buffered: bool = False) -> GuardReport:
    """Every check that must pass before measuring; raises GuardFailed with one line per failure.
    `allow_buffered`: a canary that does not stream its decode is recorded, not refused."""
    facts = server_facts(profile, snapshot)
    model_dir = model_dir or facts.get("model_path")
    report = check_startup(profile, facts, profile.launch.env, model_config(model_dir))
    canary, evidence, attempts = streamed_canary(backend, base_url, headers)
    report.extend(check_stream(evidence, allow_buffered, attempts))
    if profile.expects_speculation:
        spec = canary_speculation(backend, canary)
        report.extend(check_canary(profile, _reported(spec["accept_length"]),
                                   accepted_drafts=_reported(spec["accepted_draft_tokens"]),
                                   proposed_drafts=_reported(spec["proposed_draft_tokens"])))
    if not report.ok:
        lines = "\n".join(f"  {finding.check}: {finding.message}" for finding in report.failures)
        raise GuardFailed(f"server at {base_url} does not run profile {profile.name}; nothing measured:\n{lines}")
    return report


def prefix_cache_report(cached_tokens: list[int | None]) -> GuardReport:
    return GuardReport(check_prefix_cache(cached_tokens))
