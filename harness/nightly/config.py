"""The nightly job's configuration: a strict model read from YAML, command-line overrides on top.

Every workload's options are validated by that workload's own config when the file is read, so a
typo fails before the first server starts, one line per problem, exit 2.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from harness.config import PathText, load_yaml_config
from harness.metrics.catalogue import CATALOGUE, default_thresholds
from harness.nightly.foreign import setup_pids_from
from harness.nightly.settle import BUSY_WORDING, DEFAULT_BUSY_LIMITS
from harness.request import TargetSpec
from harness.run.options import RunSettings
from workloads.registry import NamedWorkload

DEFAULT_THRESHOLDS = default_thresholds()
# A night's default: a reduced synthetic set and a 20-question GSM8K subset.
DEFAULT_WORKLOADS = [{"name": "synthetic", "options": {"num_prompts": 20, "input_tokens": 1024, "output_tokens": 128}},
                     {"name": "gsm8k", "options": {"limit": 20, "max_new_tokens": 64}}]


def _over_defaults(given: dict[str, float], defaults: dict[str, float], known: Any, error: str) -> dict[str, float]:
    """`given` over `defaults`; a name not in `known` is an error (`error` formats the unknown names)."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(error.format(", ".join(unknown)))
    return {**defaults, **given}


class NightlyConfig(TargetSpec, RunSettings):
    """What a night runs and against what. Relative paths are relative to the working directory.

    The server is a `TargetSpec` and the run options are `RunSettings` (concurrency, processes,
    deadlines, credentials, ...), the same models every run request is made of."""

    state_dir: PathText = Path("results/nightly")
    show_progress: bool = False
    workloads: list[NamedWorkload] = Field(default_factory=lambda: [NamedWorkload(**w) for w in DEFAULT_WORKLOADS])
    thresholds: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    alpha: float = Field(0.05, gt=0.0, lt=1.0)
    confirmations: int = Field(2, ge=1)  # reruns to confirm a regression while the host stays busy
    # A statistic over fewer requests than this is shown ungated (docs/nightly.md, "The rule").
    min_requests: int = Field(20, ge=2)
    # Runs of each workload when the baseline is pinned; their spread scales the thresholds.
    baseline_repeats: int = Field(3, ge=1)
    noise_multiplier: float = Field(2.0, gt=0.0)
    busy_limits: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_BUSY_LIMITS))
    # Roots of the process trees that are the setup, not foreign load (`harness.nightly.foreign`):
    # these and those of SPARKBENCH_NIGHTLY_SETUP_PIDS.
    setup_pids: list[int] = Field(default_factory=list, validate_default=True)
    # Measure even when the guard's canary is held back (a run's --allow-buffered): a night beside
    # other work on the same cores, whose busy rule then judges the night, rather than refusing it.
    allow_buffered: bool = False

    @field_validator("busy_limits")
    @classmethod
    def _limits_under_the_given(cls, given: dict[str, float]) -> dict[str, float]:
        return _over_defaults(given, DEFAULT_BUSY_LIMITS, BUSY_WORDING,
                              f"not host-load figures: {{}} (known: {', '.join(BUSY_WORDING)})")

    @field_validator("setup_pids")
    @classmethod
    def _and_the_environments(cls, given: list[int]) -> list[int]:
        return sorted(set(given) | set(setup_pids_from(os.environ)))

    @field_validator("thresholds")
    @classmethod
    def _defaults_under_the_given(cls, given: dict[str, float]) -> dict[str, float]:
        return _over_defaults(given, DEFAULT_THRESHOLDS, CATALOGUE, "not catalogue metrics: {}")

    @property
    def runs_dir(self) -> Path:
        return self.state_dir / "runs"

    @property
    def baseline_file(self) -> Path:
        return self.state_dir / "baseline.json"


def load_config(path: Path, **overrides: Any) -> NightlyConfig:
    """Read a nightly YAML config; command-line overrides (not None) win."""
    return load_yaml_config(NightlyConfig, path, "nightly config", overrides)
