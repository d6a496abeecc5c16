"""Copies of a test-bed model (the tiny one, or the real one) whose LM head was rounded (FP8 e4m3, or
coarser), cached like the model.

A copy's folder name carries the source model's folder name and the digest of the rounding builder,
so a rebuilt tiny model or a changed builder makes a new copy; the `.complete` marker is written
last, so an interrupted build is redone, and a lock lets one builder work while others wait.
"""

from __future__ import annotations

from pathlib import Path

from harness.testbed.envs import (
    TESTBED_DIR,
    _digest,
    build_once,
    cache_root,
    ensure_model,
    env_python,
    model_dir,
    run_script,
)
from harness.testbed.real_model import ensure_real_hf

BUILDER = TESTBED_DIR / "build_rounded_head.py"
# Mantissa bits per named copy: e4m3 is FP8 as published; e4m1 is the coarser copy.
ROUNDINGS = {"e4m3": 3, "e4m2": 2, "e4m1": 1}


def rounded_head_dir(rounding: str, source: Path | None = None) -> Path:
    return cache_root() / "models" / f"{(source or model_dir()).name}-head-{rounding}-{_digest(BUILDER)}"


def ensure_rounded_head_model(rounding: str = "e4m3", engine: str = "sglang", real: bool = False) -> Path:
    """Build (once) the tiny model (`real`: the real test-bed model's bf16 checkpoint) with its LM
    head rounded to `rounding`; return its folder."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; choose one of {', '.join(ROUNDINGS)}")
    source = ensure_real_hf(engine) if real else ensure_model(engine=engine)
    folder = rounded_head_dir(rounding, source)
    return build_once(folder, lambda: run_script(env_python(engine), BUILDER, source, folder, ROUNDINGS[rounding]))
