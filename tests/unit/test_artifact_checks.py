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
from tests.artifact_checks import accept_length_problems, capacity_problems, paired_change_problems
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
