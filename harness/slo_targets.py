"""The one reader of `--slo` targets: `ttft=500ms,tpot=50ms,e2e=30s` as {figure: limit in ms}.

Apart from `harness.metrics.slo`, which judges requests against the targets, so that the run
options (and with them the command line's help) read the targets without the table libraries.
"""

from __future__ import annotations

import re

from harness.errors import SparkbenchError

TARGET_FIGURES = ("ttft", "tpot", "e2e")
UNIT_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "": 1.0}  # a bare number is ms, as in vLLM's --goodput
_TARGET = re.compile(r"^\s*([a-z0-9_]+)\s*[=:]\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(ms|s|m|)\s*$")


def parse_slo(text: str) -> dict[str, float]:
    """`ttft=500ms,tpot=50ms,e2e=30s` (any subset; `:` for `=`; units ms, s, m, bare = ms) as
    {figure: limit in ms}; a one-line error for anything else."""
    targets: dict[str, float] = {}
    for part in (p for p in text.lower().split(",") if p.strip()):
        match = _TARGET.match(part)
        if match is None:
            raise SparkbenchError(f"--slo: {part.strip()!r} is not FIGURE=LIMIT (e.g. ttft=500ms)")
        figure, number, unit = match.groups()
        if figure not in TARGET_FIGURES:
            raise SparkbenchError(f"--slo: unknown figure {figure!r} (known: {', '.join(TARGET_FIGURES)})")
        if figure in targets:
            raise SparkbenchError(f"--slo: {figure} given twice")
        limit = float(number) * UNIT_MS[unit]
        if not limit > 0:
            raise SparkbenchError(f"--slo: the {figure} limit must be more than 0")
        targets[figure] = limit
    if not targets:
        raise SparkbenchError("--slo: no target given (e.g. ttft=500ms,tpot=50ms,e2e=30s)")
    return targets


def format_slo(targets: dict[str, float]) -> str:
    """The targets as `--slo` takes them, in ms."""
    return ",".join(f"{figure}={limit:g}ms" for figure, limit in targets.items())
