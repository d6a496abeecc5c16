"""The stored published figures: schema, every anchor figure, the recomputed gains, the ladder."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.analysis.reference import (
    REFERENCE_CSV,
    SYNTHETIC_CONTEXT,
    format_reference_table,
    ladder,
    ladder_provenance,
    ladder_rooflines,
    ladder_step_ms,
    load_reference,
    not_quoted,
    published,
    published_gains,
    reference_table,
    reference_text,
)
from harness.metrics.schema import SUMMARY_COLUMNS
from workloads.synthetic import PUBLISHED_INPUT_TOKENS, PUBLISHED_OUTPUT_TOKENS

# (run_id, workload, metric, stat, value) of every published figure, in the harness's units.
FIGURES = [
    ("published-baseline", "synthetic", "decode_throughput_aggregate", "value", 36.09),
    ("published-all-three", "synthetic", "decode_throughput_aggregate", "value", 102.88),
    ("published-all-three", "synthetic", "accept_length_token_weighted", "value", 3.90),
    ("published-baseline", "synthetic", "tpot_ms", "mean", 27.71),
    ("published-humming", "synthetic", "tpot_ms", "mean", 25.35),
    ("published-baseline", "gsm8k", "decode_throughput_aggregate", "value", 37.81),
    ("published-all-three", "gsm8k", "decode_throughput_aggregate", "value", 53.89),
    ("published-all-three", "gsm8k", "accept_length_token_weighted", "value", 2.68),
    ("published-baseline", "gsm8k", "e2e_ms", "mean", 15210),
    ("published-all-three", "gsm8k", "e2e_ms", "mean", 11490),
    ("published-all-three", "gsm8k", "e2e_ms", "p50", 6110),
    ("published-all-three", "gsm8k", "e2e_ms", "p95", 38600),
    ("published-baseline", "gsm8k", "ttft_ms", "mean", 207),
    ("published-all-three", "gsm8k", "ttft_ms", "mean", 214),
    ("published-baseline", "gsm8k", "completion_tokens", "mean", 567),
    ("published-all-three", "gsm8k", "completion_tokens", "mean", 607),
    ("published-baseline", "gsm8k", "accuracy", "value", 0.9689),
    ("published-all-three", "gsm8k", "accuracy", "value", 0.9682),
    ("published-all-three", "both", "verify_cost_ratio", "value", 2.26),
]


def test_reference_has_the_run_summary_schema_and_a_provenance():
    table = load_reference()
    assert list(table.columns) == [*SUMMARY_COLUMNS, "provenance"]
    assert not table.duplicated(["run_id", "workload", "metric", "stat"]).any()
    assert table["value"].notna().all()
    assert (REFERENCE_CSV.parent / "README.md").exists()


@pytest.mark.parametrize("run_id, workload, metric, stat, value", FIGURES)
def test_every_published_figure_is_stored(run_id, workload, metric, stat, value):
    assert published(load_reference(), run_id, workload, metric, stat) == pytest.approx(value)


def test_gains_recomputed_from_the_figures_match_the_quoted_ones():
    gains = published_gains()
    assert round(gains["synthetic_all_three"], 1) == 185.1
    assert round(gains["gsm8k_all_three"], 1) == 42.5
    assert round(gains["humming"], 1) == 9.3
    assert round(gains["fp8_head"], 1) == 11.4


def test_the_ladder_and_its_arithmetic():
    steps = ladder()
    assert [run_id for run_id, _, _ in steps] == ["published-baseline", "published-humming",
                                                   "published-humming-fp8head", "published-all-three"]
    assert [value for _, _, value in steps] == [36.09, 39.45, 43.94, 102.88]
    reference = load_reference()
    # 27.71 ms = 36.09 tok/s and 25.35 ms = 39.45 tok/s; 11.4% on top of Humming gives 43.94
    for run_id, throughput in (("published-baseline", 36.09), ("published-humming", 39.45)):
        assert round(1000 / published(reference, run_id, "synthetic", "tpot_ms", "mean"), 2) == throughput
    assert round(1000 / 25.35 * 1.114, 2) == 43.94


def test_a_changed_figure_changes_the_recomputed_gain():
    reference = load_reference()
    reference.loc[(reference["run_id"] == "published-all-three") & (reference["workload"] == "synthetic")
                  & (reference["metric"] == "decode_throughput_aggregate"), "value"] = 100.0
    assert round(published_gains(reference)["synthetic_all_three"], 1) != 185.1


def test_reference_table_sets_runs_beside_the_published_rows():
    run = pd.DataFrame([
        ("run-a", "synthetic", "decode_throughput_aggregate", "value", 250.0, "tok/s"),
        ("run-a", "synthetic", "tpot_ms", "mean", 4.0, "ms"),
        ("run-a", "synthetic", "itl_ms", "mean", 4.0, "ms"),  # no published counterpart: left out
    ], columns=list(SUMMARY_COLUMNS))
    table = reference_table([run])
    assert set(table.index.get_level_values("workload")) == {"synthetic"}
    assert list(table.columns)[-1] == "run-a"
    assert table.loc[("synthetic", "decode_throughput_aggregate", "value", "tok/s"), "run-a"] == 250.0
    assert table.loc[("synthetic", "decode_throughput_aggregate", "value", "tok/s"), "published-baseline"] == 36.09
    assert "itl_ms" not in table.index.get_level_values("metric")


def test_figures_the_sources_do_not_state_are_marked_with_their_derivation():
    marked = not_quoted().set_index(["run_id", "workload", "metric", "stat"])["provenance"]
    assert marked[("published-humming", "synthetic", "decode_throughput_aggregate", "value")].startswith(
        "derived: 1000 / 25.35 ms")
    assert "about 2.26" in marked[("published-all-three", "both", "verify_cost_ratio", "value")]
    assert marked[("published-all-three", "synthetic", "completion_tokens", "mean")].startswith("derived")
    # The speedup of MTP over the step before, 102.88 / 43.94, is accept length over the ratio.
    derived_ratio = published(load_reference(), "published-all-three", "synthetic", "verify_cost_ratio", "value")
    assert derived_ratio == pytest.approx(3.90 / (102.88 / 43.94), abs=5e-4)
    quoted = load_reference().set_index(["run_id", "workload", "metric", "stat"])["provenance"]
    assert quoted[("published-baseline", "synthetic", "decode_throughput_aggregate", "value")] == "quoted"


def test_printed_reference_marks_each_derived_figure_and_explains_it():
    text = format_reference_table(reference_table([]))
    assert "39.45 *" in text and "36.09 *" not in text
    assert "* published-humming synthetic decode_throughput_aggregate value = 39.45: derived: 1000 / 25.35 ms" in text


def test_the_ladders_decode_step_is_read_at_the_published_workloads_mean_context():
    """A decode step of the 32K-in, 2K-out workload sees on average the prompt and half the output."""
    assert SYNTHETIC_CONTEXT == PUBLISHED_INPUT_TOKENS + PUBLISHED_OUTPUT_TOKENS / 2


def test_a_step_without_a_published_tpot_is_the_inverse_of_its_throughput():
    reference = load_reference()
    no_tpot = reference[~((reference["run_id"] == "published-baseline") & (reference["metric"] == "tpot_ms"))]
    throughput = published(reference, "published-baseline", "synthetic", "decode_throughput_aggregate", "value")
    assert ladder_step_ms(no_tpot, "published-baseline") == pytest.approx(1000 / throughput)


def test_only_the_synthetic_decode_throughputs_provenance_is_the_ladders():
    reference = load_reference()
    throughput = reference[(reference["workload"] == "synthetic")
                           & (reference["metric"] == "decode_throughput_aggregate") & (reference["stat"] == "value")]
    assert ladder_provenance(reference) == dict(zip(throughput["run_id"], throughput["provenance"]))
    assert ladder_provenance(reference)["published-humming"].startswith("derived: 1000 / 25.35 ms")
    assert ladder_provenance(reference)["published-baseline"] == "quoted"


def test_the_ladders_provenance_is_its_throughput_rows_and_no_other_stat_of_that_metric():
    reference = load_reference()
    step = reference[(reference["run_id"] == "published-baseline") & (reference["workload"] == "synthetic")
                     & (reference["metric"] == "decode_throughput_aggregate")]
    other_stat = step.assign(stat="p50", provenance="a p50 row, not the throughput")
    assert ladder_provenance(pd.concat([reference, other_stat]))["published-baseline"] == "quoted"


def test_only_the_steps_computing_the_head_in_bf16_carry_the_fp32_note():
    notes = {run_id: roofline.notes for run_id, _, roofline in ladder_rooflines()}
    assert any("FP32" in note for note in notes["published-baseline"])
    assert not any("FP32" in note for note in notes["published-humming-fp8head"])


def test_marks_go_only_to_the_runs_the_table_shows():
    table = reference_table([]).drop(columns=["published-humming"])
    text = reference_text(table)
    assert "published-humming" not in text.columns and not text.isna().any().any()
