"""The nested entries of a run's manifest, typed where the stages read their fields.

Each entry keeps keys it does not declare (`extra="allow"`): a run folder written by another
version still loads, and the readers see the fields they ask for with their types checked.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Entry(BaseModel):
    """A manifest entry: types checked as written (no coercion), undeclared keys kept."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    def as_recorded(self) -> dict[str, Any]:
        """The entry as the manifest holds it (fields it did not hold are left out, not defaulted)."""
        return self.model_dump(exclude_unset=True)


class GitEntry(Entry):
    commit: str | None = None
    dirty: bool | None = None


class HostEntry(Entry):
    hostname: str | None = None
    platform: str | None = None
    machine: str | None = None
    python: str | None = None
    cpu_count: int | None = None
    memory_gib: float | None = None


class Resumption(Entry):
    """One `--resume` of the run: when, and how the run had stopped."""

    at: str
    previous_status: str | None = None
    command_line: list[str] = Field(default_factory=list)


class SamplingEntry(Entry):
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    ignore_eos: bool | None = None
    stop: list[str] | None = None
    seed: int | None = None


class WorkloadSpec(Entry):
    """The workload's spec (`Workload.spec()`): everything that regenerates its prompts. Each
    workload adds its own keys; these are the ones read across workloads."""

    name: str
    sampling: SamplingEntry | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    salt: int | None = None
    requires_uncached_prompts: bool = False


class LaunchEntry(Entry):
    module: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class ProfileEntry(Entry):
    """The profile the server was checked against (`Profile.to_dict`)."""

    name: str | None = None
    engine: str | None = None
    launch: LaunchEntry | None = None


class LaunchedServer(Entry):
    """The server the harness launched itself: its profile and model folder."""

    profile: str | None = None
    model_dir: str | None = None


class RecordedOptions(Entry):
    """The run options that shape a measurement (`harness.run.options.RECORDED`)."""

    concurrency: int | float | None = None
    slo: str | None = None
    request_rate: int | float | None = None
    schedule: str | None = None
    max_concurrency: int | None = None
    arrival_seed: int | None = None
    header: list[str] = Field(default_factory=list)  # NAME:*** (values masked)
    extra_body: dict[str, Any] | None = None  # the engine's own request fields

    @property
    def concurrency_count(self) -> int | None:
        return None if self.concurrency is None else int(self.concurrency)

    @property
    def open_loop(self) -> bool:
        """Sent on an arrival schedule (drawn at a rate, or replayed), not a fixed number in flight."""
        return self.request_rate is not None or self.schedule is not None


class Credentials(Entry):
    api_key: bool = False  # whether a key was sent, never the key


class FindingEntry(Entry):
    check: str
    ok: bool
    message: str


class GuardReportEntry(Entry):
    """A guard report (`GuardReport.to_dict`)."""

    ok: bool = True
    failures: int = 0
    findings: list[FindingEntry] = Field(default_factory=list)


class GuardEntry(GuardReportEntry):
    """The guard's record: its start-up report, why it was skipped, and the post-run check."""

    skipped: str | None = None
    post_run: GuardReportEntry | None = None


class RepeatEntry(Entry):
    """Repetition `index` (from 1) of `count` in `group` (`--repeat`)."""

    group: str
    index: int
    count: int


class TelemetryWindow(Entry):
    """Client-clock marks (ns): warm-up start, measured requests' start and end."""

    warmup_start_ns: int | None = None
    measured_start_ns: int | None = None
    measured_end_ns: int | None = None


class SamplerEntry(Entry):
    """One sampler's outcome: `measured` (with its file), `not exported`, `not measured` or `off`."""

    status: str
    reason: str | None = None
    file: str | None = None
    samples: int | None = None  # the device sampler's readings
    gpus: list[dict[str, Any]] | None = None  # each GPU's facts, as NVML answered


class TelemetryEntry(Entry):
    interval_s: float | None = None
    window: TelemetryWindow | None = None
    server_metrics: SamplerEntry | None = None
    device: SamplerEntry | None = None


class PowerSensorEntry(Entry):
    sensor: str
    device: str
    method: str
    domain: str | None = None  # sensors whose energies add up: gpu, cpu_package


class PowerEntry(Entry):
    """How energy was measured (`power_sampling`), or why it was not."""

    status: str | None = None
    reason: str | None = None
    interval_ms: float | None = None
    sensors: list[PowerSensorEntry] = Field(default_factory=list)
    not_available: list[str] | None = None
    file: str | None = None
    samples: int | None = None


class ServerProfileEntry(Entry):
    """The server's own profiler over the measured requests (`harness.run.server_profile`)."""

    status: str  # recording (the run stopped before the profiler did) | recorded
    folder: str
    profile_id: str | None = None
    folder_named_by: str | None = None
    files: list[str] | None = None  # trace files that appeared in the folder, relative to it

    @property
    def note(self) -> str:
        """One line for a report: where the traces of the measured requests are."""
        if self.status != "recorded":
            return f"{self.status} into {self.folder} (the run stopped before the profiler did)"
        files = ", ".join(self.files or []) or "no new file appeared there"
        return f"traces of the measured requests in {self.folder}: {files}"


class ServerCounters(Entry):
    """The server's speculative counters before and after the measured requests (the engine's raw
    answer, None where it keeps none), their delta and the run-level accept length."""

    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    delta: dict[str, Any] | None = None
    accept_length: float | None = None


class ClientClock(Entry):
    """A client process's wall-clock anchor, and a worker's offset onto the parent's clock."""

    role: str
    pid: int
    wall_ns: int
    mono_ns: int
    offset_ns: int | None = None


class ClientLoad(Entry):
    cpu_s: float
    wall_s: float
    chunks: int


class HostLoadEntry(Entry):
    """The host's load over a nightly run (`harness.run.hostload.HostLoad`) and the client's TPOT
    beside the server's; None where unreadable."""

    wall_s: float | None = None
    cpus: int | None = None
    loadavg_1m: float | None = None
    other_cpu_share: float | None = None
    steal_share: float | None = None
    client_cpu_s: float | None = None
    server_cpu_s: float | None = None
    server_on_host: bool | None = None
    tpot_client_server_gap: float | None = None

    def figure(self, name: str) -> float | None:
        """The figure called `name` (a busy limit's or a history row's), None when not recorded."""
        value = getattr(self, name, None)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class AgreementEntry(Entry):
    """What a `sparkbench agree` run scored (`harness.agree.run.AgreeOptions`, and the tokenizer)."""

    source: str
    top_k: int
    tokenizer: str | None = None


class ScoringServer(Entry):
    """One of the two servers an agreement run scored on: its URL, engine and raw facts."""

    url: str
    engine: str
    facts: dict[str, Any] = Field(default_factory=dict)
