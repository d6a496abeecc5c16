"""Server profiles: how to launch a server configuration and what it must then report.

A profile is a YAML file shipped in this folder (or any path given by the user). It names the
engine, the launch module, arguments and environment, and the expectations the configuration
guard (`harness.guard.checks`) checks against the running server. Keys left out of `expect` are not
checked; `speculative: null` is an expectation (no speculation), not an omission.

Schema (`schema.ProfileFile`, strict; every problem one line naming the file):
    name: str
    engine: sglang | vllm
    description: str
    launch: {module: str, args: [str], env: {str: str}, cpu_kernel_standin: bool (sglang only),
             model: str (test-bed model served when no model is given: tiny | bigram | wrong-draft),
             draft_model: str (speculative draft: a test-bed model name or a path; sglang only)}
    expect: {speculative: {algorithm, num_steps, num_draft_tokens, eagle_topk} | null,
             enable_fp32_lm_head, moe_runner_backend, quantization, attention_backend, version,
             lm_head_dtype: bf16 | fp16 | fp32 | fp8}
    canary: {min_accept_length: float}   (only with speculation expected; defaults to 1.05)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from harness.config import validated
from harness.errors import SparkbenchError
from harness.guard.profiles.schema import DEFAULT_MIN_ACCEPT_LENGTH, CanaryFile, ProfileFile

PROFILES_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Launch:
    """How the server process is started (host, port, model and draft model are added by
    `harness.run.embedded.launch_spec`)."""

    module: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cpu_kernel_standin: bool = False
    model: str | None = None
    draft_model: str | None = None


@dataclass(frozen=True)
class Canary:
    """The least mean accept length a speculative configuration must exceed to count as working."""

    min_accept_length: float = DEFAULT_MIN_ACCEPT_LENGTH


@dataclass(frozen=True)
class Profile:
    """One server configuration: its launch recipe and what the guard expects from it."""

    name: str
    engine: str
    description: str
    launch: Launch
    expect: Mapping[str, Any]
    canary: Canary | None
    source: Path

    @property
    def expects_speculation(self) -> bool:
        return bool(self.expect.get("speculative"))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the run manifest."""
        return {
            "name": self.name, "engine": self.engine, "description": self.description,
            "launch": {"module": self.launch.module, "args": list(self.launch.args),
                       "env": dict(self.launch.env), "cpu_kernel_standin": self.launch.cpu_kernel_standin,
                       "model": self.launch.model, "draft_model": self.launch.draft_model},
            "expect": _plain(self.expect),
            "canary": None if self.canary is None else {"min_accept_length": self.canary.min_accept_length},
            "source": str(self.source),
        }


def _plain(value: Any) -> Any:
    """Read-only mappings back into dicts, so the manifest serializes."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def shipped_profile_paths() -> dict[str, Path]:
    return {path.stem: path for path in sorted(PROFILES_DIR.glob("*.yaml"), key=lambda path: path.stem)}


def list_profiles() -> list[Profile]:
    """Every profile shipped with the harness, by name."""
    return [_load_file(path) for path in shipped_profile_paths().values()]


def load_profile(name_or_path: str | Path) -> Profile:
    """A shipped profile by name, or a profile file by path; a one-line error names the known ones."""
    shipped = shipped_profile_paths()
    if str(name_or_path) in shipped:
        return _load_file(shipped[str(name_or_path)])
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return _load_file(path)
    raise SparkbenchError(f"unknown profile {str(name_or_path)!r}; known profiles: {', '.join(shipped)} "
                          f"(or give the path of a .yaml profile file)")


def _load_file(path: Path) -> Profile:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SparkbenchError(f"profile {path} is not valid YAML: {' '.join(str(exc).split())}") from exc
    return profile_from_dict(data, path)


def profile_from_dict(data: Any, source: Path) -> Profile:
    """Validate parsed YAML into a `Profile` (schema: `ProfileFile`); one line per problem, naming the file."""
    checked = validated(ProfileFile, data if data is not None else {}, f"profile {source}")
    expect = checked.stated_expectations()
    if expect.get("speculative") is not None:
        expect["speculative"] = MappingProxyType(expect["speculative"])
    canary = None
    if checked.expects_speculation:
        canary = Canary(min_accept_length=(checked.canary or CanaryFile()).min_accept_length)
    launch = checked.launch
    return Profile(name=checked.name, engine=checked.engine, description=checked.description.strip(),
                   launch=Launch(module=launch.module, args=tuple(launch.args), env=MappingProxyType(dict(launch.env)),
                                 cpu_kernel_standin=launch.cpu_kernel_standin, model=launch.model,
                                 draft_model=launch.draft_model),
                   expect=MappingProxyType(expect), canary=canary, source=source)
