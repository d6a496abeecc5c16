"""The request table checked as it is read: a file edited by hand, written by another tool or
damaged is refused in one line, naming the row and column, before any metric reads it.

What is refused: a missing column every reader needs, a missing or non-text `prompt_id` (rows would
collapse into one prompt), a stamp or count that is not a whole number, a count below zero, a list
column that is not a list of whole numbers, a status other than ok or error.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from harness.errors import SparkbenchError

REQUIRED_COLUMNS = ("seq", "prompt_id", "sent_ns", "end_ns", "status")
WHOLE_COLUMNS = ("seq", "sent_ns", "end_ns", "first_token_ns", "last_token_ns")
COUNT_COLUMNS = ("prompt_tokens", "completion_tokens", "cached_tokens")
LIST_COLUMNS = ("chunk_ns", "chunk_tokens", "output_ids", "text_ns", "text_chars", "stall_ns", "stall_late_ns")
STATUSES = frozenset({"ok", "error"})


def checked_records(frame: pd.DataFrame, source: object) -> pd.DataFrame:
    """`frame` itself when every row is well formed; else a one-line SparkbenchError."""
    if frame.empty:
        return frame
    missing = [column for column in REQUIRED_COLUMNS if column not in frame.columns]
    if missing:
        raise SparkbenchError(f"{source}: the records have no {', '.join(missing)} column; the file is corrupt")
    _each(frame, source, "prompt_id", lambda v: isinstance(v, str) and v != "", "is missing or not text")
    _each(frame, source, "status", lambda v: v in STATUSES, "is neither ok nor error")
    for column in (*WHOLE_COLUMNS, *COUNT_COLUMNS):
        if column in frame.columns:
            _each(frame, source, column, lambda v: _missing(v) or _whole(v), "is not a whole number")
    for column in COUNT_COLUMNS:
        if column in frame.columns:
            _each(frame, source, column, lambda v: _missing(v) or v >= 0, "is below zero")
    for column in LIST_COLUMNS:
        if column in frame.columns:
            _each(frame, source, column, _whole_list, "is not a list of whole numbers")
    return frame


def _each(frame: pd.DataFrame, source: object, column: str, good: Any, what: str) -> None:
    for row, value in enumerate(frame[column].tolist()):
        if not good(value):
            raise SparkbenchError(f"{source}: record {row + 1}: {column} {what} ({str(value)[:40]!r}); "
                                  "the file is corrupt")


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _whole(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, np.integer)):
        return True
    return isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer()


def _whole_list(value: Any) -> bool:
    if _missing(value):
        return True
    if not isinstance(value, (list, np.ndarray)):
        return False
    return len(value) == 0 or np.asarray(value).dtype.kind in "iu"
