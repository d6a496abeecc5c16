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


def only_run_dir(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]
