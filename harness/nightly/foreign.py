"""Foreign load: the CPU that processes other than the measured setup took while a night measured.

A night runs beside the server it measures, and on CI beside the servers the test suite started:
their load is the setup, not a disturbance. Every process visible in /proc is sampled when a run
starts and when it ends (user + system ticks, its own and those of its children it has waited for)
and sorted by its ancestry into

- `server`:  the tree of the process listening on the measured server's port (on this host; an
             embedded server the harness started is found the same way), workers included;
- `harness`: this process and its descendants (the client, its `--processes` workers);
- `setup`:   the trees of the pids declared as the setup (`NightlyConfig.setup_pids`, or the
             environment variable SPARKBENCH_NIGHTLY_SETUP_PIDS: a test suite's own process, whose
             tree holds the servers it started and the other jobs of the suite);
- `foreign`: every other process, kernel threads included.

    foreign_cpu_share = (foreign processes' ticks + unseen ticks) / (wall seconds * CLK_TCK * cpus)

where unseen ticks are the host's busy ticks (/proc/stat) that no visible process accounts for:
interrupts, and processes this /proc cannot see (another container on the same host). A process
whose pid was reused during the span counts as a new one (its start time differs). A process that
started and ended within the span counts in its parent's ticks once waited for, in its parent's
class. The night's report names the foreign processes with their share (`describe`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.records.entries import HostLoadEntry
from harness.run.hostload import PROC, listening_pid, read_host_ticks

SETUP_PIDS_ENV = "SPARKBENCH_NIGHTLY_SETUP_PIDS"
KEPT_SHARE = 0.01  # a foreign process is kept in the run's record from 1% of the host's CPU
SHOWN = 8  # foreign processes named in a report, the busiest first


@dataclass(frozen=True)
class ProcessSample:
    """One process at one instant: its parent, name, start time (ticks after boot) and CPU ticks
    (user + system, its own and its waited-for children's)."""

    pid: int
    ppid: int
    name: str
    start: int
    ticks: int


@dataclass(frozen=True)
class ForeignProcess:
    pid: int
    name: str
    cpu_s: float
    share: float  # of the host's CPU capacity over the span


@dataclass(frozen=True)
class Accounting:
    """Who took the CPU over one span (module docstring); shares are of the host's capacity."""

    foreign: tuple[ForeignProcess, ...]
    foreign_cpu_share: float
    unseen_cpu_share: float | None
    cpu_s: Mapping[str, float]  # class -> CPU seconds: server, harness, setup, foreign

    def to_dict(self) -> dict:
        """The figures a run's `host_load` keeps (each foreign process from `KEPT_SHARE` named)."""
        return {"foreign_cpu_share": self.foreign_cpu_share, "unseen_cpu_share": self.unseen_cpu_share,
                "setup_cpu_s": self.cpu_s.get("setup", 0.0),
                "foreign_processes": [{"pid": p.pid, "name": p.name, "cpu_s": p.cpu_s, "share": p.share}
                                      for p in self.foreign if p.share >= KEPT_SHARE]}


def setup_pids_from(environ: Mapping[str, str]) -> list[int]:
    """The pids SPARKBENCH_NIGHTLY_SETUP_PIDS declares (comma- or space-separated; none when unset)."""
    text = environ.get(SETUP_PIDS_ENV, "").replace(",", " ")
    try:
        return [int(word) for word in text.split()]
    except ValueError:
        raise ValueError(f"{SETUP_PIDS_ENV} must list process ids, got {text!r}") from None


def read_processes(proc: Path = PROC) -> dict[int, ProcessSample]:
    """Every process visible in `proc` now (a process that ends while it is read is left out)."""
    found = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
            fields = text[text.rindex(")") + 2:].split()
            found[int(entry.name)] = ProcessSample(pid=int(entry.name), ppid=int(fields[1]),
                                                   name=text[text.index("(") + 1:text.rindex(")")],
                                                   start=int(fields[19]), ticks=sum(int(v) for v in fields[11:15]))
        except (OSError, ValueError, IndexError):
            continue
    return found


def classify(pid: int, parents: Mapping[int, int], roots: Mapping[str, set[int]]) -> str:
    """The class of `pid`: that of its nearest ancestor (itself included) that is a root of
    `roots` (class -> root pids, checked in order at each step), else `foreign`."""
    seen = set()
    while pid not in seen:
        for name, pids in roots.items():
            if pid in pids:
                return name
        seen.add(pid)
        pid = parents.get(pid, pid)
    return "foreign"


def span_ticks(before: Mapping[int, ProcessSample], after: Mapping[int, ProcessSample]) -> dict[int, int]:
    """pid -> ticks spent over the span by each process alive at its end (a new process, or a reused
    pid, all its ticks: it started within the span)."""
    spent = {}
    for pid, now in after.items():
        then = before.get(pid)
        spent[pid] = now.ticks - then.ticks if then is not None and then.start == now.start else now.ticks
    return spent


def account(before: Mapping[int, ProcessSample], after: Mapping[int, ProcessSample],
            roots: Mapping[str, set[int]], capacity_ticks: float, tick_s: float,
            host_busy_ticks: int | None = None) -> Accounting:
    """Sort the span's ticks by class (`classify`; `roots`: server, harness, setup root pids) and
    take the foreign share of `capacity_ticks` (wall * CLK_TCK * cpus). `host_busy_ticks`: the
    host's busy ticks over the span, whose part no process accounts for is foreign too (None: not
    read, and no unseen share)."""
    parents = {s.pid: s.ppid for s in before.values()} | {s.pid: s.ppid for s in after.values()}
    spent = span_ticks(before, after)
    by_class: dict[str, int] = {}
    foreign = []
    for pid, ticks in spent.items():
        kind = classify(pid, parents, roots)
        by_class[kind] = by_class.get(kind, 0) + ticks
        if kind == "foreign" and ticks > 0:
            foreign.append(ForeignProcess(pid, after[pid].name, ticks * tick_s, ticks / capacity_ticks))
    unseen = None if host_busy_ticks is None else max(0, host_busy_ticks - sum(spent.values()))
    share = (by_class.get("foreign", 0) + (unseen or 0)) / capacity_ticks
    return Accounting(foreign=tuple(sorted(foreign, key=lambda p: -p.share)), foreign_cpu_share=share,
                      unseen_cpu_share=None if unseen is None else unseen / capacity_ticks,
                      cpu_s={name: ticks * tick_s for name, ticks in by_class.items()})


def describe(host_load: HostLoadEntry | None) -> str:
    """The busiest `SHOWN` foreign processes a run's `host_load` names, with their shares, and the
    unseen share ('' when none is recorded)."""
    if host_load is None:
        return ""
    processes = getattr(host_load, "foreign_processes", None) or []
    parts = [f"{p['pid']} {p['name']} {p['share']:.0%}" for p in processes[:SHOWN] if p["share"] >= 0.005]
    unseen = host_load.figure("unseen_cpu_share")
    if unseen is not None and unseen >= 0.005:
        parts.append(f"unseen {unseen:.0%}")
    return ", ".join(parts)


class ForeignLoadMeter:
    """Samples at `start()`, accounts the span at `stop()` (module docstring). `server_port`: the
    measured server's port when it listens on this host, else None."""

    def __init__(self, server_port: int | None, setup_pids: Iterable[int], proc: Path = PROC) -> None:
        self.server_port, self.setup, self.proc = server_port, set(setup_pids), proc
        self.cpus = os.cpu_count() or 1
        self.tick_s = 1.0 / os.sysconf("SC_CLK_TCK")

    def _server_roots(self) -> set[int]:
        pid = listening_pid(self.server_port, self.proc) if self.server_port is not None else None
        return {pid} if pid is not None else set()

    def start(self) -> None:
        self.began = time.monotonic()
        self.host0 = read_host_ticks(self.proc)
        self.server0 = self._server_roots()
        self.before = read_processes(self.proc)

    def stop(self) -> Accounting | None:
        """The span's accounting, None when it cannot be made (no /proc, no time passed)."""
        wall = time.monotonic() - self.began
        after = read_processes(self.proc)
        host1 = read_host_ticks(self.proc)
        roots = {"server": self.server0 | self._server_roots(), "harness": {os.getpid()}, "setup": self.setup}
        if wall <= 0 or os.getpid() not in after:
            return None
        busy = host1.busy - self.host0.busy if host1 and self.host0 else None
        return account(self.before, after, roots, wall * self.cpus / self.tick_s, self.tick_s, busy)
