"""Time series sampled beside the requests: tidy rows appended as they come, Parquet at the end.

Like the request records, every batch of rows is appended to `<name>.jsonl` and flushed at once, so
a crash loses at most the scrape in flight; `close` writes the same rows as `<name>.parquet`, whole
or not at all. A write that fails (disk full) stops the writer, which keeps the reason (`error`):
the series is what reached the disk before, and a reader takes the JSONL when the Parquet table is
absent or damaged. Every
row carries `t_ns`, a `time.perf_counter_ns()` reading of the client process: samples and requests
share one time axis.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import SparkbenchError, describe_os_error
from harness.records.atomic import write_atomically
from harness.records.requests import json_lines

SERVER_METRICS = "server_metrics"  # t_ns, role, metric, labels (JSON), value
SERVER_COLUMNS = ("t_ns", "role", "metric", "labels", "value")
DEVICE = "device"  # t_ns, gpu, metric, value
DEVICE_COLUMNS = ("t_ns", "gpu", "metric", "value")


class SeriesWriter:
    """Appends rows to `<name>.jsonl` in `run_dir` (thread-safe); `close` writes `<name>.parquet`."""

    def __init__(self, run_dir: Path, name: str, columns: Sequence[str]) -> None:
        self.run_dir, self.name, self.columns = Path(run_dir), name, tuple(columns)
        self._lock = threading.Lock()
        self._file = (self.run_dir / f"{name}.jsonl").open("a", encoding="utf-8")
        self.rows = 0
        self.error: str | None = None  # why rows stopped reaching the disk (None: they all did)

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        if not rows or self.error is not None:
            return
        text = "".join(json.dumps(row) + "\n" for row in rows)
        with self._lock:
            try:
                self._file.write(text)
                self._file.flush()
            except OSError as exc:  # a torn last line is dropped by the reader
                self.error = describe_os_error(exc)
                return
            self.rows += len(rows)

    def close(self) -> None:
        with self._lock:
            try:
                self._file.close()
            except OSError as exc:
                self.error = self.error or describe_os_error(exc)
        rows = load_series(self.run_dir, self.name, self.columns, prefer_parquet=False)
        try:
            write_atomically(self.run_dir / f"{self.name}.parquet", lambda partial: rows.to_parquet(partial, index=False))
        except OSError as exc:
            self.error = self.error or describe_os_error(exc)


def load_series(run_dir: Path, name: str, columns: Sequence[str], prefer_parquet: bool = True) -> pd.DataFrame:
    """A run's `<name>` series (Parquet when written and readable, else the JSONL); empty when it
    recorded none."""
    run_dir = Path(run_dir)
    parquet, jsonl = run_dir / f"{name}.parquet", run_dir / f"{name}.jsonl"
    if prefer_parquet and parquet.exists():
        try:
            return pd.read_parquet(parquet)
        except Exception as exc:  # pyarrow raises several unrelated types for a damaged file
            if not jsonl.exists():
                raise SparkbenchError(f"{parquet}: cannot be read as Parquet ({type(exc).__name__}) "
                                      f"and there is no {jsonl.name} beside it") from exc
    frame = pd.DataFrame(json_lines(jsonl) if jsonl.exists() else [], columns=list(columns))
    return frame.astype({"t_ns": "int64", "value": "float64"})
