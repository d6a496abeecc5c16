"""Settling a night: confirmation on a quiet host, the busy-host rule, the confirmation loop."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from harness.nightly.job import confirm
from harness.nightly.settle import (
    CONFIRMED,
    INCONCLUSIVE,
    NOT_CONFIRMED,
    Attempt,
    busy_reasons,
    night_outcome,
    settle,
    tpot_gap,
    undecided,
)
from harness.records.entries import HostLoadEntry

LIMITS = {"foreign_cpu_share": 0.10, "steal_share": 0.05, "tpot_client_server_gap": 0.10}


def _table(**verdicts: str) -> pd.DataFrame:
    """A verdict table: metric name -> verdict, stat mean, change +20% where regressed."""
    return pd.DataFrame([{"workload": "synthetic", "metric": m, "stat": "mean", "change": 0.2, "verdict": v}
                         for m, v in verdicts.items()])


def _attempt(busy: bool = False, **verdicts: str) -> Attempt:
    return Attempt(runs=(Path("rerun"),), table=_table(**verdicts), busy=["busy"] if busy else [])


def test_a_regression_confirmed_on_a_quiet_host_alarms():
    final = settle(_table(tpot_ms="regressed", ttft_ms="pass"), [_attempt(tpot_ms="regressed", ttft_ms="pass")])
    assert final["verdict"].tolist() == [CONFIRMED, "pass"]
    assert final["confirmation"].tolist() == ["regressed (+20.0%)", ""]
    assert night_outcome(final) == "regression"


def test_a_regression_the_rerun_does_not_show_is_no_alarm():
    final = settle(_table(tpot_ms="regressed"), [_attempt(tpot_ms="pass")])
    assert final["verdict"].tolist() == [NOT_CONFIRMED]
    assert night_outcome(final) == "pass"


def test_agreement_on_a_busy_host_only_is_inconclusive():
    final = settle(_table(tpot_ms="regressed"), [_attempt(True, tpot_ms="regressed")] * 2)
    assert final["verdict"].tolist() == [INCONCLUSIVE]
    assert final["confirmation"].iloc[0] == "regressed (+20.0%) on a busy host; regressed (+20.0%) on a busy host"
    assert night_outcome(final) == "inconclusive"


def test_a_rerun_that_does_not_show_it_on_a_busy_host_settles_nothing():
    final = settle(_table(e2e_ms="regressed"), [_attempt(True, e2e_ms="pass")] * 2)
    assert final["verdict"].tolist() == [INCONCLUSIVE]
    assert night_outcome(final) == "inconclusive"


def test_a_busy_disagreement_then_a_quiet_agreement_alarms():
    final = settle(_table(e2e_ms="regressed"), [_attempt(True, e2e_ms="pass"), _attempt(e2e_ms="regressed")])
    assert final["verdict"].tolist() == [CONFIRMED]


def test_a_busy_agreement_then_a_quiet_one_alarms():
    final = settle(_table(tpot_ms="regressed"), [_attempt(True, tpot_ms="regressed"), _attempt(tpot_ms="regressed")])
    assert final["verdict"].tolist() == [CONFIRMED]


def test_accuracy_needs_no_quiet_host():
    final = settle(_table(gsm8k_accuracy_strict="regressed"), [_attempt(True, gsm8k_accuracy_strict="regressed")])
    assert final["verdict"].tolist() == [CONFIRMED]


def test_a_confirmed_regression_outweighs_an_inconclusive_metric():
    final = settle(_table(tpot_ms="regressed", gsm8k_accuracy_strict="regressed"),
                   [_attempt(True, tpot_ms="regressed", gsm8k_accuracy_strict="regressed")])
    assert night_outcome(final) == "regression"


def test_the_loop_stops_as_soon_as_every_regression_is_settled():
    made = []

    def attempt(results):
        def make():
            made.append(1)
            return results[len(made) - 1]
        return make

    first = _table(tpot_ms="regressed")
    assert confirm(_table(tpot_ms="pass"), attempt([]), limit=3) == []
    made.clear()
    assert len(confirm(first, attempt([_attempt(tpot_ms="regressed")] * 3), limit=3)) == 1
    made.clear()
    busy = [_attempt(True, tpot_ms="regressed")] * 3
    assert len(confirm(first, attempt(busy), limit=3)) == 3 and undecided(first, busy)


def test_busy_reasons_name_each_figure_over_its_limit():
    load = HostLoadEntry(foreign_cpu_share=0.34, other_cpu_share=0.9, steal_share=0.0,
                         tpot_client_server_gap=math.nan, loadavg_1m=9.0,
                         foreign_processes=[{"pid": 7, "name": "make", "cpu_s": 2.0, "share": 0.3},
                                            {"pid": 8, "name": "sh", "cpu_s": 0.01, "share": 0.001}])
    assert busy_reasons(load, LIMITS) == ["foreign processes took 34% of the host's CPU (limit 10%): 7 make 30%"]
    assert busy_reasons(HostLoadEntry(foreign_cpu_share=None, tpot_client_server_gap=0.25), LIMITS) == [
        "the client's TPOT exceeded the server's by 25% (limit 10%)"]
    assert busy_reasons(None, LIMITS) == []


def test_tpot_gap_compares_the_client_with_the_server_on_requests_that_have_both():
    derived = pd.DataFrame({"tpot_ms": [11.0, 11.0, 50.0], "server_tpot_ms": [10.0, 10.0, math.nan]})
    assert math.isclose(tpot_gap(derived), 0.1)
    assert math.isnan(tpot_gap(pd.DataFrame({"tpot_ms": [1.0], "server_tpot_ms": [math.nan]})))


def test_a_pass_from_a_busy_first_pass_is_settled_by_a_quiet_rerun():
    """A busy first pass proves nothing either way: its passes are settled like its regressions."""
    first = _table(tpot_ms="pass", gsm8k_accuracy_strict="pass")
    unsettled = settle(first, [_attempt(True, tpot_ms="pass")], first_busy=True)
    assert unsettled["verdict"].tolist() == [INCONCLUSIVE, "pass"]  # accuracy needs no quiet host
    assert night_outcome(unsettled) == "inconclusive"
    assert settle(first, [_attempt(tpot_ms="pass")], first_busy=True)["verdict"].tolist() == ["pass", "pass"]
    caught = settle(first, [_attempt(True, tpot_ms="pass"), _attempt(tpot_ms="regressed")], first_busy=True)
    assert caught["verdict"].tolist() == [CONFIRMED, "pass"]
    assert settle(first, [], first_busy=False)["verdict"].tolist() == ["pass", "pass"]


def test_a_busy_first_pass_asks_for_a_rerun_even_when_everything_passed():
    first = _table(tpot_ms="pass")
    assert undecided(first, [], first_busy=True) and not undecided(first, [], first_busy=False)
    assert not undecided(first, [_attempt(tpot_ms="pass")], first_busy=True)
