"""The schema of a profile file: strict models, every problem one line (`harness.config.validated`).

Launch arguments and environment values may be written as YAML numbers (an unquoted 40960) and
become their text; booleans are refused there, because `True` would reach the server as the word,
not as the 1 or true the user meant. `expect` keeps only the keys the file states: a key left out
is not checked, while `speculative: null` is an expectation (no speculation).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from harness.config import StrictModel
from harness.engines.registry import launchable_engines

DEFAULT_MIN_ACCEPT_LENGTH = 1.05


def _as_text(value: Any) -> Any:
    if value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} must be a string (quote it)")
    return str(value)


Text = Annotated[str, BeforeValidator(_as_text)]


class LaunchFile(StrictModel):
    module: str = Field(min_length=1)
    args: list[Text] = []
    env: dict[str, Text] = {}
    cpu_kernel_standin: bool = False
    model: Text | None = None  # test-bed model served when no model is given: tiny | bigram | wrong-draft | smollm2 (real)
    draft_model: Text | None = None  # speculative draft: a test-bed model name or a path (sglang only)


class SpeculativeFile(StrictModel):
    algorithm: str | None = None
    num_steps: int | None = None
    num_draft_tokens: int | None = None
    eagle_topk: int | None = None


class ExpectFile(StrictModel):
    speculative: SpeculativeFile | None = None
    enable_fp32_lm_head: bool | None = None
    moe_runner_backend: str | None = None
    quantization: str | None = None
    attention_backend: str | None = None
    version: Text | None = None  # an unquoted 0.5 would otherwise be a float
    lm_head_dtype: Literal["bf16", "fp16", "fp32", "fp8"] | None = None


class CanaryFile(StrictModel):
    min_accept_length: float = Field(DEFAULT_MIN_ACCEPT_LENGTH, ge=1.0)


class ProfileFile(StrictModel):
    name: Text
    engine: str
    description: str = ""
    launch: LaunchFile
    expect: ExpectFile = ExpectFile()
    canary: CanaryFile | None = None

    @field_validator("engine")
    @classmethod
    def _launchable(cls, engine: str) -> str:
        if engine not in launchable_engines():
            raise ValueError(f"engine must be one of {', '.join(launchable_engines())}, not {engine!r}")
        return engine

    @model_validator(mode="after")
    def _coherent(self) -> ProfileFile:
        if self.canary is not None and not self.expects_speculation:
            raise ValueError("a canary needs expect.speculative (nothing to accept without drafts)")
        if self.launch.cpu_kernel_standin and self.engine != "sglang":
            raise ValueError("launch.cpu_kernel_standin applies to sglang only")
        if self.launch.draft_model and self.engine != "sglang":
            raise ValueError("launch.draft_model applies to sglang only")
        return self

    @property
    def expects_speculation(self) -> bool:
        return bool(self.expect.speculative and self.expect.speculative.model_dump(exclude_unset=True))

    def stated_expectations(self) -> dict[str, Any]:
        """`expect` with only the keys the file states (nested too)."""
        return self.expect.model_dump(exclude_unset=True)
