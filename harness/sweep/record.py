"""The manifests of a sweep (`sweep.json`) and of a capacity search (`capacity.json`), typed.

Like a run's `RunRecord`, each declares every key the harness writes, with a version field; types
are checked as written (no coercion) and undeclared keys of a folder written by another version are
kept, so it still loads. A reader takes the manifest through `<Record>.of(manifest, where)`, which
turns a wrong type into one line per problem. The sweep's resolved config stays the dumped
`SweepConfig`, which `SweepDir` validates with that model.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import Field, ValidationError

from harness.config import error_lines
from harness.errors import SparkbenchError
from harness.records.entries import Entry, GitEntry, HostEntry

SWEEP_RECORD_VERSION = 1
CAPACITY_RECORD_VERSION = 1
PENDING = "pending"


class FolderRecord(Entry):
    """What both manifests share: a version, provenance and the start time."""

    record_version: int = 1
    git: GitEntry | None = None
    host: HostEntry | None = None
    started_at: str | None = None
    ended_at: str | None = None

    @classmethod
    def of(cls, manifest: Any, where: str) -> Self:
        """The typed record of `manifest`; a wrong type is one line per problem."""
        try:
            return cls.model_validate(manifest)
        except ValidationError as exc:
            raise SparkbenchError("\n".join(error_lines(exc, where))) from None

    def updated(self, **fields: Any) -> Self:
        """A copy with `fields` changed, its types checked again (a bare model_copy checks nothing)."""
        return self.model_validate(self.model_dump() | fields)

    def as_written(self) -> dict[str, Any]:
        """The manifest as the folder stores it (NaN as NaN: Python's json writes and reads it)."""
        return self.model_dump()


class NodeEntry(Entry):
    """Where a cell's Ray task ran: the Ray node's id and address, and the host's name."""

    ray_node_id: str
    ip: str
    hostname: str


class CellEntry(Entry):
    """One cell of a sweep: its coordinates, how it ended, its run directory (relative to the sweep
    folder; None before its run began), the error, in one line, and the Ray node it last ran on
    (None for a local cell, or a task that never reported)."""

    configuration: str
    workload: str
    concurrency: int
    request_rate: float | None = None
    status: str = PENDING
    run_dir: str | None = None
    error: str | None = None
    ended_at: str | None = None
    node: NodeEntry | None = None


class SweepStart(Entry):
    """One start of a sweep: the first and each `--resume`, with the executor that drove it."""

    at: str
    executor: dict[str, Any]
    command_line: list[str] = Field(default_factory=list)


class SweepRecord(FolderRecord):
    """`sweep.json`."""

    sweep_id: str
    sparkbench_version: str | None = None
    command_line: list[str] = Field(default_factory=list)
    status: str = "running"
    config: dict[str, Any]
    cells: dict[str, CellEntry]
    runs: list[SweepStart] = Field(default_factory=list)


class TrialEntry(Entry):
    """One trial run of a capacity search (its run directory relative to the search's folder)."""

    rate: float
    attainment: float
    ci95_low: float | None = None  # NaN (or null): not measured
    ci95_high: float | None = None
    run_dir: str | None = None
    role: str = "search"
    offered_rps: float | None = None  # the rate its schedule offered (NaN or null: not measured)
    overloaded: bool = False  # the server did not keep up (harness.metrics.overload)
    arrival_seed: int | None = None
    service_ms: float | None = None  # E2E p50 from the send


class CapacityRecord(FolderRecord):
    """`capacity.json`: the settings, what was searched, every trial, and the outcome once finished."""

    capacity_id: str
    settings: dict[str, Any]
    configuration: str = "server"
    workload: str | None = None
    slo: Any = None
    options: dict[str, Any] = Field(default_factory=dict)
    trials: list[TrialEntry] = Field(default_factory=list)
    status: str | None = None  # None while searching
    capacity_rps: float | None = None  # offered
    asked_rps: float | None = None  # the rate asked of the runs that hold the capacity
    # an open end is null; JSON keeps the pair as a list, read back as the pair
    bracket: Annotated[tuple[float | None, float | None] | None, Field(strict=False)] = None
    sentence: str | None = None
