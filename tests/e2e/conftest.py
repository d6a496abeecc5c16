"""Real servers for the end-to-end tier, started once per test session.

Set SPARKBENCH_SGLANG_URL (with SPARKBENCH_MODEL_DIR) to reuse a running server while developing;
CI leaves them unset, so the session starts and stops its own servers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.run.embedded import embedded_server
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


@pytest.fixture(scope="session")
def sglang_server() -> Iterator[LiveServer]:
    url = os.environ.get("SPARKBENCH_SGLANG_URL")
    if url:
        yield LiveServer(url, Path(os.environ.get("SPARKBENCH_MODEL_DIR") or ensure_model()))
        return
    with launched("cpu-testbed") as server:
        yield server


@pytest.fixture(scope="session")
def vllm_ngram_server() -> Iterator[LiveServer]:
    """vLLM CPU with n-gram speculation: the test bed's real speculative engine."""
    with launched("vllm-cpu-ngram") as server:
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


def only_run_dir(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]
