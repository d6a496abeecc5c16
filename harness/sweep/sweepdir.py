"""The sweep folder `results/sweeps/<sweep_id>/`: its manifest `sweep.json`, and one folder per cell.

Each cell `cells/<cell_id>/` holds the cell's ordinary run directory (made by the run path,
`harness.session.run`), so `sparkbench summarize`, `compare` and `report` read cells like any run.
The manifest (`SweepRecord`, typed in `harness.sweep.record`) holds the resolved config,
provenance, and each cell's status, run directory and error; only the process that drives the sweep
writes it, after each cell, atomically. The sweep's manifest is named `sweep.json`, not
`manifest.json`, so nothing takes the sweep for a run.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import __version__
from harness.errors import SparkbenchError, describe_os_error
from harness.records.atomic import write_text_atomically
from harness.records.rundir import git_commit, host_facts, utc_now, utc_stamp
from harness.secrets import redact, redact_argv
from harness.sweep.config import Configuration, SweepConfig
from harness.sweep.record import SWEEP_RECORD_VERSION, CellEntry, NodeEntry, SweepRecord, SweepStart
from workloads.registry import NamedWorkload

SWEEP_MANIFEST = "sweep.json"
COMPLETE = "complete"


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: a configuration, a workload, a concurrency level or an arrival rate."""

    configuration: Configuration
    workload: NamedWorkload
    concurrency: int
    request_rate: float | None = None  # an open-loop cell: requests/s

    @property
    def cell_id(self) -> str:
        level = f"r{self.request_rate:g}" if self.request_rate is not None else f"c{self.concurrency}"
        return f"{self.configuration.name}.{self.workload.name}.{level}"

    @property
    def label(self) -> str:
        """The label of the cell's run (`--label` of single runs): configuration and concurrency or rate."""
        level = f"r={self.request_rate:g}/s" if self.request_rate is not None else f"c={self.concurrency}"
        return f"{self.configuration.name} {level}"


@dataclass(frozen=True)
class CellOutcome:
    """How a cell ended: its run's status (`complete`, `failed`, `interrupted`), its run directory
    (None when the run never began), the error, in one line, and the Ray node that ran it (None
    locally, or when the task never reported)."""

    cell_id: str
    status: str
    run_dir: str | None = None
    error: str | None = None
    node: NodeEntry | None = None


def cells_of(config: SweepConfig) -> list[Cell]:
    """Every cell, configuration by configuration, then workload, then rising concurrency (or rate:
    open-loop cells, each at the lowest concurrency level, which an open loop does not use)."""
    if config.request_rate is not None:
        return [Cell(c, w, min(config.concurrency), rate) for c in config.configurations for w in config.workloads
                for rate in config.request_rate]
    return [Cell(c, w, level) for c in config.configurations for w in config.workloads for level in config.concurrency]


class SweepDir:
    """A sweep folder and its typed manifest (`record`), replaced and saved at each change."""

    def __init__(self, path: Path, record: SweepRecord) -> None:
        self.path, self.record = Path(path), record
        self.config = SweepConfig.model_validate(record.config, strict=False)

    @classmethod
    def create(cls, config: SweepConfig) -> SweepDir:
        path = Path(config.results) / f"{config.name}-{utc_stamp()}"
        try:
            (path / "cells").mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise SparkbenchError(f"cannot create sweep folder {path}: {describe_os_error(exc)}") from exc
        cells = {cell.cell_id: CellEntry(configuration=cell.configuration.name, workload=cell.workload.name,
                                         concurrency=cell.concurrency, request_rate=cell.request_rate)
                 for cell in cells_of(config)}
        record = SweepRecord(record_version=SWEEP_RECORD_VERSION, sweep_id=path.name, sparkbench_version=__version__,
                             git=git_commit(), host=host_facts(), command_line=redact_argv(sys.argv),
                             started_at=utc_now(), config=config.model_dump(mode="json"), cells=cells)
        sweep = cls(path, record)
        sweep.save()
        return sweep

    @classmethod
    def load(cls, path: Path | str) -> SweepDir:
        file = Path(path) / SWEEP_MANIFEST
        try:
            manifest = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise SparkbenchError(f"{path}: no {SWEEP_MANIFEST}; is this a sweep folder?") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SparkbenchError(f"{file}: not valid JSON; the file is corrupt") from exc
        if not isinstance(manifest, dict) or not isinstance(manifest.get("cells"), dict) or "config" not in manifest:
            raise SparkbenchError(f"{file}: not a sweep manifest (it needs `config` and `cells`); the file is corrupt")
        return cls(Path(path), SweepRecord.of(manifest, str(file)))

    def cell_root(self, cell: Cell) -> Path:
        """The folder that receives the cell's run directory."""
        return self.path / "cells" / cell.cell_id

    def unfinished(self) -> list[Cell]:
        """The cells not yet complete, in matrix order: what a run or `--resume` sends."""
        return [c for c in cells_of(self.config) if self.record.cells[c.cell_id].status != COMPLETE]

    def record_outcome(self, outcome: CellOutcome) -> None:
        """Store how a cell ended (run directory relative to the sweep folder, and the node that ran
        it) and save at once."""
        run_dir = outcome.run_dir
        relative = None if run_dir is None else Path(run_dir).resolve().relative_to(self.path.resolve()).as_posix()
        entry = self.record.cells[outcome.cell_id].model_copy(update={
            "status": outcome.status, "error": outcome.error, "run_dir": relative, "ended_at": utc_now(),
            "node": outcome.node})
        self._update(cells={**self.record.cells, outcome.cell_id: entry})

    def begin(self, executor: dict[str, Any]) -> None:
        """Mark the sweep running (again, after `--resume`) under `executor` (local, or Ray and its address)."""
        start = SweepStart(at=utc_now(), executor=executor, command_line=redact_argv(sys.argv))
        self._update(status="running", ended_at=None, runs=[*self.record.runs, start])

    def finish(self) -> str:
        """The sweep's status from its cells: complete when all are, else `incomplete`."""
        done = all(cell.status == COMPLETE for cell in self.record.cells.values())
        status = COMPLETE if done else "incomplete"
        self._update(status=status, ended_at=utc_now())
        return status

    def run_dirs(self) -> dict[str, Path]:
        """cell_id -> run directory of every cell that has one."""
        return {cell_id: self.path / entry.run_dir for cell_id, entry in self.record.cells.items() if entry.run_dir}

    def _update(self, **fields: Any) -> None:
        self.record = self.record.updated(**fields)
        self.save()

    def save(self) -> None:
        """Written whole or not at all: a reader never sees half a manifest, and a save that fails
        (disk full) leaves the last one as it was and nothing beside it."""
        text = redact(json.dumps(self.record.as_written(), indent=2, sort_keys=True, default=str))
        write_text_atomically(self.path / SWEEP_MANIFEST, text)
