"""How busy the host was while a run measured, read from /proc (Linux).

A comparison of two runs means something only if neither was starved of CPU by work that is not
being measured. For the span of a run this records the host's CPU time by state (/proc/stat), the
CPU time of the client (this process and its descendants, its `--processes` workers among them) and
of the server (whichever process listens on the server's port, when it runs on this host, and its
descendants: an engine's workers), and the load average (/proc/loadavg):

    other_cpu_share = (host busy ticks - client ticks - server ticks) / (wall seconds * CLK_TCK * cpus)
    steal_share     = steal ticks / all ticks                      (a VM's CPU taken by its hypervisor)

both fractions of the whole host's CPU capacity over the run. The server is the listener's process
tree, not its process group: a server started without a session of its own shares its group with
whatever started it (a CI job, a test runner and the other servers it started), and counting those
as the server would hide their load. Processes are found again at `stop()`, so a worker started
during the run is counted where it belongs. A figure that cannot be read here
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
    """pid -> user + system ticks, its own and those of its children that have ended and been
    waited for (a client's finished worker processes), for the pids still alive."""
    ticks = {}
    for pid in pids:
        fields = _stat_fields(pid, proc)
        if fields is not None:
            ticks[pid] = sum(int(v) for v in fields[11:15])
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


def parents(proc: Path = PROC) -> dict[int, int]:
    """pid -> parent pid, for every process visible now."""
    found = {}
    for pid in _pids(proc):
        fields = _stat_fields(pid, proc)
        if fields is not None:
            found[pid] = int(fields[1])
    return found


def process_tree(root: int, proc: Path = PROC) -> set[int]:
    """`root` and every process descended from it (an engine's workers, a client's worker processes)."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents(proc).items():
        children.setdefault(parent, []).append(pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


def server_processes(base_url: str, proc: Path = PROC) -> set[int]:
    """The server's processes (the listener's tree) when it listens on this host, else the empty set."""
    parts = urlsplit(base_url)
    if parts.hostname not in LOCAL_HOSTS or parts.port is None:
        return set()
    pid = listening_pid(parts.port, proc)
    return process_tree(pid, proc) if pid is not None else set()


def client_processes(server: set[int], proc: Path = PROC) -> set[int]:
    """This process and its descendants, less the server's (a server this process launched)."""
    return process_tree(os.getpid(), proc) - server


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

    def _ticks(self) -> tuple[dict[int, int], dict[int, int]]:
        """(client, server) ticks per process, each side found afresh from the process tree."""
        server = server_processes(self.base_url, self.proc)
        self.server_seen |= server
        return process_ticks(client_processes(server, self.proc), self.proc), process_ticks(server, self.proc)

    def start(self) -> None:
        self.server_seen: set[int] = set()
        self.began = time.monotonic()
        self.host0 = read_host_ticks(self.proc)
        self.client0, self.server0 = self._ticks()

    def stop(self) -> HostLoad:
        wall = time.monotonic() - self.began
        host1 = read_host_ticks(self.proc)
        client1, server1 = self._ticks()
        client = _span_ticks(self.client0, client1) if os.getpid() in client1 else None
        server = _span_ticks(self.server0, server1)
        other = steal = None
        if self.host0 and host1 and client is not None and wall > 0:
            busy = host1.busy - self.host0.busy - client - server
            other = max(0.0, busy * self.tick_s / (wall * self.cpus))
            all_ticks = host1.total - self.host0.total
            steal = (host1.steal - self.host0.steal) / all_ticks if all_ticks > 0 else None
        return HostLoad(wall_s=wall, cpus=self.cpus, loadavg_1m=_loadavg(self.proc), other_cpu_share=other,
                        steal_share=steal, client_cpu_s=None if client is None else client * self.tick_s,
                        server_cpu_s=server * self.tick_s if self.server_seen else None,
                        server_on_host=bool(self.server_seen))


def _span_ticks(before: dict[int, int], after: dict[int, int]) -> int:
    """Ticks spent over the span by the processes alive at its end (all of a newcomer's ticks: it
    started within the span). One that ended within it counts in its parent's, once waited for."""
    return sum(ticks - before.get(pid, 0) for pid, ticks in after.items())
