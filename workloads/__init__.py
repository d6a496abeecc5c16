"""Workloads: data and generators that turn a workload spec into the prompts to send.

Each workload is a small class registered by name; the runner asks it for warm-up prompts and the
measured prompts and records its `spec()` in the run manifest.
"""

from __future__ import annotations

from typing import Protocol

from harness.spec import Prompt


class Workload(Protocol):
    name: str

    def prompts(self) -> list[Prompt]:
        """The measured prompts, in the order they are sent."""

    def warmup_prompts(self, count: int) -> list[Prompt]:
        """Prompts that warm the server up; never recorded, never overlapping the measured ones."""

    def spec(self) -> dict:
        """Everything needed to regenerate the prompts exactly (recorded in the manifest)."""
