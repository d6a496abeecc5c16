"""A run's manifest as a typed record: `RunRecord`, with a version field.

The run directory writes its manifest as it goes (`RunDir.update`); readers take it through
`RunRecord.of(manifest)`, which checks the types of what they read and upgrades an older manifest:
version 1 (written before the version field) has no `engine_facts`, so its engine's adapter
derives them from the raw snapshot it kept. Keys other stages add (the nightly's `host_load`, say)
are kept as they are.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from harness.config import StrictModel, error_lines
from harness.engines.registry import meta_reader
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.records.rundir import engine_and_api

MANIFEST_VERSION = 2  # 2: engine_facts beside the raw snapshot; 1: the raw snapshot only


class RunRecord(StrictModel):
    """What a run's manifest says, typed where the stages read it."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    manifest_version: int = 1
    run_id: str
    workload: dict[str, Any]
    status: str | None = None
    engine: str | None = None
    api: str | None = None
    label: str | None = None
    server_url: str | None = None
    server: dict[str, Any] = Field(default_factory=dict)  # the engine's raw snapshot, as it answered
    engine_facts: EngineFacts | None = None
    profile: dict[str, Any] | None = None
    launched_server: dict[str, Any] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    server_counters: dict[str, Any] = Field(default_factory=dict)
    power: dict[str, Any] | None = None

    @classmethod
    def of(cls, manifest: dict[str, Any], where: str = "manifest") -> RunRecord:
        """The typed record of `manifest`; a wrong type is one line per problem."""
        try:
            record = cls.model_validate(manifest)
        except ValidationError as exc:
            raise SparkbenchError("\n".join(error_lines(exc, where))) from None
        if record.engine_facts is not None:
            return record
        return record.model_copy(update={"engine_facts": derived_facts(record, engine_and_api(manifest)[0])})

    @property
    def facts(self) -> EngineFacts:
        return self.engine_facts or EngineFacts()


def derived_facts(record: RunRecord, engine: str | None) -> EngineFacts:
    """The facts of a version-1 manifest: its engine's adapter reads the raw snapshot it kept."""
    launch_args = tuple(str(arg) for arg in ((record.profile or {}).get("launch") or {}).get("args") or ())
    try:
        facts = meta_reader(engine).facts(record.server, launch_args)
    except (SparkbenchError, AttributeError, TypeError, ValueError):
        facts = EngineFacts()  # a snapshot the adapter cannot read: its facts were not recorded
    return facts.model_copy(update={"engine": engine})
