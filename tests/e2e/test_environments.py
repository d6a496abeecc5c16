"""The environments uv made: the harness's matches uv.lock, each server's holds its pinned engine.

These read the real environments that `make setup` and `make testbed` installed (no server runs).
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from harness.testbed.envs import cache_root, env_python, requirements_file

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LIST_DISTRIBUTIONS = ("import importlib.metadata as m, json; "
                      "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def uv_executable() -> Path:
    """The uv release pyproject.toml requires, where `make setup` bootstrapped it."""
    required = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["uv"]["required-version"]
    return cache_root() / "tools" / f"uv-{required.removeprefix('==')}" / "bin" / "uv"


def installed(python: Path) -> dict[str, str]:
    listing = subprocess.run([str(python), "-c", LIST_DISTRIBUTIONS], capture_output=True, text=True, check=True)
    return {normalized(name): version for name, version in json.loads(listing.stdout).items()}


def pins(requirements: Path) -> dict[str, str]:
    lines = (line.split("==") for line in requirements.read_text().splitlines() if "==" in line)
    return {normalized(name): version.strip() for name, version in lines}


def uv_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(uv_executable()), *args], cwd=REPO, capture_output=True, text=True)


def test_harness_environment_is_exactly_what_the_lock_pins():
    done = uv_check("sync", "--locked", "--all-extras", "--check")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_server_environment_holds_its_pins_and_every_requirement_is_met(engine):
    python = env_python(engine)
    versions = installed(python)
    assert pins(requirements_file(engine)).items() <= versions.items()
    if engine == "sglang":  # vLLM's metadata names the torchvision build we remove on purpose
        done = uv_check("pip", "check", "--python", str(python))
        assert done.returncode == 0, done.stdout + done.stderr


def test_vllm_environment_has_the_cpu_torch_build_and_no_cuda_torchvision():
    versions = installed(env_python("vllm"))
    assert versions["torch"].endswith("+cpu")
    assert not {"torchvision", "torchaudio", "torchcodec"} & versions.keys()
