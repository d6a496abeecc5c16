"""The llama.cpp adapter against real llama-server processes: plain, draft-model speculation, and
synthetic acceptance at known accept lengths, where sparkbench's figure must meet the known answer."""

from __future__ import annotations

import json
import math

import httpx
import pandas as pd
import pytest

from harness.engines.prometheus import SPEC_COUNTERS
from tests.artifact_checks import accept_length_problems
from tests.e2e.conftest import only_run_dir, report_facts, sparkbench, synthetic_args

INPUT, OUTPUT, PROMPTS = 512, 128, 3
SYNTH_PROMPTS, SYNTH_OUTPUT, DRAFT_MAX = 4, 1024, 3
SPEC_COLUMNS = ["accept_length", "verify_rounds", "accepted_draft_tokens", "proposed_draft_tokens", "accept_rate"]
SIGMAS = 4.0  # a correct server fails the known-answer test about once in 16,000 runs


def _synthetic(server, results, prompts=PROMPTS, output=OUTPUT, *extra):
    done = sparkbench(*synthetic_args(server, results, prompts, INPUT, output, *extra))
    assert done.returncode == 0, done.stderr
    return only_run_dir(results)


def _derived(run_dir):
    from harness.metrics import derive_requests
    from harness.records.requests import load_requests

    return derive_requests(load_requests(run_dir))


def _summary(run_dir) -> pd.Series:
    return pd.read_csv(run_dir / "summary.csv").set_index(["metric", "stat"])["value"]


@pytest.fixture(scope="module")
def plain_run(llamacpp_server, tmp_path_factory):
    return _synthetic(llamacpp_server, tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def draft_run(llamacpp_draft_server, tmp_path_factory):
    return _synthetic(llamacpp_draft_server, tmp_path_factory.mktemp("draft"))


@pytest.fixture(scope="module")
def openai_draft_run(llamacpp_draft_server, tmp_path_factory):
    return _synthetic(llamacpp_draft_server, tmp_path_factory.mktemp("openai"), PROMPTS, OUTPUT, "--backend", "openai")


def test_the_report_names_the_servers_version_and_model(plain_run, llamacpp_server, tmp_path):
    props = httpx.get(f"{llamacpp_server.base_url}/props").json()  # the server's own word
    facts = report_facts(plain_run, tmp_path)
    assert (facts["server version"], facts["model"]) == (str(props["build_info"]), props["model_path"])
    assert facts["speculative decoding"] == "none"  # each /slots entry says so


def test_through_the_openai_api_what_it_does_not_say_is_not_exported(openai_draft_run, llamacpp_draft_server,
                                                                        tmp_path):
    manifest = json.loads((openai_draft_run / "manifest.json").read_text())
    assert (manifest["engine"], manifest["api"]) == ("llamacpp", "openai")
    # Its counters under its own names: the drafting rounds it counted, where this API once stored
    # 0/0/0 read from vLLM's names.
    metrics = httpx.get(f"{llamacpp_draft_server.base_url}/metrics").text
    recorded = set(manifest["server_counters"]["after"]) & set(SPEC_COUNTERS)
    assert recorded == {short for short, name in SPEC_COUNTERS.items() if f"llamacpp:{name}" in metrics}
    assert manifest["server_counters"]["delta"]["drafts"] > 0
    facts = report_facts(openai_draft_run, tmp_path)
    assert facts["speculative decoding"] == "not exported"  # the OpenAI API does not say; /slots is not read
    assert facts["model"] == httpx.get(f"{llamacpp_draft_server.base_url}/v1/models").json()["data"][0]["id"]


def test_detected_and_counted_from_the_servers_running_count(plain_run):
    manifest = json.loads((plain_run / "manifest.json").read_text())
    assert (manifest["engine"], manifest["api"]) == ("llamacpp", "llamacpp")
    table = pd.read_parquet(plain_run / "requests.parquet")
    assert (table["completion_tokens"] == OUTPUT).all() and (table["prompt_tokens"] == INPUT).all()
    assert (table["cached_tokens"] == 0).all()  # distinct first tokens: nothing reused
    for row in table.itertuples():
        counts = list(row.chunk_tokens)
        # Stamped by tokens_predicted, never by text: every token is counted, even one whose
        # piece is empty or held back until a UTF-8 character completes.
        assert counts[-1] == row.completion_tokens and counts == sorted(set(counts))
        assert len(row.output_ids) <= row.completion_tokens


def test_server_timings_are_read_and_no_speculation_is_reported(plain_run):
    derived = _derived(plain_run)
    assert (derived["server_ttft_ms"] > 0).all() and (derived["server_tpot_ms"] > 0).all()
    # The server's clock starts after the client sent the request and stops before the client reads it.
    assert (derived["e2e_ms"] >= derived["server_e2e_ms"]).all()
    assert derived[SPEC_COLUMNS].isna().all().all()


def test_draft_model_speculation_per_request_sums_match_the_servers_counters(draft_run):
    derived = _derived(draft_run)
    assert accept_length_problems(derived) == [] and (derived["accept_length"] <= 1 + DRAFT_MAX).all()
    # Every decode step after the first token emits its accepted drafts plus one token.
    assert (derived["verify_rounds"] + derived["accepted_draft_tokens"] + 1 == derived["completion_tokens"]).all()
    delta = json.loads((draft_run / "manifest.json").read_text())["server_counters"]["delta"]
    assert derived["proposed_draft_tokens"].sum() == delta["draft_tokens"]
    assert derived["accepted_draft_tokens"].sum() == delta["accepted_tokens"]


def synth_acceptance_rate(length: float, drafts: int) -> float:
    """llama.cpp's --spec-synth-len rule: position i of a draft is accepted with unconditional
    probability p**(i+1), p chosen so that sum(p**k, k=1..drafts) = length - 1."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if sum(mid ** k for k in range(1, drafts + 1)) < length - 1 else (low, mid)
    return (low + high) / 2


def accept_length_tolerance(length: float, drafts: int, rounds: float, requests: int) -> float:
    """How far a correct run-level accept length may lie from `length`, tokens/round.

    Accepted drafts per round A have P(A >= k) = p**k, so Var(A) = sum((2k-1) p**k) - (length-1)**2;
    the mean over `rounds` independent rounds has standard error sqrt(Var(A) / rounds), allowed
    SIGMAS times. On top, the last rounds of each request draft fewer tokens (or none) as the token
    budget runs out: at most `drafts` such rounds per request, each short of at most length - 1.
    """
    p = synth_acceptance_rate(length, drafts)
    variance = sum((2 * k - 1) * p ** k for k in range(1, drafts + 1)) - (length - 1) ** 2
    return SIGMAS * math.sqrt(variance / rounds) + drafts * requests * (length - 1) / rounds


@pytest.mark.parametrize("length", [2.0, 3.0])
def test_accept_length_meets_the_known_synthetic_answer(llamacpp_synth_servers, length, tmp_path):
    run = _synthetic(llamacpp_synth_servers[length], tmp_path, SYNTH_PROMPTS, SYNTH_OUTPUT, "--concurrency", "2")
    derived, summary = _derived(run), _summary(run)
    rounds = derived["verify_rounds"].sum()
    tolerance = accept_length_tolerance(length, DRAFT_MAX, rounds, SYNTH_PROMPTS)
    measured = summary[("accept_length_token_weighted", "value")]
    assert abs(measured - length) <= tolerance, (measured, length, tolerance, rounds)
    # The server's own counters count drafting rounds only; the same tolerance holds for them.
    counters = summary[("accept_length_server_counters", "value")]
    assert abs(counters - length) <= tolerance, (counters, length, tolerance)


def test_guard_confirms_a_synthetic_speculative_server(llamacpp_synth_servers):
    done = sparkbench("check", "--profile", "llamacpp-cpu-synth-3", "--server", llamacpp_synth_servers[3.0].base_url)
    assert done.returncode == 0, done.stderr
    assert "speculative_algorithm: 'draft-simple' as expected" in done.stdout


def test_canary_trips_when_almost_no_draft_is_accepted(llamacpp_near_one_server):
    done = sparkbench("check", "--profile", "llamacpp-cpu-synth-near-one", "--server",
                      llamacpp_near_one_server.base_url)
    assert done.returncode == 2, done.stdout
    assert "canary: drafts never accepted" in done.stderr or "does not exceed the canary's minimum" in done.stderr
