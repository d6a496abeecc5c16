"""One benchmark run from start to finish: server, guard, run directory, requests, checks.

This is the glue the CLI calls; every stage it joins lives in its own module.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from harness.analysis.run import Run
from harness.engines.base import Backend, ServerHTTPError
from harness.engines.detect import AUTO, detect_engine, make_backend
from harness.engines.prometheus import accept_length_from_counters, counter_delta
from harness.errors import SparkbenchError
from harness.guard.preflight import prefix_cache_report, startup_guard
from harness.guard.profiles import Profile, load_profile
from harness.records.rundir import SCALE_LABEL, RunDir, new_run_id
from harness.run.embedded import DEFAULT_PROFILE, EmbeddedServer, embedded_server
from harness.run.label import default_label
from harness.run.resume import check_same_spec, done_prompts
from harness.run.runner import RunAborted, RunOptions, execute, snapshot_server
from harness.secrets import redact
from workloads import Plan


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
                  model_dir: Path | None = None) -> Iterator[Target]:
    """Attach to `server_url`, or start (and always stop) a server from a profile.

    No server and no profile: the embedded default (local SGLang on CPU, tiny model). A profile
    with `server_url` starts nothing; it only states what that server must be running.
    """
    profile = load_profile(profile_name) if profile_name else None
    if server_url:
        yield Target(base_url=checked_url(server_url), profile=profile)
        return
    profile = profile or load_profile(DEFAULT_PROFILE)
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
    return url.rstrip("/")


def backend_for(target: Target, name: str, chat: bool = False, model: str | None = None) -> Backend:
    """The client of API `name` (`auto`: the engine's native one) for the target's engine: the
    launched profile's, else the one the server is recognised as."""
    engine = target.embedded.engine if target.embedded is not None else _detected_engine(target.base_url, name)
    return make_backend(name, target.base_url, chat=chat, model=model, engine=engine)


def _detected_engine(base_url: str, api: str) -> str | None:
    """The engine the server runs. None when an API was named and no adapter recognises the
    server: that API's client then says, in one line, what the server does not serve."""
    try:
        return detect_engine(base_url).name
    except ServerHTTPError:
        if api == AUTO:
            raise
        return None


def run_workload(
    target: Target,
    backend: Backend,
    plan: Plan,
    options: RunOptions,
    results_root: Path,
    guard: bool = True,
    keep_prefix_cache: bool = False,
    resume: Path | None = None,
    allow_buffered: bool = False,
    label: str | None = None,
) -> RunDir:
    """Snapshot the server, guard it, build the workload, record every request, then check.

    A workload whose prefill must be measured in full (synthetic) gets the server's prefix cache
    flushed after warm-up, unless `keep_prefix_cache`: a long-lived server has seen other prompts,
    and one that began with the same token would serve that token from its cache. With `resume`,
    the run at that path is continued (`harness.run.resume`) instead of a new one created.
    `allow_buffered` measures even when the guard's canary does not stream its decode; the
    manifest records it. `label` names the run (default: `harness.run.label.default_label`); a
    resumed run keeps the label it was given.
    """
    snapshot = snapshot_server(backend, target.base_url, options.headers)
    guard_record = _startup_guard(target, backend, snapshot, guard, options.headers, allow_buffered)
    workload = plan.make(snapshot)
    spec = workload.spec()
    manifest = run_manifest(target, backend, snapshot, spec, plan, options) | {"guard": guard_record}
    manifest["allow_buffered"] = allow_buffered
    manifest["label"] = label or default_label(manifest)
    uncached = bool(spec.get("requires_uncached_prompts")) and not keep_prefix_cache
    options = options.model_copy(update={"flush_prefix_cache": uncached})
    if resume is None:
        run, done = RunDir.create(results_root, new_run_id(workload.name), manifest), frozenset()
    else:
        check_same_spec(resume, spec)
        run, done = RunDir.reopen(resume), done_prompts(resume)
    try:
        execute(backend, options, workload, run, done)
    finally:
        finished = Run(run.path, run.manifest)  # shares the manifest that _after_run completes
        _after_run(run, target, finished.requests)
        finished.write_tables()  # whatever stopped the run
    _post_run_guard(run, finished.requests, guard=guard and target.profile is not None)
    return run


def _startup_guard(target: Target, backend: Backend, snapshot: dict[str, Any], guard: bool,
                   headers: dict[str, str], allow_buffered: bool) -> dict | None:
    """The guard's record for the manifest: None without a profile; raises GuardFailed on a mismatch."""
    if target.profile is None:
        return None
    if not guard:
        return {"skipped": "--no-guard"}
    return startup_guard(target.profile, backend, target.base_url, snapshot, target.model_dir, headers,
                         allow_buffered=allow_buffered).to_dict()


def run_manifest(target: Target, backend: Backend, snapshot: dict[str, Any], spec: dict[str, Any], plan: Plan,
                 options: RunOptions) -> dict[str, Any]:
    """What the run directory records before the first request: workload (spec and resolved config),
    server, engine and API, scale, profile and run options."""
    return {
        "workload": spec, "workload_config": plan.config.model_dump(mode="json"), "sampling": spec.get("sampling"),
        "server_url": target.base_url, "engine": backend.engine, "api": backend.name, "scale": target.scale,
        "reduced_scale": target.reduced, "server": snapshot, "profile": target.profile.to_dict() if target.profile else None,
        "launched_server": None if target.embedded is None else {
            "profile": target.embedded.profile, "model_dir": str(target.embedded.model_dir)},
        "options": options.model_dump(mode="json", include={"warmup", "concurrency", "processes", "request_timeout_s",
                                                             "first_token_timeout_s", "request_deadline_s",
                                                             "max_errors", "unreachable_grace_s"}),
        "credentials": {"api_key": bool(options.headers)},  # whether one was sent, never the key
    }


def _after_run(run: RunDir, target: Target, frame: pd.DataFrame) -> None:
    """Facts only known once requests are on disk (`frame`): stream mode, prefix-cache hits,
    counters, server log."""
    modes = sorted(set(frame["stream_mode"]) - {"unknown"}) or ["unknown"]
    cached = frame["cached_tokens"].fillna(0)
    hits = int((cached > 0).sum())
    run.update(stream_mode=modes[0] if len(modes) == 1 else "mixed", prefix_cache_hits=hits,
               server_counters=_counter_summary(run.manifest.get("server_counters") or {}))
    if hits and run.manifest["workload"].get("requires_uncached_prompts"):
        print(f"WARNING: the prefix cache served {int(cached.sum())} prompt tokens across {hits} of "
              f"{len(frame)} requests: prefill was not measured in full (see cached_tokens)",
              file=sys.stderr, flush=True)
    if target.embedded and target.embedded.log_path.exists():
        shutil.copy(target.embedded.log_path, run.path / "server.log")


def _counter_summary(counters: dict[str, Any]) -> dict[str, Any]:
    """Counter readings before and after the measured requests, their delta and accept length."""
    before, after = counters.get("before"), counters.get("after")
    if not before or not after:
        return counters
    delta = counter_delta(before, after)
    return {**counters, "delta": delta, "accept_length": accept_length_from_counters(delta)}


def _post_run_guard(run: RunDir, requests: pd.DataFrame, guard: bool) -> None:
    """With a profile, a synthetic run whose prompts hit the prefix cache fails after the fact."""
    if not guard or not run.manifest["workload"].get("requires_uncached_prompts"):
        return
    cached = [None if pd.isna(value) else int(value) for value in requests["cached_tokens"]]
    report = prefix_cache_report(cached)
    run.update(guard={**(run.manifest.get("guard") or {}), "post_run": report.to_dict()})
    if not report.ok:
        raise RunAborted(f"run {run.path.name} fails the guard: {report.failures[0].message}")
