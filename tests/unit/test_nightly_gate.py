"""The nightly gate on constructed comparison rows: threshold AND interval, McNemar, config."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.errors import SparkbenchError
from harness.nightly.config import DEFAULT_THRESHOLDS, NightlyConfig, load_config
from harness.nightly.gate import append_history, verdicts


def _row(metric, stat, change, low, high, value=1.0, baseline=1.0, p=math.nan, run="cand"):
    return {"run_id": run, "baseline_run_id": "base", "workload": "synthetic", "metric": metric, "stat": stat,
            "value": value, "unit": "u", "baseline_value": baseline, "change": change, "ci95_low": low,
            "ci95_high": high, "p_value": p}


def _verdict(tmp_path, *rows):
    table = verdicts(pd.DataFrame(rows), NightlyConfig(state_dir=tmp_path))
    return dict(zip(table["metric"], table["verdict"]))


def test_throughput_drop_beyond_threshold_with_interval_below_zero_regresses(tmp_path):
    assert _verdict(tmp_path, _row("decode_throughput_aggregate", "value", -0.20, -0.30, -0.10)) == {
        "decode_throughput_aggregate": "regressed"}


def test_a_big_drop_whose_interval_spans_zero_is_noise(tmp_path):
    assert _verdict(tmp_path, _row("decode_throughput_aggregate", "value", -0.20, -0.45, 0.05)) == {
        "decode_throughput_aggregate": "pass"}


def test_a_certain_drop_smaller_than_the_threshold_passes(tmp_path):
    assert _verdict(tmp_path, _row("decode_throughput_aggregate", "value", -0.02, -0.03, -0.01)) == {
        "decode_throughput_aggregate": "pass"}


def test_latency_regresses_upwards(tmp_path):
    verdict = _verdict(tmp_path, _row("tpot_ms", "mean", 0.20, 0.10, 0.30), _row("e2e_ms", "p95", -0.2, -0.3, -0.1))
    assert verdict == {"tpot_ms": "regressed", "e2e_ms": "pass"}


def test_speculation_switched_off_is_a_regression(tmp_path):
    row = _row("accept_length_token_weighted", "value", math.nan, math.nan, math.nan, value=math.nan, baseline=3.2)
    assert _verdict(tmp_path, row) == {"accept_length_token_weighted": "regressed (missing in candidate)"}


def test_accuracy_regresses_only_when_mcnemar_rejects(tmp_path):
    significant = _row("gsm8k_accuracy_strict", "mean", -0.05, -0.08, -0.02, p=0.001)
    assert _verdict(tmp_path, significant) == {"gsm8k_accuracy_strict": "regressed"}
    noise = _row("gsm8k_accuracy_strict", "mean", -0.05, -0.12, 0.02, p=0.3)
    assert _verdict(tmp_path, noise) == {"gsm8k_accuracy_strict": "pass"}


def test_baseline_rows_are_not_judged(tmp_path):
    assert _verdict(tmp_path, _row("tpot_ms", "mean", math.nan, math.nan, math.nan, run="base")) == {}


def test_history_appends_one_row_set_per_night(tmp_path):
    config = NightlyConfig(state_dir=tmp_path)
    comparison = pd.DataFrame([_row("tpot_ms", "mean", 0.0, -0.1, 0.1, run="base"),
                               _row("tpot_ms", "mean", 0.0, -0.1, 0.1)])
    for night in ("n1", "n2"):
        append_history(config, night, comparison, verdicts(comparison, config))
    history = pd.read_csv(config.history_file)
    assert history.groupby("night").size().tolist() == [2, 2]
    assert set(history["role"]) == {"baseline", "candidate"}
    assert history[history["role"] == "candidate"]["verdict"].tolist() == ["pass", "pass"]


def test_config_reads_overrides_and_refuses_unknown_keys(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text("server: http://a\nthresholds: {tpot_ms: 0.2}\n")
    config = load_config(path, server="http://b", profile=None)
    assert config.server == "http://b" and config.thresholds["tpot_ms"] == 0.2
    assert config.thresholds["ttft_ms"] == DEFAULT_THRESHOLDS["ttft_ms"]
    path.write_text("sever: http://typo\n")
    with pytest.raises(SparkbenchError, match="unknown keys sever"):
        load_config(path)
    with pytest.raises(SparkbenchError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
