"""From the command line to a sweep folder: a new sweep from a config file or from flags, or the
sweep that `--resume` continues. Every problem is one line before anything runs (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from harness.run.embedded import default_profile
from harness.sweep.config import config_from_flags, load_sweep_config
from harness.sweep.sweepdir import SweepDir


def _comma_list(text: str | None, flag: str, kind: type, example: str) -> list | None:
    """`text` split at commas into `kind` values (None when not given); one line names the flag."""
    if text is None:
        return None
    try:
        return [kind(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        noun = "integers" if kind is int else "numbers"
        raise SparkbenchError(f"{flag} {text!r}: give {noun} separated by commas, e.g. {example}") from exc


def concurrency_levels(text: str | None) -> list[int] | None:
    """`1,2,4,8` as a list of integers (None when not given)."""
    return _comma_list(text, "--concurrency", int, "1,2,4,8")


def request_rates(text: str | None) -> list[float] | None:
    """`0.5,1,2` as a list of rates (None when not given)."""
    return _comma_list(text, "--request-rate", float, "0.5,1,2")


def open_sweep(config: Path | None, resume: Path | None, matrix: dict[str, Any], settings: dict[str, Any],
               ray: str | None) -> tuple[SweepDir, str | None]:
    """(the sweep to run, the Ray address or None). `matrix`: the flags that declare cells
    (concurrency or request rates, server, profile, workload, options); `settings`: the flags of how they run."""
    levels, rates = concurrency_levels(matrix["concurrency"]), request_rates(matrix.get("request_rate"))
    declared = levels is not None or rates is not None or bool(matrix["server"]) or bool(matrix["profile"]) \
        or any(value is not None for value in matrix["options"].values())
    if resume is not None:
        if config is not None or declared or any(v is not None for v in settings.values()):
            raise SparkbenchError("--resume continues a sweep as it was declared: give no config, matrix or settings")
        sweep = SweepDir.load(resume)
        return sweep, ray or sweep.config.ray.address
    if config is not None:
        if declared:
            raise SparkbenchError("give the matrix in the --config file or with flags, not both")
        chosen = load_sweep_config(config, **settings)
    else:
        # Neither server nor profile: the embedded default of the one workload, as for a single run.
        profiles = matrix["profile"] or ([] if matrix["server"] else [default_profile(matrix["workload"])])
        chosen = config_from_flags(matrix["server"] or [], profiles, matrix["workload"], matrix["options"],
                                   concurrency=levels, request_rate=rates, **settings)
    return SweepDir.create(chosen), ray or chosen.ray.address
