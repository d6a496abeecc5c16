"""Real servers for the end-to-end tier, started once per test session.

The session's shared servers (one per profile, `SESSION_PROFILES`) that the collected tests use are
started in the background as soon as collection ends: the unit tier runs first (pyproject.toml's
testpaths), so their start-up, about a minute each, overlaps it. Set SPARKBENCH_SGLANG_URL (with
SPARKBENCH_MODEL_DIR) to reuse a running server while developing; CI leaves them unset, so the
session starts and stops its own servers.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.errors import SparkbenchError
from harness.run.embedded import embedded_launch, embedded_server
from harness.run.server import ManagedServer, PortTaken
from harness.testbed.envs import ensure_model

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    model_dir: Path


@contextmanager
def launched(profile: str, label: str | None = None, model_dir: Path | None = None) -> Iterator[LiveServer]:
    """A server of `profile` (a name or a YAML path) for one module's tests, stopped when they are done
    (`model_dir`: another model than the tiny test-bed model)."""
    with embedded_server(profile, model_dir=model_dir, log_name=f"e2e-{label or profile}") as server:
        yield LiveServer(server.base_url, server.model_dir)


# Session fixture -> the profile it serves; each is started once, early (see the module's docstring).
SESSION_PROFILES = {"sglang_server": "cpu-testbed", "vllm_server": "vllm-cpu", "vllm_ngram_server": "vllm-cpu-ngram"}
STARTED_EARLY = pytest.StashKey[dict[str, tuple[ManagedServer, LiveServer]]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start, without waiting, the session servers that the collected tests will use."""
    if session.config.option.collectonly:
        return
    wanted = {name for item in session.items for name in item.fixturenames if name in SESSION_PROFILES}
    if os.environ.get("SPARKBENCH_SGLANG_URL"):
        wanted.discard("sglang_server")
    started = session.config.stash.setdefault(STARTED_EARLY, {})
    for name in sorted(wanted):
        profile = SESSION_PROFILES[name]
        try:
            managed, server = embedded_launch(profile, log_name=f"e2e-{profile}")
        except SparkbenchError:
            continue  # its fixture launches it again and reports the error where it is needed
        managed.start()
        started[name] = (managed, LiveServer(server.base_url, server.model_dir))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the early servers that no test took (a session ended early, by -x or Ctrl-C)."""
    for managed, _ in session.config.stash.get(STARTED_EARLY, {}).values():
        managed.stop()


@contextmanager
def session_server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The server of the requesting session fixture: the one started early, else (also when another
    process took its port while it started) one started now."""
    early = request.config.stash.get(STARTED_EARLY, {}).pop(request.fixturename, None)
    if early is not None:
        managed, server = early
        try:
            managed.ready()
        except PortTaken:
            pass  # stopped: launched afresh below
        else:
            with managed:
                yield server
            return
    with launched(SESSION_PROFILES[request.fixturename]) as server:
        yield server


@contextmanager
def launched_at_once(*launches: tuple[str, str, Path | None]) -> Iterator[list[LiveServer]]:
    """Servers of (profile, label, model_dir) started together, so their start-ups overlap; all are
    healthy on entry and stopped on exit."""
    with ExitStack() as stack:
        pending = [embedded_launch(profile, model_dir=model_dir, log_name=f"e2e-{label}")
                   for profile, label, model_dir in launches]
        for managed, _ in pending:
            managed.start()
            stack.callback(managed.stop)
        for managed, _ in pending:
            managed.wait_ready()
        yield [LiveServer(server.base_url, server.model_dir) for _, server in pending]


@pytest.fixture(scope="session")
def sglang_server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    url = os.environ.get("SPARKBENCH_SGLANG_URL")
    if url:
        yield LiveServer(url, Path(os.environ.get("SPARKBENCH_MODEL_DIR") or ensure_model()))
        return
    with session_server(request) as server:
        yield server


@pytest.fixture(scope="session")
def vllm_server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """vLLM CPU, plain decoding."""
    with session_server(request) as server:
        yield server


@pytest.fixture(scope="session")
def vllm_ngram_server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """vLLM CPU with n-gram speculation: the test bed's real speculative engine."""
    with session_server(request) as server:
        yield server


@pytest.fixture(scope="session")
def llamacpp_server() -> Iterator[LiveServer]:
    """llama.cpp's llama-server on CPU, plain decoding (the GGUF folder is its model_dir)."""
    with launched("llamacpp-cpu") as server:
        yield server


@pytest.fixture(scope="session")
def llamacpp_draft_server() -> Iterator[LiveServer]:
    """llama.cpp with draft-model speculation: the tiny model's q8_0 copy drafts for it."""
    with launched("llamacpp-cpu-draft") as server:
        yield server


@pytest.fixture(scope="session")
def llamacpp_synth_servers() -> Iterator[dict[float, LiveServer]]:
    """llama.cpp with synthetic acceptance at known mean accept lengths 2.0 and 3.0, by length."""
    with launched("llamacpp-cpu-synth-2") as two, launched("llamacpp-cpu-synth-3") as three:
        yield {2.0: two, 3.0: three}


@pytest.fixture(scope="session")
def llamacpp_near_one_server() -> Iterator[LiveServer]:
    """llama.cpp accepting about one draft in 200 rounds: the canary's negative control."""
    with launched("llamacpp-cpu-synth-near-one") as server:
        yield server


def sparkbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real command line, as a user would."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def synthetic_args(server: LiveServer, results: Path, prompts: int, input_tokens: int, output_tokens: int,
                   *extra: str) -> list[str]:
    """`sparkbench run synthetic` against `server` at a small shape."""
    return ["run", "synthetic", "--server", server.base_url, "--tokenizer", str(server.model_dir),
            "--num-prompts", str(prompts), "--input-tokens", str(input_tokens),
            "--output-tokens", str(output_tokens), "--results", str(results), "--no-progress", *extra]


def processes_serving_port(port: str) -> str:
    """Command lines of the processes started with `--port PORT` ('' when none is left)."""
    found = subprocess.run(["pgrep", "-a", "-f", "--", f"--port {port}( |$)"], capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr  # 1: nothing matched; anything else: pgrep failed
    return found.stdout


def report_facts(run_dir: Path, out: Path) -> dict[str, str]:
    """`sparkbench report RUN_DIR` as a user runs it; the run's facts table in report.md, as
    {fact: value} with the Markdown escapes undone."""
    done = sparkbench("report", str(run_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr
    facts: dict[str, str] = {}
    for line in (out / "report.md").read_text(encoding="utf-8").splitlines():
        cells = [html.unescape(re.sub(r"\\(.)", r"\1", cell.strip())) for cell in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == 2:
            facts.setdefault(cells[0], cells[1])
    return facts


def only_run_dir(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]
