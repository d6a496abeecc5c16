"""Valid JSON chunks that still break the protocol: a field of the wrong type, counts that
contradict each other, tokens that arrive without text. Each is a record of a named kind (or an
arrival), never a traceback; the run goes on and its folder reads back (`sparkbench summarize`)."""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import pytest

from harness.analysis.run import Run
from harness.cli.results import summarize
from harness.engines.base import ASSUMED_ONE_PER_CHUNK, StreamResult
from harness.engines.meta import speculation_columns
from harness.engines.openai import OpenAIBackend, stream
from harness.engines.sglang import SGLangBackend, generate
from harness.engines.sse import DONE
from harness.engines.stream import collect
from harness.records.requests import RecordWriter, RequestRecord, load_requests, outcome, write_parquet
from harness.records.rundir import RunDir
from harness.run.runner import RunAborted, RunOptions, execute
from harness.spec import Prompt, SamplingParams
from tests.fakes.broken_server import Breakage, _BrokenHandler
from tests.fakes.replay import mock_session
from tests.fakes.stream_server import Script, threaded

TOKENS = 16
SAMPLING = SamplingParams(max_new_tokens=TOKENS)
PROMPT = Prompt("p0", SAMPLING, text="prompt")


def _lines(chunks: list) -> bytes:
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"


def _streamed(chunks: list, read) -> StreamResult:
    """The result `read(http, base_url)` makes of a server that streams `chunks`, then [DONE]."""
    async def main():
        http = mock_session(lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"},
                                                           content=_lines(chunks)))
        async with http:
            return await read(http, "http://server")

    return asyncio.run(main())


def openai_chunks(chunks: list) -> StreamResult:
    return _streamed(chunks, lambda http, url: stream(http, url, {}, "/v1/completions"))


def sglang_chunks(chunks: list) -> StreamResult:
    return _streamed(chunks, lambda http, url: generate(http, url, PROMPT))


def _sglang(text, ids, count, **meta) -> dict:
    return {"text": text, "output_ids": ids, "meta_info": {"completion_tokens": count, **meta}}


def _openai(text, count) -> dict:
    return {"choices": [{"index": 0, "text": text}], "usage": {"completion_tokens": count}}


def reads_back(result: StreamResult, tmp_path, engine: str) -> dict:
    """The record of `result`, written as a run writes it, read back from its JSONL and its Parquet."""
    record = RequestRecord.build(run_id="r", seq=0, workload="w", engine=engine, api=engine, prompt=PROMPT,
                                 result=result)
    writer = RecordWriter(tmp_path)
    writer.append(record)
    writer.close()
    write_parquet(tmp_path)
    return load_requests(tmp_path).iloc[0].to_dict()


OPENAI_WRONG_TYPES = {
    "usage is text": [_openai("ab", 1), {"choices": [{"text": "ab"}], "usage": "16"}],
    "choices: [null]": [_openai("ab", 1), {"choices": [None], "usage": {"completion_tokens": 2}}],
    "text is a number": [_openai("ab", 1), {"choices": [{"text": 5}], "usage": {"completion_tokens": 2}}],
    "choices is text": [{"choices": "ab", "usage": {"completion_tokens": 1}}],
    "delta is a list": [{"choices": [{"delta": ["ab"]}], "usage": {"completion_tokens": 1}}],
    "content is an object": [{"choices": [{"delta": {"content": {"t": 1}}}], "usage": {"completion_tokens": 1}}],
    "finish_reason is a number": [{"choices": [{"text": "ab", "finish_reason": 5}], "usage": {"completion_tokens": 1}}],
    "prompt_tokens_details is text": [_openai("ab", 1), {"choices": [], "usage": {
        "prompt_tokens": 3, "completion_tokens": 1, "prompt_tokens_details": "7"}}],
    "metrics is text": [_openai("ab", 1), {"choices": [], "usage": {"completion_tokens": 1}, "metrics": "x"}],
}
SGLANG_WRONG_TYPES = {
    "meta_info is text": [_sglang("ab", [1], 1), {"text": "abab", "output_ids": [1, 2], "meta_info": "2"}],
    "output_ids is text": [_sglang("abc", "abc", 3)],
    "an output id is text": [_sglang("ab", [1], 1), _sglang("cd", ["2"], 2)],
    "an output id past 64 bits": [_sglang("ab", [2**64], 1)],
    "text is a number": [_sglang(5, [1], 1)],
    "finish_reason is a number": [_sglang("ab", [1], 1, finish_reason=5)],
    "the last cumulative chunk's ids are text": [_sglang("a", [1], 1), _sglang("ab", [1, 2], 2),
                                                _sglang("abc", [1, 2, 3], 3), _sglang("abcd", "abcd", 4)],
}


@pytest.mark.parametrize("case", sorted(OPENAI_WRONG_TYPES))
def test_a_wrong_typed_openai_field_is_a_malformed_chunk_and_its_record_reads_back(case, tmp_path):
    result = openai_chunks(OPENAI_WRONG_TYPES[case])
    assert result.error_kind == "malformed_chunk", (result.error_kind, result.error_message)
    row = reads_back(result, tmp_path, "vllm")
    assert row["status"] == "error" and row["error_kind"] == "malformed_chunk"


@pytest.mark.parametrize("case", sorted(SGLANG_WRONG_TYPES))
def test_a_wrong_typed_sglang_field_is_a_malformed_chunk_and_its_record_reads_back(case, tmp_path):
    result = sglang_chunks(SGLANG_WRONG_TYPES[case])
    assert result.error_kind == "malformed_chunk", (result.error_kind, result.error_message)
    row = reads_back(result, tmp_path, "sglang")
    assert row["status"] == "error" and row["error_kind"] == "malformed_chunk"


def test_the_wrong_field_is_named_in_the_message():
    result = openai_chunks(OPENAI_WRONG_TYPES["text is a number"])
    assert "choices[0].text is a number, not text" in result.error_message
    result = sglang_chunks(SGLANG_WRONG_TYPES["meta_info is text"])
    assert "meta_info is text, not an object" in result.error_message


# Counts that contradict each other: named in the record, never a rate above 1.

def _result(**counts) -> StreamResult:
    result = StreamResult(sent_unix_s=0.0, sent_ns=0, end_ns=10, received_bytes=10_000, finish_reason="stop")
    for count in range(1, counts.pop("streamed", 4) + 1):
        result.stamp_tokens(count, count)
    for name, value in counts.items():
        setattr(result, name, value)
    return result


@pytest.mark.parametrize(("counts", "named"), [
    ({"prompt_tokens": 10, "completion_tokens": 4, "cached_tokens": 635}, "635 cached tokens of 10 prompt tokens"),
    ({"prompt_tokens": 10, "completion_tokens": 4, "cached_tokens": 1e300}, "past 64 bits"),
    ({"prompt_tokens": None, "completion_tokens": 4, "cached_tokens": 1e300}, "past 64 bits"),
    ({"prompt_tokens": 2**70, "completion_tokens": 4}, "past 64 bits"),
    ({"prompt_tokens": 10, "completion_tokens": 2, "streamed": 4}, "final count of 2 completion tokens is below the 4"),
])
def test_counts_that_contradict_each_other_are_named_in_the_record(counts, named):
    judged = outcome(_result(**counts), SAMPLING)
    assert judged["error_kind"] == "impossible_count" and named in judged["error_message"]


def test_a_closing_count_below_assumed_per_chunk_counts_is_believed():
    """One per text chunk is an assumption, not the server's count: a lower final count is no lie."""
    result = _result(prompt_tokens=10, completion_tokens=2, streamed=4)
    result.meta["chunk_token_counts"] = ASSUMED_ONE_PER_CHUNK
    assert outcome(result, SAMPLING)["status"] == "ok"


@pytest.mark.parametrize(("engine", "meta"), [
    ("sglang", {"spec_verify_ct": 2, "spec_num_correct_drafts": 9, "spec_num_proposed_drafts": 6}),
    ("vllm", {"metrics": {"speculative_decoding": {"num_spec_steps": 2, "num_accepted_draft_tokens": 9,
                                                   "num_draft_tokens": 6}}}),
])
def test_more_accepted_than_drafted_tokens_is_named_and_no_rate_above_1(engine, meta):
    result = _result(prompt_tokens=10, completion_tokens=4)
    result.meta.update(meta)
    judged = outcome(result, SAMPLING, engine)
    assert judged["error_kind"] == "impossible_count"
    assert "9 accepted draft tokens of 6 drafted" in judged["error_message"]
    assert math.isnan(speculation_columns(2.0, 2, 9, 6, math.nan)["accept_rate"])
    assert outcome(result, SAMPLING)["status"] == "ok"  # without the engine, its meta is not read


# Tokens without text: a chunk that advances the server's count is an arrival.

def test_usage_only_chunks_are_token_arrivals_with_a_ttft():
    chunks = [{"choices": [], "usage": {"completion_tokens": count}} for count in (1, 3, 4)]
    result = openai_chunks([*chunks, {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}])
    assert result.error_kind is None
    assert result.first_token_ns is not None and result.chunk_tokens == [1, 3, 4]


def test_the_closing_usage_after_assumed_counts_is_not_an_arrival():
    """A server without running usage: its text chunks are counted one each, and the closing usage
    (the server's first count) stamps nothing at the end."""
    result = openai_chunks([{"choices": [{"text": "ab"}]}, {"choices": [{"text": "cd"}]},
                            {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}])
    assert result.chunk_tokens == [1, 2] and result.completion_tokens == 3


# Whole runs: the bad request is a record of its kind, the others are intact, the folder summarizes.

def _break(kind: str, chunk: dict) -> None:
    """Make `chunk` (the third of its stream) the fault `kind`."""
    meta, usage, choices = chunk.get("meta_info"), chunk.get("usage"), chunk.get("choices")
    if kind == "meta_info_text" and meta is not None:
        chunk["meta_info"] = "3"
    elif kind == "usage_text" and usage is not None:
        chunk["usage"] = "3"
    elif kind == "null_choice" and choices:
        chunk["choices"] = [None]
    elif kind == "text_number":
        if choices:
            choices[0]["text"] = 5
        else:
            chunk["text"] = 5
    elif kind == "ids_text":
        chunk["output_ids"] = "abc"


class _WrongTyped(_BrokenHandler):
    def _event(self, payload) -> None:
        if self._kind and isinstance(payload, dict) and self._events == 2:
            _break(self._kind, payload)
        super()._event(payload)


class _CachedOverPrompt(_BrokenHandler):
    def _event(self, payload) -> None:
        if self._kind and isinstance(payload, dict):
            meta = payload.get("meta_info") or {}
            if meta.get("finish_reason"):
                meta["cached_tokens"] = meta["prompt_tokens"] + 635
            if payload.get("choices") == [] and "usage" in payload:
                payload["usage"]["prompt_tokens_details"] = {"cached_tokens": payload["usage"]["prompt_tokens"] + 635}
        super()._event(payload)


class _AcceptedOverDrafted(_BrokenHandler):
    def _event(self, payload) -> None:
        meta = payload.get("meta_info") if self._kind and isinstance(payload, dict) else None
        if meta and meta.get("finish_reason"):
            meta.update(spec_verify_ct=2, spec_num_correct_drafts=9, spec_num_proposed_drafts=6)
        super()._event(payload)


class FixedLength:
    name = "synthetic"

    def prompts(self):
        sampling = SamplingParams(max_new_tokens=TOKENS, ignore_eos=True)
        return [Prompt(f"p{i}", sampling, text=f"prompt {i}") for i in range(4)]

    def warmup_prompts(self, count):
        return []

    def spec(self):
        return {"name": self.name}


CLIENTS = {"sglang": SGLangBackend, "openai": lambda: OpenAIBackend(model="fake-model", engine="vllm")}


def run_broken(handler: type, kind: str, client: str, tmp_path, **options) -> RunDir:
    """A four-request run whose second request meets `kind`, served by `handler`; `options`: more
    run options."""
    import itertools
    from http.server import ThreadingHTTPServer

    served = type("Served", (handler,), {"script": Script(prefix_cache=True), "breakage": Breakage(kind, frozenset({1})),
                                         "arrivals": itertools.count(), "received": []})
    run = RunDir.create(tmp_path, f"run-{client}", {"workload": {"name": "synthetic"}})
    with threaded(ThreadingHTTPServer(("127.0.0.1", 0), served)) as url:
        settings = RunOptions(base_url=url, warmup=0, show_progress=False, power_sample_ms=0,
                              request_timeout_s=30.0, first_token_timeout_s=3.0, **options)
        execute(CLIENTS[client](), settings, FixedLength(), run)
    return run


WRONG_TYPED_RUNS = [("sglang", "meta_info_text"), ("sglang", "text_number"), ("sglang", "ids_text"),
                    ("openai", "usage_text"), ("openai", "null_choice"), ("openai", "text_number")]


@pytest.mark.parametrize(("client", "kind"), WRONG_TYPED_RUNS)
def test_a_wrong_typed_chunk_is_one_failed_record_and_the_run_summarizes(client, kind, tmp_path, capsys):
    run = run_broken(_WrongTyped, kind, client, tmp_path)
    table = load_requests(run.path)
    assert table["status"].tolist() == ["ok", "error", "ok", "ok"]
    assert table.loc[1, "error_kind"] == "malformed_chunk"
    assert json.loads((run.path / "manifest.json").read_text())["status"] == "complete"
    summarize(run.path)
    assert "requests_ok" in capsys.readouterr().out


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_more_cached_than_prompt_tokens_is_named_and_the_hit_rate_stays_at_most_1(client, tmp_path):
    run = run_broken(_CachedOverPrompt, "cached", client, tmp_path)
    table = load_requests(run.path)
    assert table["status"].tolist() == ["ok", "error", "ok", "ok"]
    assert table.loc[1, "error_kind"] == "impossible_count"
    assert "cached tokens of" in table.loc[1, "error_message"]
    summary = Run.load(run.path).summary.set_index(["metric", "stat"])["value"]
    assert not summary["prefix_cache_hit_rate", "value"] > 1


def test_the_error_budget_counts_more_accepted_than_drafted_tokens(tmp_path):
    """The budget judges a request as its record does, with the draft counts of the run's engine:
    with no error allowed, the contradiction stops the run."""
    with pytest.raises(RunAborted, match=r"more than --max-errors 0 \(impossible_count 1\)"):
        run_broken(_AcceptedOverDrafted, "drafts", "sglang", tmp_path, max_errors=0)
    table = load_requests(tmp_path / "run-sglang")
    assert table["status"].tolist() == ["ok", "error"]
    assert "9 accepted draft tokens of 6 drafted" in table.loc[1, "error_message"]


def test_a_chunk_shape_no_client_foresaw_is_a_malformed_chunk_not_a_traceback():
    async def events():
        yield 1, {"text": "ab"}
        yield 2, DONE

    def absorb(result, chunk, now):
        chunk["meta_info"]["completion_tokens"]  # a client reading a field it never checked

    result = asyncio.run(collect(events(), StreamResult(sent_unix_s=0.0, sent_ns=0), absorb, "http://server"))
    assert result.error_kind == "malformed_chunk" and "KeyError" in result.error_message
