"""The llama.cpp adapter on recorded llama-server streams and answers, through httpx.MockTransport.

Fixtures `tests/fixtures/llamacpp_0.3.36_cuda_*` are real bodies from llama-server (llama.cpp as
vendored in llama-cpp-python 0.3.36, built with CUDA on an H200 by scripts/gpu/h200.sh, which records
them with scripts/record_llamacpp_fixtures.py) serving the test bed's tiny model greedily:
- completion_plain.sse: `/completion`, prompt ids 5, 6, 7, 32 tokens, no speculation;
- completion_draft.sse: the same with the q8_0 draft model (`--spec-type draft-simple`, 3 drafts):
  23 drafted, 23 accepted, in 8 drafting rounds by the server's own counter;
- props_plain.json, props_draft.json: `GET /props` of those two servers (neither says whether the
  server speculates); metrics_draft.prom: `GET /metrics` after the draft request.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.engines.base import ServerHTTPError, StreamIncomplete
from harness.engines.detect import make_backend
from harness.engines.llamacpp import LlamaCppBackend, llamacpp_server_facts
from harness.engines.openai import OpenAIBackend
from harness.engines.registry import detect, engine_named
from harness.spec import Prompt, SamplingParams
from tests.fakes.replay import mock_session

FIXTURES = Path(__file__).parent.parent / "fixtures"
BASE = "http://llamacpp.test"
GREEDY_32 = SamplingParams(max_new_tokens=32, ignore_eos=True)
ENGINE = engine_named("llamacpp")


def fixture_text(name: str) -> str:
    return (FIXTURES / f"llamacpp_0.3.36_cuda_{name}").read_text(encoding="utf-8")


def chunks_of(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def body_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)


def send(body: str, prompt: Prompt | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """Stream `body` as the answer to one prompt; (result, request bodies the server received)."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})

    async def go():
        async with mock_session(handler) as http:
            return await LlamaCppBackend().send(http, BASE, prompt or Prompt("p", GREEDY_32, input_ids=(5, 6, 7)))
    return asyncio.run(go()), sent


def test_counts_and_stamps_come_from_the_servers_running_count():
    chunks = chunks_of(fixture_text("completion_plain.sse"))
    result, _ = send(fixture_text("completion_plain.sse"))
    final = chunks[-1]
    assert final["stop"] is True and result.meta["timings"] == final["timings"]
    assert (result.completion_tokens, result.prompt_tokens) == (32, 3)
    assert result.finish_reason == "length" and result.cached_tokens == 0
    assert result.chunk_tokens == [c["tokens_predicted"] for c in chunks[:-1]]
    assert result.chunk_tokens[-1] == 32 and result.first_token_ns == result.chunk_ns[0]
    assert result.output_ids == [t for c in chunks for t in c.get("tokens", [])]
    assert "chunk_token_counts" not in result.meta  # the server's counts, never assumed


def test_a_token_with_no_text_and_a_held_back_token_are_still_counted():
    chunks = chunks_of(fixture_text("completion_plain.sse"))
    chunks[3]["content"] = ""  # a control token: no text, one id
    del chunks[5]  # bytes held back until a UTF-8 character completes: llama.cpp sends no chunk
    result, _ = send(body_of(chunks))
    assert 4 in result.chunk_tokens and 6 not in result.chunk_tokens
    assert result.chunk_tokens[-1] == result.completion_tokens == 32


def test_request_is_explicit_about_sampling_and_asks_for_token_ids():
    sampling = SamplingParams(max_new_tokens=8, temperature=0.6, top_p=0.95, top_k=29, stop=("Question:",), seed=3)
    _, sent = send(fixture_text("completion_plain.sse"), Prompt("p", sampling, text="Q"))
    assert sent[-1] == {"prompt": "Q", "stream": True, "n_predict": 8, "temperature": 0.6, "top_p": 0.95,
                        "top_k": 29, "min_p": 0.0, "ignore_eos": False, "stop": ["Question:"],
                        "return_tokens": True, "seed": 3}


def test_a_stream_without_its_final_chunk_is_recorded_as_incomplete():
    result, _ = send(body_of(chunks_of(fixture_text("completion_plain.sse"))[:-1]))
    assert result.error_kind == StreamIncomplete.kind and "without [DONE]" in result.error_message
    assert result.chunk_tokens[-1] == 32  # what arrived before stays


def test_an_error_mid_stream_is_recorded_in_one_line():
    chunks = chunks_of(fixture_text("completion_plain.sse"))[:3] + [{"error": {"message": "slot died"}}]
    result, _ = send(body_of(chunks))
    assert result.error_kind == ServerHTTPError.kind and result.error_message.endswith("mid-stream: slot died")


def test_server_times_and_no_speculation_without_drafts():
    result, _ = send(fixture_text("completion_plain.sse"))
    timings = result.meta["timings"]
    ttft, e2e = ENGINE.server_times_ms(result.meta)
    assert (ttft, e2e) == (timings["prompt_ms"], timings["prompt_ms"] + timings["predicted_ms"])
    assert all(math.isnan(v) for v in ENGINE.speculation(result.meta, 32.0).values())
    assert math.isnan(ENGINE.engine_steps(result.meta))


def test_speculation_rounds_are_the_decode_steps_after_the_first_token():
    result, _ = send(fixture_text("completion_draft.sse"))
    timings = result.meta["timings"]
    spec = ENGINE.speculation(result.meta, float(result.completion_tokens))
    accepted = timings["draft_n_accepted"]
    assert spec["verify_rounds"] == timings["predicted_n"] - 1 - accepted
    assert spec["verify_rounds"] == 8  # the server's own count of drafting rounds for this request
    assert spec["accept_length"] == pytest.approx(1 + accepted / spec["verify_rounds"])
    assert spec["accept_rate"] == pytest.approx(accepted / timings["draft_n"])
    assert ENGINE.engine_steps(result.meta) == spec["verify_rounds"] + 1


def test_made_up_timings_give_the_stated_formulas():
    meta = {"timings": {"prompt_ms": 12.5, "predicted_ms": 90.0, "predicted_n": 31, "draft_n": 30,
                        "draft_n_accepted": 20, "cache_n": 0}}
    spec = ENGINE.speculation(meta, 31.0)
    assert (spec["verify_rounds"], spec["accepted_draft_tokens"], spec["proposed_draft_tokens"]) == (10, 20, 30)
    assert spec["accept_length"] == 3.0 and spec["accept_rate"] == pytest.approx(2 / 3)
    assert ENGINE.server_times_ms(meta) == (12.5, 102.5)


def test_openai_route_records_keep_the_timings_for_the_same_reader():
    from harness.engines.base import StreamResult
    from harness.engines.openai import _absorb_chunk

    result = StreamResult(sent_unix_s=0.0, sent_ns=0)
    timings = {"prompt_ms": 3.0, "predicted_ms": 30.0, "predicted_n": 11}
    _absorb_chunk(result, {"choices": [], "usage": {"completion_tokens": 11}, "timings": timings}, 5)
    assert ENGINE.server_times_ms(result.meta) == (3.0, 33.0)


def routes(paths: dict[str, httpx.Response]) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(
        lambda request: paths.get(request.url.path, httpx.Response(404, json={"error": "not found"}))))


def test_detected_by_its_props_before_the_generic_openai_server():
    props = json.loads(fixture_text("props_plain.json"))
    models = httpx.Response(200, json={"data": [{"id": "m", "owned_by": "llamacpp"}]})
    with routes({"/props": httpx.Response(200, json=props), "/v1/models": models}) as http:
        assert detect(http, BASE).name == "llamacpp"
    with routes({"/props": httpx.Response(200, json={"other": 1}), "/v1/models": models}) as http:
        assert detect(http, BASE).name == "openai"


def test_auto_backend_speaks_the_native_api(monkeypatch):
    monkeypatch.setattr("harness.engines.detect.detect_engine", lambda base_url, headers=None: ENGINE)
    client = make_backend("auto", BASE)
    assert (client.name, client.engine) == ("llamacpp", "llamacpp")


SLOT_SPECULATING, SLOT_PLAIN = {"id": 0, "speculative": True}, {"id": 0, "speculative": False}


def test_guard_facts_say_what_the_server_runs():
    props = json.loads(fixture_text("props_draft.json"))
    plain = llamacpp_server_facts(json.loads(fixture_text("props_plain.json")), [SLOT_PLAIN], ())
    assert (plain["speculative_algorithm"], plain["speculative_num_steps"]) == (None, None)
    assert plain["quantization"] == "BF16" and plain["model_path"].endswith("model.gguf")
    draft = llamacpp_server_facts(props, [SLOT_SPECULATING], ("--spec-type", "draft-simple", "--spec-draft-n-max", "5"))
    assert (draft["speculative_algorithm"], draft["speculative_num_steps"],
            draft["speculative_num_draft_tokens"]) == ("draft-simple", 5, 6)
    assert llamacpp_server_facts(props, [SLOT_SPECULATING], ())["speculative_num_steps"] == 3  # the default


def test_without_slots_the_speculative_facts_are_not_reported():
    facts = llamacpp_server_facts(json.loads(fixture_text("props_draft.json")), None, ("--spec-type", "draft-simple"))
    assert "speculative_algorithm" not in facts  # the guard then fails the check: silence is not agreement


def test_a_server_that_says_it_does_not_speculate_is_believed_over_its_flags():
    facts = llamacpp_server_facts({}, [SLOT_PLAIN], ("--spec-type", "draft-simple"))
    assert facts["speculative_algorithm"] is None and facts["speculative_num_draft_tokens"] is None


def test_counters_read_llamacpps_speculative_totals():
    text = fixture_text("metrics_draft.prom")

    async def go():
        transport = httpx.MockTransport(lambda request: httpx.Response(200, text=text))
        async with httpx.AsyncClient(transport=transport) as http:
            return await LlamaCppBackend().counters(http, BASE)
    counters = asyncio.run(go())
    assert counters == DRAFT_COUNTERS


DRAFT_COUNTERS = {"drafts": 8.0, "draft_tokens": 23.0, "accepted_tokens": 23.0,
                  "accepted_tokens_pos_0": 8.0, "accepted_tokens_pos_1": 8.0, "accepted_tokens_pos_2": 7.0}


def _openai_counters(engine: str, text: str):
    async def go():
        transport = httpx.MockTransport(lambda request: httpx.Response(200, text=text))
        async with httpx.AsyncClient(transport=transport) as http:
            return await OpenAIBackend(engine=engine).counters(http, BASE)
    return asyncio.run(go())


def test_through_the_openai_api_the_counters_are_llamacpps_own_and_absent_ones_not_exported():
    assert _openai_counters("llamacpp", fixture_text("metrics_draft.prom")) == DRAFT_COUNTERS
    plain = "llamacpp:prompt_tokens_total 120\nllamacpp:tokens_predicted_total 384\n"
    assert _openai_counters("llamacpp", plain) is None  # not 0/0/0
    assert _openai_counters("openai", fixture_text("metrics_draft.prom")) is None  # an engine without counters
