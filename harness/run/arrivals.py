"""Open-loop arrivals: when each request is due, drawn (or read) before the run and stored with it.

A schedule is a list of send offsets in seconds from the start of the measured requests, sorted.
It is either drawn from a renewal process (gaps from a gamma distribution with shape `burstiness`
and mean `1 / request_rate`: burstiness 1 is a Poisson process, smaller is burstier, as in SGLang's
and vLLM's benchmark clients), or read from a file of offsets (trace replay). Either way it is
written into the run folder (`schedule.csv`) before the first request, so a run can be replayed.

The first request is due at offset 0; request i + 1 is due one drawn gap after request i. Offsets
are absolute: a late send never pushes the later ones back (unlike a client that sleeps a gap
after each send, which quietly lightens the load it was asked to offer).
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator, Field, field_validator, model_validator

from harness.config import PathText, StrictModel
from harness.errors import SparkbenchError
from harness.metrics.slo import format_slo, parse_slo

SECONDS = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|h|)\s*$")
SECONDS_PER_UNIT = {"ms": 0.001, "s": 1.0, "": 1.0, "m": 60.0, "h": 3600.0}
SCHEDULE_NAME = "schedule.csv"
SCHEDULE_COLUMN = "offset_s"
DRAW_BLOCK = 4096  # gaps drawn at a time while filling a duration
# Seconds, given as a number or as text with a unit; `str` first so that the command line takes text.
Seconds = Annotated[str | float, BeforeValidator(lambda value: seconds(value)), Field(ge=0.0)]


class LoadOptions(StrictModel):
    """How requests arrive. No rate and no schedule: a closed loop (a fixed number in flight)."""

    request_rate: float | None = Field(None, gt=0.0, description="Open loop: mean arrival rate, requests/s "
                                       "(Poisson unless --burstiness).")
    burstiness: float = Field(1.0, gt=0.0, description="Open loop: shape of the gamma inter-arrival gaps: "
                              "1 = Poisson, smaller = burstier (SGLang's and vLLM's --burstiness).")
    arrival_seed: int = Field(0, description="Open loop: seed of the drawn arrival schedule.")
    schedule: PathText | None = Field(None, description="Open loop: replay these send offsets (CSV or JSONL of "
                                      "seconds from the start, column/key offset_s) instead of drawing them.")
    max_concurrency: int | None = Field(None, ge=1, description="Open loop: at most this many requests in "
                                        "flight; a due request waits (and its lag is recorded).")
    duration_s: Seconds | None = Field(None, description="Open loop: send for this long (e.g. 90s, 10m) instead "
                                       "of a prompt count; prompts are drawn from the workload as needed.")
    warmup_window_s: Seconds = Field(0.0, description="Open loop: requests due in this first stretch (e.g. "
                                     "30s) are marked warm-up and left out of the summary.")
    cooldown_window_s: Seconds = Field(0.0, description="Open loop: requests due in this last stretch of the "
                                       "schedule are marked cool-down and left out of the summary.")
    slo: str | None = Field(None, description="Targets each request must meet, any of ttft, tpot, e2e "
                            "(e.g. ttft=500ms,tpot=50ms,e2e=30s): SLO attainment and goodput.")

    @field_validator("slo")
    @classmethod
    def _targets(cls, text: str | None) -> str | None:
        return None if text is None else format_slo(parse_slo(text))  # its error passes through unchanged

    @model_validator(mode="after")
    def _consistent(self) -> LoadOptions:
        if self.request_rate is not None and self.schedule is not None:
            raise ValueError("give --request-rate or --schedule, not both")
        if not self.open_loop and (self.duration_s is not None or self.max_concurrency is not None):
            raise ValueError("--duration and --max-concurrency need --request-rate or --schedule")
        if self.duration_s is not None and self.warmup_window_s + self.cooldown_window_s >= self.duration_s:
            raise ValueError("the warm-up and cool-down windows leave nothing of --duration to measure")
        return self

    @property
    def open_loop(self) -> bool:
        return self.request_rate is not None or self.schedule is not None

    @property
    def slo_targets(self) -> dict[str, float]:
        """{figure: limit in ms}; empty without --slo."""
        return parse_slo(self.slo) if self.slo else {}


def seconds(value: object) -> object:
    """A length of time as seconds: a number, or text with a unit (`90s`, `10m`, `1.5h`, `500ms`;
    none = s). Anything else is left for validation to refuse."""
    if isinstance(value, str):
        match = SECONDS.match(value.lower())
        if match is None:
            raise ValueError(f"{value!r} is not a length of time (e.g. 90s, 10m, 1.5h)")
        return float(match.group(1)) * SECONDS_PER_UNIT[match.group(2)]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def gamma_gaps(rate: float, burstiness: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` inter-arrival gaps, s: Gamma(shape = burstiness, scale = 1 / (rate * burstiness)),
    mean 1 / rate and coefficient of variation 1 / sqrt(burstiness) (exponential when burstiness = 1)."""
    return rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)


def drawn_offsets(rate: float, burstiness: float, seed: int, count: int | None = None,
                  duration_s: float | None = None) -> np.ndarray:
    """Send offsets, s, of `count` arrivals, or of every arrival due before `duration_s`: 0, then the
    running sum of the drawn gaps. The same seed gives the same schedule."""
    if (count is None) == (duration_s is None):
        raise ValueError("give a request count or a duration")
    rng = np.random.default_rng(seed)
    if count is not None:
        return np.concatenate([[0.0], np.cumsum(gamma_gaps(rate, burstiness, count - 1, rng))])[:count]
    offsets, last = [np.zeros(1)], 0.0
    while last < duration_s:
        block = last + np.cumsum(gamma_gaps(rate, burstiness, DRAW_BLOCK, rng))
        offsets.append(block)
        last = float(block[-1])
    joined = np.concatenate(offsets)
    return joined[joined < duration_s]


def read_schedule(path: Path) -> np.ndarray:
    """The offsets of a schedule file: CSV (a column `offset_s`, or one unnamed column) or JSONL (one
    number or one object with `offset_s` per line). Offsets must be finite, >= 0 and non-decreasing;
    anything else is a one-line error naming the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SparkbenchError(f"--schedule {path} does not exist") from exc
    except UnicodeDecodeError as exc:
        raise SparkbenchError(f"--schedule {path}: not UTF-8 text") from exc
    lines = _jsonl_values(path, text) if path.suffix in (".jsonl", ".json") else _csv_values(path, text)
    if not lines:
        raise SparkbenchError(f"--schedule {path}: no offsets")
    offsets = np.array([value for _, value in lines], dtype=float)
    for (number, value), previous in zip(lines, [0.0, *offsets[:-1]]):
        if not math.isfinite(value) or value < 0:
            raise SparkbenchError(f"--schedule {path}: line {number}: offset {value!r} is not a finite number >= 0")
        if value < previous:
            raise SparkbenchError(f"--schedule {path}: line {number}: offset {value:g} comes before the one above "
                                  f"it ({previous:g}); offsets must not decrease")
    return offsets


def _number(path: Path, number: int, raw: object) -> tuple[int, float]:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise SparkbenchError(f"--schedule {path}: line {number}: {raw!r} is not a number of seconds")
    try:
        return number, float(raw)
    except ValueError as exc:
        raise SparkbenchError(f"--schedule {path}: line {number}: {raw!r} is not a number of seconds") from exc


def _csv_values(path: Path, text: str) -> list[tuple[int, float]]:
    rows = [(number, row) for number, row in enumerate(csv.reader(text.splitlines()), start=1) if row]
    if not rows:
        return []
    header = [cell.strip() for cell in rows[0][1]]
    if SCHEDULE_COLUMN in header:
        column, rows = header.index(SCHEDULE_COLUMN), rows[1:]
    elif len(header) == 1:
        column = 0
    else:
        raise SparkbenchError(f"--schedule {path}: a CSV with several columns needs one named {SCHEDULE_COLUMN}")
    return [_number(path, number, row[column].strip() if column < len(row) else "") for number, row in rows]


def _jsonl_values(path: Path, text: str) -> list[tuple[int, float]]:
    values = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SparkbenchError(f"--schedule {path}: line {number} is not valid JSON") from exc
        values.append(_number(path, number, raw.get(SCHEDULE_COLUMN) if isinstance(raw, dict) else raw))
    return values


def write_schedule(run_dir: Path, offsets: np.ndarray) -> Path:
    """`schedule.csv` in the run folder: `seq, offset_s`, one row per request, in send order."""
    out = Path(run_dir) / SCHEDULE_NAME
    with out.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["seq", SCHEDULE_COLUMN])
        writer.writerows((seq, repr(float(offset))) for seq, offset in enumerate(offsets))
    return out


def schedule_of(options: LoadOptions, count: int | None) -> np.ndarray:
    """The run's offsets: the replayed file (cut to `duration_s` when given), or drawn for `count`
    requests or for `duration_s`."""
    if options.schedule is not None:
        offsets = read_schedule(options.schedule)
        return offsets if options.duration_s is None else offsets[offsets < options.duration_s]
    if options.duration_s is not None:
        return drawn_offsets(options.request_rate, options.burstiness, options.arrival_seed,
                             duration_s=options.duration_s)
    return drawn_offsets(options.request_rate, options.burstiness, options.arrival_seed, count=count)


def windows(offsets: np.ndarray, options: LoadOptions) -> list[str]:
    """Each request's window by its due time: `warmup` (due before `warmup_window_s`), `cooldown` (due
    in the last `cooldown_window_s` of the run: of `duration_s`, else up to the schedule's last
    offset), else `measured`."""
    end = options.duration_s if options.duration_s is not None else (float(offsets[-1]) if len(offsets) else 0.0)
    warmup, cooldown = options.warmup_window_s, options.cooldown_window_s
    return ["warmup" if offset < warmup else "cooldown" if cooldown > 0 and offset >= end - cooldown
            else "measured" for offset in offsets]
