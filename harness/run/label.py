"""A run's label: the short name people read in tables, figures and reports.

`--label TEXT` names a run; without it the label is derived from the manifest: the profile the
server was checked against (else the engine it runs) and the key options, e.g. `cpu-testbed c=1`,
`spark-mtp c=16`. Runs recorded before labels existed get the same derived label when loaded.
"""

from __future__ import annotations

from harness.errors import SparkbenchError
from harness.records.manifest import RunRecord

MAX_LABEL_CHARS = 80  # long enough for a profile and its options, short enough for a legend


def default_label(record: RunRecord) -> str:
    """`<profile or engine> c=<concurrency>`: what the server runs, then how it was driven."""
    profile = (record.profile.name if record.profile else None) or \
        (record.launched_server.profile if record.launched_server else None)
    name = profile or record.engine_and_api[0] or "unknown server"
    concurrency = record.options.concurrency_count
    return name if concurrency is None else f"{name} c={concurrency}"


def run_label(record: RunRecord) -> str:
    """The label the run was given, else the derived one."""
    return record.label or default_label(record)


def checked_label(text: str | None) -> str | None:
    """`--label` stripped, or a one-line error when it is empty, spans lines or is too long."""
    if text is None:
        return None
    label = text.strip()
    if not label or any(ch in label for ch in "\r\n\t") or len(label) > MAX_LABEL_CHARS:
        raise SparkbenchError(f"--label {text!r}: give one line of 1 to {MAX_LABEL_CHARS} characters")
    return label
