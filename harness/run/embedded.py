"""Servers this process starts from a profile: the embedded default and `--profile` launches.

With no `--server` and no `--profile`, the embedded default serves a test-bed model on the CPU:
the real SmolLM2-135M-Instruct on llama.cpp for a workload whose figures depend on what the text
says (`WORKLOAD_PROFILES`), else the tiny random model on SGLang. Its numbers describe a small model
on a CPU, so everything it produces is labelled as the reduced-scale test bed. Any profile can be
launched the same way with a model of the user's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from harness.engines.registry import engine_named
from harness.errors import SparkbenchError
from harness.guard.profiles import Profile, load_profile
from harness.run.server import LaunchSpec, ManagedServer, PortTaken, free_port
from harness.testbed import llamacpp, real_model
from harness.testbed.drafter import build as drafter
from harness.testbed.envs import MODEL_VARIANTS, TESTBED_DIR, cache_root, ensure_model, env_python, server_logs_dir

STANDIN_DIR = TESTBED_DIR / "sgl_kernel_cpu"
DEFAULT_PROFILE = "cpu-testbed"
# GSM8K's accuracy and Spec-Bench's tasks mean nothing on random weights: their embedded default
# serves the real instruct model, on llama.cpp (50-100 tokens/s here; SGLang on CPU serves it at
# about 2, docs/real-model.md). Every other workload gets DEFAULT_PROFILE.
REAL_TEXT_PROFILE = "llamacpp-cpu-real"
WORKLOAD_PROFILES = {"gsm8k": REAL_TEXT_PROFILE, "specbench": REAL_TEXT_PROFILE}
LOOPBACK = "127.0.0.1"
DRAFT_MODEL_FLAG = "--speculative-draft-model-path"  # SGLang's; the only engine with draft_model profiles
MODEL_DIR_PLACEHOLDER = "{model_dir}"
# Engines the test bed builds from source instead of installing into an environment: the program
# that serves, and the model it serves by default, each built once and cached.
NATIVE_TESTBEDS = {"llamacpp": (llamacpp.require_server, llamacpp.ensure_gguf_model)}


@dataclass(frozen=True)
class EmbeddedServer:
    base_url: str
    profile: str
    engine: str
    model_dir: Path
    log_path: Path
    testbed_model: bool  # serving a test-bed model (tiny random or SmolLM2-135M): numbers are reduced-scale by nature


def default_profile(workload: str | None, model_dir: Path | None = None) -> str:
    """The profile started when a run names no server and no profile: the workload's embedded
    default, serving its test-bed model. A model folder the user gives is served by DEFAULT_PROFILE,
    as before: SGLang reads any checkpoint folder, llama.cpp only a GGUF one."""
    if model_dir is not None or workload is None:
        return DEFAULT_PROFILE
    return WORKLOAD_PROFILES.get(workload, DEFAULT_PROFILE)


def launch_spec(profile: Profile, model_dir: Path, port: int, env_python: Path,
                standin_dir: Path | None = None, served_model_name: str | None = None,
                draft_model_dir: Path | None = None) -> LaunchSpec:
    """The command and environment that start `profile` serving `model_dir` on 127.0.0.1:`port`.

    The engine's adapter gives the start of the command (`env_python -m MODULE`; llama.cpp: its
    binary, passed as `env_python`), the model flag and its own arguments (vLLM:
    `--served-model-name`, default: the model folder's name). `{model_dir}` in a profile argument
    stands for the model being served (llama.cpp's draft model lives in its GGUF folder). A profile
    with a `draft_model` gets `draft_model_dir` as SGLang's draft model path. A profile that needs
    the CPU kernel stand-in gets `standin_dir` first on PYTHONPATH, so the server imports the
    stand-in `sgl_kernel` (and its start-up hook) instead of the CUDA-only wheel.
    """
    engine = engine_named(profile.engine)
    profile_args = [arg.replace(MODEL_DIR_PLACEHOLDER, str(model_dir)) for arg in profile.launch.args]
    argv = [*engine.launcher(env_python, profile.launch.module), *engine.model_args(model_dir), "--host", LOOPBACK,
            "--port", str(port), *engine.launch_args(model_dir, served_model_name),
            *_draft_args(profile, draft_model_dir), *profile_args]
    env = dict(profile.launch.env)
    if profile.launch.cpu_kernel_standin:
        env["PYTHONPATH"] = _standin_pythonpath(profile, standin_dir)
    return LaunchSpec(argv=argv, env=env)


def _draft_args(profile: Profile, draft_model_dir: Path | None) -> list[str]:
    if not profile.launch.draft_model:
        return []
    if draft_model_dir is None:
        raise SparkbenchError(f"profile {profile.name} needs its draft model folder (draft_model_dir)")
    return [DRAFT_MODEL_FLAG, str(draft_model_dir)]


def _model_folder(name: str, engine: str = "sglang") -> Path:
    """A test-bed model by name (built or fetched on first use; the real model in the form `engine`
    serves), else a model folder's path."""
    if name == real_model.MODEL_NAME:
        return real_model.ensure_real_gguf() if engine in NATIVE_TESTBEDS else real_model.ensure_real_hf()
    if name == drafter.MODEL_NAME:
        return drafter.ensure_gguf_folder() if engine in NATIVE_TESTBEDS else drafter.ensure_hf()
    return ensure_model(name) if name in MODEL_VARIANTS else Path(name)


def _default_model(profile: Profile) -> Path:
    """The profile's test-bed model: the one it names, else the engine's form of the tiny model."""
    if profile.launch.model:
        return _model_folder(profile.launch.model, profile.engine)
    if profile.engine in NATIVE_TESTBEDS:
        return NATIVE_TESTBEDS[profile.engine][1]()
    return ensure_model("tiny")


def _standin_pythonpath(profile: Profile, standin_dir: Path | None) -> str:
    if standin_dir is None:
        raise SparkbenchError(f"profile {profile.name} needs the sgl_kernel stand-in folder (standin_dir)")
    inherited = os.environ.get("PYTHONPATH")  # kept after the stand-in, which must win the import
    return os.pathsep.join([str(standin_dir), *([inherited] if inherited else [])])


def embedded_launch(profile_name: str = DEFAULT_PROFILE, model_dir: Path | None = None,
                    log_name: str = "server") -> tuple[ManagedServer, EmbeddedServer]:
    """The server of a profile, not started yet, and what it will serve. Default model: the
    profile's test-bed model (the tiny one unless it names another); a draft model the profile
    names is passed along. Entering the ManagedServer starts it (unless started already), waits
    until it is healthy, and leaving it stops it."""
    profile = load_profile(profile_name)
    program = NATIVE_TESTBEDS[profile.engine][0] if profile.engine in NATIVE_TESTBEDS else (
        lambda: env_python(profile.engine))
    model = Path(model_dir) if model_dir else _default_model(profile)
    draft = _model_folder(profile.launch.draft_model) if profile.launch.draft_model else None
    port = free_port()
    spec = launch_spec(profile, model_dir=model, port=port, env_python=program(), standin_dir=STANDIN_DIR,
                       draft_model_dir=draft)
    # The engine's caches go into ours, off the user's home folders; the profile's own settings win.
    spec = replace(spec, env={**engine_named(profile.engine).launch_env(cache_root()), **spec.env})
    base_url = f"http://127.0.0.1:{port}"
    log_path = server_logs_dir() / f"{log_name}-{port}.log"
    server = EmbeddedServer(base_url=base_url, profile=profile.name, engine=profile.engine, model_dir=model,
                            log_path=log_path, testbed_model=model_dir is None)
    return ManagedServer(spec, base_url, log_path), server


@contextmanager
def embedded_server(profile_name: str = DEFAULT_PROFILE, model_dir: Path | None = None,
                    log_name: str = "server") -> Iterator[EmbeddedServer]:
    """Start a server from a profile (see `embedded_launch`), always stop it."""
    managed, server = ready_server(profile_name, model_dir, log_name)
    with managed:
        yield server


def ready_server(profile_name: str, model_dir: Path | None = None, log_name: str = "server") -> tuple[ManagedServer, EmbeddedServer]:
    """A launched, healthy server; launched once more, on a fresh port, when another process took
    the first one while it started."""
    managed, server = embedded_launch(profile_name, model_dir, log_name)
    try:
        managed.ready()
    except PortTaken:
        managed, server = embedded_launch(profile_name, model_dir, log_name)
        managed.ready()
    return managed, server
