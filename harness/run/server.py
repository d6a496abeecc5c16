"""Launch an inference server as a subprocess and always take its whole process group down.

The server runs from its own environment's Python, on a free loopback port, with its output kept
in a log file. `ManagedServer` is a context manager: leaving it (normally, on an exception, on
Ctrl-C) terminates the process group, so no engine worker outlives the harness. If the server dies
while starting, the error carries the tail of its log.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from harness.engines.control import BoundedClient
from harness.errors import SparkbenchError

PR_SET_PDEATHSIG = 1  # linux/prctl.h
HEALTH_DEADLINE_S = 5.0  # one health probe while the server starts


class ServerStartError(SparkbenchError):
    """The server exited or never became healthy."""


class PortTaken(ServerStartError):
    """Another process bound the server's port between `free_port` choosing it and the server
    binding it (a server that cannot bind may hang instead of exiting: its log says so at once)."""


# What a server's log says when its port is taken: uvicorn's (SGLang, vLLM) and llama.cpp's words.
PORT_TAKEN_WORDS = (b"address already in use", b"couldn't bind http server socket")


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one server: argv (port and host included), environment, health path."""

    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    health_path: str = "/health"
    ready_timeout_s: float = 600.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the child: ask the kernel to SIGTERM it if the harness dies without cleaning up."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def log_tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return "(no log)"
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(text[-lines:])


class ManagedServer:
    """A server subprocess in its own process group, healthy on entry, gone on exit."""

    def __init__(self, spec: LaunchSpec, base_url: str, log_path: Path) -> None:
        self.spec = spec
        self.base_url = base_url
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self._log_start = 0  # where this launch's output begins in the (appended) log

    def __enter__(self) -> ManagedServer:
        self.ready()
        return self

    def ready(self) -> None:
        """Start (unless started earlier, in the background) and wait until healthy; a server that
        does not get there is stopped."""
        if self.process is None:
            self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                list(self.spec.argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **self.spec.env}, start_new_session=True, preexec_fn=_die_with_parent,
            )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.spec.ready_timeout_s
        url = self.base_url + self.spec.health_path
        with BoundedClient(deadline_s=HEALTH_DEADLINE_S) as http:
            while time.monotonic() < deadline:
                # Before the exit check: llama.cpp exits on a taken port, uvicorn may hang.
                if self.port_taken():
                    raise PortTaken(f"{self.base_url}: another process took the port while the server started; "
                                    f"log {self.log_path} ends:\n{log_tail(self.log_path)}")
                if self.process.poll() is not None:
                    raise ServerStartError(
                        f"server exited with code {self.process.returncode} while starting; "
                        f"log {self.log_path} ends:\n{log_tail(self.log_path)}")
                try:
                    if http.get(url).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet (or a probe past its deadline)
                time.sleep(1.0)
        raise ServerStartError(f"server not healthy at {url} after {self.spec.ready_timeout_s:.0f} s; "
                               f"log {self.log_path} ends:\n{log_tail(self.log_path)}")

    def port_taken(self) -> bool:
        """Whether this launch's log says its port was taken."""
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            said = log.read().lower()
        return any(words in said for words in PORT_TAKEN_WORDS)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the whole process group, then SIGKILL whatever is left after `grace_s`."""
        if self.process is None:
            return
        pgid = self.process.pid  # start_new_session made the child its group's leader
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(pgid, signal.SIGKILL)  # workers may outlive the leader: always sweep
        self.process.wait()
        self.process = None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
