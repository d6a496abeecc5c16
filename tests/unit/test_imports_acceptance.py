"""`sparkbench import` keeps each tool's speculative acceptance under the tool's own name, with its
definition in the manifest, where the file has it: `vllm bench serve`'s counter-delta figures
(`spec_decode_*`, per draft position too) and SGLang `bench_serving`'s `accept_length` (the server's
`avg_spec_accept_length`). Small hand-written files of each format."""

from __future__ import annotations

import pytest

from tests.unit.test_imports import SGLANG_AGGREGATES, VLLM_DETAILED, VLLM_PLAIN, imported_runs, summary_value, written

# Consistent counter deltas: 10 drafting steps of 3 draft tokens, 12 accepted (6, 4, 2 at positions 1-3).
VLLM_SPEC = {**VLLM_DETAILED, "spec_decode_acceptance_rate": 40.0, "spec_decode_acceptance_length": 2.2,
             "spec_decode_num_drafts": 10, "spec_decode_draft_tokens": 30, "spec_decode_accepted_tokens": 12,
             "spec_decode_per_position_acceptance_rates": [0.6, 0.4, 0.2]}
SGLANG_SPEC = {**SGLANG_AGGREGATES, "backend": "sglang", "accept_length": 1.75,
               "server_info": {"version": "0.5.23", "internal_states": [{"avg_spec_accept_length": 1.75}]}}


def test_vllm_keeps_its_acceptance_figures_under_its_names_and_definitions(tmp_path):
    (run,) = imported_runs(written(tmp_path, "vllm.json", VLLM_SPEC), tmp_path / "results")
    assert summary_value(run, "spec_decode_acceptance_length", "tool_value") == 2.2
    assert summary_value(run, "spec_decode_acceptance_rate", "tool_value") == 40.0
    assert summary_value(run, "spec_decode_num_drafts", "tool_value") == 10
    assert summary_value(run, "spec_decode_accepted_tokens", "tool_value") == 12
    assert [summary_value(run, "spec_decode_per_position_acceptance_rate", f"position_{k}")
            for k in (1, 2, 3)] == [0.6, 0.4, 0.2]
    definitions = run.record.imported.definitions
    assert "1 + accepted / drafts" in definitions["spec_decode_acceptance_length"]
    assert "only the steps that proposed a draft" in definitions["spec_decode_acceptance_length"]
    assert "100 * accepted / draft tokens" in definitions["spec_decode_acceptance_rate"]
    assert "unconditional" in definitions["spec_decode_per_position_acceptance_rate"]
    rows = run.summary.set_index(["metric", "stat"])
    assert rows.loc[("spec_decode_acceptance_length", "tool_value"), "unit"] == "tokens/round"
    assert rows.loc[("spec_decode_per_position_acceptance_rate", "position_1"), "unit"] == "fraction"


def test_sglang_keeps_its_accept_length_under_its_name_and_definition(tmp_path):
    (run,) = imported_runs(written(tmp_path, "sglang.jsonl", SGLANG_SPEC), tmp_path / "results")
    assert summary_value(run, "accept_length", "tool_value") == 1.75
    definition = run.record.imported.definitions["accept_length"]
    assert "avg_spec_accept_length" in definition and "decode_log_interval" in definition
    assert "the first (prefill) token not" in definition
    assert run.record.imported.server_version == "0.5.23"


@pytest.mark.parametrize(("name", "obj", "figure"), [("vllm.json", VLLM_PLAIN, "spec_decode_acceptance_length"),
                                                      ("sglang.jsonl", SGLANG_AGGREGATES, "accept_length")])
def test_a_file_without_acceptance_has_no_figure_and_no_definition_of_one(tmp_path, name, obj, figure):
    """vLLM's tool writes no spec_decode keys when the server exports no counters; SGLang's writes
    accept_length null for a backend other than sglang: absent, never 0."""
    (run,) = imported_runs(written(tmp_path, name, obj), tmp_path / "results")
    assert figure not in set(run.summary["metric"])
    assert not any(key.startswith("spec_decode") or key == "accept_length" for key in run.record.imported.definitions)
