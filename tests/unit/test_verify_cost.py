"""Verification-cost ratio on made-up timestamps: SGLang rounds from the server's count, vLLM-style
rounds from streamed chunks, server timings, break-even, and the rows compare adds."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from harness.analysis.compare import compare_runs
from harness.analysis.verify_pair import is_verify_pair, speculates
from harness.metrics import derive_requests
from harness.metrics.verify_cost import decode_rounds, pooled_ms, verify_cost
from tests.unit.conftest import build_record, to_frame
from tests.unit.test_report import SYNTHETIC, write_run

SERVER_TIMES = {"first_token_latency": 0.110, "e2e_latency": 0.210}  # SGLang, seconds: 100 ms of decode


def plain(seq: int):
    """11 tokens, one per 10 ms after the first: a plain step is 10 ms."""
    return build_record(chunks=[(100.0 + 10 * k, 1) for k in range(11)], end_ms=200.0, seq=seq, meta=SERVER_TIMES)


def sglang_speculative(seq: int):
    """13 tokens: the first, then 4 verify rounds of 3 tokens, 25 ms each."""
    chunks = [(100.0, 1)] + [(100.0 + 25 * k, 3) for k in range(1, 5)]
    return build_record(chunks=chunks, end_ms=200.0, seq=seq, meta=SERVER_TIMES | {"spec_verify_ct": 4})


def vllm_speculative(seq: int):
    """10 tokens: the first, a plain step (no draft), then two drafting rounds of 4 tokens;
    vLLM counts only the 2 rounds that drafted."""
    spec = {"num_spec_steps": 2, "num_accepted_draft_tokens": 6, "num_draft_tokens": 6, "mean_acceptance_length": 4.0}
    chunks = [(100.0, 1), (110.0, 1), (130.0, 4), (150.0, 4)]
    return build_record(chunks=chunks, end_ms=150.0, seq=seq, engine="vllm",
                        meta={"metrics": {"speculative_decoding": spec}})


def derived(records):
    return derive_requests(to_frame(records))


def test_round_cost_over_plain_step_with_sglang_round_counts():
    figures = verify_cost(derived([sglang_speculative(0), sglang_speculative(1)]), derived([plain(0), plain(1)]))
    assert figures["plain_step_ms"] == pytest.approx(10.0)
    assert figures["verify_round_ms"] == pytest.approx(25.0)
    assert figures["verify_cost_ratio"] == pytest.approx(2.5)
    assert figures["decode_tokens_per_round"] == pytest.approx(3.0)
    assert figures["break_even_tokens_per_round"] == figures["verify_cost_ratio"]
    # 3 tokens per round at the price of 2.5 steps: 1.2x, the ratio of the decode throughputs.
    assert figures["speedup"] == pytest.approx(1.2)  # (12 tokens / 100 ms) / (10 tokens / 100 ms)


def test_server_timings_give_the_ratio_without_transport():
    figures = verify_cost(derived([sglang_speculative(0)]), derived([plain(0)]), timing="server")
    assert figures["verify_cost_ratio"] == pytest.approx(2.5)


def test_rounds_without_a_draft_count_as_rounds_when_the_server_counts_only_drafting_ones():
    spec = derived([vllm_speculative(0)])
    assert decode_rounds(spec).tolist() == [3.0]  # chunks after the first, not vLLM's 2
    figures = verify_cost(spec, derived([plain(0)]))
    assert figures["verify_round_ms"] == pytest.approx(50 / 3)
    assert figures["decode_tokens_per_round"] == pytest.approx(3.0)


def test_no_rounds_no_ratio():
    figures = verify_cost(derived([build_record(chunks=[(100.0, 1)])]), derived([plain(0)]))
    assert math.isnan(figures["verify_cost_ratio"]) and math.isnan(figures["speedup"])


def test_compare_adds_the_rows_for_a_speculative_run_against_a_plain_baseline(tmp_path):
    base = write_run(tmp_path, "v-base", [plain(i) for i in range(3)], SYNTHETIC)
    cand = write_run(tmp_path, "v-spec", [sglang_speculative(i) for i in range(3)], SYNTHETIC)
    rows = compare_runs([base, cand]).set_index(["run_id", "metric", "stat"])
    assert rows.loc[("v-spec", "verify_cost_ratio", "value"), "value"] == pytest.approx(2.5)
    assert rows.loc[("v-spec", "verify_cost_ratio", "server_timings"), "value"] == pytest.approx(2.5)
    assert rows.loc[("v-spec", "break_even_tokens_per_round", "value"), "unit"] == "tokens/round"
    # Two speculative runs, or a speculative baseline: no ratio.
    assert "verify_cost_ratio" not in compare_runs([cand, base])["metric"].tolist()


def test_a_flagged_stream_does_not_count_rounds():
    spec = derived([vllm_speculative(0)])
    spec["tokens_per_step_source"] = [None]  # what the integrity rules leave of a flagged stream
    assert decode_rounds(spec).tolist() != decode_rounds(spec).tolist()  # NaN
    assert math.isnan(verify_cost(spec, derived([plain(0)]), timing="server")["verify_cost_ratio"])


def test_pooled_time_leaves_out_a_request_without_a_time_or_any_unit():
    assert pooled_ms(np.array([10.0, math.nan, 4.0]), np.array([2.0, 2.0, 0.0])) == 5.0


def test_a_stream_the_integrity_rules_flag_counts_no_rounds_beside_one_that_counts():
    held = build_record(chunks=[(100.0, 1), (300.0, 31)], end_ms=300.0, seq=1, engine="vllm",
                        meta={"metrics": {"speculative_decoding": {"num_spec_steps": 2}}})
    # SGLang counts its rounds whatever the stream did, but the client's decode time is left out.
    held_sglang = build_record(chunks=[(100.0, 1), (300.0, 16)], end_ms=300.0, seq=2,
                               meta=SERVER_TIMES | {"spec_verify_ct": 4})
    table = derived([sglang_speculative(0), held, held_sglang])
    assert table["tokens_per_step_source"].tolist() == ["server_steps", None, "server_steps"]
    assert table["stream_flagged"].tolist() == [False, True, True]
    rounds = decode_rounds(table)
    assert rounds[0] == 4.0 and math.isnan(rounds[1]) and rounds[2] == 4.0
    figures = verify_cost(table, derived([plain(2)]))
    assert figures["verify_round_ms"] == pytest.approx(25.0)  # the held request's time counts nowhere
    assert figures["decode_tokens_per_round"] == pytest.approx(3.0)  # nor its tokens


def test_server_timing_is_the_servers_own_where_the_client_saw_longer():
    """The server decoded the speculative answer in 50 ms (12.5 ms a round) while the client saw 100."""
    fast = sglang_speculative(0)
    fast.meta_info_json = fast.meta_info_json.replace('"e2e_latency": 0.21', '"e2e_latency": 0.16')
    timing = "".join(["ser", "ver"])  # a name built at run time, as an option's value is
    figures = verify_cost(derived([fast]), derived([plain(1)]), timing=timing)
    assert figures["verify_round_ms"] == pytest.approx(12.5) and figures["verify_cost_ratio"] == pytest.approx(1.25)


@pytest.mark.parametrize("step_ms, ratio", [(0.0, math.nan), (0.5, 50.0)])
def test_the_ratio_needs_a_plain_step_above_zero_and_takes_any_such(step_ms, ratio):
    flat = [(100.0 + step_ms * k, 1) for k in range(11)]
    baseline = build_record(chunks=flat, end_ms=100.0 + step_ms * 10, meta={})
    figures = verify_cost(derived([sglang_speculative(0)]), derived([baseline]))
    assert figures["verify_cost_ratio"] == pytest.approx(ratio, nan_ok=True)


def test_a_verify_pair_is_a_plain_and_a_speculative_run_of_one_workload_and_model():
    """Workload and model names that sort either way round must match exactly; one verify round is
    already speculation."""
    def run(workload: str, model: str, rounds: list[float]):
        facts = SimpleNamespace(model=model)
        record = SimpleNamespace(launched_server=None, facts=facts)
        return SimpleNamespace(workload=workload, record=record, derived=pd.DataFrame({"verify_rounds": rounds}))

    plain, spec = run("gsm8k", "/m/a", [0.0, float("nan")]), run("gsm8k", "/m/a", [1.0, float("nan")])
    assert speculates(spec.derived) and not speculates(plain.derived)
    assert is_verify_pair(plain, spec) and not is_verify_pair(spec, plain) and not is_verify_pair(plain, plain)
    for other in (run("synthetic", "/m/a", [4.0]), run("agsm", "/m/a", [4.0]),
                  run("gsm8k", "/m/b", [4.0]), run("gsm8k", "/m/0", [4.0])):
        assert not is_verify_pair(plain, other)
