"""Which tool wrote a file, told from its keys, and its runs read by that tool's importer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from harness.imports.aiperf import (
    AGGREGATES_FILE,
    is_aiperf_aggregates,
    is_aiperf_record,
    read_aiperf_aggregates,
    read_aiperf_records,
)
from harness.imports.imported import Imported
from harness.imports.sglang_bench import is_sglang_result, read_sglang
from harness.imports.vllm_bench import is_vllm_result, read_vllm

KNOWN = ("vllm bench serve --save-result JSON, sglang bench_serving --output-file JSONL, "
         "AIPerf profile_export.jsonl or profile_export_aiperf.json")


def read_runs(path: Path) -> list[Imported]:
    """Every run the file holds: one per line of a results file that several runs appended to."""
    objs = json_objects(path)
    if is_aiperf_record(objs[0]):
        return [read_aiperf_records(objs, str(path), _aiperf_beside(path))]
    return [_one_run(obj, f"{path}" + (f": line {number}" if len(objs) > 1 else ""))
            for number, obj in enumerate(objs, start=1)]


def _one_run(obj: dict[str, Any], where: str) -> Imported:
    if is_vllm_result(obj):
        return read_vllm(obj, where)
    if is_sglang_result(obj):
        return read_sglang(obj, where)
    if is_aiperf_aggregates(obj):
        return read_aiperf_aggregates(obj, where)
    raise SparkbenchError(f"{where}: not a results file this import knows ({KNOWN})")


def json_objects(path: Path) -> list[dict[str, Any]]:
    """The file as one JSON object, else as JSON lines (blank lines skipped); each must be an object."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SparkbenchError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    try:
        objs = [json.loads(text)]
    except json.JSONDecodeError:
        objs = [_line(line, number, path) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not objs:
        raise SparkbenchError(f"{path}: empty; nothing to import")
    for number, obj in enumerate(objs, start=1):
        if not isinstance(obj, dict):
            raise SparkbenchError(f"{path}: line {number} is not a JSON object ({KNOWN})")
    return objs


def _line(line: str, number: int, path: Path) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise SparkbenchError(f"{path}: line {number} is not valid JSON ({exc.msg})") from exc


def _aiperf_beside(path: Path) -> dict[str, Any] | None:
    """AIPerf's aggregates JSON in the same folder as its records, when it is there."""
    beside = path.with_name(AGGREGATES_FILE)
    if not beside.is_file():
        return None
    obj = json_objects(beside)[0]
    return obj if is_aiperf_aggregates(obj) else None
