"""How requests arrive: the load options of a run (closed loop, or an open loop's rate or schedule,
its windows and SLO targets).

Apart from the schedules they describe (`harness.run.arrivals`, which draws them with numpy), so
that the run options, and with them the command line's help, load no array library.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field, field_validator, model_validator

from harness.config import PathText, StrictModel
from harness.slo_targets import format_slo, parse_slo

SECONDS = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|h|)\s*$")
SECONDS_PER_UNIT = {"ms": 0.001, "s": 1.0, "": 1.0, "m": 60.0, "h": 3600.0}
# Seconds, given as a number or as text with a unit; `str` first so that the command line takes text.
Seconds = Annotated[str | float, BeforeValidator(lambda value: seconds(value)), Field(ge=0.0)]


class LoadOptions(StrictModel):
    """How requests arrive. No rate and no schedule: a closed loop (a fixed number in flight)."""

    request_rate: float | None = Field(None, gt=0.0, description="Open loop: mean arrival rate, requests/s "
                                       "(Poisson unless --burstiness).")
    burstiness: float = Field(1.0, gt=0.0, description="Open loop: shape of the gamma inter-arrival gaps: "
                              "1 = Poisson, smaller = burstier (SGLang's and vLLM's --burstiness).")
    arrival_seed: int = Field(0, description="Open loop: seed of the drawn arrival schedule.")
    schedule: PathText | None = Field(None, description="Open loop: replay these send offsets (CSV or JSONL of "
                                      "seconds from the start, column/key offset_s) instead of drawing them.")
    max_concurrency: int | None = Field(None, ge=1, description="Open loop: at most this many requests in "
                                        "flight; a due request waits (and its lag is recorded).")
    duration_s: Seconds | None = Field(None, description="Open loop: send for this long (e.g. 90s, 10m) instead "
                                       "of a prompt count; prompts are drawn from the workload as needed.")
    warmup_window_s: Seconds = Field(0.0, description="Open loop: requests due in this first stretch (e.g. "
                                     "30s) are marked warm-up and left out of the summary.")
    cooldown_window_s: Seconds = Field(0.0, description="Open loop: requests due in this last stretch of the "
                                       "schedule are marked cool-down and left out of the summary.")
    slo: str | None = Field(None, description="Targets each request must meet, any of ttft, tpot, e2e "
                            "(e.g. ttft=500ms,tpot=50ms,e2e=30s): SLO attainment and goodput.")

    @field_validator("slo")
    @classmethod
    def _targets(cls, text: str | None) -> str | None:
        return None if text is None else format_slo(parse_slo(text))  # its error passes through unchanged

    @model_validator(mode="after")
    def _consistent(self) -> LoadOptions:
        if self.request_rate is not None and self.schedule is not None:
            raise ValueError("give --request-rate or --schedule, not both")
        if not self.open_loop and (self.duration_s is not None or self.max_concurrency is not None):
            raise ValueError("--duration and --max-concurrency need --request-rate or --schedule")
        if self.duration_s is not None and self.warmup_window_s + self.cooldown_window_s >= self.duration_s:
            raise ValueError("the warm-up and cool-down windows leave nothing of --duration to measure")
        return self

    @property
    def open_loop(self) -> bool:
        return self.request_rate is not None or self.schedule is not None

    @property
    def slo_targets(self) -> dict[str, float]:
        """{figure: limit in ms}; empty without --slo."""
        return parse_slo(self.slo) if self.slo else {}


def seconds(value: object) -> object:
    """A length of time as seconds: a number, or text with a unit (`90s`, `10m`, `1.5h`, `500ms`;
    none = s). Anything else is left for validation to refuse."""
    if isinstance(value, str):
        match = SECONDS.match(value.lower())
        if match is None:
            raise ValueError(f"{value!r} is not a length of time (e.g. 90s, 10m, 1.5h)")
        return float(match.group(1)) * SECONDS_PER_UNIT[match.group(2)]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
