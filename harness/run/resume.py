"""Continuing a run that stopped (`sparkbench run ... --resume RUN_DIR`).

A resumed run is the same run: the same workload spec and seeds, the same records file. It sends
only the prompts that have no ok record yet and appends their records; the request table keeps the
last record of each prompt (`harness.records.requests.latest_attempts`), so no request can count
twice and the final set equals one clean run's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from harness.records.manifest import RunRecord
from harness.records.requests import load_requests
from harness.records.rundir import load_record

# Spec entries that a new process may legitimately see differently (none of them shapes a prompt).
UNCOMPARED_SPEC_KEYS = frozenset({"tokenizer"})


def resumed_options(path: Path, workload: str, options: dict[str, Any],
                    defaults: dict[str, Any]) -> dict[str, Any]:
    """The workload options of the run at `path`, after checking that the command changes none.

    An option the command left at its default takes the run's value; one it set differently from
    the run is refused in one line: a resumed run keeps its workload.
    """
    record = _resumable(path, workload)
    recorded = dict(record.workload_config or {})
    if "salt" in recorded and recorded["salt"] is None:
        recorded["salt"] = record.workload.salt  # drawn fresh when the run began
    changed = [f"{key} ({recorded.get(key)!r} -> {str(value) if isinstance(value, Path) else value!r})"
               for key, value in options.items()
               if value is not None and value != defaults.get(key) and not _same(value, recorded.get(key))]
    if changed:
        raise SparkbenchError(f"--resume {path}: the command changes the workload: {', '.join(changed)}; "
                              "a resumed run keeps its workload (start a new run instead)")
    return {key: recorded.get(key, value) for key, value in options.items()}


def _same(given: Any, recorded: Any) -> bool:
    """Whether an option as given equals its recorded value: a path is the same file, however it
    was written (relative to another folder, or recorded before paths were stored absolute)."""
    if isinstance(given, Path) and isinstance(recorded, str):
        return given.expanduser().resolve() == Path(recorded).expanduser().resolve()
    return given == recorded


def check_same_spec(path: Path, spec: dict[str, Any]) -> None:
    """Refuse, in one line, a workload whose spec differs from the run's (data, seeds, shape)."""
    recorded = load_record(path).workload.as_recorded()
    differs = sorted(key for key in set(spec) | set(recorded)
                     if key not in UNCOMPARED_SPEC_KEYS and spec.get(key) != recorded.get(key))
    if differs:
        raise SparkbenchError(f"--resume {path}: the workload would differ from the run's in "
                              f"{', '.join(differs)}; start a new run instead")


def done_prompts(path: Path) -> frozenset[str]:
    """Prompt ids of the run that already have an ok record: they are not sent again."""
    requests = load_requests(path)
    return frozenset(requests.loc[requests["status"] == "ok", "prompt_id"])


def _resumable(path: Path, workload: str) -> RunRecord:
    record = load_record(path)
    if record.seen_status == "running":
        raise SparkbenchError(f"--resume {path}: the run is still running (pid {record.pid})")
    if record.workload.name != workload:
        raise SparkbenchError(f"--resume {path}: that run is a {record.workload.name} run, not {workload}")
    return record
