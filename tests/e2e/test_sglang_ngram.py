"""SGLang NGRAM speculative decoding on the CPU test bed (incremental stream), checked for
consistency with SGLang's own per-request fields; batch 3 against batch 1 and plain decoding.

NGRAM's acceptance is not known in advance (its n-gram corpus grows with every request), but
greedy verification only ever keeps the target's own argmax, so the tokens must equal those of
plain decoding at any batch size.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from harness.metrics import derive_requests
from harness.records.requests import load_requests
from tests.e2e.conftest import only_run_dir, sparkbench, synthetic_args

PROFILE = "cpu-testbed-ngram"
PROMPTS, INPUT, OUTPUT = 3, 128, 48
SAME_PROMPTS = ("--seed", "5", "--salt", "7")
DRAFTS_PER_ROUND = 3  # num_draft_tokens 4 = 3 drafts + the bonus position


def _run(server, results, concurrency: int, *extra: str):
    done = sparkbench(*synthetic_args(server, results, PROMPTS, INPUT, OUTPUT, "--concurrency", str(concurrency),
                                      *SAME_PROMPTS, *extra))
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(results)
    return run_dir, derive_requests(load_requests(run_dir))


@pytest.fixture(scope="module")
def batch1_run(sglang_ngram_server, tmp_path_factory):
    return _run(sglang_ngram_server, tmp_path_factory.mktemp("batch1"), 1, "--profile", PROFILE)


@pytest.fixture(scope="module")
def batch3_run(sglang_ngram_server, tmp_path_factory):
    return _run(sglang_ngram_server, tmp_path_factory.mktemp("batch3"), 3)


def _meta(derived: pd.DataFrame) -> list[dict]:
    return [json.loads(raw) for raw in derived["meta_info_json"]]


def test_guard_passes_with_the_canary(sglang_ngram_server):
    done = sparkbench("check", "--profile", PROFILE, "--server", sglang_ngram_server.base_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(line.startswith("ok   canary: accept length") for line in done.stdout.splitlines())


@pytest.mark.parametrize("run_name", ["batch1_run", "batch3_run"])
def test_speculation_columns_are_sglang_own_figures(request, run_name):
    _, derived = request.getfixturevalue(run_name)
    for row, meta in zip(derived.itertuples(), _meta(derived)):
        assert row.completion_tokens == OUTPUT
        assert row.verify_rounds == meta["spec_verify_ct"] > 0
        assert row.accept_length == meta["spec_accept_length"] == OUTPUT / meta["spec_verify_ct"]
        assert row.accepted_draft_tokens == meta["spec_num_correct_drafts"]
        assert row.proposed_draft_tokens == meta["spec_num_proposed_drafts"] == DRAFTS_PER_ROUND * row.verify_rounds
        assert row.accept_rate == meta["spec_num_correct_drafts"] / meta["spec_num_proposed_drafts"]
        assert row.tokens_per_step == OUTPUT / (row.verify_rounds + 1)
        # Each round keeps its accepted drafts plus the bonus token; prefill brought the first token.
        assert 1 + row.verify_rounds + row.accepted_draft_tokens >= OUTPUT


def test_run_accept_length_weightings_follow_the_requests(batch1_run):
    run_dir, derived = batch1_run
    summary = pd.read_csv(run_dir / "summary.csv").set_index(["metric", "stat"])["value"]
    meta = _meta(derived)
    request_weighted = sum(m["spec_accept_length"] for m in meta) / len(meta)
    token_weighted = OUTPUT * len(meta) / sum(m["spec_verify_ct"] for m in meta)
    assert summary[("accept_length_request_weighted", "value")] == pytest.approx(request_weighted, abs=1e-12)
    assert summary[("accept_length_token_weighted", "value")] == pytest.approx(token_weighted, abs=1e-12)


def test_incremental_chunks_carry_each_round_and_itl_covers_every_token(batch1_run):
    run_dir, derived = batch1_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stream_mode"] == "incremental"
    for row in derived.itertuples():
        counts = list(row.chunk_tokens)
        assert counts == sorted(set(counts)) and counts[-1] == OUTPUT
        # one chunk per engine step (prefill, then each round); a busy host may merge two into one
        assert 0.9 * (row.verify_rounds + 1) <= len(counts) <= row.verify_rounds + 1
        if row.stream_flagged:  # the integrity rules leave a held stream's gaps out (a busy host holds some)
            assert len(row.itl_ms) == 0
            continue
        assert len(row.itl_ms) == OUTPUT - counts[0]
        assert sum(row.itl_ms) == pytest.approx((row.last_token_ns - row.first_token_ns) / 1e6)
    assert (derived["accepted_draft_tokens"] > 0).any()
    # a round that accepted drafts lands several tokens in one chunk (raw counts: kept for held streams too)
    assert any(max(b - a for a, b in zip(row.chunk_tokens, row.chunk_tokens[1:])) > 1 for row in derived.itertuples())


def test_batch_of_three_decodes_the_same_tokens_as_batch_one(batch1_run, batch3_run):
    alone = {row.prompt_id: list(row.output_ids) for row in batch1_run[1].itertuples()}
    together = {row.prompt_id: list(row.output_ids) for row in batch3_run[1].itertuples()}
    assert alone == together


@pytest.fixture(scope="module")
def plain_run(sglang_server, tmp_path_factory):
    """The same prompts on the plain test-bed server (same model, no speculation)."""
    return _run(sglang_server, tmp_path_factory.mktemp("plain"), 1)


def test_speculation_decodes_the_same_tokens_as_plain_decoding(batch1_run, plain_run):
    plain = {row.prompt_id: list(row.output_ids) for row in plain_run[1].itertuples()}
    assert plain == {row.prompt_id: list(row.output_ids) for row in batch1_run[1].itertuples()}


def test_both_stream_forms_record_the_same_text(batch1_run, plain_run):
    """SGLang's two stream forms: the plain server repeats the answer so far in every chunk
    (cumulative), this profile sends each round's tokens alone (incremental); both are read to the
    same output."""
    manifests = [json.loads((run_dir / "manifest.json").read_text()) for run_dir, _ in (plain_run, batch1_run)]
    assert [m["stream_mode"] for m in manifests] == ["cumulative", "incremental"]
    assert manifests[1]["server"]["server_info"]["incremental_streaming_output"] is True
    texts = [dict(zip(derived["prompt_id"], derived["output_text"])) for _, derived in (plain_run, batch1_run)]
    assert texts[0] == texts[1] and all(len(text) > 0 for text in texts[0].values())


def _server_decode_ms(derived: pd.DataFrame) -> pd.Series:
    """SGLang's own decode time per request, read raw: `e2e_latency - first_token_latency`, in ms."""
    return pd.Series([(m["e2e_latency"] - m["first_token_latency"]) * 1000 for m in _meta(derived)])


def test_verify_cost_ratio_from_sglang_own_timings(plain_run, batch1_run):
    """NGRAM against the same model without speculation. With the servers' own timings the ratio is
    one verify round (SGLang's `spec_verify_ct` counts them) over one plain decode step, both read
    raw from `meta_info`; tokens per round is SGLang's own count too."""
    from harness.analysis.compare import compare_runs

    (plain_dir, plain), (spec_dir, spec) = plain_run, batch1_run
    table = compare_runs([plain_dir, spec_dir]).set_index(["run_id", "metric", "stat"])["value"]
    spec_id = json.loads((spec_dir / "manifest.json").read_text())["run_id"]
    verify_rounds = sum(m["spec_verify_ct"] for m in _meta(spec))
    plain_step = _server_decode_ms(plain).sum() / (plain["completion_tokens"] - 1).sum()
    verify_round = _server_decode_ms(spec).sum() / verify_rounds
    assert table[(spec_id, "verify_cost_ratio", "server_timings")] == pytest.approx(verify_round / plain_step, rel=1e-9)
    timed = ~spec["stream_flagged"].to_numpy(dtype=bool)  # the client's figures leave flagged streams out
    per_round = (spec["completion_tokens"][timed] - 1).sum() / spec["verify_rounds"][timed].sum()
    assert table[(spec_id, "decode_tokens_per_round", "value")] == pytest.approx(per_round, rel=1e-12)
    client = table[(spec_id, "verify_cost_ratio", "value")]
    if timed.any() and (~plain["stream_flagged"].to_numpy(dtype=bool)).any():
        assert client > 0  # the client's own figure stands beside it
    else:  # a loaded host: every stream of one side flagged, so the client measured nothing, never a zero
        assert math.isnan(client)
