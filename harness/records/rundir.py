"""The run directory `results/<run_id>/` and its `manifest.json`: provenance for every result.

The manifest is written when the run starts (status `running`) and rewritten when it ends
(`complete`, `interrupted` or `failed`), so even a killed harness leaves a manifest behind. While
it runs, the manifest names the writing process and its heartbeat: a reader takes a `running` run
whose process is gone as `stale` (`RunRecord.seen_status`), and `--resume` continues it.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness import __version__
from harness.errors import SparkbenchError
from harness.records.atomic import write_text_atomically
from harness.records.manifest import RunRecord
from harness.secrets import redact_argv, redacted

MANIFEST_NAME = "manifest.json"
# The manifest's `scale` of runs on the embedded test bed; every output of such a run states it.
SCALE_LABEL = "REDUCED SCALE: embedded CPU test bed (a small test-bed model on a CPU), not the published shape"
REPO_ROOT = Path(__file__).resolve().parents[2]


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def utc_stamp() -> str:
    """UTC time to the microsecond, e.g. 20261130T104500.123456Z: sorts in time order, and two runs
    of one process never share it (runs take longer than a microsecond)."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def new_run_id(workload: str) -> str:
    return f"{utc_stamp()}-{workload}-{os.getpid()}"


def git_commit() -> dict[str, Any]:
    """The harness's own commit and whether its tree had local changes (None outside a clone)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty) if dirty is not None else None}


def host_facts() -> dict[str, Any]:
    memory_gib = None
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory_gib = round(pages * page_size / 2**30, 1)
    except (ValueError, OSError):
        pass
    return {
        "hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
        "python": sys.version.split()[0], "cpu_count": os.cpu_count(), "memory_gib": memory_gib,
    }


HEARTBEAT_S = 10.0  # how often a live run refreshes heartbeat_at


@dataclass
class RunDir:
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    _last_beat: float = 0.0

    @classmethod
    def create(cls, results_root: Path, run_id: str, manifest: dict[str, Any]) -> RunDir:
        path = results_root / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError as exc:
            raise SparkbenchError(f"run directory {path} already exists") from exc
        except OSError as exc:
            raise SparkbenchError(f"cannot create run directory {path}: {exc.strerror}") from exc
        base = {"run_id": run_id, "sparkbench_version": __version__, "git": git_commit(),
                "command_line": redact_argv(sys.argv), "host": host_facts(), "started_at": utc_now(),
                "ended_at": None, "status": "running", **_alive()}
        run = cls(path, {**base, **manifest})
        run.save()
        return run

    @classmethod
    def reopen(cls, path: Path) -> RunDir:
        """An existing run continued by this process (`--resume`): running again, its past kept."""
        manifest = load_manifest(path)
        resumes = [*manifest.get("resumed", []), {"at": utc_now(), "previous_status": manifest.get("status"),
                                                  "command_line": redact_argv(sys.argv)}]
        run = cls(Path(path), {**manifest, "status": "running", "ended_at": None, "error": None,
                               "resumed": resumes, **_alive()})
        run.save()
        return run

    @property
    def record(self) -> RunRecord:
        """The manifest as written so far, as its typed record."""
        return RunRecord.of(self.manifest, str(self.path / MANIFEST_NAME))

    def beat(self) -> None:
        """Refresh the heartbeat (at most every HEARTBEAT_S), so readers can tell a live run."""
        if time.time() - self._last_beat >= HEARTBEAT_S:
            self.update(heartbeat_at=utc_now())

    def update(self, **fields: Any) -> None:
        self.manifest.update(fields)
        self.save()

    def finish(self, status: str, **fields: Any) -> None:
        self.update(status=status, ended_at=utc_now(), **fields)

    def save(self) -> None:
        # A reader never sees half a manifest, and a save that fails (disk full) leaves no half one
        # beside it: the manifest stays as last written.
        text = json.dumps(redacted(self.manifest), indent=2, sort_keys=True, default=str)
        write_text_atomically(self.path / MANIFEST_NAME, text)
        self._last_beat = time.time()


def _alive() -> dict[str, Any]:
    """Who is writing the run now: readers use it to tell a live run from a dead one."""
    return {"pid": os.getpid(), "hostname": socket.gethostname(), "heartbeat_at": utc_now()}


def load_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest; one-line errors for a missing, undecodable or wrongly shaped file."""
    path = Path(run_dir) / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SparkbenchError(f"{run_dir}: no {MANIFEST_NAME}; is this a run directory?") from exc
    except UnicodeDecodeError as exc:
        raise SparkbenchError(f"{path}: not UTF-8 text (byte {exc.start}); the file is corrupt") from exc
    except json.JSONDecodeError as exc:
        raise SparkbenchError(f"{path}: not valid JSON (line {exc.lineno}); the file is corrupt") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("workload"), dict) \
            or not isinstance(manifest["workload"].get("name"), str) or not isinstance(manifest.get("run_id"), str):
        raise SparkbenchError(f"{path}: not a sparkbench manifest (it needs an object with `run_id` and "
                              "`workload.name`); the file is corrupt")
    return manifest


def load_record(run_dir: Path) -> RunRecord:
    """The run's manifest as its typed record; one-line errors as `load_manifest`'s, and per wrong type."""
    return RunRecord.of(load_manifest(run_dir), str(Path(run_dir) / MANIFEST_NAME))
