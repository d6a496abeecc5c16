"""The report opens with the headline: per workload shape, the key figures of every run with
their changes and verdicts; runs of other workloads or shapes are never compared, and say why."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from harness.analysis.compare import verdict
from harness.analysis.run import Run
from harness.analysis.shapes import compare_by_shape, format_groups
from harness.report.report import build_report
from tests.unit.test_report import SYNTHETIC, gsm8k_records, synthetic_records, write_run


def _label(run_dir, **fields) -> None:
    path = run_dir / "manifest.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | fields))


@pytest.fixture
def mixed_runs(tmp_path):
    """A baseline and a faster candidate of one synthetic shape, a longer synthetic run, a GSM8K run."""
    root = tmp_path / "results"
    base = write_run(root, "r1-base", synthetic_records(10.0), SYNTHETIC)
    cand = write_run(root, "r2-cand", synthetic_records(8.0, spec=True), SYNTHETIC | {"salt": 2, "seed": 7})
    longer = write_run(root, "r3-long", synthetic_records(8.0), SYNTHETIC | {"output_tokens": 16})
    gsm8k = write_run(root, "r4-gsm8k", gsm8k_records([True, False, True]), {"name": "gsm8k", "shot_seed": 1234})
    _label(base, label="baseline", options={"concurrency": 1}, profile={"name": "spark-baseline"})
    _label(cand, options={"concurrency": 16}, profile={"name": "spark-mtp"})
    return [base, cand, longer, gsm8k]


def test_runs_are_compared_only_within_their_workload_and_shape(mixed_runs):
    groups = compare_by_shape([Run.load(d) for d in mixed_runs])
    assert [[r.run_id for r in g.runs] for g in groups] == [["r1-base", "r2-cand"], ["r3-long"], ["r4-gsm8k"]]
    assert [g.baseline.run_id for g in groups] == ["r1-base", "r3-long", "r4-gsm8k"]
    assert groups[0].apart == ""
    assert groups[1].apart.endswith("different shape (output_tokens)")
    assert groups[2].apart.endswith("different workload (gsm8k, baseline synthetic)")
    assert set(groups[0].comparison["run_id"]) == {"r1-base", "r2-cand"}
    assert "not compared with baseline · c=1 · complete" in format_groups(groups)


def test_the_page_opens_with_the_key_figures_then_figures_then_collapsed_details(mixed_runs, tmp_path):
    html_path, md_path = build_report(mixed_runs, tmp_path / "report")
    page = html_path.read_text(encoding="utf-8")
    headline, figures, details = (page.index(s) for s in ("id='headline'", "<h2>Figures</h2>", "<h2>Details</h2>"))
    assert headline < figures < details and page.count("<details>") == 5
    head = page[headline:figures]
    # The candidate's throughput is 1/0.8 of the baseline's for every request (unpaired: another
    # seed draws other prompts of the same shape): a clear gain.
    assert re.search(r"spark-mtp c=16</td><td>16</td><td>as configured</td><td>complete</td>", head)
    assert re.search(r"97.22<span class='chg better'>\+25.0% \[\+\d+\.\d, \+\d+\.\d\]</span>"
                     r"<span class='chg better'>better</span>", head)
    assert "accept length" in head and "synthetic: 64 in / 8 out, sampling not recorded" in head
    assert head.count("<table class='key'>") == 3 and "accuracy" in head  # GSM8K's own group
    assert "This group is not compared with baseline · c=1 · complete: different workload" in head
    markdown = md_path.read_text(encoding="utf-8")
    assert markdown.index("97.22 (+25.0% \\[+") < markdown.index("## Figures")


def test_failed_requests_and_a_reduced_scale_are_stated_in_the_headline(tmp_path):
    records = synthetic_records(10.0)
    records[2].status, records[2].error_kind, records[2].error_message = "error", "timeout", "no token for 900 s"
    run_dir = write_run(tmp_path, "r-failed", records, SYNTHETIC, scale="REDUCED SCALE: embedded CPU test bed")
    _label(run_dir, status="interrupted", error="server unreachable")
    html_path, _ = build_report([run_dir], tmp_path / "report")
    head = html_path.read_text(encoding="utf-8").split("<h2>Figures</h2>")[0]
    assert "1 of 6 requests failed (timeout 1)" in head and "status interrupted: server unreachable" in head
    assert "<td>REDUCED SCALE</td><td>interrupted</td><td>5 of 6</td>" in head


@pytest.mark.parametrize("metric, change, low, high, p, kind, expected", [
    ("tpot_ms", -0.2, -0.3, -0.1, None, "relative", "better"),
    ("tpot_ms", 0.2, 0.1, 0.3, None, "relative", "worse"),
    ("decode_throughput_aggregate", 0.1, -0.05, 0.2, None, "relative", "no clear change"),
    ("decode_throughput_aggregate", 0.1, None, None, None, "relative", "no interval"),
    ("completion_tokens", 0.5, 0.4, 0.6, None, "relative", "higher"),
    ("gsm8k_accuracy_strict", -0.1, -0.2, 0.0, 0.01, "difference", "worse"),
    ("gsm8k_accuracy_strict", 0.1, 0.0, 0.2, 0.3, "difference", "no clear change"),
    ("tpot_ms", None, None, None, None, "relative", ""),
])
def test_a_verdict_needs_an_interval_that_excludes_zero(metric, change, low, high, p, kind, expected):
    row = pd.Series({"metric": metric, "change": change, "ci95_low": low, "ci95_high": high, "p_value": p,
                     "change_kind": kind}, dtype=object)
    assert verdict(row) == expected


def test_runs_sharing_a_label_are_numbered_and_a_run_without_ok_requests_is_no_baseline(tmp_path):
    failed = synthetic_records(10.0)[:1]
    failed[0].status, failed[0].error_kind = "error", "disconnected"
    dirs = [write_run(tmp_path, "r1", failed, SYNTHETIC), write_run(tmp_path, "r2", synthetic_records(10.0), SYNTHETIC),
            write_run(tmp_path, "r3", synthetic_records(8.0), SYNTHETIC)]
    [group] = compare_by_shape([Run.load(d) for d in dirs])
    assert [run.name for run in group.runs] == ["sglang #1", "sglang #2", "sglang #3"]
    assert group.baseline.run_id == "r2"
    assert group.comparison.set_index(["run_id", "metric", "stat"]).loc[("r3", "tpot_ms", "mean"), "verdict"] == "better"


def test_a_reasoning_run_shows_the_time_to_first_answer_token_beside_ttft(tmp_path):
    plain = write_run(tmp_path, "r-plain", synthetic_records(10.0), SYNTHETIC)
    thinking = synthetic_records(10.0)
    for record in thinking:  # the answer's text arrives with the last token, after the thinking
        record.reasoning_text = "hm"
        record.text_ns, record.text_chars = [record.last_token_ns], [len(record.output_text)]
    think_dir = write_run(tmp_path, "r-think", thinking, SYNTHETIC)
    heads = [build_report(runs, tmp_path / name)[0].read_text(encoding="utf-8").split("<h2>Figures</h2>")[0]
             for name, runs in (("plain", [plain]), ("both", [plain, think_dir]))]
    assert "TTFT mean ms" in heads[0] and "TTFAT mean ms" not in heads[0]
    assert "TTFT mean ms" in heads[1] and "TTFAT mean ms" in heads[1]
