"""Every stream form the SGLang client accepts gives the same record.

SGLang streams one answer in two forms (every chunk repeats all text and ids so far, or carries only
the new ones) and, under load, a chunk may carry several tokens. One answer, six tokens with an
empty piece and a two-byte character among them, is served in each form at one and at several
tokens a chunk; the records the runner would write from them must agree field by field, apart from
the clock readings (each stream is read at its own times) and the stream form it names."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import httpx
import pytest

from harness.engines.sglang import generate
from harness.records.requests import RequestRecord
from harness.spec import Prompt, SamplingParams
from tests.fakes.replay import mock_session

PROMPT = Prompt("p0", SamplingParams(max_new_tokens=6, ignore_eos=True), input_ids=(17, 6, 7))
IDS = [11, 12, 13, 14, 15, 16]
PIECES = ["a", " b", "c", "", " d", "é"]
FINAL_META = {"prompt_tokens": 3, "cached_tokens": 1, "finish_reason": {"type": "length", "length": 6},
              "spec_verify_ct": 3, "spec_accept_length": 2.0, "e2e_latency": 0.5}
GROUPS = {"one a chunk": [[0], [1], [2], [3], [4], [5]], "several a chunk": [[0], [1, 2, 3], [4, 5]]}
CLOCK_FIELDS = {"sent_unix_s", "sent_ns", "first_token_ns", "last_token_ns", "end_ns", "chunk_ns", "text_ns"}


def body(groups: list[list[int]], cumulative: bool) -> str:
    """The answer as SGLang streams it, `groups` the token positions each chunk brings: compact JSON,
    `meta_info` last, so the client's fast path for cumulative chunks (meta_info alone) is taken."""
    lines = []
    for number, group in enumerate(groups):
        upto = group[-1] + 1
        shown = range(upto) if cumulative else group
        meta = {"completion_tokens": upto, "prompt_tokens": 3, "cached_tokens": 1, "finish_reason": None}
        if number == len(groups) - 1:
            meta = {"completion_tokens": upto, **FINAL_META}
        lines.append("data: " + json.dumps({"text": "".join(PIECES[i] for i in shown),
                                            "output_ids": [IDS[i] for i in shown], "meta_info": meta},
                                           separators=(",", ":"), ensure_ascii=False))  # as SGLang writes it
    return "\n\n".join([*lines, "data: [DONE]"]) + "\n\n"


def record(sse: str) -> dict:
    async def go():
        async with mock_session(lambda request: httpx.Response(200, content=sse.encode())) as http:
            return await generate(http, "http://server", PROMPT)

    result = asyncio.run(go())
    built = RequestRecord.build(run_id="r", seq=0, workload="w", engine="sglang", api="sglang", prompt=PROMPT,
                                result=result)
    return dataclasses.asdict(built)


@pytest.fixture(scope="module")
def records() -> dict[tuple[str, str], dict]:
    return {(grouping, form): record(body(groups, form == "cumulative"))
            for grouping, groups in GROUPS.items() for form in ("cumulative", "incremental")}


@pytest.mark.parametrize("grouping", list(GROUPS))
def test_both_forms_give_the_same_record_but_for_the_clock_and_the_form(records, grouping):
    cumulative, incremental = records[(grouping, "cumulative")], records[(grouping, "incremental")]
    assert (cumulative["stream_mode"], incremental["stream_mode"]) == ("cumulative", "incremental")
    fields = set(cumulative) - CLOCK_FIELDS - {"stream_mode"}
    assert {f: cumulative[f] for f in fields} == {f: incremental[f] for f in fields}
    assert len(cumulative["chunk_ns"]) == len(incremental["chunk_ns"]) == len(GROUPS[grouping])


def test_every_form_records_the_whole_answer_and_the_servers_counts(records):
    for key, got in records.items():
        assert got["output_ids"] == IDS and got["output_text"] == "".join(PIECES), key
        assert (got["prompt_tokens"], got["completion_tokens"], got["cached_tokens"]) == (3, 6, 1), key
        assert got["finish_reason"] == "length" and got["status"] == "ok", key
        assert json.loads(got["meta_info_json"])["spec_verify_ct"] == 3, key
    assert records[("one a chunk", "incremental")]["chunk_tokens"] == [1, 2, 3, 4, 5, 6]
    assert records[("several a chunk", "cumulative")]["chunk_tokens"] == [1, 4, 6]
