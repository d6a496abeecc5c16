"""A run's manifest as a typed record: `RunRecord`, with a version field.

The run directory writes its manifest as it goes (`RunDir.update`); every reader takes it through
`RunRecord.of(manifest)` (a loaded `Run`'s `record`, a run directory's `RunDir.record`), which
checks the types of what it holds and upgrades an older manifest: version 1 (written before the
version field) has no `engine_facts`, so its engine's adapter derives them from the raw snapshot it
kept. Every key the harness writes is declared here; undeclared keys of a folder written by another
version are kept as they are, so it still loads.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timezone
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from harness.config import StrictModel, error_lines
from harness.engines.registry import meta_reader
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.records.entries import (
    AgreementEntry,
    ClientClock,
    ClientLoad,
    Credentials,
    GitEntry,
    GuardEntry,
    HostEntry,
    HostLoadEntry,
    LaunchedServer,
    PowerEntry,
    ProfileEntry,
    RecordedOptions,
    RepeatEntry,
    Resumption,
    SamplingEntry,
    ScoringServer,
    ServerCounters,
    ServerProfileEntry,
    TelemetryEntry,
    WorkloadSpec,
)
from harness.records.imported import ImportEntry

MANIFEST_VERSION = 2  # 2: engine_facts beside the raw snapshot; 1: the raw snapshot only
STALE_AFTER_S = 600.0  # a run on another host whose heartbeat is older than this is taken as dead
# Records written before `engine` and `api` existed name only the API, as `backend`; the metrics
# of that time read an "openai" record as vLLM's, so that is the engine it stands for.
LEGACY_BACKEND = {"sglang": ("sglang", "sglang"), "openai": ("vllm", "openai")}


class RunRecord(StrictModel):
    """What a run's manifest says: every key the harness writes, typed."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    manifest_version: int = 1
    run_id: str
    workload: WorkloadSpec
    workload_config: dict[str, Any] | None = None  # the workload's resolved config model, as dumped
    sampling: SamplingEntry | None = None
    label: str | None = None
    repeat: RepeatEntry | None = None
    # provenance, written when the run directory is created
    sparkbench_version: str | None = None
    git: GitEntry | None = None
    command_line: list[str] | None = None
    host: HostEntry | None = None
    # progress: status, times, who writes it now (`--resume` adds an entry to `resumed`)
    status: str | None = None
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    heartbeat_at: str | None = None
    pid: int | None = None
    hostname: str | None = None
    resumed: list[Resumption] = Field(default_factory=list)
    # the server and how it was driven
    server_url: str | None = None
    engine: str | None = None
    api: str | None = None
    backend: str | None = None  # before engine and api were recorded apart: the API's name
    server: dict[str, Any] = Field(default_factory=dict)  # the engine's raw snapshot, as it answered
    engine_facts: EngineFacts | None = None
    scale: str | None = None
    reduced_scale: bool | None = None
    profile: ProfileEntry | None = None
    launched_server: LaunchedServer | None = None
    options: RecordedOptions = Field(default_factory=RecordedOptions)
    credentials: Credentials | None = None
    guard: GuardEntry | None = None
    allow_buffered: bool = False
    # measured alongside the requests
    prefix_cache_flush: str | None = None
    telemetry: TelemetryEntry | None = None
    power: PowerEntry | None = None
    server_counters: ServerCounters = Field(default_factory=ServerCounters)
    server_profile: ServerProfileEntry | None = None
    client_processes: list[ClientClock] | None = None
    client_load: ClientLoad | None = None
    host_load: HostLoadEntry | None = None  # the nightly's
    # known once the requests are on disk
    requests_recorded: int | None = None
    stream_mode: str | None = None
    prefix_cache_hits: int | None = None
    # a `sparkbench agree` run (kind "agreement"): what it scored, on which two servers
    kind: str | None = None
    agreement: AgreementEntry | None = None
    servers: dict[str, ScoringServer] | None = None
    positions_scored: int | None = None
    # a `sparkbench import` run (kind "import"): another tool's file, its figures in its definitions
    imported: ImportEntry | None = None

    @classmethod
    def of(cls, manifest: dict[str, Any], where: str = "manifest") -> RunRecord:
        """The typed record of `manifest`; a wrong type is one line per problem."""
        try:
            record = cls.model_validate(manifest)
        except ValidationError as exc:
            raise SparkbenchError("\n".join(error_lines(exc, where))) from None
        if record.engine_facts is not None:
            return record
        return record.model_copy(update={"engine_facts": derived_facts(record)})

    @property
    def facts(self) -> EngineFacts:
        return self.engine_facts or EngineFacts()

    @property
    def engine_and_api(self) -> tuple[str | None, str | None]:
        """The run's engine and API; a manifest written before they were recorded apart names only
        its API, as `backend` (see LEGACY_BACKEND)."""
        if "engine" in self.model_fields_set or self.backend is None:
            return self.engine, self.api
        return LEGACY_BACKEND.get(self.backend, (self.backend, self.backend))

    @property
    def seen_status(self) -> str:
        """The run's status as a reader should take it: a run still marked `running` whose process is
        gone (same host) or whose heartbeat stopped long ago (any host) is `stale`, never running."""
        if self.status != "running":
            return self.status or "unknown"
        if self.hostname == socket.gethostname() and self.pid:
            return "running" if _pid_alive(self.pid) else "stale"
        try:
            beat = datetime.fromisoformat(self.heartbeat_at or self.started_at or "")
        except ValueError:
            return "stale"
        return "stale" if (datetime.now(timezone.utc) - beat).total_seconds() > STALE_AFTER_S else "running"

    @property
    def post_run_ok(self) -> bool:
        """Whether the guard's post-run check passed (True when none ran)."""
        return self.guard is None or self.guard.post_run is None or self.guard.post_run.ok


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def derived_facts(record: RunRecord) -> EngineFacts:
    """The facts of a version-1 manifest: its engine's adapter reads the raw snapshot it kept."""
    engine = record.engine_and_api[0]
    launch_args = tuple(record.profile.launch.args) if record.profile and record.profile.launch else ()
    try:
        facts = meta_reader(engine).facts(record.server, launch_args)
    except (SparkbenchError, AttributeError, TypeError, ValueError):
        facts = EngineFacts()  # a snapshot the adapter cannot read: its facts were not recorded
    return facts.model_copy(update={"engine": engine})
