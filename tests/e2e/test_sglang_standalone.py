"""SGLang STANDALONE speculative decoding on the CPU test bed, against answers known in advance.

The target is the bigram model (next token = f(current token) alone) and the draft is a copy of
it, so every draft token is accepted. A greedy request of N new tokens gets its first token from
prefill, then 4 tokens per verify round (3 drafts + the bonus token), the last round cut at N:
    rounds = ceil((N - 1) / 4),   accept length = N / rounds   (SGLang: completion / spec_verify_ct),
    proposed drafts = 3 * rounds, accepted drafts = 3 * rounds,   tokens per step = N / (rounds + 1).
N = 33 fills its last round exactly (accept length 4.125, above 4 because the prefill token counts);
N = 62 uses one token of its last round (3.875). A wrong draft (other random weights) is refused by
the canary before anything is measured.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from harness.metrics import derive_requests
from harness.metrics.speculative import accept_length_request_weighted, accept_length_token_weighted
from harness.records.requests import load_requests
from tests.e2e.conftest import only_run_dir, sparkbench, streamed, synthetic_args

PROFILE = "cpu-testbed-standalone"
DRAFTS_PER_ROUND = 3
SAME_PROMPTS = ("--seed", "3", "--salt", "11")
ATTEMPTS = 4  # runs of two requests, at most, for one that streamed as made
# Stated tolerance for client vs server TPOT: the TTFT and end-to-end offsets differ by no more than
# the stream-integrity slack (tests/e2e/test_metrics_sglang.py), spread over the N - 1 decode gaps.


def rounds(n: int) -> int:
    return math.ceil((n - 1) / (DRAFTS_PER_ROUND + 1))


def _run(server, results, prompts: int, output_tokens: int, concurrency: int):
    done = sparkbench(*synthetic_args(server, results, prompts, 64, output_tokens, "--profile", PROFILE,
                                      "--concurrency", str(concurrency), *SAME_PROMPTS))
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(results)
    return run_dir, derive_requests(load_requests(run_dir))


@pytest.fixture(scope="module")
def batch1_run(sglang_standalone_server, tmp_path_factory):
    return _run(sglang_standalone_server, tmp_path_factory.mktemp("n62"), prompts=2, output_tokens=62, concurrency=1)


@pytest.fixture(scope="module")
def batch3_run(sglang_standalone_server, tmp_path_factory):
    return _run(sglang_standalone_server, tmp_path_factory.mktemp("n33"), prompts=3, output_tokens=33, concurrency=3)


def test_guard_passes_and_the_canary_sees_every_draft_accepted(sglang_standalone_server):
    done = sparkbench("check", "--profile", PROFILE, "--server", sglang_standalone_server.base_url)
    assert done.returncode == 0, done.stdout + done.stderr
    # The canary asks for 64 tokens: ceil(63 / 4) = 16 rounds, 64 / 16 = 4.00.
    assert "ok   canary: accept length 4.00 exceeds 1.05" in done.stdout.splitlines()


@pytest.mark.parametrize("run_name, n", [("batch1_run", 62), ("batch3_run", 33)])
def test_per_request_speculation_equals_the_known_answer(request, run_name, n):
    _, derived = request.getfixturevalue(run_name)
    assert (derived["completion_tokens"] == n).all()
    assert (derived["verify_rounds"] == rounds(n)).all()
    assert (derived["accept_length"] == n / rounds(n)).all()
    assert (derived["proposed_draft_tokens"] == DRAFTS_PER_ROUND * rounds(n)).all()
    assert (derived["accepted_draft_tokens"] == DRAFTS_PER_ROUND * rounds(n)).all()
    assert (derived["tokens_per_step"] == n / (rounds(n) + 1)).all()
    assert (derived["tokens_per_step_source"] == "server_steps").all()
    histograms = [json.loads(raw)["spec_correct_drafts_histogram"] for raw in derived["meta_info_json"]]
    assert histograms == [[0, 0, 0, rounds(n)]] * len(derived)


@pytest.mark.parametrize("run_name, n", [("batch1_run", 62), ("batch3_run", 33)])
def test_run_summary_accept_length_in_both_weightings(request, run_name, n):
    run_dir, _ = request.getfixturevalue(run_name)
    summary = pd.read_csv(run_dir / "summary.csv").set_index(["metric", "stat"])["value"]
    # Equal lengths: both weightings are the per-request value.
    assert summary[("accept_length_request_weighted", "value")] == pytest.approx(n / rounds(n), abs=1e-12)
    assert summary[("accept_length_token_weighted", "value")] == pytest.approx(n / rounds(n), abs=1e-12)


def test_weightings_differ_exactly_as_computed_over_unequal_lengths(batch1_run, batch3_run):
    both = pd.concat([batch1_run[1], batch3_run[1]], ignore_index=True)  # 2 requests of 62, 3 of 33
    assert accept_length_request_weighted(both) == pytest.approx((2 * 62 / 16 + 3 * 33 / 8) / 5, abs=1e-12)
    assert accept_length_token_weighted(both) == pytest.approx((2 * 62 + 3 * 33) / (2 * 16 + 3 * 8), abs=1e-12)


def test_batch_of_three_decodes_the_same_tokens_as_batch_one(batch1_run, batch3_run):
    alone = {row.prompt_id: list(row.output_ids) for row in batch1_run[1].itertuples()}
    for row in batch3_run[1].itertuples():
        if row.prompt_id in alone:
            assert list(row.output_ids) == alone[row.prompt_id][:33]
    assert set(alone) <= set(batch3_run[1]["prompt_id"])


@pytest.fixture(scope="module")
def streamed_62(batch1_run, sglang_standalone_server, tmp_path_factory):
    """Requests of 62 tokens that the stream integrity rules left in (they keep their ITL and TPOT):
    batch1_run's, and more runs like it until there is one, at most ATTEMPTS runs in all. On a busy
    host SGLang's output process may send a whole answer at once, which the rules flag, rightly."""
    tables = [batch1_run[1]]
    while len(streamed(pd.concat(tables))) == 0 and len(tables) < ATTEMPTS:
        tables.append(_run(sglang_standalone_server, tmp_path_factory.mktemp("n62"), prompts=2, output_tokens=62,
                           concurrency=1)[1])
    return streamed(pd.concat(tables, ignore_index=True))


def test_each_streamed_chunk_ends_where_a_verify_round_ends(batch1_run, streamed_62):
    """Prefill brings 1 token, each round 4, the last round the 1 still missing: the running counts
    the stream carries are those rounds' ends. An output process that falls behind (a busy host)
    sends two rounds in one chunk (the prefill's token and the first round's too), so a round's end
    may be missing, but no chunk ends inside a round."""
    run_dir, derived = batch1_run
    assert json.loads((run_dir / "manifest.json").read_text())["stream_mode"] == "cumulative"
    round_ends = [1 + 4 * k for k in range(rounds(62))] + [62]
    for row in derived.itertuples():
        counts = [int(count) for count in row.chunk_tokens]
        assert counts[-1] == 62 and counts == sorted(set(counts)), counts
        assert set(counts) <= set(round_ends), counts
    assert len(streamed_62) > 0
    for row in streamed_62.itertuples():
        assert list(row.chunk_gap_tokens) == np.diff([int(count) for count in row.chunk_tokens]).tolist()


def test_itl_spreads_each_chunk_over_its_tokens_and_tpot_agrees_with_the_server(streamed_62):
    assert len(streamed_62) > 0
    for row in streamed_62.itertuples():
        assert len(row.itl_ms) == 61
        assert sum(row.itl_ms) == pytest.approx((row.last_token_ns - row.first_token_ns) / 1e6)
        for gap, tokens, start in zip(row.chunk_gaps_ms, row.chunk_gap_tokens,
                                      [sum(row.chunk_gap_tokens[:i]) for i in range(len(row.chunk_gap_tokens))]):
            assert row.itl_ms[start:start + tokens] == pytest.approx([gap / tokens] * tokens)
    difference = (streamed_62["tpot_ms"] - streamed_62["server_tpot_ms"]).abs()
    assert (difference <= np.fmax(streamed_62["server_ttft_ms"], streamed_62["noise_floor_ms"]) / 61).all(), \
        difference.tolist()


def test_canary_refuses_the_wrong_draft_before_measuring(sglang_wrong_draft_server, tmp_path):
    done = sparkbench(*synthetic_args(sglang_wrong_draft_server, tmp_path, 2, 64, 16, "--profile", "cpu-testbed-wrong-draft"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0].endswith("does not run profile cpu-testbed-wrong-draft; nothing measured:")
    assert lines[1:] == ["  canary: drafts never accepted: accept length 1.02 (0 of 189 draft tokens accepted) "
                         "is the signature of the FP8-LM-head + MTP weight-sharing bug (draft reads FP8 weights "
                         "as BF16), or of a drafter that proposes nothing; every verification round is paid for "
                         "nothing"]
    assert not any(tmp_path.iterdir())  # no run directory, no records
