"""Repeated runs: the repetition group, the across-repetition interval beside the within-run
bootstrap, and comparisons judged by the repetitions where both sides have them."""

from __future__ import annotations

import json
from contextlib import nullcontext

import numpy as np
import pytest
from scipy.stats import ttest_ind

from harness import session
from harness.analysis.compare import compare_loaded
from harness.analysis.repeats import compare_repeated, repeat_entry, repetition_table, repetitions
from harness.analysis.run import Run
from harness.analysis.stats import mean_interval, welch_relative_change
from harness.request import RunRequest
from harness.run.target import Target
from tests.unit.test_report import SYNTHETIC, synthetic_records, write_run
from tests.unit.test_runner import ListWorkload, ScriptedBackend
from workloads import Plan
from workloads.synthetic import SyntheticConfig

DECODE = ("decode_throughput_aggregate", "value")


def repeated(root, name, steps):
    """A repetition group `name`: one run per decode step (ms per token), each with its repeat entry."""
    paths = []
    for index, step in enumerate(steps, 1):
        path = write_run(root, f"2026010{len(paths)}T00000{index}Z-{name}-{index}", synthetic_records(step), SYNTHETIC)
        manifest = json.loads((path / "manifest.json").read_text())
        manifest["repeat"] = repeat_entry(f"{name}-group", index, len(steps))
        (path / "manifest.json").write_text(json.dumps(manifest))
        paths.append(path)
    return [Run.load(p) for p in paths]


def test_mean_interval_is_the_student_t_interval():
    mean, low, high = mean_interval(np.array([1.0, 2.0, 3.0]))
    assert mean == 2.0 and (high - low) / 2 == pytest.approx(4.302653 / np.sqrt(3), rel=1e-6)
    assert np.isnan(mean_interval(np.array([5.0]))[1])


def test_welch_change_matches_scipys_interval_of_the_difference():
    base, cand = np.array([100.0, 104.0, 97.0, 101.0]), np.array([108.0, 103.0, 111.0])
    change, low, high = welch_relative_change(base, cand)
    diff = ttest_ind(cand, base, equal_var=False).confidence_interval(0.95)
    assert change == pytest.approx(cand.mean() / base.mean() - 1)
    assert (low, high) == pytest.approx((diff.low / base.mean(), diff.high / base.mean()))
    assert np.isnan(welch_relative_change(base[:1], cand)[1])


def test_the_group_is_found_beside_each_repetition_in_order(tmp_path):
    runs = repeated(tmp_path, "a", [10.0, 11.0, 12.0])
    assert [r.run_id for r in repetitions(runs[1])] == [r.run_id for r in runs]
    single = Run.load(write_run(tmp_path, "20260201T000000Z-single", synthetic_records(10.0), SYNTHETIC))
    assert repetitions(single) == [single]


def test_an_unreadable_manifest_among_the_repetitions_is_passed_over(tmp_path):
    runs = repeated(tmp_path, "a", [10.0, 11.0, 12.0])
    broken = tmp_path / "20260100T000001Z-b"  # sorts between the first repetition and the second
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json", encoding="utf-8")
    assert [r.run_id for r in repetitions(runs[0])] == [r.run_id for r in runs]


def test_the_table_sets_the_spread_across_repetitions_beside_the_within_run_bootstrap(tmp_path):
    runs = repeated(tmp_path, "a", [10.0, 11.0, 12.0])
    row = repetition_table(runs).set_index(["metric", "stat"]).loc[DECODE]
    values = [r.speed.set_index(["metric", "stat"]).loc[DECODE, "value"] for r in runs]
    assert row["repetitions"] == 3 and row["mean"] == pytest.approx(np.mean(values))
    assert row["sd"] == pytest.approx(np.std(values, ddof=1))
    assert row["ci95_low"] < row["mean"] < row["ci95_high"]
    assert row["across_halfwidth_rel"] > 0 and row["within_halfwidth_rel"] > 0


def test_a_change_inside_the_run_to_run_spread_is_not_called(tmp_path):
    base = repeated(tmp_path, "base", [10.0, 7.0, 13.0])
    cand = repeated(tmp_path, "cand", [9.0, 6.5, 12.0])
    plain = compare_loaded([base[0], cand[0]], base[0].run_id).set_index(["run_id", "metric", "stat"])
    table = compare_repeated([base[0], cand[0]], base[0].run_id).set_index(["run_id", "metric", "stat"])
    row = table.loc[(cand[0].run_id, *DECODE)]
    # One repetition against one: the bootstrap over requests calls the +11% clear ...
    assert plain.loc[(cand[0].run_id, *DECODE), "verdict"] == "better"
    # ... the three repetitions of each say the run-to-run spread is wider than the change.
    assert row["interval"] == "repetitions 3 vs 3" and row["verdict"] == "no clear change"
    expected = welch_relative_change(*[np.array([r.speed.set_index(["metric", "stat"]).loc[DECODE, "value"]
                                                 for r in group]) for group in (base, cand)])
    assert (row["change"], row["ci95_low"], row["ci95_high"]) == pytest.approx(expected)


def test_runs_without_repetitions_keep_the_bootstrap(tmp_path):
    base = Run.load(write_run(tmp_path, "20260301T000000Z-b", synthetic_records(10.0), SYNTHETIC))
    cand = Run.load(write_run(tmp_path, "20260301T000001Z-c", synthetic_records(8.0), SYNTHETIC))
    table = compare_repeated([base, cand], base.run_id)
    assert set(table["interval"]) == {"bootstrap"}
    assert table.drop(columns="interval").equals(compare_loaded([base, cand], base.run_id))


def test_repeat_runs_the_request_set_n_times_on_one_server_each_a_run_of_its_own(tmp_path, monkeypatch):

    opened = []
    monkeypatch.setattr(session, "open_target",
                        lambda spec, workload=None: opened.append(spec) or nullcontext(Target("http://x")))
    monkeypatch.setattr(session, "backend_for", lambda *args, **kwargs: ScriptedBackend())
    monkeypatch.setattr(session, "plan", lambda *args: Plan(SyntheticConfig(), lambda snapshot: ListWorkload(3)))
    request = RunRequest(workload={"name": "synthetic", "options": {}}, results=tmp_path, repeat=3,
                         options={"warmup": 0, "show_progress": False, "power_sample_ms": 0, "telemetry": False})
    runs = session.run_repeated(request)
    assert len(opened) == 1 and len({run.path for run in runs}) == 3
    assert [run.manifest["repeat"]["index"] for run in runs] == [1, 2, 3]
    assert [len(run.requests) for run in runs] == [3, 3, 3]
    assert [r.run_id for r in repetitions(runs[2])] == [r.run_id for r in runs]


def test_a_resumed_run_is_never_repeated():
    with pytest.raises(ValueError, match="--resume continues one run"):
        RunRequest(repeat=2, resume="results/x")


def test_a_candidate_whose_id_sorts_before_the_baselines_gets_the_repetitions_too(tmp_path):
    base = repeated(tmp_path, "late", [10.0, 7.0, 13.0])
    cand = repeated(tmp_path, "early", [9.0, 6.5, 12.0])  # "early" sorts before "late"
    table = compare_repeated([base[0], cand[0]], base[0].run_id).set_index(["run_id", "metric", "stat"])
    assert table.loc[(cand[0].run_id, *DECODE), "interval"] == "repetitions 3 vs 3"


def test_the_half_width_is_a_fraction_of_the_point_whatever_its_sign():
    from harness.analysis.repeats import _halfwidth_rel

    assert _halfwidth_rel(10.0, 8.0, 13.0) == 0.25 and _halfwidth_rel(-10.0, -13.0, -8.0) == 0.25
    assert np.isnan(_halfwidth_rel(0.0, -1.0, 1.0)) and np.isnan(_halfwidth_rel(5.0, np.nan, np.nan))


def test_two_repetitions_each_are_enough_for_the_spread_and_the_mean_is_the_value(tmp_path):
    base = repeated(tmp_path, "base", [10.0, 12.0])
    cand = repeated(tmp_path, "cand", [8.0, 9.0])
    table = compare_repeated([base[0], cand[0]], base[0].run_id).set_index(["run_id", "metric", "stat"])
    row = table.loc[(cand[0].run_id, *DECODE)]
    values = [r.speed.set_index(["metric", "stat"]).loc[DECODE, "value"] for r in cand]
    assert row["interval"] == "repetitions 2 vs 2" and row["value"] == pytest.approx(np.mean(values))
    assert repetition_table(cand).set_index(["metric", "stat"]).loc[DECODE, "sd"] == pytest.approx(
        np.std(values, ddof=1))
