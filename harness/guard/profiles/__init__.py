"""Server profiles: how to launch a server configuration and what it must then report.

A profile is a YAML file shipped in this folder (or any path given by the user). It names the
engine, the launch module, arguments and environment, and the expectations the configuration
guard (`harness.guard.checks`) checks against the running server. Keys left out of `expect` are not
checked; `speculative: null` is an expectation (no speculation), not an omission.

Schema:
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

from harness.engines.registry import launchable_engines
from harness.errors import SparkbenchError

PROFILES_DIR = Path(__file__).resolve().parent
PROFILE_KEYS = {"name", "engine", "description", "launch", "expect", "canary"}
LAUNCH_KEYS = {"module", "args", "env", "cpu_kernel_standin", "model", "draft_model"}
EXPECT_KEYS = {"speculative", "enable_fp32_lm_head", "moe_runner_backend", "quantization",
               "attention_backend", "version", "lm_head_dtype"}
SPECULATIVE_KEYS = {"algorithm", "num_steps", "num_draft_tokens", "eagle_topk"}
LM_HEAD_DTYPES = ("bf16", "fp16", "fp32", "fp8")
CANARY_KEYS = {"min_accept_length"}
DEFAULT_MIN_ACCEPT_LENGTH = 1.05


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
    """Validate parsed YAML into a `Profile`; any problem is a one-line error naming the file."""
    where = f"profile {source}"
    data = _mapping(data, where, PROFILE_KEYS)
    for key in ("name", "engine", "launch"):
        if key not in data:
            raise SparkbenchError(f"{where}: missing key {key!r}")
    engine = data["engine"]
    if engine not in launchable_engines():
        raise SparkbenchError(f"{where}: engine must be one of {', '.join(launchable_engines())}, not {engine!r}")
    launch = _launch(data["launch"], engine, where)
    expect = _expect(data.get("expect") or {}, where)
    canary = _canary(data.get("canary"), bool(expect.get("speculative")), where)
    return Profile(name=str(data["name"]), engine=engine, description=str(data.get("description", "")).strip(),
                   launch=launch, expect=expect, canary=canary, source=source)


def _mapping(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SparkbenchError(f"{where}: expected a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise SparkbenchError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return value


def _as_text(value: Any, where: str) -> str:
    """Numbers become their text (YAML reads an unquoted 40960 as an int); booleans are refused
    because `True` would reach the server as the word, not as the 1 or true the user meant."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SparkbenchError(f"{where}: {value!r} must be a string (quote it)")
    return str(value)


def _launch(value: Any, engine: str, where: str) -> Launch:
    launch = _mapping(value, f"{where} launch", LAUNCH_KEYS)
    if not launch.get("module"):
        raise SparkbenchError(f"{where} launch: missing key 'module'")
    args = tuple(_as_text(arg, f"{where} launch.args") for arg in launch.get("args") or [])
    env = {str(key): _as_text(val, f"{where} launch.env.{key}") for key, val in (launch.get("env") or {}).items()}
    standin = launch.get("cpu_kernel_standin", False)
    if not isinstance(standin, bool):
        raise SparkbenchError(f"{where} launch.cpu_kernel_standin must be true or false")
    if standin and engine != "sglang":
        raise SparkbenchError(f"{where} launch.cpu_kernel_standin applies to sglang only")
    models = {key: _optional_text(launch.get(key), f"{where} launch.{key}") for key in ("model", "draft_model")}
    if models["draft_model"] and engine != "sglang":
        raise SparkbenchError(f"{where} launch.draft_model applies to sglang only")
    return Launch(module=str(launch["module"]), args=args, env=MappingProxyType(env), cpu_kernel_standin=standin,
                  **models)


def _optional_text(value: Any, where: str) -> str | None:
    return None if value is None else _as_text(value, where)


def _expect(value: Any, where: str) -> Mapping[str, Any]:
    expect = dict(_mapping(value, f"{where} expect", EXPECT_KEYS))
    if expect.get("speculative") is not None:
        expect["speculative"] = MappingProxyType(
            dict(_mapping(expect["speculative"], f"{where} expect.speculative", SPECULATIVE_KEYS)))
    if "lm_head_dtype" in expect and expect["lm_head_dtype"] not in LM_HEAD_DTYPES:
        raise SparkbenchError(f"{where} expect.lm_head_dtype must be one of {', '.join(LM_HEAD_DTYPES)}, "
                              f"not {expect['lm_head_dtype']!r}")
    if "version" in expect and expect["version"] is not None:
        expect["version"] = str(expect["version"])  # an unquoted 0.5 would otherwise be a float
    return MappingProxyType(expect)


def _canary(value: Any, speculation_expected: bool, where: str) -> Canary | None:
    if not speculation_expected:
        if value is not None:
            raise SparkbenchError(f"{where}: a canary needs expect.speculative (nothing to accept without drafts)")
        return None
    canary = _mapping(value or {}, f"{where} canary", CANARY_KEYS)
    threshold = canary.get("min_accept_length", DEFAULT_MIN_ACCEPT_LENGTH)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold < 1.0:
        raise SparkbenchError(f"{where} canary.min_accept_length must be a number >= 1.0, not {threshold!r}")
    return Canary(min_accept_length=float(threshold))
