"""Acceptance under each engine's and tool's definition, and acceptance by position given the earlier
positions and over every step, per category in the report: hand-computed examples."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from harness.analysis.run import Run
from harness.analysis.shapes import compare_by_shape
from harness.metrics.acceptance import (
    definition_values,
    histogram_accept_length,
    position_table,
    position_values,
    tokens_per_step_shares,
    unconditional_acceptance_by_position,
)
from harness.metrics.catalogue import CATALOGUE, DEFINITION
from harness.report.acceptance_section import POSITION_COLUMNS, acceptance_blocks, acceptance_markdown
from tests.unit.conftest import build_record
from tests.unit.test_report import write_run

NAN = math.nan


def test_each_definition_on_two_requests_of_unequal_length():
    # A: 6 of 9 drafts accepted over 3 rounds; B: 0 of 3 over 1 round; C: no speculation.
    values = definition_values(accepted=[6, 0, NAN], rounds=[3, 1, NAN], proposed=[9, 3, NAN])
    assert values["mean_acceptance_length_request_weighted"] == pytest.approx((3 + 1) / 2)  # (1 + 6/3, 1 + 0/1)
    assert values["mean_acceptance_length_token_weighted"] == pytest.approx(1 + 6 / 4)
    assert values["accepted_drafts_per_round"] == pytest.approx(6 / 4)  # no bonus token
    assert values["draft_acceptance_rate_request_weighted"] == pytest.approx((6 / 9 + 0) / 2)
    assert values["draft_acceptance_rate_token_weighted"] == pytest.approx(6 / 12)
    assert values["accepted_per_verified_request_weighted"] == pytest.approx(((6 + 3) / (9 + 3) + (0 + 1) / (3 + 1)) / 2)
    assert set(values) == {name for name, m in CATALOGUE.items() if m.kind == DEFINITION}


def test_no_speculation_is_no_figure_under_any_definition():
    assert all(math.isnan(v) for v in definition_values([NAN, 0], [NAN, 0], [NAN, 0]).values())
    # rounds without proposals (vLLM's drafter found nothing): lengths defined, rates not
    values = definition_values([0], [2], [0])
    assert values["mean_acceptance_length_token_weighted"] == 1.0
    assert math.isnan(values["draft_acceptance_rate_token_weighted"])


def test_conditional_and_unconditional_acceptance_by_position():
    # h: steps accepting exactly 0, 1, 2, 3 drafts; S(k) steps accepting at least k = 8, 6, 5, 4.
    h = [2, 1, 1, 4]
    assert unconditional_acceptance_by_position(h) == pytest.approx([6 / 8, 5 / 8, 4 / 8])
    table = position_table(h)
    assert table["k"].tolist() == [0, 1, 2, 3] and table["steps"].tolist() == h
    assert table["share"].tolist() == pytest.approx([2 / 8, 1 / 8, 1 / 8, 4 / 8])
    assert table["conditional"].tolist()[1:] == pytest.approx([6 / 8, 5 / 6, 4 / 5])
    assert table["unconditional"].tolist()[1:] == pytest.approx([6 / 8, 5 / 8, 4 / 8])
    assert math.isnan(table["conditional"][0]) and math.isnan(table["unconditional"][0])
    rows = position_values(h)
    assert rows[("acceptance_at_position_unconditional", "position_2")] == pytest.approx(5 / 8)
    assert rows[("acceptance_at_position", "position_2")] == pytest.approx(5 / 6)


SPEC = {"name": "specbench", "categories": ["qa", "rag"], "per_task": 2}
# Per task: SGLang's histogram, verify rounds, proposed and accepted drafts, and the chunk sizes.
TASKS = {"qa": ([0, 0, 0, 2], 2, 6, 6, [1, 4, 4]), "rag": ([3, 1, 0, 0], 4, 12, 1, [1, 2, 1, 1, 1])}


def _records() -> list:
    records = []
    for seq, task in enumerate(("qa", "qa", "rag", "rag")):
        histogram, rounds, proposed, accepted, sizes = TASKS[task]
        meta = {"spec_verify_ct": rounds, "spec_accept_length": sum(sizes) / rounds, "spec_num_proposed_drafts": proposed,
                "spec_num_correct_drafts": accepted, "spec_correct_drafts_histogram": histogram}
        record = build_record(chunks=[(10.0 + 10 * i, size) for i, size in enumerate(sizes)], seq=seq, meta=meta)
        records.append(dataclasses.replace(record, workload="specbench", prompt_id=f"specbench-{seq}",
                                           item_json=json.dumps({"category": task})))
    return records


@pytest.fixture
def run(tmp_path):
    return Run.load(write_run(tmp_path, "20260101T000100Z-spec", _records(), SPEC))


def test_the_run_summary_holds_every_definition(run):
    values = run.summary[run.summary["stat"] == "value"].set_index("metric")["value"]
    # qa: 6 of 6 over 2 rounds (twice); rag: 1 of 12 over 4 rounds (twice)
    assert values["mean_acceptance_length_request_weighted"] == pytest.approx((4 + 1.25) / 2)
    assert values["mean_acceptance_length_token_weighted"] == pytest.approx(1 + 14 / 12)
    assert values["draft_acceptance_rate_token_weighted"] == pytest.approx(14 / 36)
    assert values["accepted_per_verified_request_weighted"] == pytest.approx((1 + 5 / 16) / 2)


def test_the_report_sets_the_histogram_beside_both_rates_per_category(run):
    blocks = acceptance_blocks(compare_by_shape([run]))
    (heading, positions), (_, definitions) = blocks
    assert "acceptance by draft position (per request" in heading
    by = positions.set_index([POSITION_COLUMNS["group"], POSITION_COLUMNS["k"]])
    conditional = by[POSITION_COLUMNS["conditional"]]
    # qa: every step accepted all three; rag: h = [6, 2, 0, 0], S = 8, 2, 0, 0
    assert [conditional[("qa", k)] for k in "123"] == ["1.000", "1.000", "1.000"]
    assert [conditional[("rag", k)] for k in "123"] == ["0.250", "0.000", ""]  # none reached position 3
    assert by[POSITION_COLUMNS["steps"]][("rag", "0")] == "6"
    # overall: h = [6, 2, 0, 4], S = 12, 6, 4, 4
    assert [conditional[("overall", k)] for k in "123"] == ["0.500", "0.667", "1.000"]
    assert [by[POSITION_COLUMNS["unconditional"]][("overall", k)] for k in "123"] == ["0.500", "0.333", "0.333"]
    shown = definitions.set_index("metric")["value"]
    assert shown["draft_acceptance_rate_token_weighted"] == f"{14 / 36:.4g}"
    assert "## Acceptance" in acceptance_markdown(blocks)


def test_requests_without_rounds_or_drafts_are_left_out_without_a_warning():
    """A request of 0 rounds is left out of every figure, and one of 0 proposed drafts out of the
    draft rates: kept are 2 accepted in 2 rounds of 4 drafts and 1 in 1 round, so the lengths are
    2.0 whichever way they are weighted, and the draft rates 2 / 4 from the first alone."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = definition_values([2.0, 3.0, 1.0], [2.0, 0.0, 1.0], [4.0, 3.0, 0.0])
        assert values["mean_acceptance_length_request_weighted"] == pytest.approx((2.0 + 2.0) / 2)
        assert values["mean_acceptance_length_token_weighted"] == pytest.approx(1 + 3 / 3)
        assert values["draft_acceptance_rate_request_weighted"] == 0.5
        assert values["draft_acceptance_rate_token_weighted"] == 0.5
        assert all(math.isnan(v) for v in definition_values([0.0], [0.0], [0.0]).values())
        assert math.isnan(histogram_accept_length([0, 0, 0]))
        assert all(math.isnan(v) for v in tokens_per_step_shares([0, 0, 0])) and len(tokens_per_step_shares([0, 0])) == 2
