"""A run's label: the short name people read in tables, figures and reports.

`--label TEXT` names a run; without it the label is derived from the manifest: the profile the
server was checked against (else the engine it runs) and the key options, e.g. `cpu-testbed c=1`,
`spark-mtp c=16`, or for an open loop the rate and the cap, `cpu-testbed r=4/s cap=8`. Runs
recorded before labels existed get the same derived label when loaded.
"""

from __future__ import annotations

from pathlib import PurePath

from harness.errors import SparkbenchError
from harness.records.manifest import RunRecord

MAX_LABEL_CHARS = 80  # long enough for a profile and its options, short enough for a legend


def default_label(record: RunRecord) -> str:
    """`<profile or engine> <load>`: what the server runs, then how it was driven (`load_label`)."""
    profile = (record.profile.name if record.profile else None) or \
        (record.launched_server.profile if record.launched_server else None)
    name = profile or record.engine_and_api[0] or "unknown server"
    load = load_label(record)
    return name if load is None else f"{name} {load}"


def load_label(record: RunRecord) -> str | None:
    """How the run was driven: `c=<concurrency>` for a closed loop; for an open loop the rate asked
    (`r=4/s`) or the replayed schedule's file (`schedule=trace.csv`), and the cap (`cap=8`) if any."""
    options = record.options
    if not options.open_loop:
        return None if options.concurrency_count is None else f"c={options.concurrency_count}"
    load = f"r={options.request_rate:g}/s" if options.request_rate is not None else \
        f"schedule={PurePath(options.schedule).name}"
    return load if options.max_concurrency is None else f"{load} cap={options.max_concurrency}"


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
