"""The run summary's text pieces, each on its own inputs: how energy, GPU state and the server's
counters are said, the stream and run warnings, the open loop's rate line, the key figures' numbers,
changes and cells, and whether a run shows thinking."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from dataclasses import replace

import pandas as pd
import pytest

from harness.analysis.compare import compare_loaded
from harness.analysis.run import Run
from harness.analysis.tables import (
    NOT_EXPORTED,
    STALE_REASON,
    change_text,
    counter_note,
    figure_text,
    format_repetitions,
    gpu_note,
    key_figure_cell,
    key_figures,
    power_note,
    run_warnings,
    stream_warning,
    thinks,
)
from harness.records.entries import PowerEntry, PowerSensorEntry, SamplerEntry, ServerCounters, TelemetryEntry
from tests.unit.conftest import build_record
from tests.unit.test_report import SYNTHETIC, gsm8k_records, synthetic_records, write_run


def test_energy_is_said_measured_with_its_sensors_or_not_with_every_reason():
    assert power_note(None) == "not measured (the run recorded no power entry)"
    assert power_note(PowerEntry(status="off", reason="--no-power")) == "not measured (--no-power)"
    missing = PowerEntry(status="not measured", not_available=["no NVML", "no RAPL"])
    assert power_note(missing) == "not measured (no NVML; no RAPL)"
    sensors = [PowerSensorEntry(sensor="nvml:0", device="H100", method="NVML energy counter"),
               PowerSensorEntry(sensor="nvml:1", device="H100", method="NVML energy counter")]
    measured = PowerEntry(status="measured", interval_ms=100.0, sensors=sensors, samples=42)
    assert power_note(measured) == "nvml:0 H100, nvml:1 H100: NVML energy counter; every 100 ms, 42 samples"


def test_gpu_state_is_said_once_with_its_count_or_why_not():
    assert gpu_note(None) == "not recorded (a run from before telemetry)"
    measured = TelemetryEntry(device=SamplerEntry(status="measured", samples=12, gpus=[{"index": 0}, {"index": 1}]))
    assert gpu_note(measured) == "measured (2 GPUs, 12 samples)"
    assert gpu_note(TelemetryEntry(device=SamplerEntry(status="measured"))) == "measured (0 GPUs, 0 samples)"
    off = TelemetryEntry(device=SamplerEntry(status="not measured", reason="no NVML"))
    assert gpu_note(off) == "not measured (no NVML)"
    assert gpu_note(TelemetryEntry(device=SamplerEntry(status="off"))) == "off"


def test_server_counters_are_never_shown_as_zero_when_not_exported():
    assert counter_note(ServerCounters()) == NOT_EXPORTED
    counted = ServerCounters(delta={"spec_verify_ct": 30, "completion_tokens": 90}, accept_length=3.0)
    assert counter_note(counted) == "spec verify ct 30, completion tokens 90; accept length 3.000"
    assert counter_note(ServerCounters(delta={"spec_verify_ct": 30})) == "spec verify ct 30"


def summary_of(values: dict[str, float]) -> pd.DataFrame:
    rows = [{"metric": name, "stat": "value", "value": value, "unit": "count"} for name, value in values.items()]
    return pd.DataFrame([*rows, {"metric": "requests_flagged", "stat": "mean", "value": 99.0, "unit": "count"}])


def test_the_stream_warning_counts_the_flagged_requests_of_the_value_rows():
    assert stream_warning(summary_of({"requests": 10.0, "requests_flagged": 0.0})) is None
    warning = stream_warning(summary_of({"requests": 10.0, "requests_flagged": 3.0, "requests_buffered": 3.0}))
    assert warning is not None and "3 of 10" in warning and "buffered 3" in warning
    assert "late" not in warning and "sparse" not in warning  # a flag without a row counted none


@pytest.mark.parametrize(("value", "text"), [(999.4, "999.4"), (1000.0, "1,000"), (-1234.5, "-1,234"),
                                             (0.012344, "0.01234"), (-999.0, "-999")])
def test_figures_keep_four_digits_and_separate_thousands(value, text):
    assert figure_text(value) == text


def change(value: float, kind: str = "relative", low: float = math.nan, high: float = math.nan) -> pd.Series:
    return pd.Series({"change": value, "change_kind": kind, "ci95_low": low, "ci95_high": high})


def test_a_change_reads_in_percent_or_points_with_its_interval():
    assert change_text(change(math.nan)) == ""
    assert change_text(change(0.123)) == "+12.3%"
    assert change_text(change(0.123, low=0.101, high=0.14)) == "+12.3% [+10.1, +14.0]"
    assert change_text(change(-0.02, kind="difference", low=-0.035, high=-0.005)) == "-2.0 pp [-3.5, -0.5]"


def test_a_key_figure_cell_is_its_runs_own_row_or_na():
    rows = pd.DataFrame([
        {"metric": "tpot_ms", "stat": "mean", "value": 12.5, "change": 0.1, "change_kind": "relative",
         "ci95_low": math.nan, "ci95_high": math.nan, "verdict": "worse"},
        {"metric": "tpot_ms", "stat": "p95", "value": 30.0, "change": math.nan, "change_kind": "relative",
         "ci95_low": math.nan, "ci95_high": math.nan, "verdict": ""},
        {"metric": "ttft_ms", "stat": "mean", "value": math.nan, "change": math.nan, "change_kind": "relative",
         "ci95_low": math.nan, "ci95_high": math.nan, "verdict": ""},
    ])
    assert key_figure_cell(rows, "tpot_ms", "mean", figure_text) == {"value": "12.5", "change": "+10.0%",
                                                                      "verdict": "worse"}
    assert key_figure_cell(rows, "tpot_ms", "p95", figure_text) == {"value": "30", "change": "", "verdict": ""}
    na = {"value": "n/a", "change": "", "verdict": ""}
    assert key_figure_cell(rows, "ttft_ms", "mean", figure_text) == na  # measured nothing
    assert key_figure_cell(rows, "e2e_ms", "mean", figure_text) == na  # no row at all


def test_a_run_thinks_when_its_thinking_streamed_apart_or_its_answer_came_later():
    plain = pd.DataFrame({"ttft_ms": [10.0, 12.0], "ttfat_ms": [10.0, 12.0], "reasoning_text": [None, ""]})
    assert not thinks(plain)
    assert thinks(plain.assign(reasoning_text=[None, "let me see"]))
    assert thinks(plain.assign(ttfat_ms=[10.0, 40.0]))
    assert not thinks(plain.assign(ttfat_ms=[9.0, 12.0]))  # an answer token before the first token is no thinking
    assert not thinks(pd.DataFrame({"ttft_ms": [10.0]}))


def test_a_runs_warnings_say_how_it_ended_what_failed_and_what_fidelity_found(tmp_path):
    records = synthetic_records(10.0)
    records[1] = replace(records[1], status="error", error_kind="timeout", error_message="slow")
    records[2] = replace(records[2], status="error", error_kind="timeout", error_message="slow")
    run_dir = write_run(tmp_path, "20260101T000000Z-x", records, SYNTHETIC)
    with_manifest(run_dir, status="failed", error="server died")
    (run_dir / "fidelity.json").write_text(json.dumps({"plain_run": "p", "verdict": "unchanged: 6 identical"}))
    warnings = run_warnings(Run.load(run_dir))
    assert warnings[0] == "status failed: server died"
    assert "2 of 6 requests failed (timeout 2); every figure is of the ok requests" in warnings
    assert warnings[-1] == "speculation fidelity against p: unchanged: 6 identical"
    assert not any("errors_" in w or " 0," in w for w in warnings)


def test_a_complete_run_of_ok_requests_has_no_warning(tmp_path):
    run = Run.load(write_run(tmp_path, "20260101T000000Z-ok", [build_record(seq=i) for i in range(3)], SYNTHETIC))
    assert run_warnings(run) == []


def test_a_skipped_guard_is_a_warning(tmp_path):
    run_dir = write_run(tmp_path, "20260101T000000Z-g", [build_record(seq=i) for i in range(3)], SYNTHETIC)
    with_manifest(run_dir, guard={"skipped": "--no-guard"})
    assert run_warnings(Run.load(run_dir)) == ["configuration guard skipped (--no-guard)"]


def test_key_figures_give_each_run_its_own_cells_and_only_the_columns_its_runs_need(tmp_path):
    base = Run.load(write_run(tmp_path, "20260101T000000Z-plain", synthetic_records(10.0), SYNTHETIC))
    cand = Run.load(write_run(tmp_path, "20260101T000100Z-spec", synthetic_records(8.0, spec=True), SYNTHETIC))
    table = key_figures([base, cand], compare_loaded([base, cand]))
    assert not {"TTFAT mean ms", "response E2E p95 ms", "SLO attainment", "accuracy"} & set(table.columns)
    assert table["requests ok"].tolist() == ["6 of 6", "6 of 6"]
    plain, spec = table["TPOT mean ms"]
    assert (plain["change"], plain["verdict"]) == ("", "")  # the baseline against itself
    assert spec["change"] == "-20.0% [-20.0, -20.0]" and spec["verdict"] == "better"  # 8 ms steps against 10


def with_manifest(run_dir, **fields):
    """The run directory with `fields` set in its manifest, as a later writer leaves it."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps(manifest | fields))
    return run_dir


def test_a_run_that_did_not_finish_says_why_or_that_no_reason_was_recorded(tmp_path):
    records = [build_record(seq=i) for i in range(3)]
    failed = with_manifest(write_run(tmp_path, "20260101T000000Z-f", records, SYNTHETIC), status="failed")
    assert run_warnings(Run.load(failed))[0] == "status failed: no reason recorded"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid whose process has ended: the run it marks `running` is stale
    stale = with_manifest(write_run(tmp_path, "20260101T000100Z-s", records, SYNTHETIC), status="running",
                          error="the writer's last word", hostname=socket.gethostname(), pid=gone.pid)
    assert run_warnings(Run.load(stale))[0] == f"status stale: {STALE_REASON}"


def test_repetitions_are_said_with_their_count_the_first_runs_label_and_no_row_numbers(tmp_path):
    runs = [Run.load(with_manifest(write_run(tmp_path, f"20260101T00000{i}Z-r", synthetic_records(10.0 + i),
                                             SYNTHETIC), label=f"repeat-{i}")) for i in range(3)]
    text = format_repetitions(runs)
    assert text.startswith("\nacross 3 repetitions (repeat-0; 95% interval of the mean, Student t; ")
    header, *rows = [line.split() for line in text.split("\n")[2:]]
    assert header[:3] == ["metric", "stat", "repetitions"]  # no row numbers before them
    tpot = next(row for row in rows if row[:2] == ["tpot_ms", "mean"])
    assert tpot[2:4] == ["3", "14.14"]  # steps of 10, 11 and 12 ms (each request 5% slower), four digits


def test_a_scored_run_alone_has_its_accuracy_among_its_key_figures(tmp_path):
    run = Run.load(write_run(tmp_path, "g", gsm8k_records([True, True, True, False]), {"name": "gsm8k"}))
    (cell,) = key_figures([run], compare_loaded([run]))["accuracy"]
    assert cell == {"value": "75.0%", "change": "", "verdict": ""}
