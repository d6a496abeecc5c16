"""Reasoning streams: thinking tokens stamped, counted and kept apart from the answer, in each
server's shape (SGLang's and vLLM's `reasoning_content`, newer vLLM's `reasoning`, a `<think>`
block left inline), then the time to the first answer token and GSM8K scoring of the answer alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

import pandas as pd
import pytest

from harness.engines.base import ASSUMED_ONE_PER_CHUNK
from harness.engines.openai import OpenAIBackend
from harness.metrics import derive_requests
from harness.metrics.reasoning import reasoning_tokens
from harness.records.reasoning import answer_text, split_reasoning
from harness.records.requests import COLUMNS, RecordWriter, RequestRecord, load_requests, write_parquet
from harness.spec import Prompt, SamplingParams
from tests.unit.conftest import build_record, ns_at
from tests.unit.test_openai_client import FakeServer, send, sse
from workloads.gsm8k_scoring import score_table

SAMPLING = SamplingParams(max_new_tokens=64)
ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}


def delta(fields: dict[str, Any], usage: int | None = None, finish: str | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}
    if usage is not None:
        chunk["usage"] = {"prompt_tokens": 9, "completion_tokens": usage, "total_tokens": 9 + usage}
    return chunk


def final_usage(completion: int, reasoning: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": 9, "completion_tokens": completion, "total_tokens": 9 + completion}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {"choices": [], "usage": usage}


# Each server's shape: three thinking chunks then two answer chunks; (chunks, index of the first
# token chunk that brings answer text among the token-bearing chunks).
SGLANG = [ROLE, *(delta({"content": None, "reasoning_content": t}) for t in ("Six", " times", " seven.")),
          delta({"content": "The answer"}), delta({"content": " is 42."}, finish="stop"), final_usage(5, 3)]
VLLM = [ROLE, *(delta({"reasoning_content": t}, usage=n) for n, t in enumerate(("Six", " times", " seven."), 1)),
        delta({"content": "The answer"}, usage=4), delta({"content": " is 42."}, usage=5, finish="stop"),
        final_usage(5, 3)]
VLLM_NEW = [ROLE, *(delta({"reasoning": t}, usage=n) for n, t in enumerate(("Six", " times", " seven."), 1)),
            delta({"content": "The answer"}, usage=4), delta({"content": " is 42."}, usage=5, finish="stop"),
            final_usage(5)]
# vLLM releases that send both names carry the same text in each: kept once.
VLLM_BOTH = [ROLE, *(delta({"reasoning": t, "reasoning_content": t}, usage=n)
                     for n, t in enumerate(("Six", " times", " seven."), 1)),
             delta({"content": "The answer"}, usage=4), delta({"content": " is 42."}, usage=5, finish="stop"),
             final_usage(5, 3)]
SHAPES = {"sglang_reasoning_content": SGLANG, "vllm_reasoning_content": VLLM, "vllm_reasoning": VLLM_NEW,
          "vllm_both_names": VLLM_BOTH}


def stream(chunks: list[dict[str, Any]]):
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    server = FakeServer({"/v1/chat/completions": sse(body)})
    prompt = Prompt("gsm8k-0", SAMPLING, text="What is six times seven?")
    return send(OpenAIBackend(model="tiny", chat=True), server, prompt), prompt


@pytest.mark.parametrize("shape", SHAPES)
def test_thinking_chunks_are_stamped_counted_and_kept_apart(shape):
    result, _ = stream(SHAPES[shape])
    assert result.reasoning_text == "Six times seven."
    assert result.text == "The answer is 42."
    assert result.chunk_tokens == [1, 2, 3, 4, 5]  # every thinking chunk is a token arrival
    assert result.first_token_ns == result.chunk_ns[0]  # TTFT: the first thinking token
    assert result.text_ns == result.chunk_ns[3:]  # the answer's arrivals, after the thinking
    assert result.text_chars == [len("The answer"), len("The answer is 42.")]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_record_keeps_the_thinking_and_times_the_answer(shape):
    result, prompt = stream(SHAPES[shape])
    record = RequestRecord.build(run_id="r", seq=0, workload="gsm8k", engine="openai", api="openai",
                                 prompt=prompt, result=result)
    assert (record.reasoning_text, record.output_text) == ("Six times seven.", "The answer is 42.")
    derived = derived_of(record)
    assert derived.loc[0, "ttft_ms"] == (result.chunk_ns[0] - result.sent_ns) / 1e6
    assert derived.loc[0, "ttfat_ms"] == (result.chunk_ns[3] - result.sent_ns) / 1e6


def test_without_running_usage_thinking_chunks_count_one_each():
    result, _ = stream(SGLANG)
    assert result.meta["chunk_token_counts"] == ASSUMED_ONE_PER_CHUNK
    assert result.completion_tokens == 5


def test_inline_think_block_is_raw_in_the_client_and_split_in_the_record():
    chunks = [ROLE, *(delta({"content": t}) for t in ("<think>", "Six times seven.", "</think>", "\n\n", "42")),
              final_usage(5)]
    result, _ = stream(chunks)
    assert result.text == "<think>Six times seven.</think>\n\n42"  # the client keeps the raw text
    assert result.reasoning_text == ""
    assert split_reasoning(result.text) == ("Six times seven.", "42")
    # the first answer arrival is the chunk that brought "42", not the whitespace after </think>
    record = RequestRecord.build(run_id="r", seq=0, workload="gsm8k", engine="openai", api="openai",
                                 prompt=stream(chunks)[1], result=result)
    derived = derive_requests(pd.DataFrame([asdict(record)], columns=COLUMNS))
    assert derived.loc[0, "ttfat_ms"] == pytest.approx((result.chunk_ns[4] - result.sent_ns) / 1e6)


@pytest.mark.parametrize(("text", "split"), [
    ("plain answer", ("", "plain answer")),
    ("Thinking opened by the template.</think>\nThe answer", ("Thinking opened by the template.", "The answer")),
    ("<think>cut off while thi", ("cut off while thi", "")),
    ("  <think>\nhm\n</think>  ok", ("hm", "ok")),
])
def test_split_reasoning(text, split):
    assert split_reasoning(text) == split


def reasoning_record(texts_at: list[tuple[float, str]], reasoning: str = "", **extra) -> RequestRecord:
    """A record whose first token arrives at 100 ms and whose answer text arrives at `texts_at`
    (ms, new text) per chunk."""
    record = build_record(chunks=[(100.0, 1), *((ms, 1) for ms, _ in texts_at)], engine="openai",
                          texts=[text for _, text in texts_at], **extra)
    text = ""
    for ms, new in texts_at:
        text += new
        record.text_ns.append(ns_at(ms))
        record.text_chars.append(len(text))
    record.reasoning_text = reasoning
    return record


def derived_of(*records: RequestRecord) -> pd.DataFrame:
    return derive_requests(pd.DataFrame([asdict(r) for r in records], columns=COLUMNS))


def test_ttfat_is_the_first_answer_arrival_and_ttft_the_first_token():
    streamed = reasoning_record([(300.0, "The answer"), (310.0, " is 42.")], reasoning="Six times seven.")
    inline = reasoning_record([(150.0, "<think>hm"), (200.0, "</think>"), (250.0, "\n"), (400.0, "42")])
    unfinished = reasoning_record([(150.0, "<think>hm, still")])
    derived = derived_of(streamed, inline, unfinished)
    assert list(derived["ttft_ms"]) == [100.0, 100.0, 100.0]
    assert list(derived["ttfat_ms"][:2]) == [300.0, 400.0]
    assert math.isnan(derived["ttfat_ms"][2])  # no answer arrived


def test_ttfat_of_a_record_without_text_stamps():
    plain = build_record(chunks=[(100.0, 1), (120.0, 1)], engine="openai", texts=["4", "2"])
    thinking = build_record(chunks=[(100.0, 1), (120.0, 1)], engine="openai", texts=["hm</think>", "42"])
    streamed = build_record(chunks=[(100.0, 1), (120.0, 1)], engine="openai", texts=["42"])
    streamed.reasoning_text = "hm"
    derived = derived_of(plain, thinking, streamed)
    assert derived.loc[0, "ttfat_ms"] == derived.loc[0, "ttft_ms"] == 100.0  # no thinking: the first token
    # thinking, inline or streamed apart, and no stamp says when the answer came
    assert math.isnan(derived.loc[1, "ttfat_ms"]) and math.isnan(derived.loc[2, "ttfat_ms"])


def test_ttfat_is_a_difference_of_stamps_whatever_their_origin():
    """perf_counter_ns counts from an arbitrary point: a request sent 1 ms after it still gets its
    answer's time from the difference (3.5 - 1 ms), not from any other combination of the stamps."""
    early = reasoning_record([(300.0, "42")])
    early.sent_ns, early.text_ns, early.first_token_ns, early.chunk_ns = 1_000_000, [3_500_000], 3_500_000, [3_500_000]
    early.last_token_ns, early.end_ns = 3_500_000, 3_600_000
    assert derived_of(early).loc[0, "ttfat_ms"] == 2.5


def test_a_request_without_any_token_has_no_answer_time(make_record, frame_of):
    derived = derive_requests(frame_of([make_record(chunks=[], completion_tokens=0)]))
    assert math.isnan(derived.loc[0, "ttfat_ms"])


def test_reasoning_tokens_from_the_servers_usage():
    assert reasoning_tokens({"usage": {"completion_tokens_details": {"reasoning_tokens": 3}}}) == 3.0
    assert math.isnan(reasoning_tokens({"usage": {"completion_tokens": 5}}))
    assert math.isnan(reasoning_tokens({"usage": {"completion_tokens_details": None}}))
    record = build_record(engine="openai", meta={"usage": {"completion_tokens": 1,
                                                           "completion_tokens_details": {"reasoning_tokens": 1}}})
    assert derived_of(record).loc[0, "reasoning_tokens"] == 1.0


def test_gsm8k_scores_the_answer_not_the_thinking():
    item = json.dumps({"gold": "42", "question_index": 0})
    outputs = ["Is it 41?</think>\nThe answer is 42.", "Is it 41?</think>\nI cannot tell."]
    requests = pd.DataFrame({"prompt_id": ["gsm8k-0", "gsm8k-1"], "item_json": [item, item.replace("0}", "1}")],
                             "status": ["ok", "ok"], "output_text": outputs})
    scored = score_table(requests)
    assert list(scored["pred_flexible"]) == ["42", None]  # the 41 of the thinking is never taken
    assert list(scored["correct_flexible"]) == [True, False]
    assert answer_text(None) == ""


OLD_FIELDS = ("reasoning_text", "text_ns", "text_chars")


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_records_keep_the_reasoning_and_read_old_runs(tmp_path, kind):
    record = reasoning_record([(300.0, "42")], reasoning="Six times seven.")
    writer = RecordWriter(tmp_path)
    writer.append(record)
    writer.close()
    if kind == "parquet":
        write_parquet(tmp_path)
    frame = load_requests(tmp_path)
    assert frame.loc[0, "reasoning_text"] == "Six times seven."
    assert list(frame.loc[0, "text_ns"]) == [ns_at(300.0)]
    old = tmp_path / "old"  # a run written before these fields existed
    old.mkdir()
    line = {k: v for k, v in asdict(record).items() if k not in OLD_FIELDS} | {"output_text": "42"}
    if kind == "parquet":
        pd.DataFrame([line]).to_parquet(old / "requests.parquet", index=False)
    else:
        (old / "requests.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    frame = load_requests(old)
    assert frame.loc[0, "reasoning_text"] == "" and list(frame.loc[0, "text_ns"]) == []
    assert derive_requests(frame).loc[0, "ttfat_ms"] == 100.0  # no thinking shown: the first token
