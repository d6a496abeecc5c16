"""What a run is asked to be: one `RunRequest`, whichever entry point builds it.

The command line, the nightly job, sweep cells and `sparkbench check` each state what they want as a
`RunRequest` and hand it to `harness.session`: `run(request) -> Run` builds and runs it, `check`
guards its server alone. Anything one entry point can set, every one can, because they all fill in
the same model: the target (`TargetSpec`), the workload (`NamedWorkload`: its registered name and
options), the shared run options (`RunSettings`, credentials included), and the switches below.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from harness.config import PathText, StrictModel
from harness.run.label import checked_label
from harness.run.options import RunSettings
from workloads.registry import NamedWorkload


class TargetSpec(StrictModel):
    """The server a run measures: attached by URL, or launched from a profile."""

    server: str | None = Field(None, description="Base URL of a running server (e.g. http://127.0.0.1:30000). "
                               "Omitted: start --profile (default: the embedded CPU test bed, reduced scale).")
    profile: str | None = Field(None, description="Server profile (see `sparkbench profiles`): what the server "
                                "must run; launched when no --server.")
    model: PathText | None = Field(None, description="Model folder to serve when launching a profile "
                                   "(default: the profile's test-bed model).")
    backend: str = Field("auto", description="sglang (native /generate), openai (/v1/completions) or auto.")
    served_model: str | None = Field(None, description="Model name for the OpenAI API (default: the first listed).")


class RunSwitches(StrictModel):
    """What a run checks, how it is named and where it lands: the switches besides the run options."""

    guard: bool = Field(True, description="Check the server against the profile first.")
    allow_buffered: bool = Field(False, description=(
        "Measure even if the guard's canary request does not stream its tokens as they are made "
        "(recorded in the manifest; such requests stay out of client TTFT, TPOT and ITL)."))
    keep_prefix_cache: bool = Field(False, description="Do not flush the server's prefix cache before measuring "
                                    "(SGLang /flush_cache; the guard still checks cached_tokens).")
    label: str | None = Field(None, description="Name of the run in tables, figures and reports (default: profile "
                              "or engine and concurrency, e.g. 'cpu-testbed c=1'); stored in the manifest.")
    resume: PathText | None = Field(None, description="Continue this stopped run: same workload, only the prompts "
                                    "without an ok record are sent.")
    results: PathText = Field(Path("results"), description="Folder that receives results/<run_id>/.")
    repeat: int = Field(1, ge=1, description="Run the same request set N times on the same server, each repetition "
                        "a run of its own (warm-up, and the prefix-cache flush where the workload asks, each time); "
                        "the summary adds the spread across repetitions.")

    @model_validator(mode="after")
    def _one_run_resumed(self) -> RunSwitches:
        if self.repeat > 1 and self.resume is not None:
            raise ValueError("--resume continues one run; give it without --repeat")
        return self

    @field_validator("label")
    @classmethod
    def _one_line(cls, label: str | None) -> str | None:
        return checked_label(label)  # its SparkbenchError passes through validation unchanged


class RunRequest(RunSwitches):
    """One run, fully stated: target, workload, run options and switches."""

    target: TargetSpec = Field(default_factory=TargetSpec)
    workload: NamedWorkload | None = None  # None only in a request that checks its server (`check`)
    options: RunSettings = Field(default_factory=RunSettings)
