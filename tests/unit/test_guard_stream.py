"""The guard's stream canary: against the scripted stream server, a buffering server is refused
before anything is measured, `--allow-buffered` records it instead, and a healthy one passes."""

from __future__ import annotations

import json

import pytest

from harness.engines.openai import OpenAIBackend
from harness.guard import preflight
from harness.guard.preflight import STREAM_ATTEMPTS, STREAM_RETRY_PAUSES_S, GuardFailed, startup_guard
from harness.guard.profiles import load_profile
from harness.guard.stream import check_stream
from tests.fakes.stream_server import Script, serving

HEALTHY = {"completion_tokens": 64, "buffered": False, "late_first_token": False, "sparse": False, "client_stalled": False,
           "burst_share": 0.03, "client_decode_share": 1.0, "ttft_excess_ms": 0.5}


@pytest.fixture
def pauses(monkeypatch):
    """The pauses the guard took between canaries, seconds (none really taken)."""
    taken: list[float] = []
    monkeypatch.setattr(preflight, "sleep", taken.append)
    return taken


@pytest.fixture
def guard_against(tmp_path, pauses):
    """The startup guard of profile vllm-cpu against the fake server, which otherwise looks the part:
    vLLM 0.32.0 serving a bf16 checkpoint. Its pauses between canaries are recorded, not taken."""
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    snapshot = {"version": {"version": "0.32.0"}, "models": {"data": [{"id": "fake", "root": str(tmp_path)}]}}

    def run(fault: str, allow_buffered: bool = False, faulty_requests: int | None = None):
        with serving(Script(fault=fault, step_s=0.003, faulty_requests=faulty_requests)) as url:
            return startup_guard(load_profile("vllm-cpu"), OpenAIBackend(engine="vllm"), url, snapshot=snapshot,
                                 model_dir=tmp_path, allow_buffered=allow_buffered)
    return run


def test_a_healthy_canary_passes():
    [finding] = check_stream(HEALTHY)
    assert finding.ok and finding.message == "the canary's 64 tokens streamed as they were made"


def test_a_buffered_canary_is_refused_with_its_evidence():
    evidence = HEALTHY | {"buffered": True, "burst_share": 0.98, "client_decode_share": 0.02}
    [finding] = check_stream(evidence)
    assert not finding.ok
    assert "did not stream as they were made (buffered; 98% of its tokens arrived within 1%" in finding.message
    assert "--allow-buffered" in finding.message


def test_allow_buffered_records_instead_of_refusing():
    [finding] = check_stream(HEALTHY | {"sparse": True}, allow_buffered=True)
    assert finding.ok and finding.message.endswith("measured anyway (--allow-buffered)")


@pytest.mark.parametrize("fault", ["buffer_all", "textless"])
def test_the_guard_refuses_a_server_that_buffers_its_stream(guard_against, fault):
    with pytest.raises(GuardFailed, match="stream: the canary's 64 tokens did not stream as they were made"):
        guard_against(fault)


def test_a_held_back_canary_is_sent_again_and_one_that_streams_passes(guard_against, pauses):
    report = guard_against("buffer_all", faulty_requests=STREAM_ATTEMPTS - 1)
    assert pauses == list(STREAM_RETRY_PAUSES_S)
    [stream] = [f for f in report.findings if f.check == "stream"]
    assert stream.ok and stream.message.endswith(f"(attempt {STREAM_ATTEMPTS}; the ones before were held back)")


def test_a_server_that_holds_back_every_canary_is_refused_naming_the_attempts(guard_against, pauses):
    with pytest.raises(GuardFailed, match=f"did not stream as they were made in any of {STREAM_ATTEMPTS} attempts"):
        guard_against("buffer_all", faulty_requests=STREAM_ATTEMPTS)
    assert pauses == list(STREAM_RETRY_PAUSES_S)  # spread out, so that a passing burst of load ends


def test_a_canary_that_streams_at_once_waits_for_nothing(guard_against, pauses):
    guard_against("none")
    assert pauses == []


def test_the_guard_measures_a_buffering_server_when_allowed(guard_against):
    report = guard_against("buffer_all", allow_buffered=True)
    assert report.ok
    [stream] = [f for f in report.findings if f.check == "stream"]
    assert stream.ok and "--allow-buffered" in stream.message


def test_the_guard_passes_a_server_that_streams(guard_against):
    report = guard_against("none")
    assert report.ok and "stream" in [f.check for f in report.findings]
