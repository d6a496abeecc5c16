"""Comparison, figures and report of fake run directories (made-up timestamps, no server)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.compare import compare_runs, format_comparison, length_edges
from harness.analysis.roofline import RooflineInputs
from harness.analysis.run import Run
from harness.records.rundir import SCALE_LABEL
from harness.report.plots import plot_published_ladder, plot_runs
from harness.report.report import build_report, find_run_dirs
from tests.unit.conftest import build_record

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HOSTILE = "<script>alert(1)</script>\x1b[2J\x1b]0;title\x07\x9b31m"  # markup, then terminal escapes
SYNTHETIC = {"name": "synthetic", "seed": 0, "input_tokens": 64, "output_tokens": 8, "salt": 1}


def write_run(root: Path, run_id: str, records: list, workload: dict, scale: str = "as configured") -> Path:
    """A run directory as the runner leaves it: manifest.json and requests.jsonl."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    manifest = {"run_id": run_id, "status": "complete", "scale": scale, "workload": workload,
                "requests_recorded": len(records), "backend": "sglang", "server_url": "http://127.0.0.1:1",
                "server": {"server_info": {"version": "0.5.23<b>", "model_path": "/models/tiny"}}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    lines = [json.dumps(asdict(record) | {"run_id": run_id}) for record in records]
    (run_dir / "requests.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def synthetic_records(step_ms: float, spec: dict | None = None, text: str | None = None) -> list:
    """Six requests of 8 tokens, one chunk per step_ms (request i a little slower than i - 1);
    decode time (first token to [DONE]) is 8 steps."""
    records = []
    for i in range(6):
        gap = step_ms * (1 + 0.05 * i)
        chunks = [(20.0 + gap * k, 1) for k in range(8)]
        meta = {"spec_verify_ct": 3, "spec_accept_length": 8 / 3} if spec else None
        texts = [text] + ["x"] * 7 if text and i == 0 else None
        records.append(build_record(chunks=chunks, end_ms=20.0 + gap * 8, seq=i, meta=meta, texts=texts))
    return records


@pytest.fixture
def two_runs(tmp_path):
    base = write_run(tmp_path / "results", "20260101T000000Z-base", synthetic_records(10.0, text=HOSTILE),
                     SYNTHETIC, scale=SCALE_LABEL)
    cand = write_run(tmp_path / "results", "20260101T000100Z-cand", synthetic_records(8.0, spec=True),
                     SYNTHETIC | {"salt": 2})
    return base, cand


def test_compare_pairs_runs_of_the_same_workload_and_seed(two_runs):
    table = compare_runs(list(two_runs))
    cand = table[table["run_id"] == "20260101T000100Z-cand"].set_index(["metric", "stat"])
    assert cand["paired"].all()
    tput = cand.loc[("decode_throughput_aggregate", "value")]
    # Every request is 1/0.8 times as fast, so the paired change is exact and its interval a point.
    assert tput["change"] == pytest.approx(0.25)
    assert tput["ci95_low"] == pytest.approx(0.25) and tput["ci95_high"] == pytest.approx(0.25)
    assert cand.loc[("decode_throughput_aggregate", "length_matched"), "value"] == pytest.approx(tput["value"])
    assert cand.loc[("accept_length_token_weighted", "value"), "value"] == pytest.approx(8 / 3)
    assert cand["paired"].eq(True).all() and cand["n"].eq(6).all()  # every row says how it was compared
    text = format_comparison(table)
    assert "+25.0%" in text and "[+25.0, +25.0]%" in text
    assert "[20260101T000000Z-base] (baseline, n=6," in text
    assert "[20260101T000100Z-cand] (paired by prompt_id, n=6," in text


def test_the_length_matched_rows_follow_the_aggregate_throughput(two_runs):
    cand = compare_runs(list(two_runs)).query("run_id == '20260101T000100Z-cand'")
    keys = list(zip(cand["metric"], cand["stat"]))
    at = keys.index(("decode_throughput_aggregate", "value"))
    assert keys[at + 1:at + 3] == [("decode_throughput_aggregate", "length_matched"), ("length_match_coverage", "value")]


def test_length_edges_are_each_runs_deciles_and_one_past_the_longest():
    # The deciles of 1..10 sit at 1 + 0.9 k (numpy's linear method): 1, 1.9, ..., 10; then 11.
    edges = length_edges(np.arange(1.0, 11.0), np.array([np.nan]))
    assert edges == pytest.approx([1 + 0.9 * k for k in range(11)] + [11.0])
    assert length_edges(np.array([np.nan]), np.array([])) == [0.0, 1.0]


def test_compare_does_not_pair_different_seeds(two_runs, tmp_path):
    other = write_run(tmp_path / "other", "20260101T000200Z-seed1", synthetic_records(8.0), SYNTHETIC | {"seed": 1})
    table = compare_runs([two_runs[0], other])
    assert not table[table["run_id"] == "20260101T000200Z-seed1"]["paired"].any()


def timed_records(shapes: list[tuple[int, float]]) -> list:
    """One request per (tokens, step_ms): a token every step_ms after a 20 ms TTFT, [DONE] one
    step after the last token, so decode time is tokens * step_ms."""
    return [build_record(chunks=[(20.0 + step * k, 1) for k in range(tokens)], end_ms=20.0 + step * tokens, seq=i)
            for i, (tokens, step) in enumerate(shapes)]


def test_length_matched_throughput_reweights_to_the_baseline_lengths(tmp_path):
    base = write_run(tmp_path, "l-base", timed_records([(8, 8.0)] * 4), SYNTHETIC)
    # Short answers decode fast, long ones slow; the baseline wrote only short answers.
    cand = write_run(tmp_path, "l-cand", timed_records([(8, 5.0), (8, 5.0), (16, 10.0), (16, 10.0)]), SYNTHETIC)
    rows = compare_runs([base, cand]).set_index(["run_id", "metric", "stat"]).loc["l-cand"]
    raw = rows.loc[("decode_throughput_aggregate", "value"), "value"]
    matched = rows.loc[("decode_throughput_aggregate", "length_matched")]
    assert raw == pytest.approx((7 + 7 + 15 + 15) / (0.04 + 0.04 + 0.16 + 0.16))  # 110 tok/s
    assert matched["value"] == pytest.approx(7 / 0.04)  # only the 8-token answers count: 175 tok/s
    assert matched["change"] == pytest.approx(175 / (7 / 0.064) - 1)
    assert rows.loc[("length_match_coverage", "value"), "value"] == 1.0


def test_runs_without_common_lengths_get_no_length_matched_value(tmp_path):
    base = write_run(tmp_path, "s-base", timed_records([(8, 8.0)] * 3), SYNTHETIC)
    cand = write_run(tmp_path, "s-cand", timed_records([(16, 8.0)] * 3), SYNTHETIC | {"output_tokens": 16})
    rows = compare_runs([base, cand]).set_index(["run_id", "metric", "stat"]).loc["s-cand"]
    assert np.isnan(rows.loc[("decode_throughput_aggregate", "length_matched"), "value"])
    assert rows.loc[("length_match_coverage", "value"), "value"] == 0.0
    assert not rows["paired"].any()  # a different output length is a different workload


def gsm8k_records(correct: list[bool]) -> list:
    records = []
    for i, right in enumerate(correct):
        record = build_record(chunks=[(50.0 + 10 * k, 1) for k in range(5)], seq=i,
                              texts=["so ", "#### ", "7" if right else "3", ".", ""])
        record.prompt_id, record.item_json = f"gsm8k-{i}", json.dumps({"gold": "7", "question_index": i})
        records.append(record)
    return records


def test_gsm8k_accuracy_change_with_exact_mcnemar(tmp_path):
    spec = {"name": "gsm8k", "shot_seed": 1234}
    base_flags = [True] * 10 + [False] * 10
    cand_flags = [True] * 9 + [False] + [True] * 6 + [False] * 4  # b = 1, c = 6
    base = write_run(tmp_path, "g-base", gsm8k_records(base_flags), spec)
    cand = write_run(tmp_path, "g-cand", gsm8k_records(cand_flags), spec | {"base_seed": 5})
    row = compare_runs([base, cand]).set_index(["run_id", "metric"]).loc[("g-cand", "gsm8k_accuracy_strict")]
    assert row["change"] == pytest.approx(0.25) and row["change_kind"] == "difference"
    assert row["ci95_low"] < 0.25 < row["ci95_high"]
    assert row["p_value"] == pytest.approx(2 * (1 + 7) / 2**7)  # 2 * P(Binomial(7, 1/2) <= 1)
    assert "+25.0 pp" in format_comparison(compare_runs([base, cand]))  # a difference, in percentage points


def test_every_figure_is_a_valid_png_or_svg(two_runs, tmp_path):
    paths = plot_runs([Run.load(d) for d in two_runs], tmp_path / "plots") + plot_published_ladder(tmp_path / "plots")
    assert {p.suffix for p in paths} == {".png", ".svg"} and len(paths) == 12
    for path in paths:
        data = path.read_bytes()
        assert len(data) > 1000, path
        if path.suffix == ".png":
            assert data.startswith(PNG_MAGIC), path
        else:
            assert ET.fromstring(data).tag.endswith("svg"), path


def test_report_escapes_model_text_and_embeds_everything(two_runs, tmp_path):
    html_path, md_path = build_report(list(two_runs), tmp_path / "report")
    page = html_path.read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script" not in page.lower()
    assert "0.5.23&lt;b&gt;" in page  # server strings are escaped too
    sources = re.findall(r"src='([^']*)'", page)
    # The group's 5 figures and roofline, acceptance by position and along the output (the candidate
    # speculates), speed-up per task, the 2 published ones.
    assert len(sources) == 10 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "Acceptance at each draft position" in page and "Speed-up against the plain baseline" in page
    assert "REDUCED SCALE" in page and "+25.0%" in page
    assert "energy: not measured" in page and "roofline: not computed (no config.json" in page
    markdown = md_path.read_text(encoding="utf-8")
    assert "<script" not in markdown.lower() and "&lt;script&gt;" in markdown
    for text in (page, markdown):  # a model's terminal escapes reach neither file
        assert not {"\x1b", "\x07", "\x9b"} & set(text)
    links = re.findall(r"\]\((plots/[^)]+\.png)\)", markdown)
    assert len(links) == 10 and all((md_path.parent / link).exists() for link in links)


def test_report_shows_each_runs_roofline_with_its_byte_count(two_runs, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 512,
                                  "vocab_size": 1000, "num_attention_heads": 4, "num_key_value_heads": 2}))
    html_path, md_path = build_report(list(two_runs), tmp_path / "report",
                                      inputs=RooflineInputs(model_config=config, peak_gbps=100))
    page = html_path.read_text(encoding="utf-8")
    # The candidate speculates: a verify round is not a plain decode step, so it gets no roofline.
    assert page.count("bytes one decode step reads at batch 1") == 1 and "of 100 GB/s peak" in page
    assert "roofline: not computed (speculative run" in page
    assert (tmp_path / "report" / "plots" / "1-synthetic" / "run_roofline.png").exists()
    assert "run_roofline.png" in md_path.read_text(encoding="utf-8")


def test_find_run_dirs_lists_runs_in_start_order(two_runs):
    assert find_run_dirs(two_runs[0].parent) == list(two_runs)
    assert np.all([(d / "manifest.json").exists() for d in find_run_dirs(two_runs[0].parent)])


def test_report_embeds_extra_images(two_runs, tmp_path):
    extra = plot_runs([Run.load(two_runs[0])], tmp_path / "elsewhere")[0]
    html_path, md_path = build_report(list(two_runs), tmp_path / "report", extra_images=[extra])
    assert html_path.read_text(encoding="utf-8").count("data:image/png;base64,") == 11
    assert "](../elsewhere/decode_throughput.png)" in md_path.read_text(encoding="utf-8")


def test_a_run_with_buffered_streams_warns_in_the_summary_and_the_report(tmp_path):
    from harness.analysis.tables import format_run_summary

    records = [build_record(chunks=[(20.0 + 3.0 * k, 1) for k in range(32)], seq=i) for i in range(3)]
    records.append(build_record(chunks=[(120.0, 32)], seq=3))  # the whole answer in one chunk
    run_dir = write_run(tmp_path / "results", "20260101T000000Z-buffered", records, SYNTHETIC)
    warning = "1 of 4 requests were not seen streaming their decode (buffered 1, sparse 1)"
    assert warning in format_run_summary(Run.load(run_dir))
    html_path, md_path = build_report([run_dir], tmp_path / "report")
    assert warning in html_path.read_text() and warning in md_path.read_text()
