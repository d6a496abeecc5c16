"""`--profile-server`: the server's own profiler brackets the measured requests, never the warm-up, and
the manifest names the trace folder and files; an engine without a profiler is refused in one line."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.errors import SparkbenchError
from harness.records.rundir import RunDir
from harness.run.runner import RunAborted, RunOptions, execute
from harness.run.server_profile import NoServerProfiler, profiler_of
from tests.fakes.stream_server import threaded
from tests.unit.test_runner import ListWorkload, ScriptedBackend


class _Profiler(BaseHTTPRequestHandler):
    """SGLang's two routes: start notes the body, stop writes the trace where start said."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        server = self.server
        if self.path not in server.routes:
            self.send_response(404)
            self.end_headers()
            return
        server.calls.append((self.path, body, list(server.backend.sent)))
        if self.path == "/stop_profile" and server.started is not None:
            time.sleep(server.export_s)  # the server answers once its trace is written
            folder = Path(server.started["output_dir"])
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{server.started['profile_id']}-TP-0.trace.json.gz").write_bytes(b"trace")
        server.started = body if self.path == "/start_profile" else server.started
        self.send_response(200)
        self.end_headers()

    def do_GET(self) -> None:  # no /metrics: telemetry says "not exported"
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def profiling_server(backend: ScriptedBackend, routes=("/start_profile", "/stop_profile"),
                     export_s: float = 0.0) -> Iterator:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Profiler)
    server.backend, server.routes, server.calls, server.started = backend, routes, [], None
    server.export_s = export_s
    with threaded(server) as url:
        yield url, server.calls


def _profiled_run(tmp_path: Path, backend: ScriptedBackend, url: str, folder: Path) -> RunDir:
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "list"}})
    options = RunOptions(base_url=url, warmup=2, show_progress=False, telemetry=False, profile_server=folder)
    execute(backend, options, ListWorkload(3), run)
    return run


def test_the_profiler_brackets_exactly_the_measured_requests(tmp_path):
    backend = ScriptedBackend()
    with profiling_server(backend) as (url, calls):
        run = _profiled_run(tmp_path, backend, url, tmp_path / "traces")
    (start, body, sent_at_start), (stop, _, sent_at_stop) = calls
    assert (start, stop) == ("/start_profile", "/stop_profile")
    assert sent_at_start == ["w0", "w1"]  # after the warm-up, before the first measured request
    assert sent_at_stop == ["w0", "w1", "p0", "p1", "p2"]  # after the last one
    assert body == {"output_dir": str(tmp_path / "traces"), "profile_id": "run"}
    entry = run.record.server_profile
    assert entry.status == "recorded" and entry.folder == str(tmp_path / "traces")
    assert entry.files == ["run-TP-0.trace.json.gz"]
    assert (Path(entry.folder) / entry.files[0]).is_file()


def test_the_stop_request_waits_past_the_control_deadline_for_the_trace(tmp_path, monkeypatch):
    """Writing a trace takes the server minutes on a large run (62-77 s for 47 MB on the test bed),
    longer than any other control request is given."""
    monkeypatch.setattr("harness.engines.sse.CONTROL_DEADLINE_S", 0.2)
    backend = ScriptedBackend()
    with profiling_server(backend, export_s=1.0) as (url, _):
        run = _profiled_run(tmp_path, backend, url, tmp_path / "traces")
    assert run.record.server_profile.files == ["run-TP-0.trace.json.gz"]


def test_a_relative_folder_is_sent_absolute(tmp_path, monkeypatch):
    """The server resolves a relative folder against its own working directory, not the client's."""
    monkeypatch.chdir(tmp_path)
    backend = ScriptedBackend()
    with profiling_server(backend) as (url, calls):
        _profiled_run(tmp_path, backend, url, Path("traces"))
    assert calls[0][1]["output_dir"] == str(tmp_path / "traces")


def test_a_server_without_the_routes_fails_the_run_in_one_line(tmp_path):
    backend = ScriptedBackend()
    backend.engine = "vllm"
    with profiling_server(backend, routes=()) as (url, _), pytest.raises(RunAborted) as raised:
        _profiled_run(tmp_path, backend, url, tmp_path / "traces")
    assert ("(--profile-server: this vllm server does not serve /start_profile; it needs a server started "
            "with --profiler-config") in str(raised.value)
    assert "\n" not in str(raised.value) and backend.sent == ["w0", "w1"]  # nothing measured


def test_what_stopped_the_run_is_reported_not_a_failing_stop(tmp_path):
    """A run that fails mid-way still stops the profiler, but the stop's own failure (here: no
    stop route) must not hide why the run ended."""
    backend = ScriptedBackend({"p1": SparkbenchError("the disk went away")})
    with profiling_server(backend, routes=("/start_profile",)) as (url, calls), \
            pytest.raises(RunAborted, match=r"\(the disk went away\)"):
        _profiled_run(tmp_path, backend, url, tmp_path / "traces")
    assert [path for path, *_ in calls] == ["/start_profile"]


def test_an_engine_without_a_profiler_endpoint_is_refused_in_one_line():
    with pytest.raises(NoServerProfiler, match=r"^--profile-server: llamacpp has no profiler endpoint"):
        profiler_of("llamacpp")
    assert profiler_of("sglang").names_folder and not profiler_of("vllm").names_folder
