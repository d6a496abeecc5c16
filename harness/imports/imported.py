"""What an importer reads from another tool's file, before it becomes a run folder."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from harness.errors import SparkbenchError

# Milliseconds per unit of the time units the tools write (AIPerf states a unit for every figure).
MS_UNITS = {"ms": 1.0, "s": 1000.0, "sec": 1000.0, "us": 1e-3, "ns": 1e-6}


@dataclass
class RequestRow:
    """One request as the tool kept it; None: the tool did not measure that figure."""

    seq: int
    ok: bool
    error_message: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    output_text: str | None = None


@dataclass
class Aggregate:
    """One aggregate the tool computed: sparkbench's metric name where alike, the stat, the tool's key."""

    metric: str
    stat: str
    value: float
    unit: str
    tool_field: str


@dataclass
class Imported:
    """One run of another tool: who measured it, how it defined its figures, and what it kept."""

    tool: str
    tool_version: str | None
    definitions: dict[str, str]
    aggregates: list[Aggregate]
    requests: list[RequestRow] | None  # None: the tool kept only aggregates
    workload: dict[str, Any]
    server_version: str | None = None


def finite(value: Any) -> float | None:
    """A number the tool wrote, or None for a missing or non-finite one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def in_ms(value: float | None, unit: str, where: str) -> float | None:
    """`value` in `unit` as milliseconds; an unknown unit is refused."""
    if unit not in MS_UNITS:
        raise SparkbenchError(f"{where}: unit {unit!r} is not a time unit this import knows ({', '.join(MS_UNITS)})")
    return None if value is None else value * MS_UNITS[unit]


def first_problem(error: ValidationError, where: str) -> SparkbenchError:
    """The first problem pydantic found, as one line naming the field."""
    problem = error.errors()[0]
    path = ".".join(str(part) for part in problem["loc"]) or "(top level)"
    more = len(error.errors()) - 1
    return SparkbenchError(f"{where}: {path}: {problem['msg']}" + (f" (and {more} more problems)" if more else ""))


def check_lengths(lists: dict[str, list | None], where: str) -> int:
    """The one length of the per-request lists given; a file whose lists disagree is refused."""
    lengths = {name: len(values) for name, values in lists.items() if values is not None}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{name} {length}" for name, length in lengths.items())
        raise SparkbenchError(f"{where}: per-request lists of different lengths ({shown})")
    return next(iter(lengths.values()), 0)
