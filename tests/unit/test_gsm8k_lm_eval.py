"""GSM8K scored by lm-eval's definitions: hand-worked cases, and agreement with lm-eval's own code on
every recorded completion (tests/fixtures/gsm8k_completions.jsonl: real answers of the real model
from the gap runs, and made-up answers that probe each rule)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from harness.testbed.envs import cache_root
from workloads.gsm8k import gold_answer, load_vendored
from workloads.gsm8k_lm_eval import LM_EVAL_VERSION, TASKS, exact_match, metric_columns, score_one
from workloads.gsm8k_scoring import accuracy_summary, lm_eval_stderr, score_table

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gsm8k_completions.jsonl"
REFERENCE_SCRIPT = Path(__file__).with_name("lm_eval_gsm8k_reference.py")
LM_EVAL_PYTHON = cache_root() / "tools" / f"lm-eval-{LM_EVAL_VERSION}" / "bin" / "python"
GSM8K, COT = TASKS
STRICT, FLEXIBLE = GSM8K.filters
COT_STRICT, _ = COT.filters

# (completion, gold, task, filter, prediction, exact match), worked by hand from the yaml's rules.
HAND_CASES = [
    ("9 * 2 = 18\n#### 18", "18", GSM8K, STRICT, "18", True),
    ("#### 7\nthen #### 18", "18", GSM8K, STRICT, "7", False),  # the FIRST match, not the last
    ("####18", "18", GSM8K, STRICT, "[invalid]", False),  # the regex wants one space
    ("#### $18", "18", GSM8K, STRICT, "[invalid]", False),  # and no `$`
    ("#### 18.00", "18", GSM8K, STRICT, "18.00", False),  # strings, not numbers
    ("#### 1,234.", "1,234", GSM8K, STRICT, "1,234.", True),  # `,` and a final `.` are ignored
    ("#### 18\n\nQuestion: x\n#### 5", "5", GSM8K, FLEXIBLE, "18", False),  # cut at `Question:`
    ("costs $18.", "18", GSM8K, FLEXIBLE, "$18.", True),
    ("18 or 20", "18", GSM8K, FLEXIBLE, "20", False),  # the last match
    ("done...", "18", GSM8K, FLEXIBLE, "...", False),  # two or more of `$0-9.,` need no digit
    ("The answer is 18.", "18", COT, COT_STRICT, "18", True),
    ("the answer is 18.", "18", COT, COT_STRICT, "[invalid]", False),  # the regex is case-sensitive
    ("The answer is 18", "18", COT, COT_STRICT, "1", False),  # `.` wants one more character: it takes the 8
    ("Q: The answer is 18.", "18", COT, COT_STRICT, "[invalid]", False),  # cut at `Q:`
]


@pytest.mark.parametrize(("text", "gold", "task", "lm_filter", "prediction", "correct"), HAND_CASES)
def test_hand_worked_cases(text, gold, task, lm_filter, prediction, correct):
    assert score_one(text, gold, task, lm_filter) == (prediction, correct)


def test_exact_match_ignores_case_and_only_the_listed_characters():
    assert exact_match("ABC", "abc")
    assert exact_match("$1,000", "1000")
    assert not exact_match("1000.0", "1000")
    assert exact_match("[invalid]", "[invalid]")  # never a gold, but the rule is plain string equality


def test_summary_rows_carry_lm_eval_names_and_its_stderr():
    texts = ["#### 1", "The answer is 1.", "no idea", "#### 2"]
    requests = _requests([(i, text, "1") for i, text in enumerate(texts)])
    values = accuracy_summary(score_table(requests)).set_index(["metric", "stat"])["value"]
    assert values[("lm_eval_gsm8k_exact_match,strict-match", "mean")] == 0.25
    assert values[("lm_eval_gsm8k_cot_exact_match,strict-match", "mean")] == 0.25
    assert values[("lm_eval_gsm8k_exact_match,flexible-extract", "mean")] == 0.5
    # sqrt(p (1 - p) / (n - 1)) = sqrt(0.25 / 3)
    assert values[("lm_eval_gsm8k_exact_match,flexible-extract", "stderr")] == pytest.approx(math.sqrt(0.25 / 3))
    assert math.isnan(lm_eval_stderr(1.0, 1)) and math.isnan(lm_eval_stderr(0.5, 0))
    assert lm_eval_stderr(0.5, 2) == pytest.approx(0.5)  # sqrt(0.25 / 1)
    assert lm_eval_stderr(0.25, 4) == pytest.approx(0.25)  # sqrt(0.25 * 0.75 / 3): p and 1 - p differ


def _requests(rows: list[tuple[int, str, str]]):
    import pandas as pd

    return pd.DataFrame({"prompt_id": [f"gsm8k-{i}" for i, _, _ in rows], "output_text": [t for _, t, _ in rows],
                         "item_json": [json.dumps({"question_index": i, "gold": g}) for i, _, g in rows]})


def _fixture() -> list[dict]:
    test = load_vendored().test
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    return [{**row, "answer": test[row["question_index"]]["answer"]} for row in rows]


@pytest.mark.skipif(not LM_EVAL_PYTHON.exists(),
                    reason=f"lm-eval {LM_EVAL_VERSION} tool environment absent ({LM_EVAL_PYTHON.parent.parent}); "
                           "`make lm-eval-env` builds it, and `make test` does first")
def test_agrees_with_lm_eval_on_every_recorded_completion():
    rows = _fixture()
    assert sum(row["origin"] == "recorded" for row in rows) >= 30
    reply = subprocess.run([str(LM_EVAL_PYTHON), str(REFERENCE_SCRIPT)], check=True, capture_output=True, text=True,
                           input=json.dumps([{"text": row["output_text"], "answer": row["answer"]} for row in rows]))
    theirs = json.loads(reply.stdout)
    assert theirs["version"] == LM_EVAL_VERSION
    requests = _requests([(i, row["output_text"], gold_answer(row["answer"])) for i, row in enumerate(rows)])
    scored = score_table(requests)
    for task in TASKS:
        for lm_filter in task.filters:
            stem = task.column(lm_filter)
            ours = list(zip(scored[f"pred_{stem}"], scored[f"correct_{stem}"]))
            expected = [tuple(pair) for pair in theirs[task.name][lm_filter.name]]
            differing = [(rows[i]["output_text"], mine, them) for i, (mine, them) in enumerate(zip(ours, expected))
                         if mine != them]
            assert differing == [], (task.name, lm_filter.name)
    # the fixture is varied enough that every figure has both outcomes
    assert all(0 < scored[column].sum() < len(scored) for _, column in metric_columns())
