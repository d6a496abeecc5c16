"""Files of a run directory (and of a sweep's or a capacity search's folder) written whole or not at all.

A table or summary is written under a temporary name and renamed into place: a reader never finds
half a file, and a write that fails (disk full) leaves the file as it was (or absent) and frees
the space the partial one took. Readers of a table that has a JSONL beside it fall back to it.
Every manifest (a run's, a sweep's, a capacity search's, a gap design's) is saved through
`write_text_atomically`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.errors import SparkbenchError, describe_os_error


def write_atomically(path: Path, write: Callable[[Path], object]) -> Path:
    """`write(partial)` to a temporary file beside `path`, then renamed to `path`; returns `path`."""
    partial = path.with_name(path.name + ".partial")
    try:
        write(partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def write_text_atomically(path: Path, text: str) -> Path:
    """`text` as the whole of `path` (UTF-8), or `path` left as it was and a one-line error saying
    why the write failed (disk full)."""
    try:
        return write_atomically(path, lambda partial: partial.write_text(text, encoding="utf-8"))
    except OSError as exc:
        raise SparkbenchError(f"cannot write {path}: {describe_os_error(exc)}") from exc
