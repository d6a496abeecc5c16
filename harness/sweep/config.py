"""A sweep's configuration: the matrix (configurations x workloads x concurrency levels) as a strict
model, read from YAML or made from command-line flags, one line per problem, exit 2.

A configuration is one server setup: an attached server (`server`), a profile it must satisfy
(`profile`), or a profile launched for its cells (`profile` without `server`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from pydantic import Field, field_validator, model_validator

from harness.config import PathText, StrictModel, load_yaml_config, validated
from harness.errors import SparkbenchError
from harness.request import TargetSpec
from harness.run.options import RunSettings
from harness.run.target import checked_url
from workloads.registry import NamedWorkload

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # a configuration's name is part of folder names
DEFAULT_CONCURRENCY = [1, 2, 4, 8]


class Configuration(TargetSpec):
    """One server setup of the matrix (a `TargetSpec`); `name` defaults to the profile's name, else the
    server's host:port."""

    name: str | None = None

    @field_validator("server")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        return None if url is None else checked_url(url)

    @model_validator(mode="after")
    def _named_and_reachable(self) -> Configuration:
        if self.server is None and self.profile is None:
            raise ValueError("a configuration needs a server, a profile, or both")
        name = self.name or self.profile or _host_port(self.server)
        if not NAME.match(name):
            raise ValueError(f"configuration name {name!r} may hold only letters, digits, '_', '.' and '-'")
        object.__setattr__(self, "name", name)  # frozen model: the default is resolved once, here
        return self

    @property
    def attached(self) -> bool:
        """Whether its cells share one running server (they then run one after another)."""
        return self.server is not None


def _host_port(url: str) -> str:
    parsed = httpx.URL(url)
    return f"{parsed.host}_{parsed.port}" if parsed.port else parsed.host


class RayOptions(StrictModel):
    """Ray resources each cell's task asks for (`ray.remote` options), and the cluster to join."""

    address: str | None = None  # `auto`, `HOST:PORT`, `ray://HOST:PORT`, or `local` (a private local cluster)
    num_cpus: float = Field(1.0, ge=0.0)
    num_gpus: float = Field(0.0, ge=0.0)
    resources: dict[str, float] = Field(default_factory=dict)
    local_cpus: int | None = Field(None, ge=1)  # CPUs of the private cluster that `local` starts
    # How long the cells may wait while no live node has what each task asks for (a node that died,
    # a resource no node has); then every cell still waiting fails. Minutes: a node may restart or
    # an autoscaler add one.
    placement_timeout_s: float = Field(300.0, gt=0.0)


class SweepConfig(RunSettings):
    """The whole matrix and how its cells run: the run options are `RunSettings` (processes,
    deadlines, credentials, ...), the same model every run request is made of, except that
    `concurrency` is the matrix's list of levels. Relative paths are relative to the working directory."""

    name: str = "sweep"
    results: PathText = Path("results/sweeps")
    configurations: list[Configuration] = Field(min_length=1)
    workloads: list[NamedWorkload] = Field(min_length=1)
    concurrency: list[int] = Field(default_factory=lambda: list(DEFAULT_CONCURRENCY), min_length=1)
    # Open-loop cells instead: one per arrival rate (the concurrency levels are then no axis).
    request_rate: list[float] | None = Field(None, min_length=1)
    baseline: str | None = None  # configuration the speed-ups are against (default: the first)
    guard: bool = True
    show_progress: bool = False
    ray: RayOptions = Field(default_factory=RayOptions)

    @field_validator("name")
    @classmethod
    def _folder_name(cls, name: str) -> str:
        if not NAME.match(name):
            raise ValueError(f"{name!r} may hold only letters, digits, '_', '.' and '-'")
        return name

    @field_validator("concurrency")
    @classmethod
    def _positive_distinct(cls, levels: list[int]) -> list[int]:
        if any(level < 1 for level in levels) or len(set(levels)) != len(levels):
            raise ValueError("concurrency levels must be distinct integers of at least 1")
        return sorted(levels)

    @field_validator("request_rate")
    @classmethod
    def _rates_positive_distinct(cls, rates: list[float] | None) -> list[float] | None:
        if rates is not None and (any(not rate > 0 for rate in rates) or len(set(rates)) != len(rates)):
            raise ValueError("request rates must be distinct numbers above 0")
        return None if rates is None else sorted(rates)

    @model_validator(mode="after")
    def _a_request_per_process(self) -> SweepConfig:  # replaces RunSettings' rule: every level counts
        self.check_processes(min(self.concurrency))
        return self

    def cell_settings(self, concurrency: int, request_rate: float | None = None) -> RunSettings:
        """The run options of a cell at `concurrency`, or at `request_rate` (an open-loop cell)."""
        return RunSettings.part_of(self, concurrency=concurrency, request_rate=request_rate)

    @model_validator(mode="after")
    def _names_unique(self) -> SweepConfig:
        names = [c.name for c in self.configurations]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"configuration names must differ (give each a name): {', '.join(twice)} twice")
        workloads = [w.name for w in self.workloads]
        if len(set(workloads)) != len(workloads):
            raise ValueError("each workload may appear once")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not a configuration ({', '.join(names)})")
        return self

    @property
    def baseline_name(self) -> str:
        return self.baseline or self.configurations[0].name


def load_sweep_config(path: Path, **overrides: Any) -> SweepConfig:
    """Read a sweep YAML config; command-line overrides (not None) win."""
    return load_yaml_config(SweepConfig, path, "sweep config", overrides)


def config_from_flags(servers: list[str], profiles: list[str], workload: str, options: dict[str, Any],
                      **settings: Any) -> SweepConfig:
    """The simple case from the command line. Servers and profiles given together pair up in order
    (server i must run profile i); alone, each is one configuration."""
    if servers and profiles and len(servers) != len(profiles):
        raise SparkbenchError(f"sweep: {len(servers)} --server and {len(profiles)} --profile: give one "
                              "profile per server, or only one kind")
    count = max(len(servers), len(profiles))
    configurations = [{"server": servers[i] if servers else None, "profile": profiles[i] if profiles else None}
                      for i in range(count)]
    given = {key: value for key, value in options.items() if value is not None}
    data = {"configurations": configurations, "workloads": [{"name": workload, "options": given}],
            **{key: value for key, value in settings.items() if value is not None}}
    return validated(SweepConfig, data, "sweep")

