"""The nightly history: one SQLite table that any number of nightly jobs append to at once.

Why SQLite (standard library): an append is one transaction, so it is atomic (a job killed
mid-append leaves the table as it was) and serialised across processes by SQLite's own file lock
(two jobs sharing a state folder never lose each other's rows). A reader sees whole nights only.

State folders written before this kept `history.csv`, rewritten in place on every night. The first
open imports it in the same transaction that records the import (so it is imported exactly once,
whichever job gets there first) and then renames it `history.csv.imported`.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pandas as pd

from harness.errors import SparkbenchError
from harness.records.rundir import utc_stamp

HISTORY_NAME = "history.sqlite"
LEGACY_NAME = "history.csv"
HISTORY_COLUMNS = ["night", "role", "run_id", "workload", "metric", "stat", "value", "unit", "verdict"]
# A job waits this long for another job's append (milliseconds of work) before giving up.
LOCK_TIMEOUT_S = 120.0
_SCHEMA = ("CREATE TABLE IF NOT EXISTS history (night TEXT, role TEXT, run_id TEXT, workload TEXT, "
           "metric TEXT, stat TEXT, value REAL, unit TEXT, verdict TEXT)",
           "CREATE TABLE IF NOT EXISTS imported (name TEXT PRIMARY KEY)")


def night_id() -> str:
    """A night's id: UTC time to the microsecond, then pid and a random suffix, so that two jobs
    started at the same moment (on one host or two sharing a folder) never share an id."""
    return f"{utc_stamp()}-{os.getpid()}-{secrets.token_hex(2)}"


@contextmanager
def _transaction(state_dir: Path) -> Iterator[sqlite3.Connection]:
    """An open connection inside BEGIN IMMEDIATE (the write lock), committed on success."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / HISTORY_NAME
    try:
        with closing(sqlite3.connect(path, timeout=LOCK_TIMEOUT_S, isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA:
                    conn.execute(statement)
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise SparkbenchError(f"nightly history {path}: {exc}") from exc


def _insert(conn: sqlite3.Connection, rows: pd.DataFrame) -> None:
    frame = rows.reindex(columns=HISTORY_COLUMNS)
    frame["verdict"] = frame["verdict"].astype(object).where(frame["verdict"].notna(), "")
    records = [tuple(None if pd.isna(v) else v for v in row) for row in frame.itertuples(index=False)]
    conn.executemany(f"INSERT INTO history VALUES ({', '.join('?' * len(HISTORY_COLUMNS))})", records)


def _import_legacy(conn: sqlite3.Connection, state_dir: Path) -> bool:
    """Import history.csv once; True when this call imported it (the caller renames it)."""
    legacy = state_dir / LEGACY_NAME
    if not legacy.exists() or conn.execute("SELECT 1 FROM imported WHERE name = ?", (LEGACY_NAME,)).fetchone():
        return False
    try:
        old = pd.read_csv(legacy)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SparkbenchError(f"{legacy} cannot be read ({exc}); move it aside to start a new history") from exc
    missing = sorted(set(HISTORY_COLUMNS) - {"verdict"} - set(old.columns))
    if missing:
        raise SparkbenchError(f"{legacy} lacks columns {', '.join(missing)}; move it aside to start a new history")
    _insert(conn, old)
    conn.execute("INSERT INTO imported VALUES (?)", (LEGACY_NAME,))
    return True


@contextmanager
def _open(state_dir: Path) -> Iterator[sqlite3.Connection]:
    """A write transaction on the history, with any legacy CSV imported first."""
    imported = False
    with _transaction(state_dir) as conn:
        imported = _import_legacy(conn, state_dir)
        yield conn
    if imported:  # after the commit: the rows are safe before the file is set aside
        (state_dir / LEGACY_NAME).replace(state_dir / (LEGACY_NAME + ".imported"))


def append_history(state_dir: Path, rows: pd.DataFrame) -> None:
    """Append rows (HISTORY_COLUMNS) in one transaction: all of them or, on any error, none."""
    with _open(Path(state_dir)) as conn:
        _insert(conn, rows)


def read_history(state_dir: Path) -> pd.DataFrame:
    """Every history row in the order written (empty with HISTORY_COLUMNS when there is none)."""
    state_dir = Path(state_dir)
    if not (state_dir / HISTORY_NAME).exists() and not (state_dir / LEGACY_NAME).exists():
        return pd.DataFrame(columns=HISTORY_COLUMNS)
    with _open(state_dir) as conn:
        cursor = conn.execute(f"SELECT {', '.join(HISTORY_COLUMNS)} FROM history ORDER BY rowid")
        frame = pd.DataFrame(cursor.fetchall(), columns=HISTORY_COLUMNS)
    return frame.astype({"value": float})
