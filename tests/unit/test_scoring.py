"""GSM8K scoring: extraction on hard cases, numeric comparison, the scored table and Wilson intervals."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from harness.errors import SparkbenchError
from harness.metrics.stats import wilson_interval
from workloads.gsm8k import gold_answer, load_vendored
from workloads.gsm8k_lm_eval import metric_columns
from workloads.gsm8k_scoring import (
    FLEXIBLE_NUMBER,
    SCORED_COLUMNS,
    accuracy_summary,
    answers_match,
    extract_flexible,
    extract_strict,
    normalize_number,
    score_table,
)

RECITED_SHOTS = (
    "Question: Tom has 3 apples and buys 4 more. How many?\nAnswer: 3 + 4 = 7\n#### 7\n\n"
    "Question: A pen costs $2. How much are 5 pens?\nAnswer: 5 * 2 = 10\n#### 10\n\n"
    "Now the real question. 6 * 3 = 18\n#### 18"
)

# (text, strict, flexible)
HARD_CASES = [
    ("She makes 9 * 2 = $18 every day.\n#### 18", "18", "18"),
    ("The temperature fell to -4 degrees.\n#### -4", "-4", "-4"),
    ("Each share is 2.5 dollars.\n#### 2.5", "2.5", "2.5"),
    ("Total: 1,234 marbles.\n#### 1,234", "1234", "1234"),
    ("So the answer is $5.", None, "5"),
    ("#### $5.", "5", "5"),
    ("#### 3\nwait, recount\n#### 4\nno: #### 5", "5", "5"),
    (RECITED_SHOTS, "18", "18"),
    ("I cannot work this out.", None, None),
    ("", None, None),
    ("The answer is...", None, None),
    ("#### seven", None, None),
    ("#### 12 apples, after 3 days", "12", "3"),
    ("The final answer is 1,450,000.", None, "1450000"),
    ("It changes by -$30 overall", None, "-30"),
    ("Between 15-5 and 10", None, "10"),
    ("She has 15-5", None, "-5"),
    ("A quarter is .25 of it", None, ".25"),
    ("####-7", "-7", "-7"),
    ("#### 18.00", "18.00", "18.00"),
]


@pytest.mark.parametrize(("text", "strict", "flexible"), HARD_CASES)
def test_extraction_hard_cases(text, strict, flexible):
    assert extract_strict(text) == strict
    assert extract_flexible(text) == flexible


@pytest.mark.parametrize(("raw", "normalized"), [
    ("1,234", "1234"), ("$5.", "5"), (" -3.50 ", "-3.50"), ("18.", "18"), ("$", None), (".", None),
    (None, None), ("1,450,000", "1450000"),
])
def test_normalize_number(raw, normalized):
    assert normalize_number(raw) == normalized


@pytest.mark.parametrize(("pred", "gold", "equal"), [
    ("18", "18", True), ("18.00", "18", True), ("$18.", "18", True), ("1234", "1,234", True),
    ("-4", "4", False), ("0.5", ".5", True), ("17", "18", False), (None, "18", False),
    ("1.2.3", "1.2.3", True), ("1.2.3", "1.23", False),
    ("19", "18", False), ("1.2.4", "1.2.3", False),  # a larger answer is no match, as a decimal or a string
])
def test_answers_match(pred, gold, equal):
    assert answers_match(pred, gold) is equal


@given(st.integers(min_value=-10**9, max_value=10**9), st.sampled_from(["", "$"]), st.booleans())
def test_strict_reads_any_formatted_integer_back(value, currency, thousands):
    written = f"{value:,}" if thousands else str(value)
    if currency and value < 0:
        written = "-$" + written[1:]
    else:
        written = currency + written
    text = f"Some reasoning with 12 and 7.\n#### {written}"
    assert answers_match(extract_strict(text), str(value))
    assert answers_match(extract_flexible(text), str(value))


@given(st.text(alphabet="0123456789-$.,# abc\n", max_size=60))
def test_flexible_equals_the_last_match_of_a_full_forward_scan(text):
    matches = FLEXIBLE_NUMBER.findall(text)
    assert extract_flexible(text) == (normalize_number(matches[-1]) if matches else None)


# --- score_table ------------------------------------------------------------------------------------

def _requests(rows):
    return pd.DataFrame({
        "prompt_id": [f"gsm8k-{i}" for i, _, _ in rows],
        "output_text": [text for _, text, _ in rows],
        "item_json": [json.dumps({"question_index": i, "gold": gold}) for i, _, gold in rows],
    })


def test_score_table_rows_and_flags():
    scored = score_table(_requests([
        (2, "The answer is 5.", "5"),
        (0, RECITED_SHOTS, "18"),
        (1, None, "1,234"),
        (3, "#### 70\nactually it is 72", "72"),
    ]))
    assert list(scored.columns) == SCORED_COLUMNS
    assert scored["question_index"].tolist() == [0, 1, 2, 3]
    assert scored["gold"].tolist() == ["18", "1234", "5", "72"]
    assert scored["pred_strict"].tolist() == ["18", None, None, "70"]
    assert scored["pred_flexible"].tolist() == ["18", None, "5", "72"]
    assert scored["correct_strict"].tolist() == [True, False, False, False]
    assert scored["correct_flexible"].tolist() == [True, False, True, True]
    assert scored["no_answer_strict"].tolist() == [False, True, True, False]
    assert scored["no_answer_flexible"].tolist() == [False, True, False, False]


def test_score_table_takes_the_index_from_the_prompt_id_when_the_item_lacks_it():
    requests = pd.DataFrame({"prompt_id": ["gsm8k-41"], "output_text": ["#### 3"],
                             "item_json": [json.dumps({"gold": "3"})]})
    assert score_table(requests)["question_index"].tolist() == [41]


def test_score_table_refuses_repeated_questions():
    with pytest.raises(SparkbenchError):
        score_table(_requests([(0, "#### 1", "1"), (0, "#### 1", "1")]))


def test_all_gold_answers_score_perfectly():
    test_rows = load_vendored().test
    rows = [(i, f"Reasoning...\n#### {gold_answer(r['answer'])}", gold_answer(r["answer"]))
            for i, r in enumerate(test_rows)]
    summary = accuracy_summary(score_table(_requests(rows))).set_index(["metric", "stat"])["value"]
    for kind in ("strict", "flexible"):
        assert summary[(f"gsm8k_accuracy_{kind}", "mean")] == 1.0
        assert summary[(f"gsm8k_accuracy_{kind}", "n")] == 1319
        assert summary[(f"gsm8k_invalid_rate_{kind}", "mean")] == 0.0


# --- Wilson interval and summary --------------------------------------------------------------------

def _textbook_wilson(k, n, confidence=0.95):
    """(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), z from scipy's normal quantile."""
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    p = k / n
    center = p + z**2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return (center - spread) / (1 + z**2 / n), (center + spread) / (1 + z**2 / n)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (10, 10), (50, 100), (1281, 1319), (1, 3)])
def test_wilson_interval_matches_scipy_and_the_textbook_formula(k, n):
    low, high = wilson_interval(k, n)
    scipy_ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert low == pytest.approx(scipy_ci.low, abs=1e-12)
    assert high == pytest.approx(scipy_ci.high, abs=1e-12)
    assert (low, high) == pytest.approx(_textbook_wilson(k, n), abs=1e-12)


def test_wilson_interval_known_values():
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert wilson_interval(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-5)
    assert wilson_interval(50, 100) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_accuracy_summary_long_form():
    scored = score_table(_requests([(i, "#### 1" if i < 50 else "no idea", "1") for i in range(100)]))
    summary = accuracy_summary(scored)
    assert list(summary.columns) == ["metric", "stat", "value", "unit"]
    assert set(summary["metric"]) == {"gsm8k_accuracy_strict", "gsm8k_accuracy_flexible",
                                      "gsm8k_invalid_rate_strict", "gsm8k_invalid_rate_flexible",
                                      "gsm8k_questions_failed", *(m for m, _ in metric_columns())}
    assert len(summary) == 17 + 4 * 5  # lm-eval's four carry lm-eval's stderr too
    assert set(summary.loc[summary["stat"].isin(["n", "value"]), "unit"]) == {"count"}
    assert set(summary.loc[~summary["stat"].isin(["n", "value"]), "unit"]) == {"fraction"}
    values = summary.set_index(["metric", "stat"])["value"]
    assert values[("gsm8k_accuracy_strict", "mean")] == 0.5
    assert values[("gsm8k_accuracy_strict", "ci95_low")] == pytest.approx(0.40383, abs=1e-5)
    assert values[("gsm8k_invalid_rate_flexible", "mean")] == 0.5
    assert values[("gsm8k_invalid_rate_strict", "n")] == 100


def test_a_failed_question_is_not_answered_and_stays_in_the_denominator():
    requests = _requests([(0, "#### 1", "1"), (1, "#### 1", "1"), (2, "#### 1", "1")])
    requests["status"] = ["ok", "error", "ok"]  # the failed one's partial text even holds the answer
    scored = score_table(requests)
    assert scored["correct_strict"].tolist() == [True, False, True]
    assert scored["failed"].tolist() == [False, True, False]
    values = accuracy_summary(scored).set_index(["metric", "stat"])["value"]
    assert values[("gsm8k_accuracy_strict", "mean")] == pytest.approx(2 / 3)
    assert values[("gsm8k_accuracy_strict", "n")] == 3 and values[("gsm8k_questions_failed", "value")] == 1


def test_a_table_scored_before_failed_requests_were_counted_has_none_failed():
    scored = score_table(_requests([(0, "#### 18", "18"), (1, "#### 3", "4")])).drop(columns="failed")
    values = accuracy_summary(scored).set_index(["metric", "stat"])["value"]
    assert values[("gsm8k_questions_failed", "value")] == 0.0
    assert values[("gsm8k_accuracy_strict", "mean")] == 0.5
