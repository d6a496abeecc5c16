"""Drive a workload through a backend: warm-up, then every prompt, each record on disk at once.

The runner owns ordering, concurrency and durability; it computes no metric (the progress bar's
tokens/s is for the operator's eyes only and is not stored).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import httpx
from tqdm import tqdm

from harness.chat import turn_ids
from harness.engines.base import Backend, ServerUnreachable, StreamResult
from harness.engines.control import BoundedClient
from harness.engines.registry import meta_reader
from harness.engines.sse import Session, run_streams
from harness.engines.stream import Deadlines
from harness.errors import SparkbenchError, describe_os_error
from harness.power.sampler import power_sampling
from harness.records.background import BackgroundWriter
from harness.records.requests import RecordWriter, RequestRecord, stored_count, write_parquet
from harness.records.rundir import RunDir
from harness.run.arrivals import write_schedule
from harness.run.openloop import OpenLoopPool, OpenLoopWork, open_loop_work
from harness.run.options import RunSettings
from harness.run.pool import Pool, StopRules, default_max_errors
from harness.run.processes import ProcessPool
from harness.run.server_profile import server_profiling
from harness.run.signals import ABANDONED, stop_signals
from harness.spec import Prompt
from harness.telemetry.sampling import telemetry_sampling
from workloads import Workload


class RunOptions(RunSettings):
    """The shared run options (`harness.run.options`, load options included) with what the run
    builder resolves: the server's URL and whether to flush its prefix cache before measuring."""

    base_url: str
    flush_prefix_cache: bool = False  # before measuring: for prompts whose prefill must be measured in full

    def deadlines(self, prompt: Prompt) -> Deadlines:
        return Deadlines.for_request(prompt.sampling.max_new_tokens, idle_s=self.request_timeout_s,
                                     first_token_s=self.first_token_timeout_s, total_s=self.request_deadline_s)


class WarmupFailed(SparkbenchError):
    """A warm-up request failed: the server cannot serve this workload as asked."""


class RunAborted(SparkbenchError):
    """The run stopped early; the records finished before that are on disk."""

    exit_code = 1


def snapshot_server(backend: Backend, base_url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """Ask the server for its facts; an unreachable server is a one-line error before anything is created."""
    try:
        with BoundedClient(headers=headers) as http:
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
        self.chunks = 0  # token-bearing chunks streamed, for the client's own load

    def start(self) -> None:
        self.bar = tqdm(total=self.total, unit="req", disable=not self.enabled, file=sys.stderr, dynamic_ncols=True)
        self.started = time.perf_counter()

    def advance(self, result: StreamResult) -> None:
        self.tokens += stored_count(result.completion_tokens) or 0  # a server's count may be anything
        elapsed = time.perf_counter() - self.started
        self.bar.set_postfix_str(f"{self.tokens / elapsed:.1f} tok/s", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


async def _warm_up(http: Session, backend: Backend, options: RunOptions, prompts: list[Prompt]) -> int:
    """Warm-up requests; one that fails means the server cannot serve the workload: stop here.
    Returns the token-bearing chunks they streamed."""
    chunks = 0
    for prompt in prompts:
        result = await backend.send(http, options.base_url, prompt, options.deadlines(prompt))
        if result.error_kind is not None:
            raise WarmupFailed(f"warm-up request failed, nothing measured: {result.error_message}")
        chunks += len(result.chunk_ns)
    return chunks


def _pool(http, backend: Backend, options: RunOptions, run: RunDir, writer: BackgroundWriter, progress,
          total: int, turn_stride: int, arrivals: OpenLoopWork | None) -> Pool | ProcessPool:
    """The pool that sends the measured prompts (from this process, or from `processes` worker
    processes, or at their scheduled times) and writes each outcome at once; `turn_stride` numbers a
    conversation's later turns."""
    recorded = run.record

    async def send(prompt: Prompt) -> StreamResult:
        return await http.watched(backend.send(http, options.base_url, prompt, options.deadlines(prompt)))

    async def record(seq: int, prompt: Prompt, result: StreamResult) -> None:
        progress.chunks += len(result.chunk_ns)
        await writer.append(lambda: RequestRecord.build(
            run_id=recorded.run_id, seq=seq, workload=recorded.workload.name, engine=backend.engine,
            api=backend.name, prompt=prompt, result=result, window=arrivals.window(seq) if arrivals else None))
        run.beat()  # on the loop: the manifest has one writer
        progress.advance(result)

    rules = StopRules(max_errors=options.max_errors if options.max_errors is not None else default_max_errors(total),
                      unreachable_grace_s=options.unreachable_grace_s, engine=backend.engine)
    if arrivals is not None:
        return OpenLoopPool(send=send, record=record, rules=rules, offsets_ns=arrivals.offsets_ns,
                            max_concurrency=options.max_concurrency, turn_stride=turn_stride)
    if options.processes > 1:
        return ProcessPool(backend=backend, options=options, record=record, rules=rules, processes=options.processes,
                           turn_stride=turn_stride)
    return Pool(send=send, record=record, rules=rules, concurrency=options.concurrency, turn_stride=turn_stride)


async def _drive(backend, options, warmups, work, run: RunDir, writer, progress, turn_stride: int,
                 arrivals: OpenLoopWork | None) -> Pool:
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    series = meta_reader(backend.engine).server_series
    # Server metrics and GPU state are sampled from the warm-up on, the measured window marked.
    with telemetry_sampling(run.path, options.telemetry_interval_s, options.base_url, series,
                            options.headers) as telemetry:
        run.update(telemetry=telemetry.entry)
        return await _measure(backend, options, warmups, work, run, writer, progress, (turn_stride, arrivals),
                              telemetry, (cpu_start, wall_start))


async def _measure(backend, options, warmups, work, run: RunDir, writer, progress,
                   schedule: tuple[int, OpenLoopWork | None], telemetry, started: tuple[float, float]) -> Pool:
    (turn_stride, arrivals), (cpu_start, wall_start) = schedule, started
    async with Session(headers=options.headers, read_timeout_s=options.request_timeout_s,
                       extra_body=options.extra_body) as http:
        progress.chunks = await _warm_up(http, backend, options, warmups)
        if options.flush_prefix_cache:
            run.update(prefix_cache_flush=await backend.flush_prefix_cache(http, options.base_url))
        # Server-side counters bracket the measured requests only (never warm-up or earlier runs).
        run.update(server_counters={"before": await backend.counters(http, options.base_url)})
        pool = _pool(http, backend, options, run, writer, progress, len(work), turn_stride, arrivals)
        progress.start()
        # Power is sampled around the measured requests only; the entry is completed when sampling
        # stops, and the manifest holds it whatever ends the run.
        with power_sampling(run.path, options.power_interval_s) as power, stop_signals(pool):
            run.update(power=power)
            async with server_profiling(http, options.base_url, backend.engine, options.profile_server, run):
                telemetry.measuring()  # the last thing before the first measured request is sent
                await pool.run(work)
        telemetry.ended()
        load = client_load(cpu_start, wall_start, progress.chunks)
        if isinstance(pool, ProcessPool):  # the workers' own CPU, and how their clocks were joined
            load["cpu_s"] += pool.cpu_s
            run.update(client_processes=pool.clocks)
        run.update(client_load=load)
        run.update(server_counters={**run.record.server_counters.as_recorded(),
                                    "after": await backend.counters(http, options.base_url)})
        return pool


def client_load(cpu_start: float, wall_start: float, chunks: int) -> dict[str, float | int]:
    """This process's own load over warm-up and measured requests: CPU seconds (all its threads),
    wall seconds and token-bearing chunks streamed; CPU per chunk says whether the client could
    have been the bottleneck (`tests.bench_client` measures it against real servers)."""
    return {"cpu_s": time.process_time() - cpu_start, "wall_s": time.perf_counter() - wall_start,
            "chunks": chunks}


def execute(backend: Backend, options: RunOptions, workload: Workload, run: RunDir,
            done: frozenset[str] = frozenset()) -> None:
    """Run warm-up and workload; always finalize the run directory, whatever stops it.

    `done`: prompt ids that already have an ok record (a resumed run); a prompt is not sent again
    when every turn of its conversation is among them.
    """
    writer = BackgroundWriter(RecordWriter(run.path))
    progress = _Progress(0, options.show_progress)
    status, error, total = "failed", None, None
    try:
        work, total, arrivals = _measured_work(options, workload, run, done)
        warmups = workload.warmup_prompts(options.warmup)
        progress.total = sum(len(turn_ids(prompt)) for _, prompt in work)
        pool = run_streams(_drive(backend, options, warmups, work, run, writer, progress, total, arrivals))
        status, error = _ending(pool)
    except KeyboardInterrupt:
        status, error = "interrupted", f"{ABANDONED}; the requests in flight were not recorded"
    except SparkbenchError as exc:
        status, error = ("interrupted" if isinstance(exc, ServerUnreachable) else "failed"), str(exc)
    except OSError as exc:  # a record could not be written (disk full): the run stops, said as such
        status, error = "failed", f"a record could not be written: {describe_os_error(exc)}"
    except Exception as exc:  # a bug in the harness: the manifest says so, then it surfaces
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        _finalize(run, writer, progress, status, error)
    if status != "complete":
        raise RunAborted(f"run {status} after {_recorded_of_planned(writer.count, progress.total, total or 0)} "
                         f"({error}); recorded requests are in {run.path}; continue with --resume {run.path}")


def _recorded_of_planned(recorded: int, requests: int, prompts: int) -> str:
    """`N of M requests`, counted as records are (a conversation's every turn is a request), with
    the conversations they make when prompts have later turns."""
    conversations = f" in {prompts} conversations" if requests > prompts else ""
    return f"{recorded} of {requests} requests{conversations}"


def _measured_work(options: RunOptions, workload: Workload, run: RunDir,
                   done: frozenset[str]) -> tuple[list[tuple[int, Prompt]], int, OpenLoopWork | None]:
    """The `(seq, prompt)` pairs to send (a prompt whose every turn is `done` left out), how many
    prompts the run has, and in an open loop the arrival schedule, written into the run folder
    before the first request."""
    if not options.open_loop:
        prompts = workload.prompts()
        return [(seq, p) for seq, p in enumerate(prompts) if not done.issuperset(turn_ids(p))], len(prompts), None
    if done:
        raise SparkbenchError("an open-loop run cannot be resumed: its arrival schedule was for the whole run")
    arrivals = open_loop_work(options, workload)
    write_schedule(run.path, arrivals.offsets_s)
    return list(enumerate(arrivals.prompts)), len(arrivals.prompts), arrivals


def _ending(pool: Pool) -> tuple[str, str | None]:
    """The run's status and reason from how its pool stopped."""
    if pool.stop_reason is None:
        return "complete", None
    if pool.stop_reason.startswith("server unreachable") or pool.stop_reason.startswith("stop asked"):
        return "interrupted", pool.stop_reason
    return "failed", pool.stop_reason


def _finalize(run: RunDir, writer: BackgroundWriter, progress: _Progress, status: str, error: str | None) -> None:
    """Close the records, write the Parquet table and the manifest's end state. A failure here
    (disk full, say) still leaves the manifest saying how the run ended, with that cause added."""
    progress.close()
    writer.close()
    try:
        write_parquet(run.path)
    except (OSError, SparkbenchError) as exc:
        error = f"{error}; " if error else ""
        status, error = "failed", f"{error}the request table could not be written: {describe_os_error(exc)}"
    run.finish(status, error=error, requests_recorded=writer.total)
