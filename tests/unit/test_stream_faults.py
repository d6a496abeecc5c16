"""The real clients against the scripted stream server: each stream fault is flagged, a healthy
stream is not, and flagged requests stay out of the timing statistics."""

from __future__ import annotations

import asyncio

import pytest

from harness.engines.openai import OpenAIBackend
from harness.engines.sglang import SGLangBackend
from harness.engines.sse import Session
from harness.metrics import derive_requests, summarize
from harness.records.requests import RequestRecord
from harness.spec import Prompt, SamplingParams
from tests.fakes.stream_server import Script, serving
from tests.unit.conftest import to_frame

TOKENS = 48
ALL_THREE = {"buffered", "late_first_token", "sparse"}
# The fake's OpenAI stream carries vLLM's per-request metrics, so its records are read as vLLM's.
BACKENDS = {"sglang": SGLangBackend, "completions": lambda: OpenAIBackend(engine="vllm"),
            "chat": lambda: OpenAIBackend(chat=True, engine="vllm")}
EXPECTED = {  # (fault, client) -> flags
    ("none", "sglang"): set(), ("none", "completions"): set(), ("none", "chat"): set(),
    ("buffer_all", "sglang"): ALL_THREE, ("buffer_all", "completions"): ALL_THREE,
    ("buffer_half", "sglang"): {"buffered"}, ("buffer_half", "completions"): {"buffered"},
    ("textless", "completions"): ALL_THREE, ("textless", "chat"): ALL_THREE,
    # SGLang's native chunks carry the running count even without text: the client still sees each step.
    ("textless", "sglang"): set(),
}
# A healthy stream paced so that no scheduling stall can fake a fault: half its tokens (the burst
# rule's share) take 24 x 50 ms = 1.2 s, far longer than a busy 2-core host ever holds the client
# back. A held-back answer is flagged however fast it was made, so the faults keep a quick pace.
HEALTHY_STEP_S = 0.05
FAULTY_STEP_S = 0.003


def step_of(fault: str) -> float:
    return HEALTHY_STEP_S if fault in ("none", "textless") else FAULTY_STEP_S


def record_of(backend, base_url: str, seq: int = 0) -> RequestRecord:
    prompt = Prompt(f"p{seq}", SamplingParams(max_new_tokens=TOKENS, ignore_eos=True), text="one two three")

    async def send():
        async with Session(read_timeout_s=30.0) as http:
            return await backend.send(http, base_url, prompt)

    return RequestRecord.build(run_id="r", seq=seq, workload="synthetic", engine=backend.engine, api=backend.name,
                               prompt=prompt, result=asyncio.run(send()))


@pytest.mark.parametrize(("fault", "client"), sorted(EXPECTED))
def test_each_fault_is_flagged_and_a_healthy_stream_is_not(fault, client):
    with serving(Script(fault=fault, step_s=step_of(fault))) as url:
        row = derive_requests(to_frame([record_of(BACKENDS[client](), url)])).iloc[0]
    assert row["completion_tokens"] == TOKENS
    assert {flag for flag in ALL_THREE if row[flag]} == EXPECTED[fault, client]
    assert bool(row["stream_flagged"]) == bool(EXPECTED[fault, client])


def test_flagged_requests_stay_out_of_timing_statistics():
    records = []
    for seq, fault in enumerate(["none", "none", "buffer_all", "buffer_half"]):
        with serving(Script(fault=fault, step_s=step_of(fault))) as url:
            records.append(record_of(OpenAIBackend(engine="vllm"), url, seq))
    summary = summarize(to_frame(records), "r", "synthetic").set_index(["metric", "stat"])["value"]
    assert summary["requests_flagged", "value"] == 2
    for metric in ("ttft_ms", "tpot_ms", "decode_tok_s"):
        assert summary[metric, "n"] == 2, metric
    assert summary["itl_ms", "n"] == 2 * (TOKENS - 1)
    assert summary["e2e_ms", "n"] == 4
    # What is left is the decode the server reports, not a burst's near-zero time per token.
    assert summary["tpot_ms", "min"] > 0.5 * summary["server_tpot_ms", "p50"]
