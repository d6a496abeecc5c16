"""Workloads by name, with their defaults at the published shape and at the test bed's reduced scale.

The command line and the nightly job build workloads through here, so a workload's options and
defaults live in one place. Each builder takes the options given (None: the default for the
target's scale) and returns the factory the runner calls with the server's snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from workloads import Workload

Factory = Callable[[dict[str, Any]], Workload]

# (published shape, reduced scale of the CPU test bed)
SYNTHETIC_DEFAULTS = {"num_prompts": (10, 8), "input_tokens": (32_768, 8_192), "output_tokens": (2_048, 512)}
GSM8K_DEFAULTS = {"limit": (None, 20), "max_new_tokens": (32_768, 128)}


def _resolve(options: dict[str, Any], defaults: dict[str, tuple], reduced: bool) -> dict[str, Any]:
    resolved = dict(options)
    for key, (published, small) in defaults.items():
        if resolved.get(key) is None:
            resolved[key] = small if reduced else published
    return resolved


def synthetic(options: dict[str, Any], reduced: bool, model_dir: Path | None) -> Factory:
    from workloads.synthetic import make_synthetic

    resolved = _resolve({"seed": 0, "salt": None, "tokenizer": None, **options}, SYNTHETIC_DEFAULTS, reduced)
    resolved["tokenizer"] = resolved["tokenizer"] or model_dir
    return make_synthetic(**resolved)


def gsm8k(options: dict[str, Any], reduced: bool, model_dir: Path | None) -> Factory:
    from workloads.gsm8k import GSM8KWorkload

    workload = GSM8KWorkload(**_resolve(options, GSM8K_DEFAULTS, reduced))
    return lambda snapshot: workload


BUILDERS = {"synthetic": synthetic, "gsm8k": gsm8k}


def build(name: str, options: dict[str, Any], reduced: bool, model_dir: Path | None) -> Factory:
    """The workload factory called `name`; unknown names are a one-line error."""
    from harness.errors import SparkbenchError

    if name not in BUILDERS:
        raise SparkbenchError(f"unknown workload {name!r}; choose one of {', '.join(BUILDERS)}")
    return BUILDERS[name](options, reduced, model_dir)
