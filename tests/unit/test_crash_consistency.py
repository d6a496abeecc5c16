"""A run killed or out of disk: its records stay whole lines, it says why it stopped, readers show
it as stale rather than running, and `--resume` completes it to the planned request set."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.analysis.run import Run
from harness.analysis.tables import format_run_summary, run_warnings
from harness.errors import SparkbenchError
from harness.records.requests import JSONL_NAME, PARQUET_NAME, RecordWriter, json_lines, load_requests
from harness.records.rundir import RunDir
from harness.records.timeseries import SeriesWriter
from harness.run.resume import done_prompts
from harness.run.runner import RunAborted, RunOptions, execute
from tests.fakes.broken_server import NONE, Breakage, breaking
from tests.unit.test_fault_tolerance import CLIENTS, FixedLength, run_against
from tests.unit.test_records import _record


def disk_full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_an_append_after_a_torn_line_cuts_the_torn_line_first(tmp_path):
    writer = RecordWriter(tmp_path)
    for seq in range(2):
        writer.append(_record(seq))
    writer.close()
    with (tmp_path / JSONL_NAME).open("a") as file:
        file.write('{"run_id": "r", "seq": 2, "prompt_id": "p2", "work')  # killed mid-write
    resumed = RecordWriter(tmp_path)
    resumed.append(_record(3))
    resumed.close()
    assert [row["prompt_id"] for row in json_lines(tmp_path / JSONL_NAME)] == ["p0", "p1", "p3"]
    assert (tmp_path / JSONL_NAME).read_bytes().endswith(b"\n")


def test_a_full_disk_stops_the_run_in_one_line_and_resume_completes_it(tmp_path, monkeypatch):
    fsyncs = iter(range(1_000))
    real_fsync = __import__("os").fsync

    def fsync_until_full(fd):
        if next(fsyncs) >= 2:
            disk_full()
        real_fsync(fd)

    def partial_parquet(frame, path, **kwargs):
        with open(path, "wb") as file:
            file.write(b"PAR1 half a table")
        disk_full()

    with breaking(Breakage(NONE)) as url:
        monkeypatch.setattr("os.fsync", fsync_until_full)
        monkeypatch.setattr(pd.DataFrame, "to_parquet", partial_parquet)
        with pytest.raises(RunAborted, match="disk full") as stopped:
            run_against(url, "sglang", tmp_path, count=6)
        monkeypatch.undo()  # space freed
        (path,) = tmp_path.glob("run-*")
        assert "\n" not in str(stopped.value)
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["status"] == "failed" and "disk full" in manifest["error"]
        assert not (path / PARQUET_NAME).exists()
        assert [row["prompt_id"] for row in json_lines(path / JSONL_NAME)] == ["p0", "p1"]
        settings = RunOptions(base_url=url, warmup=0, show_progress=False, power_sample_ms=0)
        execute(CLIENTS["sglang"](), settings, FixedLength(6), RunDir.reopen(path), done_prompts(path))
    table = load_requests(path)
    assert table["prompt_id"].tolist() == [f"p{i}" for i in range(6)] and (table["status"] == "ok").all()


def test_a_damaged_parquet_table_is_read_from_the_jsonl_beside_it(tmp_path):
    with breaking(Breakage(NONE)) as url:
        run = run_against(url, "sglang", tmp_path, count=3)
    (run.path / PARQUET_NAME).write_bytes(b"PAR1 torn")
    assert load_requests(run.path)["prompt_id"].tolist() == ["p0", "p1", "p2"]


def test_a_run_whose_process_is_gone_reads_as_stale(tmp_path):
    with breaking(Breakage(NONE)) as url:
        run = run_against(url, "sglang", tmp_path, count=2)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run.update(status="running", pid=int(gone.stdout))
    shown = Run.load(run.path)
    assert "status=stale" in format_run_summary(shown)
    assert any(w.startswith("status stale") and "--resume" in w for w in run_warnings(shown))


class Disk:
    """A disk with room for `writes` more writes (record syncs, tables, manifest saves, series
    lines); past that each write leaves half of what it was given and fails with ENOSPC."""

    def __init__(self, writes: int) -> None:
        self.left = writes

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


class FillingFile:
    def __init__(self, file, disk: Disk) -> None:
        self.file, self.disk = file, disk

    def write(self, text: str) -> int:
        if not self.disk.spend():
            self.file.write(text[: len(text) // 2])
            self.file.flush()
            disk_full()
        return self.file.write(text)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def filling(monkeypatch, disk: Disk) -> None:
    """Every writer of a run directory writes on `disk`."""
    real_fsync, real_parquet, real_csv = os.fsync, pd.DataFrame.to_parquet, pd.DataFrame.to_csv
    real_write_text, real_series_init = Path.write_text, SeriesWriter.__init__

    def fsync(fd):
        return real_fsync(fd) if disk.spend() else disk_full()

    def table(real):
        def write(frame, path, *args, **kwargs):
            if disk.spend():
                return real(frame, path, *args, **kwargs)
            Path(path).write_bytes(b"PAR1 half a table")
            disk_full()
        return write

    def write_text(path, text, *args, **kwargs):
        if disk.spend():
            return real_write_text(path, text, *args, **kwargs)
        real_write_text(path, text[: len(text) // 2], *args, **kwargs)
        disk_full()

    def series_init(writer, *args, **kwargs):
        real_series_init(writer, *args, **kwargs)
        writer._file = FillingFile(writer._file, disk)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(pd.DataFrame, "to_parquet", table(real_parquet))
    monkeypatch.setattr(pd.DataFrame, "to_csv", table(real_csv))
    monkeypatch.setattr(Path, "write_text", write_text)
    monkeypatch.setattr(SeriesWriter, "__init__", series_init)


def test_a_disk_that_fills_anywhere_in_a_run_leaves_a_folder_that_summarizes(monkeypatch):
    """Whatever write the disk fills at, once space is freed the run folder summarizes (a table
    torn by the full disk is read from its JSONL) or is refused in one line."""
    with breaking(Breakage(NONE)) as url:

        @given(st.integers(min_value=0, max_value=40))
        @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        def fill_at(writes):
            with tempfile.TemporaryDirectory() as folder, monkeypatch.context() as patch:
                filling(patch, Disk(writes))
                try:
                    run_against(url, "sglang", Path(folder), count=4, scrape_interval_s=0.05)
                except SparkbenchError as stopped:
                    assert "\n" not in str(stopped)
                patch.undo()  # space freed
                for path in Path(folder).glob("run-*"):
                    try:
                        run = Run.load(path)
                        format_run_summary(run, full=True)
                        assert list(run.server_metrics.columns) and list(run.device_samples.columns)
                    except SparkbenchError as refused:
                        assert "\n" not in str(refused)

        fill_at()
