"""GSM8K answer extraction and accuracy with confidence intervals.

Two extractions, after lm-evaluation-harness's strict-match and flexible-extract, with these
deliberate differences:
- strict takes the number after the LAST `####` marker, not the first: reasoning models often
  recite the few-shot examples (each ending `#### N`) before answering. It also accepts `####18`
  and `#### $18`.
- flexible (the last number anywhere in the text) never returns a match without a digit (a bare
  `...` or `$` is no answer). As in the reference a `-` right before a digit is a sign: "15-5" is -5.
- both sides are normalized (no `,` `$` or trailing `.`) and compared as decimals, so "18" equals
  "18.00" where an exact string match would call it wrong.
Beside them, the four figures lm-eval's own definitions give (workloads.gsm8k_lm_eval), named as
lm-eval names them, to set a run beside a published lm-eval score.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from harness.errors import SparkbenchError
from harness.records.reasoning import answer_text
from workloads import Scorer
from workloads.gsm8k_lm_eval import lm_eval_columns, metric_columns

# pandas and the statistics are imported by the functions that score: the workload registry holds
# GSM8K_SCORER, and the command line's help reads the registry.
if TYPE_CHECKING:
    import pandas as pd

# `####`, optional spaces, then a number holding at least one digit; `$` may sit either side of `-`.
STRICT_ANSWER = re.compile(r"####[ \t]*(\$?-?\$?[0-9.,]*[0-9][0-9.,]*)")
# Optional sign and `$`, then digits with separators and decimals, or a bare `.5`.
FLEXIBLE_NUMBER = re.compile(r"-?\$?(?:[0-9][0-9,]*(?:\.[0-9]+)?|\.[0-9]+)")
# A maximal run of the characters FLEXIBLE_NUMBER is made of, holding at least one digit.
NUMBER_RUN = re.compile(r"[-$.,0-9]*[0-9][-$.,0-9]*")

SCORED_COLUMNS = [
    "prompt_id", "question_index", "gold", "pred_strict", "pred_flexible",
    "correct_strict", "correct_flexible", "no_answer_strict", "no_answer_flexible", "failed",
    *(f"{kind}_{column.removeprefix('correct_')}" for _, column in metric_columns() for kind in ("pred", "correct")),
]


def normalize_number(text: str | None) -> str | None:
    """Drop whitespace, `,` (thousands), `$` and one trailing `.`; None when no digit is left."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "").replace("$", "").removesuffix(".")
    return cleaned if any(ch.isdigit() for ch in cleaned) else None


def extract_strict(text: str) -> str | None:
    """Normalized number after the last `####` in `text`, or None."""
    matches = STRICT_ANSWER.findall(text or "")
    return normalize_number(matches[-1]) if matches else None


def last_number_run(text: str) -> str | None:
    """The last run of number characters that holds a digit, or None.

    Searched in the reversed text, so the cost is the distance from the end rather than the length
    of a 32K-token answer (Python's re cannot search backwards). Every number lies inside one such
    run, so the last number of the text is the last number of this run.
    """
    run = NUMBER_RUN.search(text[::-1])
    return run.group()[::-1] if run else None


def extract_flexible(text: str) -> str | None:
    """Normalized last number in `text`, or None."""
    run = last_number_run(text or "")
    return normalize_number(FLEXIBLE_NUMBER.findall(run)[-1]) if run else None


def answers_match(pred: str | None, gold: str | None) -> bool:
    """Equal as decimals after normalization ("18" == "18.00" == "$18."); else equal as strings."""
    pred, gold = normalize_number(pred), normalize_number(gold)
    if pred is None or gold is None:
        return False
    try:
        return Decimal(pred) == Decimal(gold)
    except InvalidOperation:  # "1.2.3" is no decimal: only an identical string matches it
        return pred == gold


def _question_index(prompt_id: str, item: dict) -> int:
    """The test index from the item, or from a `gsm8k-{index}` prompt id when the item lacks it."""
    if "question_index" in item:
        return int(item["question_index"])
    return int(str(prompt_id).rsplit("-", 1)[-1])


def score_table(requests: pd.DataFrame) -> pd.DataFrame:
    """Score one GSM8K run: one row per question, sorted by question index.

    Input columns: `prompt_id`, `output_text`, `item_json` (JSON holding "gold"), optionally
    `status`. Output columns: SCORED_COLUMNS; `gold` and the predictions are normalized strings
    (predictions None when absent). A failed request (`status` not ok) answered nothing, whatever
    partial text it had: no prediction, not correct, `failed` True.
    """
    import pandas as pd

    if requests["prompt_id"].duplicated().any():
        raise SparkbenchError("GSM8K scoring needs one request per question; found repeated prompt ids")
    items = [json.loads(raw) for raw in requests["item_json"]]
    failed = (requests["status"].fillna("ok") != "ok").to_numpy() if "status" in requests else \
        [False] * len(requests)
    # The answer only: a reasoning model's inline <think> block is not scored (its streamed thinking
    # is in reasoning_text, never in output_text).
    outputs = ["" if bad else answer_text(text) for bad, text in zip(failed, requests["output_text"])]
    gold = [normalize_number(item["gold"]) for item in items]
    scored = pd.DataFrame({
        "prompt_id": requests["prompt_id"].to_numpy(),
        "question_index": [_question_index(pid, item) for pid, item in zip(requests["prompt_id"], items)],
        "gold": pd.Series(gold, dtype=object),
        "failed": pd.Series(failed, dtype=bool),
    })
    for kind, extract in (("strict", extract_strict), ("flexible", extract_flexible)):
        preds = [extract(text) for text in outputs]
        # object dtype keeps a missing prediction as None rather than a float NaN
        scored[f"pred_{kind}"] = pd.Series(preds, dtype=object)
        scored[f"correct_{kind}"] = [answers_match(p, g) for p, g in zip(preds, gold)]
        scored[f"no_answer_{kind}"] = [p is None for p in preds]
    for column, values in lm_eval_columns(outputs, [str(item["gold"]) for item in items]).items():
        scored[column] = pd.Series(values, dtype=object if column.startswith("pred_") else bool)
    return scored[SCORED_COLUMNS].sort_values("question_index", ignore_index=True)


def _proportion_rows(metric: str, flags: pd.Series) -> list[dict]:
    from harness.metrics.stats import wilson_interval

    n = int(len(flags))
    successes = int(flags.sum())
    low, high = wilson_interval(successes, n)
    mean = successes / n if n else math.nan
    return [
        {"metric": metric, "stat": "mean", "value": mean, "unit": "fraction"},
        {"metric": metric, "stat": "ci95_low", "value": low, "unit": "fraction"},
        {"metric": metric, "stat": "ci95_high", "value": high, "unit": "fraction"},
        {"metric": metric, "stat": "n", "value": float(n), "unit": "count"},
    ]


def lm_eval_stderr(mean: float, n: int) -> float:
    """lm-eval's `exact_match_stderr` of a proportion: the sample standard deviation (n - 1) over
    sqrt(n), `sqrt(p (1 - p) / (n - 1))`; NaN below two questions."""
    return math.sqrt(mean * (1 - mean) / (n - 1)) if n > 1 else math.nan


def _lm_eval_rows(metric: str, flags: pd.Series) -> list[dict]:
    rows = _proportion_rows(metric, flags)
    rows.append({"metric": metric, "stat": "stderr", "value": lm_eval_stderr(rows[0]["value"], len(flags)),
                 "unit": "fraction"})
    return rows


def accuracy_summary(scored: pd.DataFrame) -> pd.DataFrame:
    """Accuracy and invalid (no-answer) rate, strict and flexible, each with a 95% Wilson interval.

    Long form: columns metric, stat, value, unit; metrics `gsm8k_accuracy_{strict,flexible}` and
    `gsm8k_invalid_rate_{strict,flexible}`; stats mean, ci95_low, ci95_high (unit "fraction") and
    n (unit "count"). Then lm-eval's four, `lm_eval_<task>_exact_match,<filter>`, each with lm-eval's
    `stderr` beside the interval (absent from a table scored before they existed). The denominator is every question sent: a failed request counts as not
    answered, and `gsm8k_questions_failed` (stat "value") says how many there were.
    """
    import pandas as pd

    rows: list[dict] = [{"metric": "gsm8k_questions_failed", "stat": "value",
                         "value": float(scored["failed"].sum()) if "failed" in scored else 0.0, "unit": "count"}]
    for kind in ("strict", "flexible"):
        rows += _proportion_rows(f"gsm8k_accuracy_{kind}", scored[f"correct_{kind}"])
        rows += _proportion_rows(f"gsm8k_invalid_rate_{kind}", scored[f"no_answer_{kind}"])
    for metric, column in metric_columns():
        if column in scored:
            rows += _lm_eval_rows(metric, scored[column])
    return pd.DataFrame(rows, columns=["metric", "stat", "value", "unit"])


def score_records(requests: pd.DataFrame) -> pd.DataFrame:
    """`score_table` of a run's request records."""
    columns = ["prompt_id", "output_text", "item_json", *(["status"] if "status" in requests else [])]
    return score_table(requests[columns])


GSM8K_SCORER = Scorer(score=score_records, summary=accuracy_summary, correct="correct_strict",
                      accuracy_metric="gsm8k_accuracy_strict")
