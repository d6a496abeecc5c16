"""The checks the end-to-end tests apply to what a command wrote (tests/artifact_checks.py) pass on
correct output for every outcome and catch planted defects: a capacity bracket that is not what its
trials say, a confirmed capacity without its confirmation, a change outside its interval, a
missing interval on a metric every request has."""

from __future__ import annotations

import copy
import json
import math

import pandas as pd
import pytest

from harness.sweep import capacity
from harness.sweep.capacity_dir import CAPACITY_MANIFEST, CapacitySettings, run_search
from tests.artifact_checks import (
    accept_length_problems,
    accuracy_change_problems,
    capacity_problems,
    exact_mcnemar,
    paired_change_problems,
)
from tests.unit.test_capacity_dir import trial_runner

pytestmark = pytest.mark.cli  # the capacity searches write real run folders

OUTCOMES = {  # status: (floor, ceiling, max trials), against a server of capacity 6 req/s
    "confirmed": (1.0, 20.0, 16),
    "below the floor": (8.0, 20.0, 16),
    "at least the ceiling": (1.0, 5.0, 16),
    "out of trials": (1.0, 20.0, 3),
}


def searched(tmp_path, status: str) -> tuple[dict, float]:
    floor, ceiling, trials = OUTCOMES[status]
    settings = CapacitySettings(results=tmp_path, floor_rps=floor, ceiling_rps=ceiling, tolerance=0.1,
                                max_trials=trials, confirmations=1)
    folder, found = run_search(settings, trial_runner(), {"configuration": "cpu", "slo": "ttft=100ms"})
    assert found.status == status
    return json.loads((folder / CAPACITY_MANIFEST).read_text()), settings.attainment


@pytest.mark.parametrize("status", list(OUTCOMES))
def test_a_correct_search_passes_whatever_it_ended_with(tmp_path, status):
    manifest, target = searched(tmp_path, status)
    assert capacity_problems(manifest, target) == []


def _low_end_too_high(m):
    m["bracket"][0] = m["bracket"][0] * 1.5 + 1


def _high_end_not_a_failure(m):
    m["bracket"][1] = (m["bracket"][1] or 0) + 1


def _capacity_not_the_low_end(m):
    m["capacity_rps"] = (m["capacity_rps"] or 0) + 1


def _confirmation_dropped(m):
    m["trials"] = [t for t in m["trials"] if t["role"] != "confirmation"]


def _wrong_status(m):
    m["status"] = {"confirmed": "out of trials", "out of trials": "confirmed", "below the floor": "at least the ceiling",
                   "at least the ceiling": "below the floor"}[m["status"]]


PLANTS = [(status, plant) for status in OUTCOMES
          for plant in (_low_end_too_high, _high_end_not_a_failure, _capacity_not_the_low_end, _wrong_status)]
PLANTS.append(("confirmed", _confirmation_dropped))  # only a confirmed search has a confirmation to drop


@pytest.mark.parametrize(("status", "plant"), PLANTS)
def test_a_planted_defect_in_capacity_json_is_caught(tmp_path, status, plant):
    manifest, target = searched(tmp_path, status)
    broken = copy.deepcopy(manifest)
    plant(broken)
    assert broken != manifest and capacity_problems(broken, target), (plant.__name__, broken)


def test_a_bracket_taken_from_the_wrong_runs_is_caught(tmp_path, monkeypatch):
    """A search whose low end is the highest offered rate of its passing runs (max for min)."""
    original = capacity._ended

    def ended(found, status, low, high):
        found = original(found, status, low, high)
        runs = [t.offered for t in found.trials if t.rate == low and t.passes(found.target)]
        if runs:
            found.bracket = (max(runs) * 1.01, found.bracket[1])
            found.capacity_rps = found.bracket[0] if found.capacity_rps is not None else None
        return found

    monkeypatch.setattr(capacity, "_ended", ended)
    manifest, target = searched(tmp_path, "confirmed")
    assert any("low end" in p for p in capacity_problems(manifest, target))


def _rows(*rows):
    return pd.DataFrame([{"metric": m, "stat": "mean", "change": c, "ci95_low": lo, "ci95_high": hi}
                         for m, c, lo, hi in rows])


def test_paired_changes_inside_their_intervals_pass():
    rows = _rows(("e2e_ms", 0.1, 0.0, 0.2), ("tpot_ms", 0.2, math.nan, math.nan), ("ttft_ms", math.nan, 0, 0))
    assert paired_change_problems(rows, untimed={"tpot_ms"}) == []


@pytest.mark.parametrize("row", [("e2e_ms", 0.3, 0.0, 0.2), ("e2e_ms", -0.1, 0.0, 0.2),
                                 ("e2e_ms", 0.1, math.nan, math.nan), ("tpot_ms", 0.1, math.nan, 0.2)])
def test_a_change_outside_or_without_its_interval_is_caught(row):
    assert paired_change_problems(_rows(row), untimed={"ttft_ms"})


def test_a_real_paired_comparison_passes_and_a_shifted_interval_is_caught(tmp_path, monkeypatch):
    from harness.analysis import compare
    from tests.unit.test_report import SYNTHETIC, synthetic_records, write_run

    runs = [write_run(tmp_path, "20260101T000000Z-base", synthetic_records(10.0), SYNTHETIC),
            write_run(tmp_path, "20260101T000100Z-cand", synthetic_records(8.0), SYNTHETIC | {"salt": 2})]
    candidate = compare.compare_runs(runs).query("run_id == '20260101T000100Z-cand'")
    assert paired_change_problems(candidate) == []
    relative = compare.bootstrap_relative_change

    def shifted(*args, **kwargs):  # the interval drawn around the wrong point
        point, low, high = relative(*args, **kwargs)
        return point, low + 1.0, high + 1.0

    monkeypatch.setattr(compare, "bootstrap_relative_change", shifted)
    candidate = compare.compare_runs(runs).query("run_id == '20260101T000100Z-cand'")
    assert any("outside" in p for p in paired_change_problems(candidate))


# One speculating request per engine, its counters made up, and the accept length they imply worked
# out by hand: SGLang 12 tokens over 4 verify rounds = 3.0; llama.cpp 31 tokens with 20 of 30 drafts
# accepted, so 31 - 1 - 20 = 10 rounds and 1 + 20 / 10 = 3.0; vLLM 9 accepted drafts in 3 drafting
# steps, 1 + 9 / 3 = 4.0; and a plain request, without rounds or a length.
SPECULATING = [
    ("sglang", 12, {"spec_verify_ct": 4, "spec_num_correct_drafts": 8, "spec_num_proposed_drafts": 12}, 3.0),
    ("llamacpp", 31, {"timings": {"predicted_n": 31, "draft_n": 30, "draft_n_accepted": 20}}, 3.0),
    ("vllm", 16, {"metrics": {"speculative_decoding": {"num_spec_steps": 3, "num_accepted_draft_tokens": 9,
                                                        "num_draft_tokens": 9}}}, 4.0),
    ("sglang", 5, {}, math.nan),
]


def speculating_requests() -> pd.DataFrame:
    from harness.metrics import derive_requests
    from tests.unit.conftest import build_record, to_frame

    records = [build_record(chunks=[(10.0 * (k + 1), 1) for k in range(tokens)], engine=engine, meta=meta, seq=i)
               for i, (engine, tokens, meta, _) in enumerate(SPECULATING)]
    return derive_requests(to_frame(records))


def test_accept_lengths_are_the_hand_worked_figures_of_their_counters():
    derived = speculating_requests()
    assert derived["accept_length"].tolist() == pytest.approx([length for *_, length in SPECULATING], nan_ok=True)
    assert accept_length_problems(derived) == []


def _length_one(d):  # at least 1, as every accept length is, yet not what the counters say
    d.loc[0, "accept_length"] = 1.0


def _bonus_token_dropped(d):
    d.loc[1, "accept_length"] -= 1


def _rounds_that_do_not_make_the_tokens(d):
    d.loc[1, ["verify_rounds", "accept_length"]] = [11, 1 + 20 / 11]


def _more_accepted_than_drafted(d):
    d.loc[2, ["accepted_draft_tokens", "accept_length"]] = [12, 5.0]


def _a_length_without_rounds(d):
    d.loc[3, "accept_length"] = 1.0


@pytest.mark.parametrize("plant", [_length_one, _bonus_token_dropped, _rounds_that_do_not_make_the_tokens,
                                   _more_accepted_than_drafted, _a_length_without_rounds])
def test_an_accept_length_its_counters_do_not_imply_is_caught(plant):
    derived = speculating_requests()
    plant(derived)
    assert accept_length_problems(derived), plant.__name__


# 20 GSM8K questions: 2 right in the baseline only, 9 in the candidate only, 4 in both, 5 in neither.
BASE_RIGHT = [True] * 2 + [False] * 9 + [True] * 4 + [False] * 5
CAND_RIGHT = [False] * 2 + [True] * 9 + [True] * 4 + [False] * 5
# By hand: 2 * P(Binomial(11, 1/2) <= 2) = 2 * (1 + 11 + 55) / 2048 = 134 / 2048 = 0.0654.
HAND_P = 134 / 2048


def test_the_exact_mcnemar_of_the_check_is_the_hand_worked_figure():
    assert exact_mcnemar(2, 9) == exact_mcnemar(9, 2) == pytest.approx(HAND_P, rel=1e-12)
    assert exact_mcnemar(0, 0) == 1.0 and exact_mcnemar(3, 3) == 1.0


def accuracy_comparison(tmp_path) -> tuple[pd.Series, pd.Series, pd.Series]:
    from harness.analysis import compare
    from harness.analysis.run import Run
    from tests.unit.test_report import gsm8k_records, write_run

    spec = {"name": "gsm8k", "shot_seed": 1234}
    runs = [write_run(tmp_path, "g-base", gsm8k_records(BASE_RIGHT), spec),
            write_run(tmp_path, "g-cand", gsm8k_records(CAND_RIGHT), spec | {"base_seed": 5})]
    row = compare.compare_runs(runs).set_index(["run_id", "metric"]).loc[("g-cand", "gsm8k_accuracy_strict")]
    base, cand = (Run.load(run).scores.set_index("question_index")["correct_strict"] for run in runs)
    return row, base, cand


def test_a_paired_accuracy_change_with_discordant_questions_has_the_hand_worked_p_value(tmp_path):
    row, base, cand = accuracy_comparison(tmp_path)
    assert row["p_value"] == pytest.approx(HAND_P, rel=1e-12) and row["change"] == pytest.approx(7 / 20)
    assert accuracy_change_problems(row, base, cand) == []


def _one_sided(mcnemar):
    return lambda b, c: mcnemar(b, c) / 2


def _every_question_counted(mcnemar):  # the concordant questions thrown in with the discordant ones
    return lambda b, c: mcnemar(b, c + 9)


@pytest.mark.parametrize("plant", [_one_sided, _every_question_counted])
def test_a_p_value_that_is_not_mcnemars_is_caught(tmp_path, monkeypatch, plant):
    from harness.analysis import compare

    monkeypatch.setattr(compare, "mcnemar_exact", plant(compare.mcnemar_exact))
    row, base, cand = accuracy_comparison(tmp_path)
    assert any("p-value" in p for p in accuracy_change_problems(row, base, cand))


def test_questions_paired_out_of_order_are_caught(tmp_path, monkeypatch):
    """The candidate's flags taken in another order than the baseline's questions (its halves
    swapped: 1 and 8 discordant questions where there are 2 and 9)."""
    import numpy as np

    from harness.analysis import compare

    counts = compare.discordant_counts
    monkeypatch.setattr(compare, "discordant_counts", lambda b, c: counts(b, np.concatenate([c[10:], c[:10]])))
    row, base, cand = accuracy_comparison(tmp_path)
    assert accuracy_change_problems(row, base, cand)
