"""Open-loop arrivals: when each request is due, drawn (or read) before the run and stored with it.

A schedule is a list of send offsets in seconds from the start of the measured requests, sorted.
It is either drawn from a renewal process (gaps from a gamma distribution with shape `burstiness`
and mean `1 / request_rate`: burstiness 1 is a Poisson process, smaller is burstier, as in SGLang's
and vLLM's benchmark clients), or read from a file of offsets (trace replay). Either way it is
written into the run folder (`schedule.csv`) before the first request, so a run can be replayed.

The first request is due at offset 0; request i + 1 is due one drawn gap after request i. Offsets
are absolute: a late send never pushes the later ones back (unlike a client that sleeps a gap
after each send, which quietly lightens the load it was asked to offer).

A drawn schedule offers exactly the rate asked: its realised rate, `(n - 1) / (last - first)` (the
`offered_rate_rps` of the run), is the asked one. A plain draw strays from it by about
1 / sqrt(n) (200 Poisson arrivals asked at 29.6 req/s offered 26.2), so a run asked for one rate
was judged at another. The gaps are drawn as above and then scaled by one factor so that their sum
is (n - 1) / rate: the shape of the gaps (burstiness) is kept, and given the count, the arrival
times are those of the process (for a Poisson process, conditioned on its count, exactly so). A
run for a duration is drawn in stretches cut at its windows (warm-up, measured, cool-down): each
stretch holds round(rate x length) arrivals and offers the rate on its own, so the measured
requests' offered rate is the asked one too; each later stretch's arrivals are centred in it (the
gap across a cut is about one mean gap, not drawn).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from harness.run.load_options import LoadOptions
from harness.run.trace import OFFSET, Trace, read_trace

SCHEDULE_NAME = "schedule.csv"
SCHEDULE_COLUMN = OFFSET


def gamma_gaps(rate: float, burstiness: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` inter-arrival gaps, s: Gamma(shape = burstiness, scale = 1 / (rate * burstiness)),
    mean 1 / rate and coefficient of variation 1 / sqrt(burstiness) (exponential when burstiness = 1)."""
    return rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)


def exact_gaps(rate: float, burstiness: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` gamma gaps (`gamma_gaps`) scaled by one factor so that their mean is exactly 1 / rate."""
    gaps = gamma_gaps(rate, burstiness, count, rng)
    return gaps * (count / rate / gaps.sum()) if count and gaps.sum() > 0 else gaps


def _stretch(rate: float, burstiness: float, start: float, length: float, rng: np.random.Generator,
             first_at_start: bool) -> np.ndarray:
    """The arrivals of [start, start + length): round(rate x length) of them, offering `rate` exactly,
    the first at `start` (the schedule's first stretch) or their span centred in the stretch."""
    count = round(rate * length)
    if count <= 0:
        return np.zeros(0)
    offsets = np.concatenate([[0.0], np.cumsum(exact_gaps(rate, burstiness, count - 1, rng))])
    span = (count - 1) / rate  # at most length - 0.5 / rate: the arrivals fit in the stretch
    return start + offsets + (0.0 if first_at_start else (length - span) / 2)


def drawn_offsets(rate: float, burstiness: float, seed: int, count: int | None = None,
                  duration_s: float | None = None, cuts: tuple[float, ...] = ()) -> np.ndarray:
    """Send offsets, s, of `count` arrivals, or of the arrivals due before `duration_s` (about
    rate x duration), offering exactly `rate` (module docstring); a duration is drawn in stretches
    cut at `cuts` (the windows' edges), each offering `rate`. The same seed gives the same schedule."""
    if (count is None) == (duration_s is None):
        raise ValueError("give a request count or a duration")
    rng = np.random.default_rng(seed)
    if count is not None:
        return np.concatenate([[0.0], np.cumsum(exact_gaps(rate, burstiness, count - 1, rng))])[:count]
    edges = sorted({0.0, duration_s, *(c for c in cuts if 0.0 < c < duration_s)})
    stretches = [_stretch(rate, burstiness, a, b - a, rng, first_at_start=a == 0.0) for a, b in zip(edges, edges[1:])]
    joined = np.concatenate(stretches)
    return joined[joined < duration_s]


def read_schedule(path: Path) -> np.ndarray:
    """The offsets of a schedule file (`harness.run.trace.read_trace`: CSV with a column `offset_s`
    or one unnamed column, or JSONL), every row checked; anything else is a one-line error naming the line."""
    return read_trace(path).offsets


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
        return replayed_trace(options).offsets
    if options.duration_s is not None:
        cuts = (options.warmup_window_s, options.duration_s - options.cooldown_window_s)
        return drawn_offsets(options.request_rate, options.burstiness, options.arrival_seed,
                             duration_s=options.duration_s, cuts=cuts)
    return drawn_offsets(options.request_rate, options.burstiness, options.arrival_seed, count=count)


def replayed_trace(options: LoadOptions) -> Trace:
    """The `--schedule` file's rows, cut to `duration_s` when given (offsets never decrease, so the
    rows kept are the first ones)."""
    trace = read_trace(options.schedule)
    return trace if options.duration_s is None else trace.cut(int((trace.offsets < options.duration_s).sum()))


def windows(offsets: np.ndarray, options: LoadOptions) -> list[str]:
    """Each request's window by its due time: `warmup` (due before `warmup_window_s`), `cooldown` (due
    in the last `cooldown_window_s` of the run: of `duration_s`, else up to the schedule's last
    offset), else `measured`."""
    end = options.duration_s if options.duration_s is not None else (float(offsets[-1]) if len(offsets) else 0.0)
    warmup, cooldown = options.warmup_window_s, options.cooldown_window_s
    return ["warmup" if offset < warmup else "cooldown" if cooldown > 0 and offset >= end - cooldown
            else "measured" for offset in offsets]
