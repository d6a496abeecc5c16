"""Host load from a made-up /proc: CPU of other processes, steal, the server found by its port."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.run import hostload
from harness.run.hostload import HostLoadMeter, process_tree, read_host_ticks, server_processes

PORT = 30123


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _process(proc, pid, pgrp, ticks, socket_inode=None, ppid=1, waited=0):
    # /proc/<pid>/stat: pid (comm) state ppid pgrp session ... utime(14th) stime(15th) cutime(16th)
    fields = ["S", str(ppid), str(pgrp), str(pgrp)] + ["0"] * 7 + [str(ticks), "0", str(waited)] + ["0"] * 9
    _write(proc / str(pid) / "stat", f"{pid} (python -m x) " + " ".join(fields) + "\n")
    (proc / str(pid) / "fd").mkdir(exist_ok=True)
    if socket_inode:
        link = proc / str(pid) / "fd" / "3"
        if not link.is_symlink():
            os.symlink(f"socket:[{socket_inode}]", link)


def _host(proc, busy, steal=0, idle=1000):
    _write(proc / "stat", f"cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 0 0 0 0\n")
    _write(proc / "loadavg", "1.50 1.00 0.50 2/100 42\n")


def _listening(proc, port, inode):
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    line = f"   0: 0100007F:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 {inode}\n"
    _write(proc / "net" / "tcp", header + line)
    _write(proc / "net" / "tcp6", header)


def test_host_ticks_split_busy_steal_and_total(tmp_path):
    _host(tmp_path, busy=300, steal=20, idle=680)
    ticks = read_host_ticks(tmp_path)
    assert (ticks.busy, ticks.steal, ticks.total) == (300, 20, 1000)
    assert read_host_ticks(tmp_path / "missing") is None


def test_the_server_is_the_process_tree_of_the_port_listener(tmp_path):
    _listening(tmp_path, PORT, inode=777)
    _process(tmp_path, 10, pgrp=9, ticks=0, socket_inode=777)
    _process(tmp_path, 11, pgrp=9, ticks=0, ppid=10)  # an engine worker
    _process(tmp_path, 13, pgrp=9, ticks=0, ppid=11)  # and its own worker
    _process(tmp_path, 12, pgrp=9, ticks=0, ppid=9)  # another server started by the same CI job
    assert server_processes(f"http://127.0.0.1:{PORT}", tmp_path) == {10, 11, 13}
    assert process_tree(12, tmp_path) == {12}
    assert server_processes("http://10.0.0.5:30000", tmp_path) == set()  # another host: not seen
    assert server_processes("http://127.0.0.1:9", tmp_path) == set()


def test_a_process_sharing_the_servers_group_is_other_load_and_client_workers_are_the_client(tmp_path, monkeypatch):
    """2 cpus, 100 ticks/s, 1 s: 200 ticks of capacity. Busy 160 ticks: the client 10 + a worker of
    the client 10 + a worker that ended and was waited for 10, the server 80, and a process in the
    server's process group (started by the same job, not by the server) 50: others 50 = 25%."""
    client = os.getpid()
    monkeypatch.setattr(hostload.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(hostload.os, "sysconf", lambda name: 100)
    clock = iter([0.0, 1.0])
    monkeypatch.setattr(hostload.time, "monotonic", lambda: next(clock))
    _listening(tmp_path, PORT, inode=5)
    _host(tmp_path, busy=1000, idle=0)
    _process(tmp_path, client, pgrp=client, ticks=100)
    _process(tmp_path, 20, pgrp=7, ticks=500, socket_inode=5)
    _process(tmp_path, 21, pgrp=7, ticks=0, ppid=7)
    meter = HostLoadMeter(f"http://127.0.0.1:{PORT}", tmp_path)
    meter.start()
    _host(tmp_path, busy=1160, idle=40)
    _process(tmp_path, client, pgrp=client, ticks=110, waited=10)
    _process(tmp_path, 30, pgrp=client, ticks=10, ppid=client)  # started during the run
    _process(tmp_path, 20, pgrp=7, ticks=580, socket_inode=5)
    _process(tmp_path, 21, pgrp=7, ticks=50, ppid=7)
    load = meter.stop()
    assert load.other_cpu_share == pytest.approx(0.25)
    assert (load.client_cpu_s, load.server_cpu_s) == (pytest.approx(0.3), pytest.approx(0.8))


def test_other_processes_share_excludes_client_and_server(tmp_path, monkeypatch):
    """2 cpus, 100 ticks/s, 1 s: 200 ticks of capacity; the host was busy 150 ticks of which the
    client took 20 and the server 80, so others took 50 ticks = 25%."""
    client = os.getpid()
    monkeypatch.setattr(hostload.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(hostload.os, "sysconf", lambda name: 100)
    clock = iter([0.0, 1.0])
    monkeypatch.setattr(hostload.time, "monotonic", lambda: next(clock))
    _listening(tmp_path, PORT, inode=5)
    _host(tmp_path, busy=1000, steal=0, idle=0)
    _process(tmp_path, client, pgrp=client, ticks=100)
    _process(tmp_path, 20, pgrp=20, ticks=500, socket_inode=5)
    meter = HostLoadMeter(f"http://127.0.0.1:{PORT}", tmp_path)
    meter.start()
    _host(tmp_path, busy=1150, steal=10, idle=40)
    _process(tmp_path, client, pgrp=client, ticks=120)
    _process(tmp_path, 20, pgrp=20, ticks=580)
    load = meter.stop()
    assert load.other_cpu_share == pytest.approx(0.25)
    assert load.steal_share == pytest.approx(10 / 200)
    assert (load.client_cpu_s, load.server_cpu_s, load.loadavg_1m) == (pytest.approx(0.2), pytest.approx(0.8), 1.5)
    assert load.server_on_host


def test_a_busy_process_on_the_real_host_is_seen_as_other_load(tmp_path):
    """On this machine's /proc: a process spinning for the whole span, started by a shell that has
    exited (so not the client's), shows as CPU of other processes. The share is compared with the
    spinner's own CPU time read from /proc, not with a wall-clock constant."""
    meter = HostLoadMeter("http://127.0.0.1:9")
    meter.start()
    spun = tmp_path / "spun"
    spin = f"import time\nend = time.time() + 1.5\nwhile time.time() < end: pass\nopen({str(spun)!r}, 'w')\ntime.sleep(60)"
    shell = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', spin],
                           capture_output=True, text=True, check=True)
    spinner = int(shell.stdout)
    try:
        while not spun.exists():
            time.sleep(0.05)
        fields = hostload._stat_fields(spinner, hostload.PROC)
        spun_s = sum(int(v) for v in fields[11:13]) / os.sysconf("SC_CLK_TCK")
        load = meter.stop()
    finally:
        os.kill(spinner, 9)
    assert load.other_cpu_share * load.wall_s * load.cpus >= 0.8 * spun_s > 0
