"""AIPerf's profile export (ai-dynamo/aiperf, docs/tutorials/working-with-profile-exports.md).

`profile_export.jsonl`: one `MetricRecordInfo` per request, `{"metadata": {...}, "metrics": {tag:
{"value", "unit"}}, "error": {...} | null}`. `profile_export_aiperf.json`: one object whose metric
tags hold `{"unit", "avg", "p1".."p99", "min", "max", "std"}`, beside `aiperf_version` and the
run's configuration. Given the JSONL, the aggregates JSON beside it is read too (its version, its
aggregates); given the JSON alone, the import has aggregates only.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.imports.imported import Aggregate, Imported, RequestRow, finite, first_problem, in_ms

TOOL = "aiperf"
AGGREGATES_FILE = "profile_export_aiperf.json"
DEFINITIONS = {
    "ttft_ms": "request start to the first response chunk with non-empty content (time_to_first_token)",
    "tpot_ms": "(request_latency - time_to_first_token) / (output_sequence_length - 1): AIPerf calls it "
               "inter_token_latency (ITL)",
    "itl_ms": "gap between consecutive content chunks: AIPerf's inter_chunk_latency (ICL), one sample per chunk",
    "e2e_ms": "request start to the last response chunk (request_latency)",
}
# AIPerf's tag of the figure sparkbench names alike (its definition above).
TAGS = {"time_to_first_token": "ttft_ms", "inter_token_latency": "tpot_ms", "inter_chunk_latency": "itl_ms",
        "request_latency": "e2e_ms"}
STATS = ("avg", "min", "max", "std", "count", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99")


class MetricValue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float | list[float]
    unit: str


class ErrorDetails(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    code: int | None = None
    type: str | None = None
    message: str | None = None


class RecordMetadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    session_num: int | None = None
    request_start_ns: int | None = None
    benchmark_phase: str | None = None


class MetricRecord(BaseModel):
    """One line of profile_export.jsonl."""

    model_config = ConfigDict(extra="allow", frozen=True)

    metadata: RecordMetadata
    metrics: dict[str, MetricValue] | None = None
    error: ErrorDetails | None = None


def is_aiperf_record(obj: dict[str, Any]) -> bool:
    return "metadata" in obj and "metrics" in obj


def is_aiperf_aggregates(obj: dict[str, Any]) -> bool:
    return "aiperf_version" in obj or isinstance(obj.get("request_latency"), dict)


def read_aiperf_records(objs: list[dict[str, Any]], where: str, beside: dict[str, Any] | None) -> Imported:
    """The per-request records of the profiling phase (warm-up left out), with the aggregates JSON beside them."""
    records = []
    for number, obj in enumerate(objs, start=1):
        try:
            records.append(MetricRecord.model_validate(obj))
        except ValidationError as exc:
            raise first_problem(exc, f"{where}: line {number}") from None
    measured = [r for r in records if r.metadata.benchmark_phase in (None, "profiling")]
    rows = [_row(index, record, f"{where}: record {index + 1}") for index, record in enumerate(measured)]
    imported = read_aiperf_aggregates(beside, where) if beside is not None else _bare()
    imported.requests = rows
    return imported


def read_aiperf_aggregates(obj: dict[str, Any], where: str) -> Imported:
    rows = []
    for tag, stats in obj.items():
        if isinstance(stats, dict) and isinstance(stats.get("unit"), str):
            rows += _aggregates(tag, stats, where)
    version = obj.get("aiperf_version")
    imported = _bare()
    imported.tool_version = version if isinstance(version, str) else None
    imported.aggregates = rows
    return imported


def _bare() -> Imported:
    return Imported(tool=TOOL, tool_version=None, definitions=DEFINITIONS, aggregates=[], requests=None,
                    workload={"name": "aiperf-profile"})


def _aggregates(tag: str, stats: dict[str, Any], where: str) -> list[Aggregate]:
    unit = stats["unit"]
    timed = tag in TAGS or unit in ("ms", "ns", "us", "s", "sec")
    rows = []
    for stat in STATS:
        value = finite(stats.get(stat))
        if value is None:
            continue
        if timed and stat != "count":
            value = in_ms(value, unit, f"{where}: {tag}")
        name = {"avg": "mean"}.get(stat, stat)
        rows.append(Aggregate(TAGS.get(tag, tag), f"tool_{name}", value,
                              "count" if stat == "count" else "ms" if timed else unit, tag))
    return rows


def _row(index: int, record: MetricRecord, where: str) -> RequestRow:
    if record.error is not None:
        message = record.error.message or record.error.type or f"error code {record.error.code}"
        return RequestRow(index, False, error_message=message)
    metrics = record.metrics or {}

    def scalar(tag: str) -> float | None:
        metric = metrics.get(tag)
        return None if metric is None or isinstance(metric.value, list) else metric.value

    def timed(tag: str) -> float | None:
        metric = metrics.get(tag)
        return None if metric is None else in_ms(scalar(tag), metric.unit, f"{where}: {tag}")

    gaps = metrics.get("inter_chunk_latency")
    itl = [in_ms(gap, gaps.unit, f"{where}: inter_chunk_latency") for gap in gaps.value] \
        if gaps is not None and isinstance(gaps.value, list) else []
    prompt, output = scalar("input_sequence_length"), scalar("output_sequence_length")
    return RequestRow(index, True, prompt_tokens=None if prompt is None else int(prompt),
                      completion_tokens=None if output is None else int(output),
                      ttft_ms=timed("time_to_first_token"), tpot_ms=timed("inter_token_latency"),
                      e2e_ms=timed("request_latency"), itl_ms=itl)
