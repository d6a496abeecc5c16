"""The one place that builds a run: `run(request) -> Run`, and `check(request)` for the guard alone.

Every entry point (the command line, the nightly job, sweep cells, `sparkbench check`) states what
it wants as a `RunRequest` (`harness.request`) and calls here. `run` validates the workload first
(a bad option fails before any server starts; a resumed run keeps the options it began with), then
attaches to or launches the server (or uses a `Target` the caller holds open for several runs),
snapshots and guards it, builds the workload, records every request (`harness.run.runner`), and
ends with the post-run checks. The machinery it joins lives in `harness/run/`.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import Any

import pandas as pd

from harness.analysis.repeats import REPEAT, repeat_entry
from harness.analysis.run import Run
from harness.engines.base import Backend
from harness.engines.limits import check_fits_context, context_tokens
from harness.engines.prometheus import accept_length_from_counters, counter_delta
from harness.engines.registry import meta_reader
from harness.engines.shaping import with_extra_body
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.guard.preflight import GuardReport, prefix_cache_report, startup_guard
from harness.metrics.load import lag_warning
from harness.records.entries import ServerCounters
from harness.records.manifest import MANIFEST_VERSION
from harness.records.rundir import RunDir, new_run_id
from harness.request import RunRequest, RunSwitches, TargetSpec
from harness.run.arrivals import replayed_trace
from harness.run.body_check import check_extra_body
from harness.run.label import default_label
from harness.run.options import RECORDED
from harness.run.resume import check_same_spec, done_prompts, resumed_options
from harness.run.runner import RunAborted, RunOptions, execute, snapshot_server
from harness.run.schedule_check import check_schedule
from harness.run.server_profile import profiler_of
from harness.run.target import Target, backend_for, target_server
from harness.secrets import api_key, header_parts, redact, remember_header
from workloads import Plan, Workload, WorkloadConfig
from workloads.registry import config_of, entry, plan


def open_target(spec: TargetSpec, workload: str | None = None):
    """The server `spec` names, attached or launched (and always stopped): a context manager whose
    `Target` several `run` calls may share. Naming no server and no profile, it is the embedded
    default of `workload` (`harness.run.embedded.default_profile`)."""
    return target_server(spec.server, spec.profile, spec.model, workload)


def run(request: RunRequest, target: Target | None = None, repeat: dict[str, Any] | None = None) -> Run:
    """Build and run `request` on `target` (default: the server the request names, for this run);
    `repeat` is the manifest's record of which repetition this run is (`run_repeated`)."""
    config = workload_config(request)  # a bad option fails before any server starts
    check_schedule(request.options, config)
    check_extra_body(request.options.extra_body, request.target.backend, config.wants_chat())  # before detection
    credentials(request)  # a key no header can carry, too
    if hasattr(config, "check_before_server"):  # what a workload reads of its own (a chat template)
        config.check_before_server()
    with ExitStack() as stack:
        target = target or stack.enter_context(open_target(request.target, request.workload.name))
        options = run_options(request, target.base_url)
        backend = backend_for(target, request.target.backend, chat=config.wants_chat(),
                              model=request.target.served_model, headers=options.headers)
        chosen = plan(request.workload.name, config, target.reduced, target.model_dir)
        return run_planned(target, backend, chosen, options, request, repeat)


def run_repeated(request: RunRequest) -> list[Run]:
    """`request` run `request.repeat` times on one server, each repetition a run of its own whose
    manifest names its group (`harness.analysis.repeats`); one run without `--repeat`."""
    if request.repeat == 1:
        return [run(request)]
    config = workload_config(request)  # a bad option fails before any server starts
    check_schedule(request.options, config)
    check_extra_body(request.options.extra_body, request.target.backend, config.wants_chat())
    group = new_run_id(f"repeat{request.repeat}")
    with open_target(request.target, request.workload.name) as target:
        return [run(request, target, repeat_entry(group, index, request.repeat))
                for index in range(1, request.repeat + 1)]


def check(request: RunRequest) -> GuardReport:
    """The configuration guard alone against the request's server (no run is recorded)."""
    options = run_options(request, "")
    with open_target(request.target) as target:
        client = backend_for(target, request.target.backend, model=request.target.served_model,
                             headers=options.headers)
        snapshot = snapshot_server(client, target.base_url, options.headers)
        return startup_guard(target.profile, client, target.base_url, snapshot, request.target.model,
                             options.headers, allow_buffered=request.allow_buffered)


def workload_config(request: RunRequest) -> WorkloadConfig:
    """The request's workload config; a resumed run keeps the options it began with (its salt too)."""
    if request.workload is None:
        raise SparkbenchError("a run needs a workload")
    name, options = request.workload.name, dict(request.workload.options)
    if request.resume is not None:
        fields = entry(name).config.model_fields
        defaults = {key: field.default for key, field in fields.items()}
        options = resumed_options(request.resume, name, {**dict.fromkeys(fields), **options}, defaults)
    return config_of(name, options)


def credentials(request: RunRequest) -> str | None:
    """The API key to send: the request's, else the environment's (`harness.secrets.api_key`). It and
    each header's value are remembered, so that they are masked in all that is written; a key that
    an HTTP header cannot carry is refused in one line."""
    for header in request.options.header:
        remember_header(header_parts(header)[1])
    return api_key(request.options.api_key.get_secret_value() if request.options.api_key else None)


def run_options(request: RunRequest, base_url: str) -> RunOptions:
    """The runner's options: the request's, at `base_url`, with its credentials (`credentials`)."""
    return RunOptions(base_url=base_url, **{**dict(request.options), "api_key": credentials(request)})


def run_planned(target: Target, backend: Backend, plan: Plan, options: RunOptions, switches: RunSwitches,
                repeat: dict[str, Any] | None = None) -> Run:
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
    if options.profile_server is not None:  # an engine without a profiler is refused before any request
        profiler_of(backend.engine)
    guard_record = _startup_guard(target, backend, snapshot, switches.guard, options.headers, switches.allow_buffered)
    facts = server_facts(target, backend, snapshot)
    workload = _replaying(plan.make(facts), plan, options)
    spec = workload.spec()
    # Before the prompts are made: a shape past the model's context is refused, not allocated.
    check_fits_context(snapshot, spec.get("input_tokens") or 0, (spec.get("sampling") or {}).get("max_new_tokens", 0))
    if hasattr(workload, "check_fits"):  # prompts of many lengths (a dataset): each is checked, by its row
        workload.check_fits(context_tokens(snapshot))
    if options.extra_body:  # a field the client sets itself is refused before any request
        for prompt in [*workload.warmup_prompts(1), *workload.prompts()]:
            with_extra_body(backend.body(prompt), options.extra_body)
    manifest = run_manifest(target, backend, snapshot, spec, plan, options) | {"guard": guard_record}
    manifest["engine_facts"] = facts.model_dump(mode="json")
    manifest["allow_buffered"] = switches.allow_buffered
    if repeat is not None:
        manifest[REPEAT] = repeat
    uncached = bool(spec.get("requires_uncached_prompts")) and not switches.keep_prefix_cache
    options = options.model_copy(update={"flush_prefix_cache": uncached})
    if switches.resume is None:
        run_dir, done = RunDir.create(switches.results, new_run_id(workload.name), manifest), frozenset()
        run_dir.update(label=switches.label or default_label(run_dir.record))
    else:
        check_same_spec(switches.resume, spec)
        run_dir, done = RunDir.reopen(switches.resume), done_prompts(switches.resume)
    try:
        execute(backend, options, workload, run_dir, done)
    finally:
        finished = Run(run_dir.path, run_dir.manifest)  # shares the manifest that _after_run completes
        _after_run(run_dir, target, finished.requests)
        finished.write_tables()  # whatever stopped the run
    _post_run_guard(run_dir, finished.requests, guard=switches.guard and target.profile is not None)
    return finished


def _replaying(workload: Workload, plan: Plan, options: RunOptions) -> Workload:
    """The workload sending one prompt per row of a `--schedule` trace that gives lengths (or prefix
    groups), as the trace gives them; else the workload as it is."""
    if options.schedule is None or not plan.config.trace_columns:
        return workload
    trace = replayed_trace(options)
    return workload.replaying(trace) if trace.columns else workload


def _startup_guard(target: Target, backend: Backend, snapshot: dict[str, Any], guard: bool,
                   headers: dict[str, str], allow_buffered: bool) -> dict | None:
    """The guard's record for the manifest: None without a profile; raises GuardFailed on a mismatch."""
    if target.profile is None:
        return None
    if not guard:
        return {"skipped": "--no-guard"}
    return startup_guard(target.profile, backend, target.base_url, snapshot, target.model_dir, headers,
                         allow_buffered=allow_buffered).to_dict()


def server_facts(target: Target, backend: Backend, snapshot: dict[str, Any]) -> EngineFacts:
    """The server's normalised facts, as its engine's adapter reads its snapshot and the profile's flags."""
    launch_args = target.profile.launch.args if target.profile else ()
    return meta_reader(backend.engine).facts(snapshot, launch_args).model_copy(update={"engine": backend.engine})


def run_manifest(target: Target, backend: Backend, snapshot: dict[str, Any], spec: dict[str, Any], plan: Plan,
                 options: RunOptions) -> dict[str, Any]:
    """What the run directory records before the first request: workload (spec and resolved config),
    server, engine and API, scale, profile and run options."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "workload": spec, "workload_config": plan.config.model_dump(mode="json"), "sampling": spec.get("sampling"),
        "server_url": target.base_url, "engine": backend.engine, "api": backend.name, "scale": target.scale,
        "reduced_scale": target.reduced, "server": snapshot, "profile": target.profile.to_dict() if target.profile else None,
        "launched_server": None if target.embedded is None else {
            "profile": target.embedded.profile, "model_dir": str(target.embedded.model_dir)},
        "options": options.model_dump(mode="json", include=set(RECORDED)),
        "credentials": {"api_key": bool(options.api_key)},  # whether one was sent, never the key
    }


def _after_run(run: RunDir, target: Target, frame: pd.DataFrame) -> None:
    """Facts only known once requests are on disk (`frame`): stream mode, prefix-cache hits,
    counters, an open loop that fell behind its schedule, server log."""
    modes = sorted(set(frame["stream_mode"]) - {"unknown"}) or ["unknown"]
    cached = frame["cached_tokens"].fillna(0)
    hits = int((cached > 0).sum())
    run.update(stream_mode=modes[0] if len(modes) == 1 else "mixed", prefix_cache_hits=hits,
               server_counters=_counter_summary(run.record.server_counters))
    if hits and run.record.workload.requires_uncached_prompts:
        print(f"WARNING: the prefix cache served {int(cached.sum())} prompt tokens across {hits} of "
              f"{len(frame)} requests: prefill was not measured in full (see cached_tokens)",
              file=sys.stderr, flush=True)
    behind = lag_warning(frame)
    if behind:
        print(f"WARNING: {behind}", file=sys.stderr, flush=True)
    if target.embedded and target.embedded.log_path.exists():
        log = target.embedded.log_path.read_text(encoding="utf-8", errors="replace")
        (run.path / "server.log").write_text(redact(log), encoding="utf-8")


def _counter_summary(counters: ServerCounters) -> dict[str, Any]:
    """Counter readings before and after the measured requests, their delta and accept length."""
    if not counters.before or not counters.after:
        return counters.as_recorded()
    delta = counter_delta(counters.before, counters.after)
    return {**counters.as_recorded(), "delta": delta, "accept_length": accept_length_from_counters(delta)}


def _post_run_guard(run: RunDir, requests: pd.DataFrame, guard: bool) -> None:
    """With a profile, a synthetic run whose prompts hit the prefix cache fails after the fact."""
    record = run.record
    if not guard or not record.workload.requires_uncached_prompts:
        return
    cached = [None if pd.isna(value) else int(value) for value in requests["cached_tokens"]]
    report = prefix_cache_report(cached)
    run.update(guard={**(record.guard.as_recorded() if record.guard else {}), "post_run": report.to_dict()})
    if not report.ok:
        raise RunAborted(f"run {run.path.name} fails the guard: {report.failures[0].message}")
