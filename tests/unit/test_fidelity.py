"""Did speculation change an answer: pairs parted at a near tie are numerics, a token the plain model
puts far below its choice is a defect, identical outputs are identical."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from harness.analysis import fidelity

PROMPT = "Question: one plus one?\nAnswer:"


def plain_model(scores: dict[int, list[tuple[int, float]]]):
    """A plain server that answers each prefix length with its own top-k."""
    asked = []

    def top_next(prompt: str, prefix: list[int], k: int) -> list[tuple[int, float]]:
        asked.append((prompt, list(prefix), k))
        return scores[len(prefix)][:k]

    return top_next, asked


def test_first_divergence_is_where_the_tokens_part_or_the_shorter_ended():
    assert fidelity.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert fidelity.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert fidelity.first_divergence([1, 2, 3], [1, 2]) == 2


def test_a_pair_parted_at_a_near_tie_is_numerics_and_the_plain_server_is_asked_at_that_point():
    top_next, asked = plain_model({2: [(7, -0.70), (9, -0.72), (4, -3.0)]})
    check = fidelity.check_pair("p", PROMPT, [1, 2, 7, 8], [1, 2, 9, 8], top_next)
    assert check.verdict == "numerics" and check.position == 2
    assert check.margin == pytest.approx(0.02) and check.deficit == pytest.approx(0.02)
    assert asked == [(PROMPT, [1, 2], fidelity.TOP_K)]


def test_a_token_the_plain_model_puts_far_below_its_choice_is_a_defect():
    top_next, _ = plain_model({1: [(5, -0.1), (6, -2.5), (3, -4.0)]})
    assert fidelity.check_pair("p", PROMPT, [1, 5], [1, 3], top_next).verdict == "defect"


def test_a_token_outside_the_plain_top_k_is_a_defect_with_an_infinite_deficit():
    top_next, _ = plain_model({0: [(5, -0.1), (6, -0.15)]})
    check = fidelity.check_pair("p", PROMPT, [5], [42], top_next)
    assert check.verdict == "defect" and math.isinf(check.deficit)


def test_identical_outputs_ask_the_server_nothing():
    top_next, asked = plain_model({})
    assert fidelity.check_pair("p", PROMPT, [1, 2], [1, 2], top_next).verdict == "identical"
    assert asked == []


def test_without_token_ids_or_a_scoring_server_a_parted_pair_is_unmeasured_not_healthy():
    assert fidelity.check_pair("p", PROMPT, [1, 2], [1, 3], None).verdict == "unmeasured"
    top_next, _ = plain_model({})
    assert fidelity.check_pair("p", PROMPT, [], [1], top_next).verdict == "unmeasured"


def records(outputs: dict[str, list[int]], temperature: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame([{"prompt_id": pid, "prompt_text": f"{PROMPT} {pid}", "output_ids": ids, "status": "ok",
                          "sampling_json": json.dumps({"temperature": temperature})}
                         for pid, ids in outputs.items()])


def test_runs_are_paired_by_prompt_and_sampled_requests_are_left_out():
    top_next, _ = plain_model({1: [(2, -0.5), (3, -0.51)]})
    plain = records({"a": [1, 2], "b": [4, 4]})
    spec = records({"a": [1, 3], "b": [4, 4], "c": [9]})
    checks = fidelity.check_runs(plain, spec, top_next)
    assert dict(zip(checks["prompt_id"], checks["verdict"])) == {"a": "numerics", "b": "identical"}
    assert fidelity.check_runs(plain, records({"a": [1, 3]}, temperature=0.6), top_next).empty


def test_the_summary_says_changed_when_any_answer_parted_on_a_wide_margin():
    checks = pd.DataFrame([
        {"prompt_id": "a", "verdict": "identical", "margin": math.nan},
        {"prompt_id": "b", "verdict": "numerics", "margin": 0.01},
        {"prompt_id": "c", "verdict": "defect", "margin": 3.0},
    ])
    summary = fidelity.summary(checks)
    assert summary["defect"] == 1 and summary["numerics"] == 1 and summary["identical"] == 1
    assert summary["verdict"].startswith("CHANGED")
    assert fidelity.summary(checks.iloc[:2])["verdict"].startswith("unchanged")
    assert fidelity.summary(checks.iloc[:0])["verdict"].startswith("not measured")


def test_the_plain_server_is_asked_for_the_documented_top_10_and_a_nat_is_the_default_tie():
    """docs/fidelity.md: the top 10 next tokens; numerics at a deficit of at most 1.0 nat."""
    assert fidelity.TOP_K == 10
    top_next, _ = plain_model({0: [(5, -0.1), (6, -0.99), (7, -1.2)]})
    assert fidelity.check_pair("p", PROMPT, [5], [6], top_next).verdict == "numerics"  # 0.89 nats below
    assert fidelity.check_pair("p", PROMPT, [5], [7], top_next).verdict == "defect"  # 1.1 nats below


def test_a_top_k_of_one_token_has_no_margin_to_measure():
    top_next, _ = plain_model({0: [(5, -0.1)]})
    check = fidelity.check_pair("p", PROMPT, [5], [6], top_next)
    assert math.isinf(check.margin) and check.verdict == "defect"


def test_long_outputs_part_and_agree_past_the_small_integers():
    """Lengths past 256 are not the same int object in CPython: equality, not identity, decides."""
    long = list(range(300))
    assert fidelity.check_pair("p", PROMPT, long, list(long), None).verdict == "identical"
    top_next, _ = plain_model({300: [(7, -0.1), (8, -0.2)]})
    check = fidelity.check_pair("p", PROMPT, [*long, 7], long, top_next)  # the speculative run stopped at 300
    assert (check.position, check.plain_token, check.spec_token) == (300, 7, None)


def test_the_summary_gives_the_median_and_p90_of_the_margins_where_pairs_parted():
    margins = [0.1 * i for i in range(1, 11)]  # 0.1 .. 1.0 nats, one a pair
    checks = pd.DataFrame([{"prompt_id": str(i), "verdict": "numerics", "margin": m} for i, m in enumerate(margins)]
                          + [{"prompt_id": "x", "verdict": "identical", "margin": math.nan}])
    summary = fidelity.summary(checks)
    assert summary["margin_p50"] == pytest.approx(0.55) and summary["margin_p90"] == pytest.approx(0.91)
