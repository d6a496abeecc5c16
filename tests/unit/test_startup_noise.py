"""Nothing before the one line: a compressed control-plane answer past its limit, Ctrl-C while the
command line is still importing, and a chat template that cannot render each end in one line
`sparkbench: ...` and their documented exit code, with no other line on stderr (no asyncio task
report, no traceback), the template before any server is asked."""

from __future__ import annotations

import signal
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


@pytest.mark.parametrize("module", IMPORTED)
def test_ctrl_c_while_the_command_line_imports_is_one_line(module):
    command = [sys.executable, "-X", "importtime", "-m", "harness.cli", "run", "gsm8k", "--server",
               "http://127.0.0.1:1"]
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
