"""Files of a run directory written whole or not at all.

A table or summary is written under a temporary name and renamed into place: a reader never finds
half a file, and a write that fails (disk full) leaves the file as it was (or absent) and frees
the space the partial one took. Readers of a table that has a JSONL beside it fall back to it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def write_atomically(path: Path, write: Callable[[Path], object]) -> Path:
    """`write(partial)` to a temporary file beside `path`, then renamed to `path`; returns `path`."""
    partial = path.with_name(path.name + ".partial")
    try:
        write(partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path
