"""How busy the host was while a run measured, read from /proc (Linux).

A comparison of two runs means something only if neither was starved of CPU by work that is not
being measured. For the span of a run this records the host's CPU time by state (/proc/stat), the
CPU time of the client (this process) and of the server (the process group of whichever process
listens on the server's port, when it runs on this host), and the load average (/proc/loadavg):

    other_cpu_share = (host busy ticks - client ticks - server ticks) / (wall seconds * CLK_TCK * cpus)
    steal_share     = steal ticks / all ticks                      (a VM's CPU taken by its hypervisor)

both fractions of the whole host's CPU capacity over the run. A figure that cannot be read here
(another OS, a hidden /proc) is None, never a guess. A server on another host is not seen: its
host's load is not measured.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

PROC = Path("/proc")
LISTEN = "0A"  # TCP state code of a listening socket in /proc/net/tcp
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


@dataclass(frozen=True)
class HostTicks:
    """The host's CPU ticks since boot: busy (user, nice, system, irq, softirq), steal, all states."""

    busy: int
    steal: int
    total: int


@dataclass(frozen=True)
class HostLoad:
    """Load figures over one run (see the module docstring); None where unreadable."""

    wall_s: float
    cpus: int
    loadavg_1m: float | None
    other_cpu_share: float | None
    steal_share: float | None
    client_cpu_s: float | None
    server_cpu_s: float | None
    server_on_host: bool

    def to_dict(self) -> dict:
        return asdict(self)


def read_host_ticks(proc: Path = PROC) -> HostTicks | None:
    """The aggregate `cpu` line of /proc/stat (guest time is already inside user and nice)."""
    try:
        fields = [int(v) for v in (proc / "stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    user, nice, system, idle, iowait, irq, softirq = (fields + [0] * 7)[:7]
    steal = fields[7] if len(fields) > 7 else 0
    return HostTicks(busy=user + nice + system + irq + softirq, steal=steal,
                     total=user + nice + system + idle + iowait + irq + softirq + steal)


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def process_ticks(pids: set[int], proc: Path = PROC) -> dict[int, int]:
    """pid -> user + system ticks, for the pids still alive."""
    ticks = {}
    for pid in pids:
        fields = _stat_fields(pid, proc)
        if fields is not None:
            ticks[pid] = int(fields[11]) + int(fields[12])
    return ticks


def _listening_inodes(port: int, proc: Path) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == LISTEN:
                inodes.add(fields[9])
    return inodes


def _pids(proc: Path) -> list[int]:
    return [int(p.name) for p in proc.iterdir() if p.name.isdigit()]


def listening_pid(port: int, proc: Path = PROC) -> int | None:
    """The process holding a listening socket on `port` (None when not on this host or not visible)."""
    targets = {f"socket:[{inode}]" for inode in _listening_inodes(port, proc)}
    for pid in _pids(proc) if targets else []:
        try:
            fds = list((proc / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in targets:
                    return pid
            except OSError:
                continue
    return None


def process_group(pid: int, proc: Path = PROC) -> set[int]:
    """Every process in `pid`'s process group (an engine's workers share its group)."""
    own = _stat_fields(pid, proc)
    if own is None:
        return set()
    members = set()
    for other in _pids(proc):
        fields = _stat_fields(other, proc)
        if fields is not None and fields[2] == own[2]:
            members.add(other)
    return members


def server_processes(base_url: str, proc: Path = PROC) -> set[int]:
    """The server's processes when it listens on this host, else the empty set."""
    parts = urlsplit(base_url)
    if parts.hostname not in LOCAL_HOSTS or parts.port is None:
        return set()
    pid = listening_pid(parts.port, proc)
    return process_group(pid, proc) if pid is not None else set()


def _loadavg(proc: Path) -> float | None:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class HostLoadMeter:
    """Snapshot at `start()`, figures over the span at `stop()`."""

    def __init__(self, base_url: str, proc: Path = PROC) -> None:
        self.base_url, self.proc = base_url, proc
        self.cpus = os.cpu_count() or 1
        self.tick_s = 1.0 / os.sysconf("SC_CLK_TCK")

    def start(self) -> None:
        self.server = server_processes(self.base_url, self.proc)
        self.began = time.monotonic()
        self.host0 = read_host_ticks(self.proc)
        self.client0 = process_ticks({os.getpid()}, self.proc).get(os.getpid())
        self.server0 = process_ticks(self.server, self.proc)

    def stop(self) -> HostLoad:
        wall = time.monotonic() - self.began
        host1 = read_host_ticks(self.proc)
        client1 = process_ticks({os.getpid()}, self.proc).get(os.getpid())
        server1 = process_ticks(self.server, self.proc)
        client = None if self.client0 is None or client1 is None else client1 - self.client0
        server = sum(server1[p] - self.server0[p] for p in server1.keys() & self.server0.keys())
        other = steal = None
        if self.host0 and host1 and client is not None and wall > 0:
            busy = host1.busy - self.host0.busy - client - server
            other = max(0.0, busy * self.tick_s / (wall * self.cpus))
            all_ticks = host1.total - self.host0.total
            steal = (host1.steal - self.host0.steal) / all_ticks if all_ticks > 0 else None
        return HostLoad(wall_s=wall, cpus=self.cpus, loadavg_1m=_loadavg(self.proc), other_cpu_share=other,
                        steal_share=steal, client_cpu_s=None if client is None else client * self.tick_s,
                        server_cpu_s=server * self.tick_s if self.server else None,
                        server_on_host=bool(self.server))
