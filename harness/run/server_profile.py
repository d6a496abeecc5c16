"""The server's own profiler around the measured requests (`--profile-server DIR`).

Started after the warm-up and stopped after the last measured request, so its trace holds exactly
the requests that are measured, and nothing of the warm-up. The manifest's `server_profile` names
the trace folder and the trace files that appeared in it while the run profiled. An engine with no
profiler endpoint (`Engine.profiler` is None: llama.cpp) is refused in one line before the run
starts; a server of a profiling engine that does not serve the routes (vLLM started without a
profiler) is refused when it answers 404.

The profiler slows the server: a profiled run measures the server under its profiler, and its
figures are for finding the slow part, not for comparison with runs that were not profiled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx

from harness.engines.control import bounded_request, within
from harness.engines.profiler import ServerProfiler
from harness.engines.registry import engine_named
from harness.engines.sse import Session
from harness.errors import SparkbenchError
from harness.records.rundir import RunDir

# The stop request returns once the server has written its whole trace: SGLang on the 2-core CPU test
# bed took 62-77 s for the 47 MB trace of eight 128+64-token requests, past the minute a control
# request is given, and a long run on a GPU makes a larger one.
PROFILER_DEADLINE_S = 1800.0


class NoServerProfiler(SparkbenchError):
    """The server cannot profile: its engine has no profiler endpoint, or it does not serve one."""


def profiler_of(engine: str) -> ServerProfiler:
    """The profiler endpoints of `engine`; a one-line error where it has none."""
    profiler = engine_named(engine).profiler
    if profiler is None:
        raise NoServerProfiler(f"--profile-server: {engine} has no profiler endpoint to start and stop; "
                               "run without --profile-server, or profile the server by its own means")
    return profiler


def trace_files(folder: Path) -> set[str]:
    """The files under `folder` (relative paths); none where it does not exist yet."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()


async def _call(http: Session, base_url: str, path: str, body: dict[str, Any] | None,
                engine: str, profiler: ServerProfiler) -> None:
    """POST one profiler route; any answer but 200 is a one-line error naming it."""
    url = base_url + path
    try:
        resp = await within(PROFILER_DEADLINE_S, url, bounded_request(http.control, "POST", url, json=body))
    except httpx.HTTPError as exc:  # DeadlineExceeded too
        raise NoServerProfiler(f"--profile-server: {url} did not answer ({type(exc).__name__}: {exc})") from exc
    if resp.status_code == 404:
        needs = f"; it needs {profiler.needs}" if profiler.needs else ""
        raise NoServerProfiler(f"--profile-server: this {engine} server does not serve {path}{needs}")
    if resp.status_code != 200:
        raise NoServerProfiler(f"--profile-server: {url} answered HTTP {resp.status_code}: "
                               f"{resp.text.strip()[:200]}")


@asynccontextmanager
async def server_profiling(http: Session, base_url: str, engine: str, folder: Path | None,
                           run: RunDir) -> AsyncIterator[None]:
    """Profile the server while the body runs (nothing when `folder` is None); the manifest's
    `server_profile` says where its traces went, and names the files that appeared there."""
    if folder is None:
        yield
        return
    profiler, folder = profiler_of(engine), folder.resolve()
    profile_id = run.record.run_id
    before = trace_files(folder)
    entry = {"folder": str(folder), "profile_id": profile_id, "folder_named_by": (
        "sparkbench (the start request)" if profiler.names_folder else "the server (its launch configuration)")}
    await _call(http, base_url, profiler.start_path, profiler.start_body(folder, profile_id), engine, profiler)
    run.update(server_profile={**entry, "status": "recording"})

    async def stop() -> None:
        await _call(http, base_url, profiler.stop_path, None, engine, profiler)
        run.update(server_profile={**entry, "status": "recorded", "files": sorted(trace_files(folder) - before)})

    try:
        yield
    except BaseException:
        with suppress(NoServerProfiler):  # what stopped the run is the error to report, not the stop's
            await stop()
        raise
    await stop()
