"""The run options every entry point shares: one model, read by the command line, the nightly
config, the sweep config and the runner alike.

A new option is one field here (its description is the `--help` text, its bounds are checked on the
command line and in every config file); `harness.cli.binding` turns each field into a flag
(`--` + the name with `-` for `_`, a trailing `_s` dropped; `json_schema_extra={"flag": ...}`
overrides it), and the runner reads it from `RunOptions`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, field_serializer, field_validator, model_validator

from harness.engines.shaping import checked_header
from harness.errors import SparkbenchError
from harness.run.load_options import LoadOptions
from harness.secrets import auth_headers, checked_credential, header_parts, masked_header


class RunSettings(LoadOptions):
    """How a run drives the server (the manifest records all but the credentials and the display)."""

    warmup: int = Field(1, ge=0, description="Warm-up requests before measuring (not recorded).")
    concurrency: int = Field(1, ge=1, description="Requests in flight at once (1 = batch 1, as published).")
    processes: int = Field(1, ge=1, description="Client processes sharing the requests in flight, each with its "
                           "own event loop (for high concurrency; at most --concurrency).")
    request_timeout_s: float = Field(900.0, ge=1.0, description="Seconds a request may go without a new token.")
    first_token_timeout_s: float | None = Field(None, gt=0.0, description="Seconds a request may wait for its "
                                                "first token (default: no limit beyond the above).")
    request_deadline_s: float | None = Field(None, gt=0.0, description="Seconds a whole request may take "
                                             "(default: 600 + max new tokens / 2).")
    max_errors: int | None = Field(None, ge=0, description="Failed requests tolerated before the run stops "
                                   "(default: 10 + 5% of the requests).")
    unreachable_grace_s: float = Field(120.0, ge=0.0, description="Seconds the server may be unreachable "
                                       "before the run stops.")
    power_sample_ms: int = Field(100, ge=0, description="Sample device power (NVML GPUs, RAPL CPU packages) "
                                 "every N ms during the measured requests; 0 = off.")
    scrape_interval_s: float = Field(1.0, ge=0.0, description="Seconds between samples of the server's /metrics "
                                     "and the GPUs' state (NVML), from the warm-up to the last measured request; "
                                     "0 = off, as --no-telemetry.")
    telemetry: bool = Field(True, description="Sample the server's /metrics and the GPUs' state over the run "
                            "(--no-telemetry: off).")
    show_progress: bool = Field(True, description="Show the progress bar.", json_schema_extra={"flag": "--progress"})
    api_key: SecretStr | None = Field(None, strict=False, exclude=True, repr=False, description=(
        "Key sent as `Authorization: Bearer` (default: $SPARKBENCH_API_KEY, then $OPENAI_API_KEY); "
        "never written to the run."))
    header: list[str] = Field(default_factory=list, description="Request header NAME:VALUE sent with every "
                              "request (repeatable); the run records its name, its value masked.")
    profile_server: Path | None = Field(None, description="Start the server's own profiler (SGLang, vLLM) "
                                        "after the warm-up and stop it after the last measured request; its "
                                        "traces go to this folder (vLLM: the folder it was started with), "
                                        "named in the manifest.")
    extra_body: dict[str, Any] | None = Field(None, description="JSON object merged into every request body: the "
                                              "engine's own fields (e.g. '{\"min_p\": 0.05}'); a field sparkbench "
                                              "sets itself is refused.")

    @model_validator(mode="after")
    def _a_request_per_process(self) -> RunSettings:
        self.check_processes(self.concurrency)
        if self.open_loop and self.processes > 1:
            raise ValueError("--processes needs a closed loop: an open loop sends from one process")
        return self

    @field_validator("header")
    @classmethod
    def _headers(cls, headers: list[str]) -> list[str]:
        return [checked_header(header) for header in headers]

    @field_validator("api_key")
    @classmethod
    def _sendable(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None:
            try:
                checked_credential(key.get_secret_value(), "--api-key")
            except SparkbenchError as exc:
                raise ValueError(str(exc)) from None
        return key

    @field_validator("extra_body", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """The command line gives it as JSON text."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--extra-body is not JSON ({exc.msg} at character {exc.pos})") from None
            if not isinstance(value, dict):
                raise ValueError(f"--extra-body is a JSON {type(value).__name__}, not an object of request fields")
        return value

    @model_validator(mode="after")
    def _one_source_of_credentials(self) -> RunSettings:
        if self.api_key and any(header_parts(h)[0].lower() == "authorization" for h in self.header):
            raise ValueError("--header Authorization and --api-key both set the credentials; give one")
        return self

    @field_serializer("header")
    def _masked(self, headers: list[str]) -> list[str]:
        """Written with their values masked: a header may carry a credential."""
        return [masked_header(header) for header in headers]

    def check_processes(self, concurrency: int) -> None:
        if self.processes > concurrency:
            raise ValueError(f"--processes {self.processes} is more than --concurrency {concurrency}: "
                             "each client process needs a request in flight")

    @property
    def headers(self) -> dict[str, str]:
        """The credentials and the user's own headers, as request headers (never part of a dump of the model)."""
        own = dict(header_parts(header) for header in self.header)
        return auth_headers(self.api_key.get_secret_value() if self.api_key else None) | own

    @property
    def power_interval_s(self) -> float:
        return self.power_sample_ms / 1000

    @property
    def telemetry_interval_s(self) -> float:
        """Seconds between telemetry samples; 0 when it is off."""
        return self.scrape_interval_s if self.telemetry else 0.0


# The manifest's `options`: all but the display, the credentials, power, telemetry and the server's
# profiler (the manifest's `power`, `telemetry` and `server_profile` entries record those).
RECORDED = frozenset(RunSettings.model_fields) - {"show_progress", "api_key", "power_sample_ms", "scrape_interval_s",
                                                  "telemetry", "profile_server"}
