"""Per-request records on disk: durable appends, torn and corrupt files, Parquet round trip."""

from __future__ import annotations

import json
from dataclasses import asdict

import pandas as pd
import pytest

from harness.engines.base import StreamResult
from harness.errors import SparkbenchError
from harness.records.manifest import RunRecord
from harness.records.requests import COLUMNS, RecordWriter, RequestRecord, json_lines, load_requests, write_parquet
from harness.secrets import MASK, remember
from harness.spec import Prompt, SamplingParams


def _record(seq: int) -> RequestRecord:
    result = StreamResult(sent_unix_s=1.0, sent_ns=100, end_ns=900, first_token_ns=200, last_token_ns=800,
                          chunk_ns=[200, 800], chunk_tokens=[1, 3], text="abc", output_ids=[5, 6, 7],
                          meta={"completion_tokens": 3}, prompt_tokens=4, completion_tokens=3,
                          cached_tokens=0, finish_reason="length", stream_mode="cumulative",
                          received_bytes=64)
    prompt = Prompt(f"p{seq}", SamplingParams(max_new_tokens=3), input_ids=(1, 2, 3, 4), item={"gold": "7"})
    return RequestRecord.build(run_id="r", seq=seq, workload="synthetic", engine="sglang", api="sglang",
                               prompt=prompt, result=result)


def test_parquet_round_trip_keeps_one_row_per_request(tmp_path):
    writer = RecordWriter(tmp_path)
    for seq in range(3):
        writer.append(_record(seq))
    writer.close()
    write_parquet(tmp_path)
    table = load_requests(tmp_path)
    assert list(table.columns) == COLUMNS
    assert table["seq"].tolist() == [0, 1, 2]
    assert list(table.loc[0, "chunk_tokens"]) == [1, 3]
    assert json.loads(table.loc[0, "item_json"]) == {"gold": "7"}
    assert json.loads(table.loc[0, "sampling_json"])["max_new_tokens"] == 3


def test_each_append_is_on_disk_before_the_next(tmp_path):
    writer = RecordWriter(tmp_path)
    writer.append(_record(0))
    assert len((tmp_path / "requests.jsonl").read_text().splitlines()) == 1  # without close()
    writer.close()


def test_a_torn_last_line_is_dropped(tmp_path):
    writer = RecordWriter(tmp_path)
    writer.append(_record(0))
    writer.close()
    with (tmp_path / "requests.jsonl").open("a") as f:
        f.write('{"run_id": "r", "seq": 1, "prom')
    assert load_requests(tmp_path)["seq"].tolist() == [0]


def test_a_corrupt_middle_line_is_a_one_line_error(tmp_path):
    (tmp_path / "requests.jsonl").write_text('garbage\n{"seq": 1}\n')
    with pytest.raises(SparkbenchError, match="line 1 is not valid JSON"):
        load_requests(tmp_path)


def test_a_corrupt_parquet_file_names_the_jsonl_fallback(tmp_path):
    (tmp_path / "requests.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(SparkbenchError, match="cannot be read as Parquet"):
        load_requests(tmp_path)


def test_a_folder_without_records_is_named(tmp_path):
    with pytest.raises(SparkbenchError, match="is this a run directory"):
        load_requests(tmp_path)


def test_empty_run_writes_an_empty_table(tmp_path):
    RecordWriter(tmp_path).close()
    write_parquet(tmp_path)
    assert isinstance(load_requests(tmp_path), pd.DataFrame) and load_requests(tmp_path).empty


def _legacy_rows() -> list[dict]:
    """Rows as written before records named engine and api apart: only `backend`, the API."""
    rows = []
    for seq, backend in enumerate(("sglang", "openai")):
        row = asdict(_record(seq))
        del row["engine"], row["api"]
        rows.append(row | {"backend": backend})
    return rows


def test_old_jsonl_records_with_only_backend_load(tmp_path):
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _legacy_rows()))
    table = load_requests(tmp_path)
    assert list(table.columns) == COLUMNS
    assert table[["engine", "api"]].values.tolist() == [["sglang", "sglang"], ["vllm", "openai"]]


def test_old_parquet_records_with_only_backend_load(tmp_path):
    pd.DataFrame(_legacy_rows()).to_parquet(tmp_path / "requests.parquet", index=False)
    table = load_requests(tmp_path)
    assert "backend" not in table.columns
    assert table[["engine", "api"]].values.tolist() == [["sglang", "sglang"], ["vllm", "openai"]]


def test_old_manifest_with_only_backend_names_engine_and_api():
    run = {"run_id": "r", "workload": {"name": "synthetic"}}
    assert RunRecord.of({**run, "backend": "openai"}).engine_and_api == ("vllm", "openai")
    assert RunRecord.of({**run, "engine": "sglang", "api": "openai"}).engine_and_api == ("sglang", "openai")


def test_a_secret_that_json_escapes_is_masked_in_the_record_line(tmp_path):
    # A key with a quote and a non-ASCII letter: the line's JSON writes them as \" and \u00e4, where
    # a redaction of the finished line no longer finds the key as it was given.
    key = 'sk-pässwort-"quoted"-2026'
    remember(key)
    record = _record(0)
    record.output_text, record.error_message = f"the key is {key}", f"401 Unauthorized: {key}"
    writer = RecordWriter(tmp_path)
    writer.append(record)
    writer.close()
    written = json_lines(tmp_path / "requests.jsonl")[0]
    assert written["output_text"] == f"the key is {MASK}" and written["error_message"] == f"401 Unauthorized: {MASK}"
    assert written["chunk_ns"] == record.chunk_ns and written["sent_ns"] == record.sent_ns
