"""A `--schedule` file read whole: each request's send offset and, for a production trace, the
input and output lengths it had and the prefix group it belonged to.

CSV: a column `offset_s` (or one unnamed column of offsets) and, where the trace has them,
`input_tokens`, `output_tokens` (whole numbers >= 1) and `prefix_group` (any label: rows with the
same label share a prompt prefix); other columns are left alone. JSONL: one number, or one object
with those keys, per line. Every row gives every column the file has; anything else is a one-line
error naming the line.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import SparkbenchError

OFFSET = "offset_s"
INPUT_TOKENS, OUTPUT_TOKENS, PREFIX_GROUP = "input_tokens", "output_tokens", "prefix_group"
REQUEST_COLUMNS = (INPUT_TOKENS, OUTPUT_TOKENS, PREFIX_GROUP)  # what a trace may say of each request


@dataclass(frozen=True)
class Trace:
    """The rows of a schedule file: offsets, s, and the per-request columns it gives (column ->
    one value per row); `sha256` of the file's bytes."""

    offsets: np.ndarray
    columns: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    sha256: str = ""

    def cut(self, count: int) -> Trace:
        """The first `count` rows (a run cut to its `--duration`)."""
        kept = {name: values[:count] for name, values in self.columns.items()}
        return Trace(self.offsets[:count], kept, self.sha256)


def read_trace(path: Path) -> Trace:
    """The schedule file at `path`, every row checked: offsets finite, >= 0 and non-decreasing,
    lengths whole numbers >= 1, groups non-empty; one line naming the first bad one."""
    path = Path(path)
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except FileNotFoundError as exc:
        raise SparkbenchError(f"--schedule {path} does not exist") from exc
    except UnicodeDecodeError as exc:
        raise SparkbenchError(f"--schedule {path}: not UTF-8 text") from exc
    rows = _jsonl_rows(path, text) if path.suffix in (".jsonl", ".json") else _csv_rows(path, text)
    if not rows:
        raise SparkbenchError(f"--schedule {path}: no offsets")
    named = [name for name in REQUEST_COLUMNS if name in rows[0][1]]
    offsets, columns = [], {name: [] for name in named}
    for number, row in rows:
        missing = [name for name in (OFFSET, *named) if row.get(name) in (None, "")]
        if missing:
            raise SparkbenchError(f"--schedule {path}: line {number}: no {missing[0]} (the first row gives it)")
        offsets.append(_offset(path, number, row[OFFSET], offsets[-1] if offsets else 0.0))
        for name in named:
            columns[name].append(_group(path, number, row[name]) if name == PREFIX_GROUP
                                 else _length(path, number, name, row[name]))
    return Trace(np.array(offsets, dtype=float), {name: tuple(values) for name, values in columns.items()},
                 hashlib.sha256(data).hexdigest())


def _offset(path: Path, number: int, raw: object, previous: float) -> float:
    value = _as_float(path, number, raw, "is not a number of seconds")
    if not math.isfinite(value) or value < 0:
        raise SparkbenchError(f"--schedule {path}: line {number}: offset {value!r} is not a finite number >= 0")
    if value < previous:
        raise SparkbenchError(f"--schedule {path}: line {number}: offset {value:g} comes before the one above "
                              f"it ({previous:g}); offsets must not decrease")
    return value


def _length(path: Path, number: int, name: str, raw: object) -> int:
    value = _as_float(path, number, raw, f"is not a whole number of tokens ({name})")
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise SparkbenchError(f"--schedule {path}: line {number}: {name} {raw!r} is not a whole number >= 1")
    return int(value)


def _group(path: Path, number: int, raw: object) -> str:
    if isinstance(raw, (dict, list)) or not str(raw).strip():
        raise SparkbenchError(f"--schedule {path}: line {number}: {PREFIX_GROUP} {raw!r} is not a label")
    return str(raw).strip()


def _as_float(path: Path, number: int, raw: object, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise SparkbenchError(f"--schedule {path}: line {number}: {raw!r} {what}")
    try:
        return float(raw)
    except ValueError as exc:
        raise SparkbenchError(f"--schedule {path}: line {number}: {raw!r} {what}") from exc


def _csv_rows(path: Path, text: str) -> list[tuple[int, dict[str, str]]]:
    rows = [(number, row) for number, row in enumerate(csv.reader(text.splitlines()), start=1) if row]
    if not rows:
        return []
    header = [cell.strip() for cell in rows[0][1]]
    if OFFSET not in header:
        if len(header) != 1:
            raise SparkbenchError(f"--schedule {path}: a CSV with several columns needs one named {OFFSET}")
        return [(number, {OFFSET: row[0].strip()}) for number, row in rows]
    return [(number, {name: cell.strip() for name, cell in zip(header, row)}) for number, row in rows[1:]]


def _jsonl_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SparkbenchError(f"--schedule {path}: line {number} is not valid JSON") from exc
        rows.append((number, raw if isinstance(raw, dict) else {OFFSET: raw}))
    return rows
