"""The OpenAI-API client on recorded vLLM streams, served through httpx.MockTransport.

Fixtures `tests/fixtures/vllm_0.32.0_cpu_*.sse` are real bodies from vLLM 0.32.0 (CPU build) serving
the 2-layer test-bed model greedily with n-gram speculation (3 draft tokens) and per-request metrics:
- completions_ngram: token-id prompt, 32 tokens, continuous usage; one chunk brings 3 tokens and
  three chunks have empty text (a partial UTF-8 character held back);
- chat_ngram: /v1/chat/completions, 16 tokens; opens with a role-only chunk, ends with a 4-token one;
- completions_usage_at_end: 12 tokens with `include_usage` only (no running counts).
The error and truncated streams are these bodies cut or extended by the tests.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.engines.base import ServerHTTPError, ServerUnreachable, StreamIncomplete
from harness.engines.detect import detect_backend, make_backend, probe
from harness.engines.openai import ASSUMED_ONE_PER_CHUNK, NotOpenAIServer, OpenAIBackend
from harness.engines.sglang import SGLangBackend
from harness.errors import SparkbenchError
from harness.spec import Prompt, SamplingParams
from tests.fakes.replay import mock_session

FIXTURES = Path(__file__).parent.parent / "fixtures"
BASE = "http://vllm.test"
MODELS = {"object": "list", "data": [{"id": "tiny", "object": "model", "owned_by": "vllm"}]}
GREEDY_32 = SamplingParams(max_new_tokens=32, ignore_eos=True)


def fixture_text(name: str) -> str:
    return (FIXTURES / f"vllm_0.32.0_cpu_{name}").read_text(encoding="utf-8")


def data_chunks(body: str) -> list[dict[str, Any]]:
    """The JSON chunks of an SSE body, [DONE] left out."""
    return [json.loads(line[5:]) for line in body.splitlines()
            if line.startswith("data:") and line[5:].strip() != "[DONE]"]


class FakeServer:
    """A MockTransport handler: fixed answers per path, and every request body it was sent."""

    def __init__(self, routes: dict[str, httpx.Response]) -> None:
        self.routes = routes
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.content:
            self.bodies.append(json.loads(request.content))
        return self.routes.get(request.url.path, httpx.Response(404, json={"detail": "Not Found"}))


def sse(body: str, status: int = 200) -> httpx.Response:
    return httpx.Response(status, content=body.encode(), headers={"content-type": "text/event-stream"})


def send(backend: OpenAIBackend, server: FakeServer, prompt: Prompt):
    async def go():
        async with mock_session(server) as http:
            return await backend.send(http, BASE, prompt)
    return asyncio.run(go())


def stream_fixture(name: str, chat: bool = False, prompt: Prompt | None = None):
    """Send one prompt against a server that replays the named fixture; (result, fake server)."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    server = FakeServer({"/v1/models": httpx.Response(200, json=MODELS), path: sse(fixture_text(name))})
    prompt = prompt or Prompt("p0", GREEDY_32, text="Add 2 and 3.")
    return send(OpenAIBackend(chat=chat), server, prompt), server


# --- the recorded completions stream -------------------------------------------------------------


def test_counts_come_from_usage_and_finish_reason_from_the_choice():
    result, _ = stream_fixture("completions_ngram.sse")
    assert (result.prompt_tokens, result.completion_tokens) == (25, 32)
    assert result.cached_tokens is None  # vLLM adds prompt_tokens_details only when asked to
    assert result.finish_reason == "length"
    assert result.stream_mode == "incremental"


def test_one_stamp_per_token_bearing_chunk_with_the_servers_running_count():
    body = fixture_text("completions_ngram.sse")
    token_chunks = [c for c in data_chunks(body) if c["choices"]]
    result, _ = stream_fixture("completions_ngram.sse")
    assert result.chunk_tokens == [c["usage"]["completion_tokens"] for c in token_chunks]
    assert len(result.chunk_ns) == len(result.chunk_tokens) == 30  # 32 tokens in 30 chunks
    steps = [b - a for a, b in zip([0, *result.chunk_tokens], result.chunk_tokens)]
    assert max(steps) == 3  # one engine step brought an accepted draft
    assert result.first_token_ns == result.chunk_ns[0]
    assert result.last_token_ns == result.chunk_ns[-1]
    assert result.sent_ns <= result.first_token_ns <= result.last_token_ns <= result.end_ns
    assert "chunk_token_counts" not in result.meta


def test_empty_text_chunks_still_bring_tokens():
    body = fixture_text("completions_ngram.sse")
    empty = [c["usage"]["completion_tokens"] for c in data_chunks(body)
             if c["choices"] and c["choices"][0]["text"] == ""]
    result, _ = stream_fixture("completions_ngram.sse")
    assert len(empty) == 3
    assert set(empty) <= set(result.chunk_tokens)
    assert result.text == "".join(c["choices"][0]["text"] for c in data_chunks(body) if c["choices"])


def test_meta_keeps_the_final_usage_and_the_per_request_metrics():
    body = fixture_text("completions_ngram.sse")
    final = data_chunks(body)[-1]
    assert final["choices"] == []
    result, _ = stream_fixture("completions_ngram.sse")
    assert result.meta["usage"] == final["usage"]
    assert result.meta["metrics"] == final["metrics"]
    spec = result.meta["metrics"]["speculative_decoding"]
    # One drafting step: 2 of 3 drafts accepted, plus the bonus token = the 3-token chunk.
    assert spec["mean_acceptance_length"] == 3.0
    assert (spec["num_spec_steps"], spec["num_accepted_draft_tokens"], spec["num_draft_tokens"]) == (1, 2, 3)


# --- chat, and a server that sends no running usage ----------------------------------------------


def test_chat_role_chunk_is_not_a_token_and_multi_token_chunks_count_fully():
    result, server = stream_fixture("chat_ngram.sse", chat=True)
    assert result.chunk_tokens[0] == 1  # the opening role chunk carries completion_tokens 0
    assert result.chunk_tokens[-1] == result.completion_tokens == 16
    assert result.chunk_tokens[-1] - result.chunk_tokens[-2] == 4
    assert result.text.startswith(" crot dozens")
    assert server.bodies[-1]["messages"] == [{"role": "user", "content": "Add 2 and 3."}]


def test_without_running_usage_chunks_are_counted_one_each_and_flagged():
    result, _ = stream_fixture("completions_usage_at_end.sse")
    assert result.meta["chunk_token_counts"] == ASSUMED_ONE_PER_CHUNK
    assert result.chunk_tokens == list(range(1, 10))  # 9 text chunks ...
    assert result.completion_tokens == 12  # ... but 12 tokens, as usage says


def test_chunks_without_usage_or_text_do_not_flag_the_counts():
    # SGLang 0.5.23's chat stream, as seen: no usage on the role chunk nor on the finish chunk.
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": "sh"}, "finish_reason": None}],
         "usage": {"prompt_tokens": 19, "total_tokens": 20, "completion_tokens": 1}},
        {"choices": [{"index": 0, "delta": {"content": " 55"}, "finish_reason": None}],
         "usage": {"prompt_tokens": 19, "total_tokens": 22, "completion_tokens": 3}},
        {"choices": [{"index": 0, "delta": {"reasoning_content": None}, "finish_reason": "length"}]},
        {"choices": [], "usage": {"prompt_tokens": 19, "total_tokens": 22, "completion_tokens": 3}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    server = FakeServer({"/v1/chat/completions": sse(body)})
    result = send(OpenAIBackend(model="tiny", chat=True), server, Prompt("p", GREEDY_32, text="hi"))
    assert "chunk_token_counts" not in result.meta
    assert (result.chunk_tokens, result.text, result.finish_reason) == ([1, 3], "sh 55", "length")


# --- the request ----------------------------------------------------------------------------------


def test_request_sends_ids_sampling_and_stream_options_explicitly():
    sampling = SamplingParams(max_new_tokens=8, temperature=0.5, top_p=0.9, top_k=20, stop=("\n",), seed=7)
    _, server = stream_fixture("completions_ngram.sse", prompt=Prompt("p", sampling, input_ids=(5, 6, 7)))
    body = server.bodies[-1]
    assert body["model"] == "tiny"  # the first model /v1/models lists
    assert body["prompt"] == [5, 6, 7]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    sent = {k: body[k] for k in ("temperature", "top_p", "top_k", "max_tokens", "ignore_eos", "stop", "seed")}
    assert sent == {"temperature": 0.5, "top_p": 0.9, "top_k": 20, "max_tokens": 8, "ignore_eos": False,
                    "stop": ["\n"], "seed": 7}


def test_request_leaves_seed_out_when_unset_and_uses_the_given_model():
    server = FakeServer({"/v1/completions": sse(fixture_text("completions_ngram.sse"))})
    send(OpenAIBackend(model="served-name"), server, Prompt("p", GREEDY_32, text="hi"))
    body = server.bodies[-1]
    assert "seed" not in body
    assert (body["model"], body["prompt"]) == ("served-name", "hi")


def test_chat_uses_the_workloads_messages():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"}]
    prompt = Prompt("p", GREEDY_32, text="ignored", item={"chat_messages": messages})
    _, server = stream_fixture("chat_ngram.sse", chat=True, prompt=prompt)
    assert server.bodies[-1]["messages"] == messages
    assert "prompt" not in server.bodies[-1]


def test_chat_refuses_token_ids():
    with pytest.raises(SparkbenchError, match="chat requests need text"):
        stream_fixture("chat_ngram.sse", chat=True, prompt=Prompt("p", GREEDY_32, input_ids=(1, 2)))


# --- broken streams and the wrong server ----------------------------------------------------------


def _cut(body: str, keep_chunks: int) -> str:
    """The first `keep_chunks` events of a recorded body."""
    return "".join(event + "\n\n" for event in body.split("\n\n")[:keep_chunks])


def test_error_object_mid_stream_is_a_server_error():
    error = {"error": {"message": "Internal server error", "type": "InternalServerError", "param": None,
                       "code": 500}}
    body = _cut(fixture_text("completions_ngram.sse"), 4) + f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n"
    server = FakeServer({"/v1/completions": sse(body)})
    result = send(OpenAIBackend(model="tiny"), server, Prompt("p", GREEDY_32, text="hi"))
    assert result.error_kind == ServerHTTPError.kind
    assert "mid-stream: Internal server error" in result.error_message
    assert len(result.chunk_ns) > 0  # the tokens before the error are kept


def test_missing_done_is_an_incomplete_stream():
    body = fixture_text("completions_ngram.sse").replace("data: [DONE]", "")
    server = FakeServer({"/v1/completions": sse(body)})
    result = send(OpenAIBackend(model="tiny"), server, Prompt("p", GREEDY_32, text="hi"))
    assert result.error_kind == StreamIncomplete.kind and "without [DONE]" in result.error_message


def test_404_on_completions_says_the_server_is_not_openai():
    server = FakeServer({})  # every path answers FastAPI's 404
    with pytest.raises(NotOpenAIServer) as caught:
        send(OpenAIBackend(model="tiny"), server, Prompt("p", GREEDY_32, text="hi"))
    assert str(caught.value) == (f"{BASE} does not serve the OpenAI API (/v1/completions answered 404); "
                                 "try --backend sglang")


def test_404_for_an_unknown_model_stays_the_servers_own_error():
    # vLLM's real answer to a model name it does not serve.
    error = {"error": {"message": "The model `nope` does not exist. Valid aliases: tiny.",
                       "type": "NotFoundError", "param": "model", "code": 404}}
    server = FakeServer({"/v1/completions": httpx.Response(404, json=error)})
    result = send(OpenAIBackend(model="nope"), server, Prompt("p", GREEDY_32, text="hi"))
    assert result.error_kind == ServerHTTPError.kind and "does not exist" in result.error_message


# --- snapshot -------------------------------------------------------------------------------------


def snapshot(routes: dict[str, httpx.Response], backend: OpenAIBackend | None = None) -> dict[str, Any]:
    with httpx.Client(transport=httpx.MockTransport(FakeServer(routes))) as http:
        return (backend or OpenAIBackend()).snapshot(http, BASE)


def test_snapshot_reports_models_version_and_spec_counters():
    backend = OpenAIBackend()
    facts = snapshot({"/v1/models": httpx.Response(200, json=MODELS),
                      "/version": httpx.Response(200, json={"version": "0.32.0"}),
                      "/metrics": httpx.Response(200, text=fixture_text("metrics_after.prom"))}, backend)
    assert facts["models"] == MODELS
    assert facts["version"] == {"version": "0.32.0"}
    assert facts["metrics_text_keys"] == [
        "vllm:spec_decode_num_accepted_tokens_per_pos_total", "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_drafts_total"]
    assert backend.model == "tiny"


def test_snapshot_without_version_or_metrics():
    facts = snapshot({"/v1/models": httpx.Response(200, json=MODELS)})
    assert "version" not in facts
    assert facts["metrics_text_keys"] == []


def test_snapshot_404_on_models_says_the_server_is_not_openai():
    with pytest.raises(NotOpenAIServer) as caught:
        snapshot({})
    assert str(caught.value) == (f"{BASE} does not serve the OpenAI API (/v1/models answered 404); "
                                 "try --backend sglang")


def test_snapshot_non_json_models_says_the_server_is_not_openai():
    with pytest.raises(NotOpenAIServer, match="/v1/models did not return JSON"):
        snapshot({"/v1/models": httpx.Response(200, text="<html>hello</html>")})


# --- detection ------------------------------------------------------------------------------------


def probe_routes(routes: dict[str, httpx.Response]) -> str:
    with httpx.Client(transport=httpx.MockTransport(FakeServer(routes))) as http:
        return probe(http, BASE)


def test_probe_prefers_sglang_which_also_serves_v1_models():
    info = httpx.Response(200, json={"version": "0.5.23"})
    models = httpx.Response(200, json=MODELS)
    assert probe_routes({"/server_info": info, "/v1/models": models}) == "sglang"
    assert probe_routes({"/get_server_info": info, "/v1/models": models}) == "sglang"
    assert probe_routes({"/v1/models": models}) == "openai"


def test_probe_names_neither_protocol():
    with pytest.raises(ServerHTTPError, match="answers neither"):
        probe_routes({"/server_info": httpx.Response(200, text="not json")})


def test_detect_on_a_closed_port_is_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        with pytest.raises(ServerUnreachable, match="cannot reach"):
            detect_backend(f"http://127.0.0.1:{port}")


def test_make_backend_by_name():
    backend = make_backend("openai", BASE, chat=True, model="tiny")
    assert (backend.name, backend.chat, backend.model) == ("openai", True, "tiny")
    assert isinstance(make_backend("sglang", BASE), SGLangBackend)
    with pytest.raises(SparkbenchError, match="unknown backend"):
        make_backend("tgi", BASE)
    with pytest.raises(SparkbenchError, match="use --backend openai"):
        make_backend("sglang", BASE, chat=True)
