"""Foreign load: which processes count as foreign and the share they took, from made-up process
samples, from a made-up /proc, and on this host's own /proc with processes started here."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.nightly import foreign
from harness.nightly.config import NightlyConfig
from harness.nightly.foreign import (
    SETUP_PIDS_ENV,
    ForeignLoadMeter,
    ProcessSample,
    account,
    classify,
    read_processes,
    setup_pids_from,
)
from harness.nightly.settle import DEFAULT_BUSY_LIMITS, busy_reasons
from harness.records.entries import HostLoadEntry


def _samples(*rows: tuple[int, int, str, int, int]) -> dict[int, ProcessSample]:
    return {pid: ProcessSample(pid, ppid, name, start, ticks) for pid, ppid, name, start, ticks in rows}


# A CI host: init 1, kthreadd 2 and a kernel thread; the test suite 100 (the declared setup) with a
# pooled server 110 and its worker; the night 200 (a child of the suite) with a client worker; the
# measured server 300 (started by the suite) whose worker 301 starts during the span; a burst job 400
# with its worker 401; a pid 500 that ended and was reused by another process during the span.
BEFORE = _samples((1, 0, "init", 1, 50), (2, 0, "kthreadd", 1, 0), (3, 2, "ksoftirqd/0", 1, 5),
                  (100, 1, "pytest", 10, 1000), (110, 100, "llama-server", 20, 5000), (111, 110, "worker", 21, 100),
                  (200, 100, "python", 30, 10), (201, 200, "python", 31, 0),
                  (300, 100, "sglang", 40, 100),
                  (400, 1, "burst", 50, 0), (401, 400, "burst", 51, 0),
                  (500, 1, "old", 60, 900))
AFTER = _samples((1, 0, "init", 1, 50), (2, 0, "kthreadd", 1, 0), (3, 2, "ksoftirqd/0", 1, 7),
                 (100, 1, "pytest", 10, 1010), (110, 100, "llama-server", 20, 5100), (111, 110, "worker", 21, 150),
                 (200, 100, "python", 30, 30), (201, 200, "python", 31, 20),
                 (300, 100, "sglang", 40, 180), (301, 300, "scheduler", 70, 40),
                 (400, 1, "burst", 50, 30), (401, 400, "burst", 51, 25),
                 (500, 1, "new", 80, 6))
ROOTS = {"server": {300}, "harness": {200}, "setup": {100}}


def test_the_nearest_declared_ancestor_decides_and_the_rest_is_foreign():
    parents = {s.pid: s.ppid for s in AFTER.values()}
    assert {pid: classify(pid, parents, ROOTS) for pid in AFTER} == {
        1: "foreign", 2: "foreign", 3: "foreign", 100: "setup", 110: "setup", 111: "setup", 200: "harness",
        201: "harness", 300: "server", 301: "server", 400: "foreign", 401: "foreign", 500: "foreign"}
    assert classify(999, {999: 999}, ROOTS) == "foreign"  # a loop in a made-up table ends


def test_the_foreign_share_counts_only_foreign_ticks_and_the_unseen_remainder():
    """2 cpus, 100 ticks/s, 1 s: 200 ticks of capacity. Foreign: ksoftirqd 2, burst 30 + 25, the
    reused pid's new process 6 (its own ticks, not 6 - 900) = 63; the host was busy 400 ticks of
    which processes account for 379 (setup 160, harness 40, server 120, foreign 63): 21 unseen."""
    counted = account(BEFORE, AFTER, ROOTS, capacity_ticks=200, tick_s=0.01, host_busy_ticks=404)
    assert [(p.pid, p.name) for p in counted.foreign] == [(400, "burst"), (401, "burst"), (500, "new"),
                                                          (3, "ksoftirqd/0")]
    assert counted.foreign[0].share == pytest.approx(30 / 200) and counted.foreign[0].cpu_s == pytest.approx(0.3)
    assert counted.cpu_s == pytest.approx({"setup": 1.6, "harness": 0.4, "server": 1.2, "foreign": 0.63})
    assert counted.unseen_cpu_share == pytest.approx(21 / 200)
    assert counted.foreign_cpu_share == pytest.approx((63 + 21) / 200)
    recorded = counted.to_dict()
    assert recorded["foreign_processes"][0] == {"pid": 400, "name": "burst", "cpu_s": pytest.approx(0.3),
                                                "share": pytest.approx(0.15)}
    assert recorded["setup_cpu_s"] == pytest.approx(1.6)


def test_without_a_declared_setup_the_suites_servers_are_foreign_and_the_measured_one_is_not():
    counted = account(BEFORE, AFTER, {"server": {300}, "harness": {200}}, capacity_ticks=200, tick_s=0.01)
    assert {p.pid for p in counted.foreign} == {3, 100, 110, 111, 400, 401, 500}
    assert counted.unseen_cpu_share is None and counted.foreign_cpu_share == pytest.approx((63 + 160) / 200)


def test_an_embedded_server_under_the_harness_is_the_server():
    before = _samples((200, 1, "python", 30, 0), (210, 200, "llama-server", 31, 0))
    after = _samples((200, 1, "python", 30, 10), (210, 200, "llama-server", 31, 90))
    counted = account(before, after, {"server": {210}, "harness": {200}}, capacity_ticks=100, tick_s=0.01)
    assert counted.cpu_s == pytest.approx({"harness": 0.1, "server": 0.9}) and counted.foreign_cpu_share == 0


def _stat(proc: Path, pid: int, comm: str, ppid: int, ticks: int, start: int) -> None:
    # /proc/<pid>/stat: pid (comm) state ppid ... utime(14th) stime cutime cstime ... starttime(22nd)
    fields = ["S", str(ppid)] + ["0"] * 9 + [str(ticks), "1", "2", "3"] + ["0"] * 4 + [str(start), "0"]
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")


def test_processes_are_read_from_proc_names_with_spaces_and_parentheses_included(tmp_path):
    _stat(tmp_path, 7, "python -m x) (y", ppid=1, ticks=10, start=99)
    _stat(tmp_path, 8, "sh", ppid=7, ticks=0, start=100)
    (tmp_path / "self").mkdir()
    (tmp_path / "9").mkdir()  # ended while /proc was read: no stat
    assert read_processes(tmp_path) == {7: ProcessSample(7, 1, "python -m x) (y", 99, 16),
                                        8: ProcessSample(8, 7, "sh", 100, 6)}


def test_the_setup_is_declared_in_the_config_or_the_environment(monkeypatch):
    assert setup_pids_from({SETUP_PIDS_ENV: "12, 34 56"}) == [12, 34, 56] and setup_pids_from({}) == []
    with pytest.raises(ValueError, match="must list process ids"):
        setup_pids_from({SETUP_PIDS_ENV: "pytest"})
    monkeypatch.setenv(SETUP_PIDS_ENV, "34,12")
    assert NightlyConfig(setup_pids=[12, 7]).setup_pids == [7, 12, 34]


def _spinner(seconds: float, detached: bool, listen: int | None = None) -> subprocess.Popen | int:
    """A python process that spins for `seconds` (listening on `listen` if given), then sleeps until
    killed. Detached: started by a shell that exits at once, so it is no descendant of this process
    (its pid is returned); else a child of this process (its Popen)."""
    code = (f"import socket, time\ns = socket.socket()\nif {listen!r}:\n s.bind(('127.0.0.1', {listen!r}))\n s.listen()\n"
            f"end = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\ntime.sleep(600)")
    if not detached:
        return subprocess.Popen([sys.executable, "-c", code])
    shell = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', code],
                           capture_output=True, text=True, check=True)
    return int(shell.stdout)


def _cpu_s(pid: int) -> float:
    return read_processes()[pid].ticks / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _span(meter: ForeignLoadMeter, pids: list[int], spin_s: float) -> foreign.Accounting:
    """The meter's accounting over a span that ends once every spinner has spun `spin_s` of CPU
    within it (the meter has started already, so what each spun since it is read is inside)."""
    began = {pid: _cpu_s(pid) if pid in read_processes() else 0.0 for pid in pids}
    while not all(_cpu_s(pid) - began[pid] >= spin_s for pid in pids):
        time.sleep(0.05)
    return meter.stop()


def test_a_busy_foreign_process_is_named_and_makes_the_run_busy():
    """A spinner that is no descendant of this process, nor the server's, nor the setup's: counted as
    foreign with (at least) the CPU it spun within the span by its own count, and over a limit below
    its share the run is busy, the reason naming it."""
    meter = ForeignLoadMeter(None, [])
    meter.start()
    spinner = _spinner(30, detached=True)
    try:
        counted = _span(meter, [spinner], 1.0)
    finally:
        os.kill(spinner, signal.SIGKILL)
    named = {p.pid: p for p in counted.foreign}
    assert spinner in named and named[spinner].cpu_s >= 1.0
    load = HostLoadEntry(**counted.to_dict())
    limit = named[spinner].share / 2
    reasons = busy_reasons(load, {**DEFAULT_BUSY_LIMITS, "foreign_cpu_share": limit})
    assert reasons and reasons[0].startswith("foreign processes took") and f"{spinner} python" in reasons[0]


def test_the_servers_the_harnesss_and_the_setups_own_load_is_not_foreign():
    """Three spinners on this host: one this process started (the harness's), one listening on the
    measured server's port (detached: found by its port alone) and one declared as the setup. None is
    foreign; each class holds at least the CPU its spinner spun within the span."""
    port = _free_port()
    server = _spinner(30, detached=True, listen=port)
    setup = _spinner(30, detached=True)
    meter = ForeignLoadMeter(port, [setup])
    meter.start()
    own = _spinner(30, detached=False)
    try:
        counted = _span(meter, [server, setup, own.pid], 0.5)
    finally:
        for pid in (server, setup):
            os.kill(pid, signal.SIGKILL)
        own.kill()
        own.wait()
    assert not {server, setup, own.pid} & {p.pid for p in counted.foreign}
    assert all(counted.cpu_s[name] >= 0.5 for name in ("server", "setup", "harness")), counted.cpu_s


def test_the_record_keeps_every_foreign_process_from_1_percent_and_the_report_shows_the_busiest_eight():
    before = _samples(*((pid, 1, f"job{pid}", 5, 0) for pid in range(10, 21)))
    after = _samples(*((pid, 1, f"job{pid}", 5, 30 - pid) for pid in range(10, 21)))  # 20 ticks down to 10
    after[21] = ProcessSample(21, 1, "tiny", 6, 1)  # 1 tick of 200: below 1%
    counted = account(before, after, {"harness": {999}}, capacity_ticks=200, tick_s=0.01, host_busy_ticks=166)
    kept = counted.to_dict()["foreign_processes"]
    assert [p["pid"] for p in kept] == list(range(10, 21))
    shown = foreign.describe(HostLoadEntry(**counted.to_dict()))
    assert shown == ", ".join(f"{pid} job{pid} {(30 - pid) / 200:.0%}" for pid in range(10, 18))
