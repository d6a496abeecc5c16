"""A run's label: the short name people read in tables, figures and reports.

`--label TEXT` names a run; without it the label is derived from the manifest: the profile the
server was checked against (else the engine it runs) and the key options, e.g. `cpu-testbed c=1`,
`spark-mtp c=16`. Runs recorded before labels existed get the same derived label when loaded.
"""

from __future__ import annotations

from typing import Any

from harness.errors import SparkbenchError
from harness.records.rundir import engine_and_api

MAX_LABEL_CHARS = 80  # long enough for a profile and its options, short enough for a legend


def concurrency_of(manifest: dict[str, Any]) -> int | None:
    """Requests in flight at once, as the manifest's run options record it (None: not recorded)."""
    value = (manifest.get("options") or {}).get("concurrency")
    return int(value) if isinstance(value, (int, float)) else None


def default_label(manifest: dict[str, Any]) -> str:
    """`<profile or engine> c=<concurrency>`: what the server runs, then how it was driven."""
    profile = (manifest.get("profile") or {}).get("name") or (manifest.get("launched_server") or {}).get("profile")
    name = profile or engine_and_api(manifest)[0] or "unknown server"
    concurrency = concurrency_of(manifest)
    return name if concurrency is None else f"{name} c={concurrency}"


def run_label(manifest: dict[str, Any]) -> str:
    """The label the run was given, else the derived one."""
    return manifest.get("label") or default_label(manifest)


def checked_label(text: str | None) -> str | None:
    """`--label` stripped, or a one-line error when it is empty, spans lines or is too long."""
    if text is None:
        return None
    label = text.strip()
    if not label or any(ch in label for ch in "\r\n\t") or len(label) > MAX_LABEL_CHARS:
        raise SparkbenchError(f"--label {text!r}: give one line of 1 to {MAX_LABEL_CHARS} characters")
    return label
