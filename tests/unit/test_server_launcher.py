"""The launcher on stand-in processes (a tiny HTTP server): health wait, log tail, no orphans."""

from __future__ import annotations

import os
import sys
import time

import pytest

from harness.run.server import LaunchSpec, ManagedServer, PortTaken, ServerStartError, free_port

# A server that also forks a worker, as engines do; both must be gone after stop().
SERVER = """
import http.server, os, subprocess, sys
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[2], "w").write(str(worker.pid))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie awaiting its reaper has ended too
        return f.read().split()[2] == "Z"


def _all_gone(*pids: int, limit_s: float = 30.0) -> bool:
    """Whether every process in `pids` has ended within `limit_s`: a killed process ends when the
    host next runs it, which a loaded host may put off; one left alive sleeps for 600 s."""
    deadline = time.monotonic() + limit_s
    while not all(_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_healthy_server_and_its_workers_are_stopped(tmp_path):
    port, pidfile = free_port(), tmp_path / "worker.pid"
    spec = LaunchSpec(argv=[sys.executable, "-c", SERVER, str(port), str(pidfile)], ready_timeout_s=30)
    with ManagedServer(spec, f"http://127.0.0.1:{port}", tmp_path / "log") as server:
        leader = server.process.pid
        worker = int(pidfile.read_text())
        assert server.alive()
    assert _all_gone(leader, worker)


def test_stopped_on_exception_inside_the_block(tmp_path):
    port, pidfile = free_port(), tmp_path / "worker.pid"
    spec = LaunchSpec(argv=[sys.executable, "-c", SERVER, str(port), str(pidfile)], ready_timeout_s=30)
    with pytest.raises(RuntimeError):
        with ManagedServer(spec, f"http://127.0.0.1:{port}", tmp_path / "log"):
            raise RuntimeError("test failed")
    assert _all_gone(int(pidfile.read_text()))


def test_server_dying_at_start_reports_its_log_tail(tmp_path):
    spec = LaunchSpec(argv=[sys.executable, "-c", "print('cannot load model'); raise SystemExit(3)"])
    with pytest.raises(ServerStartError, match=r"exited with code 3(.|\n)*cannot load model"):
        with ManagedServer(spec, f"http://127.0.0.1:{free_port()}", tmp_path / "log"):
            pass


def test_never_healthy_times_out_and_is_killed(tmp_path):
    spec = LaunchSpec(argv=[sys.executable, "-c", "import time; print('loading'); time.sleep(600)"],
                      ready_timeout_s=2)
    server = ManagedServer(spec, f"http://127.0.0.1:{free_port()}", tmp_path / "log")
    with pytest.raises(ServerStartError, match="not healthy"):
        with server:
            pass
    assert server.process is None


def test_a_server_started_earlier_is_waited_for_not_started_again(tmp_path):
    port, pidfile = free_port(), tmp_path / "worker.pid"
    spec = LaunchSpec(argv=[sys.executable, "-c", SERVER, str(port), str(pidfile)], ready_timeout_s=30)
    server = ManagedServer(spec, f"http://127.0.0.1:{port}", tmp_path / "log")
    server.start()  # in the background, as the test session does while the unit tier runs
    leader = server.process.pid
    with server:
        assert server.process.pid == leader and server.alive()
        worker = int(pidfile.read_text())
    assert _all_gone(leader, worker)


def test_a_port_taken_while_starting_is_said_at_once_not_after_the_timeout(tmp_path):
    """uvicorn that cannot bind may hang in its shutdown: the log's words end the wait."""
    log = tmp_path / "log"
    log.write_text("an earlier launch: [Errno 98] address already in use\n")  # not this launch's words
    hangs = "import time; print('ERROR: [Errno 98] address already in use', flush=True); time.sleep(600)"
    server = ManagedServer(LaunchSpec(argv=[sys.executable, "-c", hangs], ready_timeout_s=600),
                           f"http://127.0.0.1:{free_port()}", log)
    started = time.monotonic()
    with pytest.raises(PortTaken, match="another process took the port"):
        with server:
            pass
    assert time.monotonic() - started < server.spec.ready_timeout_s / 10 and server.process is None


def test_a_server_that_exits_because_its_port_was_taken_is_a_port_clash(tmp_path):
    """llama.cpp exits at once: that is the clash too, so an embedded server is launched again."""
    exits = "import sys; print('E srv start: couldn\\'t bind HTTP server socket, port: 1', flush=True); sys.exit(1)"
    server = ManagedServer(LaunchSpec(argv=[sys.executable, "-c", exits]), f"http://127.0.0.1:{free_port()}",
                           tmp_path / "log")
    server.start()
    server.process.wait()
    with pytest.raises(PortTaken, match="another process took the port"):
        server.wait_ready()


def test_a_launch_whose_log_starts_clean_is_not_taken_for_a_port_clash(tmp_path):
    log = tmp_path / "log"
    log.write_text("an earlier launch: [Errno 98] address already in use\n")
    spec = LaunchSpec(argv=[sys.executable, "-c", "import time; time.sleep(600)"], ready_timeout_s=2)
    with pytest.raises(ServerStartError, match="not healthy"):
        with ManagedServer(spec, f"http://127.0.0.1:{free_port()}", log):
            pass
