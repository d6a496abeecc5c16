"""An imported run written as a run folder: manifest, the tool's per-request table and its aggregates."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from harness import __version__
from harness.errors import SparkbenchError
from harness.imports.imported import Imported
from harness.records.atomic import write_atomically, write_text_atomically
from harness.records.imported import AGGREGATE_COLUMNS, AGGREGATES_NAME, REQUEST_COLUMNS, REQUESTS_NAME, ImportEntry
from harness.records.rundir import MANIFEST_NAME, git_commit, utc_now, utc_stamp
from harness.secrets import redact_argv

PER_REQUEST_NOTE = "per request, as the tool kept each request's figures"
AGGREGATES_NOTE = ("aggregates only: the tool kept no per-request figures in this file, so the run has no "
                   "per-request rows; its aggregates are the tool's own")


def write_import(imported: Imported, source: Path, results: Path, part: int | None = None) -> Path:
    """The run folder of one imported run under `results`; `part`: its line in a file of several runs."""
    slug = imported.tool.replace(" ", "-")
    run_id = f"{utc_stamp()}-import-{slug}-{os.getpid()}" + (f"-{part}" if part is not None else "")
    path = results / run_id
    try:
        path.mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        raise SparkbenchError(f"cannot create run directory {path}: {exc.strerror}") from exc
    if imported.requests is not None:
        table = requests_table(imported, run_id)
        write_atomically(path / REQUESTS_NAME, lambda partial: table.to_parquet(partial, index=False))
    aggregates = pd.DataFrame([asdict(row) for row in imported.aggregates], columns=AGGREGATE_COLUMNS)
    write_atomically(path / AGGREGATES_NAME, lambda partial: aggregates.to_csv(partial, index=False))
    manifest = manifest_of(imported, source, run_id)
    write_text_atomically(path / MANIFEST_NAME, json.dumps(manifest, indent=2, sort_keys=True))
    return path


def requests_table(imported: Imported, run_id: str) -> pd.DataFrame:
    rows = [{**asdict(row), "prompt_id": str(row.seq), "status": "ok" if row.ok else "error"}
            for row in imported.requests]
    table = pd.DataFrame(rows, columns=REQUEST_COLUMNS)
    for column in ("prompt_tokens", "completion_tokens"):
        table[column] = table[column].astype("Int64")
    return table


def manifest_of(imported: Imported, source: Path, run_id: str) -> dict:
    """A manifest every reader of runs takes: no host or server facts (the tool's run had its own,
    unrecorded), the tool and its definitions in `imported`."""
    per_request = imported.requests is not None
    entry = ImportEntry(tool=imported.tool, tool_version=imported.tool_version, source=str(source.resolve()),
                        source_sha256=hashlib.sha256(source.read_bytes()).hexdigest(), per_request=per_request,
                        note=PER_REQUEST_NOTE if per_request else AGGREGATES_NOTE,
                        definitions=imported.definitions, server_version=imported.server_version)
    workload = {key: value for key, value in imported.workload.items() if value is not None}
    now = utc_now()
    return {"manifest_version": 2, "run_id": run_id, "kind": "import", "label": f"imported {imported.tool}",
            "workload": workload, "imported": entry.model_dump(), "status": "complete", "started_at": now,
            "ended_at": now, "sparkbench_version": __version__, "git": git_commit(),
            "command_line": redact_argv(sys.argv), "scale": f"imported from {imported.tool}",
            "requests_recorded": len(imported.requests) if per_request else None}
