"""Acceptance per draft position, accept length along the output, and speed-ups, on made-up records
whose answers are known (the test bed's matching and wrong drafts, in miniature)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.acceptance import (
    COUNTERS,
    NOT_EXPORTED,
    PER_REQUEST,
    RunHistogram,
    acceptance_rows,
    positions_by_group,
    run_histogram,
)
from harness.engines.registry import meta_reader
from harness.metrics import derive_requests
from harness.metrics.acceptance import (
    acceptance_by_position,
    counter_histogram,
    histogram_accept_length,
    histogram_from_position_counts,
    pooled_histogram,
    position_values,
    tokens_per_step_shares,
)
from harness.metrics.along_output import accept_length_by_position
from harness.metrics.speedup import request_time_parts, request_tok_s, speedup_aggregate, speedup_mean_of_requests
from harness.records.entries import ServerCounters
from tests.unit.conftest import build_record, to_frame


def _spec_meta(histogram: list[int], rounds: int, proposed: int, completion: int) -> dict:
    return {"spec_correct_drafts_histogram": histogram, "spec_verify_ct": rounds, "spec_num_proposed_drafts": proposed,
            "spec_num_correct_drafts": sum(k * h for k, h in enumerate(histogram)),
            "spec_accept_length": completion / rounds}


def test_a_matching_draft_accepts_every_position():
    h = [0, 0, 0, 8]
    assert acceptance_by_position(h) == [1.0, 1.0, 1.0]
    assert tokens_per_step_shares(h) == [0.0, 0.0, 0.0, 1.0]
    assert histogram_accept_length(h) == 4.0


def test_a_wrong_draft_accepts_none_and_sglangs_short_list_is_padded_to_its_drafts():
    meta = _spec_meta([31], rounds=31, proposed=93, completion=32)
    h = meta_reader("sglang").draft_histogram(meta)
    assert h == [31, 0, 0, 0]
    rates = acceptance_by_position(h)
    assert rates[0] == 0.0 and all(math.isnan(r) for r in rates[1:])  # positions 2, 3 never reached
    assert histogram_accept_length(h) == 1.0


def test_position_rates_are_conditional_on_the_earlier_positions():
    # 10 steps: 4 accepted nothing, 3 one draft, 2 two, 1 all three.
    h = [4, 3, 2, 1]
    assert acceptance_by_position(h) == pytest.approx([6 / 10, 3 / 6, 1 / 3])
    assert histogram_accept_length(h) == pytest.approx((4 + 6 + 6 + 4) / 10)


def test_per_position_counters_give_the_same_histogram():
    # vLLM: position k (0-based) accepted a[k] times over 10 drafting steps.
    h = histogram_from_position_counts(10.0, [6.0, 3.0, 1.0])
    assert h == [4.0, 3.0, 2.0, 1.0]
    # vLLM's own accept length, 1 + accepted / drafts, is the histogram's.
    assert histogram_accept_length(h) == pytest.approx(1 + (6 + 3 + 1) / 10)
    delta = {"drafts": 10.0, "accepted_tokens": 10.0, "accepted_tokens_pos_1": 3.0, "accepted_tokens_pos_0": 6.0,
             "accepted_tokens_pos_2": 1.0}
    assert counter_histogram(delta) == h
    assert counter_histogram({"drafts": 10.0, "accepted_tokens": 4.0}) is None  # no per-position counter
    assert histogram_from_position_counts(0.0, [0.0]) is None


def test_histograms_pool_element_wise_and_none_is_not_exported():
    assert pooled_histogram([[1, 2], None, [0, 0, 3]]) == [1.0, 2.0, 3.0]
    assert pooled_histogram([None, None]) is None
    assert position_values(None) == {("accept_length_histogram", "value"): pytest.approx(math.nan, nan_ok=True)}
    values = position_values([0, 0, 0, 8])
    assert values[("acceptance_at_position", "position_3")] == 1.0
    assert values[("tokens_per_step_share", "tokens_4")] == 1.0 and values[("verify_steps_histogram", "value")] == 8


@pytest.mark.parametrize("meta", [{"spec_correct_drafts_histogram": [1, -1]}, {"spec_correct_drafts_histogram": "3"},
                                  {"spec_correct_drafts_histogram": [1.5]}, {}])
def test_a_malformed_or_missing_histogram_is_not_read(meta):
    assert meta_reader("sglang").draft_histogram(meta) is None


def test_engines_without_a_per_request_histogram_say_so():
    assert meta_reader("vllm").draft_histogram({"metrics": {}}) is None
    assert meta_reader("llamacpp").draft_histogram({"timings": {"draft_n": 3}}) is None


def _bigram_record(seq: int, n: int, engine: str = "sglang"):
    """A request of n tokens from the matching draft: the prefill token, then 4 per round."""
    rounds = math.ceil((n - 1) / 4)
    sizes = [1] + [4] * (rounds - 1) + [n - 1 - 4 * (rounds - 1)]
    meta = _spec_meta([0, 0, 0, rounds], rounds, 3 * rounds, n) if engine == "sglang" else None
    return build_record(chunks=[(10.0 + 5 * i, size) for i, size in enumerate(sizes)], seq=seq, meta=meta, engine=engine)


def test_the_run_histogram_comes_from_requests_else_counters_else_nowhere():
    derived = derive_requests(to_frame([_bigram_record(0, 33), _bigram_record(1, 65)]))
    found = run_histogram(derived, ServerCounters())
    assert (found.counts, found.source) == ([0.0, 0.0, 0.0, 24.0], PER_REQUEST)
    plain = derive_requests(to_frame([_bigram_record(0, 33, engine="vllm")]))
    counters = ServerCounters(delta={"drafts": 4.0, "accepted_tokens_pos_0": 4.0, "accepted_tokens_pos_1": 2.0})
    assert run_histogram(plain, counters).source == COUNTERS
    none = run_histogram(plain, ServerCounters())
    assert none.source == NOT_EXPORTED and none.counts is None


def test_a_runs_acceptance_rows_are_its_histograms_then_each_definition_over_its_requests_counts():
    measured = pd.DataFrame({"accepted_draft_tokens": [3.0, 1.0], "verify_rounds": [2.0, 1.0],
                             "proposed_draft_tokens": [6.0, 3.0]})
    rows = acceptance_rows(RunHistogram([1.0, 1.0, 1.0], PER_REQUEST), measured)
    assert list(rows.index) == list(range(len(rows)))  # one table, numbered once
    values = rows.set_index(["metric", "stat"])["value"]
    assert values[("accept_length_histogram", "value")] == pytest.approx(2.0)  # (1 + 2 + 3) / 3
    assert values[("mean_acceptance_length_token_weighted", "value")] == pytest.approx(1 + 4 / 3)
    assert values[("draft_acceptance_rate_token_weighted", "value")] == pytest.approx(4 / 9)
    # A run whose records carry no speculation counts has each definition NaN, not an error.
    bare = acceptance_rows(RunHistogram(None, NOT_EXPORTED), pd.DataFrame({"status": ["ok"]}))
    assert bare.set_index("metric").drop(index="accept_length_histogram")["value"].isna().all()


def test_positions_by_group_stack_the_groups_with_a_histogram_and_say_nothing_for_the_rest():
    table = positions_by_group([("overall", [1.0, 1.0, 1.0]), ("code", None), ("math", [0.0, 2.0])])
    assert list(table.columns) == ["group", "k", "steps", "share", "conditional", "unconditional"]
    assert table["group"].tolist() == ["overall"] * 3 + ["math"] * 2
    assert table["k"].tolist() == [0, 1, 2, 0, 1] and list(table.index) == list(range(5))
    empty = positions_by_group([("overall", None)])
    assert empty.empty and list(empty.columns) == list(table.columns)


def test_a_runs_histogram_cannot_be_changed_by_a_reader():
    """Every table and figure of a run reads the one histogram the run holds."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunHistogram([1.0], PER_REQUEST).counts = None


def test_histogram_accept_length_meets_sglangs_when_rounds_fill_exactly():
    # N = 129: 32 rounds of 4 after the prefill token; SGLang's 129 / 32 also counts the prefill token.
    derived = derive_requests(to_frame([_bigram_record(0, 129)]))
    h = run_histogram(derived, ServerCounters()).counts
    sglang = derived["accept_length"].item()
    assert sglang == 129 / 32 and histogram_accept_length(h) == 4.0
    assert abs(histogram_accept_length(h) / sglang - 1) < 0.01


def test_accept_length_along_the_output_uses_chunks_only_where_they_are_steps():
    # N = 62: 16 rounds, the last one cut to its first token at the cap; N = 33: 8 full rounds.
    derived = derive_requests(to_frame([_bigram_record(0, 62), _bigram_record(1, 33)]))
    bins = accept_length_by_position(derived, bins=4)
    assert bins["steps"].sum() == 15 + 7  # each request's last step, at its cap, is left out
    assert (bins["accept_length"] == 4.0).all()
    # One token per chunk while rounds say otherwise (llama.cpp streams per token): left out.
    per_token = build_record(chunks=[(10.0 + i, 1) for i in range(9)], meta=_spec_meta([0, 0, 0, 2], 2, 6, 9))
    assert accept_length_by_position(derive_requests(to_frame([per_token]))).empty


def _steps_record(finish_reason: str | None):
    """Running counts 1, 3, 4, 8, 9, 12: steps beginning at 1, 3, 4, 8, 9 bring 2, 1, 4, 1, 3 tokens."""
    counts = [1, 3, 4, 8, 9, 12]
    record = build_record(chunks=[(10.0 * (i + 1), now - before) for i, (before, now) in
                                  enumerate(zip([0, *counts], counts))], meta=_spec_meta([1, 1, 2, 1], 5, 15, 12))
    record.finish_reason = finish_reason
    return record


@pytest.mark.parametrize("finish_reason", ["stop", None, "abort"])
def test_each_step_lands_in_its_bin_from_zero_to_past_the_last_start(finish_reason):
    """Four bins from 0 to 10 (the last step's start plus one): 2.5 wide."""
    bins = accept_length_by_position(derive_requests(to_frame([_steps_record(finish_reason)])), bins=4)
    assert bins["bin_start"].tolist() == [0.0, 2.5, 5.0, 7.5] and bins["bin_end"].tolist() == [2.5, 5.0, 7.5, 10.0]
    assert bins["steps"].tolist() == [1, 2, 0, 2]
    assert bins["accept_length"].tolist()[:2] == [2.0, 2.5] and bins["accept_length"].tolist()[3] == 2.0
    assert math.isnan(bins["accept_length"][2])


def test_the_last_step_at_the_cap_is_left_out_and_eight_bins_by_default():
    bins = accept_length_by_position(derive_requests(to_frame([_steps_record("length")])))
    assert len(bins) == 8 and bins["steps"].sum() == 4  # the step from 9 to 12 was cut at the cap
    assert bins["bin_end"].iloc[-1] == 9.0  # the longest output's last step start (8) plus one, past 8 bins


def test_a_request_of_one_step_has_that_step_along_the_output():
    one = build_record(chunks=[(10.0, 1), (20.0, 4)], meta=_spec_meta([0, 0, 0, 1], 1, 3, 5))
    one.finish_reason = "stop"
    bins = accept_length_by_position(derive_requests(to_frame([one])))
    assert bins["steps"].sum() == 1 and bins.loc[bins["steps"] == 1, "accept_length"].tolist() == [4.0]


def test_speedups_the_spec_bench_way_and_the_aggregate_way():
    def requests(e2e_ms: list[float], tokens: list[int]):
        return derive_requests(to_frame([build_record(chunks=[(1.0, 1), (e2e_ms[i] - 1, n - 1)], end_ms=e2e_ms[i],
                                                      seq=i) for i, n in enumerate(tokens)]))
    base = requests([1000.0, 4000.0], [100, 100])  # 100 and 25 tok/s
    cand = requests([500.0, 4000.0], [100, 200])  # 200 and 50 tok/s
    assert request_tok_s(base) == pytest.approx([100.0, 25.0])
    assert speedup_mean_of_requests(base, cand) == pytest.approx(125 / 62.5)
    assert speedup_aggregate(base, cand) == pytest.approx((300 / 4.5) / (200 / 5.0))
    assert np.isfinite(request_tok_s(cand)).all()


def test_records_keep_each_requests_raw_histogram():
    record = _bigram_record(0, 33)
    assert json.loads(record.meta_info_json)["spec_correct_drafts_histogram"] == [0, 0, 0, 8]


def test_request_time_parts_are_tokens_and_seconds_of_requests_with_both():
    """e2e in ms made seconds; a request without tokens, without an e2e, or of no time adds nothing."""
    import pandas as pd

    derived = pd.DataFrame({"completion_tokens": [10.0, np.nan, 5.0, 7.0], "e2e_ms": [500.0, 100.0, 0.0, np.nan]})
    tokens, seconds = request_time_parts(derived)
    assert tokens.tolist() == [10.0, 0.0, 0.0, 0.0] and seconds.tolist() == [0.5, 0.0, 0.0, 0.0]
