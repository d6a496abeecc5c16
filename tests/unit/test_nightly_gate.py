"""The nightly gate on constructed comparison rows: threshold AND interval, certified tails,
McNemar with its threshold, config."""

from __future__ import annotations

import math
import subprocess
import sys

import pandas as pd
import pytest

from harness.errors import SparkbenchError
from harness.nightly.config import DEFAULT_THRESHOLDS, NightlyConfig, load_config
from harness.nightly.gate import certified_minimum, pin_baseline, pinned_baseline, verdicts
from harness.nightly.noise import NOISE_NAME, read_noise, write_noise
from tests.fakes.full_disk import filling_at

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`


def _row(metric, stat, change, low, high, value=1.0, baseline=1.0, p=math.nan, run="cand", n=200):
    return {"run_id": run, "baseline_run_id": "base", "workload": "synthetic", "metric": metric, "stat": stat,
            "value": value, "unit": "u", "baseline_value": baseline, "change": change, "ci95_low": low,
            "ci95_high": high, "p_value": p, "n": n}


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
    significant = _row("gsm8k_accuracy_strict", "mean", -0.08, -0.11, -0.05, p=0.001)
    assert _verdict(tmp_path, significant) == {"gsm8k_accuracy_strict": "regressed"}
    noise = _row("gsm8k_accuracy_strict", "mean", -0.08, -0.15, 0.02, p=0.3)
    assert _verdict(tmp_path, noise) == {"gsm8k_accuracy_strict": "pass"}


def test_accuracy_drop_within_its_threshold_passes_however_significant(tmp_path):
    """The published thresholds' 0.05 applies: a 1.97-point drop with p = 6e-6 is not a regression."""
    row = _row("gsm8k_accuracy_strict", "mean", -0.0197, -0.03, -0.01, p=6e-6)
    assert _verdict(tmp_path, row) == {"gsm8k_accuracy_strict": "pass"}


def test_uncertified_p95_is_shown_ungated_and_its_mean_gated_instead(tmp_path):
    rows = [_row("e2e_ms", "p95", 0.64, 0.068, 0.83, n=20), _row("e2e_ms", "mean", 0.30, 0.20, 0.40, n=20),
            _row("e2e_ms", "p95", 0.0, 0.0, 0.0, run="base", n=20)]
    table = verdicts(pd.DataFrame(rows), NightlyConfig(state_dir=tmp_path))
    assert table["stat"].tolist() == ["p95", "mean"]
    assert table["verdict"].tolist() == ["ungated: p95 needs 130 requests, has 20", "regressed"]


def test_certified_p95_is_gated(tmp_path):
    assert certified_minimum(0.95) == 130
    rows = [_row("e2e_ms", "p95", 0.64, 0.068, 0.83, n=130), _row("e2e_ms", "mean", 0.0, -0.1, 0.1, n=130)]
    assert _verdict(tmp_path, *rows) == {"e2e_ms": "regressed"}


def test_the_smaller_run_decides_certification(tmp_path):
    rows = [_row("e2e_ms", "p95", 0.64, 0.068, 0.83, n=200), _row("e2e_ms", "p95", 0, 0, 0, run="base", n=129)]
    assert _verdict(tmp_path, *rows)["e2e_ms"].startswith("ungated")


def test_baseline_rows_are_not_judged(tmp_path):
    assert _verdict(tmp_path, _row("tpot_ms", "mean", math.nan, math.nan, math.nan, run="base")) == {}


def test_config_reads_overrides_and_refuses_unknown_keys(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text("server: http://a\nthresholds: {tpot_ms: 0.2}\n")
    config = load_config(path, server="http://b", profile=None)
    assert config.server == "http://b" and config.thresholds["tpot_ms"] == 0.2
    assert config.thresholds["ttft_ms"] == DEFAULT_THRESHOLDS["ttft_ms"]
    assert config.busy_limits["foreign_cpu_share"] == 0.10 and config.confirmations == 2
    assert "other_cpu_share" not in config.busy_limits  # known, and judged only when given
    path.write_text("sever: http://typo\n")
    with pytest.raises(SparkbenchError, match="unknown keys sever"):
        load_config(path)
    with pytest.raises(SparkbenchError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("text, errors", [
    ("workloads: synthetic\n", ["workloads: Input should be a valid list"]),
    ("thresholds: [1, 2]\nwarmup: x\n", ["thresholds: Input should be a valid dictionary",
                                         "warmup: Input should be a valid integer"]),
    ("workloads:\n  - {name: synthetic, options: {num_promts: 3}}\n", ["synthetic options: unknown keys num_promts"]),
    ("busy_limits: {other_cpu: 0.2}\nconfirmations: 0\n", ["confirmations: Input should be greater than or equal to 1",
                                                            "busy_limits: not host-load figures: other_cpu"]),
])
def test_a_bad_config_is_one_line_per_error_and_exit_2_never_the_regression_code(tmp_path, text, errors):
    path = tmp_path / "n.yaml"
    path.write_text(text)
    result = subprocess.run([sys.executable, "-m", "harness.cli", "nightly", "--config", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == len(errors) and lines[0].startswith("sparkbench nightly: could not run: ")
    for error in errors:  # in the config model's field order
        assert sum(error in line for line in lines) == 1, error
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_mean_over_too_few_requests_is_shown_ungated(tmp_path):
    rows = [_row("tpot_ms", "mean", 0.63, 0.3, 0.9, n=6), _row("ttft_ms", "mean", 0.5, 0.3, 0.9, n=20)]
    assert _verdict(tmp_path, *rows) == {"tpot_ms": "ungated: mean needs 20 requests, has 6", "ttft_ms": "regressed"}
    table = verdicts(pd.DataFrame(rows), NightlyConfig(state_dir=tmp_path, min_requests=4))
    assert table["verdict"].tolist() == ["regressed", "regressed"]


def test_the_threshold_is_the_floor_raised_to_the_measured_noise(tmp_path):
    row = _row("tpot_ms", "mean", 0.12, 0.08, 0.16)
    config = NightlyConfig(state_dir=tmp_path)
    quiet = verdicts(pd.DataFrame([row]), config, {"tpot_ms mean": 0.01})
    assert quiet["threshold"].tolist() == [0.05] and quiet["verdict"].tolist() == ["regressed"]
    noisy = verdicts(pd.DataFrame([row]), config, {"tpot_ms mean": 0.07})
    assert noisy["threshold"].tolist() == [pytest.approx(0.14)] and noisy["verdict"].tolist() == ["pass"]


def test_every_gated_accuracy_counts(tmp_path, monkeypatch):
    import harness.nightly.gate as gate

    monkeypatch.setattr(gate, "ACCURACIES", [("gsm8k_accuracy_strict", "mean"), ("gsm8k_accuracy_flexible", "mean")])
    config = NightlyConfig(state_dir=tmp_path, thresholds={"gsm8k_accuracy_flexible": 0.05})
    rows = [_row("gsm8k_accuracy_strict", "mean", -0.01, -0.02, 0.0, p=0.5),
            _row("gsm8k_accuracy_flexible", "mean", -0.2, -0.3, -0.1, p=0.001)]
    table = gate.verdicts(pd.DataFrame(rows), config)
    assert dict(zip(table["metric"], table["verdict"])) == {"gsm8k_accuracy_strict": "pass",
                                                            "gsm8k_accuracy_flexible": "regressed"}


def test_a_gated_metric_that_compare_never_produces_is_refused_in_one_line():
    from harness.nightly.gate import check_gates_produced

    with pytest.raises(SparkbenchError, match=r"^gated but never compared: ttft_ms p50, tpot_ms p95 \(metric"):
        check_gates_produced([("ttft_ms", "p50", -1), ("tpot_ms", "p95", -1), ("e2e_ms", "p95", -1)], [])
    with pytest.raises(SparkbenchError, match="gsm8k_accuracy_strict value"):
        check_gates_produced([], [("gsm8k_accuracy_strict", "value")])


def test_compare_produces_every_gated_metric_for_every_workload(tmp_path):
    """Each registered workload's comparison, on made-up runs, holds a row for every gated
    (metric, stat) (the mean beside every tail) and, for a scored workload, every gated accuracy."""
    from harness.analysis.compare import compare_runs
    from harness.nightly.gate import ACCURACIES, GATED, TAIL_FALLBACK, TAIL_QUANTILES
    from tests.unit.test_report import gsm8k_records, synthetic_records, write_run
    from workloads.registry import WORKLOADS

    scored = {"gsm8k": gsm8k_records([True, False] * 5)}  # a new scored workload adds its records here
    for name, entry in WORKLOADS.items():
        assert entry.scorer is None or name in scored, f"made-up scored records for {name} are missing"
        records = scored.get(name) or synthetic_records(10.0)
        base = write_run(tmp_path, f"{name}-base", records, {"name": name})
        cand = write_run(tmp_path, f"{name}-cand", records, {"name": name})
        produced = set(zip(*compare_runs([base, cand]).query("run_id != baseline_run_id")[["metric", "stat"]].T.values))
        wanted = {(m, s) for m, s, _ in GATED} | {(m, TAIL_FALLBACK) for m, s, _ in GATED if s in TAIL_QUANTILES}
        if entry.scorer is not None:
            wanted |= {pair for pair in ACCURACIES if pair[0] == entry.scorer.accuracy_metric}
        assert wanted <= produced, name


def test_a_disk_that_fills_while_the_pin_is_saved_keeps_the_last_pin_and_its_noise_whole(tmp_path, monkeypatch):
    """baseline.json and noise.json are saved whole or not at all: the second pin's saves fail half
    written, a one-line error each names the file, and the first pin reads back as it was, with
    nothing left beside it."""
    config = NightlyConfig(state_dir=tmp_path)
    pin_baseline(config, {"synthetic": tmp_path / "night-1"})
    write_noise(tmp_path, {"synthetic": {"decode_tok_s mean": 0.01}})
    saved = sorted(path.name for path in tmp_path.iterdir())
    filling_at(monkeypatch, config.baseline_file.name)
    with pytest.raises(SparkbenchError, match=f"^cannot write {config.baseline_file}: disk full"):
        pin_baseline(config, {"synthetic": tmp_path / "night-2"})
    filling_at(monkeypatch, NOISE_NAME)
    with pytest.raises(SparkbenchError, match="^cannot write .*noise.json: disk full"):
        write_noise(tmp_path, {"synthetic": {"decode_tok_s mean": 0.5}})
    monkeypatch.undo()
    assert pinned_baseline(config) == {"synthetic": str(tmp_path / "night-1")}
    assert read_noise(tmp_path) == {"synthetic": {"decode_tok_s mean": 0.01}}
    assert sorted(path.name for path in tmp_path.iterdir()) == saved
