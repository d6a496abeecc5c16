"""A disk that fills while one file is being written: test equipment for the writers that save a
manifest whole or not at all.

`filling_at(monkeypatch, name, room)`: the first `room` text writes to a file whose name begins
with `name` (the file itself or any temporary name beside it) go through; each one after that
writes half its text and fails with ENOSPC, as a write does when the disk fills part-way.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest


def filling_at(monkeypatch: pytest.MonkeyPatch, name: str, room: int = 0) -> None:
    real_write_text = Path.write_text
    written = 0

    def write_text(path: Path, text: str, *args, **kwargs) -> int:
        nonlocal written
        if not path.name.startswith(name):
            return real_write_text(path, text, *args, **kwargs)
        written += 1
        if written <= room:
            return real_write_text(path, text, *args, **kwargs)
        real_write_text(path, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", write_text)
