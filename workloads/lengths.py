"""Length distributions of the synthetic workload: `--input-len-dist` and `--output-len-dist`.

A spec is `KIND:PARAMETERS`, the names AIPerf and genai-bench use for the same shapes:

    fixed:N              every request N tokens (genai-bench `D(N,...)`)
    uniform:MIN,MAX      integers MIN..MAX, both included (genai-bench `U(min,max)`; SGLang's
                         random dataset with a range ratio is uniform:ratio*N,N)
    normal:MEAN,SD       rounded (genai-bench `N(mean,sd)`)
    lognormal:MEAN,SD    rounded; MEAN and SD are those of the lengths, not of their logarithm
    empirical:FILE[#COL] lengths drawn with replacement from column COL of a JSONL, JSON, CSV or
                         Parquet file (read as the dataset workload reads it; default column
                         `input_tokens` or `output_tokens`)

Drawn lengths are rounded and clipped to [the least the workload takes, MAX_CONTEXT_TOKENS]; the
draw is seeded, so the same spec and seed give the same lengths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SparkbenchError
from workloads import MAX_CONTEXT_TOKENS

KINDS = {"fixed": 1, "uniform": 2, "normal": 2, "lognormal": 2}  # kind: how many numbers it takes
EMPIRICAL = "empirical"


@dataclass(frozen=True)
class LengthDist:
    """A parsed length spec: its kind, its numbers (none for `empirical`) and, for `empirical`, the
    file and the column that holds the lengths."""

    kind: str
    numbers: tuple[float, ...] = ()
    path: Path | None = None
    column: str | None = None

    def __str__(self) -> str:
        if self.kind == EMPIRICAL:
            return f"{EMPIRICAL}:{self.path}#{self.column}"
        return f"{self.kind}:{','.join(str(int(n)) if n == int(n) else repr(n) for n in self.numbers)}"


def parse_length_dist(spec: str, default_column: str) -> LengthDist:
    """`spec` parsed and checked (the file of an empirical one exists); a ValueError says what is wrong."""
    kind, _, rest = spec.strip().partition(":")
    if kind == EMPIRICAL:
        where, _, column = rest.partition("#")
        path = Path(where).expanduser().resolve()
        if not where or not path.is_file():
            raise ValueError(f"{spec!r}: {where or 'the file'} is not a file")
        return LengthDist(EMPIRICAL, path=path, column=column or default_column)
    if kind not in KINDS:
        raise ValueError(f"{spec!r}: the kind is one of {', '.join([*KINDS, EMPIRICAL])} (e.g. uniform:1000,3000)")
    try:
        numbers = tuple(float(part) for part in rest.split(","))
    except ValueError as exc:
        raise ValueError(f"{spec!r}: {kind} takes {KINDS[kind]} number(s) after the colon") from exc
    if len(numbers) != KINDS[kind] or not all(math.isfinite(number) and number >= 0 for number in numbers):
        raise ValueError(f"{spec!r}: {kind} takes {KINDS[kind]} finite number(s) >= 0 after the colon")
    if kind == "uniform" and numbers[0] > numbers[1]:
        raise ValueError(f"{spec!r}: the minimum is larger than the maximum")
    if kind == "lognormal" and numbers[0] == 0:
        raise ValueError(f"{spec!r}: a log-normal length needs a mean above 0")
    return LengthDist(kind, numbers)


def draw_lengths(dist: LengthDist, count: int, seed: list[int], least: int) -> list[int]:
    """`count` lengths drawn from `dist` with `seed`, rounded and clipped to [least, MAX_CONTEXT_TOKENS]."""
    import numpy as np  # imported when lengths are drawn: the help must not load numpy

    rng = np.random.default_rng(seed)
    a, b = (dist.numbers + (0.0, 0.0))[:2]
    if dist.kind == "fixed":
        values = np.full(count, a)
    elif dist.kind == "uniform":
        values = rng.integers(round(a), round(b), endpoint=True, size=count)
    elif dist.kind == "normal":
        values = rng.normal(a, b, size=count)
    elif dist.kind == "lognormal":
        sigma2 = math.log1p((b / a) ** 2)  # the log's variance and mean that give the lengths mean a, sd b
        values = rng.lognormal(math.log(a) - sigma2 / 2, math.sqrt(sigma2), size=count)
    else:
        values = rng.choice(empirical_lengths(dist), size=count, replace=True)
    return [int(value) for value in np.clip(np.rint(values), least, MAX_CONTEXT_TOKENS)]


def empirical_lengths(dist: LengthDist) -> list[int]:
    """The lengths in the file's column; one line naming the row when one is not a whole number >= 1."""
    from workloads.dataset_source import read_source

    rows = read_source(str(dist.path), "train").rows
    if not rows:
        raise SparkbenchError(f"length distribution {dist}: the file has no rows")
    lengths = [_whole(row.get(dist.column)) for row in rows]
    for number, (row, length) in enumerate(zip(rows, lengths)):
        if length is None:
            raise SparkbenchError(f"length distribution {dist}: row {number}: {dist.column} is "
                                  f"{row.get(dist.column)!r}, not a whole number of tokens >= 1")
    return lengths


def _whole(value: object) -> int | None:
    """`value` as a whole number >= 1 (a CSV column of them is read as text); None if it is none."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number == int(number) and number >= 1 else None
