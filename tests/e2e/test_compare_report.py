"""Two real synthetic runs against SGLang, compared (paired), reported, looked at in a real browser
(headless Chromium, when one is installed), and analysed in the notebook."""

from __future__ import annotations

import math
from pathlib import Path

import nbclient
import nbformat
import pandas as pd
import pytest

from harness.analysis.compare import compare_runs
from harness.analysis.run import Run
from harness.records.rundir import load_manifest
from harness.report.report import build_report
from tests.artifact_checks import paired_change_problems
from tests.bench_report_screenshot import find_browser, ink_share, layout, screenshot
from tests.e2e.conftest import HANG_GUARD_S, only_run_dir, sparkbench

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "analysis.ipynb"
PROMPTS, OUTPUT = 4, 16
LABELS = {"baseline": [], "candidate": ["--label", "candidate <b>run</b>"]}  # the baseline's label is derived


@pytest.fixture(scope="module")
def two_runs(sglang_server, tmp_path_factory) -> list[Path]:
    """The same tiny synthetic workload (seed 0) twice: the second run pairs with the first."""
    dirs = []
    for name in ("baseline", "candidate"):
        results = tmp_path_factory.mktemp(name)
        done = sparkbench("run", "synthetic", "--server", sglang_server.base_url,
                          "--tokenizer", str(sglang_server.model_dir), "--num-prompts", str(PROMPTS),
                          "--input-tokens", "512", "--output-tokens", str(OUTPUT), "--seed", "0",
                          "--results", str(results), "--no-progress", *LABELS[name])
        assert done.returncode == 0, done.stderr
        dirs.append(only_run_dir(results))
    return dirs


def test_paired_comparison_intervals_contain_their_points(two_runs):
    table = compare_runs(two_runs)
    candidate = table[table["run_id"] == two_runs[1].name]
    assert candidate["paired"].all() and (candidate["n"] == PROMPTS).all()
    changes = candidate[candidate["change"].notna()]
    assert "e2e_ms" in set(changes["metric"])  # the client always times a whole request
    # A stream that reached the client in a burst has no client TTFT or TPOT (stream_flagged): a
    # change is absent exactly where a run has no such figure for any request, never made up.
    timed = all(Run.load(run_dir).measured["tpot_ms"].notna().any() for run_dir in two_runs)
    compared = {"decode_throughput_aggregate", "tpot_ms", "ttft_ms"} & set(changes["metric"])
    assert compared == ({"decode_throughput_aggregate", "tpot_ms", "ttft_ms"} if timed else set()), compared
    e2e = changes[changes["metric"] == "e2e_ms"]
    assert (e2e["ci95_low"] <= e2e["change"]).all() and (e2e["change"] <= e2e["ci95_high"]).all()
    # Every change lies in its interval; an interval may be missing only for a metric some request of
    # a run has no figure for (a resample may then hold no timed request), and the throughput that
    # is made from those figures.
    measured = [Run.load(run_dir).measured for run_dir in two_runs]
    untimed = {m for m in ("tpot_ms", "ttft_ms") if any(frame[m].isna().any() for frame in measured)}
    untimed |= {"decode_throughput_aggregate"} if untimed else set()
    assert paired_change_problems(candidate, untimed) == []
    for row in changes.itertuples():
        if row.stat != "length_matched":
            assert math.isclose(row.change, row.value / row.baseline_value - 1, rel_tol=1e-9, abs_tol=1e-12)
    tokens = candidate.set_index(["metric", "stat"]).loc[("completion_tokens", "mean")]
    assert tokens["value"] == OUTPUT and tokens["change"] == 0
    # Without speculation there is no accept length, rather than a made-up 1.0.
    assert pd.isna(candidate.set_index("metric").loc["accept_length_token_weighted", "value"])


def test_report_of_real_runs(two_runs, tmp_path):
    html_path, md_path = build_report(two_runs, tmp_path / "report")
    page = html_path.read_text(encoding="utf-8")
    for run_dir in two_runs:
        assert run_dir.name in page and run_dir.name in md_path.read_text(encoding="utf-8")
    assert [load_manifest(d)["label"] for d in two_runs] == ["sglang c=1", "candidate <b>run</b>"]
    headline = page.split("<h2>Figures</h2>")[0]
    assert "<td>sglang c=1</td><td>1</td>" in headline and "<td>candidate &lt;b&gt;run&lt;/b&gt;</td><td>1</td>" in headline
    # Five run figures, each run's timeline and the published ladder, then the decode rooflines:
    # published and per run. The runs' roofline is drawn only where a run has an achieved bandwidth,
    # which needs a decode time the client could time (no stream flagged held back by a busy host).
    rooflines = [Run.load(run_dir).roofline[0] for run_dir in two_runs]
    figures = 9 + any(r is not None and math.isfinite(r.achieved_gbps) for r in rooflines)
    assert page.count("data:image/png;base64,") == figures
    assert "0.5.23" in page  # the server version from the manifest
    assert len(list((tmp_path / "report" / "plots").rglob("*.svg"))) == figures


def test_the_report_in_a_real_browser_opens_with_the_headline(two_runs, tmp_path):
    browser = find_browser()
    if browser is None:
        pytest.skip("no Chromium on this machine (apt-get install -y chromium)")
    html_path, _ = build_report(two_runs, tmp_path / "report")
    png = screenshot(browser, html_path, tmp_path / "shot.png", 1440, 900)
    assert ink_share(png) > 0.02  # text and tables, not a blank page
    found = layout(browser, html_path, 1440, 900)
    width, fold = found["viewport"]  # the page's own viewport: the window less the browser's frame
    assert width == 1440 and 600 < fold <= 900
    # The key figures are read without scrolling, and nothing runs off the side at desktop width.
    assert 0 < found["headline"]["top"] < found["first_table"]["bottom"] <= fold
    assert found["scroll_width"] <= 1440


def test_notebook_executes_against_the_runs(two_runs, monkeypatch):
    monkeypatch.setenv("SPARKBENCH_RUNS", ":".join(str(d) for d in two_runs))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, kernel_name="python3", timeout=HANG_GUARD_S,
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    streams = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                      for out in cell.outputs)
    assert "paired by prompt_id" in streams and "published-all-three" in streams
    images = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs
              if "image/png" in out.get("data", {})]
    assert len(images) == 9  # the report's six figures, the published ladder's roofline, each run's timeline
