"""The nightly history shared by concurrent jobs: atomic appends, unique night ids, CSV migration."""

from __future__ import annotations

import multiprocessing

import pandas as pd
import pytest

import harness.nightly.history as history
from harness.errors import SparkbenchError
from harness.nightly.history import HISTORY_COLUMNS, append_history, night_id, read_history

APPENDS = 150


def _rows(night: str, count: int = 2) -> pd.DataFrame:
    return pd.DataFrame([{"night": night, "role": "candidate", "run_id": f"r{i}", "workload": "synthetic",
                          "metric": "tpot_ms", "stat": "mean", "value": 10.0 + i, "unit": "ms", "verdict": "pass"}
                         for i in range(count)])


def _append_many(state_dir: str, tag: str) -> None:
    for i in range(APPENDS):
        append_history(state_dir, _rows(f"{tag}-{i}", count=1))


def test_rows_come_back_in_the_order_written(tmp_path):
    append_history(tmp_path, _rows("n1"))
    append_history(tmp_path, _rows("n2"))
    frame = read_history(tmp_path)
    assert frame.columns.tolist() == HISTORY_COLUMNS
    assert frame["night"].tolist() == ["n1", "n1", "n2", "n2"]
    assert frame["value"].tolist() == [10.0, 11.0, 10.0, 11.0]


def test_no_history_reads_as_an_empty_table(tmp_path):
    assert read_history(tmp_path).empty


def test_two_processes_appending_at_once_lose_no_row(tmp_path):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(str(tmp_path), tag)) for tag in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    nights = read_history(tmp_path)["night"]
    assert len(nights) == 2 * APPENDS and nights.nunique() == 2 * APPENDS


def test_an_append_that_fails_midway_leaves_no_row(tmp_path, monkeypatch):
    append_history(tmp_path, _rows("kept"))
    real_insert = history._insert

    def insert_then_fail(conn, rows):
        real_insert(conn, rows)
        raise RuntimeError("killed mid-append")

    monkeypatch.setattr(history, "_insert", insert_then_fail)
    with pytest.raises(RuntimeError):
        append_history(tmp_path, _rows("lost"))
    monkeypatch.undo()
    assert read_history(tmp_path)["night"].tolist() == ["kept", "kept"]


def test_an_old_history_csv_is_imported_once_then_set_aside(tmp_path):
    old = _rows("old").drop(columns="verdict")  # the first CSVs had no verdict column
    old.to_csv(tmp_path / "history.csv", index=False)
    append_history(tmp_path, _rows("new"))
    append_history(tmp_path, _rows("newer"))
    frame = read_history(tmp_path)
    assert frame["night"].tolist() == ["old", "old", "new", "new", "newer", "newer"]
    assert frame["verdict"].tolist()[:2] == ["", ""]
    assert not (tmp_path / "history.csv").exists() and (tmp_path / "history.csv.imported").exists()


def test_an_old_history_csv_alone_is_read(tmp_path):
    _rows("old").to_csv(tmp_path / "history.csv", index=False)
    assert read_history(tmp_path)["night"].tolist() == ["old", "old"]


def test_an_unreadable_old_history_is_a_one_line_error(tmp_path):
    (tmp_path / "history.csv").write_text("night,role\nn1,candidate\n")
    with pytest.raises(SparkbenchError, match="lacks columns metric, run_id, stat, unit, value, workload"):
        read_history(tmp_path)


def test_night_ids_are_unique_and_sort_in_time_order():
    ids = [night_id() for _ in range(500)]
    assert len(set(ids)) == len(ids)
    stamps = [i.split("-")[0] for i in ids]
    assert stamps == sorted(stamps)
