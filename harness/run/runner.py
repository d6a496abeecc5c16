"""Drive a workload through a backend: warm-up, then every prompt, each record on disk at once.

The runner owns ordering, concurrency and durability; it computes no metric (the progress bar's
tokens/s is for the operator's eyes only and is not stored).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import httpx
from pydantic import Field
from tqdm import tqdm

from harness.config import StrictModel
from harness.engines.base import Backend, MalformedStream, ServerHTTPError, ServerUnreachable, StreamResult
from harness.errors import SparkbenchError
from harness.power.sampler import DEFAULT_INTERVAL_S, power_sampling
from harness.records.requests import RecordWriter, RequestRecord, write_parquet
from harness.records.rundir import RunDir
from harness.spec import Prompt
from workloads import Workload


class RunOptions(StrictModel):
    """How a run drives the server (the manifest records warm-up, concurrency and timeout)."""

    base_url: str
    warmup: int = Field(1, ge=0, description="Warm-up requests before measuring (not recorded).")
    concurrency: int = Field(1, ge=1, description="Requests in flight at once (1 = batch 1, as published).")
    request_timeout_s: float = Field(900.0, ge=1.0, description="Seconds a request may go without any data.")
    show_progress: bool = True
    flush_prefix_cache: bool = False  # before measuring: for prompts whose prefill must be measured in full
    power_interval_s: float = Field(DEFAULT_INTERVAL_S, ge=0.0,
                                    description="Device power sampling during the measured requests; 0 = off.")


class RunAborted(SparkbenchError):
    """The run stopped early; the records finished before that are on disk."""

    exit_code = 1


def snapshot_server(backend: Backend, base_url: str) -> dict[str, Any]:
    """Ask the server for its facts; an unreachable server is a one-line error before anything is created."""
    try:
        with httpx.Client(timeout=httpx.Timeout(30.0, connect=5.0)) as http:
            return backend.snapshot(http, base_url)
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"cannot reach {base_url} ({type(exc).__name__}: {exc})") from exc


class _Progress:
    """Progress bar with ETA and live output tokens/s (display only), started after warm-up."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.bar: tqdm | None = None
        self.started = 0.0
        self.tokens = 0

    def start(self) -> None:
        self.bar = tqdm(total=self.total, unit="req", disable=not self.enabled, file=sys.stderr, dynamic_ncols=True)
        self.started = time.perf_counter()

    def advance(self, result: StreamResult) -> None:
        self.tokens += result.completion_tokens or 0
        elapsed = time.perf_counter() - self.started
        self.bar.set_postfix_str(f"{self.tokens / elapsed:.1f} tok/s", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


async def _warm_up(http: httpx.AsyncClient, backend: Backend, options: RunOptions, prompts: list[Prompt]) -> None:
    for prompt in prompts:
        await backend.send(http, options.base_url, prompt)


async def _measure(http, backend, options, prompts, run: RunDir, writer: RecordWriter, progress) -> None:
    queue: asyncio.Queue[tuple[int, Prompt]] = asyncio.Queue()
    for seq, prompt in enumerate(prompts):
        queue.put_nowait((seq, prompt))
    workload = run.manifest["workload"]["name"]
    progress.start()

    async def worker() -> None:
        while not queue.empty():
            seq, prompt = queue.get_nowait()
            result = await backend.send(http, options.base_url, prompt)
            writer.append(RequestRecord.build(run_id=run.manifest["run_id"], seq=seq, workload=workload,
                                              engine=backend.engine, api=backend.name, prompt=prompt,
                                              result=result))
            progress.advance(result)

    async with asyncio.TaskGroup() as group:  # one failure cancels the requests in flight
        for _ in range(min(options.concurrency, len(prompts))):
            group.create_task(worker())


async def _drive(backend, options, warmups, prompts, run: RunDir, writer, progress) -> None:
    timeout = httpx.Timeout(options.request_timeout_s, connect=10.0)
    limits = httpx.Limits(max_connections=options.concurrency, max_keepalive_connections=options.concurrency)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as http:
        await _warm_up(http, backend, options, warmups)
        if options.flush_prefix_cache:
            run.update(prefix_cache_flush=await backend.flush_prefix_cache(http, options.base_url))
        # Server-side counters bracket the measured requests only (never warm-up or earlier runs).
        run.update(server_counters={"before": await backend.counters(http, options.base_url)})
        # Power is sampled around the measured requests only; the entry is completed when sampling
        # stops, and the manifest holds it whatever ends the run.
        with power_sampling(run.path, options.power_interval_s) as power:
            run.update(power=power)
            await _measure(http, backend, options, prompts, run, writer, progress)
        run.update(server_counters={**run.manifest["server_counters"],
                                    "after": await backend.counters(http, options.base_url)})


def _first_cause(exc: BaseException) -> BaseException:
    """TaskGroup wraps worker errors in an ExceptionGroup: report the first real one."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def execute(backend: Backend, options: RunOptions, workload: Workload, run: RunDir) -> None:
    """Run warm-up and workload; always finalize the run directory, whatever stops it."""
    prompts, warmups = workload.prompts(), workload.warmup_prompts(options.warmup)
    writer = RecordWriter(run.path)
    progress = _Progress(len(prompts), options.show_progress)
    status, error = "complete", None
    try:
        asyncio.run(_drive(backend, options, warmups, prompts, run, writer, progress))
    except KeyboardInterrupt:
        status, error = "interrupted", "stopped by Ctrl-C"
    except BaseException as exc:  # noqa: BLE001 - every cause is classified below
        cause = _first_cause(exc)
        if isinstance(cause, ServerUnreachable):
            status, error = "interrupted", str(cause)
        elif isinstance(cause, (ServerHTTPError, MalformedStream)):
            status, error = "failed", str(cause)
        else:
            status, error = "failed", f"{type(cause).__name__}: {cause}"
            _finalize(run, writer, progress, status, error)
            raise cause from None  # a bug in the harness: surface it, not the TaskGroup wrapper
    _finalize(run, writer, progress, status, error)
    if status != "complete":
        raise RunAborted(f"run {status} after {writer.count} of {len(prompts)} requests ({error}); "
                         f"finished requests are in {run.path}")


def _finalize(run: RunDir, writer: RecordWriter, progress: _Progress, status: str, error: str | None) -> None:
    progress.close()
    writer.close()
    write_parquet(run.path)
    run.finish(status, error=error, requests_recorded=writer.count)
