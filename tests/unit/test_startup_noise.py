"""Nothing before the one line: a compressed control-plane answer past its limit, Ctrl-C while the
command line is still importing, and a chat template that cannot render each end in one line
`sparkbench: ...` and their documented exit code, with no other line on stderr (no asyncio task
report, no traceback), the template before any server is asked."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.fakes.recording_server import recording
from tests.fakes.stream_server import Script

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`

INFLATED_BYTES = 64 * 2**20  # four times the control plane's limit (MAX_ANSWER_BYTES)


def _sparkbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=120)


def _gzip_bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(2**20)
    return b"".join(packer.compress(block) for _ in range(INFLATED_BYTES // len(block))) + packer.flush()


@contextmanager
def bombing() -> Iterator[str]:
    """A server whose every answer is a gzip body that inflates to INFLATED_BYTES; yield its URL."""
    body = _gzip_bomb()

    class Bomb(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-encoding", "gzip")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_POST = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Bomb)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("backend", ["auto", "openai"])
def test_a_gzip_bomb_on_the_control_plane_is_one_line(backend, tmp_path):
    with bombing() as url:
        done = _sparkbench("run", "gsm8k", "--limit", "2", "--no-progress", "--backend", backend, "--server", url,
                           "--results", str(tmp_path))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()  # was: two "Task was destroyed but it is pending!" lines first
    assert line.startswith("sparkbench: cannot reach") and "more than 16 MiB (inflated)" in line


# Modules the command line imports, early to late: Ctrl-C once each has been imported.
IMPORTED = ["harness", "typer", "harness.cli.app", "harness.cli.run", "harness.cli"]


@contextmanager
def silent_server() -> Iterator[str]:
    """A port that takes connections and never answers: a command asking it waits, so the Ctrl-C
    lands while the command is still under way, however late a busy host delivers it (a refused
    port let a fast command end first, and the signal then hit the interpreter's shutdown)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("module", IMPORTED)
def test_ctrl_c_while_the_command_line_imports_is_one_line(module):
    with silent_server() as url:
        _ctrl_c_after_import(module, url)


def _ctrl_c_after_import(module: str, url: str) -> None:
    command = [sys.executable, "-X", "importtime", "-m", "harness.cli", "run", "gsm8k", "--server", url]
    child = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    said = []
    for line in child.stderr:  # `-X importtime` writes a line as each import ends
        said.append(line)
        if line.rstrip().split("|")[-1].strip() == module:
            child.send_signal(signal.SIGINT)
            break
    said += child.stderr.read().splitlines(keepends=True)
    assert child.wait(timeout=60) == 1
    assert [line for line in said if not line.startswith("import time:")] == ["sparkbench: interrupted\n"]


def test_ctrl_c_inside_a_string_eval_is_one_line_and_exit_1():
    """A Ctrl-C that lands while typer evaluates a string annotation: CPython marks it unhandled
    although the command line catches it, and `python -m` then died by SIGINT (-2) after the line."""
    done = subprocess.run([sys.executable, "-m", "tests.fakes.interrupted_in_eval", "interrupt"],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (1, "sparkbench: interrupted\n")


TEMPLATES = {
    "not Jinja": ("{% for m in messages %}{{ m['content'] }}", "is not valid Jinja"),
    "fails at the second turn": ("{% for m in messages %}{% if m['role'] == 'assistant' %}{{ m.content.nope() }}"
                                 "{% endif %}{{ m['content'] }}{% endfor %}", "tried on a second turn"),
}


@pytest.mark.parametrize("case", sorted(TEMPLATES))
def test_a_chat_template_that_cannot_render_is_refused_before_any_server_is_asked(case, tmp_path):
    source, said = TEMPLATES[case]
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    (tokenizer / "chat_template.jinja").write_text(source, encoding="utf-8")
    results = tmp_path / "results"
    with recording(Script(api="sglang")) as (url, seen):
        done = _sparkbench("run", "specbench", "--per-task", "1", "--max-new-tokens", "4", "--no-progress",
                           "--tokenizer", str(tokenizer), "--server", url, "--results", str(results))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()  # was: exit 1, numpy warnings, a failed run and a --resume hint
    assert line.startswith("sparkbench: the chat template") and said in line
    assert seen == [] and not Path(results).exists()


def test_ctrl_c_while_a_command_waits_on_the_server_is_one_line():
    """Once the command is at work (it has connected to a server that never answers), Ctrl-C is the
    same one line and exit 1: typer turns it into a silent exit 130 unless the command line reads it."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(120)
        child = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "gsm8k", "--server",
                                  f"http://127.0.0.1:{listener.getsockname()[1]}"], stderr=subprocess.PIPE, text=True)
        connection, _ = listener.accept()  # the command is asking the server: it is past its imports
        with connection:
            child.send_signal(signal.SIGINT)
            said = child.stderr.read()
            assert child.wait(timeout=60) == 1
    assert said == "sparkbench: interrupted\n"
