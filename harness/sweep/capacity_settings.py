"""How a capacity search runs (`CapacitySettings`), apart from the folder and report machinery
(`harness.sweep.capacity_dir`), so that the command line can offer its options without importing
the figures."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from harness.config import PathText, StrictModel


class CapacitySettings(StrictModel):
    """How the search runs (the trial runs themselves are ordinary runs at each rate)."""

    name: str = Field("capacity", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Start of the folder's name [capacity].")
    results: PathText = Field(Path("results/capacity"), description="Folder that receives <name>-<time>/ [results/capacity].")
    attainment: float = Field(0.99, gt=0.0, le=1.0, description="SLO attainment the capacity must keep [0.99 = 99%].")
    tolerance: float = Field(0.10, gt=0.0, description="Stop bisecting when the bracket's high end is within "
                             "this fraction of its low end [0.10 = 10%].")
    floor_rps: float = Field(0.1, gt=0.0, description="Lowest arrival rate tried, requests/s [0.1].")
    ceiling_rps: float = Field(10.0, gt=0.0, description="Highest arrival rate tried, requests/s [10].")
    max_trials: int = Field(16, ge=3, description="Trial runs at most, the confirmations included [16].")
    confirmations: int = Field(3, ge=1, description="Runs at the capacity found, each on an arrival schedule "
                               "of its own, that must all meet the target; their spread is reported [3].")
    trial_requests: int | None = Field(None, ge=1, description="Measured requests per trial [enough for 10 "
                                       "misses at the target, at least 200: 1,000 at 99%].")

    @model_validator(mode="after")
    def _a_bracket(self) -> CapacitySettings:
        if self.floor_rps >= self.ceiling_rps:
            raise ValueError("--floor must be below --ceiling")
        return self
