"""What the harness writes it reads back: a record of every error kind, and every lie a server can
tell in its counts, survives the JSONL and the Parquet table and passes the load check."""

from __future__ import annotations

import pytest

from harness.engines.base import ERROR_KINDS, ERROR_TYPES, StreamResult
from harness.records.requests import RecordWriter, RequestRecord, load_requests, write_parquet
from harness.spec import Prompt, SamplingParams

ASKED = 4
SAMPLING = SamplingParams(max_new_tokens=ASKED, ignore_eos=True)
# The counts a lying server sent (completion, running counts per chunk), each judged impossible.
LIES = {"negative": (-3, [1, 2]), "huge float chunk": (4, [1, 1e300]), "past int64": (10**70, [1, 10**70]),
        "fraction": (3.5, [1, 3.5]), "text": ("4", [1, 2]), "infinite": (float("inf"), [1, 2]),
        "a billion": (10**9, [1, 10**9])}


def _result(completion=ASKED, chunk_tokens=(1, 2, 3, ASKED), finish_reason="length") -> StreamResult:
    chunk_ns = [200 + 100 * index for index in range(len(chunk_tokens))]
    return StreamResult(sent_unix_s=1.0, sent_ns=100, end_ns=900, first_token_ns=chunk_ns[0] if chunk_ns else None,
                        last_token_ns=chunk_ns[-1] if chunk_ns else None, chunk_ns=chunk_ns,
                        chunk_tokens=list(chunk_tokens), text="abcd", meta={"completion_tokens": completion},
                        prompt_tokens=3, completion_tokens=completion, cached_tokens=0,
                        finish_reason=finish_reason, received_bytes=256)


def result_of_kind(kind: str) -> StreamResult:
    """A finished request that the record judges to be of `kind`."""
    if kind in ERROR_TYPES:
        return _result(completion=2, chunk_tokens=(1, 2)).fail(ERROR_TYPES[kind]("the server failed"), 900)
    return {"aborted": lambda: _result(finish_reason="abort"),
            "no_tokens": lambda: _result(completion=0, chunk_tokens=()),
            "short_output": lambda: _result(completion=2, chunk_tokens=(1, 2)),
            "impossible_count": lambda: _result(completion=-3, chunk_tokens=(1, 2))}[kind]()


def _write(tmp_path, results: list[StreamResult]) -> None:
    writer = RecordWriter(tmp_path)
    for seq, result in enumerate(results):
        writer.append(RequestRecord.build(run_id="r", seq=seq, workload="synthetic", engine="sglang", api="sglang",
                                          prompt=Prompt(f"p{seq}", SAMPLING, text="x"), result=result))
    writer.close()


def _read_both_ways(tmp_path):
    from_jsonl = load_requests(tmp_path)
    write_parquet(tmp_path)
    return from_jsonl, load_requests(tmp_path)


def test_a_record_of_every_error_kind_reads_back(tmp_path):
    kinds = [kind for kind in ERROR_KINDS]
    _write(tmp_path, [result_of_kind(kind) for kind in kinds] + [_result()])
    for table in _read_both_ways(tmp_path):
        assert table["error_kind"].tolist()[:-1] == kinds
        assert table["status"].tolist() == ["error"] * len(kinds) + ["ok"]


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_lie_in_the_counts_is_an_impossible_count_that_reads_back(lie, tmp_path):
    completion, chunk_tokens = LIES[lie]
    _write(tmp_path, [_result(completion=completion, chunk_tokens=chunk_tokens), _result()])
    for table in _read_both_ways(tmp_path):
        assert table["status"].tolist() == ["error", "ok"] and table.loc[0, "error_kind"] == "impossible_count"
        lied = table.iloc[0]
        assert str(completion)[:6] in lied["error_message"] or str(chunk_tokens[-1])[:6] in lied["error_message"]
        assert len(lied["chunk_ns"]) == len(lied["chunk_tokens"])
